/*
 * Host for runtime-dlopen.sh: loads the plugin, calls it from main, from the plugin's threads
 * and from a thread the host started before the load, unloads it, and again; exits with 7, or
 * dies of SIGTERM with <end> "term".
 * Usage: plugin-host <plugin.so> <n> <rounds> <threads> <keep-last-open> [<end>]
 */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memlens.h"

typedef long (*sum_fn)(const long *, long);
typedef long (*threads_fn)(const long *, long, int);

static long *buf;
static long n;
static pthread_barrier_t go, done;
static sum_fn helper_sum;
static long helper_result;
static int rounds;

/* A host thread older than every load: it calls into the plugin once per round. */
static void *helper(void *arg)
{
    (void)arg;
    for (int r = 0; r < rounds; r++) {
        pthread_barrier_wait(&go);
        helper_result = helper_sum(buf, n);
        pthread_barrier_wait(&done);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "./plugin.so";
    int nt, keep;
    long host = 0;
    pthread_t h;

    n = argc > 2 ? atol(argv[2]) : 1000;
    rounds = argc > 3 ? atoi(argv[3]) : 2;
    nt = argc > 4 ? atoi(argv[4]) : 3;
    keep = argc > 5 ? atoi(argv[5]) : 0;
    buf = malloc(n * sizeof(*buf));
    for (long i = 0; i < n; i++)
        buf[i] = i;
    pthread_barrier_init(&go, NULL, 2);
    pthread_barrier_init(&done, NULL, 2);
    if (pthread_create(&h, NULL, helper, NULL))
        return 1;
    MEMLENS_ROI_BEGIN("host");
    for (long i = 0; i < n; i++)
        host += buf[i];
    MEMLENS_ROI_END("host");
    printf("host %ld\n", host);
    for (int r = 0; r < rounds; r++) {
        void *so = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        sum_fn sum;
        threads_fn thr;

        if (!so) {
            printf("dlopen failed: %s\n", dlerror());
            return 1;
        }
        sum = (sum_fn)(uintptr_t)dlsym(so, "plugin_sum");
        thr = (threads_fn)(uintptr_t)dlsym(so, "plugin_threads");
        if (!sum || !thr)
            return 1;
        helper_sum = sum;
        pthread_barrier_wait(&go);
        pthread_barrier_wait(&done);
        printf("round %d: %ld %ld %ld\n", r, sum(buf, n), thr(buf, n, nt), helper_result);
        if (r < rounds - 1 || !keep)
            dlclose(so);
    }
    pthread_join(h, NULL);
    fflush(stdout);
    if (argc > 6 && !strcmp(argv[6], "term"))
        raise(SIGTERM);
    return 7;
}
