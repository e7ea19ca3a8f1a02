"""Each file's statistics in the manifest when asked (`file_statistics=True`: per column,
smallest and largest value and nulls; read from the footer of a Parquet file, computed as an
Arrow IPC file is written), as `partout.file_statistics` tabulates them with each file's
partition values, equal to what pyarrow computes from the file's rows: for hash destinations
and a Hive dataset, for integers with nulls, strings, dates and floats; none for a nested
column, no bounds when statistics are not written, and nothing recorded unless asked."""

import datetime

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest

import partout
from runs import file_of

ROWS = 12_000


def table():
    return pa.table({
        "k": pa.array([None if i % 17 == 0 else (i * 7919) % 1000 - 500 for i in range(ROWS)], pa.int64()),
        "s": pa.array([f"name {(i * 31) % 997:04d}" for i in range(ROWS)], pa.string()),
        "d": pa.array([datetime.date(2020, 1, 1) + datetime.timedelta(days=i % 900) for i in range(ROWS)],
                      pa.date32()),
        "f": pa.array([(i % 301) / 8 - 10 for i in range(ROWS)], pa.float64()),
        "tags": pa.array([[i, i + 1] for i in range(ROWS)], pa.list_(pa.int32())),
        "year": pa.array([2020 + i % 3 for i in range(ROWS)], pa.int32()),
    })


def text(value):
    """A value as Arrow shows it."""
    if isinstance(value, datetime.date):
        return value.isoformat()
    return None if value is None else str(value)


def expected(path):
    """Each flat column's (min, max, nulls) as pyarrow computes them from the file's rows."""
    got = ipc.open_file(path).read_all() if path.suffix == ".arrow" else pq.read_table(path)
    out = {}
    for name in got.column_names:
        column = got[name]
        if pa.types.is_nested(column.type):
            continue
        bounds = pc.min_max(column).as_py()
        out[name] = (text(bounds["min"]), text(bounds["max"]), column.null_count)
    return out


def stated(manifest):
    """The manifest's statistics, by file and column."""
    out = {}
    for row in partout.file_statistics(manifest).to_pylist():
        out.setdefault(row["file"], {})[row["column"]] = (row["min"], row["max"], row["null_count"])
    return out


@pytest.mark.parametrize("format", ["parquet", "ipc"])
def test_each_files_statistics_are_what_its_rows_hold(tmp_path, format):
    for name, run, count in [
        ("hash", dict(n=3, by="k"), 3),
        ("hive", dict(partition_by="year"), 3),
        # 400 files in 24 MiB: Parquet rows staged first, each file written whole.
        ("staged", dict(n=400, by="k", memory_limit="24MiB"), 400),
    ]:
        out = tmp_path / name
        sized = {"row_group_rows": 1000} if format == "parquet" else {}
        manifest = partout.write_dataset(table(), out, format=format, file_statistics=True,
                                         **sized, **run)
        if name == "staged" and format == "parquet":
            assert "parquet_writers_open" not in manifest["memory_budget"], manifest["memory_budget"]
        by_file = stated(manifest)
        files = [file_of(d) for d in manifest["destinations"] if d.get("files")]
        assert sorted(by_file) == sorted(files) and len(files) == count, name
        for file in files:
            assert file.endswith(".arrow" if format == "ipc" else ".parquet"), file
            assert by_file[file] == expected(out / file), f"{name}: {file}"
            assert "tags" not in by_file[file], "a nested column has no order"
        # Each file's partition values, from its directory.
        for row in partout.file_statistics(manifest).to_pylist():
            want = {"year": row["file"].split("/")[0].removeprefix("year=")} if name == "hive" else {}
            assert dict(row["partition_values"]) == want, row


def test_presto_pages_have_no_statistics(tmp_path):
    with pytest.raises(partout.InvalidArgumentError, match="not Presto pages"):
        partout.write_dataset(table(), tmp_path / "p", 2, by="k", format="presto", file_statistics=True)
    assert not (tmp_path / "p").exists()


def test_statistics_are_recorded_only_when_asked(tmp_path):
    manifest = partout.write_dataset(table(), tmp_path / "plain", 2, by="k")
    assert all("columns" not in d for d in manifest["destinations"])
    assert partout.file_statistics(manifest).num_rows == 0


def test_no_statistics_written_gives_no_bounds(tmp_path):
    manifest = partout.write_dataset(table(), tmp_path / "none", 2, by="k", parquet_options={"statistics": "none"},
                                      file_statistics=True)
    stats = partout.file_statistics(manifest)
    assert stats.num_rows == 2 * 5
    assert stats["min"].null_count == stats.num_rows and stats["max"].null_count == stats.num_rows
