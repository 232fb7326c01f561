#!/usr/bin/env bash
# The test suites, in order; exits non-zero on the first failing suite. Run through `./dev test`:
#   ./dev test                 all four
#   ./dev test PART [FILTER]   one part; FILTER narrows it to the tests whose names contain it
#     unit     #[test] and #[pg_test] tests, inside a cluster that cargo-pgrx starts (as postgres)
#     regress  the pg_regress suite in tests/ against clusters of our own (FILTER: test names)
#     system   the system tests in pgrx-tests/: real clusters, concurrent clients, restarts, standbys
#     package  the Debian package: dpkg -i, ids made, dpkg -r (then the extension is installed again)
cd "$(dirname "$0")/.."
source scripts/lib.sh

part=${1:-all}
filter=${2:-}
case "$part" in
all | unit | regress | system | package) ;;
*)
    echo "unknown test part '$part': one of unit, regress, system, package" >&2
    exit 2
    ;;
esac
runs() { [ "$part" = all ] || [ "$part" = "$1" ]; }

if runs unit; then
    say "#[test] and #[pg_test] unit tests"
    pgrx_data=$WORK_ROOT/pgrx-test-data
    mkdir -p "$pgrx_data" && chown postgres:postgres "$pgrx_data"
    # Why no RUST_BACKTRACE: with it, a Rust error's DETAIL carries a backtrace (PGRX_NOTES.md).
    env -u RUST_BACKTRACE cargo pgrx test pg15 ${filter:+"$filter"} --runas postgres --pgdata "$pgrx_data"
fi

if runs regress || runs system; then
    install_extension
fi

if runs regress; then
    say "pg_regress suite"
    # shellcheck disable=SC2086 # a filter of several test names is split on purpose
    tests/run_regress.sh $filter
fi

if runs system; then
    say "system tests"
    # Why --no-fail-fast: one failing test file must not hide what the others would show.
    cargo test --release --no-fail-fast --manifest-path pgrx-tests/Cargo.toml -- --test-threads=1 ${filter:+"$filter"}
fi

if runs package; then
    say "Debian package"
    tests/package_test.sh
fi
