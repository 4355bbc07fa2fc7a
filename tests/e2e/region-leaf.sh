#!/bin/bash
# A loop-body region whose sampled BEGIN calls __memlens_enter_leaf (a call-free loop left only
# with the region closed; docs/regions.md, "Inline enter and exit"): once the region is grown up,
# a measured execution that reads no clock is counted at its BEGIN and ended inline. At -O1..-O3
# (-O0 carries nothing), with threads: at 100%, at MEMLENS_SAMPLE=4 phase 0 (executions 0, 4,
# 8, ... of each thread) and at MEMLENS_SAMPLE=7 with a random phase, executions exactly and 8
# bytes per measured execution. With a profiling-timer handler running its own region while the
# loop runs (at 1 in 7): each region's bytes per measured execution exact, the loop's executions a
# whole number of calls. memlens report notes how many measured executions read the clock.
# Such a loop's plain copy has no END (an unmeasured execution ends at its BEGIN): one call of
# __memlens_exit is left in the function, and the loop run inside an execution of its own region
# opened by the caller (its BEGINs part of that execution), at 100% and at 1 in 4 phase 0, gives
# executions, measured executions and bytes exactly.
. "$(dirname "$0")/region-lib.bash"
ml_setup

t=2 n=100000 reps=5 nn=3000 nreps=42
for O in ${ML_LEVELS/0/}; do
    ml_build leaf$O $O "$ML_KERNELS/leaf.c" -lpthread || continue
    if ! grep -q __memlens_enter_leaf < <(nm "$ML_TMP/leaf$O.ml"); then
        ml_error "leaf -O$O: the loop's BEGIN does not call __memlens_enter_leaf"
        continue
    fi
    ml_run leaf$O "$ML_TMP/full$O" threads $t $n $reps || continue
    MEMLENS_SAMPLE=4 MEMLENS_SAMPLE_PHASE=0 ml_run leaf$O "$ML_TMP/quarter$O" threads $t $n $reps ||
        continue
    MEMLENS_SAMPLE=7 ml_run leaf$O "$ML_TMP/rand$O" threads $t $n $reps || continue
    "$MEMLENS_BUILD/bin/memlens" report "$ML_TMP/rand$O" >"$ML_TMP/rand$O.txt" ||
        { ml_error "leaf -O$O: memlens report failed"; continue; }
    MEMLENS_SAMPLE=7 ml_run leaf$O "$ML_TMP/sig$O" signal $n || continue
    ml_run leaf$O "$ML_TMP/nfull$O" nested $nn $nreps || continue
    MEMLENS_SAMPLE=4 MEMLENS_SAMPLE_PHASE=0 ml_run leaf$O "$ML_TMP/nquarter$O" nested $nn $nreps ||
        continue
    # The instrumented IR of leaf(): each BEGIN site has a plain and an instrumented twin, each
    # END one call of __memlens_exit, except in the plain copy of a leaf loop.
    "$MEMLENS_BUILD/bin/memlens-cc" -O$O -I"$ML_ROOT/include" -c -emit-llvm \
        "$ML_KERNELS/leaf.c" -o "$ML_TMP/leaf$O.bc" &&
        "$MEMLENS_BUILD/bin/memlens" instrument -o "$ML_TMP/leaf$O.ml.bc" "$ML_TMP/leaf$O.bc" &&
        llvm-dis-14 "$ML_TMP/leaf$O.ml.bc" -o "$ML_TMP/leaf$O.ll" ||
        { ml_error "leaf -O$O: instrumented IR failed"; continue; }
    fn=$(awk '/^define.*@leaf\(/,/^}/' "$ML_TMP/leaf$O.ll")
    leafs=$(grep -c 'call i32 @__memlens_enter_leaf(' <<<"$fn")
    enters=$(grep -c 'call i32 @__memlens_enter(' <<<"$fn")
    exits=$(grep -c 'call void @__memlens_exit(' <<<"$fn")
    [ $((2 * exits)) = $((leafs + 2 * enters)) ] ||
        ml_error "leaf -O$O: $exits ENDs call __memlens_exit for $leafs leaf and $enters other BEGIN sites (the plain copy of a leaf loop has no END)"
    ml_check "leaf -O$O" '
t, n, reps = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
e = n * reps
region(profile(sys.argv[4]), "leaf", entries=t * e, measured=t * e, rd_heap=8 * t * e)
m = (e + 3) // 4
region(profile(sys.argv[5]), "leaf", entries=t * e, measured=t * m, rd_heap=8 * t * m)
r = profile(sys.argv[6])
x = r.totals("leaf")
region(r, "leaf", entries=t * e, rd_heap=8 * x["measured"])
ok("leaf: at least one in 7 measured at a random phase", x["measured"] >= t * (e // 7))
s = profile(sys.argv[7])
x, y = s.totals("leaf"), s.totals("sig")
region(s, "leaf", entries=x["entries"], rd_heap=8 * x["measured"])
ok("leaf: a whole number of calls under signals", x["entries"] > 0 and x["entries"] % n == 0)
region(s, "sig", entries=y["entries"], rd_global=16 * y["measured"], wr_global=8 * y["measured"])
ok("sig: the handler ran at least 20 times", y["entries"] >= 20)
# memlens report says how many measured executions read the clock when not all did
timed = sum(sum(v[0]) for v in r.timed.values())
measured = sum(sum(th["measured"]) for th in r.threads)
note = "note: clock sampled, %d of %d measured region executions read the clock" % (timed,
                                                                                    measured)
ok("report: %r %s" % (note, "missing" if timed < measured else "printed, all timed"),
   (note in open(sys.argv[8]).read()) == (timed < measured))
nn, nreps = int(sys.argv[9]), int(sys.argv[10])
alone = nn * nreps
region(profile(sys.argv[11]), "leaf", entries=alone + nreps, measured=alone + nreps,
       rd_heap=8 * alone + 8 * nn * nreps)
ma = (alone + 3) // 4
mo = sum(1 for k in range(nreps) if (alone + k) % 4 == 0)
region(profile(sys.argv[12]), "leaf", entries=alone + nreps, measured=ma + mo,
       rd_heap=8 * ma + 8 * nn * mo)
' $t $n $reps "$ML_TMP/full$O" "$ML_TMP/quarter$O" "$ML_TMP/rand$O" "$ML_TMP/sig$O" \
        "$ML_TMP/rand$O.txt" $nn $nreps "$ML_TMP/nfull$O" "$ML_TMP/nquarter$O"
done
ml_finish
