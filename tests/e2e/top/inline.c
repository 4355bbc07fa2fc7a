/* --top test: kern (kern.h) and fill are inlined into caller and main from -O1 on. */
#include <stdio.h>
#include <stdlib.h>
#include "kern.h"

static double *fill(long n)
{
    double *a = malloc(n * sizeof(*a));
    for (long i = 0; i < n; i++)
        a[i] = (double)i / n;
    return a;
}

__attribute__((noinline)) double caller(const double *a, long n, int reps)
{
    double s = 0;
    for (int r = 0; r < reps; r++)
        s += kern(a, n);
    return s;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 100000;
    double *a = fill(n);
    printf("%g\n", caller(a, n, 20));
    free(a);
    return 0;
}
