/*
 * Trace test kernel: ends in the way argv[1] names, after reading an array of n doubles once
 * in phase "work". Prints the array's range to stderr.
 * Usage: trace-faults <mode> <n>
 *   exit | segv | abort | thread-exit | fork | exec | term-wait | kill-wait
 * term-wait and kill-wait read the array forever (phase "loop") after creating the file
 * named by argv[3] once the first pass is done, so that the test can signal them.
 */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "memlens.h"

static double *a;
static long n;
static volatile double sink;

static double pass(void)
{
    double s = 0;

    for (long i = 0; i < n; i++)
        s += a[i];
    return s;
}

static void *exiting_thread(void *p)
{
    (void)p;
    MEMLENS_MARK("thread");
    sink = pass();
    exit(3); /* the whole process ends here, from a thread */
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "exit";

    n = argc > 2 ? atol(argv[2]) : 1000;
    a = malloc(n * sizeof(*a));
    if (!a)
        return 1;
    for (long i = 0; i < n; i++)
        a[i] = (double)i;
    fprintf(stderr, "range a %#lx %#lx\n", (unsigned long)(uintptr_t)a,
            (unsigned long)(uintptr_t)(a + n));
    MEMLENS_MARK("work");
    sink = pass();
    MEMLENS_MARK("after");
    if (!strcmp(mode, "segv")) {
        volatile double *p = (double *)(uintptr_t)16;
        sink = *p;
    } else if (!strcmp(mode, "abort")) {
        abort();
    } else if (!strcmp(mode, "thread-exit")) {
        pthread_t t;
        pthread_create(&t, NULL, exiting_thread, NULL);
        pthread_join(t, NULL);
        return 0; /* not reached: the thread calls exit */
    } else if (!strcmp(mode, "fork")) {
        pid_t pid = fork();
        if (pid == 0) {
            MEMLENS_MARK("child");
            sink = pass();
            _exit(0);
        }
        waitpid(pid, NULL, 0);
        printf("child %d\n", (int)pid);
    } else if (!strcmp(mode, "exec")) {
        char *args[] = {"/bin/true", NULL};
        execv(args[0], args);
        return 9;
    } else if (!strcmp(mode, "term-wait") || !strcmp(mode, "kill-wait")) {
        int fd;
        MEMLENS_MARK("loop");
        sink = pass();
        fd = open(argv[3], O_CREAT | O_WRONLY, 0600);
        close(fd);
        for (;;)
            sink = pass();
    }
    printf("%g\n", sink);
    return 0;
}
