/*
 * Small functions called from one place only, which selection folds into the
 * caller's unit (docs/select.md, "Callees"): leaves called once, a tail call,
 * a chain of three levels, a call on one arm of a branch, and functions that
 * must not fold: called from two places, address taken, global.
 */
#include <stdio.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline))

struct p {
    long x, v, w;
};

NOINLINE static long get_x(const struct p *p)
{
    return p->x;
}
NOINLINE static void set_w(struct p *p, long w)
{
    p->w = w;
}
NOINLINE static long twice(const struct p *p)
{
    return p->v + 1;
}
NOINLINE static long taken(const struct p *p)
{
    return p->w - 1;
}
NOINLINE long global_get(const struct p *p)
{
    return p->v ^ p->x;
}
NOINLINE static long leaf(const struct p *p, long k)
{
    return p[k & 3].x * k;
}
NOINLINE static long mid(const struct p *p, long k)
{
    return leaf(p, k + 1) + p->v;
}
NOINLINE static long outer(const struct p *p, long k)
{
    return mid(p, k) - p->w;
}
NOINLINE static long odd(struct p *p)
{
    return p->v += 3;
}

NOINLINE static void update(struct p *p, long (*f)(const struct p *))
{
    long x = get_x(p), t = twice(p) + twice(p + 1);

    p->v += x + t + f(p) + global_get(p);
    set_w(p, p->v - x);
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 100, s = 0;
    struct p *ps = calloc(8, sizeof(*ps));
    long (*volatile f)(const struct p *) = taken;

    if (!ps)
        return 1;
    for (long i = 0; i < 8; i++)
        ps[i].x = i * 7 % 5;
    for (long i = 0; i < n; i++) {
        update(&ps[i & 3], f);
        s += outer(ps, i);
        if (i % 3 == 1)
            s += odd(&ps[i & 7]);
    }
    printf("%ld %ld %ld\n", s, ps[0].w, ps[3].v);
    free(ps);
    return 0;
}
