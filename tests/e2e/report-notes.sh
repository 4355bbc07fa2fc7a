#!/bin/bash
# Rows that need a word of warning say so in the table, CSV and JSON: a sampled region whose
# executions were all left unmeasured (0 of 5 at 1 in 100, phase fixed) gets
# "0 of 5 measured: rerun with MEMLENS_SAMPLE=1"; a region with measured executions gets none.
. "$(dirname "$0")/../lib/common.sh"
ml_require_cc
$MLCC -O2 -o "$T/coarse" "$ML_ROOT/tests/e2e/kernels/coarse.c" || fail "build"
MEMLENS_OUT=$T/out MEMLENS_SAMPLE=100 MEMLENS_SAMPLE_PHASE=50 "$T/coarse" 1000 >/dev/null ||
    fail "run"
note="0 of 5 measured: rerun with MEMLENS_SAMPLE=1"
"$MEMLENS" report "$T/out" >"$T/table" || fail "table"
grep -q "^  coarse .* -  $note\$" "$T/table" || { cat "$T/table"; fail "table row without the note"; }
grep "^  fine " "$T/table" | grep -q measured && fail "a measured region got the note"
"$MEMLENS" report --csv "$T/out" | python3 -c '
import csv, sys
rows = {r["region"]: r for r in csv.DictReader(sys.stdin) if r["thread"] == "total"}
assert rows["coarse"]["note"] == sys.argv[1] and rows["coarse"]["measured"] == "0", rows["coarse"]
assert rows["fine"]["note"] == "" and rows["fine"]["measured"] == "10", rows["fine"]' "$note" ||
    fail "CSV note"
"$MEMLENS" report --json "$T/out" | python3 -c '
import json, sys
regs = {r["name"]: r for r in json.load(sys.stdin)["profiles"][0]["regions"]}
assert regs["coarse"]["total"]["note"] == sys.argv[1], regs["coarse"]["total"]
assert regs["coarse"]["threads"][0]["note"] == sys.argv[1]
assert regs["fine"]["total"]["note"] is None' "$note" || fail "JSON note"
echo ok
