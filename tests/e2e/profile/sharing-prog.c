/* Threads for tests/e2e/profile-sharing.sh: false sharing (adjacent fields) and a hand-over. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

/* Not static: an internal struct may be split into separate globals at -O2. */
struct {
    long a, b;
} pairs __attribute__((aligned(64)));
int buf[256] __attribute__((aligned(64)));
static int iters;

static void *write_a(void *arg)
{
    (void)arg;
    for (int i = 0; i < iters; i++)
        pairs.a += i; /* FIELD_A */
    return NULL;
}

static void *write_b(void *arg)
{
    (void)arg;
    for (int i = 0; i < iters; i++)
        pairs.b += 2 * i; /* FIELD_B */
    return NULL;
}

static void *produce(void *arg)
{
    (void)arg;
    for (int i = 0; i < 256; i++)
        buf[i] = i * 7; /* PRODUCE */
    return NULL;
}

static void *consume(void *arg)
{
    long s = 0;

    for (int i = 0; i < 256; i++)
        s += buf[i]; /* CONSUME */
    *(long *)arg = s;
    return NULL;
}

int main(int argc, char **argv)
{
    pthread_t t[2];
    long sum = 0;

    iters = argc > 1 ? atoi(argv[1]) : 100000;
    pthread_create(&t[0], NULL, write_a, NULL);
    pthread_create(&t[1], NULL, write_b, NULL);
    pthread_join(t[0], NULL);
    pthread_join(t[1], NULL);
    /* One thread hands its data to another: the producer has ended before the consumer starts. */
    pthread_create(&t[0], NULL, produce, NULL);
    pthread_join(t[0], NULL);
    pthread_create(&t[1], NULL, consume, &sum);
    pthread_join(t[1], NULL);
    printf("%ld %ld %ld\n", pairs.a, pairs.b, sum);
    return 0;
}
