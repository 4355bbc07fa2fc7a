/* memcpy, memmove, memset and struct copies with constant sizes (static facts) and with sizes
 * read from the command line (counted at run time), on heap and global buffers. */
#include "memlens.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GMAX (1L << 20)

struct rec {
    long id;
    double v[4];
};

void *volatile memops_escape;
unsigned char g_src[GMAX], g_dst[GMAX];

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000; /* bytes for variable-size calls */
    long m = argc > 2 ? atol(argv[2]) : 100;  /* constant-size calls */
    int c = argc > 3 ? atoi(argv[3]) : 7;
    unsigned char *src, *dst;
    struct rec *ra, *rb;
    unsigned long chk = 0;

    if (n < 2 || n > GMAX || m < 1 || m * 64 > GMAX)
        return 2;
    src = malloc(GMAX);
    dst = malloc(GMAX);
    ra = malloc(m * sizeof(*ra));
    rb = malloc(m * sizeof(*rb));
    if (!src || !dst || !ra || !rb)
        return 1;
    memops_escape = src;
    memops_escape = dst;
    memops_escape = ra;
    memops_escape = rb;
    for (long i = 0; i < GMAX; i++)
        src[i] = g_src[i] = (unsigned char)(i * 31 + c);
    for (long i = 0; i < m; i++) {
        ra[i].id = i;
        for (int k = 0; k < 4; k++)
            ra[i].v[k] = (double)(i + k);
    }

    MEMLENS_ROI_BEGIN("memcpy_const");
    for (long i = 0; i < m; i++)
        memcpy(dst + i * 64, src + i * 64, 64);
    MEMLENS_ROI_END("memcpy_const");
    chk += dst[m * 64 - 1];

    MEMLENS_ROI_BEGIN("memset_const");
    for (long i = 0; i < m; i++)
        memset(dst + i * 48, c + (int)i, 48);
    MEMLENS_ROI_END("memset_const");
    chk += dst[m * 48 - 1];

    MEMLENS_ROI_BEGIN("memcpy_var");
    memcpy(dst, src, (size_t)n);
    MEMLENS_ROI_END("memcpy_var");
    chk += dst[n - 1];

    MEMLENS_ROI_BEGIN("memmove_var");
    memmove(dst + 1, dst, (size_t)n - 1);
    MEMLENS_ROI_END("memmove_var");
    chk += dst[n - 1];

    MEMLENS_ROI_BEGIN("memset_var");
    memset(dst, c, (size_t)n);
    MEMLENS_ROI_END("memset_var");
    chk += dst[n / 2];

    MEMLENS_ROI_BEGIN("memcpy_global");
    memcpy(g_dst, g_src, (size_t)n);
    for (long i = 0; i < m; i++)
        memcpy(g_dst + i * 32, src + i * 32, 32);
    MEMLENS_ROI_END("memcpy_global");
    chk += g_dst[n - 1] + g_dst[m * 32 - 1];

    MEMLENS_ROI_BEGIN("struct_copy");
    for (long i = 0; i < m; i++)
        rb[i] = ra[m - 1 - i];
    MEMLENS_ROI_END("struct_copy");
    for (long i = 0; i < m; i++)
        chk += (unsigned long)rb[i].id + (unsigned long)rb[i].v[3];

    printf("%lu\n", chk);
    free(src);
    free(dst);
    free(ra);
    free(rb);
    return 0;
}
