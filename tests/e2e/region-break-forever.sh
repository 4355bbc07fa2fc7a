#!/bin/bash
# A region begun inside an endless loop ('for (;;)') and left by 'break' ends on the break at
# -O0..-O3, although the code after the loop is reachable only through the region's BEGIN: work
# after the loop must not count for it.
. "$(dirname "$0")/region-lib.bash"
ml_setup

n=5000 pos=1234
for O in $ML_LEVELS; do
    ml_build bf$O $O "$ML_KERNELS/break-forever.c" || continue
    ml_run bf$O "$ML_TMP/p$O" $n $pos || continue
    ml_check "break-forever -O$O" '
pos, p = int(sys.argv[1]), profile(sys.argv[2])
region(p, "body", rd_heap=(pos + 1) * 4, entries=pos + 1)
' $pos "$ML_TMP/p$O"
done
ml_finish
