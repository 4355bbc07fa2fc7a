#!/bin/bash
# Memory traces of threads: 4 pthreads each read their own slice of an array (n/4 elements, in a
# MEMLENS_MARK phase on their own thread): each thread's trace stream holds exactly its slice,
# with its OS thread id; an OpenMP loop over the array with OMP_NUM_THREADS=2 and 3 is read
# by the master and its workers together exactly once, in the static schedule's shares (the
# region markers are on the master's stream); at -O0 and -O2.
. "$(dirname "$0")/../lib/common.sh"
ml_require_cc
command -v python3 >/dev/null || skip "python3 is not installed"
SRC=$ML_ROOT/tests/e2e/kernels/trace-threads.c
N=30000
for O in ${ML_LEVELS:-0 2}; do
    $MLCC --ml-trace -O$O -g -fopenmp -fno-vectorize -I"$ML_ROOT/include" "$SRC" -o "$T/k$O" ||
        fail "memlens-cc --ml-trace -fopenmp -O$O failed"
    for W in 2 3; do
        rm -rf "$T/o"
        OMP_NUM_THREADS=$W MEMLENS_OUT=$T/o "$MEMLENS" trace -q -- "$T/k$O" $N 4 \
            >"$T/out" 2>"$T/err" || fail "traced -O$O failed: $(cat "$T/err")"
        MEMLENS_BUILD=$ML_BUILD PYTHONPATH=$ML_ROOT/tests/lib python3 - "$T/o" "$T/err" $N $W \
            <<'PY' || fail "-O$O OMP_NUM_THREADS=$W: per-thread counts are wrong"
import collections, glob, sys
import mlt
out, errf, n, w = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
paths = glob.glob(out + '/*.mlt')
lo, hi = mlt.ranges(open(errf).read())['b']
recs = mlt.records(paths)
bad = 0
# pthreads: each slice phase reads n/4 elements of its own slice, on its own thread.
slices = sorted((min(r.addr for r in rs if mlt.inside(r, lo, hi)), th, rs)
                for th, name, rs in mlt.phases(recs) if name == 'slice')
if len(slices) != 4 or len({th for _, th, _ in slices}) != 4:
    print('slices', [(a, th) for a, th, _ in slices])
    sys.exit(1)
for t, (_, th, rs) in enumerate(slices):
    a, b = n * t // 4, n * (t + 1) // 4
    got = mlt.count(rs, lo, hi)
    if got[:4] != (b - a, 0, 8 * (b - a), 0) or min(r.addr for r in rs if mlt.inside(r, lo, hi)) != lo + 8 * a:
        print('slice', t, got[:4])
        bad += 1
starts = {r.thread: int(r.what.split('=')[1].split()[0]) for r in recs if r.kind == 'thread-start'}
if len(set(starts.values())) != len(starts) or min(starts) != 0:
    print('thread ids', starts)
    bad += 1
# OpenMP: the loads of b outside the slice phases are the OpenMP loop's, by the master and its
# workers: they add up to n, in static shares.
per = collections.Counter()
in_slice = set()
for th, name, rs in mlt.phases(recs):
    if name == 'slice':
        in_slice.update(id(r) for r in rs)
for r in recs:
    if r.kind == 'load' and mlt.inside(r, lo, hi) and id(r) not in in_slice:
        per[r.thread] += 1
shares = sorted(per.values())
q, rem = divmod(n, w)
want = sorted([q + 1] * rem + [q] * (w - rem))
if shares != want:
    print('omp shares', dict(per), 'want', want)
    bad += 1
regions = [r.kind for r in recs if r.kind.startswith('region-')]
if regions != ['region-begin', 'region-end']:
    print('region markers', regions)
    bad += 1
sys.exit(1 if bad else 0)
PY
    done
done
echo ok
