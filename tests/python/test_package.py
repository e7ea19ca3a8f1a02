"""The `partout` Python package (crates/partout-python), as a user calls it: every row in its
partition once, values and nulls intact, input order kept within a partition, for every
type partout moves; the inputs Python users hold (pyarrow tables, batches and readers,
polars, DuckDB); Spark's own bucket ids; and errors raised by kind."""
import csv
import datetime
import decimal
import json
import pathlib

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import partout

ROOT = pathlib.Path(__file__).resolve().parents[2]
SPARK_VECTORS = ROOT / "crates/partout-core/tests/data/spark_hash_vectors.csv"


def every_type_table(rows: int = 600) -> pa.Table:
    """A key column and a column of every type partout moves, a third of each column null."""

    def nulled(values):
        return [None if i % 3 == 1 else v for i, v in enumerate(values)]

    ints = list(range(rows))
    words = [("w%d" % (i * 7919 % 1000)) * (1 + i % 5) for i in ints]
    columns = {
        "k": pa.array([i * 2654435761 % 1000 for i in ints], pa.int64()),
        "i8": pa.array(nulled([i % 100 - 50 for i in ints]), pa.int8()),
        "u16": pa.array(nulled([i % 60000 for i in ints]), pa.uint16()),
        "i32": pa.array(nulled(ints), pa.int32()),
        "u64": pa.array(nulled([i * 3 for i in ints]), pa.uint64()),
        "f32": pa.array(nulled([i / 3 for i in ints]), pa.float32()),
        "f64": pa.array(nulled([i / 7 for i in ints]), pa.float64()),
        "bool": pa.array(nulled([i % 2 == 0 for i in ints]), pa.bool_()),
        "utf8": pa.array(nulled(words), pa.string()),
        "large_utf8": pa.array(nulled(words), pa.large_string()),
        "utf8_view": pa.array(nulled(words), pa.string_view()),
        "binary": pa.array(nulled([w.encode() for w in words]), pa.binary()),
        "large_binary": pa.array(nulled([w.encode() for w in words]), pa.large_binary()),
        "binary_view": pa.array(nulled([w.encode() for w in words]), pa.binary_view()),
        "fixed": pa.array(nulled([i.to_bytes(4, "little") for i in ints]), pa.binary(4)),
        "dec128": pa.array(nulled([decimal.Decimal(i) / 100 for i in ints]), pa.decimal128(12, 2)),
        "dec256": pa.array(nulled([decimal.Decimal(i) / 10 for i in ints]), pa.decimal256(40, 1)),
        "date32": pa.array(nulled([datetime.date(2020, 1, 1) + datetime.timedelta(i) for i in ints])),
        "date64": pa.array(nulled([i * 86_400_000 for i in ints]), pa.date64()),
        "ts": pa.array(nulled([i * 1_000_003 for i in ints]), pa.timestamp("us", tz="UTC")),
        "time64": pa.array(nulled([i * 1000 for i in ints]), pa.time64("us")),
        "duration": pa.array(nulled([i for i in ints]), pa.duration("ms")),
        "list": pa.array(nulled([[i, i + 1][: i % 3] for i in ints]), pa.list_(pa.int32())),
        "large_list": pa.array(nulled([[w] * (i % 3) for i, w in enumerate(words)]), pa.large_list(pa.string())),
        "fixed_list": pa.array(nulled([[i, -i] for i in ints]), pa.list_(pa.int16(), 2)),
        "struct": pa.array(
            nulled([{"a": i, "b": w} for i, w in enumerate(words)]),
            pa.struct([("a", pa.int64()), ("b", pa.string())]),
        ),
        "map": pa.array(nulled([[(w, i)] for i, w in enumerate(words)]), pa.map_(pa.string(), pa.int64())),
        "dict": pa.array(nulled(["red", "green", "blue"][i % 3] for i in ints)).dictionary_encode(),
        "null": pa.nulls(rows),
    }
    return pa.table(columns)


def comparable(table: pa.Table) -> pa.Table:
    """The table with view columns cast to their plain types: pyarrow filters neither."""
    plain = {pa.string_view(): pa.string(), pa.binary_view(): pa.binary()}
    schema = pa.schema([f.with_type(plain.get(f.type, f.type)) for f in table.schema])
    return table.cast(schema)


def check_partitioned(table: pa.Table, parts, ids, n: int) -> None:
    """`parts` holds exactly the rows `ids` sends to each destination, in input order, every
    value and null intact: against pyarrow's own filter of the table."""
    ids = ids.to_pylist() if isinstance(ids, pa.Array) else list(ids)
    assert len(ids) == table.num_rows
    assert len(parts) == n
    assert all(0 <= i < n for i in ids)
    assert sum(p.num_rows for p in parts) == table.num_rows
    id_array = pa.array(ids, pa.uint32())
    plain = comparable(table)
    for p, part in enumerate(parts):
        assert part.schema == table.schema
        expected = plain.filter(pc.equal(id_array, p))
        assert part.num_rows == expected.num_rows, f"destination {p}"
        assert comparable(part).equals(expected), f"destination {p}'s rows differ"


@pytest.mark.parametrize("scheme", ["hash", "spark", "round_robin", "range"])
def test_every_type_lands_in_its_partition_once_in_order(scheme):
    table = every_type_table()
    by = None if scheme == "round_robin" else "k"
    for n in [1, 3, 64]:
        ids = partout.partition_ids(table, n, by=by, scheme=scheme)
        assert ids.type == pa.uint32()
        parts = partout.partition(table, n, by=by, scheme=scheme)
        check_partitioned(table, parts, ids, n)


def test_equal_keys_share_a_partition_across_batches():
    keys = [i % 37 for i in range(5000)]
    reader = pa.RecordBatchReader.from_batches(
        pa.schema([("k", pa.int64())]),
        [pa.record_batch([pa.array(keys[i : i + 700], pa.int64())], names=["k"]) for i in range(0, 5000, 700)],
    )
    ids = partout.partition_ids(reader, 16, by="k").to_pylist()
    first = {}
    for key, p in zip(keys, ids):
        assert first.setdefault(key, p) == p, f"key {key} in partitions {first[key]} and {p}"
    assert len(set(ids)) > 4, "37 keys all hashed into a few of 16 partitions"


def test_round_robin_deals_rows_in_turn_across_batches():
    table = pa.table({"v": list(range(100))})
    ids = partout.partition_ids(table.to_reader(max_chunksize=7), 4, scheme="round_robin")
    assert ids.to_pylist() == [i % 4 for i in range(100)]


def test_range_ids_ascend_with_the_key():
    keys = [(i * 7919) % 10_007 for i in range(3000)]
    table = pa.table({"k": pa.array(keys, pa.int64())})
    ids = partout.partition_ids(table, 8, by="k", scheme="range").to_pylist()
    pairs = sorted(zip(keys, ids))
    assert [p for _, p in pairs] == sorted(p for _, p in pairs)
    assert len(set(ids)) == 8


def test_spark_ids_are_sparks_own_bucket_ids():
    types = {"int": pa.int32(), "bigint": pa.int64(), "string": pa.string()}
    vectors = {name: ([], []) for name in types}
    with SPARK_VECTORS.open(newline="") as f:
        for row in csv.DictReader(f):
            if row["type"] not in types:
                continue
            text = row["value_repr"]
            if text == "null":
                value = None
            elif row["type"] == "string":
                value = json.loads(text)
            else:
                value = int(text)
            vectors[row["type"]][0].append(value)
            vectors[row["type"]][1].append(int(row["pmod7"]))
    for name, (values, buckets) in vectors.items():
        assert len(values) >= 9, name
        table = pa.table({"k": pa.array(values, types[name])})
        ids = partout.partition_ids(table, 7, by="k", scheme="spark").to_pylist()
        assert ids == buckets, f"Spark's pmod(hash(k), 7) for {name}"


def test_sliced_empty_and_extreme_counts():
    table = every_type_table(300)
    sliced = table.slice(37, 150)
    ids = partout.partition_ids(sliced, 5, by="k")
    check_partitioned(sliced, partout.partition(sliced, 5, by="k"), ids, 5)
    empty = table.slice(0, 0)
    parts = partout.partition(empty, 4, by="k")
    assert [p.num_rows for p in parts] == [0, 0, 0, 0]
    assert all(p.schema == table.schema for p in parts)
    assert partout.partition(empty, 4, by="k", as_dict=True) == {}
    for n in [1, 2048]:
        ids = partout.partition_ids(table, n, by="k")
        check_partitioned(table, partout.partition(table, n, by="k"), ids, n)
    as_dict = partout.partition(table, 2048, by="k", as_dict=True)
    assert sum(t.num_rows for t in as_dict.values()) == table.num_rows
    assert all(t.num_rows > 0 for t in as_dict.values())


def test_any_number_of_threads_lays_out_the_same_rows_in_input_order():
    # One chunk of more rows than one thread lays out at once (2^18), and many small chunks:
    # each destination's rows, in input order, whatever the threads.
    rows = 600_000
    one_chunk = pa.table({"k": pa.array(range(rows), pa.int64()),
                          "s": pa.array([f"v{i % 1013}" for i in range(rows)])})
    many_chunks = pa.Table.from_batches(one_chunk.slice(0, 20_000).to_batches(max_chunksize=333))
    for table in [one_chunk, many_chunks]:
        ids = partout.partition_ids(table, 7, by="s")
        for threads in [1, 2, 3]:
            parts = partout.partition(table, 7, by="s", threads=threads)
            check_partitioned(table, parts, ids, 7)
    with pytest.raises(partout.InvalidArgumentError, match="threads must be at least 1"):
        partout.partition(one_chunk, 7, by="s", threads=0)


def test_batches_and_generator_backed_readers_partition_as_their_table():
    table = every_type_table(500)
    expected = partout.partition_ids(table, 6, by="k").to_pylist()
    batch = table.combine_chunks().to_batches()[0]
    assert partout.partition_ids(batch, 6, by="k").to_pylist() == expected
    produced = []

    def batches():
        for b in table.to_batches(max_chunksize=64):
            produced.append(b.num_rows)
            yield b

    reader = pa.RecordBatchReader.from_batches(table.schema, batches())
    parts = partout.partition(reader, 6, by="k")
    assert sum(produced) == table.num_rows and len(produced) == 8
    check_partitioned(table, parts, expected, 6)


def test_polars_and_duckdb_inputs_partition_as_their_arrow_table():
    import duckdb
    import polars as pl

    table = pa.table({"k": pa.array([i * 31 % 97 for i in range(2000)], pa.int64()), "v": pa.array(range(2000), pa.int64())})
    expected = partout.partition_ids(table, 9, by="k").to_pylist()
    frame = pl.from_arrow(table)
    assert partout.partition_ids(frame, 9, by="k").to_pylist() == expected
    parts = partout.partition(frame, 9, by="k")
    check_partitioned(table, [pa.table(p) for p in parts], expected, 9)
    relation = duckdb.connect().from_arrow(table)
    assert sorted(partout.partition_ids(relation, 9, by="k").to_pylist()) == sorted(expected)
    by_key = {}
    for part_id, part in enumerate(partout.partition(relation, 9, by="k")):
        for key in part.column("k").to_pylist():
            by_key[key] = part_id
    assert all(by_key[k] == p for k, p in zip(table.column("k").to_pylist(), expected))


def test_errors_are_raised_by_kind():
    table = pa.table({"k": [1, 2, 3], "l": pa.array([[1], [2], []], pa.list_(pa.int64()))})
    with pytest.raises(partout.InvalidArgumentError, match="at least 1"):
        partout.partition(table, 0, by="k")
    with pytest.raises(partout.InvalidArgumentError, match="unknown scheme"):
        partout.partition(table, 2, by="k", scheme="modulo")
    with pytest.raises(partout.InvalidArgumentError, match="no key columns"):
        partout.partition(table, 2, by="k", scheme="round_robin")
    with pytest.raises(partout.InvalidArgumentError, match="needs key columns"):
        partout.partition_ids(table, 2)
    with pytest.raises(partout.SchemaMismatchError, match="no column \"x\""):
        partout.partition(table, 2, by=["k", "x"])
    # A nested key is hashed by value (equal lists, one destination).
    doubled = pa.concat_tables([table, table])
    ids = partout.partition_ids(doubled, 7, by="l").to_pylist()
    assert ids[:3] == ids[3:]
    with pytest.raises(partout.InvalidArgumentError, match="no rows"):
        partout.partition(table.slice(0, 0), 2, by="k", scheme="range")
    # Every class is a PartoutError, and the standard error it stands for.
    assert issubclass(partout.InvalidArgumentError, (partout.PartoutError, ValueError))
    assert issubclass(partout.UnsupportedTypeError, TypeError)
    assert issubclass(partout.PartoutIOError, OSError)
    with pytest.raises(partout.InvalidArgumentError, match="Arrow PyCapsule"):
        partout.partition([1, 2, 3], 2, by="k")


def lineitem_like(rows: int) -> pa.Table:
    return pa.table(
        {
            "k": pa.array([(i * 2654435761) % 100_003 for i in range(rows)], pa.int64()),
            "v": pa.array([f"value {i}" for i in range(rows)], pa.string()),
            "x": pa.array([i / 3 for i in range(rows)], pa.float64()),
        }
    )


@pytest.mark.parametrize("fmt,layout,compression", [
    ("parquet", "files", None), ("parquet", "files", "zstd:1"), ("ipc", "files", "zstd:-3"),
    ("ipc", "shuffle", None), ("presto", "files", "lz4"),
])
def test_repartition_round_trips_and_returns_its_manifest(tmp_path, fmt, layout, compression):
    import pyarrow.parquet as pq

    table = lineitem_like(20_000)
    source = tmp_path / "in.parquet"
    pq.write_table(table, source, row_group_size=3000)
    out = tmp_path / "out"
    calls = []
    manifest = partout.repartition(
        source, out, 5, by="k", format=fmt, layout=layout, compression=compression, threads=2,
        memory_limit="8MiB", progress=lambda done, total: calls.append((done, total)),
    )
    assert manifest["input_rows"] == table.num_rows
    assert manifest["compression"] == compression or {"parquet": "snappy"}.get(fmt, "none")
    assert manifest == json.loads((out / "_manifest.json").read_text())
    assert calls and calls[-1] == (table.num_rows, table.num_rows), calls[-3:]
    assert all(a[0] <= b[0] for a, b in zip(calls, calls[1:])), "progress went backwards"
    expected = partout.partition_ids(table, 5, by="k").to_pylist()
    counts = [expected.count(p) for p in range(5)]
    got = []
    for p in range(5):
        if layout == "shuffle":
            part = partout.read(out, destination=p)
        elif fmt == "parquet":
            part = pq.read_table(out / f"part-{p:05}.parquet")
        elif fmt == "ipc":
            part = partout.read(out / f"part-{p:05}.arrows")
        else:
            path = out / f"part-{p:05}.presto"
            part = partout.read(path, schema=table.schema) if path.exists() else table.slice(0, 0)
        assert part.num_rows == counts[p], f"destination {p}"
        assert set(partout.partition_ids(part, 5, by="k").to_pylist()) <= {p}
        got.extend(part.column("v").to_pylist())
        if fmt != "parquet":
            # Any destination of a finished stream output, whatever its layout, reads through
            # the manifest; one with no rows still has the output's schema (IPC).
            through = partout.read(out, destination=p, schema=table.schema if fmt == "presto" else None)
            assert through.schema == table.schema
            assert sorted(through.column("v").to_pylist()) == sorted(part.column("v").to_pylist())
    assert sorted(got) == sorted(table.column("v").to_pylist())
    if layout == "shuffle":
        with pytest.raises(partout.InvalidArgumentError, match="no destination 9"):
            partout.read(out, destination=9)
    with pytest.raises(partout.PartoutIOError, match="not empty|exists"):
        partout.repartition(source, out, 5, by="k", format=fmt, layout=layout)
    again = partout.repartition([source], out, 5, by="k", format=fmt, layout=layout, overwrite=True)
    assert again["input_rows"] == table.num_rows
    with pytest.raises(partout.InvalidArgumentError, match="Parquet takes ZSTD levels 1 to 22, not -1"):
        partout.repartition(source, tmp_path / "negative", 5, by="k", compression="zstd:-1")


def test_a_keyboard_interrupt_stops_repartition_and_leaves_no_output(tmp_path):
    import signal

    import pyarrow.parquet as pq

    source = tmp_path / "in.parquet"
    pq.write_table(lineitem_like(600_000), source, row_group_size=20_000)
    out = tmp_path / "out"

    def interrupt(*_):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.2)
    try:
        with pytest.raises(KeyboardInterrupt):
            # Thousands of Parquet files on one thread: seconds, past the alarm.
            partout.repartition(source, out, 3000, by="k", threads=1, memory_limit="64MiB")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.parquet"], "the run left files behind"


def test_an_exception_in_progress_stops_repartition_and_leaves_no_output(tmp_path):
    import pyarrow.parquet as pq

    source = tmp_path / "in.parquet"
    pq.write_table(lineitem_like(600_000), source, row_group_size=20_000)

    def progress(done, total):
        assert total == 600_000
        raise RuntimeError(f"stop at {done}")

    with pytest.raises(RuntimeError, match="stop at"):
        partout.repartition(source, tmp_path / "out", 3000, by="k", threads=1, progress=progress)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.parquet"]


def test_file_errors_are_raised_by_kind(tmp_path):
    bogus = tmp_path / "bogus.parquet"
    bogus.write_bytes(b"PAR1 this is not a parquet file PAR1")
    with pytest.raises(partout.CorruptInputError, match="bogus.parquet"):
        partout.repartition(bogus, tmp_path / "out", 2, by="k")
    with pytest.raises(partout.PartoutIOError):
        partout.repartition(tmp_path / "missing.parquet", tmp_path / "out", 2, by="k")
    with pytest.raises(partout.InvalidArgumentError, match="format"):
        partout.repartition(bogus, tmp_path / "out", 2, by="k", format="csv")
    stream = tmp_path / "damaged.arrows"
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, lineitem_like(10).schema) as writer:
        writer.write_table(lineitem_like(10))
    stream.write_bytes(sink.getvalue().to_pybytes()[:-40])
    with pytest.raises(partout.CorruptInputError, match="damaged.arrows"):
        partout.read(stream)
    with pytest.raises(partout.PartoutIOError):
        partout.read(tmp_path / "nothing.arrows")
    with pytest.raises(partout.CorruptInputError):
        partout.read(stream, schema=lineitem_like(1).schema)
    # A job's error says what it was doing and what went wrong, in every scheme, and keeps
    # its kind: here a column Presto pages cannot carry, partitioned round-robin (no key).
    unsigned = tmp_path / "unsigned.parquet"
    pq.write_table(pa.table({"u": pa.array([1, 2, 3], pa.uint64())}), unsigned)
    with pytest.raises(partout.UnsupportedTypeError, match="round-robin.*cannot carry column \"u\""):
        partout.repartition(unsigned, tmp_path / "out", 2, scheme="round_robin", format="presto")


@pytest.mark.parametrize("compression", ["none", "lz4", "zstd", "zstd:1", "zstd:-7"])
def test_the_writer_gives_each_destination_its_stream(compression):
    table = lineitem_like(30_000)
    ids = partout.partition_ids(table, 7, by="k").to_pylist()
    writer = partout.PartitionedWriter(table.schema, 7, by="k", compression=compression, target_bytes=16_384)
    for batch in table.to_batches(max_chunksize=4096):
        writer.write(batch)
    writer.write(table.slice(0, 0))
    assert writer.rows == table.num_rows
    outputs = writer.finish()
    assert len(outputs) == 7
    for p, stream in enumerate(outputs):
        with pa.ipc.open_stream(stream) as reader:
            got = reader.read_all()
        expected = table.filter(pc.equal(pa.array(ids, pa.uint32()), p))
        assert got.equals(expected), f"destination {p}"
    with pytest.raises(partout.InvalidArgumentError, match="finished"):
        writer.write(table)


def test_the_writer_into_a_directory_as_a_context_manager(tmp_path):
    table = lineitem_like(5_000)
    with partout.PartitionedWriter(table.schema, 4, scheme="round_robin", format="presto",
                                   compression="lz4", directory=tmp_path / "out") as writer:
        writer.write(table.to_reader(max_chunksize=999))
    assert writer.outputs is None
    files = sorted((tmp_path / "out").iterdir())
    assert [f.name for f in files] == [f"part-{p:05}.presto" for p in range(4)]
    rows = [partout.read(f, schema=table.schema) for f in files]
    assert [t.num_rows for t in rows] == [1250] * 4
    assert rows[1].column("v").to_pylist()[:2] == ["value 1", "value 5"]
    # An exception inside the block leaves no files behind.
    with pytest.raises(RuntimeError):
        with partout.PartitionedWriter(table.schema, 4, by="k", directory=tmp_path / "failed") as writer:
            writer.write(table)
            raise RuntimeError("stop")
    assert list((tmp_path / "failed").iterdir()) == []


def test_writer_errors_are_raised_by_kind():
    table = lineitem_like(10)
    with pytest.raises(partout.InvalidArgumentError, match="range"):
        partout.PartitionedWriter(table.schema, 3, by="k", scheme="range")
    with pytest.raises(partout.InvalidArgumentError, match="ZSTD"):
        partout.PartitionedWriter(table.schema, 3, by="k", format="presto", compression="zstd")
    with pytest.raises(partout.InvalidArgumentError, match="ZSTD level 99 is outside"):
        partout.PartitionedWriter(table.schema, 3, by="k", compression="zstd:99")
    with pytest.raises(partout.UnsupportedTypeError):
        partout.PartitionedWriter(pa.schema([("u", pa.uint64())]), 3, scheme="round_robin", format="presto")
    with pytest.raises(partout.SchemaMismatchError):
        partout.PartitionedWriter(table.schema, 3, by="nope")
    writer = partout.PartitionedWriter(table.schema, 3, by="k")
    with pytest.raises(partout.SchemaMismatchError):
        writer.write(pa.table({"k": [1, 2]}))
    with pytest.raises(partout.InvalidArgumentError, match="at least 1"):
        partout.PartitionedWriter(table.schema, 0, by="k")


@pytest.mark.parametrize("n", [-1, 0, 2**20 + 1, 2**64])
def test_a_destination_count_out_of_range_is_an_invalid_argument_naming_it(tmp_path, n):
    """Every call taking a destination count takes any Python integer and refuses one outside 1
    to 2^20 as an InvalidArgumentError (a ValueError) naming it, not an OverflowError from
    the conversion to a native integer."""
    table = lineitem_like(10)
    source = tmp_path / "in.parquet"
    pq.write_table(table, source)
    calls = {
        "partition": lambda: partout.partition(table, n, by="k"),
        "partition as_dict": lambda: partout.partition(table, n, by="k", as_dict=True),
        "partition_ids": lambda: partout.partition_ids(table, n, by="k"),
        "repartition": lambda: partout.repartition(source, tmp_path / "out", n, by="k"),
        "PartitionedWriter": lambda: partout.PartitionedWriter(table.schema, n, by="k"),
    }
    for name, call in calls.items():
        with pytest.raises(partout.InvalidArgumentError) as raised:
            call()
        assert isinstance(raised.value, ValueError), name
        message = str(raised.value)
        assert f"got {n}" in message and "2^20" in message, f"{name}: {message}"
    assert not (tmp_path / "out").exists()


def test_destination_counts_at_the_bounds_are_taken():
    table = lineitem_like(10)
    assert set(partout.partition_ids(table, 1, by="k").to_pylist()) == {0}
    assert max(partout.partition_ids(table, 2**20, by="k").to_pylist()) < 2**20
    with pytest.raises(TypeError):
        partout.partition(table, 2.0, by="k")


def test_partition_releases_the_gil():
    """`partout.partition` lets other Python threads run while it reads its input. The input
    here is a Flight stream whose batches a Python generator makes on the server's thread, and
    only once partout has taken the stream (which it does inside the call): the call cannot
    return before the generator has made every batch, so each batch is made by another Python
    thread while the call is under way. A call that held the GIL would wait for its input
    forever; it ends instead at the stream's deadline, failing the test."""
    import threading

    import pyarrow.flight as flight

    rows, batches, deadline = 1 << 16, 32, 60
    schema = pa.schema([("k", pa.int64()), ("v", pa.float64())])
    entered = threading.Event()  # set by partout itself, from inside partout.partition
    made = [0]  # batches the generator's thread has made: its progress

    def generate():
        # Nothing is made before partout has the stream in hand, so that no batch can be made
        # (and buffered) before the call begins.
        if not entered.wait(deadline):
            raise TimeoutError("partout.partition never took its input stream")
        for i in range(batches):
            keys = pa.array(range(i * rows, (i + 1) * rows), pa.int64())
            made[0] = i + 1
            yield pa.record_batch([keys, pc.cast(keys, pa.float64())], schema=schema)

    class Source(flight.FlightServerBase):
        def do_get(self, context, ticket):
            return flight.GeneratorStream(schema, generate())

    class Entered:
        """The stream, marking the moment partout asks for it through the PyCapsule interface:
        partout.partition has begun, and still holds the GIL."""

        def __init__(self, reader):
            self.reader = reader

        def __arrow_c_stream__(self, requested_schema=None):
            entered.set()
            return self.reader.__arrow_c_stream__(requested_schema)

    with Source("grpc://127.0.0.1:0") as server:
        client = flight.connect(f"grpc://127.0.0.1:{server.port}")
        # The deadline bounds a call that waits forever (the GIL held): its read then fails.
        options = flight.FlightCallOptions(timeout=deadline)
        stream = client.do_get(flight.Ticket(b"batches"), options=options).to_reader()
        try:
            parts = partout.partition(Entered(stream), 8, by="k")
        except Exception as e:
            pytest.fail(f"partout.partition did not finish while another Python thread made its "
                        f"input ({made[0]} of {batches} batches made; the GIL held while it "
                        f"waits?): {e}")
        finally:
            client.close()
    assert entered.is_set()
    assert made[0] == batches
    assert sum(p.num_rows for p in parts) == rows * batches


def test_a_gibibyte_table_is_partitioned_without_copying_the_input():
    """The input is read through the C data interface, not copied: partitioning a 1 GiB table
    raises the process's peak memory by about one copy of it (the partitioned output), not
    two."""
    import resource

    rows = 1 << 27  # 1 GiB of int64 values, resident (filled, not lazily zeroed)
    values = pa.py_buffer(bytearray(b"\x07") * (8 * rows))
    keys = pa.Int64Array.from_buffers(pa.int64(), rows, [None, values])
    # In chunks of 1Mi rows, as tables come: each batch's ids and plan are small.
    table = pa.table({"k": pa.chunked_array([keys.slice(i, 1 << 20) for i in range(0, rows, 1 << 20)])})
    assert table.nbytes == 1 << 30
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    parts = partout.partition(table, 4, by="k")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    assert sum(p.num_rows for p in parts) == rows
    grew = peak - before
    assert grew < 1.5 * (1 << 30), f"peak memory grew by {grew / 2**30:.2f} GiB for a 1 GiB input"
    del parts
