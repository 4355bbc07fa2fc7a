/* Benchmark kernel: STREAM-like triad a = b + f * c over n doubles, reps times. */
#include "memlens.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    long n = atol(argv[1]), reps = atol(argv[2]);
    double f = argc > 3 ? atof(argv[3]) : 3.0, chk = 0;
    double *a = malloc(n * sizeof(*a)), *b = malloc(n * sizeof(*b)), *c = malloc(n * sizeof(*c));

    if (!a || !b || !c)
        return 1;
    for (long i = 0; i < n; i++) {
        a[i] = 0;
        b[i] = (double)(i % 13);
        c[i] = (double)(i % 7);
    }
    for (long r = 0; r < reps; r++) {
        MEMLENS_ROI_BEGIN("stream");
        for (long i = 0; i < n; i++)
            a[i] = b[i] + f * c[i];
        MEMLENS_ROI_END("stream");
        b[r % n] += a[(r * 7) % n];
    }
    for (long i = 0; i < n; i += 97)
        chk += a[i];
    printf("%.17g\n", chk);
    return 0;
}
