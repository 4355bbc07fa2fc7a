#!/bin/bash
# Counters shared across a region's marker blocks (kernels/share.c): the block after BEGIN and the
# block holding END of a loop body split by an inner loop run equally often and share one counter
# (docs/regions.md "Inline enter and exit"). At -O0..-O3, every execution measured, 1 in 3 with
# phase 0 (executions 0, 3, 6, ... in run order) and 1 in 7 at a random phase: entries exact and
# heap bytes equal the closed form of the measured executions (the 1 in 7 run: between the
# bounds of its measured count). The shared counter is checked directly too: at 100% exactly one
# of the region's block counters (not the byte counters of run-time classified pointers, -O0) runs
# once per execution (two before sharing).
. "$(dirname "$0")/region-lib.bash"
ml_setup

nv=3001 sweeps=4
for O in $ML_LEVELS; do
    ml_build share$O $O "$ML_KERNELS/share.c" || continue
    ml_run share$O "$ML_TMP/full$O" $nv $sweeps || continue
    MEMLENS_SAMPLE=3 MEMLENS_SAMPLE_PHASE=0 ml_run share$O "$ML_TMP/third$O" $nv $sweeps || continue
    MEMLENS_SAMPLE=7 ml_run share$O "$ML_TMP/rand$O" $nv $sweeps || continue
    ml_check "share -O$O" '
nv, sweeps = int(sys.argv[1]), int(sys.argv[2])
cost = [16 + 12 * (k % nv % 4) for k in range(nv * sweeps)]
e = nv * sweeps
full = profile(sys.argv[3])
region(full, "split", entries=e, measured=e, rd_heap=sum(cost) - 8 * e, wr_heap=8 * e)
third = profile(sys.argv[4])
m = cost[0::3]
region(third, "split", entries=e, measured=len(m), rd_heap=sum(m) - 8 * len(m), wr_heap=8 * len(m))
rand = profile(sys.argv[5])
t = rand.totals("split")
ok("1 in 7: %d measured" % t["measured"], e // 7 <= t["measured"] <= e // 7 + 1)
ok("1 in 7: read %d within the bounds of %d measured" % (t["rd_heap"], t["measured"]),
   sum(sorted(cost)[:t["measured"]]) <= t["rd_heap"] + 8 * t["measured"] <= sum(sorted(cost)[-t["measured"]:]))
eq("1 in 7: written", t["wr_heap"], 8 * t["measured"])
r = full.region_id("split")
once = [u for u, regs, c in zip(full.units, full.unit_regions, full.threads[0]["counts"])
        if r in regs and c == e and u[6 + mlp.FACTS.index("instr")]]
eq("block counters run once per execution", len(once), 1)
' $nv $sweeps "$ML_TMP/full$O" "$ML_TMP/third$O" "$ML_TMP/rand$O"
done
ml_finish
