#!/usr/bin/env bash
# The test suites, in order; exits non-zero on the first failing suite. Run through `./dev test`:
#   ./dev test                  every part on every supported PostgreSQL: unit and regress on 15,
#                               16, 17 and 18; system on 15 and 18 (the oldest and the newest);
#                               package on 15 (installed for real)
#   ./dev test --pg N           every part on PostgreSQL N only
#   ./dev test [--pg N] PART [FILTER…]   one part (on every version, or on N), narrowed by FILTER;
#                               a filter that selects nothing fails
#     unit     #[test] and #[pg_test] tests, inside a cluster that cargo-pgrx starts (as postgres);
#              FILTER: part of a test's name
#     regress  the pg_regress suite in tests/ against clusters of our own; FILTER: test names
#     system   the system tests in pgrx-tests/: real clusters, concurrent clients, restarts,
#              standbys; FILTER: a test file (pgrx-tests/tests/NAME.rs) or part of a test's name
#     package  the Debian package: dpkg -i, ids made, dpkg -r (then the extension is installed again)
# Prints what ran on which version, and how long it took, at the end.
cd "$(dirname "$0")/.."
source scripts/lib.sh

take_pg_option "$@"
set -- "${ARGS[@]}"
part=${1:-all}
filters=("${@:2}")
case "$part" in
unit | system) [ ${#filters[@]} -le 1 ] || { echo "./dev test $part takes one filter" >&2; exit 2; } ;;
regress) ;;
all | package) [ ${#filters[@]} -eq 0 ] || { echo "./dev test $part takes no filter" >&2; exit 2; } ;;
*)
    echo "unknown test part '$part': one of unit, regress, system, package" >&2
    exit 2
    ;;
esac
filter=${filters[0]:-}

# Runs a test command; with a filter, fails unless it ran at least one test ("test … ok").
run_filtered() {
    local log
    log=$(mktemp)
    local status=0
    "$@" 2>&1 | tee "$log" || status=$?
    if [ $status -eq 0 ] && [ -n "$filter" ] && ! grep -qE '^test .* \.\.\. ok' "$log"; then
        echo "no test matched '$filter'" >&2
        status=2
    fi
    rm -f "$log"
    return $status
}

# runs PART MAJOR: whether this run runs PART on PostgreSQL MAJOR.
runs() {
    [ "$part" = all ] || [ "$part" = "$1" ] || return 1
    # Why only where asked, or on the oldest and the newest: a run on all four must stay well within
    # CI's time; the system tests are the long part, and what differs between majors shows at its ends.
    [ -n "$PG_CHOSEN" ] || case "$1" in
        system) [ "$2" = 15 ] || [ "$2" = 18 ] ;;
        package) [ "$2" = 15 ] ;;
    esac
}

summary=()
# timed LABEL COMMAND...: runs COMMAND, notes LABEL and its duration for the summary.
timed() {
    local label=$1 start=$SECONDS status=0
    shift
    # Why each function ends in the command whose status counts: set -e does not apply under ||.
    "$@" || status=$?
    local outcome=ok
    [ $status -eq 0 ] || outcome="FAILED (exit $status)"
    summary+=("$(printf '%-28s %4d:%02d  %s' "$label" $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60)) "$outcome")")
    [ $status -eq 0 ] || exit $status
}

unit_tests() {
    local pgrx_data=$WORK_ROOT/pgrx-test-data
    mkdir -p "$pgrx_data" && chown postgres:postgres "$pgrx_data"
    # Why no RUST_BACKTRACE: with it, a Rust error's DETAIL carries a backtrace (PGRX_NOTES.md).
    run_filtered env -u RUST_BACKTRACE cargo pgrx test "pg$PG_MAJOR" ${filter:+"$filter"} --runas postgres --pgdata "$pgrx_data"
}

system_tests() {
    # Why --no-fail-fast: one failing test file must not hide what the others would show.
    local selection=(-- --test-threads=1)
    if [ -n "$filter" ] && [ -f "pgrx-tests/tests/$filter.rs" ]; then
        selection=(--test "$filter" -- --test-threads=1)
    elif [ -n "$filter" ]; then
        selection=(-- --test-threads=1 "$filter")
    fi
    # The harness starts its clusters with the binaries of $PG_CONFIG (exported by use_pg).
    run_filtered cargo test --release --no-fail-fast --manifest-path pgrx-tests/Cargo.toml "${selection[@]}"
}

report() {
    say "what ran, and how long it took"
    printf '%s\n' "${summary[@]}" >&2
}
trap report EXIT

versions=("${PG_VERSIONS[@]}")
[ -z "$PG_CHOSEN" ] || versions=("$PG_CHOSEN")
for major in "${versions[@]}"; do
    use_pg "$major"
    ensure_pg "$major"
    find_pg_bin

    if runs unit "$major"; then
        say "PostgreSQL $major: #[test] and #[pg_test] unit tests"
        timed "$major unit" unit_tests
    fi

    if runs regress "$major" || runs system "$major"; then
        timed "$major build and install" install_extension
    fi

    if runs regress "$major"; then
        say "PostgreSQL $major: pg_regress suite"
        timed "$major regress" tests/run_regress.sh "${filters[@]}"
    fi

    if runs system "$major"; then
        say "PostgreSQL $major: system tests"
        timed "$major system" system_tests
    fi

    if runs package "$major"; then
        say "PostgreSQL $major: Debian package"
        timed "$major package" tests/package_test.sh
    fi
done
