/* Live heap blocks ordered by address: a treap (randomised search tree) keyed by start. */
#include "backend/blocks.h"

#include <errno.h>
#include <stdlib.h>

struct node {
    struct ml_block b;
    struct node *l, *r;
    uint64_t prio;
};

struct ml_blocks {
    struct node *root;
    uint64_t n, rng;
};

struct ml_blocks *ml_blocks_new(void)
{
    struct ml_blocks *b = calloc(1, sizeof(*b));

    if (b)
        b->rng = 0x9e3779b97f4a7c15ull;
    return b;
}

static void free_tree(struct node *t)
{
    while (t) {
        struct node *r = t->r;
        free_tree(t->l);
        free(t);
        t = r;
    }
}

void ml_blocks_free(struct ml_blocks *b)
{
    if (!b)
        return;
    free_tree(b->root);
    free(b);
}

/* Splits t into the nodes with start < key (*lo) and the rest (*hi). */
static void split(struct node *t, uint64_t key, struct node **lo, struct node **hi)
{
    if (!t) {
        *lo = *hi = NULL;
    } else if (t->b.addr < key) {
        split(t->r, key, &t->r, hi);
        *lo = t;
    } else {
        split(t->l, key, lo, &t->l);
        *hi = t;
    }
}

/* Joins two treaps, every start of a below every start of b. */
static struct node *merge(struct node *a, struct node *b)
{
    if (!a || !b)
        return a ? a : b;
    if (a->prio > b->prio) {
        a->r = merge(a->r, b);
        return a;
    }
    b->l = merge(a, b->l);
    return b;
}

/* Cuts the node starting at addr out of the tree; returns it (NULL when none). */
static struct node *cut(struct ml_blocks *b, uint64_t addr)
{
    struct node *lo, *mid, *hi;

    split(b->root, addr, &lo, &hi);
    split(hi, addr + 1, &mid, &hi);
    b->root = merge(lo, hi);
    return mid;
}

struct ml_block *ml_blocks_add(struct ml_blocks *b, uint64_t addr, uint64_t size)
{
    struct node *n = cut(b, addr), *lo, *hi;

    if (n) {
        b->n--;
    } else if (!(n = malloc(sizeof(*n)))) {
        return NULL;
    }
    b->rng ^= b->rng << 13;
    b->rng ^= b->rng >> 7;
    b->rng ^= b->rng << 17;
    *n = (struct node){.b = {.addr = addr, .size = size}, .prio = b->rng};
    split(b->root, addr, &lo, &hi);
    b->root = merge(merge(lo, n), hi);
    b->n++;
    return &n->b;
}

int ml_blocks_remove(struct ml_blocks *b, uint64_t addr)
{
    struct node *n = cut(b, addr);

    if (!n)
        return -ENOENT;
    free(n);
    b->n--;
    return 0;
}

struct ml_block *ml_blocks_at(const struct ml_blocks *b, uint64_t addr)
{
    for (struct node *t = b->root; t; t = addr < t->b.addr ? t->l : t->r)
        if (t->b.addr == addr)
            return &t->b;
    return NULL;
}

struct ml_block *ml_blocks_holding(const struct ml_blocks *b, uint64_t a)
{
    struct node *best = NULL;

    for (struct node *t = b->root; t;) {
        if (t->b.addr <= a) {
            best = t;
            t = t->r;
        } else {
            t = t->l;
        }
    }
    if (!best || a - best->b.addr >= (best->b.size ? best->b.size : 1))
        return NULL;
    return &best->b;
}

uint64_t ml_blocks_count(const struct ml_blocks *b)
{
    return b->n;
}
