/* Blocks cut only by calls (call chains), and a call that returns twice (setjmp). */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>

static jmp_buf env;
volatile long hits;

__attribute__((noinline)) static double get(const double *p, int i)
{
    return p[i];
}

__attribute__((noinline)) static void put(double *p, int i, double x)
{
    p[i] = x;
}

/* Accesses between calls: spills, reloads and the callees' own. */
__attribute__((noinline)) static double update(double *p, int i)
{
    double a = get(p, i), b = get(p, i + 1);

    put(p, i, a + 0.5 * b);
    put(p, i + 1, b - 0.25 * get(p, i));
    return p[i] + p[i + 1];
}

__attribute__((noinline)) static void jump(int v)
{
    longjmp(env, v);
}

/* The code after setjmp's call runs twice per call of twice(). */
__attribute__((noinline)) static long twice(long *v, int n)
{
    long before = v[0];
    int r = setjmp(env);

    hits += v[r & 1] + r;
    if (r == 0)
        jump(n);
    return before + hits;
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 1000;
    double p[64], s = 0;
    long v[2] = {3, 5}, t = 0;

    for (int i = 0; i < 64; i++)
        p[i] = i;
    for (int r = 0; r < reps; r++) {
        s += update(p, r % 63);
        t += twice(v, r | 1);
    }
    printf("%.6f %ld\n", s, t);
    return 0;
}
