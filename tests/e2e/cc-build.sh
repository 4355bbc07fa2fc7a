#!/bin/bash
# memlens-cc / memlens-c++ as drop-in compilers: a make project (C, C++, static library,
# -c then link, -O0 and -O2), a one-shot multi-file build, -pthread and -fopenmp programs;
# every program prints the same as when built with clang-14.
. "$(dirname "$0")/cc-lib.bash"

mkdir -p "$W/proj"
cd "$W/proj" || exit 1
cat >vec.h <<'E'
#ifdef __cplusplus
extern "C" {
#endif
long vec_sum(const int *a, int n);
void vec_fill(int *a, int n, int seed);
double stats_mean(const int *a, int n);
unsigned util_hash(const char *s);
int util_clamp(int x, int lo, int hi);
#ifdef __cplusplus
}
#endif
E
cat >main.c <<'E'
#include <stdio.h>
#include "vec.h"
int main(void)
{
    static int a[1000];
    vec_fill(a, 1000, 7);
    printf("sum %ld mean %.3f hash %u clamp %d\n", vec_sum(a, 1000), stats_mean(a, 1000),
           util_hash("memlens"), util_clamp(vec_sum(a, 10), 0, 5000));
    return 0;
}
E
cat >vec.c <<'E'
#include "vec.h"
long vec_sum(const int *a, int n) { long s = 0; for (int i = 0; i < n; i++) s += a[i]; return s; }
void vec_fill(int *a, int n, int seed) { for (int i = 0; i < n; i++) a[i] = (i * seed) % 101; }
E
cat >stats.cpp <<'E'
#include <numeric>
#include <vector>
#include "vec.h"
extern "C" double stats_mean(const int *a, int n)
{
    std::vector<int> v(a, a + n);
    return std::accumulate(v.begin(), v.end(), 0.0) / n;
}
E
cat >util1.c <<'E'
#include "vec.h"
unsigned util_hash(const char *s) { unsigned h = 5381; while (*s) h = h * 33 + (unsigned char)*s++; return h; }
E
cat >util2.c <<'E'
#include "vec.h"
int util_clamp(int x, int lo, int hi) { return x < lo ? lo : x > hi ? hi : x; }
E
cat >Makefile <<'E'
OPT ?= -O2
app: main.o vec.o stats.o libutil.a
	$(CXX) $(OPT) -o $@ main.o vec.o stats.o -L. -lutil
libutil.a: util1.o util2.o
	$(AR) rcs $@ $^
%.o: %.c
	$(CC) $(OPT) -g -Wall -MMD -MP -c $< -o $@
%.o: %.cpp
	$(CXX) $(OPT) -g -Wall -MMD -MP -c $< -o $@
clean:
	rm -f *.o *.d *.a app
-include *.d
E
for opt in -O0 -O2; do
    make -s clean
    make -s CC=clang-14 CXX=clang++-14 OPT=$opt || fail "reference build $opt"
    ./app >want.txt || fail "reference run $opt"
    mkdir -p ref && cp ./*.d ref/
    make -s clean
    PATH=$BIN:$PATH make -s CC=memlens-cc CXX=memlens-c++ OPT=$opt || fail "memlens build $opt"
    ./app >got.txt || fail "memlens-built app failed $opt"
    cmp want.txt got.txt || fail "output differs at $opt"
    for d in ref/*.d; do cmp "$d" "$(basename "$d")" || fail "$(basename "$d") differs at $opt"; done
    ar t libutil.a | sort | tr '\n' ' ' | grep -qx 'util1.o util2.o ' || fail "archive members"
    no_temps
    echo "make project $opt: ok ($(cat got.txt))"
done

# One-shot multi-file build, C and C++ mixed, with a library on the line.
clang++-14 -O1 main.c vec.c stats.cpp util1.c util2.c -o one-ref 2>/dev/null || fail "clang one-shot"
"$BIN/memlens-c++" -O1 main.c vec.c stats.cpp util1.c util2.c -o one 2>err.txt || fail "memlens one-shot"
./one >got.txt && ./one-ref >want.txt && cmp want.txt got.txt || fail "one-shot output differs"
clang-14 -O2 main.c vec.c -c
clang++-14 -O2 -c stats.cpp
"$BIN/memlens-cc" -O2 main.o vec.o stats.o util1.c util2.c -lstdc++ -o mixed || fail "objects+sources link"
./mixed >got.txt && cmp want.txt got.txt || fail "mixed link output differs"
no_temps
echo "one-shot builds: ok"

# Threads: -pthread and -fopenmp programs link (with the runtime's pthread_create) and run.
cat >thr.c <<'E'
#include <pthread.h>
#include <stdio.h>
static long part[4];
static void *work(void *arg) { long k = (long)arg, s = 0; for (long i = k; i < 4000000; i += 4) s += i % 7; part[k] = s; return NULL; }
int main(void)
{
    pthread_t t[4];
    for (long k = 0; k < 4; k++) pthread_create(&t[k], NULL, work, (void *)k);
    for (int k = 0; k < 4; k++) pthread_join(t[k], NULL);
    printf("%ld\n", part[0] + part[1] + part[2] + part[3]);
    return 0;
}
E
cat >omp.c <<'E'
#include <omp.h>
#include <stdio.h>
int main(void)
{
    long s = 0;
#pragma omp parallel for reduction(+ : s) num_threads(3)
    for (long i = 0; i < 3000000; i++) s += i % 13;
    printf("%ld %d\n", s, omp_get_max_threads() > 0);
    return 0;
}
E
clang-14 -O2 -pthread thr.c -o thr-ref && ./thr-ref >want.txt || fail "clang pthread"
"$BIN/memlens-cc" -O2 -pthread thr.c -o thr && ./thr >got.txt || fail "memlens pthread"
cmp want.txt got.txt || fail "pthread output differs"
if clang-14 -O2 -fopenmp omp.c -o omp-ref 2>/dev/null; then
    ./omp-ref >want.txt || fail "clang openmp run"
    "$BIN/memlens-cc" -O2 -fopenmp omp.c -o omp || fail "memlens openmp build"
    ./omp >got.txt || fail "memlens openmp run"
    cmp want.txt got.txt || fail "openmp output differs"
    echo "-pthread and -fopenmp: ok"
else
    echo "-pthread: ok (no libomp for clang-14: -fopenmp not tested)"
fi
no_temps
