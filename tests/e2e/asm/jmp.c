/* setjmp/longjmp out of instrumented frames, several levels deep. */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>

static jmp_buf env;
static volatile long sink;

__attribute__((noinline)) static void deep(int level, long *acc)
{
    long local[4] = {level, level * 2, level * 3, level * 4};

    *acc += local[level & 3];
    if (level == 0)
        longjmp(env, (int)(*acc % 100) + 1);
    deep(level - 1, acc);
    sink += local[0];
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 100;
    long total = 0;

    for (int r = 0; r < reps; r++) {
        long acc = r;
        int v = setjmp(env);

        if (!v)
            deep(5 + r % 7, &acc);
        else
            total += v;
    }
    printf("%ld %ld\n", total, sink);
    return 0;
}
