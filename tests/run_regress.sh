#!/usr/bin/env bash
# The pg_regress suite. Each phase starts the `regress` cluster with one configuration and runs
# the tests written for it; a phase whose output differs from tests/expected fails the run.
# Needs the extension installed (scripts/test.sh does that first).
#   tests/run_regress.sh              every test
#   tests/run_regress.sh NAME...      only these tests (each phase's `setup` runs before them)
# On the PostgreSQL of $PG_CONFIG (scripts/lib.sh: use_pg); tests of core functions newer than 15 run
# on the majors that have them.
cd "$(dirname "$0")/.."
source scripts/lib.sh

PORT=54331
PG_REGRESS=$($PG_CONFIG --pkglibdir)/pgxs/src/test/regress/pg_regress
OUT=$WORK_ROOT/regress-out
trap 'cluster_remove regress' EXIT
cluster_remove regress
rm -rf "$OUT" && mkdir -p "$OUT"

# The expected output of each test on this PostgreSQL: tests/expected/NAME.out, or where the server of a
# newer major prints something else (its messages, its plans), tests/expected/pgV/NAME.out of the newest
# V from 16 up to this major. Gathered, with the tests, into the input directory of pg_regress.
INPUT=$OUT/input
mkdir -p "$INPUT/expected"
ln -s "$PWD/tests/sql" "$INPUT/sql"
for expected in tests/expected/*.out; do
    chosen=$expected
    for ((major = 16; major <= PG_MAJOR; major++)); do
        [ ! -f "tests/expected/pg$major/${expected##*/}" ] || chosen=tests/expected/pg$major/${expected##*/}
    done
    ln -s "$PWD/$chosen" "$INPUT/expected/"
done

# phase NAME DATABASE "CONF-LINE;..." TEST...
# The first phase runs in the existing `postgres` database of a fresh cluster, because the
# pg_idgen worker connects there (pg_idgen.database) and pg_regress could not drop it.
wanted=("$@")
for test in "${wanted[@]}"; do
    [ -f "tests/sql/$test.sql" ] || { echo "no pg_regress test named '$test' (tests/sql/)" >&2; exit 2; }
done
ran=0

phase() {
    local name=$1 database=$2 conf=$3
    shift 3
    if [ ${#wanted[@]} -gt 0 ]; then
        local chosen=() test
        for test in "$@"; do
            if [ "$test" = setup ] || [[ " ${wanted[*]} " == *" $test "* ]]; then
                chosen+=("$test")
            fi
        done
        [ ${#chosen[@]} -gt 1 ] || return 0
        set -- "${chosen[@]}"
    fi
    ran=$((ran + $# - 1))
    local existing=()
    [ "$database" = postgres ] && existing=(--use-existing)
    say "pg_regress phase '$name': $*"
    cluster_stop regress
    local lines=()
    [ -n "$conf" ] && IFS=';' read -ra lines <<<"$conf"
    cluster_start regress $PORT "${lines[@]}"
    mkdir -p "$OUT/$name"
    if ! "$PG_REGRESS" --bindir="$PG_BIN" --inputdir="$INPUT" --outputdir="$OUT/$name" \
        --host="$WORK_ROOT/regress/socket" --port=$PORT --user=postgres --dbname="$database" "${existing[@]}" "$@"; then
        # pg_regress writes the diffs only when a test ran and differed.
        local diffs=$OUT/$name/regression.diffs
        [ ! -f "$diffs" ] || cat "$diffs" >&2
        return 1
    fi
}

# Tests of what core PostgreSQL has from some major on: UUIDv7s (uuidv7(), uuid_extract_timestamp()) from 18.
since_major=()
[ "$PG_MAJOR" -lt 18 ] || since_major+=(core_uuid)

phase preloaded postgres "shared_preload_libraries = 'pg_idgen';pg_idgen.node_id = 7;pg_idgen.segment_wait_timeout = 3000" \
    setup snowflake decode objectid uuid7 segment seq seq_text_keys table_guard seq_fill_latin1 mask blocks text_form compose migrate status settings registry_schema seq_tables_missing "${since_major[@]}"
phase node_id_unset pg_idgen_regress "shared_preload_libraries = 'pg_idgen'" setup node_id_unset
# Why the server is its own segment authority (database postgres): pg_regress runs one server, and
# what the tests show is what a server with an authority says.
phase authority pg_idgen_regress "shared_preload_libraries = 'pg_idgen';pg_idgen.node_id = 7;pg_idgen.segment_authority = 'host=$WORK_ROOT/regress/socket port=$PORT dbname=postgres'" \
    setup authority
# Why in pg_idgen_regress: a database other than pg_idgen.database needs a worker of its own.
phase few_tags pg_idgen_regress "shared_preload_libraries = 'pg_idgen';pg_idgen.node_id = 7;pg_idgen.max_tags = 2" setup few_tags
# Three worker slots: the logical replication launcher, pg_idgen's clock worker and the worker of
# pg_idgen.database ("postgres"); none is left for this database's worker.
phase no_worker_slot pg_idgen_regress "shared_preload_libraries = 'pg_idgen';pg_idgen.node_id = 7;max_worker_processes = 3;pg_idgen.segment_wait_timeout = 500" setup no_worker_slot
# Two worker slots: the logical replication launcher and pg_idgen's clock worker; the worker of
# pg_idgen.database, which is this phase's database, cannot be registered, so it never runs.
phase no_worker pg_idgen_regress "shared_preload_libraries = 'pg_idgen';pg_idgen.node_id = 7;pg_idgen.database = 'pg_idgen_regress';max_worker_processes = 2;pg_idgen.segment_wait_timeout = 500" setup no_worker
phase not_preloaded pg_idgen_regress "" setup not_preloaded

if [ $ran -eq 0 ]; then
    echo "no pg_regress test ran ('setup' runs only before the tests of a phase)" >&2
    exit 2
fi
