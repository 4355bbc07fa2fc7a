/* Strided and indirect (gather/scatter) access on heap and global arrays: the test knows the
 * exact bytes from N, the stride and the index count. */
#include "memlens.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define NMAX (1L << 18)

void *volatile access_escape;
int32_t g_vals[NMAX];
int32_t g_idx[NMAX];

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000;
    long s = argc > 2 ? atol(argv[2]) : 3;
    long m = argc > 3 ? atol(argv[3]) : 500;
    int seed = argc > 4 ? atoi(argv[4]) : 1;
    double *a, *b, acc = 0, chk = 0;
    int32_t *idx;
    long gacc = 0;

    if (n < 1 || n > NMAX || s < 1 || m < 1 || m > NMAX) {
        fprintf(stderr, "usage: access N STRIDE M [seed]\n");
        return 2;
    }
    a = malloc(n * sizeof(*a));
    b = malloc(n * sizeof(*b));
    idx = malloc(m * sizeof(*idx));
    if (!a || !b || !idx)
        return 1;
    access_escape = a;
    access_escape = b;
    access_escape = idx;
    for (long i = 0; i < n; i++) {
        a[i] = (double)(seed + i % 11);
        b[i] = 0;
        g_vals[i] = (int32_t)(seed * 3 + i % 13);
    }
    for (long i = 0; i < m; i++)
        idx[i] = g_idx[i] = (int32_t)((i * 7919 + seed) % n);

    MEMLENS_ROI_BEGIN("stride_read_heap");
    for (long i = 0; i < n; i += s)
        acc += a[i];
    MEMLENS_ROI_END("stride_read_heap");

    MEMLENS_ROI_BEGIN("stride_write_heap");
    for (long i = 0; i < n; i += s)
        b[i] = (double)i;
    MEMLENS_ROI_END("stride_write_heap");

    MEMLENS_ROI_BEGIN("stride_read_global");
    for (long i = 0; i < n; i += s)
        gacc += g_vals[i];
    MEMLENS_ROI_END("stride_read_global");

    MEMLENS_ROI_BEGIN("gather_heap");
    for (long i = 0; i < m; i++)
        acc += a[idx[i]];
    MEMLENS_ROI_END("gather_heap");

    MEMLENS_ROI_BEGIN("scatter_heap");
    for (long i = 0; i < m; i++)
        b[idx[i]] += 1.0;
    MEMLENS_ROI_END("scatter_heap");

    MEMLENS_ROI_BEGIN("gather_global");
    for (long i = 0; i < m; i++)
        gacc += g_vals[g_idx[i]];
    MEMLENS_ROI_END("gather_global");

    for (long i = 0; i < n; i++)
        chk += b[i] * (double)(i % 5);
    printf("%.17g %ld %.17g\n", acc, gacc, chk);
    free(a);
    free(b);
    free(idx);
    return 0;
}
