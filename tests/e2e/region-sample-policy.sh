#!/bin/bash
# Sampling (MEMLENS_SAMPLE): one in N executions per region and thread is measured, nested
# executions follow the enclosing one, extrapolated figures in the report, the random phase
# (no "first execution" bias), the time rule for sparse regions and its cost bound, bad values. See
# docs/regions.md, "Sampling".
. "$(dirname "$0")/region-lib.bash"
ml_setup
ML=$MEMLENS_BUILD/bin/memlens

ml_build sample 2 "$ML_KERNELS/sample-policy.c" -lpthread || ml_finish

# Frequent regions on two threads, 1 in 10: exactly 100 of 1000 by the count rule, plus one from
# the time rule per 10 ms the machine stalls the thread between two of them: at most the run's
# wall time / 10 ms (each needs 10 ms since the previous measured one), so the bound holds on a
# machine of any speed and load.
MEMLENS_SAMPLE=10 ml_run sample "$ML_TMP/freq" frequent 1000 &&
    "$ML" report --csv "$ML_TMP/freq" >"$ML_TMP/freq.csv" &&
    ml_check "sample frequent" '
p = profile(sys.argv[1])
eq("header sample", p.sample, 10)
K = 64
for t in (0, 1):
    o, i = p.totals("outer", t), p.totals("inner", t)
    eq("thread %d outer executions" % t, o["entries"], 1000)
    eq("thread %d inner executions" % t, i["entries"], 1000)
    extra = p.wall_ns // 10**7
    ok("thread %d outer measured %d in [100, 100 + %d]" % (t, o["measured"], extra),
       100 <= o["measured"] <= 100 + extra)
    # inner runs only inside outer: measured exactly when the enclosing outer is.
    eq("thread %d inner measured" % t, i["measured"], o["measured"])
    ok("thread %d inner time within outer time" % t,
       0 < p.ticks("inner", t) <= p.ticks("outer", t))
    # Counts cover the measured executions only: unmeasured ones ran the plain copy.
    eq("thread %d outer bytes" % t, o["rd_heap"], 8 * K * o["measured"])
    eq("thread %d inner bytes" % t, i["wr_heap"], 8 * i["measured"])
# The report scales measured figures by executions / measured.
import csv
rows = {(r["region"], r["thread"]): r for r in csv.DictReader(open(sys.argv[2]))}
for (reg, th), r in rows.items():
    tot = p.totals(reg, None if th == "total" else int(th))
    if reg not in ("outer", "inner"):
        continue
    eq("%s/%s measured column" % (reg, th), int(r["measured"]), tot["measured"])
    scale = tot["entries"] / tot["measured"]
    ok("%s/%s scale %s" % (reg, th, r["scale"]), abs(float(r["scale"]) - scale) < 1e-6)
    rd = tot["bytes_read"]
    ok("%s/%s est_bytes_read %s = %d x %.4f" % (reg, th, r["est_bytes_read"], rd, scale),
       abs(int(r["est_bytes_read"]) - rd * scale) <= 1)
' "$ML_TMP/freq" "$ML_TMP/freq.csv"

# Not measuring the first execution: over 20 runs of a region executed 3 times at 1 in 1000,
# a random phase measures about 0.06 executions in all; "first execution always" would give 20.
# A stall of 10 ms between two executions lets the time rule measure one: a run may have at most
# its wall time / 10 ms of those (normally none: a run lasts about a millisecond).
total=0 stalls=0
for run in $(seq 20); do
    rm -rf "$ML_TMP/rare" && mkdir -p "$ML_TMP/rare"
    MEMLENS_OUT=$ML_TMP/rare MEMLENS_SAMPLE=1000 "$ML_TMP/sample.ml" rare >/dev/null ||
        ml_error "rare run $run failed"
    m=$(python3 -c '
import sys; sys.path.insert(0, sys.argv[1]); import mlp
p = mlp.load_dir(sys.argv[2])[0]; t = p.totals("rare")
assert t["entries"] == 3, t
print(t["measured"], p.wall_ns // 10**7)' "$ML_ROOT/tests/lib" "$ML_TMP/rare") || { ml_error "rare profile"; break; }
    total=$((total + ${m% *}))
    stalls=$((stalls + ${m#* }))
done
[ "$total" -le $((3 + stalls)) ] ||
    ml_error "rare region measured $total times in 20 runs (want <= 3 + $stalls for stalls)"

# The time rule. Three short executions 300 ms apart at 1 in 10: the first is measured with
# probability 1/10, the next two because 300 ms exceed 9 times their duration. Five 30 ms
# executions back to back at 1 in 1000: never 999 x 30 ms apart, so only the count rule.
MEMLENS_SAMPLE=10 ml_run sample "$ML_TMP/sparse" sparse &&
    ml_check "sample sparse" '
t = profile(sys.argv[1]).totals("sparse")
eq("executions", t["entries"], 3)
ok("measured %d in [2, 3]" % t["measured"], 2 <= t["measured"] <= 3)
' "$ML_TMP/sparse"
MEMLENS_SAMPLE=1000 ml_run sample "$ML_TMP/dense" dense &&
    ml_check "sample dense" '
t = profile(sys.argv[1]).totals("dense")
eq("executions", t["entries"], 5)
ok("measured %d <= 1" % t["measured"], t["measured"] <= 1)
' "$ML_TMP/dense"

# A bad value: one line, then every execution is measured.
rm -rf "$ML_TMP/bad" && mkdir -p "$ML_TMP/bad"
MEMLENS_OUT=$ML_TMP/bad MEMLENS_SAMPLE=1x "$ML_TMP/sample.ml" frequent 50 >/dev/null \
    2>"$ML_TMP/bad.err" || ml_error "bad MEMLENS_SAMPLE run failed"
grep -qx "memlens: ignoring MEMLENS_SAMPLE='1x': expected a positive integer" "$ML_TMP/bad.err" ||
    ml_error "no message for MEMLENS_SAMPLE=1x: $(cat "$ML_TMP/bad.err")"
ml_check "sample bad value" '
p = profile(sys.argv[1])
eq("header sample", p.sample, 1)
t = p.totals("outer")
eq("measured", t["measured"], t["entries"])
' "$ML_TMP/bad"

# memlens run --sample sets MEMLENS_SAMPLE.
rm -rf "$ML_TMP/run"
"$ML" run -q -o "$ML_TMP/run" --sample 5 -- "$ML_TMP/sample.ml" frequent 100 >/dev/null ||
    ml_error "memlens run --sample failed"
ml_check "run --sample" '
p = profile(sys.argv[1])
eq("header sample", p.sample, 5)
m = p.totals("outer", 0)["measured"]
extra = p.wall_ns // 10**7
ok("outer measured %d in [20, 20 + %d]" % (m, extra), 20 <= m <= 20 + extra)
' "$ML_TMP/run"
ml_finish
