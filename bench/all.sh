#!/bin/bash
# All-blocks benchmark: each kernel of bench/regions.sh (same arguments) built plain with clang-14,
# with memlens-cc (regions only) and with memlens-cc --ml-all (every function counted), at -O2,
# timed side by side with hyperfine; prints the median times, both overheads, the hottest function
# by bytes that `memlens report --top 1` names, and the geometric-mean overheads.
# Usage: bench/all.sh [kernel...]   (env: RUNS, default 5; OMP_THREADS, default 2)
set -o pipefail
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
MEMLENS_BUILD=${MEMLENS_BUILD:-$ROOT/build}
RUNS=${RUNS:-5}
OMP_THREADS=${OMP_THREADS:-2}

die() {
    echo "all.sh: $*" >&2
    exit 1
}
for t in hyperfine clang-14 python3; do
    command -v $t >/dev/null || die "'$t' not found: run scripts/deps.sh"
done
[ -x "$MEMLENS_BUILD/bin/memlens-cc" ] || die "no '$MEMLENS_BUILD/bin/memlens-cc': run make"
# One kernel table for both benchmarks: take it from regions.sh.
eval "$(sed -n "/^KERNELS='/,/'\$/p" bench/regions.sh)"
[ -n "$KERNELS" ] || die "cannot read the kernel table of bench/regions.sh"
W=$(mktemp -d "${TMPDIR:-/tmp}/memlens-bench.XXXXXX") || exit 1
trap 'rm -rf "$W"' EXIT
export OMP_NUM_THREADS=$OMP_THREADS

want=" $* "
rows=()
while IFS='|' read -r name args flags; do
    [ $# -gt 0 ] && [[ $want != *" $name "* ]] && continue
    src=bench/kernels/$name.c
    echo "== $name ($args)" >&2
    clang-14 -O2 $flags -I"$ROOT/include" "$src" -o "$W/$name.plain" || die "clang-14 failed on '$src'"
    "$MEMLENS_BUILD/bin/memlens-cc" -O2 $flags "$src" -o "$W/$name.reg" ||
        die "memlens-cc failed on '$src'"
    "$MEMLENS_BUILD/bin/memlens-cc" --ml-all -O2 $flags "$src" -o "$W/$name.all" ||
        die "memlens-cc --ml-all failed on '$src'"
    mkdir -p "$W/prof.$name" "$W/hf"
    MEMLENS_OUT=$W/prof.$name "$W/$name.all" $args >"$W/$name.all.out" || die "--all '$name' failed"
    "$W/$name.plain" $args >"$W/$name.plain.out" || die "plain '$name' failed"
    cmp -s "$W/$name.all.out" "$W/$name.plain.out" ||
        die "'$name' prints different results with --all"
    "$MEMLENS_BUILD/bin/memlens" report --top 1 --csv "$W/prof.$name" >"$W/$name.top.csv" ||
        die "memlens report --top failed on '$name'"
    hyperfine -N --style none --warmup 1 --runs "$RUNS" --export-json "$W/$name.json" \
        -n plain "$W/$name.plain $args" \
        -n regions "env MEMLENS_OUT=$W/hf $W/$name.reg $args" \
        -n all "env MEMLENS_OUT=$W/hf $W/$name.all $args" >&2 ||
        die "hyperfine failed on '$name'"
    rows+=("$name")
done <<<"$KERNELS"
[ ${#rows[@]} -gt 0 ] || die "no kernel matches '$*'"

python3 - "$W" "${rows[@]}" <<'PY'
import csv, json, math, statistics, sys
w, names = sys.argv[1], sys.argv[2:]
print('%-10s %10s %10s %10s %8s %8s  %s' % ('kernel', 'plain', 'regions', 'all', 'reg x', 'all x',
                                           'hottest function (bytes)'))
geo = {'regions': [], 'all': []}
for n in names:
    res = {r['command']: statistics.median(r['times']) for r in json.load(open('%s/%s.json' % (w, n)))['results']}
    top = [r for r in csv.DictReader(open('%s/%s.top.csv' % (w, n)))
           if r['ranking'] == 'bytes' and r['kind'] == 'function']
    hot = '%s (%d)' % (top[0]['function'], int(top[0]['bytes_read']) + int(top[0]['bytes_written'])) if top else '-'
    for k in geo:
        geo[k].append(res[k] / res['plain'])
    print('%-10s %9.3fs %9.3fs %9.3fs %7.2fx %7.2fx  %s' % (n, res['plain'], res['regions'], res['all'],
                                                         res['regions'] / res['plain'], res['all'] / res['plain'], hot))
g = {k: math.exp(sum(map(math.log, v)) / len(v)) for k, v in geo.items()}
print('geomean overhead: regions %.2fx, all %.2fx (medians)' % (g['regions'], g['all']))
PY
