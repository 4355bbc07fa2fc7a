#!/bin/bash
# Code size cost of sampling by code versioning: .text bytes of each bench kernel built with the
# memlens-cc of two trees (default: the main checkout's build, without versioning, and this one).
# Usage: bench/version-size.sh [old build dir] [new build dir] [-O level]
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
old=${1:-/work/main/build} new=${2:-$root/build} O=${3:-2}
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
text() { size -A "$1" | awk '$1 == ".text" { print $2 }'; }
# The instrumented .text includes the runtime (~14 KB); the delta is what versioning adds.
printf '%-10s %8s %8s %8s %8s %12s\n' kernel plain old new delta delta/plain
for k in "$root"/bench/kernels/*.c; do
    n=$(basename "$k" .c)
    clang-14 -O"$O" -fopenmp -I"$root/include" "$k" -o "$tmp/$n.p" -lm 2>/dev/null
    "$old/bin/memlens-cc" -O"$O" -fopenmp -I"$root/include" "$k" -o "$tmp/$n.o" -lm
    "$new/bin/memlens-cc" -O"$O" -fopenmp -I"$root/include" "$k" -o "$tmp/$n.n" -lm
    p=$(text "$tmp/$n.p") a=$(text "$tmp/$n.o") b=$(text "$tmp/$n.n")
    printf '%-10s %8d %8d %8d %8d %11.1f%%\n' "$n" "$p" "$a" "$b" $((b - a)) \
        "$(echo "100 * ($b - $a) / $p" | bc -l)"
done
