/* Benchmark kernel: CSR sparse matrix-vector product with one region per row (k entries per row,
 * random columns), reps times: millions of region executions per second. */
#include "memlens.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    long rows = atol(argv[1]), k = atol(argv[2]), reps = atol(argv[3]), nnz = rows * k;
    long *rowptr = malloc((rows + 1) * sizeof(*rowptr));
    int *col = malloc(nnz * sizeof(*col));
    double *val = malloc(nnz * sizeof(*val)), *x = malloc(rows * sizeof(*x));
    double *y = malloc(rows * sizeof(*y)), chk = 0;
    unsigned long seed = 99;

    if (!rowptr || !col || !val || !x || !y)
        return 1;
    for (long r = 0; r <= rows; r++)
        rowptr[r] = r * k;
    for (long j = 0; j < nnz; j++) {
        seed = seed * 6364136223846793005UL + 1442695040888963407UL;
        col[j] = (int)((seed >> 33) % (unsigned long)rows);
        val[j] = (double)(j % 7) * 0.25;
    }
    for (long r = 0; r < rows; r++)
        x[r] = (double)(r % 13);
    for (long it = 0; it < reps; it++) {
        for (long r = 0; r < rows; r++) {
            MEMLENS_ROI_BEGIN("row");
            long b = rowptr[r], e = rowptr[r + 1];
            double s = 0;
            for (long j = b; j < e; j++)
                s += val[j] * x[col[j]];
            y[r] = s;
            MEMLENS_ROI_END("row");
        }
        x[it % rows] += y[(it * 5) % rows] * 1e-9;
    }
    for (long r = 0; r < rows; r++)
        chk += y[r];
    printf("%.17g\n", chk);
    return 0;
}
