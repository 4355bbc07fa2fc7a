/* Histogram bins of exact reuse distances: an LRU stack with a marker at each power of two. */
#include "analyze/reuse.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define NIL        UINT32_MAX
#define START_SLOT 1024
#define GOLD       0x9e3779b97f4a7c15ull

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

/*
 * Appends slot x at the bottom of the stack, at position r->n (its bin and,
 * at a power of two, the marker there follow from it).
 */
static void append(struct ml_rbins *r, uint32_t x)
{
    uint64_t pos = r->n++;

    r->prev[x] = r->tail;
    r->next[x] = NIL;
    if (r->tail != NIL)
        r->next[r->tail] = x;
    else
        r->head = x;
    r->tail = x;
    r->bin[x] = (uint8_t)ml_reuse_bin(pos);
    if (pos && !(pos & (pos - 1)))
        r->mark[r->nmark++] = x;
}

/* Twice the slots: the keys are inserted again in stack order. */
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
    free_arrays(&old);
    return 0;
}

int ml_rbins_slow(struct ml_rbins *r, uint64_t key)
{
    uint64_t k = key + 1, mask = (1ull << (64 - r->mshift)) - 1, i;
    uint32_t x;
    unsigned b;

    for (i = (k * GOLD) >> r->mshift; r->key[i]; i = (i + 1) & mask) {
        if (r->key[i] != k)
            continue;
        x = (uint32_t)i;
        if (!(b = r->bin[x]))
            return 0;
        /*
         * Every key above x moves down one: the marker of each power of two
         * up to x's position passes to the key above it, whose bin grows.
         * x's own marker (it sits at a power of two) passes the same way.
         */
        for (unsigned j = 0; j < b; j++) {
            uint32_t p = r->prev[r->mark[j]];
            r->mark[j] = p;
            r->bin[p] = (uint8_t)(j + 1);
        }
        r->next[r->prev[x]] = r->next[x];
        if (r->next[x] != NIL)
            r->prev[r->next[x]] = r->prev[x];
        else
            r->tail = r->prev[x];
        goto top;
    }
    /* A first access: every key moves down one, the bottom one possibly onto a new marker. */
    if ((r->n + 1) * 4 > (mask + 1) * 3) {
        if (grow(r))
            return -ENOMEM;
        i = free_slot(r, k);
    }
    x = (uint32_t)i;
    r->key[x] = k;
    for (unsigned j = 0; j < r->nmark; j++) {
        uint32_t p = r->prev[r->mark[j]];
        r->mark[j] = p;
        r->bin[p] = (uint8_t)(j + 1);
    }
    if (r->n && !(r->n & (r->n - 1))) {
        r->mark[r->nmark] = r->tail;
        r->bin[r->tail] = (uint8_t)(++r->nmark);
    }
    r->n++;
    b = ML_REUSE_BINS - 1;
top:
    r->prev[x] = NIL;
    r->next[x] = r->head;
    if (r->head != NIL)
        r->prev[r->head] = x;
    else
        r->tail = x;
    r->head = x;
    r->bin[x] = 0;
    return (int)b;
}
