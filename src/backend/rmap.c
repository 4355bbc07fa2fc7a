/* Reducible maps: a buffer of inserts folded into an open-addressing table, merged when read. */
#include "backend/rmap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* n == 0 marks an empty slot: every key in the table was inserted at least once. */
struct ml_rent {
    uint64_t key, n, v;
    uint32_t flags, nset;
};

static uint32_t hash(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return (uint32_t)k;
}

struct ml_rmap *ml_rmap_new(enum ml_rop op, uint32_t set_max)
{
    struct ml_rmap *m;

    if (op > ML_ROP_SET || (op == ML_ROP_SET && (!set_max || set_max > ML_RMAP_SET_MAX)))
        return NULL;
    if (!(m = calloc(1, sizeof(*m))))
        return NULL;
    m->op = op;
    m->set_max = op == ML_ROP_SET ? set_max : 0;
    m->cap = 1024;
    m->tab = calloc(m->cap, sizeof(*m->tab));
    if (m->set_max)
        m->setv = malloc((size_t)m->cap * m->set_max * sizeof(*m->setv));
    if (!m->tab || (m->set_max && !m->setv)) {
        ml_rmap_free(m);
        return NULL;
    }
    m->pos = m->buf;
    m->end = m->buf + ML_RMAP_BUF;
    return m;
}

void ml_rmap_free(struct ml_rmap *m)
{
    if (!m)
        return;
    free(m->tab);
    free(m->setv);
    free(m);
}

static int grow(struct ml_rmap *m)
{
    uint32_t cap = m->cap * 2, mask = cap - 1;
    struct ml_rent *tab = calloc(cap, sizeof(*tab));
    uint64_t *setv = m->set_max ? malloc((size_t)cap * m->set_max * sizeof(*setv)) : NULL;

    if (!tab || (m->set_max && !setv) || cap < m->cap) {
        free(tab);
        free(setv);
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < m->cap; i++) {
        uint32_t j;
        if (!m->tab[i].n)
            continue;
        for (j = hash(m->tab[i].key) & mask; tab[j].n; j = (j + 1) & mask)
            ;
        tab[j] = m->tab[i];
        if (m->set_max)
            memcpy(setv + (size_t)j * m->set_max, m->setv + (size_t)i * m->set_max,
                   m->tab[i].nset * sizeof(*setv));
    }
    free(m->tab);
    free(m->setv);
    m->tab = tab;
    m->setv = setv;
    m->cap = cap;
    return 0;
}

/* The entry of key, created empty-valued (n = 0 until the caller applies a value); NULL: no memory.
 */
static struct ml_rent *slot(struct ml_rmap *m, uint64_t key, uint32_t *idx)
{
    uint32_t mask, j;

    if ((m->used + 1) * 10 > m->cap * 7 && grow(m)) {
        if (m->used + 1 >= m->cap)
            return NULL; /* full and cannot grow; a fuller table still works */
    }
    mask = m->cap - 1;
    for (j = hash(key) & mask; m->tab[j].n; j = (j + 1) & mask)
        if (m->tab[j].key == key) {
            *idx = j;
            return &m->tab[j];
        }
    m->tab[j].key = key;
    *idx = j;
    return &m->tab[j];
}

static void set_add(uint64_t *set, struct ml_rent *e, uint32_t max, uint64_t v)
{
    uint32_t lo = 0, hi = e->nset;

    while (lo < hi) { /* sorted: binary search for v's place */
        uint32_t mid = (lo + hi) / 2;
        if (set[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < e->nset && set[lo] == v)
        return;
    if (e->nset == max) {
        e->flags |= ML_RVAL_OVERFLOW;
        return;
    }
    memmove(set + lo + 1, set + lo, (e->nset - lo) * sizeof(*set));
    set[lo] = v;
    e->nset++;
}

/* Applies one value to an entry (first = the entry was empty). */
static void apply(struct ml_rmap *m, struct ml_rent *e, uint32_t idx, uint64_t v)
{
    int first = e->n == 0;

    if (first)
        m->used++;
    e->n++;
    switch (m->op) {
    case ML_ROP_COUNT:
        e->v = e->n;
        break;
    case ML_ROP_SUM:
        e->v += v;
        break;
    case ML_ROP_MIN:
        if (first || v < e->v)
            e->v = v;
        break;
    case ML_ROP_MAX:
        if (first || v > e->v)
            e->v = v;
        break;
    case ML_ROP_CONST:
        if (first)
            e->v = v;
        else if (v != e->v)
            e->flags |= ML_RVAL_VARIES;
        break;
    case ML_ROP_SET:
        set_add(m->setv + (size_t)idx * m->set_max, e, m->set_max, v);
        break;
    }
}

void ml_rmap_reduce(struct ml_rmap *m)
{
    struct ml_rpair *p = m->buf, *end = m->pos;

    while (p < end) {
        uint32_t idx;
        struct ml_rent *e = slot(m, p->key, &idx);
        uint64_t key = p->key;
        if (!e) {
            m->nomem = 1;
            break;
        }
        /* a run of one key: one lookup */
        for (; p < end && p->key == key; p++)
            apply(m, e, idx, p->val);
    }
    m->pos = m->buf;
}

static void fill(const struct ml_rmap *m, uint32_t i, struct ml_rval *out)
{
    const struct ml_rent *e = &m->tab[i];

    out->key = e->key;
    out->n = e->n;
    out->v = e->v;
    out->flags = e->flags;
    out->nset = e->nset;
    out->set = m->set_max ? m->setv + (size_t)i * m->set_max : NULL;
}

int ml_rmap_get(struct ml_rmap *m, uint64_t key, struct ml_rval *out)
{
    uint32_t mask;

    ml_rmap_reduce(m);
    mask = m->cap - 1;
    for (uint32_t j = hash(key) & mask; m->tab[j].n; j = (j + 1) & mask)
        if (m->tab[j].key == key) {
            fill(m, j, out);
            return 0;
        }
    return -1;
}

uint32_t ml_rmap_size(struct ml_rmap *m)
{
    ml_rmap_reduce(m);
    return m->used;
}

static int by_key(const void *a, const void *b)
{
    uint64_t x = ((const struct ml_rval *)a)->key, y = ((const struct ml_rval *)b)->key;

    return x < y ? -1 : x > y;
}

struct ml_rval *ml_rmap_sorted(struct ml_rmap *m, uint32_t *n)
{
    struct ml_rval *v;
    uint32_t k = 0;

    ml_rmap_reduce(m);
    *n = 0;
    if (!m->used || !(v = malloc((size_t)m->used * sizeof(*v))))
        return NULL;
    for (uint32_t i = 0; i < m->cap; i++)
        if (m->tab[i].n)
            fill(m, i, &v[k++]);
    qsort(v, k, sizeof(*v), by_key);
    *n = k;
    return v;
}

int ml_rmap_merge(struct ml_rmap *into, struct ml_rmap *from)
{
    if (into->op != from->op || into->set_max != from->set_max)
        return -EINVAL;
    ml_rmap_reduce(into);
    ml_rmap_reduce(from);
    for (uint32_t i = 0; i < from->cap; i++) {
        const struct ml_rent *f = &from->tab[i];
        struct ml_rent *e;
        uint32_t idx;
        if (!f->n)
            continue;
        if (!(e = slot(into, f->key, &idx)))
            return -ENOMEM;
        if (!e->n) {
            into->used++;
            *e = *f;
            if (into->set_max)
                memcpy(into->setv + (size_t)idx * into->set_max,
                       from->setv + (size_t)i * from->set_max, f->nset * sizeof(uint64_t));
            continue;
        }
        e->n += f->n;
        e->flags |= f->flags;
        switch (into->op) {
        case ML_ROP_COUNT:
            e->v = e->n;
            break;
        case ML_ROP_SUM:
            e->v += f->v;
            break;
        case ML_ROP_MIN:
            e->v = f->v < e->v ? f->v : e->v;
            break;
        case ML_ROP_MAX:
            e->v = f->v > e->v ? f->v : e->v;
            break;
        case ML_ROP_CONST:
            if (f->v != e->v)
                e->flags |= ML_RVAL_VARIES;
            break;
        case ML_ROP_SET:
            for (uint32_t k = 0; k < f->nset; k++)
                set_add(into->setv + (size_t)idx * into->set_max, e, into->set_max,
                        from->setv[(size_t)i * from->set_max + k]);
            break;
        }
    }
    memset(from->tab, 0, from->cap * sizeof(*from->tab));
    from->used = 0;
    return into->nomem || from->nomem ? -ENOMEM : 0;
}
