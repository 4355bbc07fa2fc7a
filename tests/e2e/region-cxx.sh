#!/bin/bash
# C++ at -O0..-O3: a region in a method of a class template, template functions instantiated for
# float and long inside a region, and an exception thrown and caught inside a region (the scan
# stops at a position the test picks): exact heap and global bytes.
. "$(dirname "$0")/region-lib.bash"
ml_setup

n=100000 pos=31415
for O in $ML_LEVELS; do
    ml_build cxx$O $O --c++ "$ML_KERNELS/cxx.cpp" || continue
    ml_run cxx$O "$ML_TMP/p$O" $n $pos || continue
    ml_check "c++ -O$O" '
n, pos, p = int(sys.argv[1]), int(sys.argv[2]), profile(sys.argv[3])
region(p, "method", rd_heap=8 * n, entries=1)
region(p, "templates", rd_heap=n * (4 + 4) + n * (8 + 8), wr_heap=n * 4 + n * 8, entries=1)
# "throw i" writes the long into the exception object and "catch (long where)" reads it back.
region(p, "exception", rd_heap=8 * (pos + 1) + 8, wr_heap=8, entries=1)
' $n $pos "$ML_TMP/p$O"
done
ml_finish
