/* Pure helpers of the bb harness: lower envelope of timings, hex encoding, address-based flags. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bb/bb.h"

struct pair {
    double sum, a, b;
};

static int cmp_pair(const void *x, const void *y)
{
    double p = ((const struct pair *)x)->sum, q = ((const struct pair *)y)->sum;
    return (p > q) - (p < q);
}

unsigned ml_bb_envelope(const double *a, const double *b, unsigned n, unsigned k, double tol,
                        double *ma, double *mb)
{
    struct pair s[64];
    unsigned m = 0, within = 0;

    *ma = *mb = 0;
    for (unsigned i = 0; i < n && m < 64; i++)
        if (a[i] >= 0 && b[i] >= 0)
            s[m++] = (struct pair){a[i] + b[i], a[i], b[i]};
    if (m == 0)
        return 0;
    qsort(s, m, sizeof(*s), cmp_pair);
    while (within < m && s[within].sum <= s[0].sum * (1 + tol))
        within++;
    /* the k quietest pairs (fewer when there are fewer clean ones) */
    if (k == 0 || k > m)
        k = m;
    for (unsigned i = 0; i < k; i++) {
        *ma += s[i].a / k;
        *mb += s[i].b / k;
    }
    return within;
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int ml_bb_hex_parse(const char *s, uint8_t *buf, size_t cap, size_t *len)
{
    size_t n = 0;
    int hi = -1;

    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
        s += 2;
    for (; *s; s++) {
        int v = hexval((unsigned char)*s);

        if (v < 0) {
            if (*s == ' ' || *s == '\t' || *s == ',' || *s == ':') {
                if (hi >= 0)
                    return -EINVAL; /* a byte split by a separator */
                continue;
            }
            return -EINVAL;
        }
        if (hi < 0) {
            hi = v;
            continue;
        }
        if (n >= cap)
            return -E2BIG;
        buf[n++] = (uint8_t)(hi << 4 | v);
        hi = -1;
    }
    if (hi >= 0 || n == 0)
        return -EINVAL;
    *len = n;
    return 0;
}

void ml_bb_hex_format(const uint8_t *code, size_t len, char *out)
{
    static const char digits[] = "0123456789abcdef";

    for (size_t i = 0; i < len; i++) {
        out[2 * i] = digits[code[i] >> 4];
        out[2 * i + 1] = digits[code[i] & 15];
    }
    out[2 * len] = 0;
}

/*
 * Cross-line: an access whose bytes span two 64-byte lines (split loads and stores cost
 * extra on every x86 core). Alias: the harness maps every page onto one physical page, so
 * two accesses on different virtual pages whose in-page byte ranges overlap touch the same
 * bytes in the harness but not in the real program (with at least one store, this creates
 * store-to-load dependences that the program does not have).
 */
unsigned ml_bb_flags_compute(const struct ml_bb_access *a, unsigned n)
{
    unsigned flags = 0;

    for (unsigned i = 0; i < n; i++) {
        if ((a[i].addr & 63) + a[i].size > 64)
            flags |= ML_BB_FLAG_CROSS_LINE;
        for (unsigned j = 0; j < i; j++) {
            uint64_t oi = a[i].addr & 4095, oj = a[j].addr & 4095;

            if (!(a[i].write || a[j].write))
                continue;
            if ((a[i].addr >> 12) == (a[j].addr >> 12))
                continue;
            if (oi < oj + a[j].size && oj < oi + a[i].size)
                flags |= ML_BB_FLAG_ALIAS;
        }
    }
    return flags;
}
