/* Exact-mode check: an OpenMP loop and pthreads, each in a region. */
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include "memlens.h"
#define N 1000000
static double a[N], b[N];
static void *worker(void *arg) {
    long id = (long)arg; double s = 0;
    MEMLENS_ROI_BEGIN("pt");
    for (long i = id; i < N; i += 4) s += a[i];
    MEMLENS_ROI_END("pt");
    return (void*)(long)s;
}
int main(void) {
    for (int i = 0; i < N; i++) a[i] = 1;
    MEMLENS_ROI_BEGIN("omp");
#pragma omp parallel for
    for (int i = 0; i < N; i++) b[i] = 2 * a[i];
    MEMLENS_ROI_END("omp");
    pthread_t t[4];
    for (long i = 0; i < 4; i++) pthread_create(&t[i], 0, worker, (void*)i);
    long tot = 0; for (int i = 0; i < 4; i++) { void *r; pthread_join(t[i], &r); tot += (long)r; }
    printf("%g %ld\n", b[5], tot);
    return 0;
}
