/* memlens top test program: two threads copy in region "top_copy" until a stop file appears. */
#include <memlens.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* Volatile n, src and dst: the markers let the optimiser keep loop-invariant loads out of the
   loop, and the test counts them in every execution (24 bytes). */
static volatile long n;
static const char *stop_file;
static volatile int stop;

struct job {
    double *volatile src, *volatile dst;
    long execs;
};

/* One execution reads 8n bytes of src and writes 8n bytes of dst, both heap. */
static void *work(void *arg)
{
    struct job *j = arg;

    while (!stop) {
        MEMLENS_ROI_BEGIN("top_copy");
        long len = n;
        double *dst = j->dst, *src = j->src;
        for (long i = 0; i < len; i++)
            dst[i] = src[i] + 1.0;
        MEMLENS_ROI_END("top_copy");
        j->execs++;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    struct job jobs[2];
    pthread_t th[2];

    if (argc != 3)
        return 2;
    n = atol(argv[1]);
    stop_file = argv[2];
    for (int k = 0; k < 2; k++) {
        jobs[k].src = calloc((size_t)n, sizeof(double));
        jobs[k].dst = calloc((size_t)n, sizeof(double));
        jobs[k].execs = 0;
        /* The arrays escape, so the optimiser keeps every access. */
        printf("%p %p\n", (void *)jobs[k].src, (void *)jobs[k].dst);
    }
    fflush(stdout);
    for (int k = 0; k < 2; k++)
        pthread_create(&th[k], NULL, work, &jobs[k]);
    /* Poll for the stop file: the test, not a clock, decides how long the program runs. */
    for (int i = 0; i < 1200 && access(stop_file, F_OK) != 0; i++)
        usleep(50000);
    stop = 1;
    for (int k = 0; k < 2; k++)
        pthread_join(th[k], NULL);
    fprintf(stderr, "execs %ld %ld\n", jobs[0].execs, jobs[1].execs);
    return 0;
}
