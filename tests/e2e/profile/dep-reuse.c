/* dep: objects that end and a new one at the same address (profile-dep.sh checks the rows). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* a stack object of a function called twice: the second call's frame is at the first's place */
__attribute__((noinline)) static long frame(int k, uintptr_t *where)
{
    volatile int buf[64];
    long s = 0;

    *where = (uintptr_t)buf;
    for (int i = 0; i < 64; i++)
        buf[i] = i * k; // STORE_F
    for (int i = 0; i < 64; i++)
        s += buf[i]; // LOAD_F
    return s;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 100;
    uintptr_t f1, f2, old, now;
    long s = 0;
    int *a, *b;

    if (n < 1 || n > 200)
        return 2;
    a = malloc((size_t)n * sizeof(*a));
    if (!a)
        return 1;
    for (int i = 0; i < n; i++)
        a[i] = i; // STORE_A
    for (int i = 0; i < n; i++)
        s += a[i]; // LOAD_A
    old = (uintptr_t)a;
    free(a);
    b = malloc((size_t)n * sizeof(*b)); /* the block a was (glibc's tcache hands it back) */
    if (!b)
        return 1;
    for (int i = 0; i < n; i++)
        b[i] = 2 * i; // STORE_B
    for (int i = 0; i < n; i++)
        s += b[i]; // LOAD_B
    now = (uintptr_t)b;
    free(b);
    s += frame(1, &f1);
    s += frame(2, &f2);
    printf("%ld heap %s stack %s\n", s, now == old ? "same" : "moved", f1 == f2 ? "same" : "moved");
    return 0;
}
