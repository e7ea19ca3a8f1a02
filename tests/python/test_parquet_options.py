"""The Parquet writer's settings (`--parquet-option KEY=VALUE`, `--row-group-rows`; Python's
`parquet_options=` and `row_group_rows=`), read back from the files by pyarrow's metadata and
DuckDB's `parquet_bloom_probe`: row group sizes, dictionaries (a chosen
one kept where a sample would have dropped it), statistics and the column index, bloom
filters that exclude absent values, the writer version. Bad keys, values and columns are
refused before anything is written."""

import subprocess

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import partout
from runs import file_of

ROWS = 20_000


def table():
    # `k` repeats (a dictionary pays); `v` is distinct (a sample says a dictionary does not).
    return pa.table({
        "k": pa.array([(i * 7919) % 50 for i in range(ROWS)], pa.int64()),
        "v": pa.array([f"distinct value {i:08d}" for i in range(ROWS)], pa.string()),
        "year": pa.array([2020 + i % 2 for i in range(ROWS)], pa.int32()),
    })


def files(manifest, out):
    return [out / file_of(d) for d in manifest["destinations"] if d.get("files")]


def columns(path):
    """Each column's chunk metadata, by name, for every row group of `path`."""
    meta = pq.ParquetFile(path).metadata
    return [{meta.row_group(g).column(c).path_in_schema: meta.row_group(g).column(c)
             for c in range(meta.num_columns)} for g in range(meta.num_row_groups)]


# Both ways a Parquet file is written: as it is flushed (2 files: their writers fit the
# default budget), and from rows staged first (400 files in 24 MiB: they do not; their row
# groups smaller, as the files are: 400 rows each).
PATHS = [pytest.param(2, None, 1000, id="flushed"), pytest.param(400, "24MiB", 100, id="staged")]


def assert_path(manifest, staged):
    """The manifest says which way the files were written (writers open while the workers ran,
    or none: every row staged)."""
    open_writers = manifest["memory_budget"].get("parquet_writers_open", 0)
    assert (open_writers == 0) == staged, manifest["memory_budget"]


@pytest.mark.parametrize("n, limit, group", PATHS)
def test_row_groups_dictionaries_statistics_and_version_are_as_chosen(tmp_path, n, limit, group):
    out = tmp_path / "chosen"
    manifest = partout.write_dataset(
        table(), out, n, by="k", row_group_rows=group, memory_limit=limit,
        parquet_options={"dictionary": False, "dictionary.k": True, "statistics": "none",
                         "statistics.k": "page", "writer_version": "2.0"},
    )
    assert_path(manifest, limit is not None)
    assert len(files(manifest, out)) == n
    # The files that hold rows (`k` has 50 values: of 400 destinations, at most 50 do).
    written = [out / file_of(d) for d in manifest["destinations"] if d["rows"] > 0]
    assert len(written) == 2 if n == 2 else 10 <= len(written) <= 50, len(written)
    # The manifest records what was chosen, as parquet_options takes it.
    assert manifest["parquet_options"] == {
        "row_group_rows": str(group), "dictionary": "false", "dictionary.k": "true",
        "statistics": "none", "statistics.k": "page", "writer_version": "2.0"}
    got = pa.concat_tables(pq.read_table(p) for p in written)
    assert got.sort_by("v").equals(table().sort_by("v")), "the rows changed"
    for path in written:
        meta = pq.ParquetFile(path).metadata
        sizes = [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]
        assert max(sizes) == group and sum(sizes) == meta.num_rows, sizes
        assert meta.format_version == "2.6", meta.format_version
        for chunks in columns(path):
            assert chunks["k"].has_dictionary_page and not chunks["v"].has_dictionary_page
            assert chunks["k"].is_stats_set and chunks["k"].has_column_index
            assert not chunks["v"].is_stats_set and not chunks["year"].is_stats_set


def test_a_chosen_dictionary_is_kept_where_a_sample_would_drop_it(tmp_path):
    plain = partout.write_dataset(table(), tmp_path / "plain", 1, by="k")
    chosen = partout.write_dataset(table(), tmp_path / "chosen", 1, by="k", parquet_options={"dictionary.v": "true"})
    # By default partout judges `v` on a sample: distinct values, no dictionary.
    assert not any(c["v"].has_dictionary_page for c in columns(files(plain, tmp_path / "plain")[0]))
    assert all(c["v"].has_dictionary_page for c in columns(files(chosen, tmp_path / "chosen")[0]))


def test_bloom_filters_are_written_for_the_columns_named_and_exclude_absent_values(tmp_path, partout_bin):
    source = tmp_path / "in.parquet"
    pq.write_table(table(), source)
    out = tmp_path / "bloom"
    done = subprocess.run(
        [partout_bin, "repartition", "--quiet", str(source), "--partition-by", "year", "-o", str(out),
         "--parquet-option", "bloom_filter=k,v", "--parquet-option", "bloom_filter_fpp=0.01",
         "--parquet-option", "bloom_filter_ndv=30000", "--row-group-rows", "4096"],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    written = sorted(out.glob("year=*/*.parquet"))
    assert len(written) == 2
    for path in written:
        for chunks in columns(path):
            assert chunks["k"].bloom_filter_offset is not None and chunks["v"].bloom_filter_offset is not None
        with duckdb.connect() as con:
            def excludes(column, value):
                rows = con.execute(
                    "SELECT bloom_filter_excludes FROM parquet_bloom_probe(?, ?, ?) ORDER BY row_group_id",
                    [str(path), column, value],
                ).fetchall()
                return [r[0] for r in rows]
            # A value is never excluded from a row group that holds it; an absent one is from
            # (nearly) every row group.
            groups = pq.ParquetFile(path)
            for g in range(groups.num_row_groups):
                rows = groups.read_row_group(g)
                for column in ["v", "k"]:
                    value = rows.column(column)[g % rows.num_rows].as_py()
                    assert not excludes(column, value)[g], (column, value, g)
            absent = excludes("v", "no such value")
            assert len(absent) == groups.num_row_groups > 1 and sum(absent) >= len(absent) - 1, absent
    # Without the option, no bloom filter.
    plain = partout.write_dataset(table(), tmp_path / "plain", 1, by="k")
    assert all(c["k"].bloom_filter_offset is None for c in columns(files(plain, tmp_path / "plain")[0]))


@pytest.mark.parametrize("option, said", [
    ("row_group_size=10", '"row_group_size" is not a Parquet option'),
    ("statistics=all", "statistics takes none, chunk or page"),
    ("bloom_filter_fpp=2", "probability"),
    ("dictionary", "is not KEY=VALUE"),
])
def test_a_bad_parquet_option_is_refused_before_anything_is_written(tmp_path, partout_bin, option, said):
    source = tmp_path / "in.parquet"
    pq.write_table(table(), source)
    out = tmp_path / "refused"
    done = subprocess.run([partout_bin, "repartition", "--quiet", str(source), "-n", "2", "--by", "k", "-o", str(out),
                           "--parquet-option", option], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and said in done.stderr, done.stderr
    assert not out.exists()


def test_a_column_the_files_lack_or_an_output_not_parquet_is_refused(tmp_path):
    # `year` is the partition column: its values are in the directories, not the files.
    with pytest.raises(partout.InvalidArgumentError, match='column "year"'):
        partout.write_dataset(table(), tmp_path / "hive", partition_by="year",
                              parquet_options={"bloom_filter": ["year"]})
    assert not (tmp_path / "hive").exists()
    kept = partout.write_dataset(table(), tmp_path / "kept", partition_by="year", keep_partition_columns=True,
                                 parquet_options={"bloom_filter": ["year"]})
    assert kept["partitions"] == 2
    with pytest.raises(partout.InvalidArgumentError, match=r"Parquet options .*are for Parquet output, not ipc"):
        partout.write_dataset(table(), tmp_path / "ipc", 2, by="k", format="ipc", row_group_rows=10)
    with pytest.raises(partout.InvalidArgumentError, match="dictionary takes true or false"):
        partout.write_dataset(table(), tmp_path / "bad", 2, by="k", parquet_options={"dictionary": "perhaps"})
