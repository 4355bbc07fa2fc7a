/* timeline: two threads each stream over their own arrays for a fixed number of passes inside
 * one region execution, so a sampler sees the region's bytes grow while it is open. */
#include "memlens.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

struct job {
    const double *in;
    double *out;
    long n, passes;
    double sum;
};

static void *stream(void *arg)
{
    struct job *j = arg;
    const double *in = j->in;
    double *out = j->out;
    long n = j->n, passes = j->passes;

    /* Each pass reads in[] and writes out[]: 8 + 8 bytes per element. */
    MEMLENS_ROI_BEGIN("tl_stream");
    for (long p = 0; p < passes; p++)
        for (long i = 0; i < n; i++)
            out[i] = in[i] * 0.5 + (double)p;
    MEMLENS_ROI_END("tl_stream");
    j->sum = out[n - 1];
    return NULL;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1 << 16;
    long passes = argc > 2 ? atol(argv[2]) : 100;
    struct job jobs[2];
    pthread_t th[2];
    double *mem;

    if (n < 1 || passes < 1)
        return 2;
    mem = malloc(4 * n * sizeof(*mem));
    if (!mem)
        return 1;
    /* Writes all four arrays once: 4 * 8 * n bytes. */
    MEMLENS_ROI_BEGIN("tl_init");
    for (long i = 0; i < 4 * n; i++)
        mem[i] = (double)(i % 19);
    MEMLENS_ROI_END("tl_init");
    for (int k = 0; k < 2; k++) {
        jobs[k] = (struct job){mem + 2 * k * n, mem + (2 * k + 1) * n, n, passes, 0};
        if (pthread_create(&th[k], NULL, stream, &jobs[k]))
            return 1;
    }
    for (int k = 0; k < 2; k++)
        pthread_join(th[k], NULL);
    printf("%.17g\n", jobs[0].sum + jobs[1].sum);
    free(mem);
    return 0;
}
