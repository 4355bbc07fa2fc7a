#!/bin/bash
# Building for traces: CC=memlens-cc with MEMLENS_CCFLAGS=--ml-trace in a make project (two
# files and a static library, -c then link) traces every file with its sites named by
# file:line; C++ (a class template, std::vector, an exception thrown and caught) prints what the
# plain build prints and records the vector's reads; --trace-functions and --trace-loops
# record exactly one entry and one exit per call of a recursive function and per execution of
# a nested loop with variable bounds at -O0, and balanced, properly nested entries and exits at
# -O2 (where the optimiser turns recursion into loops and versions loops); a mark whose name is not a literal fails to compile with
# its location; 'memlens trace' with bad options fails with usage.
. "$(dirname "$0")/../lib/common.sh"
ml_require_cc
command -v python3 >/dev/null || skip "python3 is not installed"
command -v make >/dev/null || skip "make is not installed"

# --- a make project ---
mkdir -p "$T/proj"
cat >"$T/proj/lib.c" <<'C'
long lib_sum(const long *a, long n)
{
    long s = 0;
    for (long i = 0; i < n; i++)
        s += a[i];
    return s;
}
C
cat >"$T/proj/ar.c" <<'C'
void ar_fill(long *a, long n)
{
    for (long i = 0; i < n; i++)
        a[i] = i;
}
C
cat >"$T/proj/main.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include "memlens.h"
long lib_sum(const long *a, long n);
void ar_fill(long *a, long n);
int main(int argc, char **argv)
{
    long n = atol(argv[1]), *a = malloc(n * sizeof(*a));
    ar_fill(a, n);
    MEMLENS_MARK("sum");
    printf("%ld\n", lib_sum(a, n));
    return 0;
}
C
cat >"$T/proj/Makefile" <<'M'
app: main.o lib.o libar.a
	$(CC) -o $@ main.o lib.o libar.a
libar.a: ar.o
	ar rcs $@ ar.o
%.o: %.c
	$(CC) -O2 -g -I$(INC) -c $< -o $@
M
MEMLENS_CCFLAGS=--ml-trace make -s -C "$T/proj" CC="$MLCC" INC="$ML_ROOT/include" ||
    fail "make with memlens-cc --ml-trace failed"
MEMLENS_OUT=$T/o1 "$T/proj/app" 5000 >"$T/out" || fail "the make-built program failed"
[ "$(cat "$T/out")" = 12497500 ] || fail "wrong output $(cat "$T/out")"
MEMLENS_BUILD=$ML_BUILD PYTHONPATH=$ML_ROOT/tests/lib python3 - "$T/o1" <<'PY' ||
import collections, glob, sys
import mlt
R = mlt.records(glob.glob(sys.argv[1] + '/*.mlt'))
by_file = collections.Counter((r.kind, r.where.split(':')[0].split('/')[-1]) for r in R
                              if r.kind in ('load', 'store'))
ok = by_file[('store', 'ar.c')] * 8 >= 5000 * 8 // 4 and by_file[('load', 'lib.c')] > 0
sum_loads = sum(mlt.count(rs, 0, 1 << 64)[2] for th, n, rs in mlt.phases(R) if n == 'sum')
ok = ok and sum_loads == 5000 * 8
if not ok:
    print(by_file, sum_loads)
sys.exit(0 if ok else 1)
PY
    fail "make project: sites of every file and the sum phase's bytes"

# --- C++ ---
cat >"$T/x.cpp" <<'C'
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <vector>
#include "memlens.h"
template <typename T> struct Acc {
    T total = 0;
    void add(const std::vector<T> &v) {
        for (const T &x : v)
            total += x;
    }
};
static void check(long n) {
    if (n < 0)
        throw std::runtime_error("negative");
}
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    std::vector<double> v(n);
    for (long i = 0; i < n; i++)
        v[i] = i * 0.5;
    fprintf(stderr, "range v %p %p\n", (void *)v.data(), (void *)(v.data() + n));
    Acc<double> a;
    MEMLENS_MARK("acc");
    a.add(v);
    MEMLENS_MARK("rest");
    try {
        check(-n);
    } catch (const std::exception &e) {
        printf("caught %s\n", e.what());
    }
    printf("%.1f\n", a.total);
    return 0;
}
C
for O in 0 2; do
    $MLCXX --ml-trace -O$O -g -fno-vectorize -I"$ML_ROOT/include" "$T/x.cpp" -o "$T/x$O" ||
        fail "memlens-c++ --ml-trace -O$O failed"
    clang++-14 -O$O -g -fno-vectorize -I"$ML_ROOT/include" "$T/x.cpp" -o "$T/xp$O" ||
        fail "clang++-14 -O$O failed"
    "$T/xp$O" 3000 >"$T/xp.out" 2>/dev/null
    rm -rf "$T/o2"
    MEMLENS_OUT=$T/o2 "$T/x$O" 3000 >"$T/x.out" 2>"$T/x.err" || fail "C++ -O$O run failed"
    cmp -s "$T/xp.out" "$T/x.out" || fail "C++ -O$O: output differs"
    MEMLENS_BUILD=$ML_BUILD PYTHONPATH=$ML_ROOT/tests/lib python3 - "$T/o2" "$T/x.err" <<'PY' ||
import glob, sys
import mlt
R = mlt.records(glob.glob(sys.argv[1] + '/*.mlt'))
lo, hi = mlt.ranges(open(sys.argv[2]).read())['v']
got = [mlt.count(rs, lo, hi)[:4] for th, n, rs in mlt.phases(R) if n == 'acc']
if got != [(3000, 0, 24000, 0)]:
    print(got)
    sys.exit(1)
PY
        fail "C++ -O$O: the vector's reads"
done

# --- function and loop markers ---
cat >"$T/fl.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include "memlens.h"
__attribute__((noinline)) long fib(long n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
int main(int argc, char **argv)
{
    long m = atol(argv[1]), f = atol(argv[2]), *a = calloc(m * m, sizeof(long)), s = 0;
    for (long i = 0; i < m; i++)
        for (long j = 0; j < i; j++)
            s += a[i * m + j] + j;
    printf("%ld %ld\n", s, fib(f));
    return 0;
}
C
for O in 0 2; do
    $MLCC --ml-trace-functions --ml-trace-loops -O$O -g -I"$ML_ROOT/include" "$T/fl.c" \
        -o "$T/fl$O" || fail "--trace-functions --trace-loops -O$O failed"
    rm -rf "$T/o3"
    MEMLENS_OUT=$T/o3 "$T/fl$O" 40 15 >/dev/null || fail "fl -O$O failed"
    MEMLENS_BUILD=$ML_BUILD PYTHONPATH=$ML_ROOT/tests/lib python3 - "$T/o3" $O <<'PY' ||
import collections, glob, sys
import mlt
R = mlt.records(glob.glob(sys.argv[1] + '/*.mlt'))
c = collections.Counter((r.kind, r.what) for r in R if r.kind.startswith(('function', 'loop')))
calls = lambda n: 1 if n < 2 else 1 + calls(n - 1) + calls(n - 2)
loops = sorted((k[1], v) for k, v in c.items() if k[0] == 'loop-entry')
exits = sorted((k[1], v) for k, v in c.items() if k[0] == 'loop-exit')
ok = (c[('function-entry', 'function:fib')] == c[('function-exit', 'function:fib')] > 0
      and c[('function-entry', 'function:main')] == 1 == c[('function-exit', 'function:main')]
      and loops == exits)
if sys.argv[2] == '0':
    ok = ok and c[('function-entry', 'function:fib')] == calls(15) and \
        sorted(v for _, v in loops) == [1, 40]
# Entries and exits nest properly on the thread.
depth = 0
for r in R:
    if r.kind in ('function-entry', 'loop-entry'):
        depth += 1
    elif r.kind in ('function-exit', 'loop-exit'):
        depth -= 1
        ok = ok and depth >= 0
if not ok or depth:
    print(c, loops, exits, depth)
    sys.exit(1)
PY
        fail "-O$O: function and loop markers"
done

# --- errors ---
printf '#include "memlens.h"\nint main(int c, char **v) { MEMLENS_MARK(v[0]); return 0; }\n' \
    >"$T/bad.c"
$MLCC --ml-trace -g -I"$ML_ROOT/include" "$T/bad.c" -o "$T/bad" 2>"$T/bad.err" &&
    fail "a mark named by a variable compiled"
grep -q "bad.c:2:[0-9]*: error: mark name is not a string literal" "$T/bad.err" ||
    fail "wrong message: $(cat "$T/bad.err")"
"$MEMLENS" trace --bogus true 2>"$T/err"
[ $? = 129 ] || fail "unknown trace option: wrong status"
grep -q "unknown option '--bogus'" "$T/err" || fail "unknown trace option: $(cat "$T/err")"
"$MEMLENS" trace --start maybe true 2>"$T/err"
[ $? = 128 ] && grep -q "bad --start 'maybe'" "$T/err" || fail "bad --start: $(cat "$T/err")"
"$MEMLENS" analyze "$T/nonexistent.mlt" 2>"$T/err"
[ $? = 128 ] && grep -q "cannot open trace" "$T/err" || fail "missing trace: $(cat "$T/err")"
echo ok
