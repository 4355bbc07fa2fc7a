#!/bin/bash
# Event queue benchmark (issue 14): one producer thread appends EVENTS 16-byte events (1.6 GB
# at the default) through the producer ABI (bench/lib/queue-bench.c: the inline path
# instrumented code uses) and waits until the backend has read them all; 'memlens profile -m
# stats' reads them with 1 and with 2 consumers (worker threads). 'stats' alone has its chunks
# dealt out (docs/profile.md, "Dealing"): each 1 MiB chunk is read by one of the consumers, which
# counts every event in it; at most one consumer per CPU but one reads at a time ("Turns"), so on
# a 2-core machine the second consumer only stands by. Beside it, the same bytes copied by memcpy in 1 MiB pieces between
# two 64 MiB buffers. The three runs are
# interleaved round-robin, RUNS rounds, and each figure is the median over rounds; ratios are
# taken within a round. ns/event and GB/s count the time from the first append to the moment
# the last chunk was released by every worker. Beside them, from the profile's JSON: the time
# the program waited for the workers and the time the busiest worker spent reading chunks, per
# event: what each side costs, whatever else runs on this shared machine.
# Usage: bench/queue.sh   (env: RUNS, default 7; EVENTS, default 100000000)
set -o pipefail
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
MEMLENS_BUILD=${MEMLENS_BUILD:-$ROOT/build}
RUNS=${RUNS:-7}
EVENTS=${EVENTS:-100000000}

die() {
    echo "queue.sh: $*" >&2
    exit 1
}
command -v clang-14 >/dev/null || die "'clang-14' not found: run scripts/deps.sh"
[ -x "$MEMLENS_BUILD/bin/memlens" ] || die "no '$MEMLENS_BUILD/bin/memlens': run make"
W=$(mktemp -d "${TMPDIR:-/tmp}/memlens-bench.XXXXXX") || exit 1
trap 'rm -rf "$W"' EXIT
clang-14 -O2 -I"$ROOT/src" bench/lib/queue-bench.c -o "$W/qb" -Wl,--whole-archive \
    "$MEMLENS_BUILD/lib/libmemlens-rt.a" -Wl,--no-whole-archive -lpthread -ldl ||
    die "cannot build bench/lib/queue-bench.c"

run() { # variant -> "seconds,producer wait seconds,busiest worker seconds" on stdout
    local out extra=0,0
    case $1 in
    q1 | q2)
        out=$("$MEMLENS_BUILD/bin/memlens" profile -q -m stats -w "${1#q}" -o "$W/out" -- \
            "$W/qb" queue "$EVENTS" 2>"$W/err") || die "memlens profile failed: $(cat "$W/err")"
        grep -q "; complete" "$W/err" || die "incomplete profile: $(cat "$W/err")"
        extra=$(python3 -c 'import json, sys; j = json.load(open(sys.argv[1]))
print("%f,%f" % (j["wait_seconds"], j["busy_seconds"]))' "$W"/out/*.json) ;;
    memcpy)
        out=$("$W/qb" memcpy "$EVENTS") || die "memcpy run failed" ;;
    esac
    rm -rf "$W/out"
    echo "$out" | awk -v x="$extra" '{print $3 "," x}'
}

variants=(q1 q2 memcpy)
: >"$W/times"
for r in $(seq "$RUNS"); do
    line="$r"
    for i in 0 1 2; do # rotate the order, so that no variant always runs first
        v=${variants[$(((i + r) % 3))]}
        line="$line $v=$(run "$v")"
    done
    echo "round $line" >&2
    echo "$line" >>"$W/times"
done

python3 - "$W/times" "$EVENTS" <<'PY'
import statistics, sys
ev = int(sys.argv[2])
rounds, cpu = [], []
for line in open(sys.argv[1]):
    f = line.split()
    r, c = {}, {}
    for k, v in (x.split('=') for x in f[1:]):
        t, wait, busy = map(float, v.split(','))
        r[k] = t
        c[k] = (wait, busy)
    rounds.append(r)
    cpu.append(c)
med = lambda xs: statistics.median(xs)
def row(name, key):
    t = med([r[key] for r in rounds])
    print('%-28s %8.2f ns/event %8.2f GB/s' % (name, t / ev * 1e9, 16 * ev / t / 1e9))
print('16-byte events: %d per run, %d rounds, medians' % (ev, len(rounds)))
row('queue, 1 consumer', 'q1')
row('queue, 2 consumers', 'q2')
row('memcpy, same bytes', 'memcpy')
loss = med([1 - r['q1'] / r['q2'] for r in rounds])
vs = med([r['memcpy'] / r['q1'] for r in rounds])
q1 = med([r['q1'] for r in rounds]) / ev * 1e9
print('throughput lost with 2 consumers: %.1f%% (median of per-round ratios; target <= 20%%)'
      % (100 * loss))
print('queue (1 consumer) / memcpy throughput: %.2f' % vs)
for key, w in (('q1', 1), ('q2', 2)):
    wait = med([c[key][0] / r[key] for c, r in zip(cpu, rounds)])
    prod = med([(r[key] - c[key][0]) for c, r in zip(cpu, rounds)]) / ev * 1e9
    busy = med([c[key][1] for c in cpu]) / ev * 1e9
    print('%d consumer%s: producer %.2f ns/event appending, waited %.0f%% of the time; busiest '
          'worker %.2f ns/event reading' % (w, '' if w == 1 else 's', prod, 100 * wait, busy))
print('target <= 2.7 ns/event with 1 consumer: %s' % ('met' if q1 <= 2.7 else 'missed'))
PY
