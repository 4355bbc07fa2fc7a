/* Benchmark kernel: pointer chasing along one random cycle through n nodes, for steps steps. */
#include "memlens.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    long n = atol(argv[1]), steps = atol(argv[2]);
    unsigned long seed = argc > 3 ? strtoul(argv[3], NULL, 10) : 1;
    long *next = malloc(n * sizeof(*next)), *perm = malloc(n * sizeof(*perm)), p = 0;

    if (!next || !perm || n < 2)
        return 1;
    /* Sattolo's shuffle: a single cycle, so the chase visits every node. */
    for (long i = 0; i < n; i++)
        perm[i] = i;
    for (long i = n - 1; i > 0; i--) {
        seed = seed * 6364136223846793005UL + 1442695040888963407UL;
        long j = (long)((seed >> 33) % (unsigned long)i), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (long i = 0; i < n; i++)
        next[perm[i]] = perm[(i + 1) % n];
    MEMLENS_ROI_BEGIN("chase");
    for (long s = 0; s < steps; s++)
        p = next[p];
    MEMLENS_ROI_END("chase");
    printf("%ld\n", p);
    return 0;
}
