#!/usr/bin/env bash
# The Debian package (scripts/package.sh), installed for real: `dpkg -i` into the system
# PostgreSQL 15, a preloaded cluster creates the extension and takes an id of each family, then
# `dpkg -r` removes every file it installed. Afterwards the extension is installed again the way
# the rest of the suite installs it, so the machine is left as it was. Run by `./dev test`.
cd "$(dirname "$0")/.."
source scripts/lib.sh

PORT=54333
PACKAGE=postgresql-15-pg-idgen
trap 'cluster_remove package; install_extension' EXIT
fail() { echo "package test: $*" >&2; exit 1; }

deb=$(scripts/package.sh | tail -1)
[ -f "$deb" ] || fail "no package was built"
dpkg-deb --field "$deb" Depends | grep -q "postgresql-15" || fail "the package does not depend on postgresql-15"
say "dpkg -i $deb"
dpkg -i "$deb" >/dev/null
dpkg-query -W -f='${Status}' $PACKAGE | grep -q "install ok installed" || fail "dpkg does not list $PACKAGE as installed"
library=$($PG_CONFIG --pkglibdir)/pg_idgen.so
dpkg -S "$library" | grep -q "^$PACKAGE:" || fail "$library does not belong to the package"

cluster_remove package
cluster_start package $PORT "shared_preload_libraries = 'pg_idgen'" "pg_idgen.node_id = 3"
result=$(cluster_psql package -qAt <<'SQL'
CREATE EXTENSION pg_idgen;
SELECT segment_create('packaged');
SELECT (id_decode(snowflake_next())).node_id = 3
   AND objectid_gen() IS NOT NULL
   AND (id_decode(uuid_v7_next())).version = 7
   AND segment_next('packaged') = 1;
SQL
)
[ "$(echo "$result" | tail -1)" = t ] || fail "the packaged extension did not make ids: $result"
cluster_remove package

say "dpkg -r $PACKAGE"
files=$(dpkg -L $PACKAGE | grep -E '\.(so|sql|control)$')
dpkg -r $PACKAGE >/dev/null
if dpkg-query -W -f='${Status}' $PACKAGE 2>/dev/null | grep -q "install ok installed"; then
    fail "the package is still installed"
fi
for file in $files; do
    [ ! -e "$file" ] || fail "$file is left after dpkg -r"
done
echo "package test: installed, made an id of each family, removed cleanly ($(echo "$files" | wc -l) files)"
