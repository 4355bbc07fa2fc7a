/* Loop-body regions whose markers the instrumenter carries in a register (call-free loops,
 * docs/regions.md "Inline enter and exit"): a plain loop body, a break out of the region, a
 * region open when its loop starts (END then BEGIN inside the loop), a return from inside the
 * region, and a region in an inner loop. Every execution reads a known number of heap bytes,
 * through volatile loads so that the optimiser neither merges nor duplicates them at any level. */
#include "memlens.h"

#include <stdio.h>
#include <stdlib.h>

#define LD(p, i) (((volatile const double *)(p))[i])

/* body: n executions per call, each reads a[i] (8 bytes). */
__attribute__((noinline)) static double body(const double *a, long n)
{
    double s = 0;
    for (long i = 0; i < n; i++) {
        MEMLENS_ROI_BEGIN("body");
        s += LD(a, i);
        MEMLENS_ROI_END("body");
    }
    return s;
}

/* brk: executions up to and including the one that breaks (a[i] < 0), each reads a[i]. */
__attribute__((noinline)) static double brk(const double *a, long n)
{
    double s = 0;
    for (long i = 0; i < n; i++) {
        MEMLENS_ROI_BEGIN("brk");
        double x = LD(a, i);
        if (x < 0)
            break;
        s += x;
        MEMLENS_ROI_END("brk");
    }
    return s;
}

/* open: begun before the loop, ended and begun again in it: n + 1 executions per call; the
 * loop's executions read a[i], the first one also reads a[0] before the loop. */
__attribute__((noinline)) static double open_loop(const double *a, long n)
{
    double s;
    MEMLENS_ROI_BEGIN("open");
    s = LD(a, 0);
    for (long i = 0; i < n; i++) {
        s += LD(a, i);
        MEMLENS_ROI_END("open");
        MEMLENS_ROI_BEGIN("open");
    }
    MEMLENS_ROI_END("open");
    return s;
}

/* ret: returns from inside the region at the first a[i] equal to x; each execution reads a[i]. */
__attribute__((noinline)) static long ret(const double *a, long n, double x)
{
    for (long i = 0; i < n; i++) {
        MEMLENS_ROI_BEGIN("ret");
        if (LD(a, i) == x)
            return i;
        MEMLENS_ROI_END("ret");
    }
    return -1;
}

/* inner: a region per inner iteration of a 2-level loop nest, each reads a[j]. */
__attribute__((noinline)) static double inner(const double *a, long rows, long cols)
{
    double s = 0;
    for (long r = 0; r < rows; r++)
        for (long j = 0; j < cols; j++) {
            MEMLENS_ROI_BEGIN("inner");
            s += LD(a, j) * (double)r;
            MEMLENS_ROI_END("inner");
        }
    return s;
}

/* swap: a region per middle iteration, reading k doubles in an inner loop through a pointer that
 * swaps between a stack and a heap buffer every outer iteration (so its class is tested at run
 * time, once per outer iteration): rows * 8 executions per call, those of even rows read the stack
 * buffer, those of odd rows the heap one. */
__attribute__((noinline)) static double swap(const double *h, long rows, long k)
{
    double st[64];
    const double *p = st, *q = h, *t;
    double s = 0;

    for (long i = 0; i < 64; i++)
        ((volatile double *)st)[i] = (double)i;
    for (long r = 0; r < rows; r++) {
        for (long j = 0; j < 8; j++) {
            MEMLENS_ROI_BEGIN("swap");
            for (long i = 0; i < k; i++)
                s += LD(p, i) * (double)j;
            MEMLENS_ROI_END("swap");
        }
        t = p;
        p = q;
        q = t;
    }
    return s;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000, reps = argc > 2 ? atol(argv[2]) : 10;
    double *a = malloc(n * sizeof(*a)), s = 0;
    long found = 0;

    if (!a || n < 4)
        return 1;
    for (long i = 0; i < n; i++)
        a[i] = (double)(i % 7);
    a[n / 2] = -1;
    for (long r = 0; r < reps; r++) {
        s += body(a, n);
        s += brk(a, n);
        s += open_loop(a, n);
        found += ret(a, n, -1);
        s += inner(a, 3, n / 4);
        s += swap(a, 5, 1 + r % 7);
    }
    printf("%.1f %ld\n", s, found);
    free(a);
    return 0;
}
