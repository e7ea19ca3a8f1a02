"""partout.write_dataset against what Python users call today to write a table held in memory
as a Hive-partitioned Parquet dataset (a directory per value, Snappy), in one process, on TPC-H
lineitem SF 1 as a pyarrow Table, 2 threads, contenders alternating round after round; medians
and ratios (the fastest peer's time over partout's):

- partout: ``partout.write_dataset(table, out, partition_by=cols, threads=2,
  max_partitions=100_000)``;
- polars: ``pl.from_arrow(table).lazy().sink_parquet(pl.PartitionBy(out, key=cols,
  include_key=False), compression="snappy")`` (POLARS_MAX_THREADS=2): what
  ``write_parquet(partition_by=...)`` does, without the key columns in the files, as the others
  write them;
- pyarrow: ``pyarrow.dataset.write_dataset(table, out, partitioning=cols, flavor hive)``
  (``pa.set_cpu_count(2)``), once per case (it is the slowest by far at thousands of values);
- and, for scale, the ``partout repartition`` CLI on the same rows from the Parquet file they
  were read from, a process of its own (reading the file included).

Keys: (l_returnflag, l_linestatus) with 4 values, l_shipdate with ~2,500. Each contender's
first dataset is checked as bench/partition_by.py checks: read back by pyarrow with its hive
partitioning, the same rows per key value as the input (count and sums of two columns) and
every file in its value's directory.

    bench/python_dataset.py [--rounds 3] [--out DIR] [--input FILE] [--json FILE] [--here]

--out puts the datasets elsewhere than target/bench-out/python-dataset: on a tmpfs
(/dev/shm/...) the runs measure the writers, not the file system (see bench/partition_by.py).
--input: lineitem as one Parquet file (default: SF 1's under target/bench-data, made when
missing). Uses bench/.venv as bench/python_partition.py makes it (a release wheel of partout);
``--here`` runs in the interpreter it was started with, as it is (the tests' smoke run).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import python_partition  # noqa: E402  (its environment and its table)
from partition_by import CHECK  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PARTOUT = Path(os.environ.get("PARTOUT", ROOT / "target" / "release" / "partout"))
CASES = [("4 values", ["l_returnflag", "l_linestatus"]), ("~2,500 values", ["l_shipdate"])]
THREADS = 2


def contenders(cols, source: Path):
    os.environ["POLARS_MAX_THREADS"] = str(THREADS)
    import polars as pl
    import pyarrow as pa
    import pyarrow.dataset as ds

    import partout

    pa.set_cpu_count(THREADS)
    pa.set_io_thread_count(THREADS)

    def run_partout(table, out):
        partout.write_dataset(table, out, partition_by=cols, threads=THREADS,
                              max_partitions=100_000)

    def run_polars(table, out):
        pl.from_arrow(table, rechunk=False).lazy().sink_parquet(
            pl.PartitionBy(out, key=cols, include_key=False), mkdir=True, compression="snappy")

    def run_pyarrow(table, out):
        ds.write_dataset(table, out, format="parquet", partitioning=cols,
                         partitioning_flavor="hive", max_partitions=100_000,
                         max_open_files=100_000,
                         file_options=ds.ParquetFileFormat().make_write_options(
                             compression="snappy"))

    def run_cli(_table, out):
        subprocess.run([str(PARTOUT), "repartition", str(source), "--partition-by",
                        ",".join(cols), "--threads", str(THREADS), "--max-partitions",
                        "100000", "--quiet", "-o", str(out)], check=True)

    return {"partout": run_partout, "polars": run_polars, "pyarrow": run_pyarrow,
            "partout CLI from the file": run_cli}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "target/bench-out/python-dataset")
    parser.add_argument("--input", type=Path, default=None,
                        help="lineitem as a Parquet file (default: SF 1's)")
    parser.add_argument("--json", type=Path, help="the medians and ratios, here too")
    parser.add_argument("--here", action="store_true",
                        help="run in this interpreter as it is, not in bench/.venv")
    args = parser.parse_args()
    if not args.here:
        python_partition.ensure_environment(__file__)
    source = args.input or python_partition.lineitem_file(1.0)
    table = python_partition.lineitem(source)
    cpu = python_partition.cpu()
    report = {"cpu": cpu, "cores": os.cpu_count(), "threads": THREADS,
              "date": time.strftime("%Y-%m-%d", time.gmtime()),
              "versions": python_partition.versions(), "rows": table.num_rows,
              "rounds": args.rounds, "results": []}
    print(f"lineitem {source.name}: {table.num_rows} rows, {table.nbytes / 2**20:.0f} MiB in memory; "
          f"{cpu}, {os.cpu_count()} cores, {THREADS} threads; medians of {args.rounds} "
          "alternating rounds", flush=True)
    for case, cols in CASES:
        runs = contenders(cols, source)
        names = list(runs)
        times = {name: [] for name in names}
        checked = {}
        for r in range(args.rounds):
            for i in range(len(names)):
                name = names[(i + r) % len(names)]
                if name == "pyarrow" and r > 0:
                    continue
                out = args.out / name.replace(" ", "-")
                shutil.rmtree(out, ignore_errors=True)
                start = time.perf_counter()
                runs[name](table, out)
                times[name].append(time.perf_counter() - start)
                if r == 0:
                    # The check's arguments: the input, the dataset, the partition columns
                    # and the sort columns (none: rows keep no order within a file here).
                    check = subprocess.run([sys.executable, "-c", CHECK, str(source), str(out),
                                            ",".join(cols), ""], capture_output=True, text=True)
                    if check.returncode != 0:
                        raise SystemExit(f"{case}: the check of {name}'s dataset failed: "
                                         f"{check.stderr[-1500:]}")
                    found = json.loads(check.stdout)
                    if not found["same"] or found["files"] != len(
                            [f for f in out.rglob("*.parquet")]):
                        raise SystemExit(f"{case}: {name}'s dataset differs from the input")
                    checked[name] = found
                print(f"  {case} round {r}: {name:26} {times[name][-1]:6.2f} s", flush=True)
        medians = {name: statistics.median(t) for name, t in times.items()}
        ours = medians["partout"]
        peers = [n for n in names if n in ("polars", "pyarrow")]
        fastest = min(medians[n] for n in peers)
        print(f"\n{case} ({', '.join(cols)})")
        print("| contender | median s | ÷ partout |")
        print("|---|---:|---:|")
        for name in names:
            runs_note = "" if len(times[name]) == args.rounds else f" ({len(times[name])} run)"
            print(f"| {name}{runs_note} | {medians[name]:.2f} | {medians[name] / ours:.2f}x |")
        print(f"fastest peer ÷ partout: {fastest / ours:.2f}x; partout ÷ the CLI: "
              f"{ours / medians['partout CLI from the file']:.2f}x\n", flush=True)
        report["results"].append({"case": case, "columns": cols, "checked": checked,
                                  "median_s": medians, "fastest_peer_ratio": fastest / ours})
    shutil.rmtree(args.out, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
