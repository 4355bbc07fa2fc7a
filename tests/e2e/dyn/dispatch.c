/* Code reached through function pointers (a dispatch table, a callback given to qsort and to a
 * function of another file) counts for the regions open at run time (tests/e2e/region-dyn.sh). */
#include <memlens.h>
#include <stdio.h>
#include <stdlib.h>

void apply(long *a, long n, void (*f)(long *, long)); /* dyn-lib.c */

/* Each strategy reads and writes n longs of the heap array: 16 n bytes. */
static void add_one(long *a, long n)
{
    for (long i = 0; i < n; i++)
        a[i] += 1;
}
static void twice(long *a, long n)
{
    for (long i = 0; i < n; i++)
        a[i] *= 2;
}
static void (*const table[2])(long *, long) = {add_one, twice};

/* qsort's comparator: reads two longs per call (16 bytes). */
static long compares;
static int cmp(const void *x, const void *y)
{
    long a = *(const long *)x, b = *(const long *)y;
    compares++;
    return (a > b) - (a < b);
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 10000, k = argc > 2 ? atol(argv[2]) : 3;
    long *a = malloc(n * sizeof(*a)), *s = malloc(64 * sizeof(*s));

    for (long i = 0; i < n; i++)
        a[i] = i % 7;
    for (int i = 0; i < 64; i++)
        s[i] = (i * 37) % 64;
    MEMLENS_ROI_BEGIN("table");
    for (long r = 0; r < k; r++)
        table[r & 1](a, n);
    MEMLENS_ROI_END("table");
    MEMLENS_ROI_BEGIN("callback");
    apply(a, n, add_one); /* the other file calls add_one through its argument */
    MEMLENS_ROI_END("callback");
    compares = 0;
    MEMLENS_ROI_BEGIN("qsort");
    qsort(s, 64, sizeof(*s), cmp);
    MEMLENS_ROI_END("qsort");
    printf("%ld %ld %ld\n", a[n - 1], s[63], compares);
    /* The arrays escape (so every access stays) on stderr, which the test does not compare. */
    fprintf(stderr, "compares %ld\narrays %p %p\n", compares, (void *)a, (void *)s);
    return 0;
}
