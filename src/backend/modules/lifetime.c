/* Module 'lifetime': per allocation site, objects freed in an iteration, a call, or never. */
#include "backend/amap.h"
#include "backend/backend.h"
#include "backend/rmap.h"
#include "backend/sites.h"
#include "format/csv.h"
#include "format/events.h"
#include "format/json.h"
#include "format/qtables.h"
#include "format/queue.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/*
 * Heap blocks come from the runtime's malloc-family interposers (ALLOC,
 * FREE, REALLOC); a call in instrumented code that returned a block names its
 * site (ALLOC_SITE), otherwise the block is the library's, named by the
 * innermost instrumented function open when it was made. Each thread's
 * function and loop frames (a context stack per thread, context.h) tell,
 * when a block is made, the innermost loop running and its iteration, and
 * the innermost function; when the block is freed by the same thread, whether
 * that loop iteration and that call are still the ones running. A block's
 * figures are added to its site's reducible maps when it ends (free, realloc,
 * or the end of the run), because its site may be named after it is made.
 * Lifetimes are in context events (function entries and exits, loop
 * entries, iterations and exits) of the thread, a clock every worker keeps
 * alike. Data-parallel by address: a block is its start address's worker's,
 * context events go to every worker, so 1 and N workers count alike.
 *
 * Stack objects (STACK_ALLOC at a lifetime marker or the function's entry,
 * STACK_FREE at the end marker and at every exit) and global objects (GLOBAL,
 * once per loaded module) are sites of their own kind, counted like blocks:
 * a stack object whose address is made again before it was released died
 * with a frame left by unwinding or longjmp; globals are never freed.
 */

struct obj {
    uint64_t addr; /* 0: empty slot */
    uint64_t size;
    uint64_t key; /* site id, or ML_BKEY_LIB | function marker id (sites.h) */
    uint32_t thread;
    uint16_t named;          /* a call site claimed it */
    uint16_t kind;           /* enum okind */
    uint32_t ldepth, fdepth; /* frame index + 1 of its loop and function, 0: none */
    uint64_t lstamp, liter, fstamp;
    uint64_t birth;
};

enum okind { O_HEAP, O_STACK, O_GLOBAL };

struct lthread {
    struct ml_cstack *cs;
    uint64_t clock;
};

enum col {
    C_OBJECTS,  /* blocks (count) */
    C_BYTES,    /* bytes at allocation */
    C_ITER,     /* freed in the iteration that made them */
    C_CALL,     /* freed before the allocating function returned */
    C_NEVER,    /* still allocated at the end */
    C_FREED,    /* freed (by any thread) */
    C_REALLOC,  /* ended by realloc */
    C_INLOOP,   /* made while some loop ran */
    C_OTHER,    /* freed by another thread */
    C_LIFE,     /* sum of lifetimes of blocks freed by their thread */
    C_LIFE_MAX, /* longest */
    NCOLS
};

static const enum ml_rop col_op[NCOLS] = {
    [C_OBJECTS] = ML_ROP_COUNT, [C_BYTES] = ML_ROP_SUM,    [C_ITER] = ML_ROP_SUM,
    [C_CALL] = ML_ROP_SUM,      [C_NEVER] = ML_ROP_SUM,    [C_FREED] = ML_ROP_SUM,
    [C_REALLOC] = ML_ROP_SUM,   [C_INLOOP] = ML_ROP_SUM,   [C_OTHER] = ML_ROP_SUM,
    [C_LIFE] = ML_ROP_SUM,      [C_LIFE_MAX] = ML_ROP_MAX,
};

struct lifetime {
    struct ml_ctx *ctx;
    struct lthread *t;
    uint32_t nt;
    struct ml_amap objs; /* struct obj by address */
    struct ml_rmap *col[NCOLS];
    uint64_t unknown_frees, unknown_reallocs, replaced;
    int nomem;
};

static void lt_fini(void *st)
{
    struct lifetime *l = st;

    if (!l)
        return;
    for (uint32_t i = 0; i < l->nt; i++)
        ml_cstack_free(l->t[i].cs);
    free(l->t);
    ml_amap_free(&l->objs);
    for (int c = 0; c < NCOLS; c++)
        ml_rmap_free(l->col[c]);
    ml_ctx_free(l->ctx);
    free(l);
}

static void *lt_init(struct ml_bworker *w)
{
    struct lifetime *l = calloc(1, sizeof(*l));
    int ok = l != NULL;

    (void)w;
    if (!ok)
        return NULL;
    l->ctx = ml_ctx_new();
    ok = !ml_amap_init(&l->objs, sizeof(struct obj), 1024) && l->ctx;
    for (int c = 0; c < NCOLS && ok; c++)
        ok = (l->col[c] = ml_rmap_new(col_op[c], 1)) != NULL;
    if (!ok) {
        lt_fini(l);
        return NULL;
    }
    return l;
}

static struct lthread *thread_of(struct lifetime *l, uint32_t thread)
{
    if (thread >= l->nt) {
        uint32_t n = thread + 1 > l->nt * 2 ? thread + 1 : l->nt * 2;
        struct lthread *t = realloc(l->t, (size_t)n * sizeof(*t));
        if (!t) {
            l->nomem = 1;
            return NULL;
        }
        memset(t + l->nt, 0, (size_t)(n - l->nt) * sizeof(*t));
        l->t = t;
        l->nt = n;
    }
    if (!l->t[thread].cs && !(l->t[thread].cs = ml_cstack_new(l->ctx))) {
        l->nomem = 1;
        return NULL;
    }
    return &l->t[thread];
}

/* ---- events ---- */

static void on_context(void *st, struct ml_bworker *w, uint32_t thread, const uint64_t *rec)
{
    struct lifetime *l = st;
    struct lthread *t = thread_of(l, thread);

    (void)w;
    if (!t)
        return;
    t->clock++;
    switch (ML_Q_KIND(rec[0])) {
    case ML_EV_FUNC_ENTRY:
        ml_cstack_push(t->cs, ML_CTX_FUNC, rec[1]);
        break;
    case ML_EV_FUNC_EXIT:
        ml_cstack_pop(t->cs, ML_CTX_FUNC, rec[1]);
        break;
    case ML_EV_LOOP_ENTRY:
        ml_cstack_push(t->cs, ML_CTX_LOOP, rec[1]);
        break;
    case ML_EV_LOOP_ITER:
        ml_cstack_iter(t->cs, rec[1]);
        break;
    case ML_EV_LOOP_EXIT:
        ml_cstack_pop(t->cs, ML_CTX_LOOP, rec[1]);
        break;
    }
}

/* A block ends: its figures go to its site. how: C_FREED, C_REALLOC or C_NEVER. */
static void end_obj(struct lifetime *l, struct obj *o, uint32_t thread, enum col how)
{
    uint64_t k = o->key;

    ml_rmap_add(l->col[C_OBJECTS], k, 1);
    ml_rmap_add(l->col[C_BYTES], k, o->size);
    ml_rmap_add(l->col[how], k, 1);
    ml_rmap_add(l->col[C_INLOOP], k, o->ldepth != 0);
    if (how == C_FREED && thread != o->thread) {
        ml_rmap_add(l->col[C_OTHER], k, 1);
    } else if (how == C_FREED) {
        const struct ml_cstack *cs = l->t[thread].cs;
        uint64_t life = l->t[thread].clock - o->birth;
        int iter = o->ldepth && cs->depth >= o->ldepth && cs->f[o->ldepth - 1].stamp == o->lstamp &&
                   cs->f[o->ldepth - 1].iter == o->liter;
        int call = o->fdepth && cs->depth >= o->fdepth && cs->f[o->fdepth - 1].stamp == o->fstamp;
        ml_rmap_add(l->col[C_ITER], k, (uint64_t)iter);
        ml_rmap_add(l->col[C_CALL], k, (uint64_t)call);
        ml_rmap_add(l->col[C_LIFE], k, life);
        ml_rmap_add(l->col[C_LIFE_MAX], k, life);
    }
}

static void on_alloc(void *st, struct ml_bworker *w, uint32_t thread, const uint64_t *rec)
{
    struct lifetime *l = st;
    struct lthread *t = thread_of(l, thread);
    struct obj *o = ml_amap_find(&l->objs, rec[1]);
    const struct ml_cstack *cs;

    (void)w;
    if (!t)
        return;
    if (o) { /* its free was not seen (another thread's, still in flight, or missed) */
        l->replaced++;
        end_obj(l, o, o->thread, C_NEVER);
    } else if (!(o = ml_amap_insert(&l->objs, rec[1]))) {
        l->nomem = 1;
        return;
    }
    cs = t->cs;
    *o = (struct obj){.addr = rec[1],
                      .size = ML_Q_ID(rec[0]),
                      .thread = thread,
                      .birth = t->clock,
                      .key = ML_BKEY_LIB | ML_BKEY_NOFUNC};
    for (uint32_t i = cs->depth; i-- > 0;) {
        const struct ml_cframe *f = &cs->f[i];
        if (f->kind == ML_CTX_LOOP && !o->ldepth) {
            o->ldepth = i + 1;
            o->lstamp = f->stamp;
            o->liter = f->iter;
        } else if (f->kind == ML_CTX_FUNC && !o->fdepth) {
            o->fdepth = i + 1;
            o->fstamp = f->stamp;
            o->key = ML_BKEY_LIB | (uint32_t)f->id;
        }
    }
}

static void on_free(void *st, struct ml_bworker *w, uint32_t thread, const uint64_t *rec)
{
    struct lifetime *l = st;
    struct obj *o = ml_amap_find(&l->objs, rec[1]);

    (void)w;
    if (!o || o->kind != O_HEAP || !thread_of(l, thread)) {
        l->unknown_frees += ML_Q_KIND(rec[0]) == ML_EV_FREE;
        l->unknown_reallocs += ML_Q_KIND(rec[0]) == ML_EV_REALLOC;
        return;
    }
    end_obj(l, o, thread, ML_Q_KIND(rec[0]) == ML_EV_REALLOC ? C_REALLOC : C_FREED);
    ml_amap_erase(&l->objs, o);
}

/* A call in instrumented code returned rec[1]: the block made for it is this site's. */
static void on_site(void *st, struct ml_bworker *w, uint32_t thread, const uint64_t *rec)
{
    struct lifetime *l = st;
    struct obj *o = ml_amap_find(&l->objs, rec[1]);

    (void)w;
    if (o && !o->named && o->kind == O_HEAP && o->thread == thread) {
        o->named = 1;
        o->key = ML_Q_ID(rec[0]);
    }
}

/* A stack object is made (rec[2]: its size), or a global announced. */
static void on_object(void *st, struct ml_bworker *w, uint32_t thread, const uint64_t *rec)
{
    struct lifetime *l = st;
    int global = ML_Q_KIND(rec[0]) == ML_EV_GLOBAL;
    struct obj *o = ml_amap_find(&l->objs, rec[1]);

    if (global && o && o->kind == O_GLOBAL)
        return; /* one object defined by several units (C++ inline variables, COMDAT) */
    if (!global && o && o->kind == O_STACK) { /* its frame was left without its release */
        end_obj(l, o, o->thread, C_FREED);
        ml_amap_erase(&l->objs, o);
    }
    on_alloc(st, w, thread, rec);
    if (!(o = ml_amap_find(&l->objs, rec[1])))
        return;
    o->size = rec[2];
    o->key = ML_Q_ID(rec[0]);
    o->named = 1;
    o->kind = global ? O_GLOBAL : O_STACK;
    if (global) /* made before any frame: no loop, no call */
        o->ldepth = o->fdepth = 0;
}

static void on_stack_free(void *st, struct ml_bworker *w, uint32_t thread, const uint64_t *rec)
{
    struct lifetime *l = st;
    struct obj *o = ml_amap_find(&l->objs, rec[1]);

    (void)w;
    /* Function exits release every object of the frame, also those already ended. */
    if (!o || o->kind != O_STACK || !thread_of(l, thread))
        return;
    end_obj(l, o, thread, C_FREED);
    ml_amap_erase(&l->objs, o);
}

/* Blocks still allocated are never freed; the map is left empty. */
static void flush_live(struct lifetime *l)
{
    struct obj *tab = (struct obj *)(void *)l->objs.tab;

    for (uint64_t i = 0; i < l->objs.cap; i++)
        if (tab[i].addr) {
            end_obj(l, &tab[i], tab[i].thread, C_NEVER);
            tab[i].addr = 0;
        }
    l->objs.used = 0;
}

static int lt_merge(void *into, void *from)
{
    struct lifetime *a = into, *b = from;
    int rc = 0;

    flush_live(a);
    flush_live(b);
    for (int c = 0; c < NCOLS && !rc; c++)
        rc = ml_rmap_merge(a->col[c], b->col[c]);
    a->unknown_frees += b->unknown_frees;
    a->unknown_reallocs += b->unknown_reallocs;
    a->replaced += b->replaced;
    a->nomem |= b->nomem;
    lt_fini(b);
    return rc ? rc : a->nomem ? -ENOMEM : 0;
}

/* ---- report ---- */

struct row {
    uint64_t key; /* canonical */
    uint64_t v[NCOLS];
    char site[512];
    const char *func, *kind, *name;
};

static int by_objects(const void *x, const void *y)
{
    const struct row *a = x, *b = y;

    if (a->v[C_OBJECTS] != b->v[C_OBJECTS])
        return a->v[C_OBJECTS] < b->v[C_OBJECTS] ? 1 : -1;
    return strcmp(a->site, b->site);
}

static int by_key(const void *x, const void *y)
{
    const struct row *a = x, *b = y;

    return a->key < b->key ? -1 : a->key > b->key;
}

/*
 * One row per site: copies of one call that inlining or unrolling made
 * (same function, file and line) fold, and library blocks fold by function.
 */
static struct row *rows_of(struct lifetime *l, const struct ml_bsites *t, uint64_t *nrows)
{
    uint32_t n = 0, *scanon = ml_bsites_canon_sites(t), *mcanon = ml_bsites_canon_markers(t);
    struct ml_rval *keys = ml_rmap_sorted(l->col[C_OBJECTS], &n);
    struct row *r = calloc((size_t)n + 1, sizeof(*r));
    uint64_t m = 0;

    if ((!keys && l->col[C_OBJECTS]->nomem) || !r || (t->n && !scanon) || (t->nm && !mcanon)) {
        free(r);
        r = NULL;
        goto out;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint64_t k = keys[i].key;
        struct ml_rval v;
        r[i].key = ml_bsites_block_canon(t, scanon, mcanon, k);
        for (int c = 0; c < NCOLS; c++)
            if (!ml_rmap_get(l->col[c], k, &v))
                r[i].v[c] = c == C_OBJECTS ? v.n : v.v;
    }
    qsort(r, n, sizeof(*r), by_key);
    for (uint32_t i = 0; i < n; i++) {
        if (m && r[m - 1].key == r[i].key) {
            for (int c = 0; c < NCOLS; c++)
                r[m - 1].v[c] = c == C_LIFE_MAX
                                    ? (r[i].v[c] > r[m - 1].v[c] ? r[i].v[c] : r[m - 1].v[c])
                                    : r[m - 1].v[c] + r[i].v[c];
            continue;
        }
        r[m++] = r[i];
    }
    for (uint64_t i = 0; i < m; i++) {
        ml_bsites_block_where(t, r[i].key, r[i].site, sizeof(r[i].site), &r[i].func);
        r[i].kind = ml_bsites_block_kind(t, r[i].key, &r[i].name);
    }
    qsort(r, m, sizeof(*r), by_objects);
    *nrows = m;
out:
    free(keys);
    free(scanon);
    free(mcanon);
    return r;
}

static int lt_report(void *st, struct ml_bout *o)
{
    struct lifetime *l = st;
    struct ml_bsites t = {0};
    struct row *r = NULL;
    uint64_t n = 0;
    int rc = ml_bsites_load(&t, o->blobs), noheap = 0;

    flush_live(l);
    if (!rc && !(r = rows_of(l, &t, &n)))
        rc = -ENOMEM;
    if (rc) {
        ml_bsites_free(&t);
        return rc;
    }
    fprintf(o->csv,
            "site,objects,bytes,freed_in_iteration,freed_in_call,never_freed,freed,"
            "realloced,in_loop,freed_by_other_thread,mean_lifetime,max_lifetime,func,kind,name\n");
    fprintf(o->json, "{\"rows\": [");
    if (o->table)
        fprintf(o->table, "%-32s %9s %12s %9s %9s %9s %12s %10s %-7s %s\n", "site", "objects",
                "bytes", "in_iter", "in_call", "never", "mean_life", "max_life", "kind", "name");
    for (uint64_t i = 0; i < n; i++) {
        const uint64_t *v = r[i].v;
        uint64_t same = v[C_FREED] - v[C_OTHER];
        char mean[32] = "";
        if (same)
            snprintf(mean, sizeof(mean), "%.1f", (double)v[C_LIFE] / (double)same);
        ml_csv_str(o->csv, r[i].site);
        fprintf(o->csv,
                ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64
                ",%" PRIu64 ",%" PRIu64 ",%s,",
                v[C_OBJECTS], v[C_BYTES], v[C_ITER], v[C_CALL], v[C_NEVER], v[C_FREED],
                v[C_REALLOC], v[C_INLOOP], v[C_OTHER], mean);
        if (same)
            fprintf(o->csv, "%" PRIu64, v[C_LIFE_MAX]);
        fputc(',', o->csv);
        ml_csv_str(o->csv, r[i].func);
        fprintf(o->csv, ",%s,", r[i].kind);
        ml_csv_str(o->csv, r[i].name);
        fputc('\n', o->csv);
        fprintf(o->json, "%s\n  {\"site\": ", i ? "," : "");
        ml_json_str(o->json, r[i].site);
        fprintf(o->json,
                ", \"objects\": %" PRIu64 ", \"bytes\": %" PRIu64
                ", \"freed_in_iteration\": %" PRIu64 ", \"freed_in_call\": %" PRIu64
                ", \"never_freed\": %" PRIu64 ", \"freed\": %" PRIu64 ", \"realloced\": %" PRIu64
                ", \"in_loop\": %" PRIu64 ", \"freed_by_other_thread\": %" PRIu64
                ", \"mean_lifetime\": %s, \"max_lifetime\": ",
                v[C_OBJECTS], v[C_BYTES], v[C_ITER], v[C_CALL], v[C_NEVER], v[C_FREED],
                v[C_REALLOC], v[C_INLOOP], v[C_OTHER], same ? mean : "null");
        if (same)
            fprintf(o->json, "%" PRIu64, v[C_LIFE_MAX]);
        else
            fprintf(o->json, "null");
        fprintf(o->json, ", \"func\": ");
        ml_json_str(o->json, r[i].func);
        fprintf(o->json, ", \"kind\": \"%s\", \"name\": ", r[i].kind);
        ml_json_str(o->json, r[i].name);
        fputc('}', o->json);
        if (o->table)
            fprintf(o->table,
                    "%-32s %9" PRIu64 " %12" PRIu64 " %9" PRIu64 " %9" PRIu64 " %9" PRIu64
                    " %12s %10s %-7s %s\n",
                    r[i].site, v[C_OBJECTS], v[C_BYTES], v[C_ITER], v[C_CALL], v[C_NEVER],
                    same ? mean : "-", "", r[i].kind, r[i].name);
    }
    for (const struct ml_bblob *b = o->blobs; b && !noheap; b = b->next)
        noheap = b->tag == ML_QT_TAG_NOHEAP;
    if (noheap && o->table)
        fprintf(o->table, "no heap events: the program was linked without 'memlens cc --events', "
                          "or with -static, or with an allocator of its own; see "
                          "docs/profile-modules.md\n");
    fprintf(o->json,
            "],\n \"heap_events\": %s, \"unknown_frees\": %" PRIu64
            ", \"unknown_reallocs\": %" PRIu64 ", \"reused_unfreed\": %" PRIu64
            ", \"bad_tables\": %u}",
            noheap ? "false" : "true", l->unknown_frees, l->unknown_reallocs, l->replaced, t.bad);
    free(r);
    ml_bsites_free(&t);
    return l->nomem ? -ENOMEM : 0;
}

static const struct ml_bhandler lt_handlers[] = {
    {ML_EV_ALLOC, ML_BPART_ADDR, on_alloc},
    {ML_EV_FREE, ML_BPART_ADDR, on_free},
    {ML_EV_REALLOC, ML_BPART_ADDR, on_free},
    {ML_EV_ALLOC_SITE, ML_BPART_ADDR, on_site},
    {ML_EV_FUNC_ENTRY, ML_BPART_ALL, on_context},
    {ML_EV_FUNC_EXIT, ML_BPART_ALL, on_context},
    {ML_EV_LOOP_ENTRY, ML_BPART_ALL, on_context},
    {ML_EV_LOOP_ITER, ML_BPART_ALL, on_context},
    {ML_EV_LOOP_EXIT, ML_BPART_ALL, on_context},
    {ML_EV_STACK_ALLOC, ML_BPART_ADDR, on_object},
    {ML_EV_GLOBAL, ML_BPART_ADDR, on_object},
    {ML_EV_STACK_FREE, ML_BPART_ADDR, on_stack_free},
    {0, 0, NULL},
};

const struct ml_module ml_module_lifetime = {
    .name = "lifetime",
    .summary = "per allocation site (heap, stack and global objects): objects freed within one "
               "loop iteration or one call, lifetimes, never freed",
    .handlers = lt_handlers,
    .ev_kinds = ML_BEV(ML_EV_ALLOC) | ML_BEV(ML_EV_FREE) | ML_BEV(ML_EV_REALLOC) |
                ML_BEV(ML_EV_ALLOC_SITE) | ML_BEV(ML_EV_FUNC_ENTRY) | ML_BEV(ML_EV_FUNC_EXIT) |
                ML_BEV(ML_EV_LOOP_ENTRY) | ML_BEV(ML_EV_LOOP_ITER) | ML_BEV(ML_EV_LOOP_EXIT) |
                ML_BEV(ML_EV_STACK_ALLOC) | ML_BEV(ML_EV_STACK_FREE) | ML_BEV(ML_EV_GLOBAL),
    .ev_fields = ML_EVF_ADDR,
    .ev_objs_only = ML_BEV(ML_EV_FUNC_ENTRY) | ML_BEV(ML_EV_FUNC_EXIT) | ML_BEV(ML_EV_LOOP_ENTRY) |
                    ML_BEV(ML_EV_LOOP_ITER) | ML_BEV(ML_EV_LOOP_EXIT),
    .init = lt_init,
    .merge = lt_merge,
    .report = lt_report,
    .fini = lt_fini,
};
