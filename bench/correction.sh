#!/bin/bash
# Overhead correction benchmark: for each kernel, the region's time without instrumentation
# (the kernel compiled by plain clang-14 with its markers calling the runtime by name, so the
# region is timed but not counted) against memlens' raw, CF-corrected and calibrated region
# times. Bandwidth error of a method = bytes / t_method vs bytes / t_plain, i.e.
# t_plain / t_method - 1 (bytes are exact for heap and global data, see bench/regions.sh).
# Usage: bench/correction.sh [kernel...]   (env: RUNS, default 3; OMP_THREADS, default 2)
set -o pipefail
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
MEMLENS_BUILD=${MEMLENS_BUILD:-$ROOT/build}
RUNS=${RUNS:-3}
export OMP_NUM_THREADS=${OMP_THREADS:-2}

die() {
    echo "correction.sh: $*" >&2
    exit 1
}
for t in clang-14 python3; do
    command -v $t >/dev/null || die "'$t' not found: run scripts/deps.sh"
done
[ -x "$MEMLENS_BUILD/bin/memlens-cc" ] || die "no '$MEMLENS_BUILD/bin/memlens-cc': run make"
W=$(mktemp -d "${TMPDIR:-/tmp}/memlens-corr.XXXXXX") || exit 1
trap 'rm -rf "$W"' EXIT

# Same kernels and sizes as bench/regions.sh.
KERNELS='stream|4000000 60|
strided|8000000 16 200|
chase|2000000 3000000|
spmv|200000 16 60|
pagerank|400000 16 30|
parser|10000000 4|
smallfn|1000000 30|
omp|4000000 80|-fopenmp'

# An instrumented module with no executed code: it makes the runtime write a profile for a
# program whose own code is not instrumented.
printf '#include "memlens.h"\nvoid corr_stub(void) { MEMLENS_ROI_BEGIN("stub"); MEMLENS_ROI_END("stub"); }\n' \
    >"$W/stub.c"

want=" $* "
rows=()
while IFS='|' read -r name args flags; do
    [ $# -gt 0 ] && [[ $want != *" $name "* ]] && continue
    src=bench/kernels/$name.c
    echo "== $name ($args)" >&2
    "$MEMLENS_BUILD/bin/memlens-cc" -O2 $flags "$src" -o "$W/$name.ml" ||
        die "memlens-cc failed on '$src'"
    clang-14 -O2 $flags -D__MEMLENS__ -I"$ROOT/include" -c "$src" -o "$W/$name.plain.o" ||
        die "clang-14 failed on '$src'"
    "$MEMLENS_BUILD/bin/memlens-cc" -O2 $flags -I"$ROOT/include" "$W/stub.c" "$W/$name.plain.o" \
        -o "$W/$name.timed" || die "cannot link the timed plain '$name'"
    for r in $(seq "$RUNS"); do
        for v in timed ml; do
            mkdir -p "$W/$name.$v.$r"
            MEMLENS_OUT=$W/$name.$v.$r "$W/$name.$v" $args >/dev/null || die "'$name.$v' failed"
            "$MEMLENS_BUILD/bin/memlens" report --csv --totals --region "$name" \
                "$W/$name.$v.$r" >"$W/$name.$v.$r.csv" || die "report of '$name.$v' failed"
        done
    done
    rows+=("$name")
done <<<"$KERNELS"
[ ${#rows[@]} -gt 0 ] || die "no kernel matches '$*'"

python3 - "$W" "$RUNS" "${rows[@]}" <<'PY'
import csv, math, statistics, sys
W, runs, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]

def col(name, v, key):
    out = []
    for r in range(1, runs + 1):
        row = next(csv.DictReader(open('%s/%s.%s.%d.csv' % (W, name, v, r))))
        out.append(float(row[key]) if row[key] else float('nan'))
    return statistics.median(out)

print('%-9s %9s %9s %9s %9s %8s %8s %8s %7s' % ('kernel', 'plain(s)', 'raw(s)', 'CF(s)', 'cal(s)',
                                            'err raw', 'err CF', 'err cal', 'CF'))
errs = {'raw': [], 'CF': [], 'cal': []}
for name in names:
    plain = col(name, 'timed', 'seconds')
    raw, cf, cal = (col(name, 'ml', k) for k in ('seconds', 'cf_seconds', 'cal_seconds'))
    e = {k: plain / t - 1 for k, t in (('raw', raw), ('CF', cf), ('cal', cal))}
    for k in e:
        errs[k].append(abs(e[k]))
    print('%-9s %9.4f %9.4f %9.4f %9.4f %+7.1f%% %+7.1f%% %+7.1f%% %7.3f' % (
        name, plain, raw, cf, cal, 100 * e['raw'], 100 * e['CF'], 100 * e['cal'],
        col(name, 'ml', 'cf')))
gm = lambda xs: math.exp(sum(math.log(max(x, 1e-6)) for x in xs) / len(xs))
print('geomean |bandwidth error|: raw %.1f%%, CF %.1f%%, calibrated %.1f%% over %d kernels' % (
    100 * gm(errs['raw']), 100 * gm(errs['CF']), 100 * gm(errs['cal']), len(names)))
PY
