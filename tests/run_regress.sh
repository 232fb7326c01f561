#!/usr/bin/env bash
# The pg_regress suite. Each phase starts the `regress` cluster with one configuration and runs
# the tests written for it; a phase whose output differs from tests/expected fails the run.
# Needs the extension installed (scripts/test.sh does that first).
cd "$(dirname "$0")/.."
source scripts/lib.sh

PORT=54331
PG_REGRESS=$($PG_CONFIG --pkglibdir)/pgxs/src/test/regress/pg_regress
OUT=$WORK_ROOT/regress-out
trap 'cluster_remove regress' EXIT
rm -rf "$OUT" && mkdir -p "$OUT"

# phase NAME "CONF-LINE ..." TEST...
phase() {
    local name=$1 conf=$2
    shift 2
    say "pg_regress phase '$name': $*"
    cluster_stop regress
    local lines=()
    [ -n "$conf" ] && IFS=';' read -ra lines <<<"$conf"
    cluster_start regress $PORT "${lines[@]}"
    mkdir -p "$OUT/$name"
    if ! "$PG_REGRESS" --bindir="$PG_BIN" --inputdir=tests --outputdir="$OUT/$name" \
        --host="$WORK_ROOT/regress/socket" --port=$PORT --user=postgres --dbname=pg_idgen_regress "$@"; then
        cat "$OUT/$name/regression.diffs" >&2 || true
        return 1
    fi
}

phase preloaded "shared_preload_libraries = 'pg_idgen';pg_idgen.node_id = 7" setup snowflake decode objectid uuid7 status settings
phase node_id_unset "shared_preload_libraries = 'pg_idgen'" setup node_id_unset
phase not_preloaded "" setup not_preloaded
