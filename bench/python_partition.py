"""partout.partition against what Python users do today to split a table into N hash buckets,
in one process, on TPC-H lineitem held in memory as a pyarrow Table, contenders alternating
round after round; medians and ratios (the fastest peer's time over partout's).

Contenders, all keyed on l_orderkey:
- partout: ``partout.partition(table, n, by="l_orderkey", as_dict=True)``;
- polars: ``(pl.col(key).hash(seed=0) % n)`` as a column, then ``partition_by(as_dict=True)``;
- ray recipe: Ray Data's hash-partition kernel re-created with polars and numpy (no Ray
  needed): polars ``hash_rows(seed=0) % n``, ``np.bincount``, one stable argsort, one pyarrow
  ``take``, then zero-copy slices, as a dict without the empty buckets;
- pyarrow take: bucket ids from polars' hash, then one ``take`` per bucket.

Every contender's buckets are checked once: the same rows as the input (row count, and per key
the rows and the sum of l_quantity), and each key in one bucket only (its rows kept together).

    bench/python_partition.py [--sf 1] [--rounds 5] [--partitions 64,200] [--input FILE]
                              [--json FILE] [--here]

Uses bench/.venv (made by bench/e2e.sh, or here) with pyarrow, polars, numpy, tpchgen-cli
and a release wheel of partout (built here with maturin). ``--here`` runs in the interpreter
it was started with, as it is (it must have those packages): the tests' smoke run does so.
"""
import argparse
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
VENV = ROOT / "bench/.venv"


def ensure_environment(script: str = __file__) -> None:
    """Runs `script` (this one by default) again inside bench/.venv with what it needs
    installed."""
    python = VENV / "bin/python"
    if pathlib.Path(sys.prefix).resolve() == VENV.resolve():
        return
    if not python.exists():
        subprocess.check_call([sys.executable, "-m", "venv", str(VENV)])
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.check_call(pip + ["pyarrow==26.0.1", "polars==2.1.0", "numpy", "tpchgen-cli==4.0.0", "maturin==1.16.0"])
    wheels = ROOT / "target/wheels"
    subprocess.check_call(
        [str(VENV / "bin/maturin"), "build", "--release", "--quiet", "-m",
         str(ROOT / "crates/partout-python/Cargo.toml"), "-o", str(wheels)]
    )
    subprocess.check_call(pip + ["--force-reinstall", "--no-deps", *map(str, wheels.glob("partout-*.whl"))])
    os.execv(str(python), [str(python), script, *sys.argv[1:]])


def cpu() -> str:
    """The CPU's name, with its family and model (the name alone does not tell a generation)."""
    def field(name):
        return next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                     if l.split(":", 1)[0].strip() == name), None)
    text = field("model name") or platform.processor()
    if field("cpu family"):
        text += f" (family {field('cpu family')}, model {field('model')})"
    return text


def versions() -> dict:
    """The versions of the packages the contenders run, and of partout."""
    import importlib.metadata

    found = {}
    for package in ("partout", "pyarrow", "polars", "numpy", "duckdb"):
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            found[package] = None
    return found


def lineitem_file(sf: float) -> pathlib.Path:
    """TPC-H lineitem at `sf` as one Parquet file under target/bench-data, made by
    tpchgen-cli (the one beside this interpreter) when missing."""
    path = ROOT / f"target/bench-data/lineitem-sf{sf:g}.parquet"
    if not path.exists():
        gen = path.parent / f".gen-sf{sf:g}"
        gen.mkdir(parents=True, exist_ok=True)
        tpchgen = pathlib.Path(sys.executable).parent / "tpchgen-cli"
        subprocess.check_call([str(tpchgen), "parquet", "-s", str(sf),
                               "--tables", "lineitem", "--output-dir", str(gen), "--quiet"])
        (gen / "lineitem.parquet").rename(path)
    return path


def lineitem(path: pathlib.Path):
    """The Parquet file at `path` as a pyarrow Table, its string views as plain strings."""
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    # tpchgen writes Utf8View columns; pyarrow's take has no kernel for them, so every
    # contender gets plain strings, as most pyarrow tables hold them.
    import pyarrow as pa

    plain = pa.schema([f.with_type(pa.string() if f.type == pa.string_view() else f.type) for f in table.schema])
    return table.cast(plain)


def contenders(n: int):
    import numpy as np
    import polars as pl
    import pyarrow as pa

    import partout

    key = "l_orderkey"

    def run_partout(table):
        return partout.partition(table, n, by=key, as_dict=True)

    def run_polars(table):
        frame = pl.from_arrow(table, rechunk=False)
        frame = frame.with_columns((pl.col(key).hash(seed=0) % n).alias("_p"))
        return frame.partition_by("_p", as_dict=True, include_key=False)

    def run_ray(table):
        frame = pl.from_arrow(table.select([key]), rechunk=False)
        ids = (frame.hash_rows(seed=0) % n).to_numpy()
        counts = np.bincount(ids, minlength=n)
        order = np.argsort(ids, kind="stable")
        taken = table.take(pa.array(order))
        out, start = {}, 0
        for p, count in enumerate(counts):
            if count:
                out[p] = taken.slice(start, count)
            start += count
        return out

    def run_take(table):
        frame = pl.from_arrow(table.select([key]), rechunk=False)
        ids = (frame.hash_rows(seed=0) % n).to_numpy()
        out = {}
        for p in range(n):
            rows = np.flatnonzero(ids == p)
            if len(rows):
                out[p] = table.take(pa.array(rows))
        return out

    return [("partout", run_partout), ("polars partition_by", run_polars),
            ("ray recipe", run_ray), ("pyarrow take per bucket", run_take)]


def check(name: str, table, buckets) -> None:
    """Raises unless `buckets` hold exactly `table`'s rows, each key's rows in one bucket."""
    import pyarrow as pa

    def summary(t):
        t = t.select(["l_orderkey", "l_quantity"])
        t = t.set_column(1, "l_quantity", t.column("l_quantity").cast(pa.float64()))
        return t.group_by("l_orderkey").aggregate([("l_quantity", "count"), ("l_quantity", "sum")])

    parts = [b if isinstance(b, pa.Table) else b.to_arrow() for b in buckets.values()]
    parts = [p.select(["l_orderkey", "l_quantity"]) for p in parts]
    want = summary(table).sort_by("l_orderkey")
    # Nullability and field metadata aside (a polars frame's columns are all nullable).
    plain = pa.schema([pa.field(f.name, f.type) for f in want.schema])
    got = summary(pa.concat_tables(parts, promote_options="permissive")).sort_by("l_orderkey")
    if not got.cast(plain).equals(want.cast(plain)):
        raise SystemExit(f"{name}: the buckets' rows differ from the input's")
    keys = sum(len(p.column("l_orderkey").unique()) for p in parts)
    if keys != want.num_rows:
        raise SystemExit(f"{name}: a key's rows are split over buckets")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sf", type=float, default=1.0)
    parser.add_argument("--input", type=pathlib.Path, default=None,
                        help="lineitem as a Parquet file (default: the one of --sf)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--partitions", default="64,200")
    parser.add_argument("--json", type=pathlib.Path, help="the medians and ratios, here too")
    parser.add_argument("--here", action="store_true",
                        help="run in this interpreter as it is, not in bench/.venv")
    args = parser.parse_args()
    if not args.here:
        ensure_environment()
    table = lineitem(args.input or lineitem_file(args.sf))
    print(f"lineitem {args.input or f'SF {args.sf:g}'}: {table.num_rows} rows, "
          f"{table.nbytes / 2**20:.0f} MiB in memory; "
          f"{cpu()}, {os.cpu_count()} cores; medians of {args.rounds} alternating rounds")
    report = {"cpu": cpu(), "cores": os.cpu_count(), "date": time.strftime("%Y-%m-%d", time.gmtime()),
              "versions": versions(), "rows": table.num_rows, "rounds": args.rounds,
              "results": []}
    for n in [int(p) for p in args.partitions.split(",")]:
        runs = contenders(n)
        for name, run in runs:
            check(name, table, run(table))
        times = {name: [] for name, _ in runs}
        for r in range(args.rounds):
            for i in range(len(runs)):
                name, run = runs[(i + r) % len(runs)]
                start = time.perf_counter()
                run(table)
                times[name].append(time.perf_counter() - start)
        medians = {name: statistics.median(t) for name, t in times.items()}
        ours = medians["partout"]
        fastest = min(t for name, t in medians.items() if name != "partout")
        print(f"\n{n} partitions")
        print(f"{'contender':<26} {'median s':>9} {'vs partout':>11}")
        for name, t in medians.items():
            print(f"{name:<26} {t:>9.3f} {t / ours:>10.2f}x")
        print(f"fastest peer / partout: {fastest / ours:.2f}x")
        report["results"].append({"partitions": n, "checked": [name for name, _ in runs],
                                  "median_s": medians, "fastest_peer_ratio": fastest / ours})
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
