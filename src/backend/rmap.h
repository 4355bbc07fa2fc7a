/* Reducible maps: key -> count, sum, min, max, constant value or bounded set; buffered inserts. */
#ifndef ML_BACKEND_RMAP_H
#define ML_BACKEND_RMAP_H

#include <stdint.h>

/*
 * A module's handler inserts (key, value) pairs at event rate; most keys
 * repeat (the same instruction, the same pair of instructions). An insert
 * only appends to a buffer (store, advance, compare, branch); a full buffer
 * is reduced into the map's table, runs of one key folded first. Each worker
 * owns its maps, so reductions run in parallel on the workers without locks;
 * the workers' maps are merged only when a report reads them
 * (ml_rmap_merge). Reading a map (get, sorted) reduces its buffer first.
 */
enum ml_rop {
    ML_ROP_COUNT, /* v = number of inserts */
    ML_ROP_SUM,   /* v = sum of values (mod 2^64) */
    ML_ROP_MIN,   /* v = smallest value */
    ML_ROP_MAX,   /* v = largest value */
    ML_ROP_CONST, /* v = the first value; ML_RVAL_VARIES once another one came */
    ML_ROP_SET,   /* up to set_max distinct values; ML_RVAL_OVERFLOW beyond */
};

#define ML_RVAL_VARIES   1u
#define ML_RVAL_OVERFLOW 2u
#define ML_RMAP_SET_MAX  64u
#define ML_RMAP_BUF      4096u /* inserts buffered before a reduction */

struct ml_rval {
    uint64_t key;
    uint64_t n; /* inserts of this key */
    uint64_t v;
    uint32_t flags;      /* ML_RVAL_* */
    uint32_t nset;       /* SET: distinct values held in set */
    const uint64_t *set; /* SET: nset values, ascending (valid until the next insert) */
};

struct ml_rpair {
    uint64_t key, val;
};

struct ml_rmap {
    struct ml_rpair *pos, *end; /* the buffer's free part */
    struct ml_rpair buf[ML_RMAP_BUF];
    enum ml_rop op;
    uint32_t set_max;
    struct ml_rent *tab; /* open addressing, power-of-two size */
    uint64_t *setv;      /* SET: set_max values per table entry */
    uint32_t cap, used;
    int nomem; /* a reduction lost inserts to allocation failure */
};

/* A new map; set_max (1..ML_RMAP_SET_MAX) is used by ML_ROP_SET only. NULL: no memory. */
struct ml_rmap *ml_rmap_new(enum ml_rop op, uint32_t set_max);
void ml_rmap_free(struct ml_rmap *m);
/* Applies the buffered inserts to the table (an insert calls it when the buffer is full). */
void ml_rmap_reduce(struct ml_rmap *m);

static inline void ml_rmap_add(struct ml_rmap *m, uint64_t key, uint64_t val)
{
    m->pos->key = key;
    m->pos->val = val;
    if (++m->pos == m->end)
        ml_rmap_reduce(m);
}

/* Fills out with the entry of key: 0, or -1 when never inserted. out->set: see above. */
int ml_rmap_get(struct ml_rmap *m, uint64_t key, struct ml_rval *out);
/* Number of distinct keys. */
uint32_t ml_rmap_size(struct ml_rmap *m);
/*
 * All entries sorted by key into a malloc'd array of *n (sets point into the
 * map: valid until the next insert); NULL with *n = 0 when empty or out of
 * memory (m->nomem says which).
 */
struct ml_rval *ml_rmap_sorted(struct ml_rmap *m, uint32_t *n);
/* Folds from into into (same op and set_max); from is left empty. 0 or -errno. */
int ml_rmap_merge(struct ml_rmap *into, struct ml_rmap *from);

#endif
