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
 * others have their last access time marked in a Fenwick tree over times:
 * every front key was accessed after any of them, so a key's distance is
 * the front's size plus the marks after its time. A key takes its time when
 * it leaves the front (so front hits cost no time), and times are renumbered
 * when the tree fills, so memory is O(M) for M distinct keys.
 */
#define ML_REUSE_FRONT 16

struct ml_reuse {
    struct ml_map last; /* key -> time of its last access (keys in the tree) */
    uint32_t *bit;      /* Fenwick tree over times 1..cap */
    uint64_t *keyat;    /* [cap + 1]: key marked at each time, or UINT64_MAX */
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

#endif
