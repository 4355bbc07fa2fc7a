#!/bin/bash
# Memory-trace benchmark, every figure of issue 12 from one run. Each kernel of bench/kernels/ is
# built twice at -O2: plain clang-14, and memlens-cc --ml-trace. Per round, interleaved: plain,
# the full trace written compressed to disk, --collapse, and tracing built in but off
# (MEMLENS_TRACE=start=off); each figure is the median over rounds of a ratio taken within one
# round (the host is shared and noisy; pairing cancels most of it). From the full traces:
# records per second, bytes per record raw (the token stream before zstd) and compressed (the
# whole file), the writer thread's CPU time and the producer's waits for it. Then, with
# valgrind, instructions the traced code executes per access beyond the plain code's (lackey
# counts guest instructions of the program's own functions, plain vs traced, same input).
# Usage: bench/trace.sh [kernel...]   (env: RUNS, default 5; OMP_THREADS, default 2)
set -o pipefail
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
MEMLENS_BUILD=${MEMLENS_BUILD:-$ROOT/build}
RUNS=${RUNS:-5}
OMP_THREADS=${OMP_THREADS:-2}

die() {
    echo "trace.sh: $*" >&2
    exit 1
}
for t in clang-14 python3; do
    command -v $t >/dev/null || die "'$t' not found: run scripts/deps.sh"
done
[ -x "$MEMLENS_BUILD/bin/memlens-cc" ] || die "no '$MEMLENS_BUILD/bin/memlens-cc': run make"
W=$(mktemp -d "${TMPDIR:-/tmp}/memlens-bench.XXXXXX") || exit 1
trap 'rm -rf "$W"' EXIT
export OMP_NUM_THREADS=$OMP_THREADS

# name | arguments | extra compiler flags | arguments for the instruction count (small)
KERNELS='stream|4000000 60||20000 3
strided|8000000 16 200||80000 16 3
chase|2000000 3000000||20000 30000
spmv|200000 16 60||3000 8 3
pagerank|400000 16 30||3000 8 3
parser|10000000 4||30000 2
smallfn|1000000 30||2000 5
omp|4000000 80|-fopenmp|20000 3'

want=" $* "
rows=()
while IFS='|' read -r name args flags small; do
    [ $# -gt 0 ] && [[ $want != *" $name "* ]] && continue
    src=bench/kernels/$name.c
    echo "== $name ($args)" >&2
    "$MEMLENS_BUILD/bin/memlens-cc" --ml-trace -O2 $flags "$src" -o "$W/$name.ml" ||
        die "memlens-cc --ml-trace failed on '$src'"
    clang-14 -O2 $flags -I"$ROOT/include" "$src" -o "$W/$name.plain" ||
        die "clang-14 failed on '$src'"
    "$W/$name.plain" $args >"$W/$name.plain.out" || die "plain '$name' failed"
    MEMLENS_OUT=$W/check "$W/$name.ml" $args >"$W/$name.ml.out" || die "'$name.ml' failed"
    rm -rf "$W/check"
    cmp -s "$W/$name.ml.out" "$W/$name.plain.out" ||
        die "'$name.ml' prints a different result than plain '$name'"
    rows+=("$name|$args|$small")
done <<<"$KERNELS"
[ ${#rows[@]} -gt 0 ] || die "no kernel matches '$*'"

MEMLENS_BUILD=$MEMLENS_BUILD python3 - "$W" "$RUNS" "${rows[@]}" <<'PY'
import glob, json, math, os, shutil, statistics, subprocess, sys, time
W, runs = sys.argv[1], int(sys.argv[2])
kernels = [row.split('|') for row in sys.argv[3:]]
MEMLENS = os.environ['MEMLENS_BUILD'] + '/bin/memlens'
med = statistics.median
gm = lambda xs: math.exp(sum(math.log(max(x, 1e-9)) for x in xs) / len(xs)) if xs else float('nan')

def run(argv, env):
    t0 = time.perf_counter()
    subprocess.run(argv, env=dict(os.environ, **env), stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0

VARIANTS = [('full', {}), ('collapse', {'MEMLENS_TRACE': 'collapse'}),
            ('off', {'MEMLENS_TRACE': 'start=off'})]
wall, stats = {}, {}
for name, args, _ in kernels:
    print('== timing %s: %d rounds' % (name, runs), file=sys.stderr)
    for r in range(runs):
        argv = lambda v: ['%s/%s.%s' % (W, name, v)] + args.split()
        wall.setdefault((name, 'plain'), []).append(run(argv('plain'), {}))
        for v, env in VARIANTS:
            d = '%s/out.%s.%s' % (W, name, v)
            shutil.rmtree(d, ignore_errors=True)
            wall.setdefault((name, v), []).append(run(argv('ml'), dict(env, MEMLENS_OUT=d)))
            if v != 'off':
                s = json.loads(subprocess.run([MEMLENS, 'analyze', '-q', '--json', d],
                                              check=True, stdout=subprocess.PIPE,
                                              text=True).stdout)['traces']
                stats.setdefault((name, v), []).append(s)
            shutil.rmtree(d, ignore_errors=True)

def total(traces, key):
    return sum(t[key] for t in traces)

print('trace overhead (median over %d rounds of traced / plain wall time, same round), -O2' % runs)
print('%-9s %8s %8s %8s %8s %9s %8s %8s %8s %7s %7s' % (
    'kernel', 'plain(s)', 'full', 'collapse', 'off', 'Mrec/s', 'B/rec', 'B/rec', 'words',
    'writer', 'waits'))
print('%-9s %8s %8s %8s %8s %9s %8s %8s %8s %7s %7s' % (
    '', '', '', '', '', '(full)', 'raw', 'zstd', '/rec', 'cpu', '/run'))
ratio = {v: [] for v, _ in VARIANTS}
raw, comp = [], []
for name, args, _ in kernels:
    p = wall[(name, 'plain')]
    for v, _ in VARIANTS:
        ratio[v].append(med(m / q for m, q in zip(wall[(name, v)], p)))
    full = stats[(name, 'full')]
    recs = med(total(s, 'records') for s in full)
    rps = med(total(s, 'records') / w for s, w in zip(full, wall[(name, 'full')]))
    braw = med(total(s, 'raw_bytes') / max(total(s, 'records'), 1) for s in full)
    bcomp = med(total(s, 'file_bytes') / max(total(s, 'records'), 1) for s in full)
    words = med(total(s, 'buffer_words') / max(total(s, 'records'), 1) for s in full)
    wcpu = med(total(s, 'writer_seconds') / w for s, w in zip(full, wall[(name, 'full')]))
    waits = med(total(s, 'waits') for s in full)
    raw.append(braw)
    comp.append(bcomp)
    print('%-9s %8.3f %7.2fx %7.2fx %7.2fx %9.1f %8.3f %8.3f %8.2f %6.0f%% %7d' % (
        name, med(p), ratio['full'][-1], ratio['collapse'][-1], ratio['off'][-1], rps / 1e6,
        braw, bcomp, words, 100 * wcpu, waits))
print('writer cpu: the writer thread\'s CPU time / wall time of the full run; waits: times the')
print('program waited for a free buffer (the writer was behind); words/rec: 8-byte words the')
print('instrumented code appended per record (segment headers included)')
print('geomean: full %.2fx (target <= 5x, worst %.2fx), collapse %.2fx, built-in-but-off %.3fx '
      '(target <= 1.10x)' % (gm(ratio['full']), max(ratio['full']), gm(ratio['collapse']),
                             gm(ratio['off'])))
print('geomean bytes per record: raw %.3f (target <= 4), compressed %.3f (target <= 1)' % (
    gm(raw), gm(comp)))

# Instructions added per access: lackey counts the guest instructions of the program's own
# functions (plain: main and the kernel's functions; traced: the same, both copies and the
# inline appends; the runtime's flush and writer are not counted) and the accesses.
if shutil.which('valgrind') is None:
    print('instructions per access: skipped (no valgrind)')
    sys.exit(0)

def lackey(binary, args, fns):
    log = binary + '.lk'
    env = dict(os.environ, MEMLENS_OUT=W + '/lk', OMP_NUM_THREADS='1')
    subprocess.run(['valgrind', '--tool=lackey', '--trace-mem=yes', '--log-file=' + log, binary]
                   + args.split(), env=env, stdout=subprocess.DEVNULL, check=True)
    spans = []
    for line in subprocess.run(['nm', '-S', '--defined-only', binary], check=True,
                               stdout=subprocess.PIPE, text=True).stdout.splitlines():
        f = line.split()
        if len(f) == 4 and f[2] in 'tT' and f[3].split('.')[0] in fns:
            spans.append((int(f[0], 16), int(f[0], 16) + int(f[1], 16)))
    spans.sort()
    ins = acc = 0
    mine = False
    import bisect
    starts = [s for s, _ in spans]
    with open(log) as f:
        for line in f:
            if line[0] == 'I':
                a = int(line[3:line.index(',')], 16)
                i = bisect.bisect_right(starts, a) - 1
                mine = i >= 0 and a < spans[i][1]
                ins += mine
            elif mine and line[0] == ' ' and line[1] in 'LSM':
                acc += 1 + (line[1] == 'M')
    os.remove(log)
    shutil.rmtree(W + '/lk', ignore_errors=True)
    return ins, acc

print()
print('instructions added per access (lackey, small inputs, OMP_NUM_THREADS=1)')
print('%-9s %12s %12s %12s %10s' % ('kernel', 'plain instr', 'traced instr', 'accesses',
                                    'added/acc'))
per = []
for name, args, small in kernels:
    src = 'bench/kernels/%s.c' % name
    fns = set()
    obj = W + '/' + name + '.o'
    flags = ['-O2', '-Iinclude', '-no-pie'] + (['-fopenmp'] if name == 'omp' else [])
    subprocess.run(['clang-14', '-c', src, '-o', obj] + flags, check=True)
    # Fixed addresses, so that lackey's instruction addresses match the symbol table.
    subprocess.run(['clang-14', src, '-o', '%s/%s.np' % (W, name)] + flags, check=True)
    subprocess.run([os.environ['MEMLENS_BUILD'] + '/bin/memlens-cc', '--ml-trace', src, '-o',
                    '%s/%s.mlnp' % (W, name)] + flags, check=True)
    for line in subprocess.run(['nm', '--defined-only', obj], check=True, stdout=subprocess.PIPE,
                               text=True).stdout.splitlines():
        f = line.split()
        if len(f) == 3 and f[1] in 'tT':
            fns.add(f[2].split('.')[0])
    pi, pa = lackey('%s/%s.np' % (W, name), small, fns)
    ti, _ = lackey('%s/%s.mlnp' % (W, name), small, fns)
    per.append((ti - pi) / max(pa, 1))
    print('%-9s %12d %12d %12d %10.2f' % (name, pi, ti, pa, per[-1]))
print('median added instructions per access: %.2f' % med(per))
PY
