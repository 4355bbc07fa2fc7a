/* Atomic read-modify-write and compare-exchange in a region: each reads and writes 8 bytes. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include "memlens.h"
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    _Atomic long *c = malloc(sizeof(*c)); atomic_init(c, 0);
    long *v = malloc(sizeof(long) * n);
    MEMLENS_ROI_BEGIN("at");
    for (int i = 0; i < n; i++) {
        atomic_fetch_add(c, 1);
        long e = i; atomic_compare_exchange_strong((_Atomic long *)&v[i], &e, i + 1);
    }
    MEMLENS_ROI_END("at");
    printf("%ld\n", atomic_load(c));
    return 0;
}
