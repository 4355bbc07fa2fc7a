#!/bin/bash
# Markers do not perturb the program they measure (issue 11 item 3). Loop-body regions in C (a
# gather with a loop-invariant pointer, a reduction into a struct field, a pointer chase with a
# counter behind a pointer, a BFS frontier expansion) and C++ (a method using this, a lambda
# through a template) are built with memlens cc --all with and without their markers at
# -O0..-O3: every function's counted loads, stores and bytes must be equal, and the outputs too.
# Control: at -O2 the same kernels built with opaque marker calls (memlens.h without memlens cc)
# must differ, so the check can fail.
. "$(dirname "$0")/region-lib.bash"
ml_setup

n=20000
SRC=$ML_ROOT/tests/e2e/markers
# name, driver, source, functions to compare
CASES="c memlens-cc loops.c gather,accumulate,chase,expand
cxx memlens-c++ loops.cpp Grid5sweep,each"

build() { # out cc level source flags...
    local out=$1 cc=$2 level=$3 src=$4
    shift 4
    "$MEMLENS_BUILD/bin/$cc" --ml-all -O"$level" "$@" "$SRC/$src" -o "$ML_TMP/$out" ||
        { ml_error "$cc -O$level $* $src failed"; return 1; }
    rm -rf "$ML_TMP/$out.d" && mkdir "$ML_TMP/$out.d" &&
        MEMLENS_OUT=$ML_TMP/$out.d "$ML_TMP/$out" $n >"$ML_TMP/$out.out" ||
        { ml_error "$out: run failed"; return 1; }
}

COMPARE='
want_equal = sys.argv[1] == "equal"
a, b = profile(sys.argv[2]), profile(sys.argv[3])
differs = False
for fn in sys.argv[4].split(","):
    fa, fb = a.function(fn), b.function(fn)
    for k in ("loads", "stores", "bytes_read", "bytes_written"):
        if want_equal:
            eq("%s %s (unmarked, marked)" % (fn, k), (fb[k], fa[k]), (fb[k], fb[k]))
        differs |= fa[k] != fb[k]
ok("opaque markers change some function'"'"'s loads, stores or bytes", want_equal or differs)
'

while read -r name cc src fns; do
    for O in $ML_LEVELS; do
        build $name.m$O $cc $O $src || continue
        build $name.u$O $cc $O $src -DUNMARKED || continue
        cmp -s "$ML_TMP/$name.m$O.out" "$ML_TMP/$name.u$O.out" ||
            ml_error "$name -O$O: marked and unmarked programs print different results"
        ml_check "$name -O$O" "$COMPARE" equal "$ML_TMP/$name.m$O.d" "$ML_TMP/$name.u$O.d" "$fns"
    done
    build $name.o2 $cc 2 $src -DOPAQUE_MARKERS || continue
    ml_check "$name -O2 opaque markers" "$COMPARE" differ "$ML_TMP/$name.o2.d" \
        "$ML_TMP/$name.u2.d" "$fns"
done <<<"$CASES"
ml_finish
