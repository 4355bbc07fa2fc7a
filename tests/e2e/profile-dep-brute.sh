#!/bin/bash
# Second method for 'dep' (issue 14): four real programs (bench spmv and pagerank, the
# multi-file C word counter profile/brute/{words,table}.c, the C++ graph program
# profile/brute/graph.cc) and a deep recursion through a loop (profile/brute/recurse.c) are
# built twice from one source, with --trace-loops (every access and loop entry, iteration and
# exit) and with --events=dep; profile/dep-brute.py recomputes every dependence from the
# trace's dump byte by byte and the 'dep' CSV must equal it row for row, keyed on source lines
# (what is compared and why: dep-brute.py and docs/profile-modules.md). Traces carry no heap
# or stack object events, so no program reuses a dead object's bytes (words: -DKEEP_BLOCKS).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
M=$root/build/bin/memlens
B=$here/profile/brute
command -v python3 >/dev/null || { echo "skipped: no python3"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
fail() { echo "FAIL: $*"; exit 1; }

# name | compiler flags | sources | arguments
while IFS='|' read -r name flags srcs args; do
    # shellcheck disable=SC2086
    "$M" cc --trace-loops $flags -g -I"$root/include" $srcs -o "$name.tr" || fail "$name: trace build"
    # shellcheck disable=SC2086
    "$M" cc --events=dep $flags -g -I"$root/include" $srcs -o "$name.dep" || fail "$name: dep build"
    # shellcheck disable=SC2086
    "$M" trace -o "tr-$name" -- "./$name.tr" $args >"$name.out1" 2>/dev/null || fail "$name: trace run"
    "$M" analyze -q "tr-$name" dump >"$name.dump" || fail "$name: dump"
    for w in 1 2; do
        rm -rf "dep-$name"
        # shellcheck disable=SC2086
        "$M" profile -q -m dep -w $w --force-workers -o "dep-$name" -- "./$name.dep" $args >"$name.out2" ||
            fail "$name: profile -w $w"
        cmp -s "$name.out1" "$name.out2" || fail "$name: outputs of the two builds differ"
        grep -q '"complete": true' dep-"$name"/*.dep.json || fail "$name: profile not complete"
        python3 "$here/profile/dep-brute.py" "$name.dump" dep-"$name"/*.dep.csv dep-"$name"/*.dep.json ||
            fail "$name -w $w: dep differs from the brute-force dependences"
    done
done <<LIST
spmv|-O2|$root/bench/kernels/spmv.c|3000 8 3
pagerank|-O2|$root/bench/kernels/pagerank.c|3000 8 3
words|-O2 -DKEEP_BLOCKS|$B/words.c $B/table.c|20000 2
words3|-O3 -DKEEP_BLOCKS|$B/words.c $B/table.c|20000 2
graph|--c++ -O2|$B/graph.cc|3000 4
recurse|-O1|$B/recurse.c|5000
LIST
exit 0
