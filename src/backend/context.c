/* Context manager: interned contexts (open-addressing table) and per-thread frame stacks. */
#include "backend/context.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct ml_cnode {
    uint64_t id;
    uint32_t parent, kind;
};

struct ml_ctx {
    struct ml_cnode *nodes; /* [count], node 0 is the root */
    uint32_t count, cap;
    uint32_t *slots; /* hash table of node ids + 1 (0 = empty) */
    uint32_t nslots; /* power of two */
};

static uint64_t mix(uint32_t parent, uint32_t kind, uint64_t id)
{
    uint64_t h = id * 0x9e3779b97f4a7c15ull ^ ((uint64_t)parent << 2 | kind);

    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 29);
}

struct ml_ctx *ml_ctx_new(void)
{
    struct ml_ctx *c = calloc(1, sizeof(*c));

    if (!c)
        return NULL;
    c->cap = 64;
    c->nslots = 128;
    c->nodes = calloc(c->cap, sizeof(*c->nodes));
    c->slots = calloc(c->nslots, sizeof(*c->slots));
    if (!c->nodes || !c->slots) {
        ml_ctx_free(c);
        return NULL;
    }
    c->count = 1; /* the root: parent of itself, never looked up */
    return c;
}

void ml_ctx_free(struct ml_ctx *c)
{
    if (!c)
        return;
    free(c->nodes);
    free(c->slots);
    free(c);
}

static int grow_slots(struct ml_ctx *c)
{
    uint32_t n = c->nslots * 2, mask = n - 1;
    uint32_t *s = calloc(n, sizeof(*s));

    if (!s)
        return -ENOMEM;
    for (uint32_t i = 1; i < c->count; i++) {
        const struct ml_cnode *nd = &c->nodes[i];
        uint32_t j = (uint32_t)mix(nd->parent, nd->kind, nd->id) & mask;
        while (s[j])
            j = (j + 1) & mask;
        s[j] = i + 1;
    }
    free(c->slots);
    c->slots = s;
    c->nslots = n;
    return 0;
}

uint32_t ml_ctx_child(struct ml_ctx *c, uint32_t parent, uint32_t kind, uint64_t id)
{
    uint32_t mask = c->nslots - 1, j = (uint32_t)mix(parent, kind, id) & mask, e;

    while ((e = c->slots[j])) {
        const struct ml_cnode *nd = &c->nodes[e - 1];
        if (nd->id == id && nd->parent == parent && nd->kind == kind)
            return e - 1;
        j = (j + 1) & mask;
    }
    if (c->count == ML_CTX_NONE - 1)
        return ML_CTX_NONE;
    if (c->count == c->cap) {
        uint32_t cap = c->cap > UINT32_MAX / 2 ? ML_CTX_NONE - 1 : c->cap * 2;
        struct ml_cnode *n = realloc(c->nodes, (size_t)cap * sizeof(*n));
        if (!n)
            return ML_CTX_NONE;
        c->nodes = n;
        c->cap = cap;
    }
    c->nodes[c->count] = (struct ml_cnode){.id = id, .parent = parent, .kind = kind};
    c->slots[j] = c->count + 1;
    c->count++;
    /* keep the table at most half full; a failed grow leaves a fuller, working table */
    if (c->count * 2 > c->nslots && c->nslots < (1u << 31))
        grow_slots(c);
    return c->count - 1;
}

int ml_ctx_get(const struct ml_ctx *c, uint32_t ctx, uint32_t *parent, uint32_t *kind, uint64_t *id)
{
    if (ctx == ML_CTX_ROOT || ctx >= c->count)
        return -1;
    *parent = c->nodes[ctx].parent;
    *kind = c->nodes[ctx].kind;
    *id = c->nodes[ctx].id;
    return 0;
}

uint32_t ml_ctx_count(const struct ml_ctx *c)
{
    return c->count;
}

uint32_t ml_ctx_depth(const struct ml_ctx *c, uint32_t ctx)
{
    uint32_t d = 0;

    while (ctx != ML_CTX_ROOT && ctx < c->count) {
        ctx = c->nodes[ctx].parent;
        d++;
    }
    return d;
}

uint32_t *ml_ctx_merge(struct ml_ctx *into, const struct ml_ctx *from)
{
    uint32_t *map = malloc((size_t)from->count * sizeof(*map));

    if (!map)
        return NULL;
    map[ML_CTX_ROOT] = ML_CTX_ROOT;
    /* parents are always created before their children, so map[parent] is ready */
    for (uint32_t i = 1; i < from->count; i++) {
        const struct ml_cnode *nd = &from->nodes[i];
        map[i] = ml_ctx_child(into, map[nd->parent], nd->kind, nd->id);
        if (map[i] == ML_CTX_NONE) {
            free(map);
            return NULL;
        }
    }
    return map;
}

struct ml_cstack *ml_cstack_new(struct ml_ctx *c)
{
    struct ml_cstack *s = calloc(1, sizeof(*s));

    if (s)
        s->c = c;
    return s;
}

void ml_cstack_free(struct ml_cstack *s)
{
    if (!s)
        return;
    free(s->f);
    free(s);
}

int ml_cstack_push(struct ml_cstack *s, uint32_t kind, uint64_t id)
{
    uint32_t ctx;

    if (s->over || s->depth == ML_CSTACK_MAX) {
        s->over++;
        return 0;
    }
    if (s->depth == s->cap) {
        uint32_t cap = s->cap ? s->cap * 2 : 16;
        struct ml_cframe *f = realloc(s->f, (size_t)cap * sizeof(*f));
        if (!f) {
            s->nomem++;
            return -ENOMEM;
        }
        s->f = f;
        s->cap = cap;
    }
    ctx = ml_ctx_child(s->c, ml_cstack_ctx(s), kind, id);
    if (ctx == ML_CTX_NONE) {
        s->nomem++;
        return -ENOMEM;
    }
    s->f[s->depth++] =
        (struct ml_cframe){.ctx = ctx, .kind = kind, .id = id, .stamp = ++s->stamps, .iter = 0};
    return 0;
}

/* The innermost open frame (kind, id), or -1. */
static int64_t find(const struct ml_cstack *s, uint32_t kind, uint64_t id)
{
    for (uint32_t i = s->depth; i-- > 0;)
        if (s->f[i].id == id && s->f[i].kind == kind)
            return i;
    return -1;
}

int ml_cstack_pop(struct ml_cstack *s, uint32_t kind, uint64_t id)
{
    int64_t i;

    if (s->over) { /* frames beyond the limit close first */
        s->over--;
        return 0;
    }
    if ((i = find(s, kind, id)) < 0) {
        s->unmatched++;
        return -ENOENT;
    }
    s->depth = (uint32_t)i;
    return 0;
}

int ml_cstack_iter(struct ml_cstack *s, uint64_t loop)
{
    int64_t i;

    if (s->over)
        return 0;
    if ((i = find(s, ML_CTX_LOOP, loop)) < 0) {
        s->unmatched++;
        return -ENOENT;
    }
    s->depth = (uint32_t)i + 1;
    s->f[i].iter++;
    return 0;
}
