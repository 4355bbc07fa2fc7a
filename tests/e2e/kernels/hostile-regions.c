/* Regions whose names hold terminal escape sequences, control bytes, C1 controls and bytes that
 * are not UTF-8: a worker thread copies n doubles per execution in each until a stop file
 * appears (or once, when it exists from the start). */
#include <memlens.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static long n;
static volatile int stop;
double *volatile keep[2];

/* One execution of each region reads 8n heap bytes and writes 8n. */
static void *work(void *arg)
{
    double *src = keep[0], *dst = keep[1];
    long *execs = arg;

    do {
        MEMLENS_ROI_BEGIN("\x1b[2J\x1b]0;pwned\x07red");
        for (long i = 0; i < n; i++)
            dst[i] = src[i] + 1.0;
        MEMLENS_ROI_END("\x1b[2J\x1b]0;pwned\x07red");
        MEMLENS_ROI_BEGIN("c1\xc2\x9b"
                          "31m\xff\xfe"
                          "bad\r\n");
        for (long i = 0; i < n; i++)
            src[i] = dst[i] * 0.5;
        MEMLENS_ROI_END("c1\xc2\x9b"
                        "31m\xff\xfe"
                        "bad\r\n");
        ++*execs;
    } while (!stop);
    return NULL;
}

int main(int argc, char **argv)
{
    pthread_t th;
    long execs = 0;

    if (argc != 3)
        return 2;
    n = atol(argv[1]);
    keep[0] = calloc((size_t)n, sizeof(double));
    keep[1] = calloc((size_t)n, sizeof(double));
    if (!keep[0] || !keep[1])
        return 1;
    stop = access(argv[2], F_OK) == 0;
    if (pthread_create(&th, NULL, work, &execs))
        return 1;
    /* The test, not a clock, decides how long the program runs (bounded: 60 s). */
    for (int i = 0; i < 6000 && !stop && access(argv[2], F_OK) != 0; i++)
        usleep(10000);
    stop = 1;
    pthread_join(th, NULL);
    printf("%ld\n", execs);
    return 0;
}
