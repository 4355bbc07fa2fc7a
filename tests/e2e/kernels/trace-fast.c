/* Loops for the trace writer's fast paths (docs/trace.md): the records must be those the
 * general encoder writes. Cycles of several segments (calls of small functions): a steady
 * cycle; a callee reached twice per iteration with addresses that move by different deltas
 * (a cycle whose hole is the callee's load); a cycle broken every `brk` iterations and one
 * whose stride changes halfway; a cycle longer than the replay's span bound; cycles with
 * holes (random loads and stores first, last and in between, a hole site reached twice, holes
 * that turn regular and back) and sparse rows. Runs of one segment whose stride changes halfway at
 * one site. One segment repeated with a record that is
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

/* Runs of one segment (no calls) of 1, 2 and 3 accesses whose stride doubles halfway at one
   site: the last of an odd and of an even number of words, and one in the middle. */
NOINLINE static long strides(long *a, long *b, long n)
{
    long s = 0;
    for (long i = 0; i < n / 2; i++)
        s += a[i < n / 4 ? i : n / 4 + 2 * (i - n / 4)];
    for (long i = 0; i < n / 3; i++)
        s += a[i] * b[i < n / 6 ? i : n / 6 + 2 * (i - n / 6)];
    for (long i = 0; i < n / 3; i++)
        b[i] = a[i < n / 6 ? i : n / 6 + 2 * (i - n / 6)] - b[i] + s;
    return s + b[n / 5];
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

/* Holes in replayed spans: sites whose addresses do not move by a fixed delta, encoded in
   place while the rest of the span is replayed. Per iteration a random load first (a hash of j,
   no load before it), get's load reached with a random address and a regular one (several
   occurrences of one hole site), x[idx[..]] that turns regular and back with idx, and a random
   store last. */
NOINLINE static long holes(long *x, const long *idx, long n)
{
    long s = 0;
    for (long j = 0; j < n; j++) {
        s += x[(unsigned long)j * 2654435761ul % (unsigned long)n];
        s += twice(get(&x[idx[j]]), get(&x[j]));
        s += get(&x[idx[n - 1 - j]]);
        x[((unsigned long)j * 40503ul + 7) % (unsigned long)n] = s & 0xff;
    }
    return s;
}

/* Holes right after a return from put, called twice per iteration: put's return is followed by
   a different site each time, so each hole's record names its site. */
NOINLINE static long named(const long *x, long *y, long n)
{
    unsigned long m = 1; /* a mask, not a division: nothing spilled around the calls */
    long s = 0;
    while (2 * m <= (unsigned long)n)
        m *= 2;
    for (long j = 0; j < n; j++) {
        put(&y[j], s);
        s += x[((unsigned long)j * 2654435761ul >> 5) & (m - 1)];
        put(&y[n - 1 - j], s);
        s += x[((unsigned long)j * 40503ul >> 3) & (m - 1)];
    }
    return s;
}

/* A sparse product's rows of k entries (a replayed span per row, the gathers its holes),
   columns random for the first rows, then every row the same columns, then consecutive. */
NOINLINE static long rows(const long *x, const long *col, long n, long k)
{
    long s = 0;
    for (long r = 0; r + k <= n; r += k) {
        long t = 0;
        for (long j = r; j < r + k; j++)
            t += x[col[j]] * (j & 7);
        s += t;
    }
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
    long *col = malloc(n * sizeof(*col));
    unsigned long seed = 12345;

    if (!a || !b || !idx || !col || n < 40 || brk < 1)
        return 1;
    for (long i = 0; i < n; i++) {
        a[i] = i % 13;
        b[i] = i % 7;
        seed = seed * 6364136223846793005ul + 1442695040888963407ul;
        idx[i] = i < n / 3       ? (long)((seed >> 33) % (unsigned long)n)
                 : i < 2 * n / 3 ? i / 2
                                 : (i % 2 ? i / 4 : i / 3);
        col[i] = i < n / 3 ? idx[i] : i < 2 * n / 3 ? idx[i % 12] : i;
    }
    long s = 0;
    for (int r = 0; r < 3; r++) {
        s += steady(a, b, n);
        s += strides(a, b, n);
        s += uneven(a, n);
        s += broken(a, n, brk);
        s += longcycle(a, n);
        s += gather(a, idx, n);
        s += holes(b, idx, n);
        s += named(a, b, n);
        s += rows(a, col, n, 12);
        s += rows(a, col, n, 5);
    }
    printf("%ld\n", s);
    free(a);
    free(b);
    free(idx);
    free(col);
    return 0;
}
