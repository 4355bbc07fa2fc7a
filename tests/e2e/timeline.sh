#!/bin/bash
# Timelines (MEMLENS_INTERVAL): two threads stream a known number of bytes in one region
# execution each, long enough for several snapshots (the work grows until it is, on any machine). The sampler must see the region in progress (several
# snapshots per thread with bytes strictly between 0 and the total), cumulative figures never
# decrease, no snapshot exceeds the final totals, the last one equals them, and the per-interval
# bytes of `memlens report --timeline --csv` add up to the closed form. Also: a bad interval is
# refused with one line, and a profile written from SIGTERM carries a valid timeline.
. "$(dirname "$0")/region-lib.bash"
ml_setup

M=$MEMLENS_BUILD/bin/memlens
n=262144 passes=8000
ml_build tl 2 -pthread "$ML_KERNELS/timeline.c" || ml_finish
# The sampler must see each stream thread inside its execution at least 3 times: the execution
# must outlast a few intervals on any machine, so the work doubles until it does (generous
# bound: 64 times the first try, 7 runs).
for try in $(seq 7); do
    MEMLENS_INTERVAL=50ms ml_run tl "$ML_TMP/p" $n $passes || ml_finish
    PYTHONPATH=$ML_ROOT/tests/lib python3 -c '
import sys, mlp
n, passes, p = int(sys.argv[2]), int(sys.argv[3]), mlp.load_dir(sys.argv[1])[0]
r = p.region_id("tl_stream")
inside = [sum(1 for _, pt in p.series("tl_stream", t["index"]) if pt and 0 < pt["bytes_read"] < 8 * n * passes)
          for t in p.threads if t["entries"][r]]
sys.exit(len(inside) != 2 or min(inside) < 3)' "$ML_TMP/p" $n $passes && break
    [ $try = 7 ] || passes=$((passes * 2))
done

ml_check "timeline" '
n, passes, p = int(sys.argv[1]), int(sys.argv[2]), profile(sys.argv[3])
tl = p.timeline
ok("profile has a timeline", tl is not None)
if tl is None:
    finish()
eq("requested interval", tl["requested_ns"], 50 * 10**6)
stream = 8 * n * passes
region(p, "tl_stream", rd_heap=2 * stream, wr_heap=2 * stream, entries=2)
region(p, "tl_init", wr_heap=32 * n, entries=1)
ticks = [t for t, _ in tl["snaps"]]
ok("snapshot ticks do not decrease", ticks == sorted(ticks))
workers = [t["index"] for t in p.threads if t["entries"][p.region_id("tl_stream")]]
eq("threads that ran tl_stream", len(workers), 2)
for name in p.regions:
    for t in p.threads:
        idx, tot = t["index"], p.totals(name, t["index"])
        ser = [pt for _, pt in p.series(name, idx) if pt]
        if not ser:
            continue
        key = "%s[thread %d]" % (name, idx)
        for f in ("bytes_read", "bytes_written", "instructions"):
            vals = [pt[f] for pt in ser]
            ok("%s %s never decreases: %s" % (key, f, vals), vals == sorted(vals))
            ok("%s %s never exceeds the total %d" % (key, f, tot[f if f != "instructions" else "instr"]),
               max(vals) <= tot[f if f != "instructions" else "instr"])
        last = tl["snaps"][-1][1].get((idx, p.region_id(name)))
        ok("%s in the last snapshot" % key, last is not None)
        if last:
            eq("%s last snapshot = totals" % key,
               (last["bytes_read"], last["bytes_written"], last["instructions"], last["entries"],
                last["ticks"]),
               (tot["bytes_read"], tot["bytes_written"], tot["instr"], tot["entries"],
                t["ticks"][p.region_id(name)]))
for idx in workers:
    ser = [pt for _, pt in p.series("tl_stream", idx) if pt]
    inside = [pt for pt in ser if 0 < pt["bytes_read"] < stream]
    ok("thread %d: %d snapshots inside tl_stream, want >= 3" % (idx, len(inside)), len(inside) >= 3)
    # While the execution is open it counts as one, and its ticks grow with it.
    ok("thread %d: open execution counted" % idx, all(pt["entries"] == 1 for pt in inside))
    tk = [pt["ticks"] for pt in inside]
    ok("thread %d: ticks grow while open: %s" % (idx, tk), tk == sorted(tk) and len(set(tk)) == len(tk))
' $n $passes "$ML_TMP/p"

# The report: per-interval bytes add up to the closed form, per thread and in total.
"$M" report --timeline --csv "$ML_TMP/p" >"$ML_TMP/tl.csv" || ml_error "report --timeline --csv failed"
"$M" report --timeline "$ML_TMP/p" >"$ML_TMP/tl.txt" || ml_error "report --timeline failed"
grep -q "timeline: .* snapshots, every 50.0 ms" "$ML_TMP/tl.txt" ||
    ml_error "timeline table has no heading: $(head -n 3 "$ML_TMP/tl.txt")"
ml_check "timeline csv" '
import csv
n, passes, p = int(sys.argv[1]), int(sys.argv[2]), profile(sys.argv[3])
rows = list(csv.DictReader(open(sys.argv[4])))
stream = 8 * n * passes
ns = len(p.timeline["snaps"])
sums = {}
for r in rows:
    k = (r["region"], r["thread"])
    s = sums.setdefault(k, [0, 0, 0, 0])
    s[0] += int(r["bytes_read"]); s[1] += int(r["bytes_written"]); s[2] += 1
    s[3] += int(r["executions"])
    ok("interval %s ends after it starts" % r["interval"], float(r["end_s"]) >= float(r["start_s"]))
workers = [str(t["index"]) for t in p.threads if t["entries"][p.region_id("tl_stream")]]
for w in workers:
    eq("tl_stream thread %s: sum of interval bytes (read, written), intervals, executions" % w,
       sums.get(("tl_stream", w)), [stream, stream, ns, 1])
eq("tl_stream total: sum of interval bytes", sums.get(("tl_stream", "total")), [2 * stream, 2 * stream, ns, 2])
eq("tl_init total: sum of interval bytes", sums.get(("tl_init", "total")), [0, 32 * n, ns, 1])
' $n $passes "$ML_TMP/p" "$ML_TMP/tl.csv"

# A small buffer (MEMLENS_TIMELINE_MAX) at 1 ms: the runtime halves the resolution, the whole
# span stays covered, and the figures stay exact. Halving needs more snapshots than the buffer
# holds, so the work doubles until the run lasts long enough (bound: 64 times, 7 runs).
small=4000
for try in $(seq 7); do
    rm -rf "$ML_TMP/small"
    MEMLENS_OUT=$ML_TMP/small MEMLENS_INTERVAL=1ms MEMLENS_TIMELINE_MAX=8192 "$ML_TMP/tl.ml" $n $small >/dev/null ||
        ml_error "run with a small timeline buffer failed"
    PYTHONPATH=$ML_ROOT/tests/lib python3 -c '
import sys, mlp
tl = mlp.load_dir(sys.argv[1])[0].timeline
sys.exit(tl["interval_ns"] == tl["requested_ns"])' "$ML_TMP/small" && break
    [ $try = 7 ] || small=$((small * 2))
done
"$M" report --timeline --csv "$ML_TMP/small" >"$ML_TMP/small.csv" || ml_error "report of the small timeline failed"
ml_check "timeline halved" '
import csv
n, passes, p = int(sys.argv[1]), int(sys.argv[2]), profile(sys.argv[3])
tl = p.timeline
# MEMLENS_TIMELINE_MAX bounds the snapshots; the 32-byte section header comes on top.
size = sum(16 + 48 * len(pts) for _, pts in tl["snaps"])
ok("snapshots %d bytes within the 8192 bytes allowed" % size, size <= 8192)
k = tl["interval_ns"] // tl["requested_ns"]
ok("interval %d ns is 1 ms times a power of two above 1" % tl["interval_ns"],
   tl["interval_ns"] % tl["requested_ns"] == 0 and k >= 2 and k & (k - 1) == 0)
eq("flags", tl["flags"], 0)
ticks = [t for t, _ in tl["snaps"]]
ok("snapshots cover the run: first at %d of %d ticks" % (ticks[0], ticks[-1]), ticks[0] < ticks[-1] // 4)
stream = 8 * n * passes
sums = {}
for r in csv.DictReader(open(sys.argv[4])):
    k = (r["region"], r["thread"])
    sums[k] = sums.get(k, 0) + int(r["bytes_read"]) + int(r["bytes_written"])
eq("tl_stream total bytes over the intervals", sums.get(("tl_stream", "total")), 4 * stream)
' $n $small "$ML_TMP/small" "$ML_TMP/small.csv"

# A bad interval: one line on stderr, no timeline, and --timeline says how to get one.
rm -rf "$ML_TMP/bad"
MEMLENS_OUT=$ML_TMP/bad MEMLENS_INTERVAL=fast "$ML_TMP/tl.ml" 1000 2 >/dev/null 2>"$ML_TMP/bad.err" ||
    ml_error "run with a bad interval failed"
[ "$(cat "$ML_TMP/bad.err")" = "memlens: ignoring MEMLENS_INTERVAL='fast': expected a duration from 1ms to 1h such as 100ms (units ns, us, ms, s)" ] ||
    ml_error "bad interval message: $(cat "$ML_TMP/bad.err")"
"$M" report --timeline "$ML_TMP/bad" >/dev/null 2>"$ML_TMP/bad.rep"
rc=$?
[ $rc = 128 ] && grep -q "no timeline in the profiles; run the program with MEMLENS_INTERVAL=100ms" "$ML_TMP/bad.rep" ||
    ml_error "report --timeline without a timeline: exit $rc, $(cat "$ML_TMP/bad.rep")"

# SIGTERM in the middle of the run: the profile is still complete, timeline included.
rm -rf "$ML_TMP/sig"
MEMLENS_OUT=$ML_TMP/sig MEMLENS_INTERVAL=20ms "$ML_TMP/tl.ml" $n 1000000 >/dev/null &
pid=$!
sleep 0.5
kill -TERM $pid
wait $pid
ml_check "timeline after SIGTERM" '
p = profile(sys.argv[1])
ok("written from a signal", p.flags & 1)
ok("has a timeline with snapshots", p.timeline is not None and len(p.timeline["snaps"]) >= 1)
for tick, pts in p.timeline["snaps"]:
    for (th, rg), pt in pts.items():
        tot = p.totals(p.regions[rg], th)
        ok("snapshot at %d: thread %d bytes within the totals" % (tick, th),
           pt["bytes_read"] <= tot["bytes_read"] and pt["bytes_written"] <= tot["bytes_written"])
' "$ML_TMP/sig"
"$M" report --timeline "$ML_TMP/sig" >/dev/null || ml_error "report of the signal profile failed"
ml_finish
