/* Benchmark kernel: pull-style relaxation on a random graph with one region per vertex (a few
 * edges each): tens of millions of short region executions per second. */
#include "memlens.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    long nv = atol(argv[1]), deg = atol(argv[2]), iters = atol(argv[3]), ne = nv * deg;
    long *row = malloc((nv + 1) * sizeof(*row));
    int *col = malloc(ne * sizeof(*col));
    double *rank = malloc(nv * sizeof(*rank)), *next = malloc(nv * sizeof(*next)), chk = 0;
    unsigned long seed = 42;

    if (!row || !col || !rank || !next)
        return 1;
    for (long v = 0; v <= nv; v++)
        row[v] = v * deg;
    for (long e = 0; e < ne; e++) {
        seed = seed * 6364136223846793005UL + 1442695040888963407UL;
        col[e] = (int)((seed >> 33) % (unsigned long)nv);
    }
    for (long v = 0; v < nv; v++)
        rank[v] = 1.0 / (double)nv;
    for (long it = 0; it < iters; it++) {
        long b = row[0];
        for (long v = 0; v < nv; v++) {
            MEMLENS_ROI_BEGIN("vertex");
            long e = row[v + 1];
            double s = 0;
            for (long j = b; j < e; j++)
                s += rank[col[j]];
            next[v] = 0.15 / (double)nv + 0.85 * s / (double)deg;
            b = e;
            MEMLENS_ROI_END("vertex");
        }
        double *t = rank;
        rank = next;
        next = t;
    }
    for (long v = 0; v < nv; v++)
        chk += rank[v];
    printf("%.17g\n", chk);
    return 0;
}
