/* An instrumented plugin for runtime-dlopen.sh: a region read by the caller's and its own threads.
 */
#include <pthread.h>

#include "memlens.h"

#define MAX_THREADS 16

/* Reads n longs of a in region "plug": n * 8 heap bytes (a is an argument) per call. */
long plugin_sum(const long *a, long n)
{
    long s = 0;

    MEMLENS_ROI_BEGIN("plug");
    for (long i = 0; i < n; i++)
        s += a[i];
    MEMLENS_ROI_END("plug");
    return s;
}

struct job {
    const long *a;
    long n, s;
};

static void *worker(void *p)
{
    struct job *j = p;

    j->s = plugin_sum(j->a, j->n);
    return NULL;
}

/* Runs plugin_sum on nt threads of the plugin's own and returns the sum of their results. */
long plugin_threads(const long *a, long n, int nt)
{
    pthread_t th[MAX_THREADS];
    struct job j[MAX_THREADS];
    long s = 0;

    if (nt > MAX_THREADS)
        nt = MAX_THREADS;
    for (int i = 0; i < nt; i++) {
        j[i] = (struct job){a, n, 0};
        if (pthread_create(&th[i], NULL, worker, &j[i]))
            return -1;
    }
    for (int i = 0; i < nt; i++) {
        pthread_join(th[i], NULL);
        s += j[i].s;
    }
    return s;
}
