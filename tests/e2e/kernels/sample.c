/* Sampling kernel: regions run many times, nested, recursive and through callees, so that
 * MEMLENS_SAMPLE=2 must give exactly half the counts of a full run. */
#include <stdio.h>
#include <stdlib.h>

#include "memlens.h"

/* Reads n longs: a callee of region code (cloned for the region, original for the plain copy). */
__attribute__((noinline)) static long sum(const long *p, long len)
{
    long s = 0;

    for (long i = 0; i < len; i++)
        s += p[i];
    return s;
}

/* A region of its own in a function called from region code: always nested, inherits. */
__attribute__((noinline)) static void scale(long *p, long len, long k)
{
    MEMLENS_ROI_BEGIN("scale");
    for (long i = 0; i < len; i++)
        p[i] = p[i] * k % 1000003;
    MEMLENS_ROI_END("scale");
}

/* Recursion: the region is entered again while open (one execution per outermost entry). */
__attribute__((noinline)) static long rec(const long *a, long depth)
{
    long s;

    MEMLENS_ROI_BEGIN("rec");
    s = a[depth] + (depth ? rec(a, depth - 1) : 0);
    MEMLENS_ROI_END("rec");
    return s;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000, reps = argc > 2 ? atol(argv[2]) : 100, total = 0;
    long *a = malloc(n * sizeof(*a));

    for (long i = 0; i < n; i++)
        a[i] = i;
    for (long r = 0; r < reps; r++) {
        MEMLENS_ROI_BEGIN("outer");
        total += sum(a, n);
        if (r % 3 == 0) {
            /* A nested region in the same function: measured exactly when outer is. */
            MEMLENS_ROI_BEGIN("inner");
            total += sum(a, n / 2);
            MEMLENS_ROI_END("inner");
        }
        scale(a, n, r + 2);
        if (total < 0)
            break; /* never taken: an exit edge out of the region */
        MEMLENS_ROI_END("outer");
        total += rec(a, r % 8);
    }
    printf("%ld %ld\n", total, a[n - 1]);
    free(a);
    return 0;
}
