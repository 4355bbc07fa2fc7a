/* An OpenMP body outlined from triad (not inlined, so that it is its parent), for --top names. */
#include <stdio.h>
#include <stdlib.h>

static double a[100000], b[100000];

__attribute__((noinline)) double sum(int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += a[i];
    return s;
}

__attribute__((noinline)) void triad(int n, double k)
{
    for (int i = 0; i < n; i++)
        b[i] = i;
#pragma omp parallel for
    for (int i = 0; i < n; i++) /* body */
        a[i] = b[i] * k + a[i]; /* body */
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 100000;
    triad(n, 2.0);
    printf("%.0f\n", sum(n));
    return 0;
}
