/* Benchmark kernel: pointer chasing along one random cycle with one region per hop (each hop
 * reads the next index and a payload word): one short region execution per cache miss. */
#include "memlens.h"

#include <stdio.h>
#include <stdlib.h>

struct node {
    long next;
    long val;
};

int main(int argc, char **argv)
{
    long n = atol(argv[1]), steps = atol(argv[2]), p = 0, sum = 0;
    unsigned long seed = 7;
    struct node *g = malloc(n * sizeof(*g));
    long *perm = malloc(n * sizeof(*perm));

    if (!g || !perm || n < 2)
        return 1;
    for (long i = 0; i < n; i++)
        perm[i] = i;
    for (long i = n - 1; i > 0; i--) { /* Sattolo: one cycle */
        seed = seed * 6364136223846793005UL + 1442695040888963407UL;
        long j = (long)((seed >> 33) % (unsigned long)i), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (long i = 0; i < n; i++) {
        g[perm[i]].next = perm[(i + 1) % n];
        g[i].val = i & 15;
    }
    for (long s = 0; s < steps; s++) {
        MEMLENS_ROI_BEGIN("hop");
        sum += g[p].val;
        p = g[p].next;
        MEMLENS_ROI_END("hop");
    }
    printf("%ld %ld\n", p, sum);
    return 0;
}
