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
