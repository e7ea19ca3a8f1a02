import os
from typing import Any, Callable, Literal, Mapping, Sequence

import pyarrow

__version__: str

def partition(
    data: Any,
    n: int,
    *,
    by: str | Sequence[str] | None = None,
    scheme: str = "hash",
    threads: int | None = None,
) -> list[pyarrow.Table]: ...
def partition_ids(
    data: Any, n: int, *, by: str | Sequence[str] | None = None, scheme: str = "hash"
) -> pyarrow.UInt32Array: ...
def repartition(
    inputs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    output: str | os.PathLike[str],
    n: int | None = None,
    *,
    by: str | Sequence[str] | None = None,
    scheme: str = "hash",
    format: str = "parquet",
    compression: str | None = None,
    layout: str = "files",
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
) -> dict[str, Any]: ...
def write_dataset(
    data: Any,
    output: str | os.PathLike[str],
    n: int | None = None,
    *,
    partition_by: str | Sequence[str] | None = None,
    by: str | Sequence[str] | None = None,
    scheme: str = "hash",
    format: str = "parquet",
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
) -> dict[str, Any]: ...
def read(
    path: str | os.PathLike[str],
    *,
    schema: Any = None,
    destination: int | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> pyarrow.Table: ...

class PartitionedWriter:
    def __init__(
        self,
        schema: Any,
        n: int,
        *,
        by: str | Sequence[str] | None = None,
        scheme: str = "hash",
        format: str = "ipc",
        compression: str | None = None,
        memory_limit: int | None = None,
        target_bytes: int | None = None,
        directory: str | os.PathLike[str] | None = None,
    ) -> None: ...
    def write(self, data: Any) -> None: ...
    def finish(self) -> list[bytes] | None: ...
    @property
    def rows(self) -> int: ...
    @property
    def writes_files(self) -> bool: ...
    def abort(self) -> None: ...
