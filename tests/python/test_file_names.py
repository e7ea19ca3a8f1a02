"""Files named after a pattern (file_name=, --file-name), read back by the peers: the names the
manifest lists are the files there, at the pattern's names in their values' directories, and
DuckDB and Polars read the dataset whole by glob; appended runs with {run} add files beside
the first run's; patterns that could give two files one name are refused before anything is
written."""

import subprocess

import duckdb
import polars as pl
import pyarrow as pa
import pytest

import partout


def table(rows=20_000):
    return pa.table({
        "id": pa.array(range(rows), pa.int64()),
        "year": pa.array([2020 + i % 3 for i in range(rows)], pa.int32()),
        "v": pa.array([f"v{i % 101}" for i in range(rows)]),
    })


def files_under(out):
    return sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()
                  and p.name != "_manifest.json")


def test_files_take_the_pattern_s_names_and_read_back_whole(tmp_path):
    data = table()
    out = tmp_path / "out"
    manifest = partout.write_dataset(data, out, 2, by="id", partition_by="year",
                                     max_rows_per_file=2000, file_name="orders_{dest}_{part}")
    assert manifest["file_name"] == "orders_{dest}_{part}"
    names = sorted(f["name"] for d in manifest["destinations"] for f in d["files"])
    assert files_under(out) == names
    for entry in manifest["destinations"]:
        for k, f in enumerate(entry["files"]):
            directory, name = f["name"].split("/")
            assert directory.startswith("year=") and name.startswith("orders_0000"), f
            assert name.endswith(f"_{k:05}.parquet"), f
    got = duckdb.sql(f"SELECT id, year, v FROM read_parquet('{out}/**/*.parquet', "
                     "hive_partitioning=true) ORDER BY id").arrow()
    got = got.read_all() if hasattr(got, "read_all") else got
    assert got.select(["id", "v"]).equals(data.select(["id", "v"]))
    frame = pl.scan_parquet(f"{out}/**/*.parquet", hive_partitioning=True).sort("id").collect()
    assert frame["year"].cast(pl.Int32).to_list() == data["year"].to_pylist()


def test_appended_runs_with_their_id_add_files_beside_the_first(tmp_path):
    data = table(3000)
    out = tmp_path / "out"
    partout.write_dataset(data, out, partition_by="year", file_name="data-{run}")
    manifest = partout.write_dataset(data, out, partition_by="year", file_name="data-{run}",
                                     mode="append")
    names = sorted(f["name"] for d in manifest["destinations"] for f in d["files"])
    assert files_under(out) == names and len(names) == 6, names
    count = duckdb.sql(f"SELECT count(*), count(DISTINCT id) FROM "
                       f"read_parquet('{out}/**/*.parquet')").fetchall()[0]
    assert count == (6000, 3000)


@pytest.mark.parametrize("options, says", [
    ({"n": 2, "by": "id", "file_name": "data"}, "needs {dest}"),
    ({"n": 1, "by": "id", "file_name": "d{dest}", "max_rows_per_file": 10}, "needs {part}"),
    ({"n": 1, "by": "id", "file_name": "x{i}"}, "unknown placeholder {i}"),
    ({"n": 1, "by": "id", "file_name": "a/b"}, "not a path"),
])
def test_patterns_that_could_give_two_files_one_name_are_refused(tmp_path, options, says):
    out = tmp_path / "out"
    with pytest.raises(partout.PartoutError, match=says):
        partout.write_dataset(table(100), out, **options)
    assert not out.exists()


def test_the_command_line_reads_the_pattern(tmp_path, partout_bin):
    source = tmp_path / "in.parquet"
    import pyarrow.parquet as pq
    pq.write_table(table(1000), source)
    done = subprocess.run([partout_bin, "repartition", str(source), "-n", "3", "--by", "id",
                           "--file-name", "chunk-{dest}", "--quiet", "-o", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert files_under(tmp_path / "out") == [f"chunk-{d:05}.parquet" for d in range(3)]
    bad = subprocess.run([partout_bin, "repartition", str(source), "-n", "3", "--by", "id",
                          "--file-name", "chunk", "-o", str(tmp_path / "bad")],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "needs {dest}" in bad.stderr, bad.stderr
    assert not (tmp_path / "bad").exists()
