# Shared by ./dev and the test and benchmark scripts: toolchain setup and throwaway clusters.
# Sourced, not run. Everything runs as root; PostgreSQL itself runs as the `postgres` user.

set -euo pipefail

# The one place that names the PostgreSQL installation; everything else asks its pg_config.
PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config
export PG_CONFIG

# Sets PG_BIN, the directory of the PostgreSQL programs, from pg_config.
find_pg_bin() {
    PG_BIN=$("$PG_CONFIG" --bindir)
    export PG_BIN
}

# On a fresh machine pg_config is not there yet: ensure_tools installs it, then finds PG_BIN.
PG_BIN=
[ ! -x "$PG_CONFIG" ] || find_pg_bin
CARGO_PGRX_VERSION=0.18.0
# Every cluster and scratch file of this project lives under here, owned by postgres.
WORK_ROOT=${PG_IDGEN_WORK:-/tmp/pg_idgen}
export PGRX_PG_CONFIG_PATH=$PG_CONFIG

say() { printf '\n==> %s\n' "$*" >&2; }

# Installs what is missing, and nothing that is already there.
ensure_tools() {
    # libpq-dev: the workers reach other servers with libpq; procps: the tests freeze servers (pgrep).
    local packages=(postgresql-15 postgresql-server-dev-15 libpq-dev libclang-dev clang sudo faketime procps)
    local missing=()
    for p in "${packages[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        say "installing Debian packages: ${missing[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
    find_pg_bin
    if [ "$(cargo pgrx --version 2>/dev/null)" != "cargo-pgrx $CARGO_PGRX_VERSION" ]; then
        say "installing cargo-pgrx $CARGO_PGRX_VERSION (about 12 minutes)"
        cargo install cargo-pgrx --version "$CARGO_PGRX_VERSION" --locked
    fi
    if ! grep -qs "^pg15 *= *\"$PG_CONFIG\"" "$HOME/.pgrx/config.toml"; then
        say "pointing pgrx at the system PostgreSQL 15"
        cargo pgrx init --pg15="$PG_CONFIG" >/dev/null
    fi
    mkdir -p "$WORK_ROOT"
    chown postgres:postgres "$WORK_ROOT"
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

# Builds the extension and installs it into the system PostgreSQL 15.
install_extension() {
    say "building and installing pg_idgen (release)"
    cargo pgrx install --release --pg-config "$PG_CONFIG" >/dev/null
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
