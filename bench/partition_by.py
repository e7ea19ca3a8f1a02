#!/usr/bin/env python3
"""Partitioning by value: TPC-H lineitem (one Parquet file) into a Hive-layout dataset, a
directory per distinct value, Snappy Parquet, 2 threads, by

  partout   target/release/partout repartition IN --partition-by COLS --threads 2
  duckdb    COPY (SELECT * FROM read_parquet(IN)) TO OUT (FORMAT parquet, PARTITION_BY (COLS))
  polars    scan_parquet(IN).sink_parquet(PartitionBy(OUT, key=COLS))
  pyarrow   dataset.write_dataset(dataset(IN), OUT, partitioning=COLS, flavor hive)
            (lineitem's string-view columns read as strings: pyarrow's write_dataset has no
            take kernel for string views)

for three keys: (l_returnflag, l_linestatus) with 4 values, l_shipdate with ~2,500, and
l_suppkey with 10,000 at SF 1 (pyarrow once per case, and not at 10,000 values: see
PYARROW_MAX_VALUES). Each run is a fresh process (peak RSS from os.wait4), the
contenders' order rotates every round, and each contender's first output is checked: the
same rows as the input per key value (count and sums of two columns, grouped by the key, the
dataset read back by pyarrow with its hive partitioning) and every file in the directory of
its key. Prints medians, ratios (the fastest peer's time over partout's) and files.

Usage: bench/partition_by.py [--input lineitem.parquet] [--rounds 3] [--threads 2]
       [--only partout,duckdb] [--json results.json] [--out DIR]
       [--max-bytes-per-file BYTES] [--cases "4 values,~2,500 values"]
       [--sort-by "l_shipdate,l_orderkey"] [--memory-limit 64MiB]

--max-bytes-per-file rolls each value's files over at about that size: partout's
--max-bytes-per-file, DuckDB's FILE_SIZE_BYTES, Polars' approximate_bytes_per_file (pyarrow
has no byte limit and is left out); the table then shows each contender's largest file.

--sort-by sorts the rows within each file by those columns (less the case's partition columns,
one value a file), ascending: partout's --sort-by
(sorted in its memory limit, spilling sorted runs), DuckDB's ORDER BY in the query it
copies, Polars' sort before its partitioned sink (pyarrow is left out: its dataset writer
keeps the order of its input only with preserve_order, after a sort of the whole input in
memory). Every file of every contender's first output is then checked to be sorted, and the
table says how many are: DuckDB's partitioned COPY writes in parallel and does not keep the
order of its query in each file.
--memory-limit is partout's (default 256 MiB); the peers take none and are measured as
they run.

--out puts the outputs elsewhere than target/bench-out/partition-by: on a tmpfs
(/dev/shm/...) the runs measure the writers, not the file system. Each run removes the last
run's output first, and on ext4 without a journal (as some virtual machines' disks are) an
inode freed less than a minute before is passed over while the next file is created: 2,526
directories and files just removed added ~2.7 s to partout's 5.4 s at ~2,500 values, and
they weigh on every contender alike.
The input defaults to target/bench-data/lineitem-sf1.parquet (bench/e2e.sh makes it), the
Python libraries to bench/.venv's (bench/e2e.sh installs them).
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import python_partition  # the CPU's name, as every bench script gives it

ROOT = Path(__file__).resolve().parent.parent
PARTOUT = Path(os.environ.get("PARTOUT", ROOT / "target" / "release" / "partout"))
OUT = ROOT / "target" / "bench-out" / "partition-by"
# partout's --max-partitions: each allowed value is set aside a few hundred bytes; the values
# met get the buffers, until more are met than the buffers can serve (then sorted runs). A
# number, or "near": the default 1000 where it suffices, else the case's value count rounded
# up to a thousand, as a user who knows the data would set it.
MAX_PARTITIONS = "100000"
# --max-bytes-per-file: files roll over at about this many bytes (None: one file a value).
MAX_BYTES = None
# --sort-by: the columns each file's rows are sorted by, ascending (None: as they come).
SORT_BY = None
# --memory-limit: partout's (None: its default).
MEMORY_LIMIT = None

CASES = [
    ("4 values", ["l_returnflag", "l_linestatus"]),
    ("~2,500 values", ["l_shipdate"]),
    ("10,000 values", ["l_suppkey"]),
]
# pyarrow's write_dataset slows down with the number of values far more than the others (at
# SF 1 by l_shipdate it took 115 s and 9 GiB where the others took 5-8 s): it runs once per
# case, and not at all past this many values.
PYARROW_MAX_VALUES = 3000
VALUES = {"4 values": 4, "~2,500 values": 2526, "10,000 values": 10000}
CONTENDERS = ["partout", "duckdb", "polars", "pyarrow"]

CHILD = r'''
import json, os, sys, time
name, inp, out, cols, threads = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split(","), int(sys.argv[5])
max_bytes = int(sys.argv[6]) if sys.argv[6] else None
sort_by = sys.argv[7].split(",") if sys.argv[7] else None
if name == "duckdb":
    import duckdb
    con = duckdb.connect()
    con.execute(f"SET threads={threads}")
    t0 = time.perf_counter()
    order = f" ORDER BY {', '.join(sort_by)}" if sort_by else ""
    con.execute(f"COPY (SELECT * FROM read_parquet('{inp}'){order}) TO '{out}' "
                f"(FORMAT parquet, PARTITION_BY ({', '.join(cols)}), COMPRESSION snappy"
                + (f", FILE_SIZE_BYTES {max_bytes})" if max_bytes else ")"))
elif name == "polars":
    os.environ["POLARS_MAX_THREADS"] = str(threads)
    import polars as pl
    t0 = time.perf_counter()
    rolled = {"approximate_bytes_per_file": max_bytes} if max_bytes else {}
    frame = pl.scan_parquet(inp)
    if sort_by:
        frame = frame.sort(sort_by)
    frame.sink_parquet(pl.PartitionBy(out, key=cols, include_key=False, **rolled),
                       mkdir=True, compression="snappy")
elif name == "pyarrow":
    import pyarrow as pa, pyarrow.dataset as ds
    pa.set_cpu_count(threads)
    pa.set_io_thread_count(threads)
    schema = ds.dataset(inp).schema
    plain = pa.schema([f.with_type(pa.string()) if f.type == pa.string_view() else f
                       for f in schema])
    t0 = time.perf_counter()
    ds.write_dataset(ds.dataset(inp, schema=plain), out, format="parquet",
                     partitioning=cols, partitioning_flavor="hive", max_partitions=100_000,
                     max_open_files=100_000,
                     file_options=ds.ParquetFileFormat().make_write_options(compression="snappy"))
print(json.dumps({"work_s": time.perf_counter() - t0}))
'''

CHECK = r'''
import json, sys
import pyarrow as pa, pyarrow.dataset as ds, pyarrow.compute as pc
inp, out, cols = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
sort_by = sys.argv[4].split(",") if sys.argv[4] else []
source = ds.dataset(inp)
types = pa.schema([source.schema.field(c) for c in cols])
types = pa.schema([f.with_type(pa.string()) if f.type == pa.string_view() else f for f in types])
def summary(table):
    table = table.select(cols + ["l_orderkey", "l_quantity"])
    table = table.set_column(table.schema.get_field_index("l_quantity"), "l_quantity",
                             pc.cast(table.column("l_quantity"), pa.float64()))
    for c in cols:
        table = table.set_column(table.schema.get_field_index(c), c, table.column(c).cast(types.field(c).type))
    g = table.group_by(cols).aggregate([("l_orderkey", "count"), ("l_orderkey", "sum"),
                                         ("l_quantity", "sum")])
    return sorted(tuple(str(v) for v in row.values()) for row in g.to_pylist())
expected = summary(source.to_table(columns=cols + ["l_orderkey", "l_quantity"]))
got_ds = ds.dataset(out, format="parquet", partitioning=ds.partitioning(types, flavor="hive"))
got = summary(got_ds.to_table(columns=cols + ["l_orderkey", "l_quantity"]))
files = [f for f in got_ds.files]
# Sorted: each file's sort columns as pyarrow's sort of its rows puts them.
import pyarrow.parquet as pq
unsorted = 0
for f in files if sort_by else []:
    part = pq.read_table(f, columns=sort_by)
    order = pc.sort_indices(part, sort_keys=[(c, "ascending") for c in sort_by])
    unsorted += not all(part[c].equals(part[c].take(order)) for c in sort_by)
# Every file inside its value's directory: the directories' values are what was partitioned.
dirs = {f.rsplit("/", 1)[0] for f in files}
print(json.dumps({"same": expected == got, "values": len(expected), "files": len(files),
                  "directories": len(dirs), "unsorted": unsorted}))
'''


def run(cmd, env=None):
    """Runs `cmd`: its wall seconds, peak RSS (MiB) and stdout."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    out, err = p.stdout.read().decode(), p.stderr.read().decode()
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        shown = cmd[3:] if cmd[1] == "-c" else cmd[1:]
        raise SystemExit(f"{Path(cmd[0]).name} {shown} failed ({p.returncode}): {err[-1500:]}")
    return wall, usage.ru_maxrss / 1024, out


def sort_keys(cols):
    """The --sort-by columns that are in the files: a partition column has one value a file."""
    return [c for c in SORT_BY or [] if c not in cols]


def limit(cols):
    if MAX_PARTITIONS != "near":
        return MAX_PARTITIONS
    values = next(VALUES[case] for case, c in CASES if c == cols)
    return str(max(1000, -(-values // 1000) * 1000))


def contender(name, python, inp, out, cols, threads):
    if out.exists():
        shutil.rmtree(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if name == "partout":
        rolled = ["--max-bytes-per-file", str(MAX_BYTES)] if MAX_BYTES else []
        rolled += ["--sort-by", ",".join(sort_keys(cols))] if sort_keys(cols) else []
        rolled += ["--memory-limit", MEMORY_LIMIT] if MEMORY_LIMIT else []
        wall, rss, _ = run([str(PARTOUT), "repartition", str(inp), "--partition-by",
                            ",".join(cols), "--max-partitions", limit(cols), "--threads",
                            str(threads), "--quiet", *rolled, "-o", str(out)])
        return wall, rss
    wall, rss, stdout = run([python, "-c", CHILD, name, str(inp), str(out), ",".join(cols),
                             str(threads), str(MAX_BYTES or ""), ",".join(sort_keys(cols))])
    # The work alone, after interpreter start-up and imports.
    return json.loads(stdout.strip().splitlines()[-1])["work_s"], rss


def size(path):
    """Files, their bytes together, and the largest's."""
    sizes = [p.stat().st_size for p in path.rglob("*.parquet")]
    return len(sizes), sum(sizes), max(sizes, default=0)


def case_key(name):
    """A case's name without the commas between digits: "~2,500 values" is "~2500 values"."""
    return re.sub(r"(?<=\d),(?=\d{3})", "", name.strip())


def case_names(spec):
    """The cases a --cases list names (commas between digits belong to a name), each checked."""
    wanted = [case_key(c) for c in re.split(r",(?!\d{3})", spec) if c.strip()]
    known = {case_key(c) for c, _ in CASES}
    unknown = [c for c in wanted if c not in known]
    if unknown:
        sys.exit(f"unknown case(s) {unknown}: the cases are {[c for c, _ in CASES]}")
    return wanted


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--input", default=ROOT / "target" / "bench-data" / "lineitem-sf1.parquet",
                    type=Path)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only", default=",".join(CONTENDERS))
    ap.add_argument("--python", default=str(ROOT / "bench" / ".venv" / "bin" / "python"))
    ap.add_argument("--json", type=Path)
    ap.add_argument("--out", type=Path, default=OUT,
                    help="where the outputs go (removed at the end); see above")
    ap.add_argument("--max-bytes-per-file", type=int, default=None,
                    help="roll files over at about this many bytes (see above)")
    ap.add_argument("--cases", default=",".join(c for c, _ in CASES),
                    help="which cases, by name, comma-separated (a comma between digits is "
                         "part of a name: '10,000 values' and '10000 values' are one case)")
    ap.add_argument("--sort-by", default=None,
                    help="sort each file's rows by these columns, ascending (see above)")
    ap.add_argument("--memory-limit", default=None, help="partout's memory limit")
    ap.add_argument("--max-partitions", default="100000",
                    help="partout's --max-partitions, a number or 'near' (the peers take none)")
    args = ap.parse_args()
    global MAX_PARTITIONS, MAX_BYTES, SORT_BY, MEMORY_LIMIT
    MAX_PARTITIONS = args.max_partitions
    MAX_BYTES = args.max_bytes_per_file
    SORT_BY = args.sort_by.split(",") if args.sort_by else None
    MEMORY_LIMIT = args.memory_limit
    if (MAX_BYTES or SORT_BY) and "pyarrow" in args.only.split(","):
        args.only = ",".join(n for n in args.only.split(",") if n != "pyarrow")
    wanted = case_names(args.cases)
    names = args.only.split(",")
    cpu = python_partition.cpu()
    print(f"partitioning by value: {args.input.name}, {args.threads} threads, {cpu}, "
          f"{os.cpu_count()} CPUs"
          + (f", each file sorted by {','.join(SORT_BY)}" if SORT_BY else "")
          + (f", partout's memory limit {MEMORY_LIMIT}" if MEMORY_LIMIT else ""), flush=True)
    results = []
    for case, cols in CASES:
        if case_key(case) not in wanted:
            continue
        runs = {n: [] for n in names}
        checked = {}
        for r in range(args.rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for name in order:
                if name == "pyarrow" and (r > 0 or VALUES[case] > PYARROW_MAX_VALUES):
                    continue
                out = args.out / name
                wall, rss = contender(name, args.python, args.input, out, cols, args.threads)
                runs[name].append((wall, rss))
                if name not in checked:
                    _, _, report = run([args.python, "-c", CHECK, str(args.input), str(out),
                                        ",".join(cols), ",".join(sort_keys(cols))])
                    report = json.loads(report)
                    if not report["same"]:
                        raise SystemExit(f"{case}: {name}'s output differs from the input")
                    if report["unsorted"] and name == "partout":
                        raise SystemExit(f"{case}: {report['unsorted']} of partout's files are "
                                         f"not sorted by {sort_keys(cols)}")
                    files, size_bytes, largest = size(out)
                    checked[name] = {**report, "bytes": size_bytes, "largest": largest}
                print(f"  {case} round {r}: {name:8} {wall:6.2f} s {rss:7.0f} MiB", flush=True)
        ran = [n for n in names if runs[n]]
        summary = {n: {"median_s": statistics.median(w for w, _ in runs[n]),
                       "peak_rss_mib": statistics.median(m for _, m in runs[n]),
                       "runs": len(runs[n]), **checked[n]} for n in ran}
        results.append({"case": case, "columns": cols, "contenders": summary})
        # Sorting, a peer counts only if its files are sorted (DuckDB's are not).
        peers = [n for n in ran if n != "partout"
                 and not (sort_keys(cols) and summary[n]["unsorted"])]
        fastest = min(peers, key=lambda n: summary[n]["median_s"]) if peers else None
        print(f"\n{case} ({', '.join(cols)}), medians of {args.rounds}:")
        sorted_col = SORT_BY is not None
        print("| contender | s | peak RSS MiB | files | values | MB | largest file MiB "
              + ("| files sorted " if sorted_col else "")
              + ("| fastest sorted peer ÷ it |" if sorted_col else "| fastest peer ÷ it |"))
        print("|---|---:|---:|---:|---:|---:|---:|" + ("---:|" if sorted_col else "") + "---:|")
        for n in ran:
            s = summary[n]
            ratio = (f"{summary[fastest]['median_s'] / s['median_s']:.2f}x"
                     if fastest else "")
            name = n if s["runs"] == args.rounds else f"{n} ({s['runs']} run)"
            print(f"| {name} | {s['median_s']:.2f} | {s['peak_rss_mib']:.0f} | {s['files']} | "
                  f"{s['values']} | {s['bytes'] / 1e6:.0f} | {s['largest'] / 2**20:.1f} | "
                  + (f"{s['files'] - s['unsorted']} of {s['files']} | " if sorted_col else "")
                  + f"{ratio} |")
        print(flush=True)
    if args.json:
        args.json.write_text(json.dumps({"machine": {"cpu": cpu, "cpus": os.cpu_count()},
                                         "input": str(args.input.name),
                                         "threads": args.threads, "rounds": args.rounds,
                                         "results": results}, indent=1))
    shutil.rmtree(args.out, ignore_errors=True)


if __name__ == "__main__":
    main()
