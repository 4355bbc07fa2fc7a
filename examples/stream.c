/* memlens demo: STREAM-like kernels and a pointer chase, each in its own region. */
#include <stdio.h>
#include <stdlib.h>

#include "memlens.h"

static double scale_factor = 3.0;

static void copy(double *c, const double *a, long n)
{
    for (long i = 0; i < n; i++)
        c[i] = a[i];
}

static void triad(double *a, const double *b, const double *c, long n)
{
    for (long i = 0; i < n; i++)
        a[i] = b[i] + scale_factor * c[i];
}

static long chase(const long *next, long start, long steps)
{
    long p = start;

    for (long s = 0; s < steps; s++)
        p = next[p];
    return p;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 4000000;
    int reps = argc > 2 ? atoi(argv[2]) : 5;
    double *a = malloc(n * sizeof(*a)), *b = malloc(n * sizeof(*b)), *c = malloc(n * sizeof(*c));
    long *next = malloc(n * sizeof(*next)), end = 0;
    double sum = 0;

    if (!a || !b || !c || !next) {
        fprintf(stderr, "stream: out of memory\n");
        return 1;
    }
    for (long i = 0; i < n; i++) {
        a[i] = 1.0;
        b[i] = 2.0;
        c[i] = 0.0;
        next[i] = (i * 7919 + 1) % n; /* a permutation when n and 7919 are coprime */
    }
    MEMLENS_ROI_BEGIN("stream");
    for (int r = 0; r < reps; r++) {
        MEMLENS_ROI_BEGIN("copy");
        copy(c, a, n);
        MEMLENS_ROI_END("copy");
        MEMLENS_ROI_BEGIN("triad");
        triad(a, b, c, n);
        MEMLENS_ROI_END("triad");
    }
    MEMLENS_ROI_END("stream");
    MEMLENS_ROI_BEGIN("chase");
    end = chase(next, 0, n);
    MEMLENS_ROI_END("chase");
    for (long i = 0; i < n; i++)
        sum += a[i];
    printf("stream: n=%ld reps=%d checksum=%.1f end=%ld\n", n, reps, sum, end);
    free(a);
    free(b);
    free(c);
    free(next);
    return 0;
}
