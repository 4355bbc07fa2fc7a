/* Benchmark kernel: a particle update split into many small functions that are never inlined
 * (one call per field access), over n particles, reps times. */
#include "memlens.h"

#include <stdio.h>
#include <stdlib.h>

struct particle {
    double x, v;
};

#define NOINLINE __attribute__((noinline))

NOINLINE static double get_x(const struct particle *p)
{
    return p->x;
}
NOINLINE static double get_v(const struct particle *p)
{
    return p->v;
}
NOINLINE static void set_x(struct particle *p, double x)
{
    p->x = x;
}
NOINLINE static void set_v(struct particle *p, double v)
{
    p->v = v;
}
NOINLINE static double force(double x)
{
    return -0.5 * x;
}
NOINLINE static double step(double a, double b, double dt)
{
    return a + b * dt;
}

NOINLINE static void update(struct particle *p, double dt)
{
    double x = get_x(p), v = get_v(p);

    v = step(v, force(x), dt);
    set_v(p, v);
    set_x(p, step(x, v, dt));
}

int main(int argc, char **argv)
{
    long n = atol(argv[1]), reps = atol(argv[2]);
    struct particle *ps = malloc(n * sizeof(*ps));
    double chk = 0, dt = argc > 3 ? atof(argv[3]) : 0.01;

    if (!ps)
        return 1;
    for (long i = 0; i < n; i++)
        ps[i] = (struct particle){(double)(i % 10), 0};
    for (long r = 0; r < reps; r++) {
        MEMLENS_ROI_BEGIN("smallfn");
        for (long i = 0; i < n; i++)
            update(&ps[i], dt);
        MEMLENS_ROI_END("smallfn");
    }
    for (long i = 0; i < n; i++)
        chk += ps[i].x;
    printf("%.17g\n", chk);
    return 0;
}
