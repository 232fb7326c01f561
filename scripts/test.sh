#!/usr/bin/env bash
# The test suites, in order; exits non-zero on the first failing suite. Run through `./dev test`:
#   ./dev test                  all four
#   ./dev test PART [FILTER…]   one part, narrowed by FILTER; a filter that selects nothing fails
#     unit     #[test] and #[pg_test] tests, inside a cluster that cargo-pgrx starts (as postgres);
#              FILTER: part of a test's name
#     regress  the pg_regress suite in tests/ against clusters of our own; FILTER: test names
#     system   the system tests in pgrx-tests/: real clusters, concurrent clients, restarts,
#              standbys; FILTER: a test file (pgrx-tests/tests/NAME.rs) or part of a test's name
#     package  the Debian package: dpkg -i, ids made, dpkg -r (then the extension is installed again)
cd "$(dirname "$0")/.."
source scripts/lib.sh

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
runs() { [ "$part" = all ] || [ "$part" = "$1" ]; }

if runs unit; then
    say "#[test] and #[pg_test] unit tests"
    pgrx_data=$WORK_ROOT/pgrx-test-data
    mkdir -p "$pgrx_data" && chown postgres:postgres "$pgrx_data"
    # Why no RUST_BACKTRACE: with it, a Rust error's DETAIL carries a backtrace (PGRX_NOTES.md).
    run_filtered env -u RUST_BACKTRACE cargo pgrx test pg15 ${filter:+"$filter"} --runas postgres --pgdata "$pgrx_data"
fi

if runs regress || runs system; then
    install_extension
fi

if runs regress; then
    say "pg_regress suite"
    tests/run_regress.sh "${filters[@]}"
fi

if runs system; then
    say "system tests"
    # Why --no-fail-fast: one failing test file must not hide what the others would show.
    selection=(-- --test-threads=1)
    if [ -n "$filter" ] && [ -f "pgrx-tests/tests/$filter.rs" ]; then
        selection=(--test "$filter" -- --test-threads=1)
    elif [ -n "$filter" ]; then
        selection=(-- --test-threads=1 "$filter")
    fi
    run_filtered cargo test --release --no-fail-fast --manifest-path pgrx-tests/Cargo.toml "${selection[@]}"
fi

if runs package; then
    say "Debian package"
    tests/package_test.sh
fi
