#!/usr/bin/env bash
# The benchmarks behind the figures of BENCHMARKS.md and the README, run on this machine,
# then the figures drawn from their JSON:
#
#   bench/results/writer.jsonl   partout bench writer --json at 16, 64, 200, 1000 destinations,
#                                uncompressed, LZ4 and ZSTD (every contender hashing with
#                                DataFusion 55's hash)
#   bench/results/scatter.jsonl  partout bench scatter --json (Velox's matrix)
#   bench/results/ids.jsonl      partout bench ids --json (no figure: BENCHMARKS.md's table)
#   bench/results/files-N.json   bench/e2e.sh (lineitem Parquet into N Parquet files: partout
#                                on 1 and 2 threads, DuckDB, Polars) at 16, 64, 256, 1024
#   bench/results/partition_by.json
#                                bench/partition_by.py (lineitem at FILES_SF into a directory
#                                per value of 3 keys, 4 to 10,000 values: partout, DuckDB,
#                                Polars and pyarrow, 2 threads; its venv and input are the
#                                files step's, made here too when missing; not among the
#                                defaults: pyarrow takes ~2 minutes and ~9 GiB at SF 1)
#   bench/results/cluster.json   partout-ballista's `cluster` example: TPC-H SF 1 on Ballista
#                                hosts in network namespaces at 100mbit, 1gbit, 10gbit and
#                                unlimited links (needs root; not among the defaults: its
#                                release build of Ballista takes ~20 minutes)
#   bench/results/python_partition.json, python_dataset.json
#                                bench/python_partition.py (partout.partition beside polars'
#                                partition_by and two recipes, 64 and 200 parts) and
#                                bench/python_dataset.py (partout.write_dataset beside Polars and
#                                pyarrow, 4 and ~2,500 values), lineitem SF 1 in memory, in
#                                bench/.venv with a release wheel (built by the scripts)
#   bench/results/object_store.json, object_store-runs.json
#                                bench/object_store.py (lineitem SF 1 from and to an S3 server on
#                                127.0.0.1; DuckDB's httpfs from .venv-duckdb-httpfs, which
#                                ./run-tests makes)
#   bench/results/datafusion.txt partout-datafusion's datafusion_bench example (the operator
#                                beside RepartitionExec, and TPC-H with the rule off and on; not
#                                among the defaults: its release build of DataFusion takes ~17
#                                minutes), its tables as printed, the machine first
#   bench/results/ballista.txt   partout-ballista's ballista_bench example (the shuffle write
#                                beside Ballista's, and TPC-H on two clusters on 127.0.0.1; not
#                                among the defaults, as datafusion)
#   bench/plots/*.svg            partout-plots bench/results bench/plots
#
# Every step writes the CPU (name, family, model) and the date with its results.
#
# Usage: bench/figures.sh [writer|scatter|ids|files|partition_by|python|object_store|
#                          datafusion|ballista|cluster|plot]...
#        (writer, scatter, ids, files, python, object_store and plot when none is named)
#        bench/figures.sh all: every step
# Environment: WRITER_SF (0.1), FILES_SF (1), ROUNDS (5), DESTINATIONS, FILE_DESTINATIONS.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

WRITER_SF=${WRITER_SF:-0.1}
FILES_SF=${FILES_SF:-1}
ROUNDS=${ROUNDS:-5}
DESTINATIONS=${DESTINATIONS:-16 64 200 1000}
FILE_DESTINATIONS=${FILE_DESTINATIONS:-16 64 256 1024}
RESULTS=bench/results
STEPS=("$@")
[[ ${#STEPS[@]} -gt 0 ]] || STEPS=(writer scatter ids files python object_store plot)
[[ ${STEPS[*]} != all ]] || STEPS=(writer scatter ids files partition_by python object_store
    datafusion ballista cluster plot)
mkdir -p "$RESULTS"

# The machine, as a line above a table of printed results.
machine() {
    local field
    field() { grep -m1 "^$1[[:space:]]*:" /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'; }
    echo "# $(date -u +%Y-%m-%d), $(field 'model name') (family $(field 'cpu family')," \
        "model $(field model)), $(nproc) CPUs, partout $(git rev-parse --short HEAD)"
}

# bench/.venv and lineitem SF FILES_SF, as the files step makes them (its shortest run).
bench_inputs() {
    local input=target/bench-data/lineitem-sf$FILES_SF.parquet
    if [[ ! -x bench/.venv/bin/python || ! -f $input ]]; then
        echo "making bench/.venv and $input" >&2
        SKIP_BUILD=1 bench/e2e.sh --sf "$FILES_SF" --rounds 1 --warmup 0 --partitions 16 \
            --only partout-2t
    fi
}

for step in "${STEPS[@]}"; do
    case $step in
    writer)
        cargo build --release -p partout-cli --features bench
        out=$RESULTS/writer.jsonl.new
        : >"$out"
        for n in $DESTINATIONS; do
            echo "writer: $n destinations" >&2
            target/release/partout bench writer --json --hash datafusion --sf "$WRITER_SF" \
                --rounds "$ROUNDS" --partitions "$n" --codecs none,lz4,zstd:1 >>"$out"
        done
        mv "$out" "$RESULTS/writer.jsonl"
        date -u +%Y-%m-%d >"$RESULTS/date"
        ;;
    scatter | ids)
        cargo build --release -p partout-cli --features bench
        echo "$step" >&2
        target/release/partout bench "$step" --json >"$RESULTS/$step.jsonl.new"
        mv "$RESULTS/$step.jsonl.new" "$RESULTS/$step.jsonl"
        date -u +%Y-%m-%d >"$RESULTS/date"
        ;;
    files)
        cargo build --release -p partout-cli --features bench
        for n in $FILE_DESTINATIONS; do
            echo "files: $n destinations" >&2
            SKIP_BUILD=1 bench/e2e.sh --sf "$FILES_SF" --rounds "$ROUNDS" --partitions "$n" \
                --json "$RESULTS/files-$n.json"
        done
        date -u +%Y-%m-%d >"$RESULTS/date"
        ;;
    partition_by)
        cargo build --release -p partout-cli --features bench
        input=target/bench-data/lineitem-sf$FILES_SF.parquet
        bench_inputs
        echo "partition_by" >&2
        PARTOUT=${PARTOUT:-${CARGO_TARGET_DIR:-$ROOT/target}/release/partout} \
            bench/partition_by.py --input "$input" --rounds "$ROUNDS" \
                --json "$RESULTS/partition_by.json.new"
        mv "$RESULTS/partition_by.json.new" "$RESULTS/partition_by.json"
        date -u +%Y-%m-%d >"$RESULTS/date"
        ;;
    python)
        bench_inputs
        echo "python" >&2
        python3 bench/python_partition.py --rounds "$ROUNDS" \
            --json "$RESULTS/python_partition.json.new"
        mv "$RESULTS/python_partition.json.new" "$RESULTS/python_partition.json"
        PARTOUT=${PARTOUT:-${CARGO_TARGET_DIR:-$ROOT/target}/release/partout} \
            python3 bench/python_dataset.py --rounds "$ROUNDS" \
                --json "$RESULTS/python_dataset.json.new"
        mv "$RESULTS/python_dataset.json.new" "$RESULTS/python_dataset.json"
        date -u +%Y-%m-%d >"$RESULTS/date"
        ;;
    object_store)
        cargo build --release -p partout-cli --features bench
        cargo build --release -p partout-job --example s3_server
        bench_inputs
        echo "object_store" >&2
        PARTOUT=${PARTOUT:-${CARGO_TARGET_DIR:-$ROOT/target}/release/partout} \
            bench/.venv/bin/python bench/object_store.py --rounds "$ROUNDS" \
                --json "$RESULTS/object_store-runs.json"
        date -u +%Y-%m-%d >"$RESULTS/date"
        ;;
    datafusion | ballista)
        package=partout-$step
        cargo build --release -p "$package" --example "${step}_bench"
        echo "$step" >&2
        { machine; target/release/examples/"${step}_bench" --sf "$FILES_SF" --rounds "$ROUNDS"; } \
            >"$RESULTS/$step.txt.new"
        mv "$RESULTS/$step.txt.new" "$RESULTS/$step.txt"
        date -u +%Y-%m-%d >"$RESULTS/date"
        ;;
    cluster)
        cargo build --release -p partout-ballista --bins --example cluster
        target/release/examples/cluster --sf "$FILES_SF" --rounds "$ROUNDS" \
            --links 100mbit,1gbit,10gbit,unlimited --json "$RESULTS/cluster.json.new"
        mv "$RESULTS/cluster.json.new" "$RESULTS/cluster.json"
        date -u +%Y-%m-%d >"$RESULTS/date"
        ;;
    plot)
        cargo run --release -q -p partout-plots -- "$RESULTS" bench/plots
        ;;
    *)
        echo "figures.sh: unknown step $step (writer, scatter, ids, files, partition_by," \
            "python, object_store, datafusion, ballista, cluster, plot, or all alone)" >&2
        exit 2
        ;;
    esac
done
