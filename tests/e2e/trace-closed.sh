#!/bin/bash
# Memory traces against closed forms: tests/e2e/kernels/trace-closed.c runs sum, copy, triad
# (int8, int32, double, 32-byte vectors, a global array), strided, gather, nested loops with
# variable bounds, memcpy/memset of a size from argv and a recursion, each in a MEMLENS_MARK
# phase. At -O0..-O3 (scalar code: -fno-vectorize -fno-slp-vectorize -fno-builtin, so that a
# loop of n accesses stays n records) the records of each phase that fall in each array give
# exactly the loads, stores, bytes and accesses per 4 KiB page the test computes from n, s and
# k; at -O2 and -O3 the summary's per-phase and per-region rows equal them too (nothing else is
# touched there). The traced program prints what the plain clang build prints.
. "$(dirname "$0")/../lib/common.sh"
ml_require_cc
command -v python3 >/dev/null || skip "python3 is not installed"
LEVELS=${ML_LEVELS:-"0 1 2 3"}
SRC=$ML_ROOT/tests/e2e/kernels/trace-closed.c
FLAGS="-g -fno-vectorize -fno-slp-vectorize -fno-builtin"
N=20000 S=7 K=3000

for O in $LEVELS; do
    $MLCC --ml-trace -O$O $FLAGS -I"$ML_ROOT/include" "$SRC" -o "$T/k$O" ||
        fail "memlens-cc --ml-trace -O$O failed"
    clang-14 -O$O $FLAGS -I"$ML_ROOT/include" "$SRC" -o "$T/p$O" || fail "clang-14 -O$O failed"
    "$T/p$O" $N $S $K >"$T/p$O.out" 2>/dev/null || fail "plain -O$O failed"
    MEMLENS_OUT=$T/o$O "$MEMLENS" trace -q -- "$T/k$O" $N $S $K >"$T/k$O.out" 2>"$T/k$O.err" ||
        fail "traced -O$O failed: $(cat "$T/k$O.err")"
    cmp -s "$T/p$O.out" "$T/k$O.out" || fail "-O$O: traced output differs from plain"
    MEMLENS_BUILD=$ML_BUILD PYTHONPATH=$ML_ROOT/tests/lib python3 - "$T/o$O" "$T/k$O.err" \
        $N $S $K $O <<'PY' || fail "-O$O: closed forms do not hold"
import collections, glob, sys
import mlt
out, errf, n, s, k, level = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:7])
paths = glob.glob(out + '/*.mlt')
assert len(paths) == 1, paths
R = mlt.ranges(open(errf).read())
m = 1
while (m + 1) * (m + 1) <= n:
    m += 1
x, idx = 12345, []
for i in range(n):
    x = (x * 1103515245 + 12345) & 0xffffffff
    idx.append((x >> 8) % n)

def seq(name, es, elems):
    """Closed form of reading elements `elems` of array `name` with element size es."""
    lo = R[name][0]
    pages = collections.Counter((lo + i * es) >> 12 for i in elems)
    return len(elems), len(elems) * es, pages

# phase -> {array: (loads, stores, bytes read, bytes written, pages or None)}
def rd(name, es, elems):
    c, b, p = seq(name, es, elems)
    return (c, 0, b, 0, p)

def wr(name, es, elems):
    c, b, p = seq(name, es, elems)
    return (0, c, 0, b, p)

def both(r, w):
    return (r[0] + w[0], r[1] + w[1], r[2] + w[2], r[3] + w[3], r[4] + w[4])

A = range(n)
expect = {
    'sum_i8': {'i8': rd('i8', 1, A)},
    'sum_i32': {'i32': rd('i32', 4, A)},
    'sum_f64': {'b': rd('b', 8, A)},
    'sum_v32': {'v': rd('v', 32, range(n // 4))},
    'sum_global': {'gbuf': rd('gbuf', 8, range(4096))},
    'copy': {'b': rd('b', 8, A), 'a': wr('a', 8, A)},
    'triad': {'b': rd('b', 8, A), 'c': rd('c', 8, A), 'a': wr('a', 8, A)},
    'strided': {'b': rd('b', 8, range(0, n, s))},
    'gather': {'idx': rd('idx', 4, A), 'b': rd('b', 8, idx)},
    'nested': {'c': rd('c', 8, [i * m + j for i in range(m) for j in range(i)])},
    'memops': {'c': (1, 0, 8 * k, 0, None), 'a': (0, 1, 0, 8 * k, None),
               'b': (0, 1, 0, 8 * k, None)},
    'recursion': {'c': rd('c', 8, A)},
}
recs = mlt.records(paths)
seen = set()
bad = 0
for thread, name, rs in mlt.phases(recs):
    if name not in expect:
        continue
    seen.add(name)
    for arr, (lo, hi) in R.items():
        want = expect[name].get(arr, (0, 0, 0, 0, collections.Counter()))
        got = mlt.count(rs, lo, hi)
        if want[4] is None:
            got = got[:4]
            want = want[:4]
            # memcpy/memset are one record each: its load or store is the whole range
            nrec = sum(1 for r in rs if r.kind in ('load', 'store') and mlt.inside(r, lo, hi))
            if nrec != want[0] + want[1]:
                print(f'{name} {arr}: {nrec} records, want {want[0] + want[1]}')
                bad += 1
        if got != want:
            print(f'{name} {arr}: got {got[:4]} want {want[:4]}', 'pages differ' if got[:4] == want[:4] else '')
            bad += 1
missing = set(expect) - seen
assert not missing, f'phases without marks: {missing}'
# Nothing but the arrays is touched inside the phases at -O2/-O3: the summary rows hold.
if level >= 2:
    rows = {(r['thread'], r['marker']): r for r in mlt.summary_csv(paths)}
    for name, arrays in expect.items():
        want = [sum(v[i] for v in arrays.values()) for i in range(4)]
        r = rows[('0', 'mark:' + name)]
        got = [int(r[f]) for f in ('loads', 'stores', 'bytes_read', 'bytes_written')]
        if got != want:
            print(f'summary mark:{name}: got {got} want {want}')
            bad += 1
    r = rows[('0', 'region:copy')]
    got = [int(r[f]) for f in ('records', 'loads', 'stores', 'bytes_read', 'bytes_written')]
    if got != [2 * n, n, n, 8 * n, 8 * n]:
        print('summary region:copy', got)
        bad += 1
sys.exit(1 if bad else 0)
PY
done
echo ok
