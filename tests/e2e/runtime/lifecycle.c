/* Runtime life cycle: fork, exit from a thread, signals, crash. Mode in argv[1]. */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "memlens.h"

static long n;
static long *buf;

/* Reads n longs in a region: n * 8 heap bytes per call. */
static long work(void)
{
    long s = 0;

    MEMLENS_ROI_BEGIN("work");
    for (long i = 0; i < n; i++)
        s += buf[i];
    MEMLENS_ROI_END("work");
    return s;
}

static void *thread_exit_main(void *arg)
{
    (void)arg;
    printf("%ld\n", work());
    fflush(stdout);
    exit(3); /* exit() from a non-main thread must still write the profile */
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "plain";
    pthread_t t;

    n = argc > 2 ? atol(argv[2]) : 1000;
    buf = calloc(n, sizeof(*buf));
    for (long i = 0; i < n; i++)
        buf[i] = i;
    printf("%ld\n", work());
    if (!strcmp(mode, "fork")) {
        pid_t pid;
        fflush(stdout);
        pid = fork();
        if (pid == 0) { /* the child works twice: its own profile shows exactly that */
            printf("%ld\n", work() + work());
            return 0;
        }
        waitpid(pid, NULL, 0);
        return 0;
    }
    if (!strcmp(mode, "thread-exit")) {
        pthread_create(&t, NULL, thread_exit_main, NULL);
        pthread_join(t, NULL);
        return 0;
    }
    fflush(stdout);
    if (!strcmp(mode, "sigterm"))
        raise(SIGTERM);
    if (!strcmp(mode, "segv"))
        *(volatile int *)(uintptr_t)8 = 1;
    return 0;
}
