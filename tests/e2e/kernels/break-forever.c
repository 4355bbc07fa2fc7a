/* A region begun in the body of an endless loop and left by 'break': the region must end on the
 * break, although the code after the loop is reachable only through the region's BEGIN. */
#include "memlens.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000;
    long pos = argc > 2 ? atol(argv[2]) : 10;
    long i, sum = 0;
    int *a = malloc(n * sizeof(*a));

    if (!a || pos < 0 || pos >= n)
        return 2;
    for (i = 0; i < n; i++)
        a[i] = i == pos ? -1 : (int)i;
    for (i = 0;; i++) {
        MEMLENS_ROI_BEGIN("body");
        int v = ((volatile int *)a)[i]; /* volatile: stays after the BEGIN */
        if (v < 0)
            break;
        sum += v;
        MEMLENS_ROI_END("body");
    }
    for (long k = 0; k < n; k++) /* after the loop: outside the region */
        sum += a[k];
    printf("%ld %ld\n", i, sum);
    free(a);
    return 0;
}
