/* OpenMP: a parallel reduction and a parallel update over shared arrays. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 100000;
    double *x = malloc(n * sizeof(double)), s = 0;
    long *h = calloc(64, sizeof(long));

    for (int i = 0; i < n; i++)
        x[i] = (i % 100) * 0.5;
#pragma omp parallel for reduction(+ : s)
    for (int i = 0; i < n; i++)
        s += x[i] * x[i];
#pragma omp parallel for
    for (int b = 0; b < 64; b++)
        for (int i = b; i < n; i += 64)
            h[b] += (long)x[i];
    long t = 0;

    for (int b = 0; b < 64; b++)
        t += h[b];
    printf("%.1f %ld\n", s, t);
    return 0;
}
