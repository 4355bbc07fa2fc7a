/* A coarse region (5 long executions) beside a fine one (1000 short ones): at 1 in 100 with a
 * fixed phase, the coarse one ends with nothing measured. */
#include <stdio.h>
#include <stdlib.h>

#include "memlens.h"

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 100000, s = 0;
    long *a = calloc((size_t)n, sizeof(*a));

    if (!a)
        return 1;
    for (int k = 0; k < 5; k++) {
        MEMLENS_ROI_BEGIN("coarse");
        for (long i = 0; i < n; i++)
            a[i] += i ^ k;
        MEMLENS_ROI_END("coarse");
    }
    for (int k = 0; k < 1000; k++) {
        MEMLENS_ROI_BEGIN("fine");
        s += a[k % n];
        MEMLENS_ROI_END("fine");
    }
    printf("%ld\n", s);
    free(a);
    return 0;
}
