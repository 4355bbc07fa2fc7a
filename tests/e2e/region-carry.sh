#!/bin/bash
# Loop-body regions in call-free loops, whose inline markers keep the region's words in a register
# (docs/regions.md, "Inline enter and exit"): a plain body, a break out of the region, a region
# open when its loop starts, a return from inside the region, a region in an inner loop, and a
# region reading through a pointer that swaps between the stack and the heap (its class tested
# outside the loops it does not change in). At -O0..-O3, with every execution measured and with
# MEMLENS_SAMPLE=3 (phase 0: executions 0, 3, 6, ... of each region), executions and heap (and
# stack) bytes must equal the closed forms exactly; at MEMLENS_SAMPLE=7 with a random phase,
# executions exactly and 8 bytes per measured execution.
. "$(dirname "$0")/region-lib.bash"
ml_setup

n=1000 reps=40
for O in $ML_LEVELS; do
    ml_build carry$O $O "$ML_KERNELS/carry.c" || continue
    ml_run carry$O "$ML_TMP/full$O" $n $reps || continue
    MEMLENS_SAMPLE=3 MEMLENS_SAMPLE_PHASE=0 ml_run carry$O "$ML_TMP/third$O" $n $reps || continue
    MEMLENS_SAMPLE=7 ml_run carry$O "$ML_TMP/rand$O" $n $reps || continue
    ml_check "carry -O$O" '
n, reps = int(sys.argv[1]), int(sys.argv[2])
# Bytes read by each execution of each region, in execution order (one call per repetition).
per_call = {
    "body": [8] * n,
    "brk": [8] * (n // 2 + 1),
    "open": [16] + [8] * (n - 1) + [0],
    "ret": [8] * (n // 2 + 1),
    "inner": [8] * (3 * (n // 4)),
}
# swap: 8 executions per row, reading 1 + rep % 7 doubles, of the stack buffer on even rows (at
# -O0 the locals of the program add stack bytes).
swap = [(8 * (1 + r % 7), row % 2 == 0) for r in range(reps) for row in range(5) for j in range(8)]
for d, keep in ((sys.argv[3], lambda k: True), (sys.argv[4], lambda k: k % 3 == 0)):
    st = {} if sys.argv[5] == "0" else {
        "rd_stack": sum(b for k, (b, s) in enumerate(swap) if keep(k) and s)}
    region(profile(d), "swap", entries=len(swap),
           rd_heap=sum(b for k, (b, s) in enumerate(swap) if keep(k) and not s), **st)
# 1 in 7 at a random phase (budgets of skips run inline): executions exact, and each measured
# execution of a region that reads 8 bytes every time counted whole.
r = profile(sys.argv[6])
for name in ("body", "brk", "ret", "inner"):
    t = region(r, name, rd_heap=8 * r.totals(name)["measured"], entries=len(per_call[name]) * reps)
    ok("%s: some but not all executions measured at 1 in 7" % name,
       t and 0 < t["measured"] < t["entries"])
region(r, "swap", entries=len(swap), rd_heap=r.totals("swap")["rd_heap"])
for name, call in per_call.items():
    execs = call * reps
    for d, keep in ((sys.argv[3], lambda k: True), (sys.argv[4], lambda k: k % 3 == 0)):
        region(profile(d), name, rd_heap=sum(b for k, b in enumerate(execs) if keep(k)),
               entries=len(execs))
' $n $reps "$ML_TMP/full$O" "$ML_TMP/third$O" $O "$ML_TMP/rand$O"
done
ml_finish
