#!/bin/bash
# Strided reads and writes (stride s) and indirect access (gather a[idx[i]], scatter b[idx[i]])
# on heap and global arrays at -O0..-O3: heap and global bytes equal the closed forms.
. "$(dirname "$0")/region-lib.bash"
ml_setup

for O in $ML_LEVELS; do
    n=$((100000 + O)) s=$((5 + O)) m=$((40000 + 3 * O))
    ml_build access$O $O "$ML_KERNELS/access.c" || continue
    ml_run access$O "$ML_TMP/p$O" $n $s $m 3 || continue
    ml_check "access -O$O n=$n s=$s m=$m" '
n, s, m, p = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), profile(sys.argv[4])
strided = (n + s - 1) // s
region(p, "stride_read_heap", rd_heap=strided * 8, entries=1)
region(p, "stride_write_heap", wr_heap=strided * 8, entries=1)
region(p, "stride_read_global", rd_global=strided * 4, entries=1)
region(p, "gather_heap", rd_heap=m * (4 + 8), entries=1)
region(p, "scatter_heap", rd_heap=m * (4 + 8), wr_heap=m * 8, entries=1)
region(p, "gather_global", rd_global=m * (4 + 4), entries=1)
' $n $s $m "$ML_TMP/p$O"
done
ml_finish
