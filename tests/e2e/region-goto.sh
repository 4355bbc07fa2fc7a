#!/bin/bash
# Computed goto (issue 11 item 7), -O0..-O3: a region in a function with indirectbr cannot be
# versioned. memlens cc warns, clang-style, naming the function and the region; the profile
# flags the region (CSV column computed_goto); and sampling still works: at MEMLENS_SAMPLE=10
# with phase 0 exactly 1 in 10 executions is measured and the counts are those executions'
# (closed form), at 1 in 1 every execution's.
. "$(dirname "$0")/region-lib.bash"
ml_setup

n=1000 reps=100
for O in $ML_LEVELS; do
    "$MEMLENS_BUILD/bin/memlens-cc" -O$O -g "$ML_KERNELS/goto.c" -o "$ML_TMP/goto$O" \
        2>"$ML_TMP/warn$O" || { ml_error "-O$O: memlens-cc failed"; continue; }
    grep -Eq "^.*goto\.c:[0-9]+:[0-9]+: warning: region 'interp' in function 'run' runs its counted code on every execution \(computed goto\)" \
        "$ML_TMP/warn$O" || ml_error "-O$O: no warning line: $(cat "$ML_TMP/warn$O")"
    [ "$(wc -l <"$ML_TMP/warn$O")" = 1 ] || ml_error "-O$O: not one line: $(cat "$ML_TMP/warn$O")"
    for s in 1 10; do
        rm -rf "$ML_TMP/p$O.$s" && mkdir "$ML_TMP/p$O.$s"
        MEMLENS_SAMPLE=$s MEMLENS_SAMPLE_PHASE=0 MEMLENS_OUT=$ML_TMP/p$O.$s "$ML_TMP/goto$O" $n \
            $reps >/dev/null || { ml_error "-O$O: run failed"; continue 2; }
    done
    "$MEMLENS_BUILD/bin/memlens" report --csv "$ML_TMP/p$O.10" >"$ML_TMP/p$O.csv" ||
        ml_error "-O$O: report failed"
    ml_check "goto -O$O" '
import csv
n, reps = int(sys.argv[1]), int(sys.argv[2])
for d, s in ((sys.argv[3], 1), (sys.argv[4], 10)):
    p = profile(d)
    t = p.totals("interp")
    eq("1/%d executions" % s, t["entries"], reps)
    eq("1/%d measured" % s, t["measured"], reps // s)
    eq("1/%d heap bytes read" % s, t["rd_heap"], 16 * n * (reps // s))
    eq("1/%d region flags" % s, p.rflags[p.region_id("interp")] & 1, 1)
rows = [r for r in csv.DictReader(open(sys.argv[5])) if r["region"] == "interp"]
ok("csv computed_goto", rows and all(r["computed_goto"] == "1" for r in rows))
' $n $reps "$ML_TMP/p$O.1" "$ML_TMP/p$O.10" "$ML_TMP/p$O.csv"
done
ml_finish
