/* Queue benchmark program: 16-byte events through the producer ABI, or memcpy of the same bytes. */
#include "format/queue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static double now(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/*
 * queue <n>: appends n one-unit events (word 1 an address walking an 8-byte
 * array, so address partitioning spreads them over the workers), then waits
 * until the backend has read all of them (__memlens_q_sync).
 * memcpy <n>: copies n x 16 bytes in 1 MiB pieces between two 64 MiB buffers
 * (larger than the last-level cache, as the queue's chunks are once written).
 * Both print "<mode> <n> <seconds> <cpu seconds of this process>".
 */
int main(int argc, char **argv)
{
    uint64_t n = argc > 2 ? strtoull(argv[2], NULL, 10) : 0;
    struct rusage ru;
    double t0, t1;

    if (argc < 3 || !n) {
        fprintf(stderr, "usage: queue-bench queue|memcpy <events>\n");
        return 2;
    }
    if (!strcmp(argv[1], "queue")) {
        uint64_t base = 0x7f0000000000ull;
        ml_q_put(ML_Q_W0(1, 0, 0, 0), base); /* attach outside the timed loop */
        __memlens_q_sync();
        t0 = now();
        for (uint64_t i = 0; i < n; i++)
            ml_q_put(ML_Q_W0(1, 0, 3, i & 0xffff), base + (i << 3));
        __memlens_q_sync();
        t1 = now();
    } else if (!strcmp(argv[1], "memcpy")) {
        const size_t big = 64u << 20, piece = 1u << 20;
        char *src = malloc(big), *dst = malloc(big);
        uint64_t bytes = n * 16, off = 0;
        if (!src || !dst)
            return 2;
        memset(src, 1, big);
        memset(dst, 2, big);
        t0 = now();
        for (uint64_t done = 0; done < bytes; done += piece) {
            size_t k = bytes - done < piece ? (size_t)(bytes - done) : piece;
            memcpy(dst + off, src + off, k);
            off = (off + piece) % big;
        }
        t1 = now();
        if (dst[n % big] != 1) /* keep the copy */
            return 3;
        free(src);
        free(dst);
    } else {
        return 2;
    }
    getrusage(RUSAGE_SELF, &ru);
    printf("%s %llu %.6f %.6f\n", argv[1], (unsigned long long)n, t1 - t0,
           (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
               (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6);
    return 0;
}
