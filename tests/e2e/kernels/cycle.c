/* Pointers that go round a loop and keep their class (docs/regions.md "What a count is"): two
 * heap buffers swapped every sweep (a pull-style relaxation), two stack buffers swapped the same
 * way, a heap pointer advanced by a data-dependent step, and (the control) a pointer swapped
 * between a stack and a heap buffer, which only the address can classify. Regions: `heap` and
 * `stack` per element (read 8, write 8 bytes), `walk` per walk (8 bytes per step; the steps are
 * printed), `mixed` per element (read 8 bytes). Usage: cycle <n <= 4096> <sweeps> */
#include "memlens.h"

#include <stdio.h>
#include <stdlib.h>

#define MAXN 4096

int main(int argc, char **argv)
{
    long n = argc > 2 ? atol(argv[1]) : 0, sweeps = argc > 2 ? atol(argv[2]) : 0, steps = 0;
    double sa[MAXN], sb[MAXN], *src = malloc(MAXN * sizeof(*src)),
                               *dst = malloc(MAXN * sizeof(*dst)), *x = sa, *y = sb, chk = 0;
    long *w = malloc(MAXN * sizeof(*w));

    if (n < 1 || n > MAXN || sweeps < 1 || !src || !dst || !w)
        return 2;
    for (long i = 0; i < n; i++) {
        src[i] = sa[i] = (double)(i % 7);
        dst[i] = sb[i] = 0;
        w[i] = (i * 2654435761L) >> 7;
    }
    for (long s = 0; s < sweeps; s++) {
        for (long i = 0; i < n; i++) {
            MEMLENS_ROI_BEGIN("heap");
            dst[i] = 0.5 * src[i] + 1;
            MEMLENS_ROI_END("heap");
        }
        double *t = src;
        src = dst;
        dst = t;
    }
    for (long s = 0; s < sweeps; s++) {
        for (long i = 0; i < n; i++) {
            MEMLENS_ROI_BEGIN("stack");
            y[i] = 0.25 * x[i] + 2;
            MEMLENS_ROI_END("stack");
        }
        double *t = x;
        x = y;
        y = t;
    }
    for (long s = 0; s < sweeps; s++) {
        long k = 0;
        MEMLENS_ROI_BEGIN("walk");
        for (const long *p = w + s % 3; p < w + n;) {
            long v = *p;
            k++;
            chk += (double)(v & 15);
            p += 1 + (v & 3);
        }
        MEMLENS_ROI_END("walk");
        steps += k;
    }
    double *m = sa;
    for (long s = 0; s < sweeps; s++) {
        for (long i = 0; i < n; i++) {
            MEMLENS_ROI_BEGIN("mixed");
            chk += m[i];
            MEMLENS_ROI_END("mixed");
        }
        m = m == sa ? src : sa;
    }
    for (long i = 0; i < n; i++)
        chk += src[i] + x[i];
    printf("%ld %.17g\n", steps, chk);
    return 0;
}
