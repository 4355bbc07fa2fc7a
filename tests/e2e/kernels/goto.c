/* A computed-goto interpreter with a region per run (tests/e2e/region-goto.sh): each opcode
 * reads its heap word twice (to dispatch it and to run it), 16 n bytes a run. */
#include "memlens.h"

#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) long run(const volatile long *prog, long n, long reps)
{
    static void *const ops[] = {&&add, &&sub, &&end};
    long acc = 0;

    for (long r = 0; r < reps; r++) {
        long pc = 0;
        MEMLENS_ROI_BEGIN("interp");
        goto *ops[prog[pc] & 1];
    add:
        acc += prog[pc];
        if (++pc == n)
            goto *ops[2];
        goto *ops[prog[pc] & 1];
    sub:
        acc -= prog[pc];
        if (++pc == n)
            goto *ops[2];
        goto *ops[prog[pc] & 1];
    end:
        MEMLENS_ROI_END("interp");
    }
    return acc;
}

int main(int argc, char **argv)
{
    long n = atol(argv[1]), reps = atol(argv[2]);
    long *prog = malloc(n * sizeof(*prog));

    for (long i = 0; i < n; i++)
        prog[i] = i * 7 % 13;
    printf("%ld\n", run(prog, n, reps));
    return 0;
}
