/*
 * Trace test kernel: access patterns with closed forms, each in a phase named by
 * MEMLENS_MARK. Prints the address range of every array to stderr ("range name lo hi")
 * so that the test can count the accesses to them, and every result to stdout.
 * Usage: trace-closed <n> <stride> <k>   (n elements, stride s, k elements for memcpy/memset)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memlens.h"

typedef double v4d __attribute__((vector_size(32)));

double gbuf[4096]; /* a global array: summed in phase sum_global */

static void range(const char *name, const void *p, size_t bytes)
{
    fprintf(stderr, "range %s %#lx %#lx\n", name, (unsigned long)(uintptr_t)p,
            (unsigned long)((uintptr_t)p + bytes));
}

/* Sums b[lo, hi) by halves: every element read once, at any depth. */
__attribute__((noinline)) static double rsum(const double *b, long lo, long hi)
{
    if (hi - lo <= 4) {
        double s = 0;
        for (long i = lo; i < hi; i++)
            s += b[i];
        return s;
    }
    return rsum(b, lo, (lo + hi) / 2) + rsum(b, (lo + hi) / 2, hi);
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000, s = argc > 2 ? atol(argv[2]) : 7;
    long k = argc > 3 ? atol(argv[3]) : 100, m = 1;
    int8_t *i8 = malloc(n);
    int32_t *i32 = malloc(n * sizeof(*i32)), *idx = malloc(n * sizeof(*idx));
    double *a = malloc(n * sizeof(*a)), *b = malloc(n * sizeof(*b)), *c = malloc(n * sizeof(*c));
    v4d *v = malloc((n / 4 + 1) * sizeof(*v));
    long long si = 0;
    double sd = 0, f = argc > 4 ? atof(argv[4]) : 3.0;
    v4d sv = {0, 0, 0, 0};
    uint32_t x = 12345;

    if (!i8 || !i32 || !idx || !a || !b || !c || !v || k > n)
        return 1;
    while ((m + 1) * (m + 1) <= n)
        m++;
    for (long i = 0; i < n; i++) {
        i8[i] = (int8_t)(i % 100);
        i32[i] = (int32_t)(i * 3);
        a[i] = 0;
        b[i] = (double)(i % 13);
        c[i] = (double)(i % 7);
        x = x * 1103515245u + 12345u; /* the test computes the same sequence */
        idx[i] = (int32_t)((x >> 8) % (uint32_t)n);
    }
    for (long i = 0; i < n / 4; i++)
        v[i] = (v4d){1, 2, 3, (double)i};
    for (long i = 0; i < 4096; i++)
        gbuf[i] = (double)i;
    range("i8", i8, n);
    range("i32", i32, n * sizeof(*i32));
    range("idx", idx, n * sizeof(*idx));
    range("a", a, n * sizeof(*a));
    range("b", b, n * sizeof(*b));
    range("c", c, n * sizeof(*c));
    range("v", v, (n / 4) * sizeof(*v));
    range("gbuf", gbuf, sizeof(gbuf));

    MEMLENS_MARK("sum_i8");
    for (long i = 0; i < n; i++)
        si += i8[i];
    MEMLENS_MARK("sum_i32");
    for (long i = 0; i < n; i++)
        si += i32[i];
    MEMLENS_MARK("sum_f64");
    for (long i = 0; i < n; i++)
        sd += b[i];
    MEMLENS_MARK("sum_v32");
    for (long i = 0; i < n / 4; i++)
        sv += v[i];
    MEMLENS_MARK("sum_global");
    for (long i = 0; i < 4096; i++)
        sd += gbuf[i];
    MEMLENS_MARK("copy");
    MEMLENS_ROI_BEGIN("copy");
    for (long i = 0; i < n; i++)
        a[i] = b[i];
    MEMLENS_ROI_END("copy");
    MEMLENS_MARK("triad");
    for (long i = 0; i < n; i++)
        a[i] = b[i] + f * c[i];
    MEMLENS_MARK("strided");
    for (long i = 0; i < n; i += s)
        sd += b[i];
    MEMLENS_MARK("gather");
    for (long i = 0; i < n; i++)
        sd += b[idx[i]];
    MEMLENS_MARK("nested");
    for (long i = 0; i < m; i++)
        for (long j = 0; j < i; j++)
            sd += c[i * m + j];
    MEMLENS_MARK("memops");
    memcpy(a, c, k * sizeof(*a));
    memset(b, 0, k * sizeof(*b));
    MEMLENS_MARK("recursion");
    sd += rsum(c, 0, n);
    MEMLENS_MARK("end");
    printf("%lld %.17g %.17g %.17g\n", si, sd, sv[0] + sv[1] + sv[2] + sv[3], a[n / 2]);
    return 0;
}
