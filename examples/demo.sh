#!/bin/sh
# make demo: builds the bundled example with memlens-cc, runs it, and prints its region report.
set -e
cd "$(dirname "$0")/.."
B=${B:-build}
out=$B/demo
rm -rf "$out"
mkdir -p "$out"
echo "== memlens-cc -O2 examples/stream.c"
"$B/bin/memlens-cc" -O2 -g -o "$out/stream" examples/stream.c
echo "== memlens run -o $out/profiles -- $out/stream"
"$B/bin/memlens" run -o "$out/profiles" -- "$out/stream" 4000000 5
echo "== memlens report $out/profiles"
"$B/bin/memlens" report "$out/profiles"
