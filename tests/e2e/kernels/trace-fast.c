/* Loops for the trace writer's fast paths (docs/trace.md): the records must be those the
 * general encoder writes. Cycles of several segments (calls of small functions): a steady
 * cycle; a callee reached twice per iteration with addresses that move by different deltas
 * (never a cycle); a cycle broken every `brk` iterations and one whose stride changes halfway;
 * a cycle longer than the replay's span bound. One segment repeated with a record that is
 * predicted only sometimes (an indirect load: random, then runs of one stride, then
 * alternating strides). */
#include <stdio.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline))

NOINLINE static long get(const long *p)
{
    return *p;
}
NOINLINE static void put(long *p, long v)
{
    *p = v;
}
NOINLINE static long twice(long a, long b)
{
    return a + 2 * b;
}

/* Steady: every call's stack slots repeat, a[i] and b[i] move by 8. */
NOINLINE static long steady(long *a, long *b, long n)
{
    long s = 0;
    for (long i = 0; i < n; i++) {
        long x = get(&a[i]), y = get(&b[i]);
        put(&b[i], twice(x, y));
        s += twice(y, x);
    }
    return s;
}

/* get's load moves by 8 at one call and 24 at the other in each iteration. */
NOINLINE static long uneven(long *a, long n)
{
    long s = 0;
    for (long i = 0; i < n / 3; i++)
        s += get(&a[i]) + get(&a[3 * i]);
    return s;
}

/* The cycle breaks every brk iterations (another call), and its stride doubles halfway. */
NOINLINE static long broken(long *a, long n, long brk)
{
    long s = 0;
    for (long i = 0; i < n / 2; i++) {
        long j = i < n / 4 ? i : n / 4 + 2 * (i - n / 4);
        s += get(&a[j]);
        if (i % brk == brk - 1)
            put(&a[j], twice(s, i));
        else
            s += twice(i, s);
    }
    return s;
}

/* Forty calls per iteration: longer than a replayed span may be. */
NOINLINE static long longcycle(long *a, long n)
{
    long s = 0;
    for (long i = 0; i + 40 <= n; i += 40)
        for (long k = 0; k < 40; k++)
            s += get(&a[i + k]) + twice(k, s & 7);
    return s;
}

/* x[idx[j]]: idx random, sequential, then two strides in turn. */
NOINLINE static long gather(const long *x, const long *idx, long n)
{
    long s = 0;
    for (long j = 0; j < n; j++)
        s += x[idx[j]] * (j & 3);
    return s;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 100000, brk = argc > 2 ? atol(argv[2]) : 997;
    long *a = malloc(n * sizeof(*a)), *b = malloc(n * sizeof(*b)), *idx = malloc(n * sizeof(*idx));
    unsigned long seed = 12345;

    if (!a || !b || !idx || n < 40 || brk < 1)
        return 1;
    for (long i = 0; i < n; i++) {
        a[i] = i % 13;
        b[i] = i % 7;
        seed = seed * 6364136223846793005ul + 1442695040888963407ul;
        idx[i] = i < n / 3       ? (long)((seed >> 33) % (unsigned long)n)
                 : i < 2 * n / 3 ? i / 2
                                 : (i % 2 ? i / 4 : i / 3);
    }
    long s = 0;
    for (int r = 0; r < 3; r++) {
        s += steady(a, b, n);
        s += uneven(a, n);
        s += broken(a, n, brk);
        s += longcycle(a, n);
        s += gather(a, idx, n);
    }
    printf("%ld\n", s);
    free(a);
    free(b);
    free(idx);
    return 0;
}
