/* Benchmark kernel: PageRank iterations (pull style, CSR of in-edges) on a generated graph of
 * v vertices with k random in-edges each. */
#include "memlens.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    long v = atol(argv[1]), k = atol(argv[2]), iters = atol(argv[3]), ne = v * k;
    long *rowptr = malloc((v + 1) * sizeof(*rowptr));
    int *src = malloc(ne * sizeof(*src)), *outdeg = calloc(v, sizeof(*outdeg));
    double *rank = malloc(v * sizeof(*rank)), *contrib = malloc(v * sizeof(*contrib)), chk = 0;
    const double d = 0.85;
    unsigned long seed = 777;

    if (!rowptr || !src || !outdeg || !rank || !contrib)
        return 1;
    for (long i = 0; i <= v; i++)
        rowptr[i] = i * k;
    for (long j = 0; j < ne; j++) {
        seed = seed * 6364136223846793005UL + 1442695040888963407UL;
        src[j] = (int)((seed >> 33) % (unsigned long)v);
        outdeg[src[j]]++;
    }
    for (long i = 0; i < v; i++) {
        if (!outdeg[i])
            outdeg[i] = 1;
        contrib[i] = 1.0 / (double)v / outdeg[i];
    }
    for (long it = 0; it < iters; it++) {
        MEMLENS_ROI_BEGIN("pagerank");
        long b = rowptr[0];
        for (long i = 0; i < v; i++) {
            long e = rowptr[i + 1];
            double s = 0;
            for (long j = b; j < e; j++)
                s += contrib[src[j]];
            rank[i] = (1 - d) / (double)v + d * s;
            b = e;
        }
        for (long i = 0; i < v; i++)
            contrib[i] = rank[i] / outdeg[i];
        MEMLENS_ROI_END("pagerank");
    }
    for (long i = 0; i < v; i++)
        chk += rank[i];
    printf("%.12f\n", chk);
    return 0;
}
