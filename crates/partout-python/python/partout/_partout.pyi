from typing import Any, Sequence

import pyarrow

__version__: str

def partition(
    data: Any, n: int, *, by: str | Sequence[str] | None = None, scheme: str = "hash"
) -> list[pyarrow.Table]: ...
def partition_ids(
    data: Any, n: int, *, by: str | Sequence[str] | None = None, scheme: str = "hash"
) -> pyarrow.UInt32Array: ...
