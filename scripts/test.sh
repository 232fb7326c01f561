#!/usr/bin/env bash
# Every test suite, in order; exits non-zero on the first failure. Run through `./dev test`.
#   1. #[pg_test] unit tests inside a cluster that cargo-pgrx starts (as postgres)
#   2. the pg_regress suite in tests/ against clusters of our own
#   3. the system tests in pgrx-tests/: real clusters, concurrent clients, restarts, standbys
#   4. the Debian package: dpkg -i, ids made, dpkg -r (then the extension is installed again)
cd "$(dirname "$0")/.."
source scripts/lib.sh

say "1/4 #[pg_test] unit tests"
pgrx_data=$WORK_ROOT/pgrx-test-data
mkdir -p "$pgrx_data" && chown postgres:postgres "$pgrx_data"
# Why no RUST_BACKTRACE: with it, a Rust error's DETAIL carries a backtrace (PGRX_NOTES.md).
env -u RUST_BACKTRACE cargo pgrx test pg15 --runas postgres --pgdata "$pgrx_data"

say "2/4 pg_regress suite"
install_extension
tests/run_regress.sh

say "3/4 system tests"
cargo test --release --manifest-path pgrx-tests/Cargo.toml -- --test-threads=1

say "4/4 Debian package"
tests/package_test.sh
