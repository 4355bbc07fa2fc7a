/* Streaming kernels (sum, copy, triad) over int8, int32, double and a 4 x double vector, on heap
 * and on global arrays: the test knows the exact bytes each region must read and write. */
#include "memlens.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef double v4d __attribute__((vector_size(32)));

#define NMAX (1L << 17)

/* Heap arrays escape through this, so the optimiser must assume region calls see them. */
void *volatile stream_escape;

/*
 * One set of kernels for element type T (named S in region names). The global arrays have
 * external linkage so that no pass may treat them as private to this file. Sources of every
 * region stay in locals so that only the arrays are heap or global traffic at any -O level.
 */
#define KERNELS(T, S, MK, TOD)                                                                     \
    T g_a_##S[NMAX], g_b_##S[NMAX], g_c_##S[NMAX];                                                 \
    static double run_##S(long n, int seed)                                                        \
    {                                                                                              \
        T *a = malloc(n * sizeof(T)), *b = malloc(n * sizeof(T)), *c = malloc(n * sizeof(T));      \
        T acc = MK(0), gacc = MK(0), s = MK(seed % 3 + 1);                                         \
        double chk = 0;                                                                            \
        if (!a || !b || !c)                                                                        \
            exit(1);                                                                               \
        stream_escape = a;                                                                         \
        stream_escape = b;                                                                         \
        stream_escape = c;                                                                         \
        for (long i = 0; i < n; i++) {                                                             \
            a[i] = g_a_##S[i] = MK(seed + i % 7);                                                  \
            b[i] = g_b_##S[i] = MK(seed + i % 5);                                                  \
            c[i] = g_c_##S[i] = MK(i % 3);                                                         \
        }                                                                                          \
        MEMLENS_ROI_BEGIN("sum_" #S "_heap");                                                      \
        for (long i = 0; i < n; i++)                                                               \
            acc += a[i];                                                                           \
        MEMLENS_ROI_END("sum_" #S "_heap");                                                        \
        MEMLENS_ROI_BEGIN("copy_" #S "_heap");                                                     \
        for (long i = 0; i < n; i++)                                                               \
            c[i] = a[i];                                                                           \
        MEMLENS_ROI_END("copy_" #S "_heap");                                                       \
        MEMLENS_ROI_BEGIN("triad_" #S "_heap");                                                    \
        for (long i = 0; i < n; i++)                                                               \
            a[i] = b[i] + s * c[i];                                                                \
        MEMLENS_ROI_END("triad_" #S "_heap");                                                      \
        MEMLENS_ROI_BEGIN("sum_" #S "_global");                                                    \
        for (long i = 0; i < n; i++)                                                               \
            gacc += g_a_##S[i];                                                                    \
        MEMLENS_ROI_END("sum_" #S "_global");                                                      \
        MEMLENS_ROI_BEGIN("copy_" #S "_global");                                                   \
        for (long i = 0; i < n; i++)                                                               \
            g_c_##S[i] = g_a_##S[i];                                                               \
        MEMLENS_ROI_END("copy_" #S "_global");                                                     \
        MEMLENS_ROI_BEGIN("triad_" #S "_global");                                                  \
        for (long i = 0; i < n; i++)                                                               \
            g_a_##S[i] = g_b_##S[i] + s * g_c_##S[i];                                              \
        MEMLENS_ROI_END("triad_" #S "_global");                                                    \
        for (long i = 0; i < n; i++)                                                               \
            chk += TOD(a[i]) + 2 * TOD(c[i]) + 3 * TOD(g_a_##S[i]) + 4 * TOD(g_c_##S[i]);          \
        free(a);                                                                                   \
        free(b);                                                                                   \
        free(c);                                                                                   \
        return chk + TOD(acc) + TOD(gacc);                                                         \
    }

#define MK_I8(x)      ((int8_t)(x))
#define MK_I32(x)     ((int32_t)(x))
#define MK_F64(x)     ((double)(x))
#define MK_V4D(x)     ((v4d){(double)(x), (double)(x) + 1, (double)(x) + 2, (double)(x) + 3})
#define TOD_SCALAR(x) ((double)(x))
#define TOD_V4D(v)    ((v)[0] + (v)[1] + (v)[2] + (v)[3])

KERNELS(int8_t, i8, MK_I8, TOD_SCALAR)
KERNELS(int32_t, i32, MK_I32, TOD_SCALAR)
KERNELS(double, f64, MK_F64, TOD_SCALAR)
KERNELS(v4d, v4d, MK_V4D, TOD_V4D)

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000;
    int seed = argc > 2 ? atoi(argv[2]) : 1;

    if (n < 1 || n > NMAX) {
        fprintf(stderr, "usage: stream N (1..%ld) [seed]\n", NMAX);
        return 2;
    }
    printf("i8 %.17g\n", run_i8(n, seed));
    printf("i32 %.17g\n", run_i32(n, seed));
    printf("f64 %.17g\n", run_f64(n, seed));
    printf("v4d %.17g\n", run_v4d(n, seed));
    return 0;
}
