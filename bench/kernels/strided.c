/* Benchmark kernel: sum of every s-th double of an n-element array, reps times. */
#include "memlens.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    long n = atol(argv[1]), s = atol(argv[2]), reps = atol(argv[3]);
    double *a = malloc(n * sizeof(*a)), sum = 0;

    if (!a || s < 1)
        return 1;
    for (long i = 0; i < n; i++)
        a[i] = (double)(i % 17);
    for (long r = 0; r < reps; r++) {
        MEMLENS_ROI_BEGIN("strided");
        for (long i = r % s; i < n; i += s)
            sum += a[i];
        MEMLENS_ROI_END("strided");
    }
    printf("%.17g\n", sum);
    return 0;
}
