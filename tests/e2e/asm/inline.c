/* Inline assembly blocks (left alone by the rewriter) between ordinary memory accesses. */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) long twiddle(long *p, int n)
{
    long s = 0;

    for (int i = 0; i < n; i++) {
        long v = p[i];

        __asm__ volatile("rorq $7, %0\n\taddq (%1), %0" : "+r"(v) : "r"(p) : "cc", "memory");
        p[i] = v;
        s ^= v;
    }
    return s;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    long *p = malloc(n * sizeof(long));

    for (int i = 0; i < n; i++)
        p[i] = i * 2654435761L;
    printf("%ld\n", twiddle(p, n));
    return 0;
}
