#!/bin/bash
# Sampling by code versioning at -O0..-O3: with MEMLENS_SAMPLE=2 every region (in a loop, nested in
# the same function, in a callee, recursive) counts exactly half of what a full run counts, while
# executions stay all counted and the output is the plain build's. Half, exactly, proves that the
# unmeasured executions ran code without counters. The binary must also hold that branch: each
# call to __memlens_enter is followed by a test of its result and a conditional jump.
. "$(dirname "$0")/region-lib.bash"
ml_setup

n=1000 reps=100
command -v objdump >/dev/null || { echo "objdump not installed: run scripts/deps.sh"; exit 77; }
for O in $ML_LEVELS; do
    ml_build smp$O $O "$ML_KERNELS/sample.c" || continue
    ml_run smp$O "$ML_TMP/full$O" $n $reps || continue
    MEMLENS_SAMPLE=2 MEMLENS_SAMPLE_PHASE=0 ml_run smp$O "$ML_TMP/half$O" $n $reps || continue
    ml_check "sample -O$O" '
n, reps, full, half = int(sys.argv[1]), int(sys.argv[2]), profile(sys.argv[3]), profile(sys.argv[4])
inner = len(range(0, reps, 3))
# Full run: closed forms (outer reads a[] in sum() and in scale(), writes it in scale()).
region(full, "outer", rd_heap=8 * (2 * n * reps + n // 2 * inner), wr_heap=8 * n * reps,
       entries=reps)
region(full, "inner", rd_heap=8 * (n // 2) * inner, entries=inner)
region(full, "scale", rd_heap=8 * n * reps, wr_heap=8 * n * reps, entries=reps)
rec = sum(r % 8 + 1 for r in range(reps))
region(full, "rec", rd_heap=8 * rec, entries=reps)
# MEMLENS_SAMPLE=2, phase 0: the first of every two executions per region is measured. inner and scale
# run only inside outer, so they follow its even iterations.
ev = range(0, reps, 2)
region(half, "outer", rd_heap=8 * (2 * n * len(ev) + n // 2 * len([r for r in ev if r % 3 == 0])),
       wr_heap=8 * n * len(ev), entries=reps)
region(half, "inner", rd_heap=8 * (n // 2) * len([r for r in ev if r % 3 == 0]), entries=inner)
region(half, "scale", rd_heap=8 * n * len(ev), wr_heap=8 * n * len(ev), entries=reps)
region(half, "rec", rd_heap=8 * sum(r % 8 + 1 for r in ev), entries=reps)
for k in ("rd_heap", "wr_heap"):
    eq("outer %s halves" % k, 2 * half.totals("outer")[k], full.totals("outer")[k])
' $n $reps "$ML_TMP/full$O" "$ML_TMP/half$O"
    # Every enter call is followed, within four instructions (after at most one jump to the code
    # it shares with the inline path), by a test and a conditional jump.
    objdump -d --no-show-raw-insn "$ML_TMP/smp$O.ml" | python3 -c '
import re, sys
ins = []
for line in sys.stdin:
    m = re.match(r"\s*([0-9a-f]+):\s+(\S.*)", line)
    if m:
        ins.append((int(m.group(1), 16), m.group(2)))
at = {a: i for i, (a, _) in enumerate(ins)}
calls = branched = 0
for i, (_, text) in enumerate(ins):
    if not re.search(r"call.*<__memlens_enter>", text):
        continue
    calls += 1
    k, left, tested, jumped = i + 1, 4, False, False
    while left and k < len(ins):
        t = ins[k][1]
        m = re.match(r"jmp\s+([0-9a-f]+)", t)
        if m and not jumped and int(m.group(1), 16) in at:
            k, jumped = at[int(m.group(1), 16)], True
            continue
        tested |= bool(re.match(r"(test|cmp)", t))
        if tested and re.match(r"j(e|ne|z|nz)\s", t):
            branched += 1
            break
        k, left = k + 1, left - 1
if calls < 4 or branched != calls:
    print("enter calls %d, branching %d" % (calls, branched))
    sys.exit(1)
' ||
        ml_error "sample -O$O: __memlens_enter results do not select a copy"
done
ml_finish
