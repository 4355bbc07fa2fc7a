#!/bin/bash
# memcpy / memmove / memset and struct copies inside regions at -O0..-O3: constant sizes (static
# facts) and sizes from the command line (run-time byte counters) give the exact heap and global
# bytes.
. "$(dirname "$0")/region-lib.bash"
ml_setup

for O in $ML_LEVELS; do
    n=$((300001 + 2 * O)) m=$((1000 + O))
    ml_build memops$O $O "$ML_KERNELS/memops.c" || continue
    ml_run memops$O "$ML_TMP/p$O" $n $m 5 || continue
    ml_check "memops -O$O n=$n m=$m" '
n, m, p = int(sys.argv[1]), int(sys.argv[2]), profile(sys.argv[3])
region(p, "memcpy_const", rd_heap=64 * m, wr_heap=64 * m, entries=1)
region(p, "memset_const", wr_heap=48 * m, entries=1)
region(p, "memcpy_var", rd_heap=n, wr_heap=n, entries=1)
region(p, "memmove_var", rd_heap=n - 1, wr_heap=n - 1, entries=1)
region(p, "memset_var", wr_heap=n, entries=1)
region(p, "memcpy_global", rd_global=n, wr_global=n + 32 * m, rd_heap=32 * m, entries=1)
region(p, "struct_copy", rd_heap=40 * m, wr_heap=40 * m, entries=1)
' $n $m "$ML_TMP/p$O"
done
ml_finish
