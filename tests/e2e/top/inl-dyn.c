/* tests/e2e/top-inline.sh: a kernel (inl-kern.h) inlined into a function that a region reaches
 * only through a function pointer, so it is counted under the dynamic context (the profile's
 * per-set copies of its units).
 *   inl-dyn N REPS: REPS executions of the region, every other one calling work (axpy: 16N
 *   read, 8N written), the others a function that does nothing. */
#include "memlens.h"

#include <stdio.h>
#include <stdlib.h>

#include "inl-kern.h"

double *volatile gx, *volatile gy;
static long n;

static void work(void)
{
    axpy(gy, gx, n, 0.5);
}

static void idle(void)
{
}

void (*volatile table[2])(void) = {work, idle};

int main(int argc, char **argv)
{
    long reps;

    if (argc != 3)
        return 2;
    n = atol(argv[1]);
    reps = atol(argv[2]);
    gx = calloc(n, sizeof(double));
    gy = calloc(n, sizeof(double));
    if (!gx || !gy)
        return 1;
    for (long r = 0; r < reps; r++) {
        MEMLENS_ROI_BEGIN("dispatch");
        table[r & 1]();
        MEMLENS_ROI_END("dispatch");
    }
    printf("%g\n", gy[n - 1]);
    return 0;
}
