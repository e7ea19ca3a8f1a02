#!/usr/bin/env python3
"""Object stores: TPC-H lineitem SF 1 (one Parquet file, about 1 GB as Arrow) read from and
written to an S3 server on 127.0.0.1 in another process (s3s-fs, a file-system-backed S3
server, installed with cargo into target/bench-tools on first use), Snappy Parquet, 2
threads, partout's default memory limit (256 MiB):

  partout-local      partout repartition IN --by l_orderkey -n 64 -o DIR        (the yardstick)
  partout-s3         ... the same -o s3://lake/p64 --storage-option ...
  partout-in-s3      ... the same from s3://lake/in/ (ranged GETs) -o DIR
  partout-s3-s3      ... from s3://lake/in/ -o s3://lake/…
  partout-s3-10000   ... from s3://lake/in/ -n 10000 --format ipc --layout shuffle -o s3://lake/…
  partout-s3-4       partout repartition IN --partition-by l_returnflag,l_linestatus -o s3://…
  polars-s3-4        scan_parquet(IN).sink_parquet(PartitionBy(s3://lake/…, key=…), storage_options=…)
  duckdb-s3-4        COPY (FROM IN) TO 's3://lake/…' (PARTITION_BY (…))   (httpfs; DuckDB 1.5.5)
  partout-s3-dates / polars-s3-dates / duckdb-s3-dates: the same by l_shipdate (2,526 values)

Each run is a fresh process (wall time, peak RSS from os.wait4: measured from outside, the
server's memory apart); contenders alternate round by round. Outputs are checked: the runs
by l_orderkey give the same rows per destination (their manifests), 10,000 destinations all
the input's rows, and the datasets by value the same rows and column sums per value for every
contender (read back from the server's directory by pyarrow). Prints medians and ratios.

Usage: bench/object_store.py [--input lineitem.parquet] [--rounds 5] [--only a,b] [--json F]
           [--s3-server BIN] [--python PY] [--duckdb-python PY] [--work DIR] [--figure F]
The input defaults to target/bench-data/lineitem-sf1.parquet (bench/e2e.sh makes it), Polars
and pyarrow to bench/.venv's (bench/e2e.sh installs them), DuckDB with httpfs to
.venv-duckdb-httpfs (./run-tests makes it). The S3 server is partout-job's s3_server example
(s3s-fs, the tests' server; built here when missing). The by-value medians are written for
the figure to bench/results/object_store.json unless --figure names another file.
"""

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PARTOUT = Path(os.environ.get("PARTOUT", ROOT / "target" / "release" / "partout"))
WORK = ROOT / "target" / "bench-out" / "object-store"
SERVER = ROOT / "target" / "release" / "examples" / "s3_server"
KEY, SECRET = "bench", "bench-secret"
POLARS = """
import sys, polars as pl
source, out, endpoint, keys = sys.argv[1:5]
options = {"aws_endpoint_url": endpoint, "aws_access_key_id": "bench",
           "aws_secret_access_key": "bench-secret", "aws_region": "us-east-1",
           "aws_allow_http": "true"}
pl.scan_parquet(source).sink_parquet(
    pl.PartitionBy(out, key=keys.split(",")), storage_options=options, mkdir=True)
"""
UPLOAD = """
import sys, pyarrow.fs as pafs
s3 = pafs.S3FileSystem(access_key="bench", secret_key="bench-secret", endpoint_override=sys.argv[2],
                       scheme="http", region="us-east-1")
pafs.copy_files(sys.argv[1], "lake/in/lineitem.parquet", destination_filesystem=s3)
"""
DUCKDB = """
import duckdb, glob, os, sys
import duckdb_extension_httpfs as ext
source, out, endpoint, keys = sys.argv[1:5]
con = duckdb.connect()
con.execute("SET threads = 2")
con.execute("LOAD '%s'" % glob.glob(os.path.join(os.path.dirname(ext.__file__), "extensions", "*",
                                                 "httpfs.duckdb_extension"))[0])
for setting, value in [("s3_endpoint", endpoint.removeprefix("http://")), ("s3_use_ssl", "false"),
                       ("s3_url_style", "path"), ("s3_access_key_id", "bench"),
                       ("s3_secret_access_key", "bench-secret"), ("s3_region", "us-east-1")]:
    con.execute(f"SET {setting} = '{value}'")
con.execute(f"COPY (FROM read_parquet('{source}')) TO '{out}' "
            f"(FORMAT parquet, COMPRESSION snappy, PARTITION_BY ({keys}))")
"""


def server(binary):
    """Starts the S3 server `binary` (partout-job's s3_server example) on a port of 127.0.0.1
    it picks, serving WORK/root; its process and URL."""
    if not binary.exists():
        subprocess.run(["cargo", "build", "--release", "-p", "partout-job", "--example",
                        "s3_server"], check=True, cwd=ROOT)
    root = WORK / "root"
    shutil.rmtree(root, ignore_errors=True)
    (root / "lake").mkdir(parents=True)
    process = subprocess.Popen([str(binary), str(root), "0", KEY, SECRET],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = process.stdout.readline()
    if not line.startswith("s3: "):
        process.kill()
        sys.exit(f"the S3 server did not start: {line!r}")
    return process, line.removeprefix("s3: ").strip(), root


def timed(command):
    """Wall seconds and peak RSS (MiB) of `command`, run to its end."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    if status != 0:
        sys.exit(f"{command[0]} failed: {process.stderr.read().decode()}")
    return wall, usage.ru_maxrss / 1024


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--input", default=ROOT / "target" / "bench-data" / "lineitem-sf1.parquet")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", help="contenders to run, comma-separated (partout-local always)")
    parser.add_argument("--json")
    parser.add_argument("--s3-server", type=Path, default=SERVER)
    parser.add_argument("--python", default=ROOT / "bench" / ".venv" / "bin" / "python",
                        help="the Python with Polars and pyarrow")
    parser.add_argument("--duckdb-python", default=ROOT / ".venv-duckdb-httpfs" / "bin" / "python",
                        help="the Python with DuckDB and its httpfs extension")
    parser.add_argument("--work", type=Path, default=None,
                        help="the server's files and outputs (default: target/bench-out/object-store)")
    parser.add_argument("--figure", type=Path, default=ROOT / "bench" / "results" / "object_store.json")
    args = parser.parse_args()
    global WORK
    WORK = (args.work or WORK).resolve()
    python, duckdb = args.python, args.duckdb_python
    process, endpoint, root = server(args.s3_server)
    # Uploaded through the server (an object copied into its directory has no stored ETag,
    # and s3s-fs would hash the whole file for every ranged GET of it).
    # (In a process of its own: the contenders are forked from this one, whose pages count in
    # their peak RSS until they exec.)
    subprocess.run([str(python), "-c", UPLOAD, str(args.input), endpoint], check=True)
    storage = []
    for key, value in [("aws_endpoint", endpoint), ("aws_allow_http", "true"),
                       ("aws_access_key_id", KEY), ("aws_secret_access_key", SECRET),
                       ("aws_region", "us-east-1")]:
        storage += ["--storage-option", f"{key}={value}"]
    local, remote = str(args.input), "s3://lake/in/"
    job = [str(PARTOUT), "repartition", "--quiet", "--threads", "2", "--overwrite"]
    by64 = ["--by", "l_orderkey", "-n", "64"]
    flags, dates = "l_returnflag,l_linestatus", "l_shipdate"
    contenders = {
        "partout-local": job + [local] + by64 + ["-o", str(WORK / "local")],
        "partout-s3": job + [local] + by64 + ["-o", "s3://lake/p64"] + storage,
        "partout-in-s3": job + [remote] + by64 + ["-o", str(WORK / "from-s3")] + storage,
        "partout-s3-s3": job + [remote] + by64 + ["-o", "s3://lake/s64"] + storage,
        "partout-s3-10000": job + [remote, "--by", "l_orderkey", "-n", "10000", "--format", "ipc",
                                   "--layout", "shuffle", "-o", "s3://lake/s10000"] + storage,
        "partout-s3-4": job + [local, "--partition-by", flags, "-o", "s3://lake/pt4"] + storage,
        "polars-s3-4": [str(python), "-c", POLARS, local, "s3://lake/pl4", endpoint, flags],
        "duckdb-s3-4": [str(duckdb), "-c", DUCKDB, local, "s3://lake/dk4", endpoint, flags],
        "partout-s3-dates": job + [local, "--partition-by", dates, "--max-partitions", "3000",
                                   "-o", "s3://lake/ptd"] + storage,
        "polars-s3-dates": [str(python), "-c", POLARS, local, "s3://lake/pld", endpoint, dates],
        "duckdb-s3-dates": [str(duckdb), "-c", DUCKDB, local, "s3://lake/dkd", endpoint, dates],
    }
    if args.only:
        keep = {"partout-local", *args.only.split(",")}
        contenders = {n: c for n, c in contenders.items() if n in keep}
    runs = {name: [] for name in contenders}
    try:
        for r in range(args.rounds):
            names = list(contenders)
            for name in names[r % len(names):] + names[: r % len(names)]:
                runs[name].append(timed(contenders[name]))
                if name.startswith(("polars", "duckdb")) and r < args.rounds - 1:
                    # Their outputs are written anew each round (partout's with --overwrite).
                    shutil.rmtree(root / "lake" / contenders[name][4].removeprefix("s3://lake/"),
                                  ignore_errors=True)
        check(root, contenders)
    finally:
        process.terminate()
    median = {n: (statistics.median(w for w, _ in v), statistics.median(m for _, m in v)) for n, v in runs.items()}
    print(f"{cpu()}, {os.cpu_count()} CPUs, {args.rounds} rounds, medians")
    for name, (wall, peak) in median.items():
        print(f"  {name:17} {wall:6.2f} s  {peak:7.0f} MiB")
    ratio = lambda a, b, what: a in median and b in median and print(
        f"  {what}: {median[a][0] / median[b][0]:.2f}x")
    ratio("partout-s3", "partout-local", "64 files to S3 ÷ to local disk, the time")
    ratio("partout-in-s3", "partout-local", "64 files from S3 ÷ from local disk, the time")
    ratio("partout-s3-s3", "partout-local", "64 files from and to S3 ÷ local, the time")
    for values in ["4", "dates"]:
        for peer in ["polars", "duckdb"]:
            ratio(f"{peer}-s3-{values}", f"partout-s3-{values}", f"by {values} values to S3, {peer} ÷ partout")
    if args.json:
        Path(args.json).write_text(json.dumps({"cpu": cpu(), "runs": runs, "medians": median}, indent=1))
    figure = figure_json(args.input, args.rounds, runs)
    if figure:
        args.figure.write_text(json.dumps(figure, indent=1))


def figure_json(source, rounds, runs):
    """The by-value runs to S3 as partout-plots' bar figure takes them (partition_by.json's
    form): per case, each contender's median seconds and peak RSS; the values counted from
    partout's manifest."""
    cases = []
    for values, short, columns in [("4", "pt4", ["l_returnflag", "l_linestatus"]),
                                   ("dates", "ptd", ["l_shipdate"])]:
        contenders = {}
        for peer in ["partout", "duckdb", "polars"]:
            got = runs.get(f"{peer}-s3-{values}")
            if got:
                contenders[peer] = {"median_s": statistics.median(w for w, _ in got),
                                    "peak_rss_mib": statistics.median(m for _, m in got),
                                    "runs": len(got)}
        manifest = WORK / "root" / "lake" / short / "_manifest.json"
        if contenders and manifest.exists():
            count = len(json.loads(manifest.read_text())["destinations"])
            for summary in contenders.values():
                summary["values"] = count
            cases.append({"case": values, "columns": columns, "contenders": contenders})
    if not cases:
        return None
    return {"input": Path(source).name, "machine": {"cpu": cpu()}, "threads": 2, "rounds": rounds,
            "date": time.strftime("%Y-%m-%d", time.gmtime()),
            "title": "partitioned by value into an S3 server on loopback (s3s-fs, another process), "
                     "Snappy Parquet",
            "results": cases}


def cpu():
    """The processor's name (Linux), else the machine's."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


def check(root, contenders):
    """The outputs agree: the same rows per destination, the same rows and sums per value."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    lake = root / "lake"
    manifest = lambda d: json.loads((d / "_manifest.json").read_text())

    def stats(files):
        n, a, b = 0, 0, 0
        for f in files:
            t = pq.read_table(f)
            n, a, b = n + t.num_rows, a + pc.sum(t["l_orderkey"]).as_py(), b + pc.sum(t["l_extendedprice"]).as_py()
        return n, a, str(b)

    def by_destination(out):
        """Each destination's rows, as its manifest entry counts them and as its files hold them
        read back (rows and the sums of two columns)."""
        return [(d["rows"], stats([out / f["name"] for f in d.get("files") or []]))
                for d in manifest(out)["destinations"]]

    local = by_destination(WORK / "local")
    for name, out in [("partout-s3", lake / "p64"), ("partout-in-s3", WORK / "from-s3"),
                      ("partout-s3-s3", lake / "s64")]:
        if name in contenders:
            assert by_destination(out) == local, f"{name}: a destination's rows differ"
    if "partout-s3-10000" in contenders:
        rows = sum(n for n, _ in local)
        assert manifest(lake / "s10000")["output_rows"] == rows, "10,000: rows lost"

    def by_value(out):
        """Rows and sums per value directory (`k=v/…`), whichever files each holds."""
        files = {}
        for path in out.rglob("*.parquet"):
            value = "/".join(p for p in path.relative_to(out).parts[:-1])
            files.setdefault(value, []).append(path)
        return {value: stats(paths) for value, paths in files.items()}

    for values in ["4", "dates"]:
        short = {"partout": "pt", "polars": "pl", "duckdb": "dk"}
        outs = {p: lake / f"{s}{'4' if values == '4' else 'd'}" for p, s in short.items()
                if f"{p}-s3-{values}" in contenders}
        found = {p: by_value(d) for p, d in outs.items()}
        for p, got in found.items():
            first = next(iter(found))
            assert got and got == found[first], f"by {values}: {p} differs from {first}"
    print("outputs checked: rows and sums per destination and per value")


if __name__ == "__main__":
    main()
