#!/bin/bash
# Heap bytes through a pointer loaded from a static global, in a region inside a SIGPROF or
# SIGALRM handler and in a loop-body region outside it (tests/e2e/kernels/sigheap.c), at -O0..-O3:
# the static heap/global/stack split equals the split exact mode (--ml-exact) finds by address in
# the same run, class by class, and the default build's bytes per measured execution equal the
# exact build's. With a buffer of variable size at -O1 and above, the closed form: "sig" reads 8
# heap bytes and 8 global bytes (the pointer itself) and writes 4 heap bytes per execution, "body"
# reads 4 heap bytes. (With a constant-size malloc, globalopt turns the buffer into a global
# variable: exact mode then agrees that its bytes are global; docs/regions.md.)
. "$(dirname "$0")/region-lib.bash"
ml_setup

n=20000
for O in $ML_LEVELS; do
    ml_build sh$O $O "$ML_KERNELS/sigheap.c" || continue
    ml_build shx$O $O --ml-exact "$ML_KERNELS/sigheap.c" || continue
    for sig in prof alrm; do
        for size in var const; do
            ml_run sh$O "$ML_TMP/d$O$sig$size" $sig $size $n || continue
            ml_run shx$O "$ML_TMP/x$O$sig$size" $sig $size $n || continue
            ml_check "sigheap -O$O $sig $size" '
O, size = int(sys.argv[1]), sys.argv[2]
d, x = profile(sys.argv[3]), profile(sys.argv[4])
CLS = ("rd_heap", "rd_global", "rd_stack", "wr_heap", "wr_global", "wr_stack")
for name in ("sig", "body"):
    s, e, t = x.totals(name), x.exact_totals(name), d.totals(name)
    ok("%s: measured at least once" % name, s["measured"] > 0 and t["measured"] > 0)
    if not (s["measured"] and t["measured"]):
        continue
    for c in CLS:
        eq("%s %s static vs by address" % (name, c), s[c], e[c])
        eq("%s %s per measured execution, default vs exact build" % (name, c),
           t[c] * s["measured"], s[c] * t["measured"])
ok("sig: the handler ran at least 20 times", d.totals("sig")["entries"] >= 20)
if O > 0 and size == "var":
    m = d.totals("sig")["measured"]
    region(d, "sig", rd_heap=8 * m, rd_global=8 * m, wr_heap=4 * m)
    m = d.totals("body")["measured"]
    region(d, "body", rd_heap=4 * m)
' $O $size "$ML_TMP/d$O$sig$size" "$ML_TMP/x$O$sig$size"
        done
    done
done
ml_finish
