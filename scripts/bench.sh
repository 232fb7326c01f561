#!/usr/bin/env bash
# The benchmark: one backend, N calls of each generator, against nextval() and gen_random_uuid()
# measured in the same run. Prints each function's best time, calls/s, cost per call above the
# empty generate_series baseline, and the ratios the project's targets are stated in; then the
# rate with 1, 2 and 4 concurrent clients (pgbench), the sustained snowflake rate, and the per-key
# sequences against what they replace (scripts/bench_seq.sh).
#   ./dev bench [--pg N]   (N=5000000, 3 interleaved rounds; on 18 also core uuidv7())
#   N=1000000 ROUNDS=1 ./dev bench
#   N=200000 ROUNDS=1 PGBENCH_SECONDS=1 SEQ_KEYS=200000 ./dev bench   (a quick look at every part)
#   ONLY_SEQ=1 ./dev bench  only the per-key sequences (scripts/bench_seq.sh: SEQ_PARTS chooses
#                          its parts, SEQ_KEYS and SEQ_KEYS_LARGE the many keys)
#   ONLY_MASK=1 ./dev bench only the public numbers (id_mask and id_unmask in each form)
#   ONLY_LEASED=1 ./dev bench  only the per-key sequences leased from a segment authority
#                          (scripts/bench_seq_leased.sh: an authority and two servers)
#   NO_INSTALL=1 ./dev bench  the build installed as it is, not this tree's
#   BASELINE_REV=<git revision> ./dev bench
#                          also times snowflake_next() and uuid_v7_next() of that revision against
#                          this one, in two clusters side by side, COMPARE_ROUNDS (30) alternating
#                          rounds, and counts their instructions under callgrind (the cost of a
#                          change on the hot path); ONLY_COMPARE=1 skips everything else
cd "$(dirname "$0")/.."
source scripts/lib.sh

N=${N:-5000000}
ROUNDS=${ROUNDS:-3}
PGBENCH_SECONDS=${PGBENCH_SECONDS:-5}
PORT=54330
# NO_INSTALL=1 measures the build installed as it is (builds compared by installing each in turn).
[ -n "${NO_INSTALL:-}" ] || install_extension
trap 'cluster_remove bench' EXIT

# bench_start CONF-LINE...: (re)starts the bench cluster with pg_idgen preloaded and these settings.
bench_start() {
    cluster_stop bench
    cluster_start bench $PORT "shared_preload_libraries = 'pg_idgen'" "$@"
}

# time_calls TITLE EXPRS-ARRAY: N calls of each expression in one backend of the running bench
# cluster, best of ROUNDS (scripts/bench.sql); the table printed is kept for `column`.
time_calls() {
    say "$1"
    PGOPTIONS="-c bench.n=$N -c bench.rounds=$ROUNDS" cluster_psql bench -v n="$N" -v exprs="$2" -f scripts/bench.sql |
        tee "$WORK_ROOT/bench-last.txt"
}

# measure TITLE EXPRS-ARRAY CONF-LINE... [keep-running]: a fresh cluster per configuration.
measure() {
    local title=$1 exprs=$2
    shift 2
    local conf=() keep=
    for arg in "$@"; do
        if [ "$arg" = keep-running ]; then keep=1; else conf+=("$arg"); fi
    done
    cluster_remove bench
    bench_start "${conf[@]}"
    time_calls "$title" "$exprs"
    [ -n "$keep" ] || cluster_stop bench
}

# pgbench_run SCRIPT CLIENTS: pgbench's report of CLIENTS clients running SCRIPT for
# PGBENCH_SECONDS against the bench cluster; fails, showing pgbench's errors, when a client did.
pgbench_run() {
    local errors=$WORK_ROOT/bench-pgbench.err
    if ! "$PG_BIN/pgbench" -n -h "$WORK_ROOT/bench/socket" -p $PORT -U postgres -c "$2" -j "$2" -T "$PGBENCH_SECONDS" \
        -f "$1" postgres 2>"$errors"; then
        cat "$errors" >&2
        return 1
    fi
}

# pgbench_rate EXPR CLIENTS: numbers/s with CLIENTS concurrent clients, each transaction taking
# 1,000 numbers, for PGBENCH_SECONDS.
pgbench_rate() {
    local script=$WORK_ROOT/bench-pgbench.sql
    echo "SELECT count($1) FROM (SELECT generate_series(1, 1000)) AS s;" >"$script"
    pgbench_run "$script" "$2" | awk '/^tps/ { printf "%.0f", $3 * 1000 }'
}

# column VALUE-OF FUNCTION COLUMN-NUMBER from the last table printed.
column() { awk -F'|' -v f="$1" -v c="$2" '{gsub(/^ +| +$/, "", $1)} $1 == f {gsub(/ /, "", $c); print $c}' "$WORK_ROOT/bench-last.txt"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f%%", 100 * a / b }'; }
multiple() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2fx", a / b }'; }

# instructions_per_call CLUSTER EXPR WARM-UP: instructions per call of EXPR, counted by callgrind:
# repeatable on a shared machine, where times are not. The cluster (made by cluster_start) runs
# under valgrind; WARM-UP runs first (it waits for what the calls need), then one session counts the
# empty loop, another the same loop calling EXPR; the difference per call is the function's cost.
instructions_per_call() {
    local name=$1 expr=$2 warm_up=$3 out=$WORK_ROOT/callgrind-$1 calls=200000
    cluster_stop "$name"
    rm -rf "$out" && as_postgres mkdir -p "$out"
    env -u RUST_BACKTRACE runuser -u postgres -- valgrind --tool=callgrind --trace-children=yes \
        --callgrind-out-file="$out/%p.out" "$PG_BIN/postgres" -D "$WORK_ROOT/$name/data" >"$out/server.log" 2>&1 &
    for _ in $(seq 120); do cluster_psql "$name" -Atc "SELECT 1" >/dev/null 2>&1 && break; sleep 1; done
    cluster_psql "$name" -Atc "$warm_up" >/dev/null
    local empty calling
    empty=$(cluster_psql "$name" -Atc "SELECT pg_backend_pid() FROM (SELECT count(g) FROM (SELECT generate_series(1, $calls) AS g) AS s) AS c")
    calling=$(cluster_psql "$name" -Atc "SELECT pg_backend_pid() FROM (SELECT count($expr) FROM (SELECT generate_series(1, $calls) AS g) AS s) AS c")
    cluster_stop "$name"
    local ir_empty ir_calling
    ir_empty=$(awk '/^(summary|totals):/ { print $2; exit }' "$out/$empty.out")
    ir_calling=$(awk '/^(summary|totals):/ { print $2; exit }' "$out/$calling.out")
    echo $(((ir_calling - ir_empty) / calls))
}

# Sections 1, 2, 3 and 5 run unless ONLY_COMPARE is set (then only section 4 runs); ONLY_SEQ runs
# section 3 alone, ONLY_MASK section 5 alone.
if [ -z "${ONLY_COMPARE:-}${ONLY_SEQ:-}${ONLY_MASK:-}${ONLY_LEASED:-}" ]; then
    # 1. Cost per call of every generator. For snowflake, a layout whose cap (262,144,000 ids/s) is far above what one backend can
    #    call, so the generator never waits for the clock and only its own cost shows.
    # PostgreSQL 18 has a UUIDv7 generator of its own, uuidv7(): timed in the same run, as the yardstick.
    core_uuidv7=
    [ "$PG_MAJOR" -lt 18 ] || core_uuidv7=",uuidv7()"
    measure "cost per call on PostgreSQL $PG_MAJOR, snowflake layout 41/4/18 (cap far above the call rate), N=$N" \
        "{g,snowflake_next(),\"nextval('bench_seq')\",gen_random_uuid()$core_uuidv7,objectid_gen(),uuid_v7_next(),\"segment_next('bench_1k')\",\"segment_next('bench_100k')\"}" \
        "pg_idgen.node_id = 1" "pg_idgen.node_bits = 4" "pg_idgen.sequence_bits = 18" keep-running
    snow=$(column 'snowflake_next()' 4)
    seq=$(column "nextval('bench_seq')" 4)
    uuid=$(column 'gen_random_uuid()' 4)
    raw_rate=$(column 'snowflake_next()' 3)
    echo "snowflake_next() cost above baseline: $(ratio "$snow" "$seq") of nextval()'s, $(ratio "$snow" "$uuid") of gen_random_uuid()'s (target: <= 25% of nextval()'s)"
    for f in 'objectid_gen()' 'uuid_v7_next()'; do
        echo "$f cost above baseline: $(ratio "$(column "$f" 4)" "$uuid") of gen_random_uuid()'s (target: <= 50%)"
    done
    if [ -n "$core_uuidv7" ]; then
        echo "uuid_v7_next() cost above baseline: $(ratio "$(column 'uuid_v7_next()' 4)" "$(column 'uuidv7()' 4)") of core uuidv7()'s (target: <= 25%)"
        echo "uuidv7() cost above baseline: $(ratio "$(column 'uuidv7()' 4)" "$uuid") of gen_random_uuid()'s"
    fi
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

# 3. Per-key sequences against segment_next(), nextval() and what users do without them.
if [ -z "${ONLY_COMPARE:-}${ONLY_MASK:-}${ONLY_LEASED:-}" ]; then
    source scripts/bench_seq.sh
fi

# 6. Per-key sequences on many servers: scripts/bench_seq_leased.sh.
source scripts/bench_seq_leased.sh

# 5. Public numbers: ns per call of masking and unmasking in each form, against snowflake_next(),
#    md5(id::text) (what users reach for today) and gen_random_uuid() (the goal: one id_mask()
#    costs less), in the same run. The key schedules are expanded once per backend, in the warm-up.
#    Unmasking a text form is timed as a round trip; its cost is the round trip's less the mask's.
if [ -z "${ONLY_COMPARE:-}${ONLY_SEQ:-}${ONLY_LEASED:-}" ]; then
    cluster_remove bench
    bench_start "pg_idgen.node_id = 1" "pg_idgen.node_bits = 4" "pg_idgen.sequence_bits = 18"
    cluster_psql bench -q -c "CREATE EXTENSION pg_idgen" -c "SELECT id_mask_key_create()" >/dev/null
    time_calls "public numbers on PostgreSQL $PG_MAJOR, N=$N" \
        "{g,snowflake_next(),md5(g::text),gen_random_uuid(),id_mask(g),id_unmask(g),\"id_mask(g, 'orders')\",\"id_mask_decimal(g, 12)\",\"id_unmask_decimal(id_mask_decimal(g, 12))\",id_mask_base32(g),id_unmask_base32(id_mask_base32(g))}"
    cluster_stop bench
    uuid=$(column 'gen_random_uuid()' 4)
    md5=$(column 'md5(g::text)' 4)
    for f in 'id_mask(g)' 'id_unmask(g)' "id_mask(g, 'orders')" 'id_mask_decimal(g, 12)' 'id_mask_base32(g)'; do
        echo "$f cost above baseline: $(ratio "$(column "$f" 4)" "$uuid") of gen_random_uuid()'s (goal: < 100%), $(ratio "$(column "$f" 4)" "$md5") of md5(id::text)'s"
    done
    for form in decimal base32; do
        case $form in
        decimal) mask='id_mask_decimal(g, 12)' trip='id_unmask_decimal(id_mask_decimal(g, 12))' ;;
        base32) mask='id_mask_base32(g)' trip='id_unmask_base32(id_mask_base32(g))' ;;
        esac
        echo "id_unmask_$form() cost: $(awk -v a="$(column "$trip" 4)" -v b="$(column "$mask" 4)" 'BEGIN { printf "%.1f", a - b }') ns (the round trip less the mask)"
    done
fi

# 4. Optional: the generators of another revision against this one, same layout as in 1. Both
#    builds are packaged into directories of their own, and two clusters run side by side, each
#    loading its build through dynamic_library_path. Rounds alternate between them (which one
#    goes first alternates too), so both see the same moments of this shared machine. Then each
#    runs once under callgrind, whose instruction counts do not depend on the machine's load.
if [ -n "${BASELINE_REV:-}" ] && [ -z "${ONLY_SEQ:-}" ]; then
    PKG=$WORK_ROOT/bench-packages
    LIBDIR=$("$PG_CONFIG" --pkglibdir)
    # Why one target directory: the dependencies are the same, only pg_idgen itself is rebuilt.
    target=$PWD/target
    package() { # package SOURCE-DIR NAME
        say "packaging $2"
        # Why the touch: both builds write the same target/release/libpg_idgen.so, and cargo, finding
        # a tree's sources older than its last build (git archive dates files by the commit), would
        # package the other build's library instead.
        touch "$1/src/lib.rs"
        (cd "$1" && CARGO_TARGET_DIR=$target cargo pgrx package --pg-config "$PG_CONFIG" --out-dir "$PKG/$2" >/dev/null)
    }
    rm -rf "$PKG" "$WORK_ROOT/baseline-src" && mkdir -p "$WORK_ROOT/baseline-src"
    git archive "$BASELINE_REV" | tar -x -C "$WORK_ROOT/baseline-src"
    package "$WORK_ROOT/baseline-src" baseline
    package . current
    if cmp -s "$PKG/baseline$LIBDIR/pg_idgen.so" "$PKG/current$LIBDIR/pg_idgen.so"; then
        echo "the two builds packaged the same library: the comparison would measure one build twice" >&2
        exit 1
    fi
    chmod -R a+rX "$PKG"
    trap 'cluster_remove bench; cluster_remove bench-baseline; cluster_remove bench-current' EXIT
    port=54332
    for build in baseline current; do
        cluster_remove bench-$build
        cluster_start bench-$build $port "dynamic_library_path = '$PKG/$build$LIBDIR:\$libdir'" \
            "shared_preload_libraries = 'pg_idgen'" "pg_idgen.node_id = 1" "pg_idgen.node_bits = 4" "pg_idgen.sequence_bits = 18"
        # Only the functions timed, from this cluster's own build; no CREATE EXTENSION (its SQL is
        # the installed version's). Both are pgrx functions of plain types, in every version.
        cluster_psql bench-$build -q -c "CREATE FUNCTION snowflake_next() RETURNS bigint LANGUAGE c VOLATILE
                                           AS 'pg_idgen', 'snowflake_next_wrapper'" \
            -c "CREATE FUNCTION uuid_v7_next() RETURNS uuid LANGUAGE c VOLATILE AS 'pg_idgen', 'uuid_v7_next_wrapper'" \
            -f scripts/bench_seconds.sql
        port=$((port + 1))
    done
    compared=("snowflake_next()" "uuid_v7_next()")
    round() { # round BUILD EXPR: ns per call above the empty baseline, one measurement
        cluster_psql bench-$1 -At -c "SELECT round(((bench_seconds('$2', $N) - bench_seconds('g', $N)) * 1e9 / $N)::numeric, 1)"
    }
    rounds=${COMPARE_ROUNDS:-30}
    best() { awk -v b="$1" '$1 == b { print $2 }' "$PKG/costs" | sort -n | sed -n 1p; }
    median() { awk -v b="$1" '$1 == b { print $2 }' "$PKG/costs" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
    change() { awk -v a="$2" -v b="$1" 'BEGIN { printf "%+.1f%%", 100 * (a - b) / b }'; }
    for expr in "${compared[@]}"; do
        say "$expr of $BASELINE_REV against the current build: $rounds alternating rounds, N=$N, layout 41/4/18"
        round baseline "$expr" >/dev/null && round current "$expr" >/dev/null # warm-up
        : >"$PKG/costs"
        for r in $(seq "$rounds"); do
            order="baseline current"
            [ $((r % 2)) = 0 ] && order="current baseline"
            for build in $order; do echo "$build $(round $build "$expr")" >>"$PKG/costs"; done
        done
        printf '%-12s %10s %10s\n' "ns/call" best median "$BASELINE_REV" "$(best baseline)" "$(median baseline)" current "$(best current)" "$(median current)"
        echo "$expr cost change: best $(change "$(best baseline)" "$(best current)"), median $(change "$(median baseline)" "$(median current)")"
    done

    command -v valgrind >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind >/dev/null
    for expr in "${compared[@]}"; do
        say "$expr instructions per call (callgrind), $BASELINE_REV against the current build"
        ir_before=$(instructions_per_call bench-baseline "$expr" "SELECT snowflake_next()")
        ir_after=$(instructions_per_call bench-current "$expr" "SELECT snowflake_next()")
        printf '%-12s %12s\n' build "instructions" "$BASELINE_REV" "$ir_before" current "$ir_after"
        echo "$expr instructions per call: $(awk -v a="$ir_after" -v b="$ir_before" 'BEGIN { printf "%+.1f%%", 100 * (a - b) / b }')"
    done
fi
