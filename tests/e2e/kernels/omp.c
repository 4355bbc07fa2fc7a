/* OpenMP parallel loops inside regions: a triad on global arrays and the same triad on heap
 * arrays (firstprivate pointers), so the test can separate data bytes from OpenMP bookkeeping. */
#include "memlens.h"

#include <stdio.h>
#include <stdlib.h>

#define NMAX (1L << 18)

double g_a[NMAX], g_b[NMAX], g_c[NMAX];

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1200;
    double f = argc > 2 ? atof(argv[2]) : 3.0, chk = 0;
    double *a, *b, *c;

    if (n < 1 || n > NMAX)
        return 2;
    a = malloc(n * sizeof(*a));
    b = malloc(n * sizeof(*b));
    c = malloc(n * sizeof(*c));
    if (!a || !b || !c)
        return 1;
    for (long i = 0; i < n; i++) {
        a[i] = g_a[i] = 0;
        b[i] = g_b[i] = (double)(i % 13);
        c[i] = g_c[i] = (double)(i % 7) * 0.5;
    }

    MEMLENS_ROI_BEGIN("omp_global");
#pragma omp parallel for schedule(static) firstprivate(n, f)
    for (long i = 0; i < n; i++)
        g_a[i] = g_b[i] + f * g_c[i];
    MEMLENS_ROI_END("omp_global");

    MEMLENS_ROI_BEGIN("omp_heap");
#pragma omp parallel for schedule(static) firstprivate(n, f, a, b, c)
    for (long i = 0; i < n; i++)
        a[i] = b[i] + f * c[i];
    MEMLENS_ROI_END("omp_heap");

    for (long i = 0; i < n; i++)
        chk += a[i] * 3 + g_a[i];
    printf("%.17g\n", chk);
    free(a);
    free(b);
    free(c);
    return 0;
}
