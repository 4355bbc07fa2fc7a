/* Second file of the multi-file test: kernels the region in multifile-main.c calls, and a
 * region with the same name as one in the main file (the two add up). */
#include "memlens.h"

double mf_dot(const double *a, const double *b, long n)
{
    double s = 0;

    for (long i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

void mf_scale(double *a, double f, long n)
{
    for (long i = 0; i < n; i++)
        a[i] *= f;
}

double mf_shared(const double *a, long n)
{
    double s = 0;

    MEMLENS_ROI_BEGIN("shared");
    for (long i = 0; i < n; i++)
        s += a[i];
    MEMLENS_ROI_END("shared");
    return s;
}
