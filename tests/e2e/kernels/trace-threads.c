/*
 * Trace test kernel: T pthreads each sum their own slice of a shared array in a MEMLENS_MARK
 * phase, then an OpenMP loop sums the whole array inside a region (OMP_NUM_THREADS workers).
 * Prints the array's range to stderr and the results to stdout.
 * Usage: trace-threads <n> <threads>
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "memlens.h"

static double *b;
static long n, nt;

struct job {
    long lo, hi;
    double sum;
};

static void *worker(void *p)
{
    struct job *j = p;
    double s = 0;
    long lo = j->lo, hi = j->hi;

    MEMLENS_MARK("slice");
    for (long i = lo; i < hi; i++)
        s += b[i];
    MEMLENS_MARK("done");
    j->sum = s;
    return NULL;
}

int main(int argc, char **argv)
{
    pthread_t th[64];
    struct job jobs[64];
    double total = 0, omp = 0;

    n = argc > 1 ? atol(argv[1]) : 10000;
    nt = argc > 2 ? atol(argv[2]) : 4;
    if (nt < 1 || nt > 64)
        return 1;
    b = malloc(n * sizeof(*b));
    if (!b)
        return 1;
    for (long i = 0; i < n; i++)
        b[i] = (double)(i % 10);
    fprintf(stderr, "range b %#lx %#lx\n", (unsigned long)(uintptr_t)b,
            (unsigned long)(uintptr_t)(b + n));
    for (long t = 0; t < nt; t++) {
        jobs[t].lo = n * t / nt;
        jobs[t].hi = n * (t + 1) / nt;
        if (pthread_create(&th[t], NULL, worker, &jobs[t]))
            return 1;
    }
    for (long t = 0; t < nt; t++) {
        pthread_join(th[t], NULL);
        total += jobs[t].sum;
    }
    MEMLENS_ROI_BEGIN("omp");
#pragma omp parallel for reduction(+ : omp) schedule(static)
    for (long i = 0; i < n; i++)
        omp += b[i];
    MEMLENS_ROI_END("omp");
    printf("%.17g %.17g\n", total, omp);
    return 0;
}
