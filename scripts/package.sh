#!/usr/bin/env bash
# Builds a Debian package of pg_idgen for the system PostgreSQL 15 (through `./dev package`):
#   target/debian/postgresql-15-pg-idgen_<version>_<arch>.deb
# from the tree `cargo pgrx package` makes (the library and the SQL scripts under usr/), plus a
# control file that depends on postgresql-15. Prints the package's path last.
cd "$(dirname "$0")/.."
source scripts/lib.sh

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
arch=$(dpkg --print-architecture)
say "building pg_idgen $version for PostgreSQL 15 (cargo pgrx package)"
# Why the removal: cargo pgrx package adds to the tree of an earlier run, whose scripts of other
# versions would end up in the package.
rm -rf target/release/pg_idgen-pg15
cargo pgrx package --pg-config "$PG_CONFIG" >/dev/null
root=target/debian/postgresql-15-pg-idgen
rm -rf "$root"
mkdir -p "$root/DEBIAN"
cp -a target/release/pg_idgen-pg15/usr "$root/"
size_kb=$(du -sk "$root/usr" | cut -f1)
cat >"$root/DEBIAN/control" <<CONTROL
Package: postgresql-15-pg-idgen
Version: $version
Architecture: $arch
Maintainer: pg_idgen developers <pg_idgen@localhost>
Depends: postgresql-15, libc6, libpq5
Section: database
Priority: optional
Installed-Size: $size_kb
Description: unique ids made inside PostgreSQL 15
 pg_idgen makes Snowflake bigints, Leaf-style segment numbers served from
 shared memory, MongoDB ObjectIds and monotonic UUIDv7s inside the database,
 and decodes them in SQL. Add pg_idgen to shared_preload_libraries, set
 pg_idgen.node_id, restart, then CREATE EXTENSION pg_idgen.
CONTROL
deb=target/debian/postgresql-15-pg-idgen_${version}_${arch}.deb
dpkg-deb --build --root-owner-group "$root" "$deb" >/dev/null
echo "$deb"
