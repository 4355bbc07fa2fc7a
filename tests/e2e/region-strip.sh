#!/bin/bash
# Strip-mined plain copies of leaf loops (docs/regions.md, "Strip-mined plain copies"): three
# loop-body regions in rolled loops (a long counter, an int counter, a long counter from an
# offset compared with !=) and one in a loop the optimiser unrolls (not strip-mined) run with
# every trip count from 0 to 3P+1, at MEMLENS_SAMPLE=P with phase 0 for P = 1, 4, 7 and 100, so
# strips end on the loop's bound, on the budget, and on both at once. Executions, measured
# executions (those whose index in the region is a multiple of P) and bytes (8 per measured
# execution) must equal the closed forms, -O0..-O3; at -O1..-O3, with and without -g, each
# rolled loop's instrumented IR must hold a strip (its limit, memlens.lim), so the counts test
# the strips.
. "$(dirname "$0")/region-lib.bash"
ml_setup

rounds=3
for O in $ML_LEVELS; do
    ml_build strip$O $O "$ML_KERNELS/strip.c" || continue
    for g in "" -g; do # debug records must not stop it
        [ "$O" != 0 ] || break
        "$MEMLENS_BUILD/bin/memlens-cc" -O$O $g -I"$ML_ROOT/include" -c -emit-llvm \
            "$ML_KERNELS/strip.c" -o "$ML_TMP/strip$O$g.bc" &&
            "$MEMLENS_BUILD/bin/memlens" instrument -o "$ML_TMP/strip$O$g.ml.bc" \
                "$ML_TMP/strip$O$g.bc" &&
            llvm-dis-14 "$ML_TMP/strip$O$g.ml.bc" -o "$ML_TMP/strip$O$g.ll" ||
            { ml_error "strip -O$O $g: instrumented IR failed"; continue; }
        for f in slong sint soff; do
            awk "/^define.*@$f\\(/,/^}/" "$ML_TMP/strip$O$g.ll" | grep -q 'memlens.lim' ||
                ml_error "strip -O$O $g: $f has no strip-mined plain copy"
        done
    done
    for P in 1 4 7 100; do
        MEMLENS_SAMPLE=$P MEMLENS_SAMPLE_PHASE=0 ml_run strip$O "$ML_TMP/s$O-$P" x $P $rounds ||
            continue
        ml_check "strip -O$O P=$P" '
p, rounds = int(sys.argv[1]), int(sys.argv[2])
e = rounds * sum(range(3 * p + 2))
m = (e + p - 1) // p
r = profile(sys.argv[3])
for name in ("slong", "sint", "soff", "sunroll"):
    region(r, name, entries=e, measured=m, rd_heap=8 * m)
' $P $rounds "$ML_TMP/s$O-$P"
    done
done
ml_finish
