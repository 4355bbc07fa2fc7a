/* Control flow inside regions: triangular loops, early exits (break, return, goto) at a position
 * the test chooses, regions entered in a loop, nested regions and a recursive region. */
#include "memlens.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define NMAX (1L << 18)

void *volatile control_escape;
double g_tri[NMAX];

/* The region ends at the return from inside the loop: work after the call is outside it. */
static long find_return(const int32_t *a, long len, int32_t key)
{
    MEMLENS_ROI_BEGIN("find_return");
    for (long i = 0; i < len; i++)
        if (a[i] == key)
            return i;
    MEMLENS_ROI_END("find_return");
    return -1;
}

/* Each call opens the region again while it is open: only the outermost entry counts. */
static double tree_sum(const double *a, long lo, long hi)
{
    double s;

    MEMLENS_ROI_BEGIN("recursive");
    if (hi - lo == 1) {
        s = a[lo];
    } else {
        long mid = lo + (hi - lo) / 2;
        s = tree_sum(a, lo, mid) + tree_sum(a, mid, hi);
    }
    MEMLENS_ROI_END("recursive");
    return s;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 100;    /* triangle size */
    long len = argc > 2 ? atol(argv[2]) : 1000; /* array length */
    long pos = argc > 3 ? atol(argv[3]) : 10;   /* where the key is */
    long reps = argc > 4 ? atol(argv[4]) : 5;   /* region entries in loops */
    long k = argc > 5 ? atol(argv[5]) : 100;    /* elements per repeated entry */
    int32_t key = -(argc > 6 ? atoi(argv[6]) : 7);
    int32_t *a;
    double *d, acc = 0, chk = 0;
    long found = -1, i;

    if (n < 1 || n > NMAX || len < 2 || len > NMAX || pos < 0 || pos >= len || reps < 1 || k < 1 ||
        k > len) {
        fprintf(stderr, "usage: control N LEN POS REPS K [key]\n");
        return 2;
    }
    a = malloc(len * sizeof(*a));
    d = malloc(len * sizeof(*d));
    if (!a || !d)
        return 1;
    control_escape = a;
    control_escape = d;
    for (i = 0; i < len; i++) {
        a[i] = (int32_t)(i % 1000 + 1);
        d[i] = (double)(i % 17) * 0.5;
    }
    for (i = 0; i < n; i++)
        g_tri[i] = (double)(i % 9);
    a[pos] = key;

    MEMLENS_ROI_BEGIN("tri_lower");
    for (long r = 0; r < n; r++)
        for (long c = 0; c < r; c++)
            acc += d[c];
    MEMLENS_ROI_END("tri_lower");

    MEMLENS_ROI_BEGIN("tri_upper_global");
    for (long r = 0; r < n; r++)
        for (long c = r; c < n; c++)
            acc += g_tri[c] * (double)r;
    MEMLENS_ROI_END("tri_upper_global");

    MEMLENS_ROI_BEGIN("find_break");
    for (i = 0; i < len; i++) {
        if (a[i] == key) {
            found = i;
            break;
        }
    }
    MEMLENS_ROI_END("find_break");
    chk += (double)found;

    chk += (double)find_return(a, len, key);
    for (i = 0; i < len; i++) /* outside every region */
        chk += d[i];

    /* Entered once per iteration; break and continue leave the open region without its END. */
    for (i = 0; i < len; i++) {
        MEMLENS_ROI_BEGIN("body_break");
        if (a[i] == key)
            break;
        acc += d[i];
        MEMLENS_ROI_END("body_break");
    }
    chk += (double)i;
    for (long r = 0; r < len; r++) {
        MEMLENS_ROI_BEGIN("body_continue");
        if (a[r] % 3 == 0)
            continue;
        acc += d[r];
        MEMLENS_ROI_END("body_continue");
    }
    chk += (double)i;
    for (i = 0; i < len; i++) /* outside every region */
        chk += (double)a[i];

    MEMLENS_ROI_BEGIN("goto_out");
    for (long r = 0; r < len / 10; r++)
        for (long c = 0; c < 10; c++)
            if (a[r * 10 + c] == key) {
                chk += (double)(r * 10 + c);
                goto found;
            }
    MEMLENS_ROI_END("goto_out");
found:
    for (i = 0; i < len; i++) /* outside every region */
        chk += d[i] * 2;

    for (long r = 0; r < reps; r++) {
        MEMLENS_ROI_BEGIN("repeated");
        for (i = 0; i < k; i++)
            acc += d[i] * (double)r;
        MEMLENS_ROI_END("repeated");
    }

    MEMLENS_ROI_BEGIN("outer");
    for (i = 0; i < len; i++)
        acc += (double)a[i];
    for (long r = 0; r < reps; r++) {
        MEMLENS_ROI_BEGIN("inner");
        for (i = 0; i < k; i++)
            d[i] += 1.0;
        MEMLENS_ROI_END("inner");
    }
    MEMLENS_ROI_END("outer");

    for (long r = 0; r < reps; r++)
        chk += tree_sum(d, 0, len);

    printf("%.17g %.17g\n", acc, chk);
    free(a);
    free(d);
    return 0;
}
