/* Loop-body regions in call-free loops whose trip counts run around the sampling period: the
 * plain copy of such a loop runs the count rule's skips as strips bounded by min(trip count,
 * budget) (docs/regions.md, "Strip-mined plain copies"). Each execution reads 8 heap bytes
 * through a volatile load.
 *   strip P ROUNDS: ROUNDS times, for every trip count m in 0..3P+1, runs the four loops
 *   (a long counter from 0, an int counter from 0, a long counter from an offset to offset + m
 *   compared with !=, all three kept rolled; and a long counter the optimiser may unroll) once
 *   each with m iterations.
 */
#include "memlens.h"

#include <stdio.h>
#include <stdlib.h>

#define LD(p, i) (((volatile const double *)(p))[i])

__attribute__((noinline)) static double slong(const double *x, long m)
{
    double s = 0;
#pragma clang loop unroll(disable)
    for (long i = 0; i < m; i++) {
        MEMLENS_ROI_BEGIN("slong");
        s += LD(x, i);
        MEMLENS_ROI_END("slong");
    }
    return s;
}

__attribute__((noinline)) static double sint(const double *x, int m)
{
    double s = 0;
#pragma clang loop unroll(disable)
    for (int i = 0; i < m; i++) {
        MEMLENS_ROI_BEGIN("sint");
        s += LD(x, i);
        MEMLENS_ROI_END("sint");
    }
    return s;
}

__attribute__((noinline)) static double soff(const double *x, long lo, long hi)
{
    double s = 0;
#pragma clang loop unroll(disable)
    for (long i = lo; i != hi; i++) {
        MEMLENS_ROI_BEGIN("soff");
        s += LD(x, i - lo);
        MEMLENS_ROI_END("soff");
    }
    return s;
}

/* Left to the optimiser: unrolled at -O2 and -O3 (eight BEGINs a trip, not strip-mined). */
__attribute__((noinline)) static double sunroll(const double *x, long m)
{
    double s = 0;
    for (long i = 0; i < m; i++) {
        MEMLENS_ROI_BEGIN("sunroll");
        s += LD(x, i);
        MEMLENS_ROI_END("sunroll");
    }
    return s;
}

int main(int argc, char **argv)
{
    long p, rounds, top;
    double *a, s = 0;

    if (argc != 4)
        return 2;
    p = atol(argv[2]);
    rounds = atol(argv[3]);
    top = 3 * p + 1;
    if (p < 1 || rounds < 1 || !(a = malloc((top + 1) * sizeof(*a))))
        return 1;
    for (long i = 0; i <= top; i++)
        a[i] = (double)(i % 3);
    for (long r = 0; r < rounds; r++)
        for (long m = 0; m <= top; m++) {
            s += slong(a, m);
            s += sint(a, (int)m);
            s += soff(a, 1000 * r - 7, 1000 * r - 7 + m);
            s += sunroll(a, m);
        }
    printf("%.1f\n", s);
    return 0;
}
