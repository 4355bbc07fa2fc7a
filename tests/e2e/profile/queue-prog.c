/* Producer for the queue tests: appends known events through the producer ABI (format/queue.h). */
#include "format/queue.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/*
 * Thread t appends n events: event i has kind 1 + i % 3 and word 1 =
 * t << 32 | i; every fifth one instead is a two-unit event of kind 4 (word 1
 * the same, then two value words). tests/e2e/profile-queue.sh computes the
 * per-thread counts and sums from the same rule.
 */
static void produce(uint64_t t, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        uint64_t w1 = t << 32 | i;
        if (i % 5 == 0)
            ml_q_put2(ML_Q_W0(4, 1, 0, i & 0xffff), w1, ~i, i * 3);
        else
            ml_q_put(ML_Q_W0(1 + i % 3, 0, 0, i & 0xffff), w1);
    }
}

struct arg {
    uint64_t t, n;
    pthread_barrier_t *bar;
    int mode;
};

static void *thread_fn(void *p)
{
    struct arg *a = p;

    produce(a->t, a->n);
    if (a->bar)
        pthread_barrier_wait(a->bar);
    if (a->mode == 1) /* exit() from this thread while the other one waits */
        exit(3);
    if (a->mode == 2)
        for (;;)
            pause();
    return NULL;
}

/* A blob of len pseudo-random bytes; prints its FNV-1a so the test can compare. */
static void blob(uint64_t tag, uint64_t len)
{
    unsigned char *b = malloc(len ? len : 1);
    uint64_t h = 0xcbf29ce484222325ull, x = 88172645463325252ull;

    for (uint64_t i = 0; i < len; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        b[i] = (unsigned char)x;
        h = (h ^ b[i]) * 0x100000001b3ull;
    }
    __memlens_q_blob(tag, b, len);
    printf("blob %llu %llu %llu\n", (unsigned long long)tag, (unsigned long long)len,
           (unsigned long long)h);
    free(b);
}

static void run_threads(uint64_t nt, uint64_t n, int together, int mode)
{
    pthread_t th[256];
    struct arg a[256];
    pthread_barrier_t bar;

    if (together)
        pthread_barrier_init(&bar, NULL, (unsigned)nt + (mode == 1));
    for (uint64_t t = 0; t < nt; t++) {
        a[t] = (struct arg){.t = t + 1,
                            .n = n + t,
                            .bar = together ? &bar : NULL,
                            .mode = mode == 1 && t == 0 ? 1
                                    : mode              ? 2
                                                        : 0};
        if (pthread_create(&th[t], NULL, thread_fn, &a[t]))
            exit(2);
        if (!together)
            pthread_join(th[t], NULL);
    }
    if (mode == 1) {
        pthread_barrier_wait(&bar);
        for (;;)
            pause();
    }
    if (together)
        for (uint64_t t = 0; t < nt; t++)
            pthread_join(th[t], NULL);
}

static volatile sig_atomic_t usr1;

static void on_usr1(int sig)
{
    (void)sig;
    usr1 = 1;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    uint64_t n = argc > 2 ? strtoull(argv[2], NULL, 10) : 1000;
    uint64_t nt = argc > 3 ? strtoull(argv[3], NULL, 10) : 1;

    if (nt > 255)
        return 2;
    if (!strcmp(mode, "threads")) { /* main sends a blob, nt threads run at once */
        produce(0, n);
        blob(7, 3 * n + 5);
        run_threads(nt, n, 1, 0);
    } else if (!strcmp(mode, "sequential")) { /* one thread after the other: slots reused */
        produce(0, n);
        run_threads(nt, n, 0, 0);
    } else if (!strcmp(mode, "kill") || !strcmp(mode, "segv") || !strcmp(mode, "abort")) {
        produce(0, n);
        run_threads(nt, n, 1, 0);
        if (mode[0] == 'k') {
            printf("ready %d\n", (int)getpid());
            fflush(stdout);
            for (;;)
                pause();
        }
        if (mode[0] == 's')
            *(volatile int *)(uintptr_t)8 = 1;
        abort();
    } else if (!strcmp(mode, "thread-exit")) { /* thread 1 calls exit(3) */
        produce(0, n);
        run_threads(nt, n, 1, 1);
    } else if (!strcmp(mode, "fork")) { /* the child's events must not reach the profile */
        pid_t p;
        int st;
        produce(0, n);
        fflush(stdout);
        if ((p = fork()) == 0) {
            produce(0, 5 * n);
            run_threads(2, n, 1, 0);
            _exit(0);
        }
        if (p < 0 || waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st))
            return 2;
        produce(0, n);
    } else if (!strcmp(mode, "forever")) { /* until SIGUSR1, then n more: pid on stdout */
        signal(SIGUSR1, on_usr1);
        printf("%d\n", (int)getpid());
        fflush(stdout);
        while (!usr1)
            produce(0, 1u << 16);
        produce(0, n);
        printf("done\n");
    } else if (!strcmp(mode, "sync")) { /* sync() returns once all was read */
        produce(0, n);
        __memlens_q_sync();
        printf("synced\n");
    } else {
        fprintf(stderr, "usage: queue-prog threads|sequential|kill|segv|abort|thread-exit|fork|"
                        "forever|sync <n> [<threads>]\n");
        return 2;
    }
    return 0;
}
