/* A loop-body region split by an inner loop (a pull-style gather, as bench/kernels/vertex.c):
 * the block after BEGIN and the block holding END run equally often, so they share one counter
 * (docs/regions.md "Inline enter and exit"). Vertex v has v % 4 edges; execution k of the run
 * reads row[v + 1] and its edges' col and x (4 + 8 bytes each) and writes y[v]: 16 + 12 (v % 4)
 * heap bytes. Usage: share <vertices> <sweeps> */
#include "memlens.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    long nv = argc > 2 ? atol(argv[1]) : 0, sweeps = argc > 2 ? atol(argv[2]) : 0;
    long *row = malloc((nv + 1) * sizeof(*row));
    int *col = malloc((nv * 3 + 1) * sizeof(*col));
    double *x = malloc((nv + 1) * sizeof(*x)), *y = malloc((nv + 1) * sizeof(*y)), chk = 0;

    if (nv < 1 || sweeps < 1 || !row || !col || !x || !y)
        return 2;
    row[0] = 0;
    for (long v = 0; v < nv; v++) {
        row[v + 1] = row[v] + v % 4;
        x[v] = (double)(v % 5);
    }
    for (long e = 0; e < row[nv]; e++)
        col[e] = (int)((e * 7919) % nv);
    for (long s = 0; s < sweeps; s++) {
        long b = row[0];
        for (long v = 0; v < nv; v++) {
            MEMLENS_ROI_BEGIN("split");
            long e = row[v + 1];
            double t = 0;
            for (long j = b; j < e; j++)
                t += x[col[j]];
            y[v] = 0.5 * t + 1;
            b = e;
            MEMLENS_ROI_END("split");
        }
        for (long v = 0; v < nv; v++)
            chk += y[v];
    }
    printf("%.17g\n", chk);
    return 0;
}
