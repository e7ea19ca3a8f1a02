#!/usr/bin/env python3
"""Writing to an object store: TPC-H lineitem (one Parquet file) to an S3 server on
127.0.0.1 in another process (s3s-fs, a file-system-backed S3 server, installed with cargo
into target/bench-tools on first use), Snappy Parquet, 2 threads:

  partout-local   partout repartition IN --by l_orderkey -n 64 -o DIR          (the yardstick)
  partout-s3      partout repartition IN --by l_orderkey -n 64 -o s3://lake/…  --storage-option …
  partout-s3-4    partout repartition IN --partition-by l_returnflag,l_linestatus -o s3://lake/…
  polars-s3-4     scan_parquet(IN).sink_parquet(PartitionBy(s3://lake/…, key=…), storage_options=…)

Each run is a fresh process (wall time, peak RSS from os.wait4); contenders alternate round
by round. Outputs are checked: the 64-file runs give the same rows per destination (their
manifests), and partout's and Polars' datasets by value the same rows and column sums per
value (read back from the server's directory by pyarrow). Prints medians and ratios.

Usage: bench/object_store.py [--input lineitem.parquet] [--rounds 5] [--json results.json]
The input defaults to target/bench-data/lineitem-sf1.parquet (bench/e2e.sh makes it), Polars
and pyarrow to bench/.venv's (bench/e2e.sh installs them).
"""

import argparse
import glob
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PARTOUT = Path(os.environ.get("PARTOUT", ROOT / "target" / "release" / "partout"))
TOOLS = ROOT / "target" / "bench-tools"
WORK = ROOT / "target" / "bench-out" / "object-store"
KEY, SECRET = "bench", "bench-secret"
POLARS = """
import sys, polars as pl
source, out, endpoint = sys.argv[1:4]
options = {"aws_endpoint_url": endpoint, "aws_access_key_id": "bench",
           "aws_secret_access_key": "bench-secret", "aws_region": "us-east-1",
           "aws_allow_http": "true"}
pl.scan_parquet(source).sink_parquet(
    pl.PartitionBy(out, key=["l_returnflag", "l_linestatus"]), storage_options=options, mkdir=True)
"""


def server():
    """Starts s3s-fs on a free port of 127.0.0.1 serving WORK/root; its process and URL."""
    binary = TOOLS / "bin" / "s3s-fs"
    if not binary.exists():
        subprocess.run(["cargo", "install", "s3s-fs", "--version", "=0.14.1", "--features", "binary",
                        "--root", str(TOOLS)], check=True)
    root = WORK / "root"
    shutil.rmtree(root, ignore_errors=True)
    (root / "lake").mkdir(parents=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    process = subprocess.Popen([str(binary), "--host", "127.0.0.1", "--port", str(port),
                                "--access-key", KEY, "--secret-key", SECRET, str(root)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return process, f"http://127.0.0.1:{port}", root
        except OSError:
            time.sleep(0.05)
    sys.exit("s3s-fs did not start")


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
    parser.add_argument("--json")
    args = parser.parse_args()
    python = ROOT / "bench" / ".venv" / "bin" / "python"
    process, endpoint, root = server()
    storage = []
    for key, value in [("aws_endpoint", endpoint), ("aws_allow_http", "true"),
                       ("aws_access_key_id", KEY), ("aws_secret_access_key", SECRET),
                       ("aws_region", "us-east-1")]:
        storage += ["--storage-option", f"{key}={value}"]
    job = [str(PARTOUT), "repartition", "--quiet", str(args.input), "--threads", "2", "--overwrite"]
    contenders = {
        "partout-local": job + ["--by", "l_orderkey", "-n", "64", "-o", str(WORK / "local")],
        "partout-s3": job + ["--by", "l_orderkey", "-n", "64", "-o", "s3://lake/p64"] + storage,
        "partout-s3-4": job + ["--partition-by", "l_returnflag,l_linestatus", "-o", "s3://lake/pt4"] + storage,
        "polars-s3-4": [str(python), "-c", POLARS, str(args.input), "s3://lake/pl4", endpoint],
    }
    runs = {name: [] for name in contenders}
    try:
        for r in range(args.rounds):
            names = list(contenders)
            for name in names[r % len(names):] + names[: r % len(names)]:
                runs[name].append(timed(contenders[name]))
        check(root)
    finally:
        process.terminate()
    median = {n: (statistics.median(w for w, _ in v), statistics.median(m for _, m in v)) for n, v in runs.items()}
    print(f"{cpu()}, {os.cpu_count()} CPUs, {args.rounds} rounds, medians")
    for name, (wall, peak) in median.items():
        print(f"  {name:14} {wall:6.2f} s  {peak:7.0f} MiB")
    print(f"  to S3 ÷ to local disk, 64 files: {median['partout-s3'][0] / median['partout-local'][0]:.2f}x the time")
    print(f"  by 4 values to S3, Polars ÷ partout: {median['polars-s3-4'][0] / median['partout-s3-4'][0]:.2f}x")
    if args.json:
        Path(args.json).write_text(json.dumps({"runs": runs, "medians": median}, indent=1))


def cpu():
    """The processor's name (Linux), else the machine's."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


def check(root):
    """The outputs agree: the same rows per destination, the same rows and sums per value."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    local = json.loads((WORK / "local" / "_manifest.json").read_text())
    stored = json.loads((root / "lake" / "p64" / "_manifest.json").read_text())
    rows = lambda m: [d["rows"] for d in m["destinations"]]
    assert rows(local) == rows(stored), "64 files: rows per destination differ"

    def stats(table):
        return table.num_rows, pc.sum(table["l_orderkey"]).as_py(), str(pc.sum(table["l_extendedprice"]).as_py())

    manifest = json.loads((root / "lake" / "pt4" / "_manifest.json").read_text())
    ours = {d["file"].rsplit("/", 1)[0]: stats(pq.read_table(root / "lake" / "pt4" / d["file"]))
            for d in manifest["destinations"]}
    theirs = {}
    for path in glob.glob(str(root / "lake" / "pl4" / "*" / "*" / "*.parquet")):
        value = "/".join(path.split("/")[-3:-1])
        n, a, b = stats(pq.read_table(path))
        old = theirs.get(value)
        theirs[value] = (n, a, b) if old is None else None  # one file per value expected
    assert ours == theirs, f"by value: {ours} != {theirs}"
    print("outputs checked: rows per destination; rows and sums per value")


if __name__ == "__main__":
    main()
