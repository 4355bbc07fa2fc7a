/* Exact reuse distances: a Fenwick tree of last-access marks over renumbered times. */
#include "analyze/reuse.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define START_CAP 4096

int ml_reuse_init(struct ml_reuse *r)
{
    memset(r, 0, sizeof(*r));
    r->cap = START_CAP;
    r->now = 1;
    ml_mtf_init(&r->front, ML_REUSE_FRONT);
    r->bit = calloc(r->cap + 1, sizeof(*r->bit));
    r->keyat = malloc((r->cap + 1) * sizeof(*r->keyat));
    if (!r->bit || !r->keyat || ml_map_init(&r->last, 1024)) {
        ml_reuse_free(r);
        return -ENOMEM;
    }
    memset(r->keyat, 0xff, (r->cap + 1) * sizeof(*r->keyat));
    return 0;
}

void ml_reuse_free(struct ml_reuse *r)
{
    free(r->bit);
    free(r->keyat);
    ml_map_free(&r->last);
    memset(r, 0, sizeof(*r));
}

static inline void bit_add(uint32_t *bit, uint64_t cap, uint64_t i, int32_t v)
{
    for (; i <= cap; i += i & -i)
        bit[i] += (uint32_t)v;
}

static inline uint64_t bit_prefix(const uint32_t *bit, uint64_t i)
{
    uint64_t s = 0;

    for (; i; i -= i & -i)
        s += bit[i];
    return s;
}

/*
 * Renumbers the tree's marks 1..n in time order (the order of distances is
 * all that matters), then the front's times above them, and rebuilds the
 * tree, at a capacity of at least four times the keys so that renumbering
 * costs O(1) per access amortized.
 */
static int compact(struct ml_reuse *r)
{
    uint64_t cap = r->cap, n = 0;

    while (cap < 4 * (r->live + 1))
        cap *= 2;
    if (cap != r->cap) {
        uint64_t *k = malloc((cap + 1) * sizeof(*k));
        uint32_t *b = malloc((cap + 1) * sizeof(*b));
        if (!k || !b) {
            free(k);
            free(b);
            return -ENOMEM;
        }
        for (uint64_t t = 1; t < r->now; t++)
            if (r->keyat[t] != UINT64_MAX)
                k[++n] = r->keyat[t];
        free(r->keyat);
        free(r->bit);
        r->keyat = k;
        r->bit = b;
        r->cap = cap;
    } else {
        for (uint64_t t = 1; t < r->now; t++)
            if (r->keyat[t] != UINT64_MAX)
                r->keyat[++n] = r->keyat[t];
    }
    for (uint64_t t = 1; t <= n; t++)
        *ml_map_find(&r->last, r->keyat[t]) = t;
    /* Linear-time build: every position holds 1 for a mark, then push sums to parents. */
    for (uint64_t t = 1; t <= r->cap; t++)
        r->bit[t] = t <= n;
    for (uint64_t t = 1; t <= r->cap; t++) {
        uint64_t p = t + (t & -t);
        if (p <= r->cap)
            r->bit[p] += r->bit[t];
    }
    for (uint64_t t = n + 1; t <= r->cap; t++)
        r->keyat[t] = UINT64_MAX;
    r->now = n + 1;
    return 0;
}

uint64_t ml_reuse_slow(struct ml_reuse *r, uint64_t key)
{
    uint64_t *slot, d = ML_REUSE_COLD, old;
    uint8_t tag = ml_mtf_tag(key);
    int i = ml_mtf_find(&r->front, key, tag);

    if (i >= 0) {
        /* In the front: its rank is its distance; no tree work. */
        ml_mtf_touch(&r->front, i);
        return (uint64_t)i;
    }
    if (!(slot = ml_map_slot(&r->last, key)))
        return UINT64_MAX - 1;
    if (*slot) {
        uint64_t t = *slot;
        d = r->front.n + r->live - bit_prefix(r->bit, t);
        bit_add(r->bit, r->cap, t, -1);
        r->keyat[t] = UINT64_MAX;
        r->live--;
        *slot = 0;
    }
    if (r->front.n == r->front.cap && r->now > r->cap && compact(r))
        return UINT64_MAX - 1;
    if (ml_mtf_push(&r->front, key, tag, &old)) {
        /*
         * The least recent front key went to the tree. Its time is taken now:
         * later than every mark (those keys were demoted before it), earlier
         * than the other front keys' (demoted after it): the order of recency.
         */
        uint64_t *s = ml_map_slot(&r->last, old);
        if (!s)
            return UINT64_MAX - 1;
        *s = r->now;
        r->keyat[r->now] = old;
        bit_add(r->bit, r->cap, r->now++, 1);
        r->live++;
    }
    return d;
}

int ml_reuse_keep(struct ml_reuse *r, int (*keep)(uint64_t key, void *arg), void *arg)
{
    struct ml_reuse n;

    if (ml_reuse_init(&n))
        return -ENOMEM;
    /* Replayed from the least recent: marks in time order, then the front from its last rank. */
    for (uint64_t t = 1; t < r->now; t++)
        if (r->keyat[t] != UINT64_MAX && keep(r->keyat[t], arg) &&
            ml_reuse_slow(&n, r->keyat[t]) == UINT64_MAX - 1)
            goto nomem;
    for (uint32_t k = r->front.n; k-- > 0;) {
        uint64_t key = r->front.key[(r->front.ord >> (4 * k)) & 15];
        if (keep(key, arg) && ml_reuse_slow(&n, key) == UINT64_MAX - 1)
            goto nomem;
    }
    ml_reuse_free(r);
    *r = n;
    return 0;
nomem:
    ml_reuse_free(&n);
    return -ENOMEM;
}
