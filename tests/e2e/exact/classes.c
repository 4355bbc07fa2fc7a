/* Known bytes per address class: a region writes n doubles to the heap, a global and the stack,
 * another reads them back (1x, 2x, 3x), on the main thread (n) and on a second thread (n / 2). */
#include <memlens.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define N 4096
double G[N];

/* Pointers arrive as arguments: the static classes cannot tell stack from heap, addresses can. */
__attribute__((noinline)) static void fill(double *p, int n, double v)
{
    for (int i = 0; i < n; i++)
        p[i] = v + i;
}

__attribute__((noinline)) static double sum(const double *p, int n, int reps)
{
    double s = 0;
    for (int r = 0; r < reps; r++)
        for (int i = 0; i < n; i++)
            s += p[i];
    return s;
}

static double work(int n)
{
    double s[N], t;
    double *h = malloc(sizeof(double) * (size_t)n);

    if (!h)
        abort();
    MEMLENS_ROI_BEGIN("fill");
    fill(h, n, 1);
    fill(G, n, 2);
    fill(s, n, 3);
    MEMLENS_ROI_END("fill");
    MEMLENS_ROI_BEGIN("sum");
    t = sum(h, n, 1) + sum(G, n, 2) + sum(s, n, 3);
    MEMLENS_ROI_END("sum");
    free(h);
    return t;
}

static void *thread(void *arg)
{
    static double t;
    t = work(*(int *)arg / 2);
    return &t;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    pthread_t th;
    void *r;
    double t;

    if (n < 2 || n > N)
        return 2;
    t = work(n);
    if (pthread_create(&th, NULL, thread, &n) || pthread_join(th, &r))
        return 1;
    printf("%g\n", t + *(double *)r);
    return 0;
}
