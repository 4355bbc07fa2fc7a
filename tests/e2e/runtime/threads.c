/*
 * Many short threads, as a server that creates and joins threads forever: runtime-threads.sh.
 * Usage: threads <threads> <at once> <n> [<dir>]. Each thread reads n longs in region "t"
 * (n * 8 heap bytes); main reads them once in region "main"; prints the sum. With <dir>, the
 * program first runs WARM threads, creates <dir>/ready, waits for <dir>/go, runs <threads>,
 * creates <dir>/done and waits for <dir>/stop (so that memlens top can watch one phase).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "memlens.h"

#define MAX_AT_ONCE 64
#define WARM        100

static long *volatile buf;
static long n;

static void *work(void *arg)
{
    long s = 0;

    MEMLENS_ROI_BEGIN("t");
    for (long i = 0; i < n; i++)
        s += buf[i];
    MEMLENS_ROI_END("t");
    *(long *)arg = s;
    return NULL;
}

/* Runs total threads, at most batch at once; returns the sum of their results, or -1. */
static long run(long total, int batch)
{
    long s = 0, res[MAX_AT_ONCE];
    pthread_t th[MAX_AT_ONCE];

    for (long done = 0; done < total;) {
        int k = total - done < batch ? (int)(total - done) : batch;
        for (int i = 0; i < k; i++)
            if (pthread_create(&th[i], NULL, work, &res[i])) {
                perror("pthread_create");
                return -1;
            }
        for (int i = 0; i < k; i++) {
            pthread_join(th[i], NULL);
            s += res[i];
        }
        done += k;
    }
    return s;
}

static void touch(const char *dir, const char *name)
{
    char path[4096];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    if ((f = fopen(path, "w")))
        fclose(f);
}

static void await(const char *dir, const char *name)
{
    char path[4096];

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    while (access(path, F_OK))
        usleep(10000);
}

int main(int argc, char **argv)
{
    long total = argc > 1 ? atol(argv[1]) : 10000, s = 0, r;
    int batch = argc > 2 ? atoi(argv[2]) : 4;
    const char *dir = argc > 4 ? argv[4] : NULL;

    n = argc > 3 ? atol(argv[3]) : 100;
    if (batch < 1 || batch > MAX_AT_ONCE)
        return 2;
    buf = malloc(n * sizeof(long));
    for (long i = 0; i < n; i++)
        buf[i] = i;
    MEMLENS_ROI_BEGIN("main");
    for (long i = 0; i < n; i++)
        s += buf[i];
    MEMLENS_ROI_END("main");
    if (dir) {
        if ((r = run(WARM, batch)) < 0)
            return 1;
        s += r;
        touch(dir, "ready");
        await(dir, "go");
    }
    if ((r = run(total, batch)) < 0)
        return 1;
    s += r;
    if (dir) {
        touch(dir, "done");
        await(dir, "stop");
    }
    printf("%ld\n", s);
    return 0;
}
