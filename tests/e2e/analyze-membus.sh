#!/bin/bash
# membus against Valgrind's cachegrind: the same kernel source (tests/e2e/kernels/analyze-kernels.c)
# built at -O2 plainly (run under cachegrind --cache-sim=yes, D1 32 KiB 8-way, LL 2 MiB 16-way,
# 64-byte lines) and with memlens-cc --ml-trace (traced, then 'membus' with the same l1 and llc,
# no l2): last-level misses agree within 5% on a streaming, a random and a blocked kernel. The
# membus rows by region add up to the thread's total, and the totals of 'membus --filter' read back
# by 'bandwidth' are what membus says memory saw.
. "$(dirname "$0")/../lib/common.sh"
ml_require_cc
command -v valgrind >/dev/null || skip "valgrind is not installed"
command -v python3 >/dev/null || skip "python3 is not installed"
SRC=$ML_ROOT/tests/e2e/kernels/analyze-kernels.c
clang-14 -O2 -I"$ML_ROOT/include" "$SRC" -o "$T/plain" || fail "clang-14 failed"
$MLCC --ml-trace -O2 -I"$ML_ROOT/include" "$SRC" -o "$T/traced" || fail "memlens-cc failed"
GEOM="--l1 32k:8 --l2 none --llc 2m:16 --line 64"

check() { # name, args...
    local name=$1 ll ml
    shift
    valgrind --tool=cachegrind --cache-sim=yes --D1=32768,8,64 --LL=2097152,16,64 \
        --I1=32768,8,64 --cachegrind-out-file=/dev/null "$T/plain" "$@" >/dev/null \
        2>"$T/$name.cg" || fail "$name: cachegrind failed: $(tail -3 "$T/$name.cg")"
    ll=$(sed -n 's/.*LLd misses: *\([0-9,]*\).*/\1/p' "$T/$name.cg" | tr -d ,)
    [ -n "$ll" ] || fail "$name: no 'LLd misses' in cachegrind's output"
    rm -rf "$T/o"
    MEMLENS_OUT=$T/o "$MEMLENS" trace -q -- "$T/traced" "$@" >/dev/null 2>"$T/$name.err" ||
        fail "$name: traced run failed"
    "$MEMLENS" analyze -q --csv $GEOM "$T"/o/*.mlt membus >"$T/$name.csv" ||
        fail "$name: membus failed"
    ml=$(awk -F, 'NR > 1 && $1 == "llc" && $3 == "all" && $5 == "all" { print $7 }' "$T/$name.csv")
    [ -n "$ml" ] || fail "$name: no llc row"
    echo "$name: cachegrind LLd misses $ll, membus llc misses $ml"
    python3 -c "import sys; a, b = int(sys.argv[1]), int(sys.argv[2]); sys.exit(abs(a - b) > 0.05 * a)" \
        "$ll" "$ml" || fail "$name: llc misses $ml differ from cachegrind's $ll by more than 5%"
}

check stream stream 1000000 2
check random random 4000000 1000000
check blocked blocked 1024 16

# Breakdown by region adds up; the filtered trace carries what memory saw.
"$MEMLENS" analyze -q --csv --by region $GEOM "$T"/o/*.mlt membus --filter "$T/mem.mlt" \
    >"$T/by.csv" || fail "membus --by region --filter failed"
python3 - "$T/by.csv" <<'PY' || fail "region rows do not add up to the totals"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
for level in ('l1', 'llc', 'memory'):
    for col in ('accesses', 'bytes_from_memory', 'bytes_to_memory'):
        for th in set(r['thread'] for r in rows):
            sel = [r for r in rows if r['level'] == level and r['thread'] == th]
            tot = [int(r[col]) for r in sel if r['marker'] == 'all']
            parts = sum(int(r[col]) for r in sel if r['marker'] != 'all')
            assert len(tot) == 1 and tot[0] == parts, (level, col, th, tot, parts)
assert any(r['marker'] == 'region:blocked' for r in rows)
PY
"$MEMLENS" analyze -q --csv "$T/mem.mlt" summary >"$T/mem.csv" || fail "summary of the filtered trace failed"
python3 - "$T/by.csv" "$T/mem.csv" <<'PY' || fail "the filtered trace does not hold what memory saw"
import csv, sys
m = [r for r in csv.DictReader(open(sys.argv[1])) if r['level'] == 'memory' and r['thread'] == 'all' and r['marker'] == 'all'][0]
s = [r for r in csv.DictReader(open(sys.argv[2])) if r['thread'] == 'all' and r['marker'] == 'all'][0]
assert int(s['bytes_read']) == int(m['bytes_from_memory']), (s, m)
assert int(s['bytes_written']) == int(m['bytes_to_memory']), (s, m)
PY
exit 0
