/* Leaf functions that keep locals in the red zone below %rsp (no frame adjustment). */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) long mix(long a, long b, long c)
{
    volatile long t[8]; /* at -O2 a leaf keeps these below %rsp */

    for (int i = 0; i < 8; i++)
        t[i] = a * i + b - c * (i & 3);
    return t[a & 7] + t[b & 7] + t[c & 7];
}

__attribute__((noinline)) int digits(unsigned v, char *out)
{
    char buf[24]; /* scratch in the red zone */
    int n = 0;

    do
        buf[n++] = (char)('0' + v % 10);
    while ((v /= 10) && n < 20);
    for (int i = 0; i < n; i++)
        out[i] = buf[n - 1 - i];
    out[n] = 0;
    return n;
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 1000;
    long s = 0;
    char out[32];

    for (int r = 0; r < reps; r++) {
        s += mix(r, r * 3 + 1, r ^ 5);
        s += digits((unsigned)(r * 2654435761u), out);
    }
    printf("%ld %s\n", s, out);
    return 0;
}
