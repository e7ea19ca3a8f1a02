"""partout: partition Arrow data by key, zero-copy.

Any object exporting the Arrow PyCapsule interface (``__arrow_c_array__`` or
``__arrow_c_stream__``) is accepted as data: a pyarrow Table, RecordBatch or
RecordBatchReader, a polars DataFrame, a DuckDB relation. A stream is read batch by batch,
never collected first, and the GIL is released while partout works.

>>> import pyarrow as pa, partout
>>> table = pa.table({"k": [1, 2, 3, 4], "v": ["a", "b", "c", "d"]})
>>> parts = partout.partition(table, 2, by="k")
>>> sum(t.num_rows for t in parts)
4
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable, Literal, Mapping, Sequence, overload

from . import _partout, errors
from .errors import (
    CorruptInputError,
    InvalidArgumentError,
    PartoutError,
    PartoutIOError,
    SchemaMismatchError,
    UnsupportedTypeError,
)

if TYPE_CHECKING:
    import pyarrow

__version__: str = _partout.__version__

Scheme = Literal["hash", "spark", "round_robin", "range"]


@overload
def partition(
    data: Any,
    n: int,
    *,
    by: str | Sequence[str] | None = ...,
    scheme: Scheme = ...,
    as_dict: Literal[False] = ...,
    threads: int | None = ...,
) -> list[pyarrow.Table]: ...
@overload
def partition(
    data: Any,
    n: int,
    *,
    by: str | Sequence[str] | None = ...,
    scheme: Scheme = ...,
    as_dict: Literal[True],
    threads: int | None = ...,
) -> dict[int, pyarrow.Table]: ...
def partition(
    data: Any,
    n: int,
    *,
    by: str | Sequence[str] | None = None,
    scheme: Scheme = "hash",
    as_dict: bool = False,
    threads: int | None = None,
) -> list[pyarrow.Table] | dict[int, pyarrow.Table]:
    """Split ``data`` into ``n`` tables by the destination of each row.

    ``scheme``: ``"hash"`` (partout's fast hash of the ``by`` columns), ``"spark"`` (Spark's
    Murmur3 ``pmod(hash(by), n)``: Spark's bucket ids), ``"round_robin"`` (rows dealt in
    turn; no ``by``) or ``"range"`` (key ranges, ascending, split points sampled from the
    first batch). Rows keep their input order within a destination. The rows are laid out
    on ``threads`` threads (default: one per core), the GIL released.

    Returns ``n`` tables, empty ones included, or with ``as_dict=True`` a dict from
    destination to table without the empty ones (as polars' ``partition_by`` and Ray do).
    The tables are zero-copy slices of the batches partout laid out by destination.
    """
    tables = _partout.partition(data, n, by=by, scheme=scheme, threads=threads)
    if as_dict:
        return {p: t for p, t in enumerate(tables) if t.num_rows > 0}
    return tables


def partition_ids(
    data: Any,
    n: int,
    *,
    by: str | Sequence[str] | None = None,
    scheme: Scheme = "hash",
) -> pyarrow.UInt32Array:
    """Each row's destination (``0 <= id < n``) under ``scheme``, in input order."""
    return _partout.partition_ids(data, n, by=by, scheme=scheme)


def repartition(
    inputs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    output: str | os.PathLike[str],
    n: int | None = None,
    *,
    by: str | Sequence[str] | None = None,
    scheme: Scheme = "hash",
    format: Literal["parquet", "ipc", "presto"] = "parquet",
    compression: str | None = None,
    layout: Literal["files", "shuffle"] = "files",
    threads: int | None = None,
    memory_limit: int | str | None = None,
    overwrite: bool = False,
    mode: Literal["error", "overwrite", "append", "overwrite-partitions"] = "error",
    progress: Callable[[int, int | None], object] | None = None,
    partition_by: str | Sequence[str] | None = None,
    max_partitions: int | None = None,
    keep_partition_columns: bool = False,
    storage_options: Mapping[str, str] | None = None,
    row_group_rows: int | None = None,
    parquet_options: Mapping[str, Any] | None = None,
    file_statistics: bool = False,
    max_rows_per_file: int | None = None,
    max_bytes_per_file: int | str | None = None,
    sort_by: str | Sequence[str] | None = None,
    file_name: str | None = None,
) -> dict[str, Any]:
    """The ``partout repartition`` job: every Parquet, Arrow IPC and CSV file of ``inputs``
    (files or directories) into ``n`` destinations under ``output``, in parallel, within
    ``memory_limit`` (bytes, or a size such as ``"256MiB"``; default 256 MiB).

    ``compression``: ``"none"``, ``"snappy"`` (Parquet), ``"lz4"``, ``"zstd"`` (level 3) or
    ``"zstd:LEVEL"`` (Parquet: 1 to 22; IPC: negative levels too, faster).
    ``format``: Parquet files (Snappy unless ``compression`` says otherwise), Arrow IPC
    streams or Presto pages; ``layout="shuffle"`` writes one data file and index per worker
    instead of a file per destination (IPC and Presto). Returns the manifest
    (``_manifest.json``) as a dict. The GIL is released while it runs; Ctrl-C stops it and
    leaves no output (the output is written in a hidden directory renamed into place at the
    end). ``progress``, if given, is called about every 50 ms and at the end with the rows
    partitioned so far and the inputs' rows (``None`` when their metadata does not tell); an
    exception it raises stops the job the same way.

    ``partition_by`` (a column or several) partitions by value instead: a directory per
    distinct value in the Hive layout (``output/col=value/part-00000.parquet``), the columns
    left out of the files unless ``keep_partition_columns``; ``n`` (default 1) is then the
    buckets per value, by ``by``, and ``max_partitions`` (default 1000) the most values, past
    which the job fails and leaves no output.

    ``mode`` says what becomes of an output already at ``output``: ``"error"`` (refused; the
    default), ``"overwrite"`` (replaced once the run has committed; ``overwrite=True`` says the
    same), ``"append"`` (the run's files added beside those of the partout output there, named
    with the run's id, each destination's after its old ones, the manifests merged; the run
    must be like the output there: format, compression, scheme, keys, partition columns) or
    ``"overwrite-partitions"`` (with ``partition_by``: the value directories the run writes
    replace the old ones, the others are kept). Locally the new output is swapped in at once,
    so a reader, or a run killed at any moment, sees the old output or the new one whole.

    ``output`` may be an object store's prefix (``"s3://bucket/prefix"``, ``"gs://…"``,
    ``"az://…"``, ``"abfss://…"``): the output is staged on local disk, then uploaded, the
    manifest last, then ``_SUCCESS``. The client reads the environment as the cloud's own
    tools do (``AWS_ACCESS_KEY_ID``, ``AWS_REGION``, ``AWS_ENDPOINT_URL``, …) and then
    ``storage_options`` (object_store's keys: ``{"aws_endpoint": …, "aws_allow_http":
    "true"}``, as Polars spells them).

    Parquet files take ``row_group_rows`` (most rows a row group holds; default 1Mi, the
    memory limit may end one sooner) and ``parquet_options``, the writer's settings, each
    checked before anything is written: ``{"data_page_size": "1MiB", "dictionary": False,
    "dictionary.COL": True, "statistics": "none"|"chunk"|"page", "statistics.COL": …,
    "bloom_filter": ["COL", …], "bloom_filter_fpp": 0.01, "bloom_filter_ndv": 100_000,
    "writer_version": "2.0"}``. ``file_statistics=True`` records each file's column
    statistics in the manifest (see :func:`file_statistics`; for Arrow IPC files, computed as
    they are written).

    ``max_rows_per_file`` and ``max_bytes_per_file`` (bytes, or a size such as ``"64MiB"``;
    approximate: a file ends at the first row group past it) roll a destination's file over
    to its next, numbered before the extension (``part-00003-00001.parquet``); each
    destination's ``files`` in the manifest lists them in order, with their rows and bytes.

    ``sort_by`` orders the rows within each file: ``"l_shipdate, l_orderkey DESC"``, or a list
    of keys, each ``"COL [ASC|DESC] [NULLS FIRST|NULLS LAST]"`` (ascending, nulls last by
    default; rows with equal keys in no particular order). Sorted within ``memory_limit``,
    spilling sorted runs to disk; Parquet files say so in their row groups'
    ``sorting_columns``. For Parquet and Arrow IPC files (IPC output is then IPC files,
    ``.arrow``); refused for Presto pages and the shuffle layout.

    ``file_name`` names each file after a pattern, the extension added: ``{dest}`` (the
    destination's number, or its bucket within a Hive directory), ``{part}`` (the file's number
    among its destination's), ``{uuid}`` (random, one a file), ``{run}`` (the run's id), as
    ``"orders-{dest}-{part}"``. A pattern that could give two files one name is refused before
    anything is written: ``{dest}`` with several destinations a directory, ``{part}`` rolling
    over, ``{run}`` (or ``{uuid}``) appending, replacing partitions or writing to a store.
    """
    return _partout.repartition(
        inputs,
        output,
        n,
        by=by,
        scheme=scheme,
        format=format,
        compression=compression,
        layout=layout,
        threads=threads,
        memory_limit=memory_limit,
        overwrite=overwrite,
        mode=mode,
        progress=progress,
        partition_by=partition_by,
        max_partitions=max_partitions,
        keep_partition_columns=keep_partition_columns,
        storage_options=storage_options,
        row_group_rows=row_group_rows,
        parquet_options=parquet_options,
        file_statistics=file_statistics,
        max_rows_per_file=max_rows_per_file,
        max_bytes_per_file=max_bytes_per_file,
        sort_by=sort_by,
        file_name=file_name,
    )


def write_dataset(
    data: Any,
    output: str | os.PathLike[str],
    n: int | None = None,
    *,
    partition_by: str | Sequence[str] | None = None,
    by: str | Sequence[str] | None = None,
    scheme: Literal["hash", "spark", "round_robin"] = "hash",
    format: Literal["parquet", "ipc", "presto"] = "parquet",
    compression: str | None = None,
    threads: int | None = None,
    memory_limit: int | str | None = None,
    overwrite: bool = False,
    mode: Literal["error", "overwrite", "append", "overwrite-partitions"] = "error",
    progress: Callable[[int, int | None], object] | None = None,
    max_partitions: int | None = None,
    keep_partition_columns: bool = False,
    storage_options: Mapping[str, str] | None = None,
    row_group_rows: int | None = None,
    parquet_options: Mapping[str, Any] | None = None,
    file_statistics: bool = False,
    max_rows_per_file: int | None = None,
    max_bytes_per_file: int | str | None = None,
    sort_by: str | Sequence[str] | None = None,
    file_name: str | None = None,
) -> dict[str, Any]:
    """Writes ``data`` (anything exporting the Arrow PyCapsule interface: a pyarrow Table or
    RecordBatchReader, a polars DataFrame, a DuckDB relation) as a dataset under ``output``:
    with ``partition_by``, a directory per distinct value in the Hive layout
    (``output/col=value/part-00000.parquet``, ``.arrow`` with ``format="ipc"``); otherwise
    ``n`` files by ``scheme`` on ``by``. The options are :func:`repartition`'s; the job's
    workers read the stream batch by batch, never collecting it, within ``memory_limit``.
    Returns the manifest as a dict; on failure (or Ctrl-C) nothing is left under
    ``output``.

    >>> import pyarrow as pa, partout, tempfile, os
    >>> table = pa.table({"year": [2023, 2024, 2024], "v": ["a", "b", "c"]})
    >>> out = os.path.join(tempfile.mkdtemp(), "ds")
    >>> partout.write_dataset(table, out, partition_by="year")["partitions"]
    2
    """
    return _partout.write_dataset(
        data,
        output,
        n,
        partition_by=partition_by,
        by=by,
        scheme=scheme,
        format=format,
        compression=compression,
        threads=threads,
        memory_limit=memory_limit,
        overwrite=overwrite,
        mode=mode,
        progress=progress,
        max_partitions=max_partitions,
        keep_partition_columns=keep_partition_columns,
        storage_options=storage_options,
        row_group_rows=row_group_rows,
        parquet_options=parquet_options,
        file_statistics=file_statistics,
        max_rows_per_file=max_rows_per_file,
        max_bytes_per_file=max_bytes_per_file,
        sort_by=sort_by,
        file_name=file_name,
    )


def read(
    path: str | os.PathLike[str],
    *,
    schema: Any = None,
    destination: int | None = None,
    storage_options: dict[str, str] | None = None,
) -> pyarrow.Table:
    """One of partout's outputs as a table: an Arrow IPC stream file (``.arrows``); a file of
    Presto pages (``.presto``) given the ``schema`` it was written with (anything exporting
    ``__arrow_c_schema__``, such as a ``pyarrow.Schema``); or, given ``destination``, that
    destination's rows of a finished ``repartition`` output of Arrow IPC or Presto pages, in
    either layout (read through its manifest; Presto pages need ``schema``), in a local
    directory or an object store (``"s3://bucket/out"``, with ``storage_options`` as
    ``repartition`` takes them)."""
    return _partout.read(path, schema=schema, destination=destination, storage_options=storage_options)


def file_statistics(manifest: Mapping[str, Any]) -> pyarrow.Table:
    """What each file of a run holds, column by column, as a table: a row per file and column
    (a destination has several files when they roll over) with ``destination``, ``file``, the
    file's ``rows`` and ``bytes``, its ``partition_values`` (a map of each partition column to
    its value, from the Hive directory; empty partitioning by hash), ``column``, ``min``,
    ``max`` (as Arrow shows them; null where the file holds no value of the column, or
    statistics were not written) and ``null_count`` — from ``manifest`` (what ``repartition``
    and ``write_dataset`` return with ``file_statistics=True``), which partout filled from the
    footers of the Parquet files it wrote, or as it wrote Arrow IPC files.

    >>> import pyarrow as pa, partout, tempfile, os
    >>> table = pa.table({"year": [2023, 2024, 2024], "v": ["a", "b", "c"]})
    >>> out = os.path.join(tempfile.mkdtemp(), "ds")
    >>> manifest = partout.write_dataset(table, out, partition_by="year", file_statistics=True)
    >>> stats = partout.file_statistics(manifest).sort_by("file")
    >>> stats.select(["file", "column", "min", "max"]).to_pylist()[1]
    {'file': 'year=2024/part-00000.parquet', 'column': 'v', 'min': 'b', 'max': 'c'}
    """
    import pyarrow as pa
    from urllib.parse import unquote

    def partition_values(name):
        # The Hive directories' `col=value` segments, escaped as Hive escapes them; the null
        # value's directory is Hive's default partition.
        values = []
        for segment in name.split("/")[:-1]:
            column, _, value = segment.partition("=")
            value = None if value == "__HIVE_DEFAULT_PARTITION__" else unquote(value)
            values.append((unquote(column), value))
        return values

    rows = [
        {"destination": entry["destination"], "file": file["name"], "rows": file["rows"],
         "bytes": file["bytes"], "partition_values": partition_values(file["name"]),
         "column": column["column"], "min": column.get("min"), "max": column.get("max"),
         "null_count": column.get("null_count")}
        for entry in manifest["destinations"]
        for file in entry.get("files") or []
        for column in file.get("columns") or []
    ]
    schema = pa.schema([("destination", pa.uint32()), ("file", pa.string()), ("rows", pa.uint64()),
                        ("bytes", pa.uint64()),
                        ("partition_values", pa.map_(pa.string(), pa.string())),
                        ("column", pa.string()), ("min", pa.string()),
                        ("max", pa.string()), ("null_count", pa.uint64())])
    return pa.Table.from_pylist(rows, schema=schema)


class PartitionedWriter:
    """partout's partitioned writer: batches written to it are partitioned by ``scheme``
    (``"hash"``, ``"spark"`` or ``"round_robin"``) and each destination's rows buffered and
    flushed as an Arrow IPC stream (``format="ipc"``, compression ``"none"``, ``"lz4"``,
    ``"zstd"`` at zstd's default level 3, or ``"zstd:LEVEL"``, e.g. ``"zstd:1"``) or as Presto pages (``format="presto"``, ``"none"`` or ``"lz4"``), within
    ``memory_limit`` bytes (default 64 MiB), each flush about ``target_bytes``.

    ``finish()`` returns each destination's bytes, a list of ``n`` ``bytes``; with
    ``directory``, it writes ``part-00000.arrows`` (or ``.presto``) ... there instead, renamed
    into place only when finished, and returns ``None``. As a context manager it finishes on
    a clean exit (the bytes are then in ``outputs``) and, on an exception, leaves no files.
    """

    def __init__(
        self,
        schema: Any,
        n: int,
        *,
        by: str | Sequence[str] | None = None,
        scheme: Literal["hash", "spark", "round_robin"] = "hash",
        format: Literal["ipc", "presto"] = "ipc",
        compression: str | None = None,
        memory_limit: int | None = None,
        target_bytes: int | None = None,
        directory: str | os.PathLike[str] | None = None,
    ) -> None:
        self._writer = _partout.PartitionedWriter(
            schema,
            n,
            by=by,
            scheme=scheme,
            format=format,
            compression=compression,
            memory_limit=memory_limit,
            target_bytes=target_bytes,
            directory=directory,
        )
        self.outputs: list[bytes] | None = None

    def write(self, data: Any) -> None:
        """Partitions every batch of ``data`` (anything exporting the Arrow PyCapsule
        interface, of the writer's schema) into the destinations' buffers."""
        self._writer.write(data)

    def finish(self) -> list[bytes] | None:
        """Flushes and ends every destination's output: their bytes, or ``None`` for a
        writer into a directory (its files are then in place)."""
        self.outputs = self._writer.finish()
        return self.outputs

    @property
    def rows(self) -> int:
        """Rows written so far."""
        return self._writer.rows

    def __enter__(self) -> PartitionedWriter:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.finish()
        else:
            self._writer.abort()


__all__ = [
    "partition",
    "partition_ids",
    "repartition",
    "write_dataset",
    "read",
    "file_statistics",
    "PartitionedWriter",
    *errors.__all__,
]
