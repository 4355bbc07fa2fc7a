/* The program's errno survives memlens' slow paths (buffer hand-over, thread set-up, waits for
 * the writer or the backend): each thread sets errno, makes many instrumented accesses, and
 * checks that errno still holds its value.  Prints "errno kept" or what changed. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static long n, reps;

static void *work(void *arg)
{
    long tag = (long)arg, bad = 0;
    long *a = calloc((size_t)n, sizeof(*a));
    if (!a)
        return (void *)-1L;
    for (long r = 0; r < reps; r++) {
        errno = (int)(tag + r % 7);
        for (long i = 0; i < n; i++)
            a[i] += a[(i * 7) % n] + i;
        if (errno != (int)(tag + r % 7)) {
            fprintf(stderr, "thread %ld pass %ld: errno %d, want %ld\n", tag, r, errno,
                    tag + r % 7);
            bad++;
        }
    }
    free(a);
    return (void *)bad;
}

int main(int argc, char **argv)
{
    pthread_t th[2];
    long bad = 0;
    n = argc > 1 ? atol(argv[1]) : 100000;
    reps = argc > 2 ? atol(argv[2]) : 40;
    for (long i = 0; i < 2; i++)
        if (pthread_create(&th[i], NULL, work, (void *)(1000 + 100 * i)))
            return 2;
    bad += (long)work((void *)900);
    for (int i = 0; i < 2; i++) {
        void *r;
        pthread_join(th[i], &r);
        bad += (long)r;
    }
    puts(bad ? "errno changed" : "errno kept");
    return bad != 0;
}
