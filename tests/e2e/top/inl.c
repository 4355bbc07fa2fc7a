/* tests/e2e/top-inline.sh: a region whose kernels (inl-kern.h) the compiler inlines.
 *   inl N M REPS: per rep, axpy (16N read, 8N written), copy (M and M), scale (axpy again, then
 *   8N read and 8N written of its own), and main's own sum (8N read). The arrays are reached
 *   through volatile globals, so their class is decided at run time. */
#include "memlens.h"

#include <stdio.h>
#include <stdlib.h>

#include "inl-kern.h"

double *volatile gx, *volatile gy;
char *volatile gs, *volatile gd;

int main(int argc, char **argv)
{
    long n, m, reps;
    double s = 0;

    if (argc != 4)
        return 2;
    n = atol(argv[1]);
    m = atol(argv[2]);
    reps = atol(argv[3]);
    gx = malloc(n * sizeof(double));
    gy = malloc(n * sizeof(double));
    gs = malloc(m);
    gd = malloc(m);
    if (!gx || !gy || !gs || !gd)
        return 1;
    for (long i = 0; i < n; i++)
        gx[i] = i, gy[i] = 1;
    memset(gs, 7, m);
    for (long r = 0; r < reps; r++) {
        double *x = gx, *y = gy;
        char *d = gd, *src = gs;
        MEMLENS_ROI_BEGIN("work");
        axpy(y, x, n, 0.5);
        copy(d, src, m);
        scale(y, x, n);
        for (long i = 0; i < n; i++)
            s += x[i];
        MEMLENS_ROI_END("work");
    }
    printf("%g %g %d\n", s, gy[n - 1], gd[m - 1]);
    return 0;
}
