#!/bin/bash
# Heap or stack by default (issue 11 item 1). A C++/OpenMP program whose regions reach objects on
# a caller's stack through this (a method), references (a template, a relaxation), a lambda's
# captures and OpenMP shared variables, next to heap vectors, is built at -O0..-O3 twice: by
# default and in exact mode (every access classified by its address at run time). Per region, the
# default build's heap+global bytes and stack bytes must match exact mode within 1%, and the
# heap+global bytes (the reason for the check) must not be all that the program moves.
. "$(dirname "$0")/region-lib.bash"
ml_setup
command -v clang++-14 >/dev/null || { echo "clang++-14 not installed"; exit 77; }
echo 'int main(void){return 0;}' >"$ML_TMP/omp.c"
clang-14 -fopenmp "$ML_TMP/omp.c" -o "$ML_TMP/omp" 2>/dev/null ||
    { echo "no OpenMP runtime for clang-14 (libomp-14-dev)"; exit 77; }

n=20000
export OMP_NUM_THREADS=2
for O in $ML_LEVELS; do
    for mode in default exact; do
        flag=
        [ $mode = exact ] && flag=--ml-exact
        "$MEMLENS_BUILD/bin/memlens-c++" $flag -O$O -fopenmp "$ML_ROOT/tests/e2e/stack/split.cpp" \
            -o "$ML_TMP/split$O.$mode" || { ml_error "-O$O $mode: memlens-c++ failed"; continue 2; }
        rm -rf "$ML_TMP/p$O.$mode" && mkdir "$ML_TMP/p$O.$mode" &&
            MEMLENS_OUT=$ML_TMP/p$O.$mode "$ML_TMP/split$O.$mode" $n >"$ML_TMP/out$O.$mode" ||
            { ml_error "-O$O $mode: run failed"; continue 2; }
    done
    cmp -s "$ML_TMP/out$O.default" "$ML_TMP/out$O.exact" ||
        ml_error "-O$O: default and exact builds print different results"
    ml_check "stack -O$O" '
d, x = profile(sys.argv[1]), profile(sys.argv[2])
heap = lambda t: t["rd_heap"] + t["rd_global"] + t["wr_heap"] + t["wr_global"]
stack = lambda t: t["rd_stack"] + t["wr_stack"]
eq("regions", sorted(d.regions), ["lambda", "members", "omp", "relax", "template"])
for r in d.regions:
    got, want = d.totals(r), x.exact_totals(r)
    for what, f in (("heap+global", heap), ("stack", stack)):
        ok("%s %s bytes %d within 1%% of exact mode %d" % (r, what, f(got), f(want)),
           abs(f(got) - f(want)) <= 0.01 * f(want))
    ok("%s moves stack bytes too (%d)" % (r, stack(want)), stack(want) > 0)
' "$ML_TMP/p$O.default" "$ML_TMP/p$O.exact"
done
ml_finish
