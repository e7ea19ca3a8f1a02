#!/usr/bin/env python3
"""End-to-end repartitioning benchmark: one Parquet file into N Parquet files.

Contenders (each run is a fresh subprocess, so thread settings are set anew and
peak RSS is measured per run via os.wait4):

  partout-1t   target/release/partout repartition ... --threads 1
  partout-2t   target/release/partout repartition ... --threads T
               ($PARTOUT, or --partout, names another binary)
  baseline-1t, baseline-2t  the same with the binary --baseline names (an earlier
               build, for before/after figures in alternation)
  duckdb       COPY ... TO dir (PARTITION_BY (p)) with SET threads=T
  polars       read_parquet, hash % N, partition_by, write_parquet per part

All write snappy-compressed Parquet, partitioned by l_orderkey. The order of
the contenders rotates every round, so that the noise of a shared machine falls
on all of them alike. For DuckDB and Polars the child also reports the time of
the work alone (after interpreter start-up and import); that in-process time is
the one compared with partout's whole-process time.

Usage (normally through bench/e2e.sh):
  e2e.py --input lineitem.parquet [--rounds 5] [--warmup 1] [--partitions 64] [--threads 2]
         [--only duckdb,polars] [--partout BIN] [--baseline BIN] [--json results.json]
         [--out DIR]

Each output is checked (rows, files, columns, Snappy, keys in one file only) and its
row groups counted: the summary gives each contender's row groups per file and their
smallest, mean and largest row counts.

Each output is also checked by value, destination by destination: every destination's
rows must be, as a multiset, the input rows its contender's partitioning sends there
(compared as a fingerprint: the row count and the sums of the low and high halves of
polars' row hashes, every column, in the input's types). What each destination must hold
is computed once from the input, before the runs:
  partout     partout's fast hash of l_orderkey, written again here in Python from its
              definition (an Int64 key: mix(v ^ X, M), the halves of the 128-bit product
              xored; destination ((h >> 32) * N) >> 32); its files must also keep the
              input's Arrow schema exactly (types, nullability, metadata).
  duckdb      DuckDB's own hash(l_orderkey) % N, asked of DuckDB for every key.
  polars      Polars' own col(l_orderkey).hash() % N, on the input as Polars reads it.
  baseline    another build, whose hash may differ: every key in one file only, and the
              files together the input, every row once.
DuckDB and Polars write their own Parquet types (plain strings for views, nullable
columns): their values are compared after a cast to the input's types.
Helper modes (used internally):
  e2e.py --run {duckdb,polars} INPUT OUTDIR PARTITIONS THREADS
  e2e.py --inspect INPUT
  e2e.py --expect INPUT PARTITIONS SCHEMES OUTJSON
  e2e.py --verify OUTDIR ROWS COLUMNS PARTITIONS CHECK_KEYS SCHEME EXPECTED INPUT

Peak RSS note: on Linux a child's ru_maxrss includes the RSS of the parent it
was forked from (execve keeps the old image's high-water mark). So the parent
never imports pyarrow or the libraries: reading metadata and checking outputs
run in helper processes, and the parent's own ~20 MiB is the floor of every
RSS figure.
"""

import argparse
import importlib.metadata
import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PARTOUT = Path(os.environ.get("PARTOUT", ROOT / "target" / "release" / "partout"))
OUT_BASE = ROOT / "target" / "bench-out"
KEY = "l_orderkey"


# ---------------------------------------------------------------- child mode

def child_duckdb(inp, out, parts, threads):
    import duckdb

    con = duckdb.connect()
    con.execute(f"SET threads={int(threads)}")
    # The partition column p goes into the directory names (p=K/), not the files.
    sql = (
        f"COPY (SELECT *, hash({KEY}) % {int(parts)} AS p "
        f"FROM read_parquet({sql_str(inp)})) "
        f"TO {sql_str(out)} "
        f"(FORMAT parquet, PARTITION_BY (p), COMPRESSION snappy, OVERWRITE_OR_IGNORE)"
    )
    t0 = time.perf_counter()
    con.execute(sql)
    return time.perf_counter() - t0


def child_polars(inp, out, parts, threads):
    # POLARS_MAX_THREADS is read when polars is first imported.
    os.environ["POLARS_MAX_THREADS"] = str(threads)
    import polars as pl

    if pl.thread_pool_size() != int(threads):
        raise SystemExit(f"polars thread pool is {pl.thread_pool_size()}, wanted {threads}")
    t0 = time.perf_counter()
    df = pl.read_parquet(inp)
    groups = df.with_columns((pl.col(KEY).hash() % int(parts)).alias("p")).partition_by(
        "p", include_key=False, as_dict=True
    )
    os.makedirs(out, exist_ok=True)
    for (p,), part in groups.items():
        part.write_parquet(os.path.join(out, f"part-{p:05d}.parquet"), compression="snappy")
    return time.perf_counter() - t0


def sql_str(s):
    return "'" + str(s).replace("'", "''") + "'"


def child_main(argv):
    name, inp, out, parts, threads = argv
    work = {"duckdb": child_duckdb, "polars": child_polars}[name](inp, out, parts, threads)
    print(json.dumps({"work_s": work}), flush=True)


def inspect_main(argv):
    import pyarrow.parquet as pq

    md = pq.ParquetFile(argv[0]).metadata
    print(json.dumps({"rows": md.num_rows, "columns": md.num_columns,
                      "row_groups": md.num_row_groups}))


def verify_main(argv):
    out, rows, cols, parts, check_keys, scheme, expected, inp = argv
    files, size, groups = verify(out, int(rows), int(cols), int(parts), check_keys == "1")
    verify_values(out, int(parts), scheme, expected, inp)
    print(json.dumps({"files": files, "bytes": size, "row_groups": groups}))


# ---------------------------------------------------------------- checks by value

# partout's fast hash of an Int64 key (partout-core's ids::hash), written again from its
# definition: the value's little-endian bits as an unsigned word v, mixed as
# mix(v ^ X, M), where mix(a, b) xors the high and low 64-bit halves of the product a * b.
HASH_M = 0xA4093822299F31D0
HASH_X = 0x243F6A8885A308D3
HASH_NULL = 0x13198A2E03707344
WORD = (1 << 64) - 1


def partout_destination(key, parts):
    """The destination of `parts` partout's hash partitioning gives an Int64 key."""
    if key is None:
        h = HASH_NULL
    else:
        product = ((key & WORD) ^ HASH_X) * HASH_M
        h = (product & WORD) ^ (product >> 64)
    return ((h >> 32) * parts) >> 32


def fingerprint(df):
    """A table's rows as [count, sum of low halves, sum of high halves] of Polars' row
    hashes (every column): the same for the same rows in any order, exact sums (no
    wrapping), equal for equal rows of equal types."""
    h = df.hash_rows()
    return [df.height, int((h % (1 << 32)).sum()), int((h // (1 << 32)).sum())]


def assignment(scheme, df, parts):
    """Each input row's destination under `scheme`, as a UInt32 Series."""
    import polars as pl

    keys = df.select(pl.col(KEY).unique())
    if scheme == "partout":
        dests = [partout_destination(k, parts) for k in keys[KEY].to_list()]
        table = keys.with_columns(pl.Series("p", dests, dtype=pl.UInt32))
    elif scheme == "duckdb":
        import duckdb

        table = duckdb.sql(
            f"SELECT {KEY}, CAST(hash({KEY}) % {int(parts)} AS UINTEGER) AS p FROM keys"
        ).pl()
    elif scheme == "polars":
        # The contender's own expression, on the input as the contender reads it.
        return df.select((pl.col(KEY).hash() % int(parts)).cast(pl.UInt32).alias("p"))["p"]
    else:
        raise SystemExit(f"no partitioning known for {scheme!r}")
    joined = df.select(pl.col(KEY)).with_row_index("row").join(
        table, on=KEY, how="left", nulls_equal=True
    )
    return joined.sort("row")["p"]


def expect_main(argv):
    """Writes what each destination must hold under each scheme, and the whole input."""
    import polars as pl
    import pyarrow as pa
    import pyarrow.parquet as pq

    inp, parts, schemes, out = argv[0], int(argv[1]), argv[2].split(","), argv[3]
    df = pl.read_parquet(inp)
    key_type = pq.read_schema(inp).field(KEY).type
    if "partout" in schemes and not pa.types.is_int64(key_type):
        die(f"the check knows partout's hash of an Int64 {KEY} only, not {key_type}")
    expected = {"whole": fingerprint(df), "schemes": {}}
    for scheme in filter(None, schemes):
        if scheme == "baseline":
            continue
        p = assignment(scheme, df, parts)
        if p.null_count() or int(p.max()) >= parts:
            die(f"{scheme}'s partitioning of the input gives a destination outside 0..{parts - 1}")
        prints = [[0, 0, 0] for _ in range(parts)]
        h = df.hash_rows()
        sums = (
            pl.DataFrame({"p": p, "lo": h % (1 << 32), "hi": h // (1 << 32)})
            .group_by("p")
            .agg(pl.len().alias("rows"), pl.col("lo").sum(), pl.col("hi").sum())
        )
        for row in sums.iter_rows(named=True):
            prints[row["p"]] = [row["rows"], int(row["lo"]), int(row["hi"])]
        expected["schemes"][scheme] = prints
    with open(out, "w") as f:
        json.dump(expected, f)
    print(json.dumps({"expected": out}))


def destination_of(path):
    """The destination an output file belongs to: its directory p=K (DuckDB), or its
    name part-K (partout, Polars)."""
    m = re.fullmatch(r"p=(\d+)", path.parent.name) or re.match(r"part-(\d+)", path.name)
    if not m:
        die(f"{path}: cannot tell which destination it is")
    return int(m.group(1))


def verify_values(out, parts, scheme, expected_path, inp):
    """Checks every destination's rows by value against the expected fingerprints
    (module docstring), and partout's schema against the input's."""
    import polars as pl
    import pyarrow.parquet as pq

    with open(expected_path) as f:
        expected = json.load(f)
    in_schema = pq.read_schema(inp)
    types = dict(pl.read_parquet_schema(inp))
    got = [[0, 0, 0] for _ in range(parts)]
    for path in sorted(Path(out).rglob("*.parquet")):
        p = destination_of(path)
        if p >= parts:
            die(f"{path}: destination {p}, of {parts}")
        if scheme in ("partout", "baseline"):
            schema = pq.read_schema(path)
            if not schema.equals(in_schema, check_metadata=True):
                die(f"{out}: destination {p} ({path.name}): {schema_difference(schema, in_schema)}")
        df = pl.read_parquet(path)
        if df.columns != list(types):
            die(f"{out}: destination {p} ({path.name}) has columns {df.columns}, "
                f"the input {list(types)}")
        part = fingerprint(df.cast(types))
        got[p] = [a + b for a, b in zip(got[p], part)]
    # The baseline's hash may not be this build's: its destinations are not known here (the
    # key check says each key is in one file).
    for p, (g, w) in enumerate(zip(got, expected["schemes"].get(scheme, []))):
        if g != w:
            other = " with other values" if g[0] == w[0] else ""
            die(f"{out}: destination {p} holds {g[0]} rows{other} where {scheme}'s "
                f"partitioning puts {w[0]}")
    # Every row of the input once, and nothing else (implied by the above where it runs).
    whole = expected["whole"]
    together = [sum(column) for column in zip(*got)]
    if together != whole:
        die(f"{out}: the destinations together hold {together[0]} rows"
            f"{' with other values' if together[0] == whole[0] else ''}, "
            f"the input {whole[0]}")


def schema_difference(got, want):
    """The first difference of two Arrow schemas, in words."""
    if got.names != want.names:
        return f"columns {got.names}, the input's {want.names}"
    for i, (g, w) in enumerate(zip(got, want)):
        if g.type != w.type:
            return f"column {i} ({w.name}) is {g.type} where the input's is {w.type}"
        if g.nullable != w.nullable:
            return f"column {i} ({w.name}) is nullable={g.nullable} where the input's is {w.nullable}"
        if g.metadata != w.metadata:
            return f"column {i} ({w.name}) has metadata {g.metadata} where the input's has {w.metadata}"
    return f"schema metadata {got.metadata}, the input's {want.metadata}"


# ---------------------------------------------------------------- parent mode

def contenders(threads, parts, inp, baseline):
    """name -> (label, kind, argv builder taking the output dir)."""
    def partout(t, binary=PARTOUT):
        return lambda out: [
            str(binary), "repartition", str(inp), "--by", KEY, "-n", str(parts),
            "--format", "parquet", "--compression", "snappy", "--threads", str(t),
            "--quiet", "--overwrite", "-o", str(out),
        ]

    def child(name):
        return lambda out: [
            sys.executable, str(Path(__file__).resolve()), "--run", name,
            str(inp), str(out), str(parts), str(threads),
        ]

    found = {
        "partout-1t": ("partout 1 thread", "process", partout(1)),
        "partout-2t": (f"partout {threads} threads", "process", partout(threads)),
        "duckdb": (f"duckdb {threads} threads", "child", child("duckdb")),
        "polars": (f"polars {threads} threads", "child", child("polars")),
    }
    if baseline:
        found["baseline-1t"] = ("baseline 1 thread", "process", partout(1, baseline))
        found["baseline-2t"] = (f"baseline {threads} threads", "process",
                                partout(threads, baseline))
    return found


def run_once(argv, kind, env):
    """Run argv to completion; return (wall seconds, peak RSS bytes, in-process seconds)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if proc.returncode != 0:
        die(f"command failed with exit code {proc.returncode}: {' '.join(argv)}\n"
            f"--- stdout ---\n{stdout}--- stderr ---\n{stderr}")
    work = None
    if kind == "child":
        try:
            work = json.loads(stdout.strip().splitlines()[-1])["work_s"]
        except (ValueError, IndexError, KeyError):
            die(f"no timing from child: {' '.join(argv)}\n{stdout}\n{stderr}")
    return wall, usage.ru_maxrss * 1024, work  # ru_maxrss is in KiB on Linux


def helper(*args):
    """Run a helper mode of this script in its own process; return its JSON."""
    argv = [sys.executable, str(Path(__file__).resolve()), *map(str, args)]
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode != 0:
        die(f"{args[0]} failed:\n{r.stderr}{r.stdout}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def scheme_of(name):
    """Whose partitioning a contender's output follows (module docstring)."""
    return name.split("-")[0]


def checked_by_value(name):
    """What the check by value of a contender's output says, in words."""
    if scheme_of(name) == "baseline":
        return "every key in one file, every row once"
    return "every destination's values"


def check_output(out, in_rows, in_cols, parts, check_keys, scheme, expected, inp):
    # The baseline's hash is not known here: its keys must each be in one file.
    check_keys = check_keys or scheme == "baseline"
    checked = helper("--verify", out, in_rows, in_cols, parts, int(check_keys), scheme,
                     expected, inp)
    return checked["files"], checked["bytes"], checked["row_groups"]


def verify(out, in_rows, in_cols, parts, check_keys):
    """Check the output: row count, file count, columns, compression, key disjointness;
    count its row groups and their rows."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    files = sorted(Path(out).rglob("*.parquet"))
    rows = 0
    seen_keys = 0
    uniques = []
    group_rows = []
    for f in files:
        pf = pq.ParquetFile(f)
        md = pf.metadata
        rows += md.num_rows
        group_rows += [md.row_group(rg).num_rows for rg in range(md.num_row_groups)]
        if md.num_columns != in_cols:
            die(f"{f}: {md.num_columns} columns, input has {in_cols}")
        for rg in range(md.num_row_groups):
            codec = md.row_group(rg).column(0).compression
            if codec != "SNAPPY":
                die(f"{f}: row group {rg} is {codec}, not SNAPPY")
        if check_keys:
            u = pc.unique(pf.read(columns=[KEY]).column(0))
            seen_keys += len(u)
            uniques.append(u)
    if rows != in_rows:
        die(f"{out}: {rows} rows in {len(files)} files, input has {in_rows}")
    if len(files) != parts:
        die(f"{out}: {len(files)} parquet files, expected {parts}")
    if check_keys:
        import pyarrow as pa

        total = len(pc.unique(pa.chunked_array(uniques)))
        if total != seen_keys:
            die(f"{out}: {seen_keys - total} {KEY} values appear in more than one file")
    groups = {"count": len(group_rows), "min_rows": min(group_rows, default=0),
              "max_rows": max(group_rows, default=0),
              "mean_rows": sum(group_rows) / len(group_rows) if group_rows else 0}
    return len(files), sum(f.stat().st_size for f in files), groups


def die(msg):
    print(f"e2e.py: error: {msg}", file=sys.stderr)
    sys.exit(1)


def machine_info():
    # The CPU as partout's benchmarks name it: model name, family and model.
    fields = {}
    try:
        for line in open("/proc/cpuinfo"):
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    model = fields.get("model name", "?")
    if "cpu family" in fields and "model" in fields:
        model += f", family {fields['cpu family']} model {fields['model']}"
    mem = "?"
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 2**20:.1f} GiB"
                break
    except OSError:
        pass
    versions = {}
    for pkg in ("duckdb", "polars", "pyarrow", "tpchgen-cli"):
        try:
            versions[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            versions[pkg] = None
    if PARTOUT.exists():
        versions["partout"] = subprocess.run(
            [str(PARTOUT), "--version"], capture_output=True, text=True
        ).stdout.strip()
    return {
        "nproc": len(os.sched_getaffinity(0)),
        "cpu": model,
        "memory": mem,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "versions": versions,
    }


def check_partout():
    if not PARTOUT.exists():
        die(f"{PARTOUT} not found: build it with `cargo build --release -p partout-cli` "
            f"(or leave partout out with --only duckdb,polars)")
    helptext = subprocess.run(
        [str(PARTOUT), "repartition", "--help"], capture_output=True, text=True
    ).stdout
    missing = [o for o in ("--format", "--compression", "--threads") if o not in helptext]
    if missing:
        die(f"{PARTOUT} repartition lacks {', '.join(missing)}: rebuild it from a newer tree")


def fmt_ratio(x):
    return "-" if x is None else f"{x:.2f}x"


def main():
    modes = {"--run": child_main, "--inspect": inspect_main, "--expect": expect_main,
             "--verify": verify_main}
    if len(sys.argv) > 1 and sys.argv[1] in modes:
        return modes[sys.argv[1]](sys.argv[2:])

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--input", required=True, help="lineitem Parquet file")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1,
                    help="untimed runs of each contender first (libraries paged in, caches warm)")
    ap.add_argument("--partitions", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2,
                    help="threads for partout's multi-threaded run, DuckDB and Polars")
    ap.add_argument("--only", default=None,
                    help="comma-separated contenders; 'partout' means both partout runs, "
                         "'baseline' both baseline runs (default: all)")
    ap.add_argument("--partout", type=Path, default=None,
                    help="the partout binary (default: $PARTOUT or target/release/partout)")
    ap.add_argument("--baseline", type=Path, default=None,
                    help="another partout binary, run as baseline-1t and baseline-2t")
    ap.add_argument("--no-key-check", action="store_true",
                    help="skip checking that no key lands in two output files")
    ap.add_argument("--json", metavar="FILE", help="write all samples and the summary here")
    ap.add_argument("--out", type=Path, default=None,
                    help="where the outputs are written, each removed after its check "
                         "(default: target/bench-out)")
    args = ap.parse_args()
    global OUT_BASE
    if args.out:
        OUT_BASE = args.out.resolve()

    inp = Path(args.input).resolve()
    if not inp.is_file():
        die(f"input {inp} is not a file")
    in_md = helper("--inspect", inp)
    in_rows, in_cols = in_md["rows"], in_md["columns"]

    global PARTOUT
    if args.partout:
        PARTOUT = args.partout.resolve()
    baseline = args.baseline.resolve() if args.baseline else None
    if baseline and not baseline.exists():
        die(f"baseline {baseline} not found")
    all_c = contenders(args.threads, args.partitions, inp, baseline)
    names = []
    for n in (args.only or ",".join(all_c)).split(","):
        n = n.strip()
        expand = {"partout": ["partout-1t", "partout-2t"],
                  "baseline": ["baseline-1t", "baseline-2t"]}.get(n, [n])
        for e in expand:
            if e not in all_c:
                die(f"unknown contender {e!r}; known: {', '.join(all_c)}")
            if e not in names:
                names.append(e)
    if any(n.startswith("partout") for n in names):
        check_partout()

    info = machine_info()
    v = info["versions"]
    print(f"machine: {info['nproc']} cpus, {info['cpu']}, {info['memory']}, Linux {info['kernel']}")
    print(f"versions: partout {v.get('partout', '-')}, duckdb {v['duckdb']}, polars {v['polars']}, "
          f"pyarrow {v['pyarrow']}, python {info['python']}")
    print(f"input: {inp} ({in_rows:,} rows, {in_cols} columns, "
          f"{inp.stat().st_size / 2**20:.0f} MiB, {in_md['row_groups']} row groups)")
    print(f"task: by {KEY} into {args.partitions} snappy Parquet files; "
          f"{args.threads} threads; {args.warmup} warm-up and {args.rounds} timed rounds, "
          f"order rotating each round")
    print()

    # Bring the input into the page cache so that the first run pays no cold read.
    with open(inp, "rb") as f:
        while f.read(1 << 20):
            pass

    env = dict(os.environ)
    env["POLARS_MAX_THREADS"] = str(args.threads)
    OUT_BASE.mkdir(parents=True, exist_ok=True)
    # What each destination must hold, by each contender's partitioning, from the input.
    expected = OUT_BASE / "expected.json"
    schemes = sorted({scheme_of(n) for n in names})
    t0 = time.perf_counter()
    helper("--expect", inp, args.partitions, ",".join(schemes), expected)
    print(f"expected destinations of {', '.join(schemes)} computed in "
          f"{time.perf_counter() - t0:.1f}s", flush=True)
    for w in range(args.warmup):
        for n in names:
            out = OUT_BASE / n
            shutil.rmtree(out, ignore_errors=True)
            run_once(all_c[n][2](out), all_c[n][1], env)
            check_output(out, in_rows, in_cols, args.partitions, False, scheme_of(n), expected,
                         inp)
            shutil.rmtree(out, ignore_errors=True)
        print(f"warm-up {w + 1}/{args.warmup} done", flush=True)

    samples = {n: [] for n in names}
    for r in range(args.rounds):
        k = r % len(names)
        for n in names[k:] + names[:k]:
            label, kind, argv_for = all_c[n]
            out = OUT_BASE / n
            shutil.rmtree(out, ignore_errors=True)
            wall, rss, work = run_once(argv_for(out), kind, env)
            nfiles, size, groups = check_output(out, in_rows, in_cols, args.partitions,
                                                not args.no_key_check, scheme_of(n), expected,
                                                inp)
            shutil.rmtree(out, ignore_errors=True)
            s = {"round": r, "wall_s": wall, "work_s": work, "peak_rss_bytes": rss, "files": nfiles,
                 "output_bytes": size, "row_groups": groups}
            samples[n].append(s)
            extra = f" (in-process {work:.3f}s)" if work is not None else ""
            print(f"round {r + 1}/{args.rounds}  {label:<20} {wall:8.3f}s{extra}  "
                  f"peak RSS {rss / 2**20:7.0f} MiB  {nfiles} files, {size / 2**20:.0f} MiB, "
                  f"{in_rows:,} rows, {checked_by_value(n)} ok",
                  flush=True)

    # The compared time: in-process for the Python libraries, whole process for partout.
    summary = {}
    for n in names:
        ss = samples[n]
        ts = [s["work_s"] if s["work_s"] is not None else s["wall_s"] for s in ss]
        med = statistics.median(ts)
        summary[n] = {
            "label": all_c[n][0],
            "timed": "in-process" if all_c[n][1] == "child" else "whole process",
            "median_s": med,
            "min_s": min(ts),
            "max_s": max(ts),
            "process_median_s": statistics.median(s["wall_s"] for s in ss),
            "peak_rss_mib_median": statistics.median(s["peak_rss_bytes"] for s in ss) / 2**20,
            "output_mib": ss[-1]["output_bytes"] / 2**20,
            "row_groups": ss[-1]["row_groups"],
            "rows_per_s": in_rows / med,
        }
    base = summary.get("partout-2t")
    for n in names:
        summary[n]["ratio_vs_partout"] = summary[n]["median_s"] / base["median_s"] if base else None

    print()
    ref = f"vs {all_c['partout-2t'][0]}"
    hdr = (f"{'contender':<20} {'timed':<13} {'median s':>9} {'min s':>8} {'max s':>8} "
           f"{'process s':>10} {'RSS MiB':>8} {'out MiB':>8} {'Mrows/s':>8} {ref:>20}")
    print(hdr)
    print("-" * len(hdr))
    for n in names:
        m = summary[n]
        print(f"{m['label']:<20} {m['timed']:<13} {m['median_s']:9.3f} {m['min_s']:8.3f} "
              f"{m['max_s']:8.3f} {m['process_median_s']:10.3f} {m['peak_rss_mib_median']:8.0f} "
              f"{m['output_mib']:8.0f} "
              f"{m['rows_per_s'] / 1e6:8.2f} {fmt_ratio(m['ratio_vs_partout']):>20}")
    print()
    print(f"{'contender':<20} {'row groups':>10} {'per file':>9} {'min rows':>9} "
          f"{'mean rows':>10} {'max rows':>9}")
    for n in names:
        m, g = summary[n], summary[n]["row_groups"]
        print(f"{m['label']:<20} {g['count']:10d} {g['count'] / args.partitions:9.1f} "
              f"{g['min_rows']:9d} {g['mean_rows']:10.0f} {g['max_rows']:9d}")
    print()
    print("median of the rounds; ratio = contender's median / partout's (above 1: partout faster);")
    print("DuckDB and Polars are timed inside their process (after start-up and import), "
          "partout as a whole process.")
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS is each run's own (os.wait4), floored by this harness's {own:.0f} MiB "
          f"(fork high-water mark).")
    speedup = None
    if base and "partout-1t" in summary:
        speedup = summary["partout-1t"]["median_s"] / base["median_s"]
        print(f"partout {args.threads} threads speed-up over 1 thread: {speedup:.2f}x")
    if "baseline-2t" in summary and "baseline-1t" in summary:
        b = summary["baseline-1t"]["median_s"] / summary["baseline-2t"]["median_s"]
        print(f"baseline {args.threads} threads speed-up over 1 thread: {b:.2f}x")

    if args.json:
        with open(args.json, "w") as f:
            json.dump({
                "machine": info,
                "input": {"path": str(inp), "rows": in_rows, "columns": in_cols,
                          "bytes": inp.stat().st_size},
                "partitions": args.partitions,
                "threads": args.threads,
                "rounds": args.rounds,
                "samples": samples,
                "summary": summary,
                "partout_speedup_over_1_thread": speedup,
            }, f, indent=2)
        print(f"results written to {args.json}")


if __name__ == "__main__":
    main()
