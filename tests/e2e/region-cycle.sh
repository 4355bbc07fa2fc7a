#!/bin/bash
# Pointers that go round a loop keep their static class (kernels/cycle.c): heap buffers swapped
# every sweep, stack buffers swapped the same way, a heap pointer advanced by a data-dependent
# step. At -O0..-O3 every region's heap and stack bytes equal closed forms (the walk's from its
# printed step count), and so do those of the control, a pointer swapped between a stack and a
# heap buffer. At -O1..-O3 (-O0 keeps the pointers in memory, so only the address can tell) the
# first three must be classified statically: no unit of theirs counts the other class, where a
# run-time test would add a (heap, stack) pair; the control must keep its pair.
. "$(dirname "$0")/region-lib.bash"
ml_setup

n=3000 sweeps=5
for O in $ML_LEVELS; do
    ml_build cycle$O $O "$ML_KERNELS/cycle.c" || continue
    ml_run cycle$O "$ML_TMP/p$O" $n $sweeps || continue
    ml_check "cycle -O$O" '
O, n, sweeps = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
steps = int(open(sys.argv[5]).read().split()[0])
p = profile(sys.argv[4])
e = n * sweeps
none = {"rd_stack": 0, "wr_stack": 0} if O else {}  # -O0 keeps locals on the stack
region(p, "heap", entries=e, measured=e, rd_heap=8 * e, wr_heap=8 * e, **none)
region(p, "walk", entries=sweeps, rd_heap=8 * steps, **none)
ok("walk took steps (%d)" % steps, steps > sweeps)
on_stack = (sweeps + 1) // 2
if O:
    region(p, "stack", entries=e, rd_stack=8 * e, wr_stack=8 * e)
    region(p, "mixed", entries=e, rd_heap=8 * n * (sweeps - on_stack), rd_stack=8 * n * on_stack)
else:
    region(p, "stack", entries=e)
    region(p, "mixed", entries=e, rd_heap=8 * n * (sweeps - on_stack))

def counts(name, classes):
    """Units of region name with bytes of any of classes (fact names)."""
    r = p.region_id(name)
    return sum(1 for u, regs in zip(p.units, p.unit_regions)
               if r in regs and any(u[6 + mlp.FACTS.index(f)] for f in classes))

if O:
    for name, other in (("heap", "stack"), ("walk", "stack"), ("stack", "heap")):
        eq("%s: units counting %s bytes (a run-time test)" % (name, other),
           counts(name, ("rd_" + other, "wr_" + other)), 0)
ok("mixed: the address decides (a heap and a stack unit)",
   counts("mixed", ("rd_heap",)) > 0 and counts("mixed", ("rd_stack",)) > 0)
' $O $n $sweeps "$ML_TMP/p$O" "$ML_TMP/cycle$O.ml.out"
done
ml_finish
