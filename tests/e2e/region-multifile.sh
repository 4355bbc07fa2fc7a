#!/bin/bash
# A region calling functions in another file, at -O0..-O3. In whole-program mode
# (--ml-whole-program) the callees are counted exactly, as part of the region's code; in per-file
# mode the callees (external functions of another module) count for the region open when they
# run (dynamic attribution): the same bytes, and nothing is listed as not seen. A region name used in both files
# adds up either way.
. "$(dirname "$0")/region-lib.bash"
ml_setup

n=50000 reps=3
for O in $ML_LEVELS; do
    for mode in file whole; do
        wp=
        [ $mode = whole ] && wp=--ml-whole-program
        ml_build mf$mode$O $O $wp "$ML_KERNELS/multifile-main.c" "$ML_KERNELS/multifile-lib.c" ||
            continue
        ml_run mf$mode$O "$ML_TMP/p$mode$O" $n $reps || continue
        ml_check "multifile $mode -O$O" '
n, reps, whole, p = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "whole", profile(sys.argv[4])
region(p, "calls", rd_heap=reps * (16 * n + 8 * n), wr_heap=reps * 8 * n, entries=1)
eq("calls not seen", p.not_seen("calls"), {})
region(p, "shared", rd_heap=2 * 8 * n, entries=2)
' $n $reps $mode "$ML_TMP/p$mode$O"
    done
done
ml_finish
