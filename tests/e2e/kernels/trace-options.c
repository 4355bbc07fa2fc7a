/*
 * Trace test kernel for 'memlens trace' options: an int8 array of n bytes, first touched by
 * an initialising loop, then read five times by a function that is not inlined: before a
 * region, inside it, between MEMLENS_TRACE_OFF() and MEMLENS_TRACE_ON(), after ON, after the
 * region; each pass in a MEMLENS_MARK phase. Prints the array's range to stderr.
 * Usage: trace-options <n>
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "memlens.h"

__attribute__((noinline)) static long pass(const int8_t *a, long n)
{
    long s = 0;

    for (long i = 0; i < n; i++)
        s += a[i];
    return s;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 4096, s = 0;
    int8_t *a = malloc(n);

    if (!a)
        return 1;
    for (long i = 0; i < n; i++)
        a[i] = (int8_t)(i % 7);
    fprintf(stderr, "range a %#lx %#lx\n", (unsigned long)(uintptr_t)a,
            (unsigned long)(uintptr_t)(a + n));
    MEMLENS_MARK("before");
    s += pass(a, n);
    MEMLENS_ROI_BEGIN("r");
    MEMLENS_MARK("inside");
    s += pass(a, n);
    MEMLENS_TRACE_OFF();
    MEMLENS_MARK("off");
    s += pass(a, n);
    MEMLENS_TRACE_ON();
    MEMLENS_MARK("on");
    s += pass(a, n);
    MEMLENS_ROI_END("r");
    MEMLENS_MARK("after");
    s += pass(a, n);
    printf("%ld\n", s);
    return 0;
}
