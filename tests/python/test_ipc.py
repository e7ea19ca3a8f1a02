"""pyarrow reads the Arrow IPC streams partout's encoder wrote (examples/ipc_samples.rs)."""
import os
import pathlib

import pyarrow as pa
import pytest

SAMPLES = pathlib.Path(os.environ.get("PARTOUT_IPC_SAMPLES", "target/ipc-samples"))
ROWS = 2500


def expected(i):
    return {
        "id": i,
        "name": None if i % 7 == 3 else f"row-{i}",
        "label": f"a longer label {i}" if i % 5 == 0 else f"l{i}",
        "score": i * 0.5,
        "tags": [i, i + 1],
    }


@pytest.mark.parametrize("compression", ["none", "lz4", "zstd"])
def test_pyarrow_reads_every_value(compression):
    path = SAMPLES / f"samples.{compression}.arrows"
    with pa.ipc.open_stream(path.read_bytes()) as reader:
        table = reader.read_all()
    assert table.num_rows == ROWS
    assert table.schema.field("label").type == pa.string_view()
    assert table.schema.field("tags").type == pa.list_(pa.int32())
    rows = table.to_pylist()
    for i, row in enumerate(rows):
        assert row == expected(i), f"row {i}"


def test_compression_is_the_ipc_formats_own():
    sizes = {c: (SAMPLES / f"samples.{c}.arrows").stat().st_size for c in ["none", "lz4", "zstd"]}
    assert sizes["zstd"] < sizes["none"]
    assert sizes["lz4"] < sizes["none"]
