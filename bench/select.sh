#!/bin/bash
# Selective machine-code tracing (--trace=asm), every figure of issue 15 in one run, per bench/
# kernel and geomean: slowdown of mode=ns and of omega 0.1, 0.25, 0.5, 0.75 at C = 64 and 4096
# (paired and interleaved runs, medians of per-pair ratios against the uninstrumented build);
# static MA/AIA (weighted by block executions) beside the measured ones and the per-chunk count
# error (against the ns trace of the same input, both run without address randomisation and with
# every malloc mmap'ed so that addresses agree); and the IR-level trace (--trace) beside ns for
# loads, stores and bytes.
#
#   bench/select.sh [kernel...]     RUNS=5 (pairs per variant), KERNELS as in bench/regions.sh
#                                   (plus a fourth field: the long input), VARIANTS: lines
#                                   "<name> <asm options>", ns first, LONG=0|1|2 (below)
#
# The short inputs run 20-80 ms uninstrumented on a quiet 2-core VM, so the tracer's fixed
# start and end (writer thread, trace file, tables) weigh on their ratios; the long inputs run
# 0.3-0.6 s, closer to real traced workloads. LONG=0 (default) times the short inputs, LONG=1
# the long ones, LONG=2 both (two tables). Accuracy always uses the short inputs (it does not
# depend on the run's length).
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MEMLENS_BUILD=${MEMLENS_BUILD:-$ROOT/build}
RUNS=${RUNS:-5}
LONG=${LONG:-0}
die() {
    echo "select.sh: $*" >&2
    exit 1
}
for t in clang-14 python3 setarch llvm-mc-14; do
    command -v $t >/dev/null || die "'$t' not found: run scripts/deps.sh"
done
[ -x "$MEMLENS_BUILD/bin/memlens-cc" ] || die "no '$MEMLENS_BUILD/bin/memlens-cc': run make"
W=$(mktemp -d "${TMPDIR:-/tmp}/memlens-select.XXXXXX") || exit 1
trap 'rm -rf "$W"' EXIT
export OMP_NUM_THREADS=2

# name | arguments | extra compiler flags | long arguments (same work, about 10x the repetitions).
KERNELS=${KERNELS:-'stream|1000000 30||1000000 600
strided|2000000 16 100||2000000 16 1000
chase|500000 1000000||500000 10000000
spmv|50000 16 30||50000 16 500
pagerank|100000 16 15||100000 16 200
parser|3000000 3||3000000 20
smallfn|250000 20||250000 150
omp|1000000 40|-fopenmp|1000000 400'}
VARIANTS=${VARIANTS:-"ns mode=ns
w0.1c64 omega=0.1,chunk=64
w0.25c64 omega=0.25,chunk=64
w0.5c64 omega=0.5,chunk=64
w0.75c64 omega=0.75,chunk=64
w0.1c4096 omega=0.1,chunk=4096
w0.25c4096 omega=0.25,chunk=4096
w0.5c4096 omega=0.5,chunk=4096
w0.75c4096 omega=0.75,chunk=4096"}

want=" $* "
rows=()
while IFS='|' read -r name args flags long; do
    [ -z "$name" ] && continue
    [ $# -gt 0 ] && [[ $want != *" $name "* ]] && continue
    src=$ROOT/bench/kernels/$name.c
    echo "== $name ($args)" >&2
    clang-14 -O2 $flags -I"$ROOT/include" "$src" -o "$W/$name.plain" || die "clang-14 on '$src'"
    "$MEMLENS_BUILD/bin/memlens-cc" --ml-trace -O2 $flags "$src" -o "$W/$name.ir" ||
        die "memlens-cc --trace on '$src'"
    while read -r v opts; do
        "$MEMLENS_BUILD/bin/memlens-cc" --ml-trace=asm,$opts -O2 $flags "$src" -o "$W/$name.$v" ||
            die "memlens-cc --trace=asm,$opts on '$src'"
    done <<<"$VARIANTS"
    "$W/$name.plain" $args >"$W/$name.plain.out" || die "plain '$name' failed"
    [ "$LONG" = 0 ] || "$W/$name.plain" ${long:-$args} >"$W/$name.plain.long" ||
        die "plain '$name' failed on the long input"
    rows+=("$name|$args|${long:-$args}")
done <<<"$KERNELS"
[ ${#rows[@]} -gt 0 ] || die "no kernel matches '$*'"

MEMLENS_BUILD=$MEMLENS_BUILD python3 - "$W" "$RUNS" "$LONG" "$VARIANTS" "${rows[@]}" <<'PY'
import json, math, os, shutil, statistics, subprocess, sys, time
W, runs, long_mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
variants = [l.split()[0] for l in sys.argv[4].splitlines() if l.strip()]
kernels = [r.split('|') for r in sys.argv[5:]]
inputs = {'0': ['short'], '1': ['long'], '2': ['short', 'long']}.get(long_mode)
if not inputs:
    sys.exit('select.sh: LONG must be 0, 1 or 2')
MEMLENS = os.environ['MEMLENS_BUILD'] + '/bin/memlens'
OUT = os.path.join(W, 'traces')


def run(exe, args, env=None, fixed=False):
    shutil.rmtree(OUT, ignore_errors=True)
    e = dict(os.environ, MEMLENS_OUT=OUT, **(env or {}))
    cmd = (['setarch', '-R'] if fixed else []) + [exe] + args.split()
    t = time.perf_counter()
    p = subprocess.run(cmd, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    dt = time.perf_counter() - t
    if p.returncode:
        sys.exit('%s failed: %s' % (exe, p.stderr.decode()[-500:]))
    return dt, p.stdout


def analyze(paths, what):
    p = subprocess.run([MEMLENS, 'analyze', '--json'] + paths + [what], capture_output=True,
                       text=True)
    if p.returncode:
        sys.exit('analyze failed: ' + p.stderr)
    return p.stdout


def gm(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float('nan')


slow, acc = {}, {}
for name, args, long_args in kernels:
    base = os.path.join(W, name)
    want = open(base + '.plain.out', 'rb').read()
    # Accuracy: ns and selective traces of the same input at the same addresses.
    fixed = {'MALLOC_MMAP_THRESHOLD_': '0'}
    run(base + '.ns', args, fixed, True)
    ns = os.path.join(W, name + '.ns.mlt')
    shutil.move(os.path.join(OUT, os.listdir(OUT)[0]), ns)
    s = json.loads(analyze([ns], 'summary'))['traces'][0]['rows'][-1]
    run(base + '.ir', args)
    ir = json.loads(analyze([OUT], 'summary'))['traces'][0]['rows'][-1]
    acc[(name, 'ir')] = ir
    acc[(name, 'nsum')] = s
    for v in variants[1:]:
        # The writer thread's allocations can interleave with the program's and move its
        # memory: retry until the layouts agree (every selective address a chunk ns touched).
        for attempt in range(8):
            if attempt % 3 == 2:  # perhaps the ns run was the odd one out
                run(base + '.ns', args, fixed, True)
                shutil.move(os.path.join(OUT, os.listdir(OUT)[0]), ns)
            _, out = run(base + '.' + v, args, fixed, True)
            if out != want:
                sys.exit('%s.%s prints another result' % (name, v))
            a = json.loads(analyze([OUT, ns], 'select').splitlines()[-1])
            if a['layout'] >= 0.999:
                break
        a['attempts'] = attempt + 1
        acc[(name, v)] = a
    # Time: pairs (plain, variant), variants interleaved, RUNS rounds; medians of ratios.
    for inp in inputs:
        a, expect = (args, want) if inp == 'short' else (long_args,
                                                          open(base + '.plain.long', 'rb').read())
        ratios = {v: [] for v in variants}
        plain = []
        for r in range(runs):
            for v in variants:
                tp, _ = run(base + '.plain', a)
                tv, out = run(base + '.' + v, a)
                if out != expect:
                    sys.exit('%s.%s prints another result' % (name, v))
                ratios[v].append(tv / tp)
                plain.append(tp)
        for v in variants:
            slow[(inp, name, v)] = statistics.median(ratios[v])
        slow[(inp, name, 'plain')] = statistics.median(plain)
    print('%s done' % name, file=sys.stderr)

names = [k[0] for k in kernels]
for inp in inputs:
    print('Slowdown against the uninstrumented build, %s inputs (median of %d paired runs; '
          'plain: median seconds uninstrumented):' % (inp, runs))
    print('%-10s%8s' % ('kernel', 'plain') + ''.join('%11s' % v for v in variants))
    for n in names:
        print('%-10s%7.3fs' % (n, slow[(inp, n, 'plain')]) +
              ''.join('%10.2fx' % slow[(inp, n, v)] for v in variants))
    print('%-10s%8s' % ('geomean', '') +
          ''.join('%10.2fx' % gm([slow[(inp, n, v)] for n in names]) for v in variants))
    print()
print('Accuracy against the ns trace: static MA/AIA (block figures x executions) | measured '
      'MA/AIA | per-chunk count error')
for v in variants[1:]:
    print('%s:' % v)
    for n in names:
        a = acc[(n, v)]
        print('  %-10s static %.3f/%.3f  measured %.3f/%.3f  error %.3f  records %d for %d '
              'accesses%s' % (n, a['static_ma'], a['static_aia'], a['measured_ma'],
                              a['measured_aia'], a['chunk_error'], a['records'], a['accesses'],
                              '' if a['layout'] >= 0.999 else
                              '  (layouts disagree: %.3f)' % a['layout']))
    print('  %-10s static %.3f/%.3f  measured %.3f/%.3f  error %.3f (mean)' % (
        'geomean', gm([acc[(n, v)]['static_ma'] for n in names]),
        gm([acc[(n, v)]['static_aia'] for n in names]),
        gm([max(acc[(n, v)]['measured_ma'], 1e-9) for n in names]),
        gm([max(acc[(n, v)]['measured_aia'], 1e-9) for n in names]),
        statistics.mean([acc[(n, v)]['chunk_error'] for n in names])))
print()
print('IR-level trace (--trace) beside ns (machine level): loads, stores, bytes read, written')
for n in names:
    i, s = acc[(n, 'ir')], acc[(n, 'nsum')]
    print('  %-10s IR %10d %10d %11d %11d | ns %10d %10d %11d %11d | IR/ns loads %.3f stores %.3f'
          % (n, i['loads'], i['stores'], i['bytes_read'], i['bytes_written'], s['loads'],
             s['stores'], s['bytes_read'], s['bytes_written'], i['loads'] / max(s['loads'], 1),
             i['stores'] / max(s['stores'], 1)))
PY
