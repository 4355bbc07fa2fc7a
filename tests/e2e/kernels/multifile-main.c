/* Multi-file program: a region calls kernels defined in multifile-lib.c (counted only in
 * whole-program mode, else listed as not seen), and a region name used in both files. */
#include "memlens.h"

#include <stdio.h>
#include <stdlib.h>

double mf_dot(const double *a, const double *b, long n);
void mf_scale(double *a, double f, long n);
double mf_shared(const double *a, long n);

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000;
    long reps = argc > 2 ? atol(argv[2]) : 3;
    double *x = malloc(n * sizeof(*x)), *y = malloc(n * sizeof(*y)), acc = 0;

    if (!x || !y || n < 1 || reps < 1)
        return 2;
    for (long i = 0; i < n; i++) {
        x[i] = (double)(i % 10) * 0.25;
        y[i] = (double)(i % 7);
    }
    MEMLENS_ROI_BEGIN("calls");
    for (long r = 0; r < reps; r++) {
        acc += mf_dot(x, y, n);
        mf_scale(x, 0.5, n);
    }
    MEMLENS_ROI_END("calls");

    MEMLENS_ROI_BEGIN("shared");
    for (long i = 0; i < n; i++)
        acc += y[i];
    MEMLENS_ROI_END("shared");
    acc += mf_shared(x, n);

    printf("%.17g\n", acc);
    free(x);
    free(y);
    return 0;
}
