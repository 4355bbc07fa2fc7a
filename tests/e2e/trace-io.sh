#!/bin/bash
# I/O, mapping and string calls in traces (tests/e2e/kernels/trace-io.c): every read, write,
# pread, pwrite and writev element of a file, a pipe and a socket pair is one io record with
# the call, the fd kind, the buffer, the bytes asked for and transferred; mmap, mremap (old
# and new range), munmap and sbrk (up and back) are records with their addresses and lengths; strcpy,
# strlen and strcmp record the ranges they read and write. At -O0 and -O2.
. "$(dirname "$0")/../lib/common.sh"
ml_require_cc
command -v python3 >/dev/null || skip "python3 is not installed"
SRC=$ML_ROOT/tests/e2e/kernels/trace-io.c
N=5000
for O in 0 2; do
    $MLCC --ml-trace -O$O -g -I"$ML_ROOT/include" "$SRC" -o "$T/k$O" || fail "build -O$O failed"
    clang-14 -O$O -g -I"$ML_ROOT/include" "$SRC" -o "$T/p$O" || fail "clang-14 -O$O failed"
    mkdir -p "$T/d"
    "$T/p$O" "$T/d" $N >"$T/p.out" 2>/dev/null || fail "plain -O$O failed"
    rm -rf "$T/o"
    MEMLENS_OUT=$T/o "$MEMLENS" trace -q -- "$T/k$O" "$T/d" $N >"$T/k.out" 2>"$T/err" ||
        fail "traced -O$O failed: $(cat "$T/err")"
    cmp -s "$T/p.out" "$T/k.out" || fail "-O$O: output differs from plain"
    MEMLENS_BUILD=$ML_BUILD PYTHONPATH=$ML_ROOT/tests/lib python3 - "$T/o" "$T/err" $N <<'PY' ||
import glob, sys
import mlt
d, err, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
B = {}
for line in open(err):
    f = line.split()
    if len(f) == 3 and f[0] == 'buf':
        B[f[1]] = int(f[2], 16)
R = mlt.records(glob.glob(d + '/*.mlt'))
io = [(r.what.split()[2], r.what.split()[1], r.addr, r.size, int(r.what.split('got=')[1]))
      for r in R if r.kind == 'io']
w, r = B['w'], B['r']
want = [('write', 'file', w, n, n), ('pwrite', 'file', w, n // 2, n // 2),
        ('read', 'file', r, n, n), ('pread', 'file', r, n // 2, n // 2),
        ('writev', 'file', w, 100, 100), ('writev', 'file', w + 100, 200, 200),
        ('write', 'pipe', w, 1000, 1000), ('read', 'pipe', r, 1000, 1000),
        ('send', 'socket', w, 500, 500), ('recv', 'socket', r, 500, 500)]
bad = 0
if io != want:
    print('io records', io, 'want', want)
    bad += 1
maps = [(r.kind, r.addr, int(r.what.split()[0][4:]), int(r.what.split()[1][5:]))
        for r in R if r.kind in ('mmap', 'mremap', 'munmap', 'brk')]
want = [('brk', B['brk'] + 8192, B['brk'], 0), ('brk', B['brk'], B['brk'] + 8192, 0),
        ('mmap', B['m'], 1 << 20, 3), ('mremap', B['m'], 1 << 20, 0),
        ('mremap', B['m2'], 2 << 20, 1), ('munmap', B['m2'], 2 << 20, 0)]
if maps != want:
    print('map records', maps, 'want', want)
    bad += 1
line = B['line']
strs = [(r.kind, r.addr, r.size) for th, name, rs in mlt.phases(R) if name == 'strings'
        for r in rs if r.kind in ('load', 'store') and r.size > 1 and r.where != '-' and
        line <= r.addr < line + 64]
for want in [('store', line, 13), ('load', line, 13), ('load', line, 6)]:
    if want not in strs:
        print('string ranges', strs, 'lack', want)
        bad += 1
sys.exit(1 if bad else 0)
PY
        fail "-O$O: records of calls are wrong"
done
echo ok
