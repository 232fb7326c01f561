#!/usr/bin/env bash
# The Debian package (scripts/package.sh) of PostgreSQL $PG_MAJOR. Run by `./dev test [--pg N]`.
# - 15, which Debian's registry has: `dpkg -i` into the system PostgreSQL 15, a preloaded cluster
#   creates the extension and takes an id of each family, then `dpkg -r` removes every file it
#   installed.
# - 16-18, which cannot be installed here (no postgresql-N package to depend on): the package's
#   files are exactly the library and the SQL scripts, in Debian's paths for that major; they take
#   the place of the installed extension in that version's own server (the PyPI build), and a
#   preloaded cluster creates the extension and takes an id of each family.
# Afterwards the extension is installed again the way the rest of the suite installs it, so the
# machine is left as it was.
cd "$(dirname "$0")/.."
source scripts/lib.sh

PORT=54333
PACKAGE=postgresql-$PG_MAJOR-pg-idgen
trap 'cluster_remove package; install_extension' EXIT
fail() { echo "package test: $*" >&2; exit 1; }

# ids_of_each_family: a preloaded cluster of the installed extension makes an id of each family.
ids_of_each_family() {
    cluster_remove package
    cluster_start package $PORT "shared_preload_libraries = 'pg_idgen'" "pg_idgen.node_id = 3"
    local result
    result=$(cluster_psql package -qAt <<'SQL'
CREATE EXTENSION pg_idgen;
SELECT public.segment_create('packaged');
SELECT (public.id_decode(public.snowflake_next())).node_id = 3
   AND public.objectid_gen() IS NOT NULL
   AND (public.id_decode(public.uuid_v7_next())).version = 7
   AND public.segment_next('packaged') = 1;
SQL
    )
    [ "$(echo "$result" | tail -1)" = t ] || fail "the packaged extension did not make ids: $result"
    cluster_remove package
}

deb=$(scripts/package.sh | tail -1)
[ -f "$deb" ] || fail "no package was built"
# Why no pipe into `grep -q` (nor `head`, `grep -m`, `tar -t`) anywhere: under pipefail, a reader that
# exits at its first match fails the pipeline when the writer is still writing (SIGPIPE), at random.
# Outputs are read whole into variables first, or into files.
[ "$(dpkg-deb --field "$deb" Package)" = "$PACKAGE" ] || fail "the package is not named $PACKAGE"
depends=$(dpkg-deb --field "$deb" Depends)
grep -qE "(^|, )postgresql-$PG_MAJOR(,|$)" <<<"$depends" || fail "the package does not depend on postgresql-$PG_MAJOR"
libdir=/usr/lib/postgresql/$PG_MAJOR/lib
extdir=/usr/share/postgresql/$PG_MAJOR/extension
# Every file is the library or a script or the control file of the extension, in Debian's paths.
tarfile=$WORK_ROOT/package-files.tar
dpkg-deb --fsys-tarfile "$deb" >"$tarfile"
files=$(tar -tf "$tarfile" | grep -v '/$' | sed 's|^\./|/|')
rm -f "$tarfile"
strays=$(echo "$files" | grep -vxE "$libdir/pg_idgen\.so|$extdir/pg_idgen(--[0-9.]+(--[0-9.]+)?\.sql|\.control)" || true)
[ -z "$strays" ] || fail "files outside the extension's Debian paths: $strays"
version=$(sed -n '/^version = /{s/^version = "\(.*\)"$/\1/p;q}' Cargo.toml)
for file in "$libdir/pg_idgen.so" "$extdir/pg_idgen.control" "$extdir/pg_idgen--$version.sql" sql/*.sql; do
    [[ "$file" != sql/* ]] || file=$extdir/$(basename "$file")
    grep -qx "$file" <<<"$files" || fail "the package lacks $file"
done

if [ "$PG_MAJOR" = 15 ]; then
    say "dpkg -i $deb"
    dpkg -i "$deb" >/dev/null
    [ "$(dpkg-query -W -f='${Status}' "$PACKAGE")" = "install ok installed" ] || fail "dpkg does not list $PACKAGE as installed"
    library=$($PG_CONFIG --pkglibdir)/pg_idgen.so
    owner=$(dpkg -S "$library")
    grep -q "^$PACKAGE:" <<<"$owner" || fail "$library does not belong to the package"
    ids_of_each_family

    say "dpkg -r $PACKAGE"
    installed=$(dpkg -L "$PACKAGE" | grep -E '\.(so|sql|control)$')
    dpkg -r "$PACKAGE" >/dev/null
    if [ "$(dpkg-query -W -f='${Status}' "$PACKAGE" 2>/dev/null)" = "install ok installed" ]; then
        fail "the package is still installed"
    fi
    for file in $installed; do
        [ ! -e "$file" ] || fail "$file is left after dpkg -r"
    done
    echo "package test: installed, made an id of each family, removed cleanly ($(echo "$installed" | wc -l) files)"
else
    say "the files of $deb in PostgreSQL $PG_MAJOR's own installation ($PG_BIN)"
    unpacked=$WORK_ROOT/package-unpacked
    rm -rf "$unpacked" && dpkg-deb -x "$deb" "$unpacked"
    # Only the package's files may be there to load: each put in place by rename, as dpkg does (a
    # running server goes on with the library it maps), then the scripts the package lacks removed.
    installed_lib=$($PG_CONFIG --pkglibdir) installed_ext=$($PG_CONFIG --sharedir)/extension
    scripts/install_file.sh "$unpacked$libdir/pg_idgen.so" "$installed_lib/pg_idgen.so"
    for file in "$unpacked$extdir"/pg_idgen*; do
        scripts/install_file.sh "$file" "$installed_ext/"
    done
    for file in "$installed_ext"/pg_idgen*; do
        [ -e "$unpacked$extdir/${file##*/}" ] || rm -f "$file"
    done
    cmp -s "$unpacked$libdir/pg_idgen.so" "$installed_lib/pg_idgen.so" || fail "the library was not copied"
    ids_of_each_family
    rm -rf "$unpacked"
    echo "package test: $(echo "$files" | wc -l) files in Debian's paths for PostgreSQL $PG_MAJOR; its library made an id of each family in PostgreSQL $PG_MAJOR"
fi
