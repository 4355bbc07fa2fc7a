/* Kernels with known dependences for tests/e2e/profile-dep.sh (lines are named by tags). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 64
#define M 16

static int acc;

static __attribute__((noinline)) void put(int *p, int i, int v)
{
    p[i] = v; /* CALLEE */
}

static void carried(int *a, int n, int k)
{
    for (int i = k; i < n; i++) /* CARRIEDLOOP */
        a[i] = a[i - k] + 1;    /* CARRIED */
}

static void *thread_main(void *arg)
{
    int *a = calloc(1000, sizeof(int));
    carried(a, 1000, (int)(long)arg);
    free(a);
    return NULL;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1000, k = argc > 2 ? atoi(argv[2]) : 3;
    int *a = calloc(n, sizeof(int)), *b = calloc(n, sizeof(int)), *c = calloc(n, sizeof(int));
    int *src = calloc(n, sizeof(int)), *dst = calloc(n, sizeof(int)), *u = calloc(n, sizeof(int));
    static int m[N][M];
    long sum = 0;
    pthread_t t[2];

    carried(a, n, k);
    for (int i = 0; i < n; i++)
        c[i] = i ^ k; /* INIT */
    for (int i = 0; i < n; i++)
        b[i] = c[i] * 2; /* INDEPENDENT */
    for (int i = 0; i < n; i++)
        acc += c[i]; /* REDUCTION */
    for (int i = 0; i < n; i++)
        src[i] = i * 3 + k;                    /* FILL */
    memcpy(dst, src, (size_t)n * sizeof(int)); /* COPY */
    for (int i = 0; i < n; i++)
        sum += dst[i];                 /* READCOPY */
    for (int i = 1; i < N; i++)        /* OUTER */
        for (int j = 0; j < M; j++)    /* INNER */
            m[i][j] = m[i - 1][j] + 1; /* NESTED */
    for (int i = 1; i < n; i++)        /* CALLERLOOP */
        put(a, i, a[i - 1] + 1);       /* CALLER */
    for (int i = 0; i < n; i++)
        u[i] = i ^ 5;               /* UFILL */
    for (int i = 0; i + 1 < n; i++) /* ANTILOOP */
        u[i] = u[i + 1] * 2;        /* ANTI */
    for (int i = 0; i < n; i++)     /* ANTIINLOOP */
        b[i] = b[i] + u[i];         /* ANTIIN */
    if (argc > 3)
        for (int i = 0; i < 2; i++)
            pthread_create(&t[i], NULL, thread_main, (void *)(long)k);
    if (argc > 3)
        for (int i = 0; i < 2; i++)
            pthread_join(t[i], NULL);
    printf("%d %d %d %ld %d %d %d\n", a[n - 1], b[n - 1], acc, sum, m[N - 1][M - 1], dst[n - 1],
           u[n / 2]);
    free(a);
    free(b);
    free(c);
    free(src);
    free(dst);
    free(u);
    return 0;
}
