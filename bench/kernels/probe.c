/* Benchmark kernel: a small function that is never inlined (a histogram update through a
 * pointer), called tens of millions of times per second from a region around each block of
 * 256 input words. */
#include "memlens.h"

#include <stdio.h>
#include <stdlib.h>

struct hist {
    unsigned long bins[256];
    unsigned long total;
};

__attribute__((noinline)) static void bump(struct hist *h, unsigned v)
{
    h->bins[v & 255]++;
    h->total += v >> 8;
}

int main(int argc, char **argv)
{
    long n = atol(argv[1]), reps = atol(argv[2]);
    unsigned *data = malloc(n * sizeof(*data));
    struct hist *h = calloc(1, sizeof(*h));
    unsigned x = 1;

    if (!data || !h || n % 256)
        return 1;
    for (long i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        data[i] = x;
    }
    for (long r = 0; r < reps; r++)
        for (long b = 0; b < n; b += 256) {
            MEMLENS_ROI_BEGIN("probe");
            for (long i = b; i < b + 256; i++)
                bump(h, data[i]);
            MEMLENS_ROI_END("probe");
        }
    printf("%lu %lu\n", h->total, h->bins[7]);
    return 0;
}
