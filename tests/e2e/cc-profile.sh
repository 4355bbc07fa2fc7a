#!/bin/bash
# Programs built by memlens-cc write a region profile to $MEMLENS_OUT. Ground truth: the region
# sums N ints from the heap in a function of another file, so it reads exactly 4*N bytes when
# that file is instrumented with the region's caller (whole-program: --ml-whole-program, -flto)
# and none with separate compilation (the callee is then listed as not seen). Output matches
# clang-14's build; -pthread programs profile every thread; C++ works through memlens-c++.
. "$(dirname "$0")/cc-lib.bash"

command -v python3 >/dev/null || { echo "python3 is not installed"; exit 77; }
MC=$BIN/memlens-cc
N=100000
cd "$W" || exit 1
cat >main.c <<'E'
#include <stdio.h>
#include <stdlib.h>
#include <memlens.h>
long sum(const int *a, long n);
int main(int argc, char **argv)
{
    long n = atol(argv[1]);
    int *a = malloc(n * sizeof(*a));
    for (long i = 0; i < n; i++)
        a[i] = (int)(i % 9);
    MEMLENS_ROI_BEGIN("r");
    long s = sum(a, n);
    MEMLENS_ROI_END("r");
    printf("%ld\n", s);
    free(a);
    return 0;
}
E
echo 'long sum(const int *a, long n) { long s = 0; for (long i = 0; i < n; i++) s += a[i]; return s; }' >sum.c
clang-14 -O2 -I"$ROOT/include" main.c sum.c -o ref ||
    fail "reference build"
./ref $N >want.txt

profile() { # <what> <program> <expected bytes read> <callee not seen: 0|1>
    rm -rf "out-$2"
    MEMLENS_OUT=$PWD/out-$2 "./$2" $N >got.txt || fail "$1: run"
    cmp want.txt got.txt || fail "$1: output differs from clang's build"
    ls out-"$2"/*.mlp >/dev/null 2>&1 || fail "$1: no profile in MEMLENS_OUT"
    python3 - "$PWD/out-$2" "$3" "$4" <<'P' || fail "$1: profile"
import os, sys
sys.path.insert(0, os.environ['ROOT'] + '/tests/lib')
import mlp
ps = mlp.load_dir(sys.argv[1])
assert len(ps) == 1, 'one profile expected, got %d' % len(ps)
t = ps[0].totals('r')
assert t['entries'] == 1, t
assert t['bytes_read'] == int(sys.argv[2]), 'bytes read %d, expected %s' % (t['bytes_read'], sys.argv[2])
assert ('sum' in ps[0].not_seen('r')) == (sys.argv[3] == '1'), ps[0].not_seen('r')
P
    no_temps
    echo "$1: ok"
}
export ROOT

# Separate compilation, make style (-c then link).
"$MC" -O2 -c main.c && "$MC" -O2 -c sum.c && "$MC" -O2 main.o sum.o -o sep || fail "separate build"
profile "separate compilation" sep 0 1
"$MC" --ml-whole-program -O2 main.c sum.c -o wp || fail "whole-program build"
profile "whole-program" wp $((4 * N)) 0
"$MC" -flto -O2 -c main.c sum.c && ar rcs libsum.a sum.o && "$MC" -flto -O2 main.o libsum.a -o lto ||
    fail "-flto build"
profile "-flto with a bitcode archive" lto $((4 * N)) 0
"$MC" -O0 -g main.c sum.c -o o0 || fail "-O0 build"
MEMLENS_OUT=$PWD/out-o0 ./o0 $N >got.txt && cmp want.txt got.txt && ls out-o0/*.mlp >/dev/null ||
    fail "-O0 program"
echo "-O0 -g: ok"

# Threads: each of 3 threads runs the region once.
cat >thr.c <<'E'
#include <pthread.h>
#include <stdio.h>
#include <memlens.h>
static long part[3];
static void *work(void *arg)
{
    long k = (long)arg, s = 0;
    MEMLENS_ROI_BEGIN("t");
    for (long i = 0; i < 100000; i++)
        s += (i * k) % 7;
    MEMLENS_ROI_END("t");
    part[k] = s;
    return NULL;
}
int main(void)
{
    pthread_t t[3];
    for (long k = 0; k < 3; k++)
        pthread_create(&t[k], NULL, work, (void *)k);
    for (int k = 0; k < 3; k++)
        pthread_join(t[k], NULL);
    printf("%ld\n", part[0] + part[1] + part[2]);
    return 0;
}
E
"$MC" -O2 -pthread thr.c -o thr || fail "pthread build"
MEMLENS_OUT=$PWD/out-thr ./thr >/dev/null || fail "pthread run"
python3 - "$PWD/out-thr" <<'P' || fail "pthread profile"
import os, sys
sys.path.insert(0, os.environ['ROOT'] + '/tests/lib')
import mlp
p = mlp.load_dir(sys.argv[1])[0]
per = [t for t in p.per_thread('t') if t['entries']]
assert len(per) == 3 and all(t['entries'] == 1 for t in per), per
P
echo "-pthread: ok"

# C++ through memlens-c++.
cat >cxx.cpp <<'E'
#include <cstdio>
#include <vector>
#include <memlens.h>
__attribute__((noinline)) static double total(const std::vector<double> *v)
{
    double s = 0;
    MEMLENS_ROI_BEGIN("cxx");
    for (double x : *v)
        s += x;
    MEMLENS_ROI_END("cxx");
    return s;
}
int main()
{
    std::vector<double> v(1000, 1.5);
    std::printf("%g\n", total(&v));
}
E
"$BIN/memlens-c++" -O2 cxx.cpp -o cxx || fail "C++ build"
MEMLENS_OUT=$PWD/out-cxx ./cxx | grep -qx 1500 || fail "C++ run"
ls out-cxx/*.mlp >/dev/null 2>&1 || fail "C++: no profile"
no_temps
echo "C++: ok"
