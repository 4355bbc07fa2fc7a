/* Module 'pointsto': per pointer-creating instruction, the allocation sites it points into. */
#include "backend/backend.h"
#include "backend/blocks.h"
#include "backend/rmap.h"
#include "backend/sites.h"
#include "format/csv.h"
#include "format/events.h"
#include "format/json.h"
#include "format/queue.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/*
 * Pointers are created by loads of pointers, calls that return one and
 * pointer parameters at function entry (PTR_DEF points, events.c); each
 * carries the pointer. The live heap blocks (runtime heap events, named as
 * 'lifetime' names them: the call that returned the block, else "library in
 * <function>") are kept ordered by address, so the block holding the pointer
 * is one search away, and so are the live stack objects (STACK_ALLOC and
 * STACK_FREE, address-taken locals) and the globals (GLOBAL, announced when
 * their module is loaded), named by their declaration and variable; a null
 * pointer and a pointer into no live object (freed memory, memory a library
 * mapped, a variable-length array, a thread-local) are counted apart. Every worker keeps every
 * block (heap and function events go to all) and counts the pointers of its instructions (partition
 * by id), so any number of workers gives the same rows.
 */

/* Targets besides sites (low 32 bits of a count key). */
#define T_LIB    0x40000000u /* | function marker id: a block no call claimed */
#define T_NOFUNC 0x7ffffffdu
#define T_NULL   0x7ffffffeu
#define T_NONE   0x7fffffffu

/* struct ml_block.named: what the block is. */
enum { B_HEAP, B_NAMED, B_STACK, B_GLOBAL };

/*
 * Pointer events repeat: the same few instructions point into the same
 * block. A direct-mapped cache of (pointer site, target) counts sits in front
 * of the reducible map, and the last block found is tried before the ordered
 * map (valid while no block was added, removed or named since: gen).
 */
#define NCACHE 1024u

struct pcount {
    uint64_t key; /* pointer site << 32 | target; 0 with n = 0: empty */
    uint64_t n;
};

struct pointsto {
    struct ml_ctx *ctx;
    struct ml_cstack **cs; /* per program thread: function frames */
    uint32_t nt;
    struct ml_blocks *blocks;
    uint64_t gen;              /* bumped whenever a block is added, removed or named */
    uint64_t last_lo, last_hi; /* the last block found ... */
    uint64_t last_gen;         /* ... while gen was this */
    uint32_t last_target;
    struct pcount cache[NCACHE];
    struct ml_rmap *count; /* (pointer site << 32 | target) -> pointers (a sum) */
    uint64_t unknown_frees;
    int nomem;
};

static void pt_fini(void *st)
{
    struct pointsto *p = st;

    if (!p)
        return;
    for (uint32_t i = 0; i < p->nt; i++)
        ml_cstack_free(p->cs[i]);
    free(p->cs);
    ml_blocks_free(p->blocks);
    ml_rmap_free(p->count);
    ml_ctx_free(p->ctx);
    free(p);
}

static void *pt_init(struct ml_bworker *w)
{
    struct pointsto *p = calloc(1, sizeof(*p));

    (void)w;
    if (!p)
        return NULL;
    p->ctx = ml_ctx_new();
    p->blocks = ml_blocks_new();
    p->count = ml_rmap_new(ML_ROP_SUM, 1);
    p->last_gen = UINT64_MAX;
    if (!p->ctx || !p->blocks || !p->count) {
        pt_fini(p);
        return NULL;
    }
    return p;
}

static struct ml_cstack *stack_of(struct pointsto *p, uint32_t thread)
{
    if (thread >= p->nt) {
        uint32_t n = thread + 1 > p->nt * 2 ? thread + 1 : p->nt * 2;
        struct ml_cstack **cs = realloc(p->cs, (size_t)n * sizeof(*cs));
        if (!cs) {
            p->nomem = 1;
            return NULL;
        }
        memset(cs + p->nt, 0, (size_t)(n - p->nt) * sizeof(*cs));
        p->cs = cs;
        p->nt = n;
    }
    if (!p->cs[thread] && !(p->cs[thread] = ml_cstack_new(p->ctx)))
        p->nomem = 1;
    return p->cs[thread];
}

static void on_func(void *st, struct ml_bworker *w, uint32_t thread, const uint64_t *rec)
{
    struct ml_cstack *cs = stack_of(st, thread);

    (void)w;
    if (!cs)
        return;
    if (ML_Q_KIND(rec[0]) == ML_EV_FUNC_ENTRY)
        ml_cstack_push(cs, ML_CTX_FUNC, rec[1]);
    else
        ml_cstack_pop(cs, ML_CTX_FUNC, rec[1]);
}

static void on_alloc(void *st, struct ml_bworker *w, uint32_t thread, const uint64_t *rec)
{
    struct pointsto *p = st;
    struct ml_cstack *cs = stack_of(p, thread);
    struct ml_block *b;

    (void)w;
    if (!cs || !(b = ml_blocks_add(p->blocks, rec[1], ML_Q_ID(rec[0])))) {
        p->nomem = 1;
        return;
    }
    b->thread = thread;
    b->key = cs->depth ? T_LIB | (uint32_t)cs->f[cs->depth - 1].id : T_NOFUNC;
    p->gen++;
}

static void on_free(void *st, struct ml_bworker *w, uint32_t thread, const uint64_t *rec)
{
    struct pointsto *p = st;

    (void)w;
    (void)thread;
    const struct ml_block *b = ml_blocks_at(p->blocks, rec[1]);

    p->gen++;
    if (b && b->named <= B_NAMED)
        ml_blocks_remove(p->blocks, rec[1]);
    else if (ML_Q_KIND(rec[0]) == ML_EV_FREE)
        p->unknown_frees++;
}

/* A stack object made or a global announced (rec[2]: its size), named by its site. */
static void on_object(void *st, struct ml_bworker *w, uint32_t thread, const uint64_t *rec)
{
    struct pointsto *p = st;
    int global = ML_Q_KIND(rec[0]) == ML_EV_GLOBAL;
    struct ml_block *b = ml_blocks_at(p->blocks, rec[1]);

    (void)w;
    if (global && b && b->named == B_GLOBAL)
        return; /* one object defined by several units */
    if (!(b = ml_blocks_add(p->blocks, rec[1], rec[2]))) {
        p->nomem = 1;
        return;
    }
    b->thread = thread;
    b->key = (uint32_t)ML_Q_ID(rec[0]);
    b->named = global ? B_GLOBAL : B_STACK;
    p->gen++;
}

/* Every exit releases all objects of its frame, also those already ended: others are ignored. */
static void on_stack_free(void *st, struct ml_bworker *w, uint32_t thread, const uint64_t *rec)
{
    struct pointsto *p = st;
    const struct ml_block *b = ml_blocks_at(p->blocks, rec[1]);

    (void)w;
    (void)thread;
    if (b && b->named == B_STACK) {
        ml_blocks_remove(p->blocks, rec[1]);
        p->gen++;
    }
}

/* As in 'lifetime': the first call of the making thread that returned the block names it. */
static void on_site(void *st, struct ml_bworker *w, uint32_t thread, const uint64_t *rec)
{
    struct pointsto *p = st;
    struct ml_block *b = ml_blocks_at(p->blocks, rec[1]);

    (void)w;
    if (b && b->named == B_HEAP && b->thread == thread) {
        p->gen++;
        b->named = B_NAMED;
        b->key = (uint32_t)ML_Q_ID(rec[0]);
    }
}

static void on_ptr(void *st, struct ml_bworker *w, uint32_t thread, const uint64_t *rec)
{
    struct pointsto *p = st;
    uint64_t a = rec[1], key;
    uint32_t target;
    struct pcount *c;

    (void)w;
    (void)thread;
    if (!a) {
        target = T_NULL;
    } else if (p->last_gen == p->gen && a >= p->last_lo && a < p->last_hi) {
        target = p->last_target;
    } else {
        const struct ml_block *b = ml_blocks_holding(p->blocks, a);
        target = b ? (uint32_t)b->key : T_NONE;
        if (b) {
            p->last_lo = b->addr;
            p->last_hi = b->addr + (b->size ? b->size : 1);
            p->last_target = target;
            p->last_gen = p->gen;
        }
    }
    key = ML_Q_ID(rec[0]) << 32 | target;
    c = &p->cache[(key ^ key >> 29) & (NCACHE - 1)];
    if (c->key != key) {
        if (c->n)
            ml_rmap_add(p->count, c->key, c->n);
        c->key = key;
        c->n = 0;
    }
    c->n++;
}

/* The cached counts into the map. */
static void flush_cache(struct pointsto *p)
{
    for (uint32_t i = 0; i < NCACHE; i++)
        if (p->cache[i].n) {
            ml_rmap_add(p->count, p->cache[i].key, p->cache[i].n);
            p->cache[i].n = 0;
        }
}

static int pt_merge(void *into, void *from)
{
    struct pointsto *a = into, *b = from;
    int rc;

    flush_cache(a);
    flush_cache(b);
    rc = ml_rmap_merge(a->count, b->count);

    /* every worker saw every heap event: the first one's count of unknown frees is everyone's */
    a->nomem |= b->nomem;
    pt_fini(b);
    return rc ? rc : a->nomem ? -ENOMEM : 0;
}

struct row {
    uint32_t ptr, kind; /* canonical pointer site; its ML_EV_PTR_* */
    uint64_t target;    /* canonical block key, or ML_BKEY_LIB | T_NULL / T_NONE */
    uint64_t count;
    char pointer[512], site[512];
    const char *func, *object, *name;
};

static int by_key(const void *x, const void *y)
{
    const struct row *a = x, *b = y;

    if (a->ptr != b->ptr)
        return a->ptr < b->ptr ? -1 : 1;
    if (a->kind != b->kind)
        return a->kind < b->kind ? -1 : 1;
    return a->target < b->target ? -1 : a->target > b->target;
}

static int by_pointer(const void *x, const void *y)
{
    const struct row *a = x, *b = y;
    int c = strcmp(a->pointer, b->pointer);

    if (!c && a->kind != b->kind)
        c = a->kind < b->kind ? -1 : 1;
    if (!c && a->count != b->count)
        c = a->count < b->count ? 1 : -1;
    return c ? c : strcmp(a->site, b->site);
}

static void kind_name(uint32_t kind, char *buf, size_t len)
{
    if (kind >= ML_EV_PTR_ARG)
        snprintf(buf, len, "arg%u", kind - ML_EV_PTR_ARG);
    else
        snprintf(buf, len, "%s", kind == ML_EV_PTR_CALL ? "call" : "load");
}

/* Rows folded by source line (pointer and kind, target), named; NULL when out of memory. */
static struct row *rows_of(struct pointsto *p, const struct ml_bsites *t, uint64_t *nrows)
{
    uint32_t n = 0, *scanon = ml_bsites_canon_sites(t), *mcanon = ml_bsites_canon_markers(t);
    struct ml_rval *v = ml_rmap_sorted(p->count, &n);
    struct row *r = calloc((size_t)n + 1, sizeof(*r));
    uint64_t m = 0;

    if ((!v && p->count->nomem) || !r || (t->n && !scanon) || (t->nm && !mcanon)) {
        free(r);
        r = NULL;
        goto out;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t ptr = (uint32_t)(v[i].key >> 32), tg = (uint32_t)v[i].key;
        r[i].ptr = (uint32_t)ml_bsites_block_canon(t, scanon, NULL, ptr);
        r[i].kind = ptr < t->n ? t->s[ptr].size : ML_EV_PTR_LOAD;
        if (tg == T_NULL || tg == T_NONE)
            r[i].target = ML_BKEY_LIB | tg;
        else if (tg == T_NOFUNC)
            r[i].target = ML_BKEY_LIB | ML_BKEY_NOFUNC;
        else if (tg & T_LIB)
            r[i].target = ml_bsites_block_canon(t, scanon, mcanon, ML_BKEY_LIB | (tg & ~T_LIB));
        else
            r[i].target = ml_bsites_block_canon(t, scanon, mcanon, tg);
        r[i].count = v[i].v;
    }
    qsort(r, n, sizeof(*r), by_key);
    for (uint32_t i = 0; i < n; i++) {
        if (m && !by_key(&r[m - 1], &r[i]))
            r[m - 1].count += r[i].count;
        else
            r[m++] = r[i];
    }
    for (uint64_t i = 0; i < m; i++) {
        uint32_t tg = (uint32_t)r[i].target;
        const char *f;
        ml_bsites_where(t, r[i].ptr, r[i].pointer, sizeof(r[i].pointer));
        r[i].func = ml_bsites_func(t, r[i].ptr);
        r[i].name = "";
        if ((r[i].target & ML_BKEY_LIB) && (tg == T_NULL || tg == T_NONE)) {
            snprintf(r[i].site, sizeof(r[i].site), "%s", tg == T_NULL ? "null" : "unknown");
            r[i].object = tg == T_NULL ? "null" : "unknown";
        } else {
            ml_bsites_block_where(t, r[i].target, r[i].site, sizeof(r[i].site), &f);
            r[i].object = ml_bsites_block_kind(t, r[i].target, &r[i].name);
        }
    }
    qsort(r, m, sizeof(*r), by_pointer);
    *nrows = m;
out:
    free(v);
    free(scanon);
    free(mcanon);
    return r;
}

static int pt_report(void *st, struct ml_bout *o)
{
    struct pointsto *p = st;
    struct ml_bsites t = {0};
    struct row *r = NULL;
    uint64_t n = 0;
    int rc = ml_bsites_load(&t, o->blobs);

    flush_cache(p);
    if (!rc && !(r = rows_of(p, &t, &n)))
        rc = -ENOMEM;
    if (rc) {
        ml_bsites_free(&t);
        return rc;
    }
    fprintf(o->csv, "pointer,site,count,kind,func,object,name\n");
    fprintf(o->json, "{\"rows\": [");
    if (o->table)
        fprintf(o->table, "%-32s %-6s %-32s %12s %-7s %s\n", "pointer", "kind", "site", "count",
                "object", "name");
    for (uint64_t i = 0; i < n; i++) {
        char kind[32];
        kind_name(r[i].kind, kind, sizeof(kind));
        ml_csv_str(o->csv, r[i].pointer);
        fputc(',', o->csv);
        ml_csv_str(o->csv, r[i].site);
        fprintf(o->csv, ",%" PRIu64 ",%s,", r[i].count, kind);
        ml_csv_str(o->csv, r[i].func);
        fprintf(o->csv, ",%s,", r[i].object);
        ml_csv_str(o->csv, r[i].name);
        fputc('\n', o->csv);
        fprintf(o->json, "%s\n  {\"pointer\": ", i ? "," : "");
        ml_json_str(o->json, r[i].pointer);
        fprintf(o->json, ", \"site\": ");
        ml_json_str(o->json, r[i].site);
        fprintf(o->json, ", \"count\": %" PRIu64 ", \"kind\": \"%s\", \"func\": ", r[i].count,
                kind);
        ml_json_str(o->json, r[i].func);
        fprintf(o->json, ", \"object\": \"%s\", \"name\": ", r[i].object);
        ml_json_str(o->json, r[i].name);
        fputc('}', o->json);
        if (o->table)
            fprintf(o->table, "%-32s %-6s %-32s %12" PRIu64 " %-7s %s\n", r[i].pointer, kind,
                    r[i].site, r[i].count, r[i].object, r[i].name);
    }
    fprintf(o->json, "],\n \"unknown_frees\": %" PRIu64 ", \"bad_tables\": %u}", p->unknown_frees,
            t.bad);
    free(r);
    ml_bsites_free(&t);
    return p->nomem ? -ENOMEM : 0;
}

static const struct ml_bhandler pt_handlers[] = {
    {ML_EV_ALLOC, ML_BPART_ALL, on_alloc},
    {ML_EV_FREE, ML_BPART_ALL, on_free},
    {ML_EV_REALLOC, ML_BPART_ALL, on_free},
    {ML_EV_ALLOC_SITE, ML_BPART_ALL, on_site},
    {ML_EV_FUNC_ENTRY, ML_BPART_ALL, on_func},
    {ML_EV_FUNC_EXIT, ML_BPART_ALL, on_func},
    {ML_EV_PTR_DEF, ML_BPART_ID, on_ptr},
    {ML_EV_STACK_ALLOC, ML_BPART_ALL, on_object},
    {ML_EV_GLOBAL, ML_BPART_ALL, on_object},
    {ML_EV_STACK_FREE, ML_BPART_ALL, on_stack_free},
    {0, 0, NULL},
};

const struct ml_module ml_module_pointsto = {
    .name = "pointsto",
    .summary = "per pointer-creating instruction (load, call, parameter): the allocation sites "
               "(heap, stack, global) its pointers point into, null and unknown apart",
    .handlers = pt_handlers,
    .ev_kinds = ML_BEV(ML_EV_ALLOC) | ML_BEV(ML_EV_FREE) | ML_BEV(ML_EV_REALLOC) |
                ML_BEV(ML_EV_ALLOC_SITE) | ML_BEV(ML_EV_FUNC_ENTRY) | ML_BEV(ML_EV_FUNC_EXIT) |
                ML_BEV(ML_EV_PTR_DEF) | ML_BEV(ML_EV_STACK_ALLOC) | ML_BEV(ML_EV_STACK_FREE) |
                ML_BEV(ML_EV_GLOBAL),
    .ev_fields = ML_EVF_ADDR,
    .ev_objs_only = ML_BEV(ML_EV_FUNC_ENTRY) | ML_BEV(ML_EV_FUNC_EXIT),
    .init = pt_init,
    .merge = pt_merge,
    .report = pt_report,
    .fini = pt_fini,
};
