#!/bin/bash
# --top names an OpenMP body after the function it was outlined from, "triad › omp parallel
# @omp.c:L" with L a line of the parallel loop (from -g), at -O0..-O3, in the table, CSV and
# JSON; without -g it reads "omp parallel (.omp_outlined.…)" and the table says to build with -g.
. "$(dirname "$0")/../lib/common.sh"
ml_require_cc
cp "$ML_ROOT/tests/e2e/top/omp.c" "$T/omp.c" && cd "$T" || fail "copy"
src=omp.c
lines=$(grep -n '/\* body \*/\|#pragma omp' "$src" | cut -d: -f1 | tr '\n' ' ')
for O in 0 1 2 3; do
    $MLCC --ml-all -g -O$O -fopenmp -o "$T/omp$O" "$src" || fail "build -O$O"
    rm -rf "$T/out"
    MEMLENS_OUT=$T/out OMP_NUM_THREADS=2 "$T/omp$O" >/dev/null || fail "run -O$O"
    "$MEMLENS" report --top 5 "$T/out" >"$T/table" || fail "table -O$O"
    L=$(sed -n 's/^  triad › omp parallel @omp\.c:\([0-9]*\) .*/\1/p' "$T/table" | head -1)
    case " $lines " in *" $L "*) ;; *) cat "$T/table"; fail "-O$O: no 'triad › omp parallel @omp.c:L' row with L in $lines" ;; esac
    grep -q "build with -g" "$T/table" && fail "-O$O: -g hint on a -g build"
    "$MEMLENS" report --top 5 --csv "$T/out" | python3 -c '
import csv, sys
rows = [r for r in csv.DictReader(sys.stdin) if r["function"].startswith(".omp_outlined.")]
names = ["triad \u203a omp parallel @omp.c:" + l for l in sys.argv[1].split()]
assert rows and all(r["name"] in names for r in rows), rows
' "$lines" || fail "-O$O: CSV name"
    "$MEMLENS" report --top 5 --json "$T/out" | python3 -c '
import json, sys
p = json.load(sys.stdin)["profiles"][0]
fs = [f for f in p["functions_by_bytes"] if f["symbol"].startswith(".omp_outlined.")]
names = ["triad \u203a omp parallel @omp.c:" + l for l in sys.argv[1].split()]
assert fs and all(f["name"] in names for f in fs), fs
assert [f["name"] for f in p["functions_by_bytes"] if f["symbol"] == "triad"] == ["triad"]
' "$lines" || fail "-O$O: JSON name"
    echo "-O$O: triad › omp parallel @omp.c:$L"
done
$MLCC --ml-all -O2 -fopenmp -o "$T/nog" "$src" || fail "build without -g"
rm -rf "$T/out"
MEMLENS_OUT=$T/out OMP_NUM_THREADS=2 "$T/nog" >/dev/null || fail "run without -g"
"$MEMLENS" report --top 5 "$T/out" >"$T/table" || fail "table without -g"
grep -q '^  omp parallel (\.omp_outlined\.[^)]*) ' "$T/table" || { cat "$T/table"; fail "no -g: body name"; }
grep -q "where: ? = no line information; build with -g" "$T/table" || fail "no -g: no hint"
echo ok
