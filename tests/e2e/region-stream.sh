#!/bin/bash
# Streaming kernels (sum, copy, triad; int8, int32, double, 4 x double vectors; heap and global
# arrays) at -O0..-O3: heap and global bytes of every region equal the closed form from N.
. "$(dirname "$0")/region-lib.bash"
ml_setup

for O in $ML_LEVELS; do
    n=$((99991 + O)) # odd sizes exercise vector remainder loops
    ml_build stream$O $O "$ML_KERNELS/stream.c" || continue
    ml_run stream$O "$ML_TMP/p$O" $n 3 || continue
    ml_check "stream -O$O n=$n" '
n, level, p = int(sys.argv[1]), sys.argv[2], profile(sys.argv[3])
for s, size in (("i8", 1), ("i32", 4), ("f64", 8), ("v4d", 32)):
    for loc in ("heap", "global"):
        b = n * size
        region(p, "sum_%s_%s" % (s, loc), entries=1, **{"rd_" + loc: b})
        region(p, "copy_%s_%s" % (s, loc), entries=1, **{"rd_" + loc: b, "wr_" + loc: b})
        region(p, "triad_%s_%s" % (s, loc), entries=1, **{"rd_" + loc: 2 * b, "wr_" + loc: b})
if level == "0":
    # Unoptimised code keeps the loop index and the sum in stack slots.
    t = p.totals("sum_f64_heap")
    ok("-O0 sum_f64_heap has stack reads and writes (%d, %d)" % (t["rd_stack"], t["wr_stack"]),
       t["rd_stack"] > 0 and t["wr_stack"] > 0)
' $n $O "$ML_TMP/p$O"
done
ml_finish
