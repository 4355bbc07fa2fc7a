/* A loop-body region in a call-free loop that is left only with the region closed: its sampled
 * BEGIN calls __memlens_enter_leaf, which counts a measured execution that reads no clock at
 * once and leaves its END inline (docs/regions.md, "Inline enter and exit"). Each execution reads
 * 8 heap bytes through a volatile load.
 *   leaf threads T N REPS: T threads each run N executions REPS times.
 *   leaf signal N: runs N executions at a time until a profiling-timer handler, which runs its
 *   own region "sig" (16 global bytes read and 8 written per execution), has run at least 20 times.
 *   leaf nested N REPS: REPS times the N executions alone, then REPS times inside an execution of
 *   "leaf" opened by the caller (whose BEGINs in the loop are then part of that execution: N
 *   times 8 bytes per measured one). The loop's plain copy has no END: an unmeasured execution
 *   is ended at its BEGIN, and a BEGIN inside an open unmeasured one must leave it open once.
 */
#include "memlens.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#define LD(p, i) (((volatile const double *)(p))[i])

static double *a, g8[8];
static long n, reps;
static volatile sig_atomic_t hits;

__attribute__((noinline)) static double leaf(const double *x, long m)
{
    double s = 0;
    for (long i = 0; i < m; i++) {
        MEMLENS_ROI_BEGIN("leaf");
        s += LD(x, i);
        MEMLENS_ROI_END("leaf");
    }
    return s;
}

static void *worker(void *arg)
{
    double s = 0;
    (void)arg;
    for (long r = 0; r < reps; r++)
        s += leaf(a, n);
    return (void *)(long)(s > 0);
}

static void on_prof(int sig)
{
    int k = hits;
    (void)sig;
    MEMLENS_ROI_BEGIN("sig");
    g8[k & 7] += LD(g8, (k + 1) & 7);
    MEMLENS_ROI_END("sig");
    hits = k + 1;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    n = atol(argv[argc > 3 && strcmp(argv[1], "nested") ? 3 : 2]);
    a = malloc(n * sizeof(*a));
    if (!a || n < 1)
        return 1;
    for (long i = 0; i < n; i++)
        a[i] = (double)(i % 5);
    if (!strcmp(argv[1], "threads") && argc > 4) {
        long t = atol(argv[2]);
        pthread_t th[16];
        reps = atol(argv[4]);
        if (t < 1 || t > 16)
            return 2;
        for (long i = 0; i < t; i++)
            if (pthread_create(&th[i], NULL, worker, NULL))
                return 1;
        for (long i = 0; i < t; i++)
            pthread_join(th[i], NULL);
        printf("threads done\n");
        return 0;
    }
    if (!strcmp(argv[1], "nested") && argc > 3) {
        double s = 0;
        reps = atol(argv[3]);
        for (long r = 0; r < reps; r++)
            s += leaf(a, n);
        for (long r = 0; r < reps; r++) {
            MEMLENS_ROI_BEGIN("leaf");
            s += leaf(a, n);
            MEMLENS_ROI_END("leaf");
        }
        printf("nested done %d\n", s > 0);
        return 0;
    }
    if (!strcmp(argv[1], "signal")) {
        struct sigaction sa;
        struct itimerval it = {{0, 2000}, {0, 2000}};
        double s = 0;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_prof;
        sigemptyset(&sa.sa_mask);
        if (sigaction(SIGPROF, &sa, NULL) || setitimer(ITIMER_PROF, &it, NULL))
            return 1;
        while (hits < 20)
            s += leaf(a, n);
        memset(&it, 0, sizeof(it));
        setitimer(ITIMER_PROF, &it, NULL);
        printf("signal done %d\n", s > 0);
        return 0;
    }
    return 2;
}
