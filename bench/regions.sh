#!/bin/bash
# Region-profiling benchmark, every figure of one run side by side. Each kernel in bench/kernels/
# is built three ways at -O2: plain clang-14 (markers vanish), plain clang-14 with its markers
# timed by bench/lib/roi-clock.c (CLOCK_MONOTONIC, no memlens code: the ground-truth region
# time), and memlens-cc. The runs are interleaved round-robin (plain, timed, memlens with every
# execution measured, with MEMLENS_SAMPLE=10 and =100), RUNS rounds, and each figure is the
# median over rounds of a ratio taken within one round: on this shared host one binary's time
# varies up to 3x between runs, and a slow spell then hits both sides of a ratio, which
# hyperfine's back-to-back runs of one command at a time do not give. Then per kernel: counters and increments per execution, byte
# accuracy (memlens heap+global bytes / closed form), and the bandwidth error of memlens' raw,
# CF-corrected and calibrated region times against closed-form bytes / ground-truth time.
# Usage: bench/regions.sh [kernel...]   (env: RUNS, default 7; OMP_THREADS, default 2)
set -o pipefail
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
MEMLENS_BUILD=${MEMLENS_BUILD:-$ROOT/build}
RUNS=${RUNS:-7}
OMP_THREADS=${OMP_THREADS:-2}
RATES="1 10 100"

die() {
    echo "regions.sh: $*" >&2
    exit 1
}
for t in clang-14 python3; do
    command -v $t >/dev/null || die "'$t' not found: run scripts/deps.sh"
done
[ -x "$MEMLENS_BUILD/bin/memlens-cc" ] || die "no '$MEMLENS_BUILD/bin/memlens-cc': run make"
W=$(mktemp -d "${TMPDIR:-/tmp}/memlens-bench.XXXXXX") || exit 1
trap 'rm -rf "$W"' EXIT
export OMP_NUM_THREADS=$OMP_THREADS

# name | arguments | extra compiler flags | small arguments for instruction counts (the last one
# is doubled for a second run, see INSTR below). Sizes give ~0.1-0.5 s uninstrumented on a 2-core
# VM. The last four are hot: a region per vertex (tens of millions of executions per second), per
# hop of a pointer chase, per sparse row (millions per second), and a small callee called tens of
# millions of times per second from a region.
KERNELS='stream|4000000 60||100000 2
strided|8000000 16 200||100000 16 4
chase|2000000 3000000||100000 100000
spmv|200000 16 60||20000 16 2
pagerank|400000 16 30||20000 16 2
parser|10000000 4||200000 1
smallfn|1000000 30||20000 2
omp|4000000 80|-fopenmp|100000 2
vertex|200000 3 150||20000 3 5
hop|400000 4000000||100000 100000
row|100000 64 20||10000 64 2
probe|65536 300||65536 2'
HOT=" vertex hop row probe "
# INSTR=0 skips the instruction counts (valgrind's callgrind, about a minute).
INSTR=${INSTR:-1}
command -v valgrind >/dev/null || INSTR=0

want=" $* "
rows=()
while IFS='|' read -r name args flags small; do
    [ $# -gt 0 ] && [[ $want != *" $name "* ]] && continue
    src=bench/kernels/$name.c
    echo "== $name ($args)" >&2
    "$MEMLENS_BUILD/bin/memlens-cc" -O2 $flags "$src" -o "$W/$name.ml" ||
        die "memlens-cc failed on '$src'"
    clang-14 -O2 $flags -I"$ROOT/include" "$src" -o "$W/$name.plain" ||
        die "clang-14 failed on '$src'"
    clang-14 -O2 $flags -D__MEMLENS__ -I"$ROOT/include" "$src" bench/lib/roi-clock.c \
        -lpthread -o "$W/$name.timed" || die "clang-14 failed on '$src' with the region clock"
    "$W/$name.plain" $args >"$W/$name.plain.out" || die "plain '$name' failed"
    for v in ml timed; do
        MEMLENS_OUT=$W/junk "$W/$name.$v" $args >"$W/$name.$v.out" || die "'$name.$v' failed"
        cmp -s "$W/$name.$v.out" "$W/$name.plain.out" ||
            die "'$name.$v' prints a different result than plain '$name'"
    done
    rows+=("$name|$args|$small")
done <<<"$KERNELS"
[ ${#rows[@]} -gt 0 ] || die "no kernel matches '$*'"

MEMLENS_BUILD=$MEMLENS_BUILD INSTR=$INSTR HOT="$HOT" python3 - "$W" "$ROOT/tests/lib" "$RUNS" "$RATES" \
    "${rows[@]}" <<'PY'
import csv, math, os, re, statistics, subprocess, sys, time
W, runs, rates = sys.argv[1], int(sys.argv[3]), [int(x) for x in sys.argv[4].split()]
MEMLENS = os.environ['MEMLENS_BUILD'] + '/bin/memlens'
kernels = [row.split('|')[:2] for row in sys.argv[5:]]
small = {row.split('|')[0]: row.split('|')[2] for row in sys.argv[5:]}
HOT = os.environ['HOT'].split()
sys.path.insert(0, sys.argv[2])
import mlp

def strided(n, s, reps):
    return sum((n - r % s + s - 1) // s for r in range(reps)) * 8

# Closed-form heap + global bytes (read + written) of each kernel's region, from its arguments.
EXPECTED = {
    'stream': lambda n, reps: 24 * n * reps,
    'strided': strided,
    'chase': lambda n, steps: 8 * steps,
    # rowptr[0] does not change: the optimiser loads it once, before the loop and the region
    'spmv': lambda rows, k, reps: reps * (rows * 8 + rows * k * 20 + rows * 8),
    'pagerank': lambda v, k, it: it * (v * 8 + v * k * 12 + v * 28),
    'parser': lambda length, reps: 2 * length * reps,
    'smallfn': lambda n, reps: 32 * n * reps,
    'omp': lambda n, reps: 24 * n * reps,
    'vertex': lambda nv, deg, iters: iters * nv * (16 + 12 * deg),
    'hop': lambda n, steps: 16 * steps,
    # rowptr[r] is the previous row's rowptr[r + 1], which the optimiser keeps in a register
    'row': lambda rows, k, reps: reps * rows * (16 + 20 * k),
    'probe': lambda n, reps: 36 * n * reps,
}
med = statistics.median

def run(argv, env):
    t0 = time.perf_counter()
    subprocess.run(argv, env=dict(os.environ, **env), stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0

# Round-robin timing; every memlens run also leaves the profile its figures come from.
wall = {}
for name, args in kernels:
    print('== timing %s: %d rounds' % (name, runs), file=sys.stderr)
    for r in range(1, runs + 1):
        argv = lambda v: ['%s/%s.%s' % (W, name, v)] + args.split()
        wall.setdefault((name, 'plain'), []).append(run(argv('plain'), {}))
        if name not in HOT:
            run(argv('timed'), {'BENCH_ROI_OUT': '%s/%s.truth.%d' % (W, name, r)})
        for rate in rates:
            d = '%s/prof.%s.%d.%d' % (W, name, rate, r)
            os.makedirs(d)
            wall.setdefault((name, rate), []).append(
                run(argv('ml'), {'MEMLENS_SAMPLE': str(rate), 'MEMLENS_OUT': d}))
            with open(d + '.csv', 'w') as f:
                subprocess.run([MEMLENS, 'report', '--csv', '--totals', '--region', name, d],
                               stdout=f, check=True)
gm = lambda xs: math.exp(sum(math.log(max(x, 1e-6)) for x in xs) / len(xs)) if xs else float("nan")

def report_rows(name, rate):
    out = []
    for r in range(1, runs + 1):
        out.append(next(csv.DictReader(open('%s/prof.%s.%d.%d.csv' % (W, name, rate, r)))))
    return out

def truth_seconds(name, r):
    for line in open('%s/%s.truth.%d' % (W, name, r)):
        n, secs, _ = line.split()
        if n == name:
            return float(secs)
    raise SystemExit('regions.sh: no ground-truth time of region %s' % name)

def bw_errors(name, rate, want):
    """Median over rounds of the relative bandwidth error of raw, CF and calibrated times, each
    round against the ground truth of the same round; None when no round measured anything."""
    errs = {'raw': [], 'cf': [], 'cal': []}
    measured = []
    for r, row in enumerate(report_rows(name, rate), 1):
        measured.append(int(row['measured']))
        if not int(row['measured']):
            continue
        truth = want / truth_seconds(name, r)
        b = sum(int(row[k]) for k in ('rd_heap', 'rd_global', 'wr_heap', 'wr_global'))
        for k, col in (('raw', 'seconds'), ('cf', 'cf_seconds'), ('cal', 'cal_seconds')):
            errs[k].append(b / float(row[col]) / truth - 1)
    return {k: med(v) if v else None for k, v in errs.items()}, med(measured)

def pct(e):
    return '%+6.1f%%' % (100 * e) if e is not None else '      -'

def instructions(argv, env):
    """Instructions a run executes, counted by valgrind's callgrind (0 when it fails)."""
    r = subprocess.run(['valgrind', '--tool=callgrind', '--callgrind-out-file=/dev/null'] + argv,
                       env=dict(os.environ, **env), stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True)
    m = re.search(r'Collected : (\d+)', r.stderr)
    return int(m.group(1)) if m else 0

def added_per_exec(name):
    """Instructions memlens adds per region execution at each rate: the small arguments, then
    the same with the last one doubled; the difference of the two runs cancels start-up costs.
    None when the region runs as often in both (chase runs it once)."""
    lo = small[name].split()
    hi = lo[:-1] + [str(2 * int(lo[-1]))]
    argv = lambda v, a: ['%s/%s.%s' % (W, name, v)] + a
    plain = instructions(argv('plain', hi), {}) - instructions(argv('plain', lo), {})
    out = {}
    for rate in rates:
        d, e = [], []
        for a in (lo, hi):
            prof = '%s/instr.%s.%d.%d' % (W, name, rate, len(d))
            os.makedirs(prof)
            d.append(instructions(argv('ml', a), {'MEMLENS_SAMPLE': str(rate), 'MEMLENS_OUT': prof}))
            e.append(mlp.load_dir(prof)[0].totals(name)['entries'])
        out[rate] = (d[1] - d[0] - plain) / (e[1] - e[0]) if e[1] > e[0] else None
    return out

print('per kernel: region executions per second (uninstrumented), instructions memlens adds per')
print('execution (callgrind) and wall-time overhead (median over rounds of memlens / plain), at')
print('100%, 10% and 1% of executions measured; counters, increments per execution, byte accuracy')
print('%-9s %9s %8s | %6s %6s %6s | %6s %6s %6s | %8s %9s %9s' % (
    'kernel', 'plain(s)', 'exec/s', 'i100%', 'i10%', 'i1%', '100%', '10%', '1%', 'counters',
    'incr/exec', 'bytes'))
ovh = {rate: [] for rate in rates}
acc = []
bw = {}
for name, args in kernels:
    plain = med(wall[(name, 'plain')])
    for rate in rates:
        ovh[rate].append(med(m / p for m, p in zip(wall[(name, rate)], wall[(name, 'plain')])))
    p = mlp.load_dir('%s/prof.%s.1.1' % (W, name))[0]
    t = p.totals(name)
    got = t['rd_heap'] + t['rd_global'] + t['wr_heap'] + t['wr_global']
    want = EXPECTED[name](*map(int, args.split()))
    acc.append((got, want))
    rid = p.region_id(name)
    counters = sum(1 for regs in p.unit_regions if rid in regs)
    incr = t['incr'] / t['entries'] if t['entries'] else float('nan')
    ins = added_per_exec(name) if os.environ['INSTR'] == '1' else {}
    fmt = lambda v: '%6.1f' % v if v is not None else '     -'
    print('%-9s %9.3f %8.3g | %s %s %s | %5.2fx %5.2fx %5.2fx | %8d %9.4g %9.6f' % (
        name, plain, t['entries'] / plain, fmt(ins.get(1)), fmt(ins.get(10)), fmt(ins.get(100)),
        ovh[1][-1], ovh[10][-1], ovh[100][-1], counters, incr, got / want))
    if name not in HOT:
        truth = want / med(truth_seconds(name, r) for r in range(1, runs + 1))
        bw[name] = (truth, {rate: bw_errors(name, rate, want) for rate in rates})
print('exec/s: region executions / plain wall time (start-up included: a lower bound)')
print('geomean overhead over %d kernels: %.2fx at 100%% (target <= 1.20x; worst %.2fx, target '
      '<= 1.5x), %.2fx at 10%% (worst %.2fx), %.2fx at 1%% (target <= 1.03x; worst %.2fx, '
      'target <= 1.10x)' % (len(kernels), gm(ovh[1]), max(ovh[1]), gm(ovh[10]), max(ovh[10]),
                           gm(ovh[100]), max(ovh[100])))
off = ['%s %+d bytes' % (row.split('|')[0], g - w) for row, (g, w) in zip(sys.argv[5:], acc)
       if g != w]
print('byte accuracy: %s' % ('exact (integer equality) on every kernel' if not off
                             else 'differs: ' + ', '.join(off)))
print()
print('bandwidth error vs closed-form bytes / uninstrumented region time of the same round (not')
print('for the hot kernels, whose executions are too short for the clock of the timed build)')
print('(median of %d rounds; truth: median bandwidth)' % runs)
print('%-9s %9s %8s %8s %8s | %5s %8s %8s | %5s %8s %8s' % (
    'kernel', 'truth', 'raw', 'CF', 'cal', 'm10%', 'raw', 'cal', 'm1%', 'raw', 'cal'))
gerr = {}
for name, (truth, by_rate) in bw.items():
    (e1, _), (e10, m10), (e100, m100) = by_rate[1], by_rate[10], by_rate[100]
    print('%-9s %6.2fGB/s %s %s %s | %5g %s %s | %5g %s %s' % (
        name, truth / 1e9, pct(e1['raw']), pct(e1['cf']), pct(e1['cal']), m10,
        pct(e10['raw']), pct(e10['cal']), m100, pct(e100['raw']), pct(e100['cal'])))
    for rate, (e, _) in by_rate.items():
        for k, v in e.items():
            if v is not None:
                gerr.setdefault((rate, k), []).append(abs(v))
print('m10%, m1%: measured executions per run (median) at MEMLENS_SAMPLE=10 and 100')
for rate in rates:
    print('geomean |bandwidth error| at %3d%%: %s (target <= 5%%)' % (100 // rate, ', '.join(
        '%s %.1f%% over %d kernels' % (k, 100 * gm(gerr[(rate, k)]), len(gerr[(rate, k)]))
        for k in ('raw', 'cf', 'cal') if (rate, k) in gerr)))
PY
