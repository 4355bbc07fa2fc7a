#!/bin/bash
# Folded loop counters at -O0..-O3: constant trip counts (nested), counts known at loop entry
# (nested, counting down with !=, an 8-bit counter that wraps past 255, zero trips), a step of 3
# against a variable <= bound and a loop left by break. Heap and global bytes equal the closed
# forms at two sizes; where the optimiser keeps loops (-O1 and up) the increments per region
# execution of the folded loops do not grow with the size (they are O(1), not O(n)), while those
# of the loop with a break do. Second method: at -O2, exact mode (every access reported with its
# address) gives the same bytes as the folded static counts, region by region.
. "$(dirname "$0")/region-lib.bash"
ml_setup

reps=3
for O in $ML_LEVELS; do
    ml_build loops$O $O "$ML_KERNELS/loops.c" || continue
    # n m k reps lo hi c0 c1: two sizes with the same residues, then zero-trip loops.
    ml_run loops$O "$ML_TMP/a$O" 1000 10 16 $reps 1 9 250 4 || continue
    ml_run loops$O "$ML_TMP/b$O" 8000 40 64 $reps 2 1000 3 200 || continue
    ml_run loops$O "$ML_TMP/z$O" 0 0 0 $reps 5 4 7 7 || continue
    ml_check "loops -O$O" '
O, reps = int(sys.argv[1]), int(sys.argv[2])
runs = [(sys.argv[3], 1000, 10, 16, 1, 9, 250, 4), (sys.argv[4], 8000, 40, 64, 2, 1000, 3, 200),
        (sys.argv[5], 0, 0, 0, 5, 4, 7, 7)]
per = {}
for d, n, m, k, lo, hi, c0, c1 in runs:
    p = profile(d)
    # The break loop reads a[0..n/2] (twice per element that passes at -O0).
    brk = (2 * (n // 2) + 1 if O == 0 else n // 2 + 1) if n else 0
    step3 = (hi - lo) // 3 + 1 if lo <= hi else 0
    want = {
        "const2d": dict(rd_global=reps * 32 * 48 * 8),
        "inv": dict(rd_heap=reps * n * 8),
        "inv_nest": dict(rd_heap=reps * m * k * 8, wr_heap=reps * m * k * 8),
        "down_ne": dict(rd_heap=reps * n * 8),
        "u8_wrap": dict(rd_heap=reps * ((c1 - c0) % 256) * 8),
        "step3_le": dict(rd_heap=reps * step3 * 8),
        "break": dict(rd_heap=reps * brk * 8),
    }
    for r, w in want.items():
        t = region(p, r, entries=reps, **w)
        if t is not None:
            per[(d, r)] = t["incr"] / reps
a, b = runs[0][0], runs[1][0]
if O > 0:
    for r in ("const2d", "inv", "inv_nest", "down_ne", "u8_wrap"):
        eq(r + " increments per execution, n=8000 vs n=1000", per.get((b, r)), per.get((a, r)))
        ok(r + " increments per execution <= 12 (got %s)" % per.get((a, r)), per.get((a, r), 99) <= 12)
    ok("break counts per iteration", per.get((b, "break"), 0) > 5 * per.get((a, "break"), 0))
print("-O%d increments per execution (n=1000, n=8000): %s" % (O, ", ".join(
    "%s %g %g" % (r, per.get((a, r), -1), per.get((b, r), -1))
    for r in ("const2d", "inv", "inv_nest", "down_ne", "u8_wrap", "step3_le", "break"))))
' $O $reps "$ML_TMP/a$O" "$ML_TMP/b$O" "$ML_TMP/z$O"
done

if [[ " $ML_LEVELS " == *" 2 "* ]]; then
    ml_build loopsx 2 --ml-exact "$ML_KERNELS/loops.c" &&
        ml_run loopsx "$ML_TMP/x" 1000 10 16 $reps 1 9 250 4 &&
        ml_check "loops exact -O2" '
p = profile(sys.argv[1])
for r in p.regions:
    s, x = p.totals(r), p.exact_totals(r)
    for k in ("rd_heap", "rd_global", "rd_stack", "wr_heap", "wr_global", "wr_stack"):
        eq("%s %s static vs exact" % (r, k), s[k], x[k])
' "$ML_TMP/x"
fi
ml_finish
