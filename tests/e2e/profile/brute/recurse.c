/* Deep recursion through a loop (tests/e2e/profile-dep-brute.sh): every level opens a loop frame,
 * so dependences are placed among thousands of open frames. */
#include <stdio.h>
#include <stdlib.h>

static long walk(int *a, int depth)
{
    long s = 0;

    for (int i = 0; i < 2; i++) {
        a[depth] += i;
        s += a[depth];
        if (i == 0 && depth > 0)
            s += walk(a, depth - 1) + a[depth - 1];
    }
    return s;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    int *a = calloc((size_t)n + 1, sizeof(int));

    if (!a)
        return 1;
    printf("%ld\n", walk(a, n));
    free(a);
    return 0;
}
