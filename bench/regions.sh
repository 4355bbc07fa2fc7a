#!/bin/bash
# Region-profiling benchmark: builds each kernel in bench/kernels/ with memlens-cc and with plain
# clang-14 at -O2, times both with hyperfine, and prints per kernel the overhead, the byte
# accuracy (memlens heap+global bytes / closed-form bytes), the counters per region and the
# counter increments per region execution, then the geometric-mean overhead.
# Usage: bench/regions.sh [kernel...]   (env: RUNS, default 5; OMP_THREADS, default 2)
set -o pipefail
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
MEMLENS_BUILD=${MEMLENS_BUILD:-$ROOT/build}
RUNS=${RUNS:-5}
OMP_THREADS=${OMP_THREADS:-2}

die() {
    echo "regions.sh: $*" >&2
    exit 1
}
for t in hyperfine clang-14 python3; do
    command -v $t >/dev/null || die "'$t' not found: run scripts/deps.sh"
done
[ -x "$MEMLENS_BUILD/bin/memlens-cc" ] || die "no '$MEMLENS_BUILD/bin/memlens-cc': run make"
W=$(mktemp -d "${TMPDIR:-/tmp}/memlens-bench.XXXXXX") || exit 1
trap 'rm -rf "$W"' EXIT

# name | arguments | extra compiler flags. Sizes give ~0.2-0.5 s uninstrumented on a 2-core VM.
KERNELS='stream|4000000 60|
strided|8000000 16 200|
chase|2000000 3000000|
spmv|200000 16 60|
pagerank|400000 16 30|
parser|10000000 4|
smallfn|1000000 30|
omp|4000000 80|-fopenmp'

want=" $* "
rows=()
while IFS='|' read -r name args flags; do
    [ $# -gt 0 ] && [[ $want != *" $name "* ]] && continue
    src=bench/kernels/$name.c
    echo "== $name ($args)" >&2
    "$MEMLENS_BUILD/bin/memlens-cc" -O2 $flags "$src" -o "$W/$name.ml" ||
        die "memlens-cc failed on '$src'"
    clang-14 -O2 $flags -I"$ROOT/include" "$src" -o "$W/$name.plain" ||
        die "clang-14 failed on '$src'"
    export OMP_NUM_THREADS=$OMP_THREADS
    mkdir -p "$W/prof.$name" "$W/hf"
    MEMLENS_OUT=$W/prof.$name "$W/$name.ml" $args >"$W/$name.ml.out" ||
        die "instrumented '$name' failed"
    "$W/$name.plain" $args >"$W/$name.plain.out" || die "plain '$name' failed"
    cmp -s "$W/$name.ml.out" "$W/$name.plain.out" ||
        die "'$name' prints different results with memlens"
    hyperfine -N --style none --warmup 1 --runs "$RUNS" --export-json "$W/$name.json" \
        -n plain "$W/$name.plain $args" \
        -n memlens "env MEMLENS_OUT=$W/hf $W/$name.ml $args" >&2 ||
        die "hyperfine failed on '$name'"
    rows+=("$name|$args")
done <<<"$KERNELS"
[ ${#rows[@]} -gt 0 ] || die "no kernel matches '$*'"

python3 - "$W" "$ROOT/tests/lib" "${rows[@]}" <<'PY'
import json, math, sys
W = sys.argv[1]
sys.path.insert(0, sys.argv[2])
import mlp

def strided(n, s, reps):
    return sum((n - r % s + s - 1) // s for r in range(reps)) * 8

# Closed-form heap + global bytes (read + written) of each kernel's region, from its arguments.
EXPECTED = {
    'stream': lambda n, reps: 24 * n * reps,
    'strided': strided,
    'chase': lambda n, steps: 8 * steps,
    'spmv': lambda rows, k, reps: reps * ((rows + 1) * 8 + rows * k * 20 + rows * 8),
    'pagerank': lambda v, k, it: it * ((v + 1) * 8 + v * k * 12 + v * 28),
    'parser': lambda length, reps: 2 * length * reps,
    'smallfn': lambda n, reps: 32 * n * reps,
    'omp': lambda n, reps: 24 * n * reps,
}

print('%-9s %10s %10s %8s %10s %9s %10s' % ('kernel', 'plain(s)', 'memlens(s)', 'overhead',
                                          'bytes', 'counters', 'incr/exec'))
logs = []
for row in sys.argv[3:]:
    name, args = row.split('|')
    res = {r['command']: r for r in json.load(open('%s/%s.json' % (W, name)))['results']}
    plain, inst = res['plain']['median'], res['memlens']['median']
    p = mlp.load_dir('%s/prof.%s' % (W, name))[0]
    t = p.totals(name)
    got = t['rd_heap'] + t['rd_global'] + t['wr_heap'] + t['wr_global']
    want = EXPECTED[name](*map(int, args.split()))
    rid = p.region_id(name)
    counters = sum(1 for regs in p.unit_regions if rid in regs)
    incr = t['incr'] / t['entries'] if t['entries'] else float('nan')
    logs.append(math.log(inst / plain))
    print('%-9s %10.3f %10.3f %7.2fx %10.6f %9d %10.4g' % (name, plain, inst, inst / plain,
                                                          got / want, counters, incr))
print('geomean overhead: %.2fx over %d kernels' % (math.exp(sum(logs) / len(logs)), len(logs)))
PY
