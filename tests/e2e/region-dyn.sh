#!/bin/bash
# Calls the static region sets miss (issue 11 item 4): a dispatch table, a callback that a
# function of another file (another module) calls, qsort's comparator, and C++ virtual calls, at
# -O0..-O3. The code they reach is instrumented and must count for the region open at run time:
# closed-form heap bytes per region (they were 0 when region sets were only static).
. "$(dirname "$0")/region-lib.bash"
ml_setup

n=10000 k=3
D=$ML_ROOT/tests/e2e/dyn
for O in $ML_LEVELS; do
    ml_build dsp$O $O "$D/dispatch.c" "$D/dyn-lib.c" || continue
    ml_run dsp$O "$ML_TMP/d$O" $n $k 2>"$ML_TMP/d$O.err" || continue
    compares=$(sed -n 's/^compares //p' "$ML_TMP/d$O.err" | head -n 1)
    ml_check "dispatch -O$O" '
n, k, cmps, p = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), profile(sys.argv[4])
for r, (rd, wr) in (("table", (8 * n * k, 8 * n * k)), ("callback", (8 * n, 8 * n)),
                    ("qsort", (16 * cmps, 0))):
    t = p.totals(r)
    eq("%s heap bytes (read, written)" % r, (t["rd_heap"], t["wr_heap"]), (rd, wr))
    eq("%s executions" % r, t["entries"], 1)
# The comparator counts its calls in a global.
eq("qsort global bytes written", p.totals("qsort")["wr_global"], 8 * cmps)
' $n $k "$compares" "$ML_TMP/d$O"
    ml_build vt$O $O --c++ "$D/vtable.cpp" || continue
    ml_run vt$O "$ML_TMP/v$O" $n $k 2>/dev/null || continue
    ml_check "vtable -O$O" '
n, k, p = int(sys.argv[1]), int(sys.argv[2]), profile(sys.argv[3])
t = p.totals("virtual")
# The elements, plus a few words of object and vtable pointers per call.
ok("virtual heap bytes read %d for %d" % (t["rd_heap"], 8 * n * k),
   8 * n * k <= t["rd_heap"] <= 8 * n * k + 32 * k)
eq("virtual heap bytes written", t["wr_heap"], 8 * n * k)
' $n $k "$ML_TMP/v$O"
done
ml_finish
