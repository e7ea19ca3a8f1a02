"""Write modes, read back by the peers: after `append` and after `overwrite-partitions`, DuckDB
and Polars read the dataset's files (a glob over the directory, not partout's manifest) and
see exactly the expected rows: old values kept, rewritten values replaced, nothing doubled.
A run killed at any moment of an overwrite-partitions leaves the dataset as it was or as the
run made it, never a mix."""

import json
import random
import signal
import subprocess
import time

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import partout


def table(ids, years):
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "year": pa.array([years[i % len(years)] for i in range(len(ids))], pa.int32()),
        "v": pa.array([f"row {i}" for i in ids]),
    })


def read_duckdb(out):
    got = duckdb.sql(
        f"SELECT id, year, v FROM read_parquet('{out}/**/*.parquet', hive_partitioning=true) ORDER BY id"
    ).arrow()
    got = got.read_all() if hasattr(got, "read_all") else got
    return [(r["id"], int(r["year"]), r["v"]) for r in got.to_pylist()]


def read_polars(out):
    frame = pl.scan_parquet(f"{out}/**/*.parquet", hive_partitioning=True).sort("id").collect()
    return list(zip(frame["id"].to_list(), frame["year"].cast(pl.Int64).to_list(), frame["v"].to_list()))


def rows(t):
    return sorted(zip(t["id"].to_pylist(), t["year"].to_pylist(), t["v"].to_pylist()))


def assert_read_as(out, want):
    assert read_duckdb(out) == want, "DuckDB"
    assert read_polars(out) == want, "Polars"
    manifest = json.loads((out / "_manifest.json").read_text())
    assert manifest["output_rows"] == len(want)
    listed = sorted(f["name"] for d in manifest["destinations"] for f in d["files"])
    on_disk = sorted(str(p.relative_to(out)) for p in out.rglob("*.parquet"))
    assert listed == on_disk, "the manifest lists every file there, and only those"


def test_append_then_overwrite_partitions_read_back_with_duckdb_and_polars(tmp_path):
    out = tmp_path / "ds"
    first = table(range(0, 3000), [2022, 2023])
    partout.write_dataset(first, out, partition_by="year", max_rows_per_file=700)
    assert_read_as(out, rows(first))
    second = table(range(3000, 5000), [2023, 2024])
    manifest = partout.write_dataset(second, out, partition_by="year", mode="append")
    assert [d["files"][0]["name"].split("/")[0] for d in manifest["destinations"]] == [
        "year=2022", "year=2023", "year=2024"]
    want = sorted(rows(first) + rows(second))
    assert_read_as(out, want)
    # A value directory rewritten: 2023's old rows (of both runs) are gone, 2022 and 2024 kept.
    third = table(range(9000, 9500), [2023, 2025])
    partout.write_dataset(third, out, partition_by="year", mode="overwrite-partitions")
    want = sorted([r for r in want if r[1] != 2023] + rows(third))
    assert_read_as(out, want)
    # A run unlike the dataset is refused before anything changes.
    with pytest.raises(partout.PartoutError, match="its format is parquet, this run's ipc"):
        partout.write_dataset(third, out, partition_by="year", mode="append", format="ipc")
    with pytest.raises(partout.PartoutError, match="takes partitioning by value"):
        partout.write_dataset(third, tmp_path / "other", 2, by="id", mode="overwrite-partitions")
    assert_read_as(out, want)


def test_a_run_killed_during_overwrite_partitions_leaves_one_dataset_or_the_other(tmp_path, partout_bin):
    """The CLI run killed (SIGKILL) at moments spread over its run: after each, the files read
    by DuckDB are the old dataset or the new one, whole, and the manifest lists them."""
    source = tmp_path / "new.parquet"
    new = table(range(100_000, 400_000), [2023, 2024])
    pq.write_table(new, source, row_group_size=20_000)
    out = tmp_path / "ds"
    old = table(range(0, 60_000), [2022, 2023])
    partout.write_dataset(old, out, partition_by="year")
    before = rows(old)
    after = sorted([r for r in before if r[1] != 2023] + rows(new))
    args = [partout_bin, "repartition", "--quiet", str(source), "--partition-by", "year", "--threads", "2",
            "--mode", "overwrite-partitions", "-o", str(out)]
    # How long a whole run takes (into a copy), to spread the kills over it.
    started = time.monotonic()
    subprocess.run(args[:-1] + [str(tmp_path / "timing")], check=True, timeout=120,
                   capture_output=True)
    whole = time.monotonic() - started
    random.seed(7)
    outcomes = []
    for k in range(10):
        run = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(whole * (k + random.random()) / 10)
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=60)
        got = read_duckdb(out)
        assert got in (before, after), f"kill {k}: a mix of the old dataset and the new"
        assert_read_as(out, got)
        outcomes.append(got == after)
        if got == after:
            # Committed: the next kill starts from the old dataset again.
            partout.write_dataset(old, out, partition_by="year", mode="overwrite")
    print(f"killed runs: {outcomes.count(False)} left the old dataset, {outcomes.count(True)} the new")
    assert outcomes.count(False) >= 3, outcomes
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(".ds.partout-")]
    # Staging directories of killed runs are removed by the next run (their process is gone).
    subprocess.run(args, check=True, timeout=120, capture_output=True)
    assert read_duckdb(out) == after
    left = [p.name for p in tmp_path.iterdir() if p.name.startswith(".ds.partout-")]
    assert left == [], f"left: {left} (before the last run: {leftovers})"
