#!/bin/bash
# Control flow in regions at -O0..-O3: triangular loops (sum of i), early exits by break, return,
# goto and continue at a position the test picks, regions entered in a loop (entries = trip
# count), nested regions (the outer includes the inner) and a recursive region (counts once per
# outermost entry). Heap and global bytes and entries equal the closed forms.
. "$(dirname "$0")/region-lib.bash"
ml_setup

n=1000 len=20000 pos=12345 reps=7 k=300 key=7
for O in $ML_LEVELS; do
    ml_build control$O $O "$ML_KERNELS/control.c" || continue
    ml_run control$O "$ML_TMP/p$O" $n $len $pos $reps $k $key || continue
    ml_check "control -O$O" '
n, ln, pos, reps, k, key = map(int, sys.argv[1:7])
p = profile(sys.argv[7])
region(p, "tri_lower", rd_heap=n * (n - 1) // 2 * 8, entries=1)
region(p, "tri_upper_global", rd_global=n * (n + 1) // 2 * 8, entries=1)
for r in ("find_break", "find_return", "goto_out"):
    region(p, r, rd_heap=(pos + 1) * 4, entries=1)
region(p, "body_break", rd_heap=(pos + 1) * 4 + pos * 8, entries=pos + 1)
a = [i % 1000 + 1 for i in range(ln)]
a[pos] = -key
kept = sum(1 for v in a if abs(v) % 3 != 0)  # C remainder keeps the sign of the dividend
region(p, "body_continue", rd_heap=ln * 4 + kept * 8, entries=ln)
region(p, "repeated", rd_heap=reps * k * 8, entries=reps)
region(p, "inner", rd_heap=reps * k * 8, wr_heap=reps * k * 8, entries=reps)
region(p, "outer", rd_heap=ln * 4 + reps * k * 8, wr_heap=reps * k * 8, entries=1)
region(p, "recursive", rd_heap=reps * ln * 8, entries=reps)
' $n $len $pos $reps $k $key "$ML_TMP/p$O"
done
ml_finish
