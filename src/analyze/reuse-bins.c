/* Histogram bins of exact reuse distances: an LRU stack with a marker at each power of two. */
#include "analyze/reuse.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define NIL UINT32_MAX
#define F   ML_RBINS_FRONT
_Static_assert(ML_RBINS_FRONT == 4, "ml_rbins_to_top moves the front unrolled");
#define GOLD 0x9e3779b97f4a7c15ull

static void free_arrays(struct ml_rbins *r)
{
    free(r->key);
    free(r->prev);
    free(r->next);
    free(r->bin);
}

/* Empty arrays for 2^(64 - mshift) slots; 0 or -ENOMEM (r unchanged). */
static int alloc_arrays(struct ml_rbins *r, uint32_t mshift)
{
    uint64_t n = 1ull << (64 - mshift);
    struct ml_rbins a = {.mshift = mshift};

    a.key = calloc(n, sizeof(*a.key));
    a.prev = malloc(n * sizeof(*a.prev));
    a.next = malloc(n * sizeof(*a.next));
    a.bin = malloc(n);
    if (!a.key || !a.prev || !a.next || !a.bin) {
        free_arrays(&a);
        return -ENOMEM;
    }
    r->key = a.key;
    r->prev = a.prev;
    r->next = a.next;
    r->bin = a.bin;
    r->mshift = mshift;
    return 0;
}

int ml_rbins_init(struct ml_rbins *r)
{
    memset(r, 0, sizeof(*r));
    r->head = r->tail = NIL;
    return alloc_arrays(r, 64 - 10);
}

void ml_rbins_free(struct ml_rbins *r)
{
    free_arrays(r);
    memset(r, 0, sizeof(*r));
}

/* A free slot for key + 1 = k (absent from the table). */
static inline uint32_t free_slot(const struct ml_rbins *r, uint64_t k)
{
    uint64_t mask = (1ull << (64 - r->mshift)) - 1, i;

    for (i = (k * GOLD) >> r->mshift; r->key[i]; i = (i + 1) & mask)
        ;
    return (uint32_t)i;
}

/* Appends slot x at the bottom of the stack, at position r->n (distance F + n). */
static void append(struct ml_rbins *r, uint32_t x)
{
    uint64_t d = F + r->n++;

    r->prev[x] = r->tail;
    r->next[x] = NIL;
    if (r->tail != NIL)
        r->next[r->tail] = x;
    else
        r->head = x;
    r->tail = x;
    r->bin[x] = (uint8_t)ml_reuse_bin(d);
    if (!(d & (d - 1)))
        r->mark[r->nmark++] = x;
}

/* Twice the slots: the stack's keys are inserted again in order, then the front's. */
static int grow(struct ml_rbins *r)
{
    struct ml_rbins old = *r;
    uint32_t x;

    if (alloc_arrays(r, old.mshift - 1))
        return -ENOMEM;
    r->head = r->tail = NIL;
    r->n = r->nmark = 0;
    for (x = old.head; x != NIL; x = old.next[x]) {
        uint32_t y = free_slot(r, old.key[x]);
        r->key[y] = old.key[x];
        append(r, y);
    }
    for (unsigned f = 0; f < F; f++)
        if (r->fkey[f])
            r->key[r->fslot[f] = free_slot(r, r->fkey[f])] = r->fkey[f];
    free_arrays(&old);
    return 0;
}

/*
 * Markers from 1 on each pass to the key above theirs (positions 0..p
 * move down one); marker 0 (position 0) passes to x, about to be pushed.
 */
static inline void pass_markers(struct ml_rbins *r, unsigned m, uint32_t x)
{
    for (unsigned j = 1; j < m; j++) {
        uint32_t p = r->prev[r->mark[j]];
        r->mark[j] = p;
        r->bin[p] = (uint8_t)(j + 3);
    }
    r->mark[0] = x;
    r->bin[x] = 3;
}

/* Key y (slot) to the front's top; the front's bottom key out (returned, or NIL). */
static inline uint32_t front_push(struct ml_rbins *r, uint64_t k, uint32_t y)
{
    uint32_t x = r->fkey[F - 1] ? r->fslot[F - 1] : NIL;

    ml_rbins_to_top(r, F - 1, k, y);
    return x;
}

/* x on top of the stack (below the front). */
static inline void push(struct ml_rbins *r, uint32_t x)
{
    r->prev[x] = NIL;
    r->next[x] = r->head;
    if (r->head != NIL)
        r->prev[r->head] = x;
    else
        r->tail = x;
    r->head = x;
}

int ml_rbins_slow(struct ml_rbins *r, uint64_t key)
{
    uint64_t k = key + 1, mask = (1ull << (64 - r->mshift)) - 1, i;
    uint32_t y, x;
    unsigned b;

    for (i = (k * GOLD) >> r->mshift; r->key[i]; i = (i + 1) & mask) {
        if (r->key[i] != k)
            continue;
        /*
         * In the stack (keys outside the front are; the stack holds keys only
         * while the front is full): its position p gives its bin. Keys above
         * it move down one, x (out of the front) takes position 0, y leaves.
         */
        y = (uint32_t)i;
        b = r->bin[y];
        x = front_push(r, k, y);
        pass_markers(r, b - 2, x);
        if (r->prev[y] != NIL)
            r->next[r->prev[y]] = r->next[y];
        else
            r->head = r->next[y];
        if (r->next[y] != NIL)
            r->prev[r->next[y]] = r->prev[y];
        else
            r->tail = r->prev[y];
        push(r, x);
        return (int)b;
    }
    /* A first access: the front's bottom key goes on top of the stack, the rest moves down one. */
    if ((r->n + F + 1) * 4 > (mask + 1) * 3) {
        if (grow(r))
            return -ENOMEM;
        i = free_slot(r, k);
    }
    y = (uint32_t)i;
    r->key[y] = k;
    if ((x = front_push(r, k, y)) != NIL) {
        uint32_t tail = r->tail;
        pass_markers(r, r->nmark, x);
        push(r, x);
        /* The old bottom key reaches the next power of two. */
        if (!r->nmark || (r->n && F + r->n == 4ull << r->nmark)) {
            uint32_t t = r->n ? tail : x;
            r->mark[r->nmark] = t;
            r->bin[t] = (uint8_t)(3 + r->nmark++);
        }
        r->n++;
    }
    return ML_REUSE_BINS - 1;
}
