#!/usr/bin/env bash
# Builds a Debian package of pg_idgen for PostgreSQL $PG_MAJOR (through `./dev package [--pg N]`):
#   target/debian/postgresql-N-pg-idgen_<version>_<arch>.deb
# from the tree `cargo pgrx package` makes (the library and the SQL scripts), laid out in Debian's
# paths for that major (/usr/lib/postgresql/N/lib, /usr/share/postgresql/N/extension) whichever
# installation it was built against, plus a control file that depends on postgresql-N. Prints the
# package's path last.
cd "$(dirname "$0")/.."
source scripts/lib.sh

version=$(sed -n '/^version = /{s/^version = "\(.*\)"$/\1/p;q}' Cargo.toml)
arch=$(dpkg --print-architecture)
name=postgresql-$PG_MAJOR-pg-idgen
say "building pg_idgen $version for PostgreSQL $PG_MAJOR (cargo pgrx package)"
# Why a fresh directory: cargo pgrx package adds to the tree of an earlier run, whose scripts of
# other versions would end up in the package.
built=target/release/pg_idgen-pg$PG_MAJOR
rm -rf "$built"
cargo pgrx package --pg-config "$PG_CONFIG" --out-dir "$built" >/dev/null
# The tree mirrors the paths of the installation built against (Debian's for 15, the PyPI tree's
# for 16-18): take the files from where its pg_config puts them.
root=target/debian/$name
rm -rf "$root"
mkdir -p "$root/DEBIAN" "$root/usr/lib/postgresql/$PG_MAJOR/lib" "$root/usr/share/postgresql/$PG_MAJOR/extension"
cp -a "$built$("$PG_CONFIG" --pkglibdir)"/pg_idgen.so "$root/usr/lib/postgresql/$PG_MAJOR/lib/"
cp -a "$built$("$PG_CONFIG" --sharedir)"/extension/pg_idgen* "$root/usr/share/postgresql/$PG_MAJOR/extension/"
size_kb=$(du -sk "$root/usr" | cut -f1)
cat >"$root/DEBIAN/control" <<CONTROL
Package: $name
Version: $version
Architecture: $arch
Maintainer: pg_idgen developers <pg_idgen@localhost>
Depends: postgresql-$PG_MAJOR, libc6, libpq5
Section: database
Priority: optional
Installed-Size: $size_kb
Description: unique ids made inside PostgreSQL $PG_MAJOR
 pg_idgen makes Snowflake bigints, Leaf-style segment numbers and per-key
 sequences (numbers per project, conversation or shop, WeChat seqsvr style)
 served from shared memory, MongoDB ObjectIds and monotonic UUIDv7s inside
 the database, and decodes them in SQL. Add pg_idgen to
 shared_preload_libraries, set pg_idgen.node_id, restart, then
 CREATE EXTENSION pg_idgen.
CONTROL
deb=target/debian/${name}_${version}_${arch}.deb
dpkg-deb --build --root-owner-group "$root" "$deb" >/dev/null
echo "$deb"
