#!/bin/bash
# Thread records stay bounded (issue 10, item 9). A program creating and joining 10,000 short
# threads keeps its peak RSS near the plain program's; its profile keeps the recent threads
# apart and sums the others in one exited-threads record, with exact totals; a timeline still
# names existing records only and its last snapshot equals the totals; memlens top, watching
# records being folded and reused, counts every execution exactly once.
. "$(dirname "$0")/../lib/common.sh"
ml_require_cc
src=$ML_ROOT/tests/e2e/runtime/threads.c
$MLCC -O2 -o "$T/thr" "$src" -pthread || fail "memlens-cc failed"
clang-14 -O2 -I"$ML_ROOT/include" -o "$T/thr-plain" "$src" -pthread || fail "clang-14 failed"
total=10000 batch=4 n=100
keep=32 # ML_RT_KEEP_EXITED

# peak_rss <out-dir> <program> <args...>: runs it alone in a fresh process; prints its peak RSS
# in KiB and writes its stdout to <out-dir>.stdout.
peak_rss() {
    local out=$1
    shift
    MEMLENS_OUT=$out python3 -c '
import resource, subprocess, sys
with open(sys.argv[1] + ".stdout", "w") as f:
    subprocess.run(sys.argv[2:], stdout=f, check=True)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)' "$out" "$@"
}

plain=$(peak_rss "$T/plain" "$T/thr-plain" $total $batch $n) || fail "plain run failed"
ml=$(peak_rss "$T/out" "$T/thr" $total $batch $n) || fail "memlens run failed"
cmp -s "$T/plain.stdout" "$T/out.stdout" || fail "output differs: $(cat "$T/out.stdout")"
echo "peak RSS: plain $plain KiB, memlens $ml KiB"
# Every record kept cost 8.6 KiB before (86 MB for 10,000 threads); 16 MiB of slack holds
# whatever the runtime allocates once, and is far below what per-thread growth would take.
[ "$ml" -le $((plain + 16384)) ] || fail "peak RSS $ml KiB, plain $plain KiB: thread records grow"

check_py "$T/out" "(
len(P) == 1 and P[0].totals('t')['entries'] == $total and
P[0].totals('t')['rd_heap'] == $total * $n * 8 and P[0].totals('main')['rd_heap'] == $n * 8 and
P[0].exited is not None and len(P[0].threads) <= 2 + $keep + $batch and
sum(t['exited'] for t in P[0].threads) == P[0].exited[1] and
P[0].exited[1] + len([t for t in P[0].threads if not t['exited'] and t['entries'][P[0].region_id('t')]]) == $total and
all(P[0].totals('t', t['index'])['rd_heap'] == $n * 8 * max(1, t['exited'])
    for t in P[0].threads if t['entries'][P[0].region_id('t')]))"
# memlens report shows the exited-threads row
"$MEMLENS" report "$T"/out/*.mlp >"$T/report.txt" || fail "memlens report failed"
grep -qE "^  t +[0-9]+ +exited:[0-9]+ +[0-9.]+K? " "$T/report.txt" ||
    fail "no exited-threads row in the report: $(head -20 "$T/report.txt")"

# A timeline across folds: points of folded threads count towards the exited record.
MEMLENS_INTERVAL=1ms MEMLENS_OUT=$T/tl "$T/thr" 2000 $batch $n >/dev/null || fail "timeline run failed"
"$MEMLENS" report --timeline "$T"/tl/*.mlp >/dev/null || fail "memlens report rejects the timeline"
check_py "$T/tl" "(
all(th in {t['index'] for t in P[0].threads}
    for _, pts in P[0].timeline['snaps'] for th, _ in pts) and
sum(v['entries'] for (th, r), v in P[0].timeline['snaps'][-1][1].items()
    if r == P[0].region_id('t')) == 2000 == P[0].totals('t')['entries'] and
sum(v['bytes_read'] for (th, r), v in P[0].timeline['snaps'][-1][1].items()
    if r == P[0].region_id('t')) == P[0].totals('t')['bytes_read'])"

# memlens top across folds and reuse: top's frames, from before the phase to after it, add up
# to exactly the phase's executions (100 warm-up threads came before, so records are reused).
phase=3000
mkdir -p "$T/d"
MEMLENS_OUT=$T/top "$T/thr" $phase $batch $n "$T/d" >/dev/null &
prog=$!
wait_file() { # file: waits up to 60 s
    for _ in $(seq 600); do
        [ -e "$1" ] && return 0
        sleep 0.1
    done
    kill $prog 2>/dev/null
    fail "timed out waiting for $1"
}
wait_file "$T/d/ready"
"$MEMLENS" top --csv -d 0.1 $prog >"$T/frames.csv" 2>"$T/top.err" &
top=$!
rows() { # column: the sum of a column of top's rows for region t (a row being written is skipped)
    python3 -c 'import csv, sys
s = 0
for r in csv.DictReader(open(sys.argv[1])):
    if r["region"] == "t" and (r.get("time_borrowed") or "") != "":
        s += int(r[sys.argv[2]])
print(s)' "$T/frames.csv" "$1"
}
# top has read its baseline once the CSV header is out (not when the file exists: the shell
# creates it); no clock is trusted on either side of the phase (docs/testing.md).
for _ in $(seq 600); do
    [ -s "$T/frames.csv" ] && break
    sleep 0.1
done
[ -s "$T/frames.csv" ] || { kill $prog $top 2>/dev/null; fail "top printed no header in 60 s"; }
touch "$T/d/go"
wait_file "$T/d/done"
# The phase is over; top's frames reach its executions once one of its reads follows it.
for _ in $(seq 600); do
    [ "$(rows executions)" -ge $phase ] && break
    sleep 0.1
done
touch "$T/d/stop"
wait $prog || fail "the program failed"
wait $top
ex=$(rows executions) rd=$(rows bytes_read)
check_py "$T/top" "(P[0].totals('t')['entries'] == $phase + 100 and $ex == $phase and
$rd * P[0].totals('t')['entries'] == $phase * P[0].totals('t')['bytes_read'])"
echo ok
