/* Vector code for -march=native: AVX2/AVX-512 loads and stores, gathers, masked tails. */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) float dot(const float *a, const float *b, int n)
{
    float s = 0;

    for (int i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

__attribute__((noinline)) long gather(const int *v, const int *idx, int n)
{
    long s = 0;

    for (int i = 0; i < n; i++)
        s += v[idx[i]];
    return s;
}

/* Predicated vectorisation: masked loads and stores on AVX-512 (and vmaskmov on AVX2). */
__attribute__((noinline)) void scale(float *x, const float *y, int n)
{
#pragma clang loop vectorize_predicate(enable)
    for (int i = 0; i < n; i++)
        x[i] = x[i] * 0.5f + y[i];
}

__attribute__((noinline)) void scatter(int *v, const int *idx, int n)
{
    for (int i = 0; i < n; i++)
        v[idx[i]] += i;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1003;
    float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
    int *v = malloc(n * sizeof(int)), *idx = malloc(n * sizeof(int));
    double total = 0;

    for (int i = 0; i < n; i++) {
        a[i] = (float)(i % 17) * 0.25f;
        b[i] = (float)(i % 13) - 6.0f;
        v[i] = i * 3 - 7;
        idx[i] = (int)((i * 7919L) % n);
    }
    for (int r = 0; r < 20; r++) {
        total += dot(a, b, n);
        total += (double)gather(v, idx, n);
        scale(a, b, n - r);
        scatter(v, idx, n);
    }
    printf("%.3f %d %.3f\n", total, v[n / 2], (double)a[n - 1]);
    return 0;
}
