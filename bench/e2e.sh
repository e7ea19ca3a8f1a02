#!/usr/bin/env bash
# End-to-end benchmark: TPC-H lineitem (one Parquet file) repartitioned by
# l_orderkey into N snappy Parquet files by partout (1 and 2 threads), DuckDB
# and Polars (2 threads). See bench/e2e.py for how runs are timed and checked.
#
# Usage: bench/e2e.sh [--sf SF] [e2e.py options: --rounds R --partitions N
#                      --threads T --only duckdb,polars --baseline BIN --json FILE ...]
# Environment: SF (default 1), ROUNDS (5), PARTITIONS (64), THREADS (2),
#              SKIP_BUILD=1 to use the built partout as it is,
#              PARTOUT (default: $CARGO_TARGET_DIR or target, then release/partout),
#              BENCH_PYTHON: a Python with duckdb, polars, pyarrow and tpchgen-cli to use as
#              it is (default: bench/.venv, made here with the pinned versions).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

SF=${SF:-1}
ROUNDS=${ROUNDS:-5}
PARTITIONS=${PARTITIONS:-64}
THREADS=${THREADS:-2}
SKIP_BUILD=${SKIP_BUILD:-0}

ARGS=()
while [[ $# -gt 0 ]]; do
    case $1 in
        --sf) SF=$2; shift 2 ;;
        --sf=*) SF=${1#--sf=}; shift ;;
        *) ARGS+=("$1"); shift ;;
    esac
done

# Python tools, pinned so that results stay comparable across runs.
if [[ -n ${BENCH_PYTHON:-} ]]; then
    PYTHON=$BENCH_PYTHON
else
    VENV=bench/.venv
    if [[ ! -x $VENV/bin/python ]]; then
        python3 -m venv "$VENV"
    fi
    "$VENV/bin/pip" install -q --disable-pip-version-check \
        duckdb==2.0.0 polars==2.1.0 pyarrow==26.0.1 tpchgen-cli==4.0.0
    PYTHON=$VENV/bin/python
fi
PYBIN=$(dirname "$PYTHON")

# lineitem at the chosen scale factor, as one Parquet file (tpchgen-cli's
# default snappy compression and row groups).
DATA=target/bench-data
INPUT=$DATA/lineitem-sf$SF.parquet
if [[ ! -f $INPUT ]]; then
    echo "generating $INPUT" >&2
    GEN=$DATA/.gen-sf$SF
    rm -rf "$GEN"
    mkdir -p "$GEN"
    "$PYBIN/tpchgen-cli" parquet -s "$SF" --tables lineitem --output-dir "$GEN" --quiet
    if [[ -f $GEN/lineitem.parquet ]]; then
        mv "$GEN/lineitem.parquet" "$INPUT"
    elif [[ -d $GEN/lineitem ]]; then
        # Written in parts: join them into one file.
        "$PYTHON" - "$GEN/lineitem" "$INPUT" <<'EOF'
import sys
import pyarrow.dataset as ds
import pyarrow.parquet as pq
src, dst = sys.argv[1], sys.argv[2]
d = ds.dataset(src, format="parquet")
with pq.ParquetWriter(dst, d.schema, compression="snappy") as w:
    for batch in d.to_batches():
        w.write_batch(batch)
EOF
    else
        echo "e2e.sh: tpchgen-cli wrote no lineitem output in $GEN" >&2
        exit 1
    fi
    rm -rf "$GEN"
fi

if [[ $SKIP_BUILD != 1 ]]; then
    cargo build --release -p partout-cli
fi
export PARTOUT=${PARTOUT:-${CARGO_TARGET_DIR:-$ROOT/target}/release/partout}

exec "$PYTHON" bench/e2e.py --input "$INPUT" --rounds "$ROUNDS" \
    --partitions "$PARTITIONS" --threads "$THREADS" ${ARGS[@]+"${ARGS[@]}"}
