/* Thread-local variables (%fs: accesses) written and read by several threads. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

__thread long counter;
__thread int slots[16];
extern long lib_tls_bump(long by); /* in shlib.c when linked with it, else below */

__attribute__((weak)) long lib_tls_bump(long by)
{
    return by;
}

static void *work(void *arg)
{
    long id = (long)arg, s = 0;

    for (int i = 0; i < 10000; i++) {
        counter += i & 7;
        slots[i & 15] += (int)id;
        s += lib_tls_bump(1);
    }
    for (int i = 0; i < 16; i++)
        s += slots[i];
    return (void *)(s + counter);
}

int main(void)
{
    pthread_t t[3];
    long total = 0;

    for (long i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, work, (void *)(i + 1));
    for (int i = 0; i < 3; i++) {
        void *r;

        pthread_join(t[i], &r);
        total += (long)r;
    }
    total += (long)work((void *)0);
    printf("%ld\n", total);
    return 0;
}
