#!/usr/bin/env bash
# Installing beside a running server, as every step of the suite that installs does (run by
# `./dev test [--pg N] install`, after the build and install).
#
# Claim: a server with pg_idgen preloaded, whose two clients and workers make ids all the while,
# keeps running and making ids while the suite installs the extension into its installation: the
# build's install (`install_extension`: ./dev test, the package test's reinstall, ./dev run and
# ./dev bench) and the unit tests' copy of each file (`sudo cp FILE DEST`, which `cargo pgrx test`
# runs, with the PATH the unit tests run with). Each step writes every file it installs as a new
# file (a new inode at the path), and the library the server maps stays the one it started with.
# Its postmaster keeps its PID, no process of it dies of a signal, both clients end without an
# error, and the rows they stored hold no id twice, some of them made after the last step.
#
# Why it matters: a running server has pg_idgen.so mapped into memory. A library written in place
# (truncated, then written) changes the pages under every process that maps it, which then die of
# SIGSEGV or SIGBUS when the new build differs (and of SIGBUS when they run its code while it is
# being written), and the postmaster with them. Written as a new file renamed over the old one, as
# dpkg does, the old file lives on, unlinked, for as long as a process maps it. Why the inodes are
# checked as well: a copy of the very build the server runs may be written in place without a
# crash; the inode shows it was.
cd "$(dirname "$0")/.."
source scripts/lib.sh

NAME=install-live
PORT=54334
fail() { echo "install test: $*" >&2; exit 1; }
clients=()
stop_clients() {
    [ ${#clients[@]} -eq 0 ] || kill "${clients[@]}" 2>/dev/null || true
}
trap 'stop_clients; cluster_remove $NAME' EXIT

cluster_remove $NAME
cluster_start $NAME $PORT "shared_preload_libraries = 'pg_idgen'" "pg_idgen.node_id = 4"
cluster_psql $NAME -q <<'SQL'
CREATE EXTENSION pg_idgen;
SELECT segment_create('live');
CREATE TABLE made (client int, made_at timestamptz, s bigint, u uuid, o objectid, g bigint);
CREATE TABLE stop_clients (at timestamptz);
SQL
data=$WORK_ROOT/$NAME/data
read -r postmaster <"$data/postmaster.pid"
library=$("$PG_CONFIG" --pkglibdir)/pg_idgen.so
extdir=$("$PG_CONFIG" --sharedir)/extension
version=$(sed -n '/^version = /{s/^version = "\(.*\)"$/\1/p;q}' Cargo.toml)
# The files every install step writes: the library, the control file, the scripts of this version.
files=("$library" "$extdir/pg_idgen.control" "$extdir/pg_idgen--$version.sql")
for script in sql/*.sql; do files+=("$extdir/${script##*/}"); done

# The inode of the library the postmaster maps (/proc/PID/maps: address, perms, offset, device,
# inode, path).
mapped_inode() { awk -v lib="$library" '$6 == lib { print $5; exit }' "/proc/$postmaster/maps"; }
mapped=$(mapped_inode)
[ -n "$mapped" ] || fail "the postmaster does not map $library"
inodes() { stat -c %i "${files[@]}"; }
# replaced STEP BEFORE: every file has a new inode since BEFORE, and the server maps its library still.
replaced() {
    local before=($2) after i
    after=($(inodes))
    for i in "${!files[@]}"; do
        [ "${before[$i]}" != "${after[$i]}" ] || fail "$1 wrote ${files[$i]} in place (inode ${after[$i]} before and after)"
    done
    [ "$(mapped_inode)" = "$mapped" ] || fail "after $1 the postmaster maps inode $(mapped_inode) of $library, not $mapped"
}
logs=$WORK_ROOT/$NAME/clients
mkdir -p "$logs"

# Two clients take an id of every kind, ten rows a statement, about a thousand statements a second,
# until told to stop. Why one DO block each: no client process starts or ends meanwhile, and each
# statement sees the stop row (READ COMMITTED takes a snapshot per statement).
for client in 1 2; do
    cluster_psql $NAME -q -c "DO \$\$ BEGIN
        WHILE NOT EXISTS (SELECT FROM stop_clients) LOOP
            INSERT INTO made SELECT $client, clock_timestamp(), snowflake_next(), uuid_v7_next(), objectid_next(), segment_next('live')
              FROM generate_series(1, 10);
            PERFORM pg_sleep(0.001);
        END LOOP; END \$\$" >"$logs/$client.log" 2>&1 &
    clients+=($!)
done
sleep 1

say "installing into PostgreSQL $PG_MAJOR beside a running server (postmaster $postmaster): install_extension"
before=$(inodes)
install_extension
replaced install_extension "$before"
say "installing beside a running server: the unit tests' copy of each file (sudo cp FILE DEST)"
before=$(inodes)
copies=$WORK_ROOT/$NAME/copies
mkdir -p "$copies"
for file in "${files[@]}"; do
    cp "$file" "$copies/${file##*/}"
    by_rename sudo cp "$copies/${file##*/}" "$file"
done
replaced "the unit tests' copy" "$before"
sleep 1

installed_at=$(cluster_psql $NAME -qAt -c "SELECT clock_timestamp()") || fail "the server stopped answering: $(cat "$WORK_ROOT/$NAME/server.log")"
sleep 1
cluster_psql $NAME -q -c "INSERT INTO stop_clients VALUES (clock_timestamp())"
for i in "${!clients[@]}"; do
    wait "${clients[$i]}" || fail "client $((i + 1)) failed: $(cat "$logs/$((i + 1)).log")"
done
clients=()

read -r now <"$data/postmaster.pid"
[ "$now" = "$postmaster" ] && kill -0 "$postmaster" || fail "the postmaster $postmaster is gone ($now now)"
if grep -E "terminated by signal|server process .* was terminated|reinitializing" "$WORK_ROOT/$NAME/server.log"; then
    fail "a server process died while the extension was installed"
fi
result=$(cluster_psql $NAME -qAt -v installed_at="$installed_at" <<'SQL'
SELECT count(*) > 0
   AND count(*) = count(DISTINCT s) AND count(*) = count(DISTINCT u)
   AND count(*) = count(DISTINCT o) AND count(*) = count(DISTINCT g)
   AND count(*) FILTER (WHERE made_at > :'installed_at') > 0
   AND count(DISTINCT client) = 2
  FROM made;
SQL
)
counts=$(cluster_psql $NAME -qAt -v installed_at="$installed_at" <<'SQL'
SELECT count(*) || ' rows, ' || count(*) FILTER (WHERE made_at > :'installed_at') || ' made after the last install step'
  FROM made;
SQL
)
[ "$result" = t ] || fail "the clients' rows: $counts; an id repeated, or none made after the install"
echo "install test: the server kept its postmaster ($postmaster) and made ids throughout: $counts"
