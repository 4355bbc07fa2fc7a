/* Reuse distances of a stream of keys (lines, pages): exact in O(log M) per access. */
#ifndef ML_ANALYZE_REUSE_H
#define ML_ANALYZE_REUSE_H

#include <stdint.h>

#include "analyze/util.h"

#define ML_REUSE_COLD UINT64_MAX

/*
 * The reuse distance of an access is the number of distinct other keys
 * accessed since the previous access to its key (ML_REUSE_COLD for a first
 * access): an access hits in a fully associative LRU cache of C entries iff
 * its distance < C. The ML_REUSE_FRONT most recent keys are kept in
 * move-to-front order (a key there is at distance = its position, at the
 * cost of a short scan: loops over a few arrays or pages stay here). The
 * others have their last access time marked in a bitmap over times:
 * every front key was accessed after any of them, so a key's distance is
 * the front's size plus the marks after its time. Marks are counted by
 * the bitmap's words and by levels of counters over 512, 8192, ... times
 * (16 to a cache line), so a query and its update touch one bitmap line
 * and a line per level, where a Fenwick tree touched a node per bit of the
 * time, most of them outside the cache. The key -> time map keeps both in
 * one slot (one cache miss per lookup) and can be prefetched a few accesses
 * ahead (ml_reuse_prefetch). A key takes its time when it leaves the front
 * (so front hits cost no time), and times are renumbered when the bitmap
 * fills, so memory is O(M) for M distinct keys.
 */
#define ML_REUSE_FRONT  16
#define ML_REUSE_LEVELS 8

struct ml_reuse_slot {
    uint64_t key; /* key + 1, 0: empty */
    uint64_t t;   /* time of its mark, 0: none (in the front, or not in the stack) */
};

struct ml_reuse {
    struct ml_reuse_slot *slot;     /* open addressing, Fibonacci hashing */
    uint64_t nslot;                 /* keys in the map */
    uint32_t mshift;                /* 64 - log2(slots) */
    uint32_t levels;                /* counter levels in use */
    uint64_t *bits;                 /* [cap / 64]: bit t: a mark at time t */
    uint32_t *cnt[ML_REUSE_LEVELS]; /* level l: marks per 512 x 16^l times */
    uint64_t cap, now, live;
    struct ml_mtf front; /* the ML_REUSE_FRONT most recent keys; they have no time yet */
};

int ml_reuse_init(struct ml_reuse *r);
void ml_reuse_free(struct ml_reuse *r);
/* Slow path of ml_reuse_access; UINT64_MAX - 1 when out of memory. */
uint64_t ml_reuse_slow(struct ml_reuse *r, uint64_t key);

/*
 * Keeps only the keys for which keep(key, arg) is true, in their order of
 * recency (the stack restricted to them): 0 or -ENOMEM (r unchanged).
 */
int ml_reuse_keep(struct ml_reuse *r, int (*keep)(uint64_t key, void *arg), void *arg);
/* Hints the memory of key's map slot into the cache (for an access a few records ahead). */
static inline void ml_reuse_prefetch(const struct ml_reuse *r, uint64_t key)
{
    __builtin_prefetch(&r->slot[((key + 1) * 0x9e3779b97f4a7c15ull) >> r->mshift]);
}

/* Keys held (in the stack). */
static inline uint64_t ml_reuse_keys(const struct ml_reuse *r)
{
    return r->live + r->front.n;
}

static inline uint64_t ml_reuse_access(struct ml_reuse *r, uint64_t key)
{
    if (r->front.n && key == r->front.key[r->front.ord & 15])
        return 0;
    return ml_reuse_slow(r, key);
}

/* Histogram bin of a distance: 0 -> 0, d -> 1 + floor(log2 d) (bin b holds [2^(b-1), 2^b - 1]). */
#define ML_REUSE_BINS 66 /* 65 distance bins, then cold */
static inline unsigned ml_reuse_bin(uint64_t d)
{
    return d == ML_REUSE_COLD ? ML_REUSE_BINS - 1 : d ? 64 - (unsigned)__builtin_clzll(d) : 0;
}

/*
 * Only the bin of each distance, exactly (what a granularity measured in
 * full needs), at a cost that grows with the bin rather than with the
 * keys. The ML_RBINS_FRONT most recent keys are a short list (distances
 * 0..3: compares and moves, inline). The others form a doubly linked LRU
 * stack below them, each with the bin of its distance, and a marker sits
 * on the key at each distance 2^j. An access at bin b moves its key to the
 * front, the front's bottom key onto the stack's top, and the b - 2
 * markers above it each to the key above them (a load and two stores
 * each, independent of one another); nothing else changes bin. Stack and
 * map share their slots (open addressing, Fibonacci hashing; the stack is
 * re-linked when the map grows).
 */
#define ML_RBINS_FRONT 4
struct ml_rbins {
    uint64_t fkey[ML_RBINS_FRONT]; /* the front, most recent first: key + 1, 0: none */
    uint32_t fslot[ML_RBINS_FRONT];
    uint64_t *key;         /* per slot: key + 1, 0: empty */
    uint32_t *prev, *next; /* per slot: neighbours in the stack (UINT32_MAX: none) */
    uint8_t *bin;          /* per slot in the stack: bin of its distance */
    uint64_t n;            /* keys in the stack */
    uint32_t mshift;       /* 64 - log2(slots) */
    uint32_t head, tail;
    uint32_t nmark;
    uint32_t mark[64]; /* slot at distance 2^(j + 2) (stack position 2^(j + 2) - 4) */
};

int ml_rbins_init(struct ml_rbins *r);
void ml_rbins_free(struct ml_rbins *r);
/* Bin of the distance of an access to key (ml_reuse_bin) when outside the front, or -ENOMEM. */
int ml_rbins_slow(struct ml_rbins *r, uint64_t key);

/* Key + 1 = k (slot s) to the front's top, its keys 0..f - 1 down one (f < 4: unrolled, as a
 * loop became a call to memmove). */
static inline void ml_rbins_to_top(struct ml_rbins *r, unsigned f, uint64_t k, uint32_t s)
{
    switch (f) {
    case 3:
        r->fkey[3] = r->fkey[2];
        r->fslot[3] = r->fslot[2];
        /* fall through */
    case 2:
        r->fkey[2] = r->fkey[1];
        r->fslot[2] = r->fslot[1];
        /* fall through */
    case 1:
        r->fkey[1] = r->fkey[0];
        r->fslot[1] = r->fslot[0];
    }
    r->fkey[0] = k;
    r->fslot[0] = s;
}

/* Bin of the distance of an access to key (ml_reuse_bin), or -ENOMEM. */
static inline int ml_rbins_access(struct ml_rbins *r, uint64_t key)
{
    uint64_t k = key + 1;
    unsigned f;

    if (r->fkey[0] == k)
        return 0;
    if (r->fkey[1] == k)
        f = 1;
    else if (r->fkey[2] == k)
        f = 2;
    else if (r->fkey[3] == k)
        f = 3;
    else
        return ml_rbins_slow(r, key);
    ml_rbins_to_top(r, f, k, r->fslot[f]);
    return f == 1 ? 1 : 2;
}

static inline void ml_rbins_prefetch(const struct ml_rbins *r, uint64_t key)
{
    __builtin_prefetch(&r->key[((key + 1) * 0x9e3779b97f4a7c15ull) >> r->mshift]);
}

#endif
