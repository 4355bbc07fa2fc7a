/*
 * Kernels with closed-form answers for 'memlens analyze' (tests/e2e/analyze-*.sh). Each runs its
 * measured part in a region named after it and prints the address of every array to stderr
 * ("range name lo hi"):
 *   seq N R        R sequential passes reading N doubles
 *   two N          two interleaved sequential readers of N doubles each
 *   walk N M       M reads at random indexes of N doubles
 *   copy IN OUT B  copies file IN to OUT with read and write of B bytes
 *   stream N R     triad a = b + 3c over N doubles, R times (cachegrind comparison)
 *   random N M     M random reads of N doubles
 *   blocked N B    transpose of an N x N matrix of doubles in B x B blocks
 *   nest           nested and overlapping regions around known accesses
 */
#include "memlens.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void range(const char *name, const void *p, size_t bytes)
{
    fprintf(stderr, "range %s %#lx %#lx\n", name, (unsigned long)(uintptr_t)p,
            (unsigned long)((uintptr_t)p + bytes));
}

static double *array(const char *name, long n)
{
    double *a = malloc((size_t)n * sizeof(*a));

    if (!a)
        exit(2);
    for (long i = 0; i < n; i++)
        a[i] = (double)(i % 11);
    range(name, a, (size_t)n * sizeof(*a));
    return a;
}

int main(int argc, char **argv)
{
    const char *k = argc > 1 ? argv[1] : "";
    long n = argc > 2 ? atol(argv[2]) : 0, m = argc > 3 ? atol(argv[3]) : 0;
    double s = 0;

    if (!strcmp(k, "seq")) {
        double *a = array("a", n);
        MEMLENS_ROI_BEGIN("seq");
        for (long r = 0; r < m; r++)
            for (long i = 0; i < n; i++)
                s += a[i];
        MEMLENS_ROI_END("seq");
    } else if (!strcmp(k, "two")) {
        double *a = array("a", n), *b = array("b", n);
        MEMLENS_ROI_BEGIN("two");
        for (long i = 0; i < n; i++)
            s += a[i] * b[i];
        MEMLENS_ROI_END("two");
    } else if (!strcmp(k, "walk") || !strcmp(k, "random")) {
        double *a = array("a", n);
        uint64_t x = 88172645463325252ull;
        MEMLENS_ROI_BEGIN("walk");
        for (long i = 0; i < m; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            s += a[x % (uint64_t)n];
        }
        MEMLENS_ROI_END("walk");
    } else if (!strcmp(k, "copy") && argc == 5) {
        int in = open(argv[2], O_RDONLY), out = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC, 0600);
        size_t bs = (size_t)atol(argv[4]);
        char *buf = malloc(bs);
        ssize_t got;
        if (in < 0 || out < 0 || !buf)
            return 2;
        MEMLENS_ROI_BEGIN("copy");
        while ((got = read(in, buf, bs)) > 0)
            if (write(out, buf, (size_t)got) != got)
                return 3;
        MEMLENS_ROI_END("copy");
        close(in);
        close(out);
        return 0;
    } else if (!strcmp(k, "stream")) {
        double *a = array("a", n), *b = array("b", n), *c = array("c", n);
        MEMLENS_ROI_BEGIN("stream");
        for (long r = 0; r < m; r++)
            for (long i = 0; i < n; i++)
                a[i] = b[i] + 3 * c[i];
        MEMLENS_ROI_END("stream");
        s = a[n / 2];
    } else if (!strcmp(k, "blocked")) {
        double *a = array("a", n * n), *b = array("b", n * n);
        MEMLENS_ROI_BEGIN("blocked");
        for (long ii = 0; ii < n; ii += m)
            for (long jj = 0; jj < n; jj += m)
                for (long i = ii; i < ii + m && i < n; i++)
                    for (long j = jj; j < jj + m && j < n; j++)
                        b[j * n + i] = a[i * n + j];
        MEMLENS_ROI_END("blocked");
        s = b[n + 1];
    } else if (!strcmp(k, "nest")) {
        double *a = array("a", 4096);
        MEMLENS_ROI_BEGIN("outer");
        for (long i = 0; i < 1000; i++)
            s += a[i];
        MEMLENS_ROI_BEGIN("inner");
        for (long i = 1000; i < 3000; i++)
            s += a[i];
        MEMLENS_ROI_END("outer"); /* ends before inner: not nested */
        for (long i = 3000; i < 3500; i++)
            s += a[i];
        MEMLENS_ROI_END("inner");
        MEMLENS_MARK("tail");
        for (long i = 3500; i < 4096; i++)
            s += a[i];
    } else {
        fprintf(stderr, "usage: %s seq|two|walk|copy|stream|random|blocked|nest ...\n", argv[0]);
        return 2;
    }
    printf("%g\n", s);
    return 0;
}
