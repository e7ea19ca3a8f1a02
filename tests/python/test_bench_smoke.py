"""The benchmark scripts under bench/ run end to end at the smallest scale (TPC-H lineitem at
SF 0.01, one round), so that a case list, a check or an argument that drifts fails here the
day it drifts, not the day someone reruns a figure. What a reader of the figures relies on is
asserted: every case and contender the script names is in its report, every contender's
output was checked by value against the input, and the ratios are finite."""

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
sys.path.insert(0, str(BENCH))

import partition_by  # noqa: E402  (the bench's own case list and limits)


@pytest.fixture(scope="module")
def lineitem(tmp_path_factory):
    """lineitem at SF 0.01 as one Parquet file, as bench/e2e.sh makes SF 1's."""
    out = tmp_path_factory.mktemp("lineitem")
    tpchgen = Path(sys.executable).parent / "tpchgen-cli"
    subprocess.run([str(tpchgen), "parquet", "-s", "0.01", "--tables", "lineitem",
                    "--output-dir", str(out), "--quiet"], check=True, timeout=120)
    return out / "lineitem.parquet"


def run_partition_by(partout_bin, lineitem, tmp_path, *args):
    report = tmp_path / "report.json"
    result = subprocess.run(
        [sys.executable, str(BENCH / "partition_by.py"), "--input", str(lineitem),
         "--rounds", "1", "--python", sys.executable, "--json", str(report),
         "--out", str(tmp_path / "out"), *args],
        env={**os.environ, "PARTOUT": partout_bin}, capture_output=True, text=True,
        timeout=600)
    return result, report


def test_partition_by_runs_every_case_with_every_contender_checked(partout_bin, lineitem,
                                                                   tmp_path):
    result, report = run_partition_by(partout_bin, lineitem, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    results = json.loads(report.read_text())["results"]
    # Every case, by default, in the bench's order: "10,000 values" holds a comma.
    assert [r["case"] for r in results] == [case for case, _ in partition_by.CASES]
    for r in results:
        contenders = r["contenders"]
        expected = {"partout", "duckdb", "polars"}
        if partition_by.VALUES[r["case"]] <= partition_by.PYARROW_MAX_VALUES:
            expected.add("pyarrow")
        assert set(contenders) == expected, r
        for name, c in contenders.items():
            # Checked by value: the same rows per key value as the input ("values" counts
            # the input's), and a directory for each value.
            assert c["same"], (r["case"], name)
            assert c["files"] >= c["directories"] == c["values"] > 0, (r["case"], name, c)
            assert math.isfinite(c["median_s"]) and c["median_s"] > 0, (r["case"], name)
    # Each case's table gives every contender a finite ratio to the fastest peer.
    ratios = re.findall(r"\| (\d+\.\d+)x \|$", result.stdout, re.MULTILINE)
    assert len(ratios) == sum(len(r["contenders"]) for r in results), result.stdout
    assert all(math.isfinite(float(x)) and float(x) > 0 for x in ratios), ratios


def test_partition_by_takes_case_names_with_their_commas(partout_bin, lineitem, tmp_path):
    result, report = run_partition_by(partout_bin, lineitem, tmp_path, "--only", "partout",
                                      "--cases", "10,000 values,4 values")
    assert result.returncode == 0, result.stderr[-3000:]
    cases = [r["case"] for r in json.loads(report.read_text())["results"]]
    assert cases == ["4 values", "10,000 values"]


def test_partition_by_refuses_a_case_it_does_not_have(partout_bin, lineitem, tmp_path):
    result, report = run_partition_by(partout_bin, lineitem, tmp_path, "--only", "partout",
                                      "--cases", "4 values,5 values")
    assert result.returncode != 0
    assert "unknown case(s) ['5 values']" in result.stderr, result.stderr
    assert not report.exists()


def finite_ratio(x):
    return x is not None and math.isfinite(x) and x > 0


def test_e2e_runs_every_contender_with_every_output_checked(partout_bin, tmp_path):
    # Through bench/e2e.sh as a reader runs it: the input made at SF 0.01, every contender
    # (partout on 1 and 2 threads, the same binary again as the baseline, DuckDB, Polars).
    report = tmp_path / "files.json"
    result = subprocess.run(
        ["bash", str(BENCH / "e2e.sh"), "--sf", "0.01", "--rounds", "1", "--warmup", "0",
         "--partitions", "16", "--baseline", partout_bin, "--json", str(report),
         "--out", str(tmp_path / "out")],
        env={**os.environ, "PARTOUT": partout_bin, "SKIP_BUILD": "1",
             "BENCH_PYTHON": sys.executable},
        capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(report.read_text())
    names = ["partout-1t", "partout-2t", "duckdb", "polars", "baseline-1t", "baseline-2t"]
    assert sorted(found["summary"]) == sorted(names)
    rows = found["input"]["rows"]
    assert rows > 50_000, found["input"]
    for name in names:
        m = found["summary"][name]
        assert finite_ratio(m["ratio_vs_partout"]) and finite_ratio(m["median_s"]), (name, m)
        [sample] = found["samples"][name]
        assert sample["files"] >= 16 and sample["output_bytes"] > 0, (name, sample)
        assert m["row_groups"]["count"] >= sample["files"], (name, m["row_groups"])
        # Each round's line says what its output's check by value found.
        label = m["label"]
        line = next(l for l in result.stdout.splitlines() if l.startswith("round 1/1") and label in l)
        what = ("every key in one file, every row once" if name.startswith("baseline")
                else "every destination's values")
        assert line.endswith(f"{rows:,} rows, {what} ok"), line
    assert finite_ratio(found["partout_speedup_over_1_thread"])
    # Nothing left behind: each output is removed after its check.
    assert not any((tmp_path / "out").glob("*-*t")), list((tmp_path / "out").iterdir())


def test_python_partition_checks_every_contender_at_every_count(lineitem, tmp_path):
    report = tmp_path / "partition.json"
    result = subprocess.run(
        [sys.executable, str(BENCH / "python_partition.py"), "--here", "--input", str(lineitem),
         "--rounds", "1", "--partitions", "4,64", "--json", str(report)],
        capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(report.read_text())
    assert [r["partitions"] for r in found["results"]] == [4, 64]
    names = {"partout", "polars partition_by", "ray recipe", "pyarrow take per bucket"}
    for r in found["results"]:
        # Every contender's buckets went through the check before any was timed.
        assert set(r["checked"]) == names == set(r["median_s"]), r
        assert all(finite_ratio(t) for t in r["median_s"].values()), r
        assert finite_ratio(r["fastest_peer_ratio"]), r
    printed = re.findall(r"^fastest peer / partout: (\d+\.\d+)x$", result.stdout, re.MULTILINE)
    assert len(printed) == 2, result.stdout


def test_python_dataset_checks_every_contender_in_every_case(partout_bin, lineitem, tmp_path):
    report = tmp_path / "dataset.json"
    result = subprocess.run(
        [sys.executable, str(BENCH / "python_dataset.py"), "--here", "--input", str(lineitem),
         "--rounds", "1", "--out", str(tmp_path / "out"), "--json", str(report)],
        env={**os.environ, "PARTOUT": partout_bin}, capture_output=True, text=True,
        timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(report.read_text())
    assert [r["case"] for r in found["results"]] == ["4 values", "~2,500 values"]
    names = {"partout", "polars", "pyarrow", "partout CLI from the file"}
    for r in found["results"]:
        assert set(r["checked"]) == names == set(r["median_s"]), r
        for name, c in r["checked"].items():
            # The same rows per key value as the input, a directory for each value.
            assert c["same"] and c["files"] >= c["directories"] == c["values"] > 0, (name, c)
        assert all(finite_ratio(t) for t in r["median_s"].values()), r
        assert finite_ratio(r["fastest_peer_ratio"]), r
    values = [r["checked"]["partout"]["values"] for r in found["results"]]
    assert values[0] == 4 and values[1] > 1000, values


def test_object_store_runs_every_contender_with_outputs_checked(partout_bin, s3_server_bin,
                                                                lineitem, tmp_path):
    duckdb = os.environ.get("PARTOUT_DUCKDB_HTTPFS_PYTHON")
    assert duckdb, "PARTOUT_DUCKDB_HTTPFS_PYTHON names DuckDB's Python with httpfs (./run-tests)"
    report, figure = tmp_path / "store.json", tmp_path / "figure.json"
    result = subprocess.run(
        [sys.executable, str(BENCH / "object_store.py"), "--input", str(lineitem),
         "--rounds", "1", "--json", str(report), "--figure", str(figure),
         "--s3-server", s3_server_bin, "--python", sys.executable, "--duckdb-python", duckdb,
         "--work", str(tmp_path / "work")],
        env={**os.environ, "PARTOUT": partout_bin}, capture_output=True, text=True,
        timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "outputs checked: rows and sums per destination and per value" in result.stdout
    found = json.loads(report.read_text())
    names = ["partout-local", "partout-s3", "partout-in-s3", "partout-s3-s3", "partout-s3-10000",
             "partout-s3-4", "polars-s3-4", "duckdb-s3-4", "partout-s3-dates",
             "polars-s3-dates", "duckdb-s3-dates"]
    assert sorted(found["runs"]) == sorted(names)
    assert all(len(found["runs"][n]) == 1 for n in names)
    ratios = re.findall(r"^  [^:]+: (\d+\.\d+)x$", result.stdout, re.MULTILINE)
    assert len(ratios) == 7 and all(finite_ratio(float(x)) for x in ratios), result.stdout
    cases = json.loads(figure.read_text())["results"]
    assert [c["case"] for c in cases] == ["4", "dates"]
    assert all(set(c["contenders"]) == {"partout", "duckdb", "polars"} for c in cases), cases


def sections(text):
    """A benchmark example's printed sections (a line `1. ...`, `1b. ...` or `1, ...` opens one):
    each heading with its table's rows as (first cell, ratio), the rows that print a ratio."""
    found = []
    for line in text.splitlines():
        if re.match(r"^\d+b?[.,] ", line):
            found.append((line, []))
        elif found and (row := re.match(r"^\s*(q\d+|total|\d+)\s.*?\s(\d+\.\d+)x(\s|$)", line)):
            found[-1][1].append((row.group(1), float(row.group(2))))
    return found


def assert_tables(found, expected):
    """`found` (sections()) holds the sections `expected` lists, in order, by the start of their
    heading, each with exactly its rows, every ratio finite."""
    assert [(h[: len(e)], [label for label, _ in rows]) for (h, rows), (e, _) in
            zip(found, expected)] == expected, found
    assert len(found) == len(expected), found
    for heading, rows in found:
        assert all(finite_ratio(ratio) for _, ratio in rows), (heading, rows)


QUERIES = [f"q{n}" for n in range(1, 23)] + ["total"]


def test_datafusion_bench_runs_every_section_with_every_output_checked(datafusion_bench_bin):
    # The operator beside DataFusion's RepartitionExec (every output's rows checked against
    # DataFusion's partition ids), alone in processes, with the allocator kept warm, preserving
    # order, read in order, and the 22 queries with the rule off and on (answers compared).
    # SF 0.001: in the dev profile SF 0.01 took 77 s here, 0.001 41 s, with every case run.
    result = subprocess.run(
        [datafusion_bench_bin, "--sf", "0.001", "--rounds", "1", "--query-rounds", "1"],
        capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, (result.stdout[-2000:], result.stderr[-3000:])
    one = ["16", "64", "200"]
    assert_tables(sections(result.stdout), [
        ("1. The operator alone", one),
        ("1, each contender alone", one),
        ("1. The operator alone", one),
        ("1, each contender alone", one),
        ("1b. Preserving order", ["16", "64"]),
        ("2. Outputs read one after another", ["4", "64"]),
        ("3. TPC-H", QUERIES),
    ])


def test_ballista_bench_runs_every_section_with_every_output_checked(ballista_bench_bin):
    # The shuffle write beside Ballista's own (every partition read back by Ballista's reader
    # and checked), then the 22 queries on a cluster of each engine (answers compared).
    # SF 0.001: in the dev profile SF 0.01 took 217 s here, 0.001 72 s, with every case run.
    result = subprocess.run([ballista_bench_bin, "--sf", "0.001", "--rounds", "1"],
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, (result.stdout[-2000:], result.stderr[-3000:])
    found = sections(result.stdout)
    assert_tables(found[:2], [("1. ", ["16", "64", "200"]), ("2. TPC-H", QUERIES)])
    assert found[2][0].startswith("3. The same runs' hash shuffle stages"), found
