/* pthreads: a region inside the thread function over the thread's own chunk (chunks of different
 * sizes), and a region in main around creating the threads, doing one chunk itself and joining. */
#include "memlens.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define NTHREADS 4

struct chunk {
    const double *in;
    double *out;
    long lo, hi;
    double sum;
};

/* Not inlined into main, so at every -O level main's call reads the four fields and writes sum
 * through the pointer argument (32 + 8 bytes of a chunk on main's stack), inside pt_spawn. */
__attribute__((noinline)) static void *work(void *arg)
{
    struct chunk *c = arg;
    const double *in = c->in; /* fields go to locals: the region reads only the arrays */
    double *out = c->out, s = 0;
    long lo = c->lo, hi = c->hi;

    MEMLENS_ROI_BEGIN("pt_body");
    for (long i = lo; i < hi; i++) {
        out[i] = in[i] * 2.0;
        s += in[i];
    }
    MEMLENS_ROI_END("pt_body");
    c->sum = s;
    return NULL;
}

int main(int argc, char **argv)
{
    long base = argc > 1 ? atol(argv[1]) : 1000;
    struct chunk c[NTHREADS + 1];
    pthread_t th[NTHREADS];
    double *in, *out, chk = 0;
    long n = 0;

    if (base < 1)
        return 2;
    /* Chunk k has (k + 1) * base elements: every thread's share is different. */
    for (int k = 0; k <= NTHREADS; k++)
        n += (k + 1) * base;
    in = malloc(n * sizeof(*in));
    out = malloc(n * sizeof(*out));
    if (!in || !out)
        return 1;
    for (long i = 0; i < n; i++)
        in[i] = (double)(i % 19);
    for (long k = 0, lo = 0; k <= NTHREADS; k++) {
        c[k] = (struct chunk){in, out, lo, lo + (k + 1) * base, 0};
        lo += (k + 1) * base;
    }

    MEMLENS_ROI_BEGIN("pt_spawn");
    for (int k = 0; k < NTHREADS; k++)
        if (pthread_create(&th[k], NULL, work, &c[k + 1]))
            return 1;
    work(&c[0]);
    for (int k = 0; k < NTHREADS; k++)
        pthread_join(th[k], NULL);
    MEMLENS_ROI_END("pt_spawn");

    for (int k = 0; k <= NTHREADS; k++)
        chk += c[k].sum;
    for (long i = 0; i < n; i++)
        chk += out[i];
    printf("%.17g\n", chk);
    free(in);
    free(out);
    return 0;
}
