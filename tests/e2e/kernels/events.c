/* Hardware counter test kernel: regions whose software event counts are known in advance. */
#include "memlens.h"

#include <pthread.h>
#include <stdio.h>
#include <sys/mman.h>
#include <time.h>

#define PAGES 512

static double cpu_seconds(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Burns at least 20 ms of this thread's CPU time inside "spin". */
static void *spin(void *arg)
{
    volatile long x = 0;

    (void)arg;
    MEMLENS_ROI_BEGIN("spin");
    for (double t0 = cpu_seconds(); cpu_seconds() - t0 < 0.020;)
        for (int i = 0; i < 1000; i++)
            x += i;
    MEMLENS_ROI_END("spin");
    return NULL;
}

int main(void)
{
    long page = 4096, sum = 0;
    struct timespec ms = {0, 1000 * 1000};
    pthread_t th;
    char *m;

    m = mmap(NULL, PAGES * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return 1;
    madvise(m, PAGES * page, MADV_NOHUGEPAGE);
    /* Each first touch of an anonymous page is one page fault. */
    MEMLENS_ROI_BEGIN("faults");
    for (long i = 0; i < PAGES; i++)
        m[i * page] = (char)i;
    MEMLENS_ROI_END("faults");
    /* The same pages again: no fault. */
    MEMLENS_ROI_BEGIN("quiet");
    for (long i = 0; i < PAGES; i++)
        sum += m[i * page];
    MEMLENS_ROI_END("quiet");
    /* Each sleep gives up the CPU: at least one context switch. */
    MEMLENS_ROI_BEGIN("sleep");
    for (int i = 0; i < 5; i++)
        nanosleep(&ms, NULL);
    MEMLENS_ROI_END("sleep");
    for (int i = 0; i < 3; i++)
        spin(NULL);
    if (pthread_create(&th, NULL, spin, NULL))
        return 1;
    pthread_join(th, NULL);
    printf("%ld\n", sum);
    return 0;
}
