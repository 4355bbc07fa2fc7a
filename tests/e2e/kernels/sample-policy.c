/* Sampling policy kernel: frequent nested regions on two threads, rare, sparse and dense regions.
 */
#include "memlens.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define K 64 /* longs read per execution of "outer" */

/* Heap arrays escape through this, so the optimiser keeps every access. */
void *volatile sample_escape;

static long execs;

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* "outer" reads K longs and holds "inner", which writes one: 8 K and 8 bytes per execution. */
static void *frequent(void *arg)
{
    long *a = calloc(K + 1, sizeof(long)), sum = 0;

    (void)arg;
    if (!a)
        exit(1);
    sample_escape = a;
    /* Volatile: the markers do not stop the optimiser from keeping a[] in registers. */
    volatile long *v = a;
    for (long e = 0; e < execs; e++) {
        MEMLENS_ROI_BEGIN("outer");
        for (int i = 0; i < K; i++)
            sum += v[i];
        MEMLENS_ROI_BEGIN("inner");
        v[K] = sum + e;
        MEMLENS_ROI_END("inner");
        MEMLENS_ROI_END("outer");
    }
    free(a);
    return NULL;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";

    if (!strcmp(mode, "frequent") && argc > 2) {
        pthread_t th;
        execs = atol(argv[2]);
        if (pthread_create(&th, NULL, frequent, NULL))
            return 1;
        frequent(NULL);
        pthread_join(th, NULL);
    } else if (!strcmp(mode, "rare")) {
        /* Three quick executions: a "first execution" rule would always measure one. */
        volatile long x = 0;
        for (int e = 0; e < 3; e++) {
            MEMLENS_ROI_BEGIN("rare");
            x += e;
            MEMLENS_ROI_END("rare");
        }
    } else if (!strcmp(mode, "sparse")) {
        /*
         * Three 2 ms executions at least 300 ms apart: sparse in time, the time rule measures
         * them. The pause is also at least 20 times the last execution, whatever a loaded
         * machine made of its 2 ms, so that the rule (9 times) holds on any machine.
         */
        struct timespec run = {0, 2 * 1000 * 1000};
        double took = 0;
        for (int e = 0; e < 3; e++) {
            double t0;
            if (e) {
                double pause = 20 * took > 0.3 ? 20 * took : 0.3;
                struct timespec idle = {(time_t)pause, (long)((pause - (time_t)pause) * 1e9)};
                nanosleep(&idle, NULL);
            }
            t0 = now_s();
            MEMLENS_ROI_BEGIN("sparse");
            nanosleep(&run, NULL);
            MEMLENS_ROI_END("sparse");
            took = now_s() - t0;
        }
    } else if (!strcmp(mode, "dense")) {
        /* Five 30 ms executions back to back: the time rule must not measure them all. */
        struct timespec run = {0, 30 * 1000 * 1000};
        for (int e = 0; e < 5; e++) {
            MEMLENS_ROI_BEGIN("dense");
            nanosleep(&run, NULL);
            MEMLENS_ROI_END("dense");
        }
    } else {
        fprintf(stderr, "usage: sample-policy frequent N | rare | sparse | dense\n");
        return 2;
    }
    puts("done");
    return 0;
}
