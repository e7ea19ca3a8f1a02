"""pyarrow writes the inputs and reads what `partout repartition` wrote: Parquet files and
Arrow IPC streams, one per destination, every input row once, values intact, the manifest's
counts matching; the shuffle layout's index read by hand; range partitioning's destinations
ordered by key. Inputs come from pyarrow itself (Parquet with several row groups, Arrow IPC
file, CSV), so each side reads the other's files."""
import json
import os
import pathlib
import struct
import subprocess

import pyarrow as pa
import pyarrow.csv
import pyarrow.ipc
import pyarrow.parquet as pq
import pytest
from runs import file_of

PARTOUT = pathlib.Path(os.environ.get("PARTOUT_BIN", "target/release/partout"))
ROWS = 120_000


def table(start, stop):
    ids = pa.array(range(start, stop), pa.int64())
    return pa.table(
        {
            "id": ids,
            "key": pa.array([(i * 7919) % 10_007 for i in range(start, stop)], pa.int64()),
            "name": pa.array([None if i % 13 == 0 else f"name {i}" for i in range(start, stop)],
                             pa.string()),
            "price": pa.array([i / 8 for i in range(start, stop)], pa.float64()),
        }
    )


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    d = tmp_path_factory.mktemp("inputs")
    pq.write_table(table(0, 80_000), d / "a.parquet", row_group_size=7_000)
    with pa.ipc.new_file(d / "b.arrow", table(0, 1).schema) as w:
        for start in range(80_000, 110_000, 10_000):
            w.write_table(table(start, start + 10_000))
    pyarrow.csv.write_csv(table(110_000, ROWS), d / "c.csv")
    return d


def run(*args):
    result = subprocess.run([str(PARTOUT), "repartition", "--quiet", *map(str, args)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result


def check_rows(tables):
    """Every input row exactly once, with its values (a null name written to CSV reads back
    as an empty string)."""
    seen = {}
    for t in tables:
        for row in t.to_pylist():
            assert row["id"] not in seen, f"row {row['id']} twice"
            seen[row["id"]] = row
    assert sorted(seen) == list(range(ROWS))
    for i, row in seen.items():
        assert row["key"] == (i * 7919) % 10_007
        assert row["price"] == i / 8
        if i % 13 != 0:
            assert row["name"] == f"name {i}"
        else:
            assert row["name"] in (None, "")


@pytest.mark.parametrize("fmt,compression,threads", [
    ("parquet", "snappy", 2), ("parquet", "zstd", 1), ("ipc", "lz4", 2),
])
def test_files_layout_reads_back(inputs, tmp_path, fmt, compression, threads):
    out = tmp_path / "out"
    run(inputs, "--by", "key", "-n", 9, "--format", fmt, "--compression", compression,
        "--threads", threads, "-o", out)
    manifest = json.loads((out / "_manifest.json").read_text())
    assert manifest["input_rows"] == ROWS and manifest["output_rows"] == ROWS
    tables = []
    keys_seen = {}
    for d in manifest["destinations"]:
        path = out / file_of(d)
        assert path.stat().st_size == d["bytes"]
        if fmt == "parquet":
            t = pq.read_table(path)
            assert pq.ParquetFile(path).metadata.row_group(0).column(0).compression.lower() == compression
        else:
            with pa.ipc.open_stream(path.read_bytes()) as r:
                t = r.read_all()
        assert t.num_rows == d["rows"]
        # One key, one destination.
        for k in set(t.column("key").to_pylist()):
            assert keys_seen.setdefault(k, d["destination"]) == d["destination"]
        tables.append(t)
    check_rows(tables)


def test_shuffle_layout_index_reads_back(inputs, tmp_path):
    out = tmp_path / "out"
    run(inputs, "--by", "key", "-n", 40, "--format", "ipc", "--layout", "shuffle",
        "--threads", 2, "-o", out)
    manifest = json.loads((out / "_manifest.json").read_text())
    tables = []
    rows = [0] * 40
    for worker in manifest["shuffle_files"]:
        data = (out / worker["data"]).read_bytes()
        index = (out / worker["index"]).read_bytes()
        assert index[:8] == b"PTSHUF01"
        destinations, count = struct.unpack_from("<IQ", index, 8)
        assert destinations == 40 and len(index) == 20 + 28 * count
        streams = {}
        for i in range(count):
            p, offset, length, n = struct.unpack_from("<IQQQ", index, 20 + 28 * i)
            streams.setdefault(p, bytearray()).extend(data[offset:offset + length])
            rows[p] += n
        for p, stream in streams.items():
            with pa.ipc.open_stream(bytes(stream)) as r:
                tables.append(r.read_all())
    assert rows == [d["rows"] for d in manifest["destinations"]]
    check_rows(tables)


def test_range_destinations_are_ordered_by_key(inputs, tmp_path):
    out = tmp_path / "out"
    run(inputs, "--by", "key", "-n", 5, "--scheme", "range", "--threads", 2, "-o", out)
    manifest = json.loads((out / "_manifest.json").read_text())
    assert len(manifest["range_bounds"]) == 4
    tables = [pq.read_table(out / file_of(d)) for d in manifest["destinations"]]
    previous_max = None
    for t in tables:
        keys = t.column("key").to_pylist()
        assert keys, "a range destination without rows"
        if previous_max is not None:
            assert min(keys) >= previous_max
        previous_max = max(keys)
    check_rows(tables)
