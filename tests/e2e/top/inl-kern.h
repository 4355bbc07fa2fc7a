/* Kernels of tests/e2e/top-inline.sh, in a header: inlined into main unless built with
 * -DML_NOINLINE (the ground truth, where each kernel is a function of its own). */
#include <string.h>

#ifdef ML_NOINLINE
#define KERNEL static __attribute__((noinline))
#else
#define KERNEL static inline
#endif

/* y += a x over n doubles: 16n bytes read, 8n written. */
KERNEL void axpy(double *y, const double *x, long n, double a)
{
    for (long i = 0; i < n; i++)
        y[i] += a * x[i];
}

/* m bytes copied (a memcpy of variable size): m read, m written. */
KERNEL void copy(char *d, const char *s, long m)
{
    memcpy(d, s, m);
}

/* Calls axpy: inlined, its code is axpy's (inlined into main through scale), not scale's. */
KERNEL void scale(double *y, const double *x, long n)
{
    axpy(y, x, n, 0.25);
    for (long i = 0; i < n; i++)
        y[i] *= 0.5;
}
