"""Files that roll over at a size, read back by the peers: pyarrow's metadata shows each file's
rows and row groups, DuckDB and Polars read the rolled dataset as the input, and a skewed
value (half the rows) under --max-bytes-per-file 64MiB gives files of that size while the
run stays within its memory limit, measured from outside."""

import os

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import partout
from runs import peak_rss

ROWS = 30_000


def table():
    return pa.table({
        "id": pa.array(range(ROWS), pa.int64()),
        "year": pa.array([2020 + (i % 7 == 0) + (i % 11 == 0) for i in range(ROWS)], pa.int32()),
        "v": pa.array([f"value {i}" for i in range(ROWS)]),
    })


def assert_numbered(entry):
    """A destination's files: numbered from zero before the extension, in order."""
    stem = entry["files"][0]["name"].rsplit("-", 1)[0]
    for k, f in enumerate(entry["files"]):
        assert f["name"] == f"{stem}-{k:05}.parquet", entry


@pytest.mark.parametrize("split", ["partition_by", "hash"])
def test_rolled_files_read_back_with_pyarrow_duckdb_and_polars(tmp_path, split):
    data = table()
    out = tmp_path / "out"
    how = {"partition_by": "year"} if split == "partition_by" else {"n": 3, "by": "year"}
    manifest = partout.write_dataset(data, out, max_rows_per_file=2500, row_group_rows=1000, **how)
    rolled = 0
    for entry in manifest["destinations"]:
        assert_numbered(entry)
        files = entry["files"]
        rolled += len(files) > 1
        assert sum(f["rows"] for f in files) == entry["rows"]
        for k, f in enumerate(files):
            meta = pq.ParquetFile(out / f["name"]).metadata
            # Each file as the manifest says, full but the last, in row groups of 1000 rows.
            assert (meta.num_rows, os.path.getsize(out / f["name"])) == (f["rows"], f["bytes"]), f
            assert f["rows"] == 2500 or k == len(files) - 1, files
            groups = [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]
            assert groups == f["row_groups"] and max(groups) <= 1000, f
    assert rolled >= 2, manifest["destinations"]
    hive = split == "partition_by"
    want = data.sort_by("id")
    # DuckDB, over every file of the dataset (the years from the directories' names).
    got = duckdb.sql(
        f"SELECT id, year, v FROM read_parquet('{out}/**/*.parquet', hive_partitioning={str(hive).lower()}) "
        "ORDER BY id"
    ).arrow()
    got = got.read_all() if hasattr(got, "read_all") else got
    assert got.select(["id", "v"]).equals(want.select(["id", "v"]))
    assert pc.all(pc.equal(pc.cast(got["year"], pa.int32()), want["year"])).as_py()
    # Polars, the same.
    frame = pl.scan_parquet(f"{out}/**/*.parquet", hive_partitioning=hive).sort("id").collect()
    assert frame["id"].to_list() == want["id"].to_pylist()
    assert frame["year"].cast(pl.Int32).to_list() == want["year"].to_pylist()


def test_a_skewed_value_rolls_over_at_64_mib_within_the_memory_limit(tmp_path, partout_bin):
    """Half the rows hold one value: under --max-bytes-per-file 64MiB its files are each about
    64 MiB (none past it by more than its last row group), within a memory limit of 128 MiB
    measured from outside; every row once, in its value's directory."""
    rows = 3_200_000
    source = tmp_path / "skewed.arrow"
    # 24 hex digits of a hash a row: Snappy leaves them near their size; k is 0 for half the
    # rows, one of 16 other values for the rest.
    frame = pl.select(id=pl.int_range(0, rows, dtype=pl.Int64)).with_columns(
        k=pl.when(pl.col("id") % 2 == 0).then(0).otherwise(1 + pl.col("id") % 16),
        v=pl.concat_str([pl.col("id").hash(s).cast(pl.String) for s in range(6)]),
    )
    frame.write_ipc(source, compression="uncompressed")
    limit, max_bytes = 128 << 20, 64 << 20
    out = tmp_path / "out"
    code, peak, stderr = peak_rss([
        partout_bin, "repartition", "--quiet", str(source), "--partition-by", "k",
        "--max-bytes-per-file", "64MiB", "--memory-limit", str(limit), "-o", str(out),
    ])
    assert code == 0, stderr
    print(f"peak RSS {peak >> 20} MiB, limit {limit >> 20} MiB")
    assert peak <= limit, f"peak RSS {peak >> 20} MiB past the limit of {limit >> 20} MiB"
    import json

    manifest = json.loads((out / "_manifest.json").read_text())
    skewed = next(d for d in manifest["destinations"] if d["files"][0]["name"].startswith("k=0/"))
    assert len(skewed["files"]) >= 3, skewed
    print("k=0:", [f"{f['bytes'] / (1 << 20):.1f} MiB" for f in skewed["files"]])
    seen = 0
    for entry in manifest["destinations"]:
        files = entry["files"]
        for k, f in enumerate(files):
            path = out / f["name"]
            meta = pq.ParquetFile(path).metadata
            last_group = meta.row_group(meta.num_row_groups - 1)
            last = sum(last_group.column(c).total_compressed_size for c in range(last_group.num_columns))
            footer = int.from_bytes(path.read_bytes()[-8:-4], "little") + 8
            assert f["bytes"] - last - footer < max_bytes, f
            if k < len(files) - 1:
                assert f["bytes"] >= max_bytes // 2, f
            value = int(f["name"].split("/")[0].removeprefix("k="))
            ids = pq.read_table(path, columns=["id"])["id"]
            want = pc.if_else(pc.equal(pc.bit_wise_and(ids, 1), 0), 0,
                              pc.add(1, pc.bit_wise_and(ids, 15)))
            assert pc.all(pc.equal(want, value)).as_py(), f"a row of another value in {f['name']}"
            seen += len(ids)
    assert seen == rows == manifest["output_rows"]
    got = pl.scan_parquet(f"{out}/**/*.parquet", hive_partitioning=True).select(
        pl.col("id").n_unique().alias("n"), pl.col("id").min().alias("lo"),
        pl.col("id").max().alias("hi")).collect().row(0)
    assert got == (rows, 0, rows - 1), "rows lost or repeated"
