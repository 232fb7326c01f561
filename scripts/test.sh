#!/usr/bin/env bash
# The test suites; exits non-zero if any fails. Run through `./dev test`:
#   ./dev test                  every part on every supported PostgreSQL: lint, unit, regress,
#                               install and package on 15, 16, 17 and 18; system on 15 and 18 (the
#                               oldest and the newest)
#   ./dev test --pg N           every part on PostgreSQL N only
#   ./dev test [--pg N] PART [FILTER…]   one part (on every version, or on N), narrowed by FILTER;
#                               a filter that selects nothing fails
#     lint     `cargo fmt --check` (rustfmt.toml) of the extension and the system tests, and
#              `cargo clippy -D warnings` of both, the extension for each major of the run (with the
#              lints of Cargo.toml: every unsafe block states why it is sound)
#     unit     #[test] and #[pg_test] tests, inside a cluster that cargo-pgrx starts (as postgres);
#              FILTER: part of a test's name
#     regress  the pg_regress suite in tests/ against clusters of our own; FILTER: test names
#     system   the system tests in pgrx-tests/: real clusters, concurrent clients, restarts,
#              standbys; FILTER: a test file (pgrx-tests/tests/NAME.rs) or part of a test's name
#     install  the suite's install steps beside a running server making ids (tests/install_test.sh)
#     package  the Debian package: on 15 dpkg -i, ids made, dpkg -r; on 16-18 its files, loaded into
#              that major's server, make ids (then the extension is installed again)
# A part that fails stops the parts after it, but not the system tests already running. Prints what
# ran on which version, and how long it took, at the end.
#
# Why system tests run in the background: they spend most of their time waiting (for restarts,
# leases, clocks), and a run on every version would last an hour one part after the other. So the
# system tests of a major start as soon as its extension is installed, and the next major's build and
# tests go on in front at the lowest priority (nice 19): the system tests, whose timing is part of what
# they check, get the CPU whenever they want it. Their output is printed when they end.
cd "$(dirname "$0")/.."
source scripts/lib.sh

take_pg_option "$@"
set -- "${ARGS[@]}"
part=${1:-all}
filters=("${@:2}")
case "$part" in
unit | system) [ ${#filters[@]} -le 1 ] || { echo "./dev test $part takes one filter" >&2; exit 2; } ;;
regress) ;;
all | lint | install | package) [ ${#filters[@]} -eq 0 ] || { echo "./dev test $part takes no filter" >&2; exit 2; } ;;
*)
    echo "unknown test part '$part': one of lint, unit, regress, system, install, package" >&2
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
    [ -n "$PG_CHOSEN" ] || [ "$1" != system ] || [ "$2" = 15 ] || [ "$2" = 18 ]
}

summary=()
failed=0
# timed LABEL COMMAND...: runs COMMAND, notes LABEL and its duration for the summary; after a
# failure, ends the run (once the system tests in the background have ended).
timed() {
    local label=$1 start=$SECONDS status=0
    shift
    # Why each function ends in the command whose status counts: set -e does not apply under ||.
    "$@" || status=$?
    note_outcome "$label" $((SECONDS - start)) $status
    [ $status -eq 0 ] || finish
}

# note_outcome LABEL SECONDS STATUS: a line of the summary.
note_outcome() {
    local outcome=ok
    [ "$3" -eq 0 ] || { outcome="FAILED (exit $3)"; failed=$3; }
    summary+=("$(printf '%-34s %4d:%02d  %s' "$1" $(($2 / 60)) $(($2 % 60)) "$outcome")")
}

# lint MAJOR...: the formatting of every Rust file, then clippy with warnings as errors: the
# extension once per major (what differs between majors is compiled on its own), the system tests
# once (they do not link PostgreSQL). Nothing here touches an installation or a cluster.
lint() {
    cargo fmt --check || return
    cargo fmt --check --manifest-path pgrx-tests/Cargo.toml || return
    local major
    for major in "$@"; do
        say "clippy, PostgreSQL $major"
        # Why a subshell: use_pg points the build at MAJOR's pg_config, for this step only.
        (
            use_pg "$major"
            ensure_pg "$major"
            cargo clippy --no-default-features --features "pg$major pg_test" --all-targets -- -D warnings
        ) || return
    done
    cargo clippy --manifest-path pgrx-tests/Cargo.toml --all-targets -- -D warnings
}

unit_tests() {
    local pgrx_data=$WORK_ROOT/pgrx-test-data
    mkdir -p "$pgrx_data" && chown postgres:postgres "$pgrx_data"
    # Why no RUST_BACKTRACE: with it, a Rust error's DETAIL carries a backtrace, which no expected
    # output can hold (pgrx-tests/src/lib.rs and scripts/lib.sh start clusters without it too).
    # Why by_rename: cargo pgrx test installs its build with `sudo cp`, in place, which would crash
    # every running server of this installation (tests/install_test.sh).
    run_filtered by_rename env -u RUST_BACKTRACE cargo pgrx test "pg$PG_MAJOR" ${filter:+"$filter"} --runas postgres --pgdata "$pgrx_data"
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

# The system tests running in the background: their majors, and where their output goes.
background=()
background_log() { echo "$WORK_ROOT/system-tests-pg$1.log"; }

# system_tests_in_background MAJOR: starts the system tests of MAJOR, at the priority the run
# started with, and lowers the priority of everything after it in front.
system_tests_in_background() {
    local major=$1 log
    log=$(background_log "$major")
    say "PostgreSQL $major: system tests, in the background (output at the end; $log)"
    # Why: an outcome left by an earlier run must not stand for this one's if this one ends early.
    rm -f "$log.outcome"
    (
        renice -n "$START_NICENESS" -p "$BASHPID" >/dev/null
        use_pg "$major"
        start=$SECONDS status=0
        system_tests >"$log" 2>&1 || status=$?
        echo "$((SECONDS - start)) $status" >"$log.outcome"
    ) &
    background+=("$major")
    renice -n 19 -p $$ >/dev/null
}

# finish [STATUS]: waits for the system tests in the background, prints their output, the summary,
# and exits with the status of the run (STATUS: that of a step that ended the script).
finish() {
    local ended_with=${1:-0}
    trap - EXIT
    [ "$ended_with" -eq 0 ] || failed=$ended_with
    wait
    local major seconds status
    for major in "${background[@]}"; do
        say "PostgreSQL $major: system tests (ran in the background)"
        # A suite that ended before its log began has none; its missing outcome fails the run below.
        [ ! -f "$(background_log "$major")" ] || cat "$(background_log "$major")" >&2
        read -r seconds status <"$(background_log "$major").outcome" || { seconds=0 status=1; }
        note_outcome "$major system (in the background)" "$seconds" "$status"
    done
    background=()
    say "what ran, and how long it took (${SECONDS}s in all)"
    printf '%s\n' "${summary[@]}" >&2
    exit $failed
}
# Why a trap as well: a run that a step's `exit` ends still waits for the background and reports.
# (An interrupted one too: the system tests in the background ignore SIGINT, as every background job
# of a script does, and end on their own.)
trap 'finish $?' EXIT
START_NICENESS=$(nice)

# Why: under `set -o pipefail` (scripts/lib.sh) a pipe into a reader that may exit before its
# writer has written everything (`grep -q`, `grep -m`, `head`, `tar -t`) fails when the writer gets
# SIGPIPE, at random. The scripts read outputs whole instead
# (into variables, here-strings or files).
early_exit_readers() {
    local found
    found=$(grep -nE '\|[[:space:]]*(grep[[:space:]]+(-[[:alnum:]]*[qm]|--quiet|--silent|--max-count)|head([[:space:]]|$)|tar[[:space:]]+-?t)' \
        dev .ci/run scripts/*.sh scripts/by_rename/* tests/*.sh || true)
    [ -z "$found" ] || { echo "pipes into a reader that may exit early:"; echo "$found"; return 1; } >&2
}
timed "scripts: no pipe into grep -q, head" early_exit_readers

# Why first and once for every major: it is quick, it needs no cluster, and a run that would fail
# on a misformatted file or an undocumented unsafe block had better say so before the long parts.
if [ "$part" = all ] || [ "$part" = lint ]; then
    lint_versions=("${PG_VERSIONS[@]}")
    [ -z "$PG_CHOSEN" ] || lint_versions=("$PG_CHOSEN")
    say "lint: cargo fmt --check; cargo clippy -D warnings on PostgreSQL ${lint_versions[*]}"
    timed "lint (${lint_versions[*]})" lint "${lint_versions[@]}"
fi

# Every supported major (PG_VERSIONS); why 18 right after 15: its system tests, the other long part,
# start early in the background.
versions=(15 18 16 17)
[ -z "$PG_CHOSEN" ] || versions=("$PG_CHOSEN")
# The majors on which something runs; system tests run in front on the last of them (nothing waits
# for them), in the background on the others.
planned=()
for major in "${versions[@]}"; do
    for p in unit regress system install package; do
        if runs $p "$major"; then
            planned+=("$major")
            break
        fi
    done
done
versions=("${planned[@]}")
# Why a time scale: the system suites of several majors run at once on the same cores (above), while
# a test's upper bound on how long something may take is written for a suite that runs alone. The
# system tests stretch those bounds by PG_IDGEN_TEST_TIME_SCALE (pgrx-tests: `scaled`); never a
# lower bound, which is a promise of the product (a timeout honoured, a lease outwaited).
suites=0
for major in "${versions[@]}"; do
    if runs system "$major"; then suites=$((suites + 1)); fi
done
[ "$suites" -le 1 ] || export PG_IDGEN_TEST_TIME_SCALE=${PG_IDGEN_TEST_TIME_SCALE:-3}
for major in "${versions[@]}"; do
    use_pg "$major"
    ensure_pg "$major"
    find_pg_bin

    if runs unit "$major"; then
        say "PostgreSQL $major: #[test] and #[pg_test] unit tests"
        timed "$major unit" unit_tests
    fi

    if runs regress "$major" || runs system "$major" || runs install "$major"; then
        timed "$major build and install" install_extension
    fi

    if runs install "$major"; then
        say "PostgreSQL $major: installing beside a running server"
        timed "$major install" tests/install_test.sh
    fi

    if runs regress "$major"; then
        say "PostgreSQL $major: pg_regress suite"
        timed "$major regress" tests/run_regress.sh "${filters[@]}"
    fi

    # Why before the system tests: it removes and installs the extension's files, which the system
    # tests (in the background) load.
    if runs package "$major"; then
        say "PostgreSQL $major: Debian package"
        timed "$major package" tests/package_test.sh
    fi

    if runs system "$major"; then
        if [ "$major" = "${versions[-1]}" ]; then
            say "PostgreSQL $major: system tests"
            renice -n "$START_NICENESS" -p $$ >/dev/null
            timed "$major system" system_tests
        else
            system_tests_in_background "$major"
        fi
    fi
done
