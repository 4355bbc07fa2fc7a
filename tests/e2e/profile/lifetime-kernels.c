/* Kernels for tests/e2e/profile-lifetime.sh: each allocation site's lifetimes are known (heap
 * blocks, a local array, a global). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Per thread: the worker threads add to their own (the printed sum is main's, deterministic). */
static _Thread_local long sum;
static void *leaked[8];
/* Pointers stored here escape, so that -O2 keeps every allocation (as a real program would). */
static void *volatile sink;

/* Objects freed in the iteration that made them (sizes 16, 32, 48, 64 in turn). */
__attribute__((noinline)) static void k_iter(int n)
{
    for (int i = 0; i < n; i++) {
        long *p = malloc(16 * (size_t)(i % 4 + 1)); /* ITER */
        p[0] = i;
        p[1] = i * 2;
        sink = p;
        sum += p[0] + p[1];
        free(p);
    }
}

/* Objects kept past their iteration, freed at the end of the call. */
__attribute__((noinline)) static void k_kept(int n)
{
    long **v = malloc((size_t)n * sizeof(*v)); /* KEPT_ARRAY */
    for (int i = 0; i < n; i++) {
        v[i] = malloc(24); /* KEPT */
        v[i][0] = i;
    }
    for (int i = 0; i < n; i++) {
        sum += v[i][0];
        free(v[i]);
    }
    free(v);
}

/* Returned to the caller, which frees it in the same iteration of its own loop. */
__attribute__((noinline)) static long *make(int i)
{
    long *p = malloc(40); /* RETURNED */
    p[0] = i;
    return p;
}

__attribute__((noinline)) static void k_returned(int n)
{
    for (int i = 0; i < n; i++) {
        long *p = make(i);
        sum += p[0];
        free(p);
    }
}

/* Never freed. */
__attribute__((noinline)) static void k_leak(void)
{
    for (int i = 0; i < 5; i++) {
        leaked[i] = malloc(100); /* LEAK */
        memset(leaked[i], i, 100);
    }
}

/* Grown by realloc ten times, freed after the loop. */
__attribute__((noinline)) static void k_realloc(void)
{
    char *p = malloc(8); /* REALLOC_FIRST */
    p[0] = 1;
    for (int i = 0; i < 10; i++) {
        p = realloc(p, 16 * (size_t)(i + 1)); /* REALLOC */
        p[16 * i] = (char)i;
    }
    sum += p[0] + p[144];
    free(p);
}

/* Zeroed block freed in the same call. */
__attribute__((noinline)) static void k_calloc(int n)
{
    long *p = calloc((size_t)n, sizeof(long)); /* CALLOC */
    sink = p;
    for (int i = 0; i < n; i++)
        sum += p[i] + i;
    free(p);
}

/* Library allocations: strdup and fopen name their call sites. */
__attribute__((noinline)) static void k_library(const char *s, int n)
{
    for (int i = 0; i < n; i++) {
        char *d = strdup(s); /* STRDUP */
        sum += (long)strlen(d);
        free(d);
    }
    FILE *f = fopen("/dev/null", "r"); /* FOPEN */
    if (f) {
        sum += fgetc(f);
        fclose(f);
    }
}

/* A global table: one object, announced at start, never freed. */
long table[32]; /* GLOBAL_TAB */

__attribute__((noinline)) static void fill(char *buf, int i)
{
    memset(buf, i, 64);
    sum += buf[i % 64];
}

/*
 * A local array whose address escapes: at -O2 its lifetime markers make one object per iteration,
 * at -O0 (no markers) one per call, released when the function returns.
 */
__attribute__((noinline)) static void k_stack(int n)
{
    for (int i = 0; i < n; i++) {
        char buf[64]; /* STACK_ITER */
        fill(buf, i);
        table[i % 32] += buf[1];
    }
}

static void *worker(void *arg)
{
    k_iter((int)(long)arg);
    return NULL;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 100, threads = argc > 2 ? atoi(argv[2]) : 0;
    pthread_t t[4];

    k_iter(n);
    k_kept(n);
    k_returned(n);
    k_leak();
    k_realloc();
    k_calloc(n);
    k_library("memlens", n);
    k_stack(n);
    for (int i = 0; i < threads && i < 4; i++)
        pthread_create(&t[i], NULL, worker, (void *)(long)n);
    for (int i = 0; i < threads && i < 4; i++)
        pthread_join(t[i], NULL);
    printf("sum %ld\n", sum);
    return 0;
}
