#!/usr/bin/env bash
# The benchmark: one backend, N calls of each generator, against nextval() and gen_random_uuid()
# measured in the same run. Prints each function's best time, calls/s, cost per call above the
# empty generate_series baseline, and the ratios the project's targets are stated in; then the
# rate with 1, 2 and 4 concurrent clients (pgbench), and the sustained snowflake rate.
#   ./dev bench            (N=5000000, 3 interleaved rounds)
#   N=1000000 ROUNDS=1 ./dev bench
#   BASELINE_REV=<git revision> ./dev bench
#                          also times snowflake_next() of that revision against this one, in
#                          alternating clusters of this run (the cost of a change on the hot path);
#                          PAIRS (5) clusters of each, COMPARE_ROUNDS (10) rounds in each;
#                          ONLY_COMPARE=1 skips everything else
cd "$(dirname "$0")/.."
source scripts/lib.sh

N=${N:-5000000}
ROUNDS=${ROUNDS:-3}
PGBENCH_SECONDS=${PGBENCH_SECONDS:-5}
PORT=54330
install_extension
trap 'cluster_remove bench' EXIT

# measure TITLE EXPRS-ARRAY CONF-LINE... [keep-running]: a fresh cluster per configuration.
measure() {
    local title=$1 exprs=$2
    shift 2
    local conf=() keep=
    for arg in "$@"; do
        if [ "$arg" = keep-running ]; then keep=1; else conf+=("$arg"); fi
    done
    cluster_remove bench
    cluster_start bench $PORT "shared_preload_libraries = 'pg_idgen'" "${conf[@]}"
    say "$title"
    PGOPTIONS="-c bench.n=$N -c bench.rounds=$ROUNDS" cluster_psql bench -v n="$N" -v exprs="$exprs" -f scripts/bench.sql |
        tee "$WORK_ROOT/bench-last.txt"
    [ -n "$keep" ] || cluster_stop bench
}

# pgbench_rate EXPR CLIENTS: numbers/s with CLIENTS concurrent clients, each transaction taking
# 1,000 numbers, for PGBENCH_SECONDS.
pgbench_rate() {
    local script=$WORK_ROOT/bench-pgbench.sql
    echo "SELECT count($1) FROM (SELECT generate_series(1, 1000)) AS s;" >"$script"
    "$PG_BIN/pgbench" -n -h "$WORK_ROOT/bench/socket" -p $PORT -U postgres -c "$2" -j "$2" -T "$PGBENCH_SECONDS" \
        -f "$script" postgres 2>/dev/null | awk '/^tps/ { printf "%.0f", $3 * 1000 }'
}

# column VALUE-OF FUNCTION COLUMN-NUMBER from the last table printed.
column() { awk -F'|' -v f="$1" -v c="$2" '{gsub(/^ +| +$/, "", $1)} $1 == f {gsub(/ /, "", $c); print $c}' "$WORK_ROOT/bench-last.txt"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f%%", 100 * a / b }'; }

# Sections 1 and 2 run unless ONLY_COMPARE is set (then only section 3 runs).
if [ -z "${ONLY_COMPARE:-}" ]; then
    # 1. Cost per call of every generator. For snowflake, a layout whose cap (262,144,000 ids/s) is far above what one backend can
    #    call, so the generator never waits for the clock and only its own cost shows.
    measure "cost per call, snowflake layout 41/4/18 (cap far above the call rate), N=$N" \
        "{g,snowflake_next(),\"nextval('bench_seq')\",gen_random_uuid(),objectid_gen(),uuid_v7_next(),\"segment_next('bench_1k')\",\"segment_next('bench_100k')\"}" \
        "pg_idgen.node_id = 1" "pg_idgen.node_bits = 4" "pg_idgen.sequence_bits = 18" keep-running
    snow=$(column 'snowflake_next()' 4)
    seq=$(column "nextval('bench_seq')" 4)
    uuid=$(column 'gen_random_uuid()' 4)
    raw_rate=$(column 'snowflake_next()' 3)
    echo "snowflake_next() cost above baseline: $(ratio "$snow" "$seq") of nextval()'s, $(ratio "$snow" "$uuid") of gen_random_uuid()'s (target: <= 25% of nextval()'s)"
    for f in 'objectid_gen()' 'uuid_v7_next()'; do
        echo "$f cost above baseline: $(ratio "$(column "$f" 4)" "$uuid") of gen_random_uuid()'s (target: <= 50%)"
    done
    for f in "segment_next('bench_1k')" "segment_next('bench_100k')"; do
        echo "$f cost above baseline: $(ratio "$(column "$f" 4)" "$seq") of nextval()'s (target: <= 33%)"
    done

    # Concurrency: 1, 2 and 4 clients on this machine's 2 cores.
    say "numbers/s with 1, 2 and 4 concurrent clients (pgbench, ${PGBENCH_SECONDS}s each, 1,000 numbers per transaction)"
    printf '%-28s %12s %12s %12s\n' function "1 client" "2 clients" "4 clients"
    for f in "snowflake_next()" "segment_next('bench_1k')" "nextval('bench_seq')"; do
        printf '%-28s %12s %12s %12s\n' "$f" "$(pgbench_rate "$f" 1)" "$(pgbench_rate "$f" 2)" "$(pgbench_rate "$f" 4)"
    done
    cluster_stop bench

    # 2. Sustained rate with the default layout (twitter 41/10/12: 4,096 ids per ms, 4,096,000 ids/s).
    #    max_clock_borrow = 0 so the run cannot finish early on time borrowed from the future.
    measure "sustained rate, default layout (twitter, cap 4,096,000 ids/s), no clock borrowing, N=$N" \
        '{g,snowflake_next()}' \
        "pg_idgen.node_id = 1" "pg_idgen.max_clock_borrow = 0"
    rate=$(column 'snowflake_next()' 3)
    echo "snowflake_next() sustained $rate ids/s = $(ratio "$rate" 4096000) of the layout's cap (target: >= 95%);" \
         "the same backend calls it $raw_rate times/s when the cap is out of the way"
fi

# 3. Optional: snowflake_next() of another revision against this one, same settings as in 1,
#    alternating builds, best and median of each. Both are packaged once; the installed files
#    are swapped.
if [ -n "${BASELINE_REV:-}" ]; then
    PKG=$WORK_ROOT/bench-packages
    # Why one target directory: the dependencies are the same, only pg_idgen itself is rebuilt.
    target=$PWD/target
    package() { # package SOURCE-DIR NAME
        say "packaging $2"
        (cd "$1" && CARGO_TARGET_DIR=$target cargo pgrx package --pg-config "$PG_CONFIG" --out-dir "$PKG/$2" >/dev/null)
    }
    rm -rf "$PKG" "$WORK_ROOT/baseline-src" && mkdir -p "$WORK_ROOT/baseline-src"
    git archive "$BASELINE_REV" | tar -x -C "$WORK_ROOT/baseline-src"
    package "$WORK_ROOT/baseline-src" baseline
    package . current
    swap_in() { cp -r "$PKG/$1/." /; }
    ROUNDS=${COMPARE_ROUNDS:-10}
    for pair in $(seq "${PAIRS:-5}"); do for build in baseline current; do
        swap_in $build
        measure "snowflake_next(), $build build ($([ $build = baseline ] && echo "$BASELINE_REV" || git rev-parse --short HEAD)), layout 41/4/18, N=$N" \
            '{g,snowflake_next()}' "pg_idgen.node_id = 1" "pg_idgen.node_bits = 4" "pg_idgen.sequence_bits = 18"
        echo "$build $(column 'snowflake_next()' 4)" >>"$PKG/costs"
    done; done
    swap_in current
    best() { awk -v b="$1" '$1 == b { print $2 }' "$PKG/costs" | sort -n | head -1; }
    median() { awk -v b="$1" '$1 == b { print $2 }' "$PKG/costs" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
    change() { awk -v a="$2" -v b="$1" 'BEGIN { printf "%+.1f%%", 100 * (a - b) / b }'; }
    say "snowflake_next() ns per call above baseline: best of $ROUNDS rounds in each of ${PAIRS:-5} clusters per build, alternating"
    printf '%-12s %10s %10s\n' build "best" "median of the clusters"
    printf '%-12s %10s %10s\n' "$BASELINE_REV" "$(best baseline)" "$(median baseline)" current "$(best current)" "$(median current)"
    echo "change: best $(change "$(best baseline)" "$(best current)"), median $(change "$(median baseline)" "$(median current)")"
fi
