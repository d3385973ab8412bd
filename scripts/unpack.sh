#!/bin/sh
# unpack.sh ARCHIVE.txtar DIR: write the files of a txtar archive (the
# fixture workspaces are kept this way, so fixtures/ holds no .go files
# for the Go tool to build) into DIR.
set -eu
[ $# -eq 2 ] || { echo "usage: unpack.sh ARCHIVE.txtar DIR" >&2; exit 2; }
mkdir -p "$2"
awk -v dir="$2" '
  /^-- .* --$/ { name = substr($0, 4, length($0) - 6); path = dir "/" name
                 sub(/\/[^\/]*$/, "", path); system("mkdir -p \"" path "\"");
                 out = dir "/" name; printf "" > out; next }
  out != "" { print >> out }
' "$1"
