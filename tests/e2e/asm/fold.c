/*
 * Blocks that run equally often without being adjacent (control equivalence):
 * loop bodies with branches inside (header and latch), code before and after a
 * loop, a do-while loop (its body runs more often than the code before it),
 * a switch through a jump table (not folded) and an early return.
 */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) static long diamonds(const long *a, long *b, int n)
{
    long s = a[0];

    for (int i = 1; i < n; i++) {
        long x = a[i];

        if (x & 1)
            b[i] = x * 3 + b[i - 1];
        else
            b[i] = x / 2 - a[i - 1];
        if (x % 3 == 0)
            s += b[i] ^ a[i - 1];
        s += b[i];
    }
    b[0] = s;
    return s + b[n - 1];
}

__attribute__((noinline)) static long dowhile(const long *a, int n)
{
    long s = a[n - 1], i = 0;

    do
        s += a[i] * (i & 3);
    while (++i < n);
    return s + a[0];
}

__attribute__((noinline)) static long sw(const long *a, int n)
{
    long s = 0;

    for (int i = 0; i < n; i++)
        switch (a[i] % 7) {
        case 0:
            s += a[i];
            break;
        case 1:
            s -= a[i] >> 1;
            break;
        case 2:
            s ^= a[(i + 3) % n];
            break;
        case 3:
            s += 3 * a[i];
            break;
        case 4:
            s -= a[i] * a[i];
            break;
        default:
            s += 1;
        }
    return s;
}

__attribute__((noinline)) static long early(const long *a, long *b, int n)
{
    long s = 0;

    for (int i = 0; i < n; i++) {
        if (a[i] == -1)
            return s;
        for (int j = 0; j < 4; j++)
            s += a[(i + j) % n] > b[j] ? a[i] : b[j];
        b[i & 3] = s;
    }
    return s;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    long *a = malloc((n + 8) * sizeof(*a)), *b = calloc(n + 8, sizeof(*b)), t = 0;

    if (!a || !b || n < 8)
        return 1;
    for (int i = 0; i < n; i++)
        a[i] = (i * 7919L) % 1013;
    for (int r = 0; r < 10; r++) {
        t += diamonds(a, b, n);
        t += dowhile(a, n);
        t += sw(a, n);
        t += early(a, b, n);
        a[r] = -1;
        t += early(a, b, n);
    }
    printf("%ld\n", t);
    free(a);
    free(b);
    return 0;
}
