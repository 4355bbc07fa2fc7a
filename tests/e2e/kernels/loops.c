/* Loops whose counters the instrumenter folds (constant and entry-known trip counts, nested,
 * counting down with !=, an 8-bit counter that wraps, zero-trip) and loops it must count per
 * iteration (an early break, a step over 1 against a variable bound), each in its own region. */
#include "memlens.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define CR 32
#define CC 48

void *volatile loops_escape;
double g_const[CR * CC];

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000;
    int m = argc > 2 ? atoi(argv[2]) : 10, k = argc > 3 ? atoi(argv[3]) : 10;
    int reps = argc > 4 ? atoi(argv[4]) : 3;
    unsigned lo = argc > 5 ? (unsigned)atoi(argv[5]) : 1,
             hi = argc > 6 ? (unsigned)atoi(argv[6]) : 9;
    uint8_t c0 = argc > 7 ? (uint8_t)atoi(argv[7]) : 250,
            c1 = argc > 8 ? (uint8_t)atoi(argv[8]) : 4;
    long cap = n > (long)m * k ? n : (long)m * k;
    double *a = malloc(sizeof(double) * (size_t)(cap > 256 ? cap : 256) + 8);
    double *b = malloc(sizeof(double) * (size_t)m * (size_t)k + 8);
    double s = 0;

    if (!a || !b)
        return 1;
    loops_escape = a;
    loops_escape = b;
    loops_escape = g_const;
    for (long i = 0; i < cap || i < 256; i++)
        a[i] = (double)(i % 7) + 1;
    for (long i = 0; i < (long)m * k; i++)
        b[i] = (double)i;
    for (int i = 0; i < CR * CC; i++)
        g_const[i] = i;
    if (n > 0)
        a[n / 2] = 100; /* the loop with a break stops there */
    for (int r = 0; r < reps; r++) {
        MEMLENS_ROI_BEGIN("const2d");
        for (int i = 0; i < CR; i++)
            for (int j = 0; j < CC; j++)
                s += g_const[i * CC + j];
        MEMLENS_ROI_END("const2d");

        MEMLENS_ROI_BEGIN("inv");
        for (long i = 0; i < n; i++)
            s += a[i];
        MEMLENS_ROI_END("inv");

        MEMLENS_ROI_BEGIN("inv_nest");
        for (int i = 0; i < m; i++)
            for (int j = 0; j < k; j++)
                b[i * k + j] += 1.0;
        MEMLENS_ROI_END("inv_nest");

        MEMLENS_ROI_BEGIN("down_ne");
        for (unsigned long i = (unsigned long)n; i != 0; i--)
            s += a[i - 1];
        MEMLENS_ROI_END("down_ne");

        MEMLENS_ROI_BEGIN("u8_wrap");
        for (uint8_t c = c0; c != c1; c++)
            s += a[c];
        MEMLENS_ROI_END("u8_wrap");

        MEMLENS_ROI_BEGIN("step3_le");
        for (unsigned i = lo; i <= hi; i += 3)
            s += a[i];
        MEMLENS_ROI_END("step3_le");

        MEMLENS_ROI_BEGIN("break");
        for (long i = 0; i < n; i++) {
            if (a[i] > 50)
                break;
            s += a[i];
        }
        MEMLENS_ROI_END("break");
    }
    printf("%.1f\n", s);
    free(a);
    free(b);
    return 0;
}
