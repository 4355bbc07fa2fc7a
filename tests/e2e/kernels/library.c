/* Library calls whose effect their arguments tell (tests/e2e/region-library.sh): string
 * functions' bytes, allocation sizes and deallocation calls, and the time share of not-seen
 * calls (a region that sleeps in nanosleep against one that only computes). */
#include "memlens.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void *volatile sink; /* allocations escape: the optimiser keeps them */

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 50;
    char *buf = malloc(1000), *dst = malloc(1000);
    long tot = 0;

    memset(buf, 'x', 999);
    buf[999] = 0;
    sink = buf;
    sink = dst;
    MEMLENS_ROI_BEGIN("strings");
    for (long i = 0; i < n; i++) {
        tot += (long)strlen(buf + i);              /* reads 1000 - i bytes */
        tot += (long)strnlen(buf, 100 + i);        /* reads 100 + i bytes */
        tot += (char *)memchr(buf, 0, 1000) - buf; /* reads 1000 bytes */
        tot += stpcpy(dst, buf + 900) - dst;       /* reads and writes 100 bytes */
        strncpy(dst, buf, 64);                     /* writes 64 bytes */
        sink = dst;
    }
    MEMLENS_ROI_END("strings");
    MEMLENS_ROI_BEGIN("alloc");
    for (long i = 0; i < n; i++) {
        char *a = malloc(16 + i), *b = calloc(4, 8 + i);
        sink = a;
        sink = b;
        a = realloc(a, 200);
        sink = a;
        free(a);
        free(b);
    }
    MEMLENS_ROI_END("alloc");
    MEMLENS_ROI_BEGIN("sleep");
    for (int i = 0; i < 5; i++) {
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    MEMLENS_ROI_END("sleep");
    printf("%ld\n", tot);
    free(buf);
    free(dst);
    return 0;
}
