#!/usr/bin/env bash
# install_file.sh SOURCE DEST: puts a copy of SOURCE at DEST the way dpkg does, as a new file written
# beside DEST and then renamed over it (DEST may name a directory: the file keeps its name there).
#
# Why: a running server maps pg_idgen.so into memory. A file written in place (`cp` onto it, which
# truncates and rewrites it) changes the pages under every process that maps it, and they die of
# SIGBUS or SIGSEGV. A rename leaves the old file as it is (unlinked, alive for as long as a process
# maps it) and puts the whole new one at the path in one step: a server or a backend that opens it
# meanwhile finds the old file or the new one, never a part of either.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: install_file.sh SOURCE DEST" >&2; exit 2; }
source=$1 dest=$2
[ ! -d "$dest" ] || dest=${dest%/}/${source##*/}
dir=$(dirname "$dest")
mkdir -p "$dir"
# Why in DEST's directory: a rename is atomic only within one file system.
temp=$(mktemp "$dir/.${dest##*/}.XXXXXX")
trap 'rm -f "$temp"' EXIT
cp "$source" "$temp"
# The source's mode, readable by all: the server runs as postgres (mktemp makes the file 0600).
chmod --reference="$source" "$temp"
chmod a+r "$temp"
mv -f "$temp" "$dest"
trap - EXIT
