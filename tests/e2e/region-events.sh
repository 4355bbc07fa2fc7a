#!/bin/bash
# Hardware counters (MEMLENS_EVENTS): software events read around region executions match what
# the program provably did (page faults, context switches, CPU time); without a PMU, asking for
# cycles prints one line and profiling goes on; bad names are refused with one line.
. "$(dirname "$0")/region-lib.bash"
ml_setup
ML=$MEMLENS_BUILD/bin/memlens

ml_build events 2 "$ML_KERNELS/events.c" -lpthread || ml_finish

# Software events always exist in Linux perf; a kernel without perf_event cannot run this.
MEMLENS_EVENTS=page-faults,context-switches,task-clock ml_run events "$ML_TMP/sw" 2>"$ML_TMP/sw.err"
if grep -q "hardware counters unavailable" "$ML_TMP/sw.err"; then
    echo "skipped: software perf events unavailable: $(cat "$ML_TMP/sw.err")"
    exit 77
fi
[ -s "$ML_TMP/sw.err" ] && ml_error "unexpected stderr: $(cat "$ML_TMP/sw.err")"
"$ML" report --csv "$ML_TMP/sw" >"$ML_TMP/sw.csv" || ml_error "report --csv failed"
"$ML" report "$ML_TMP/sw" >"$ML_TMP/sw.txt" || ml_error "report failed"
grep -q "hardware counters, summed over measured executions" "$ML_TMP/sw.txt" ||
    ml_error "table has no counter section"
ml_check "software events" '
p = profile(sys.argv[1])
eq("event names", p.events, ["page-faults", "context-switches", "task-clock"])
f = p.event_sums("faults")
ok("faults: %d page faults for 512 fresh pages" % f["page-faults"], 512 <= f["page-faults"] <= 528)
eq("quiet: page faults on touched pages", p.event_sums("quiet")["page-faults"], 0)
s = p.event_sums("sleep")
ok("sleep: %d context switches for 5 sleeps" % s["context-switches"], s["context-switches"] >= 5)
hz = p.tsc_hz
for t in (0, 1):
    # spin burns >= 20 ms of thread CPU time per execution (3 on thread 0, 1 on thread 1) by
    # CLOCK_THREAD_CPUTIME_ID, which the kernel accounts a little differently from task-clock
    # (hence 5% slack); CPU time cannot exceed the region wall time plus the counter reads.
    n = 3 if t == 0 else 1
    cpu = p.event_sums("spin", t)["task-clock"] / 1e9
    wall = p.ticks("spin", t) / hz
    eq("spin executions on thread %d" % t, p.totals("spin", t)["entries"], n)
    ok("spin thread %d: task-clock %.4f s >= %.3f s" % (t, cpu, 0.019 * n), cpu >= 0.019 * n)
    ok("spin thread %d: task-clock %.4f s <= wall %.4f s" % (t, cpu, wall), cpu <= wall + 0.001)
import csv
rows = {(r["region"], r["thread"]): r for r in csv.DictReader(open(sys.argv[2]))}
ev = dict(kv.split("=") for kv in rows[("faults", "total")]["events"].split(";"))
eq("csv events of faults", int(ev["page-faults"]), f["page-faults"])
' "$ML_TMP/sw" "$ML_TMP/sw.csv"

# cycles: with a PMU it counts; without one (this project's CI) one line, and no events.
MEMLENS_EVENTS=cycles,task-clock ml_run events "$ML_TMP/hw" 2>"$ML_TMP/hw.err"
if [ -s "$ML_TMP/hw.err" ]; then
    [ "$(wc -l <"$ML_TMP/hw.err")" = 1 ] || ml_error "more than one line: $(cat "$ML_TMP/hw.err")"
    grep -qE "^memlens: hardware counters unavailable \(perf_event_open 'cycles': .+\): profiling without MEMLENS_EVENTS$" "$ML_TMP/hw.err" ||
        ml_error "unclear fallback message: $(cat "$ML_TMP/hw.err")"
    ml_check "no PMU" '
p = profile(sys.argv[1])
eq("events", p.events, [])
eq("faults executions", p.totals("faults")["entries"], 1)
ok("faults bytes counted", p.totals("faults")["wr_heap"] >= 512)
' "$ML_TMP/hw"
else
    ml_check "PMU" '
p = profile(sys.argv[1])
eq("events", p.events, ["cycles", "task-clock"])
ok("spin cycles", p.event_sums("spin")["cycles"] > 0)
' "$ML_TMP/hw"
fi

# Unknown names and too many events: one line each, then profiling without events.
for bad in "cycles,bogus" "cs,cs,cs,cs,cs,cs,cs,cs,cs"; do
    rm -rf "$ML_TMP/bad" && mkdir -p "$ML_TMP/bad"
    MEMLENS_OUT=$ML_TMP/bad MEMLENS_EVENTS=$bad "$ML_TMP/events.ml" >/dev/null 2>"$ML_TMP/bad.err" ||
        ml_error "MEMLENS_EVENTS=$bad: run failed"
    [ "$(wc -l <"$ML_TMP/bad.err")" = 1 ] &&
        grep -q "^memlens: ignoring MEMLENS_EVENTS='$bad': " "$ML_TMP/bad.err" ||
        ml_error "MEMLENS_EVENTS=$bad: $(cat "$ML_TMP/bad.err")"
done
grep -q "more than 8 events" "$ML_TMP/bad.err" || ml_error "too many events: $(cat "$ML_TMP/bad.err")"

# memlens run --events sets MEMLENS_EVENTS.
rm -rf "$ML_TMP/run"
"$ML" run -q -o "$ML_TMP/run" --events page-faults -- "$ML_TMP/events.ml" >/dev/null ||
    ml_error "memlens run --events failed"
ml_check "run --events" '
p = profile(sys.argv[1])
eq("events", p.events, ["page-faults"])
ok("faults", p.event_sums("faults")["page-faults"] >= 512)
' "$ML_TMP/run"
ml_finish
