#!/bin/bash
# memlens cc --all counts every function without annotations. Ground truth by construction, at -O0
# and -O2: a multi-file C program whose kernel streams N doubles from one heap array to another
# (16·N bytes per call, called 3 times) is the hottest function, with exactly those heap bytes and
# 3 calls; a function called K times from nowhere near a region has K calls and 8·K global bytes read and written;
# the region in main has the same figures with and without --all; `memlens report --top` lists
# the same functions, calls and bytes as the independent reader. A C++ function template
# instantiated twice, and a pthreads program (each thread streams its own chunk) are checked the
# same way, per thread.
. "$(dirname "$0")/cc-lib.bash"

command -v python3 >/dev/null || { echo "python3 is not installed"; exit 77; }
MC=$BIN/memlens-cc
MX=$BIN/memlens-c++
N=200000
K=37
cd "$W" || exit 1
export ROOT

cat >main.c <<'E'
#include <stdio.h>
#include <stdlib.h>
#include <memlens.h>
void stream(double *dst, const double *src, long n);
void tick(void);
/* Called from the region only: its clone for the region counts, its own body never runs. */
static __attribute__((noinline)) double sum(const double *a, long n)
{
    double s = 0;
    for (long i = 0; i < n; i++)
        s += a[i];
    return s;
}
int main(int argc, char **argv)
{
    long n = atol(argv[1]), k = atol(argv[2]);
    double *a = malloc(n * sizeof(*a)), *b = malloc(n * sizeof(*b));
    for (long i = 0; i < n; i++)
        a[i] = (double)(i % 7);
    for (int r = 0; r < 3; r++)
        stream(b, a, n);
    for (long i = 0; i < k; i++)
        tick();
    MEMLENS_ROI_BEGIN("r");
    double s = sum(b, n / 2);
    MEMLENS_ROI_END("r");
    printf("%g %p %p\n", s, (void *)a, (void *)b);
    free(a);
    free(b);
    return 0;
}
E
cat >kern.c <<'E'
void stream(double *dst, const double *src, long n)
{
    for (long i = 0; i < n; i++)
        dst[i] = 2 * src[i];
}
E
cat >tick.c <<'E'
long ticks;
void tick(void)
{
    ticks++;
}
E

cat >axpy.cc <<'E'
#include <cstdio>
#include <cstdlib>
#include <vector>
template <typename T> __attribute__((noinline)) void axpy(T *y, const T *x, T a, long n)
{
    for (long i = 0; i < n; i++)
        y[i] += a * x[i];
}
int main(int argc, char **argv)
{
    long n = std::atol(argv[1]);
    double *xd = new double[n](), *yd = new double[n]();
    float *xf = new float[n](), *yf = new float[n]();
    axpy(yd, xd, 2.0, n);
    for (int r = 0; r < 5; r++)
        axpy(yf, xf, 3.0f, n);
    std::printf("%g %g %p %p %p %p\n", yd[1], (double)yf[1], (void *)xd, (void *)yd, (void *)xf,
                (void *)yf);
    delete[] xd;
    delete[] yd;
    delete[] xf;
    delete[] yf;
    return 0;
}
E

cat >threads.c <<'E'
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
struct job { double *a; long n; double s; };
__attribute__((noinline)) double chunk_sum(const double *a, long n)
{
    double s = 0;
    for (long i = 0; i < n; i++)
        s += a[i];
    return s;
}
static void *body(void *p)
{
    struct job *j = p;
    j->s = chunk_sum(j->a, j->n);
    return NULL;
}
int main(int argc, char **argv)
{
    long base = atol(argv[1]);
    pthread_t t[4];
    struct job j[4];
    for (int k = 0; k < 4; k++) {
        j[k].n = (k + 1) * base;
        j[k].a = calloc(j[k].n, sizeof(double));
        pthread_create(&t[k], NULL, body, &j[k]);
    }
    for (int k = 0; k < 4; k++)
        pthread_join(t[k], NULL);
    printf("%g\n", j[0].s + j[3].s);
    return 0;
}
E

check() { # <what> <dir> <python>
    python3 - "$2" "$N" "$K" <<P || fail "$1"
import json, os, subprocess, sys
sys.path.insert(0, os.environ['ROOT'] + '/tests/lib')
import mlp
ps = mlp.load_dir(sys.argv[1])
assert len(ps) == 1, 'one profile expected, got %d' % len(ps)
p, N, K = ps[0], int(sys.argv[2]), int(sys.argv[3])
def eq(what, got, want):
    assert got == want, '%s: got %r, expected %r' % (what, got, want)
def hg(f):
    return (f['rd_heap'] + f['rd_global'], f['wr_heap'] + f['wr_global'])
def top(*args):
    out = subprocess.run([os.environ['BIN'] + '/memlens', 'report'] + list(args) + [p.path],
                         check=True, capture_output=True, text=True).stdout
    return out
$3
P
}
export BIN

for O in 0 2; do
    "$MC" --ml-all -O$O -g -c main.c && "$MC" --ml-all -O$O -c kern.c && "$MC" --ml-all -O$O -c tick.c &&
        "$MC" -O$O main.o kern.o tick.o -o all$O || fail "-O$O: --all build"
    "$MC" -O$O -g main.c kern.c tick.c -o plain$O || fail "-O$O: plain build"
    MEMLENS_OUT=$PWD/out-all$O ./all$O $N $K >/dev/null || fail "-O$O: run --all"
    MEMLENS_OUT=$PWD/out-plain$O ./plain$O $N $K >/dev/null || fail "-O$O: run plain"
    no_temps
    check "C -O$O" out-all$O "
s = p.function('stream')
eq('stream calls', s['calls'], 3)
eq('stream heap+global bytes (read, written)', hg(s), (3 * 8 * N, 3 * 8 * N))
t = p.function('tick')
eq('tick calls', t['calls'], K)
eq('tick heap+global bytes', hg(t), (8 * K, 8 * K))
eq('main calls', p.function('main')['calls'], 1)
eq('sum calls (region clone)', p.function('sum')['calls'], 1)
eq('sum heap bytes', hg(p.function('sum')), (8 * (N // 2), 0))
# The region is counted as without --all.
q = mlp.load_dir(sys.argv[1].replace('all', 'plain'))[0]
eq('region r with and without --all', p.totals('r'), q.totals('r'))
eq('region r not seen', p.not_seen('r'), q.not_seen('r'))
# Calls into functions memlens did not see are still recorded outside regions.
callees = {p.s(c[1]) for c in p.calls}
assert 'malloc' in callees and 'printf' in callees, callees
# memlens report --top agrees with the independent reader.
rows = [l.split(',') for l in top('--top', '3', '--csv').splitlines()[1:]]
fb = [r for r in rows if r[2] == 'bytes' and r[4] == 'function']
eq('hottest function', fb[0][8], 'stream')
eq('its calls and bytes', (int(fb[0][11]), int(fb[0][15]), int(fb[0][16])), (3, s['bytes_read'], s['bytes_written']))
fe = [r for r in rows if r[2] == 'executions' and r[4] == 'function']
eq('most called function', (fe[0][8], int(fe[0][11])), ('tick', K))
j = json.loads(top('--top', '50', '--json'))['profiles'][0]
for f in j['functions_by_bytes']:
    g = (p.inlined_function(f['symbol'], f['inlined_into']) if f['inlined_into']
         else p.function(f['symbol']))
    eq(f['symbol'] + ' json', (f['calls'], f['bytes_read'], f['bytes_written'], f['instructions']),
       (g['calls'], g['bytes_read'], g['bytes_written'], g['instr']))
b = j['blocks_by_bytes'][0]
eq('hottest block', (b['function'], b['regions']), ('stream', []))
t = top('--top', '2')
assert 'hottest functions by bytes' in t and 'stream' in t, t
# --region ranks the units inside the region only.
j = json.loads(top('--top', '5', '--json', '--region', 'r'))['profiles'][0]
eq('functions in region r', [f['function'] for f in j['functions_by_bytes']][:1], ['sum'])
"
    echo "C -O$O: ok"

    "$MX" --ml-all -O$O axpy.cc -o cxx$O || fail "-O$O: C++ build"
    MEMLENS_OUT=$PWD/out-cxx$O ./cxx$O $N >/dev/null || fail "-O$O: C++ run"
    check "C++ -O$O" out-cxx$O "
d, f = p.function('4axpyIdE'), p.function('4axpyIfE')
eq('axpy<double> calls, bytes', (d['calls'], hg(d)), (1, (16 * N, 8 * N)))
eq('axpy<float> calls, bytes', (f['calls'], hg(f)), (5, (5 * 8 * N, 5 * 4 * N)))
j = json.loads(top('--top', '1', '--json'))['profiles'][0]
eq('hottest', j['functions_by_bytes'][0]['function'], 'void axpy<float>(float*, float const*, float, long)')
"
    echo "C++ -O$O: ok"

    "$MC" --ml-all -O$O -pthread threads.c -o thr$O || fail "-O$O: pthreads build"
    MEMLENS_OUT=$PWD/out-thr$O ./thr$O 10000 >/dev/null || fail "-O$O: pthreads run"
    check "pthreads -O$O" out-thr$O "
base = 10000
eq('threads', len(p.threads), 5)
c = p.function('chunk_sum')
eq('chunk_sum calls, bytes', (c['calls'], hg(c)), (4, (8 * base * 10, 0)))
got = sorted((p.function('chunk_sum', t['index'])['calls'], hg(p.function('chunk_sum', t['index']))[0])
             for t in p.threads if t['index'] != 0)
eq('per thread', got, [(1, 8 * base * k) for k in range(1, 5)])
eq('body calls', p.function('body')['calls'], 4)
"
    echo "pthreads -O$O: ok"
done
