/* Exact reuse distances: a bitmap of last-access marks over renumbered times, with counters. */
#include "analyze/reuse.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define START_CAP  4096 /* times; a power of two, at least 512 x 8 */
#define START_SLOT 1024
#define GOLD       0x9e3779b97f4a7c15ull

/* Bits set in x (no popcnt instruction in the baseline x86-64: libgcc's call was 6% of the time).
 */
static inline uint64_t pop(uint64_t x)
{
    x -= (x >> 1) & 0x5555555555555555ull;
    x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
    x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
    return (x * 0x0101010101010101ull) >> 56;
}

/* Level l counts the marks of 2^(9 + 4l) times; the top level has at most 16 counters. */
static inline unsigned lshift(unsigned l)
{
    return 9 + 4 * l;
}

static void free_tree(uint64_t *bits, uint32_t **cnt)
{
    free(bits);
    for (unsigned l = 0; l < ML_REUSE_LEVELS; l++)
        free(cnt[l]);
}

/* A zeroed bitmap and counters for cap times; the number of levels, or 0 when out of memory. */
static unsigned alloc_tree(uint64_t cap, uint64_t **bits, uint32_t **cnt)
{
    unsigned l = 0;
    int ok;

    memset(cnt, 0, ML_REUSE_LEVELS * sizeof(*cnt));
    ok = (*bits = calloc(cap / 64, sizeof(**bits))) != NULL;
    for (; ok && l < ML_REUSE_LEVELS; l++) {
        ok = (cnt[l] = calloc((cap >> lshift(l)) + 1, sizeof(*cnt[l]))) != NULL;
        if ((cap >> lshift(l)) <= 16)
            return ok ? l + 1 : (free_tree(*bits, cnt), 0);
    }
    free_tree(*bits, cnt);
    return 0;
}

int ml_reuse_init(struct ml_reuse *r)
{
    memset(r, 0, sizeof(*r));
    r->cap = START_CAP;
    r->now = 1;
    ml_mtf_init(&r->front, ML_REUSE_FRONT);
    r->mshift = 64 - 10;
    r->slot = calloc(START_SLOT, sizeof(*r->slot));
    r->levels = alloc_tree(r->cap, &r->bits, r->cnt);
    if (!r->slot || !r->levels) {
        ml_reuse_free(r);
        return -ENOMEM;
    }
    return 0;
}

void ml_reuse_free(struct ml_reuse *r)
{
    free(r->slot);
    if (r->levels)
        free_tree(r->bits, r->cnt);
    memset(r, 0, sizeof(*r));
}

static int grow_map(struct ml_reuse *r)
{
    uint64_t n = 1ull << (64 - r->mshift);
    struct ml_reuse_slot *s = calloc(2 * n, sizeof(*s));

    if (!s)
        return -ENOMEM;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t j;
        if (!r->slot[i].key)
            continue;
        for (j = (r->slot[i].key * GOLD) >> (r->mshift - 1); s[j].key; j = (j + 1) & (2 * n - 1))
            ;
        s[j] = r->slot[i];
    }
    free(r->slot);
    r->slot = s;
    r->mshift--;
    return 0;
}

/* Slot of key (inserted without a mark when absent); NULL when out of memory. */
static inline struct ml_reuse_slot *slot_of(struct ml_reuse *r, uint64_t key)
{
    uint64_t k = key + 1, i;

    for (;;) {
        uint64_t mask = (1ull << (64 - r->mshift)) - 1;
        for (i = (k * GOLD) >> r->mshift; r->slot[i].key; i = (i + 1) & mask)
            if (r->slot[i].key == k)
                return &r->slot[i];
        if ((r->nslot + 1) * 4 <= (mask + 1) * 3)
            break;
        if (grow_map(r))
            return NULL;
    }
    r->slot[i].key = k;
    r->slot[i].t = 0;
    r->nslot++;
    return &r->slot[i];
}

/* Marks at times after t. */
static inline uint64_t marks_after(const struct ml_reuse *r, uint64_t t)
{
    uint64_t w = t >> 6, s = pop(r->bits[w] >> (t & 63) >> 1), last = r->now >> 6, b = t >> 9;

    for (uint64_t j = w + 1; j <= (w | 7) && j <= last; j++)
        s += pop(r->bits[j]);
    for (unsigned l = 0; l < r->levels; l++, b >>= 4) {
        uint64_t end = r->now >> lshift(l);
        if (l + 1 < r->levels && end > (b | 15))
            end = b | 15;
        for (uint64_t j = b + 1; j <= end; j++)
            s += r->cnt[l][j];
    }
    return s;
}

static inline void mark(struct ml_reuse *r, uint64_t t, int on)
{
    if (on)
        r->bits[t >> 6] |= 1ull << (t & 63);
    else
        r->bits[t >> 6] &= ~(1ull << (t & 63));
    for (unsigned l = 0; l < r->levels; l++)
        r->cnt[l][t >> lshift(l)] += on ? 1u : UINT32_MAX;
}

/*
 * Renumbers the marks 1..n in time order (the order of distances is all that
 * matters) and rebuilds the bitmap, at a capacity of at least four times the
 * keys so that renumbering costs O(1) per access amortized. Leaves r as it
 * was when out of memory.
 */
static int compact(struct ml_reuse *r)
{
    uint64_t cap = r->cap, words = r->cap / 64, *bits, n = 0;
    uint32_t *cnt[ML_REUSE_LEVELS], *pre = malloc((words + 1) * sizeof(*pre));
    unsigned levels;

    while (cap < 4 * (r->live + 1))
        cap *= 2;
    if (!pre || !(levels = alloc_tree(cap, &bits, cnt))) {
        free(pre);
        return -ENOMEM;
    }
    /* The new time of the mark at t: 1 + the marks before it. */
    for (uint64_t w = 0; w < words; w++) {
        pre[w] = (uint32_t)n;
        n += pop(r->bits[w]);
    }
    for (uint64_t i = 0, ns = 1ull << (64 - r->mshift); i < ns; i++) {
        uint64_t t = r->slot[i].t;
        if (r->slot[i].key && t)
            r->slot[i].t = 1 + pre[t >> 6] + pop(r->bits[t >> 6] & ((1ull << (t & 63)) - 1));
    }
    free(pre);
    free_tree(r->bits, r->cnt);
    r->bits = bits;
    memcpy(r->cnt, cnt, sizeof(cnt));
    r->levels = levels;
    r->cap = cap;
    for (uint64_t t = 1; t <= n; t++)
        mark(r, t, 1);
    r->now = n + 1;
    return 0;
}

uint64_t ml_reuse_slow(struct ml_reuse *r, uint64_t key)
{
    struct ml_reuse_slot *slot;
    uint64_t d = ML_REUSE_COLD, old;
    uint8_t tag = ml_mtf_tag(key);
    int i = ml_mtf_find(&r->front, key, tag);

    if (i >= 0) {
        /* In the front: its rank is its distance; no tree work. */
        ml_mtf_touch(&r->front, i);
        return (uint64_t)i;
    }
    if (!(slot = slot_of(r, key)))
        return UINT64_MAX - 1;
    if (slot->t) {
        d = r->front.n + marks_after(r, slot->t);
        mark(r, slot->t, 0);
        r->live--;
        slot->t = 0;
    }
    if (r->front.n == r->front.cap && r->now >= r->cap && compact(r))
        return UINT64_MAX - 1;
    if (ml_mtf_push(&r->front, key, tag, &old)) {
        /*
         * The least recent front key went to the bitmap. Its time is taken now:
         * later than every mark (those keys were demoted before it), earlier
         * than the other front keys' (demoted after it): the order of recency.
         */
        struct ml_reuse_slot *s = slot_of(r, old);
        if (!s)
            return UINT64_MAX - 1;
        s->t = r->now;
        mark(r, r->now++, 1);
        r->live++;
    }
    return d;
}

int ml_reuse_keep(struct ml_reuse *r, int (*keep)(uint64_t key, void *arg), void *arg)
{
    struct ml_reuse n;
    uint64_t *order;

    /* Dense times 1..live: the marked keys in time order, least recent first. */
    if (compact(r) || !(order = malloc((r->live + 1) * sizeof(*order))))
        return -ENOMEM;
    for (uint64_t i = 0, ns = 1ull << (64 - r->mshift); i < ns; i++)
        if (r->slot[i].key && r->slot[i].t)
            order[r->slot[i].t - 1] = r->slot[i].key - 1;
    if (ml_reuse_init(&n))
        goto nomem;
    /* Replayed from the least recent: marks in time order, then the front from its last rank. */
    for (uint64_t t = 0; t < r->live; t++)
        if (keep(order[t], arg) && ml_reuse_slow(&n, order[t]) == UINT64_MAX - 1)
            goto nomem;
    for (uint32_t k = r->front.n; k-- > 0;) {
        uint64_t key = r->front.key[(r->front.ord >> (4 * k)) & 15];
        if (keep(key, arg) && ml_reuse_slow(&n, key) == UINT64_MAX - 1)
            goto nomem;
    }
    free(order);
    ml_reuse_free(r);
    *r = n;
    return 0;
nomem:
    free(order);
    ml_reuse_free(&n);
    return -ENOMEM;
}
