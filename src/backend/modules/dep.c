/* Module 'dep': memory flow (RAW) and output (WAW) dependences between instructions, by loop. */
#include "backend/backend.h"
#include "backend/shadow.h"
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
 * Shadow memory holds, per byte, the last store that wrote it: its site, its
 * thread and the thread's loop clock at that moment. A load (RAW) or a store
 * (WAW) of the byte makes a dependence from that store to this instruction.
 * The loop clock of a thread advances at every loop entry and iteration, so
 * the thread's open loop frames (context manager) tell where the store
 * happened relative to now: the outermost loop whose current invocation
 * holds the store but not in the current iteration carries the dependence,
 * at the distance in iterations between the two (each frame keeps the clock
 * at the start of its last DEP_RING iterations; older: a lower bound,
 * counted). Dependences within one iteration name the innermost loop holding
 * both. Stores of another thread make no dependence here ('sharing' reports
 * them): per-thread results are exact. Data-parallel by address: each worker
 * owns the bytes of its 4 KiB blocks and sees every loop event.
 */
#define DEP_RING 1024u

struct shadow_ent {
    uint32_t site;   /* global site id + 1; 0: never written */
    uint32_t thread; /* program thread + 1 */
    uint64_t clock;
};

struct lframe {
    uint64_t start;          /* clock at entry */
    uint64_t iter_start;     /* clock at the start of the current iteration */
    uint64_t ring[DEP_RING]; /* clock at the start of iteration k, at k % DEP_RING */
};

struct lthread {
    uint64_t clock;
    struct lframe **f; /* by frame depth */
    uint32_t nf;
};

struct pair_key {
    uint32_t src, dst; /* global site ids */
    uint32_t loop;     /* global marker id + 1, 0: none */
    uint8_t kind;      /* 0 RAW, 2 WAW */
    uint8_t carried;
};

struct pair {
    struct pair_key k;
    uint8_t used;
    uint64_t count, mindist;
};

struct dep {
    struct ml_shadow *sh;
    struct lthread *t;
    uint32_t nt;
    struct pair *tab;
    uint64_t cap, used;
    uint64_t cross_thread, far, unshadowed;
    int nomem;
};

static const char *const kind_name[] = {"RAW", "WAR", "WAW"};

static void *dep_init(struct ml_bworker *w)
{
    struct dep *d = calloc(1, sizeof(*d));

    (void)w;
    if (!d)
        return NULL;
    d->sh = ml_shadow_new(sizeof(struct shadow_ent), 0);
    d->cap = 1024;
    d->tab = calloc(d->cap, sizeof(*d->tab));
    if (!d->sh || !d->tab) {
        ml_shadow_free(d->sh);
        free(d->tab);
        free(d);
        return NULL;
    }
    return d;
}

static uint64_t key_hash(const struct pair_key *k)
{
    uint64_t h = ((uint64_t)k->src << 32 | k->dst) * 0x9e3779b97f4a7c15ull;

    h ^= ((uint64_t)k->loop << 16 | (uint64_t)k->kind << 8 | k->carried) * 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 29);
}

static int key_eq(const struct pair_key *a, const struct pair_key *b)
{
    return a->src == b->src && a->dst == b->dst && a->loop == b->loop && a->kind == b->kind &&
           a->carried == b->carried;
}

static struct pair *slot_of(struct pair *tab, uint64_t cap, const struct pair_key *k)
{
    uint64_t i = key_hash(k) & (cap - 1);

    while (tab[i].used && !key_eq(&tab[i].k, k))
        i = (i + 1) & (cap - 1);
    return &tab[i];
}

static void add_pair(struct dep *d, const struct pair_key *k, uint64_t count, uint64_t dist)
{
    struct pair *p;

    if ((d->used + 1) * 2 > d->cap) {
        uint64_t ncap = d->cap * 2;
        struct pair *nt = calloc(ncap, sizeof(*nt));
        if (!nt) {
            d->nomem = 1;
            return;
        }
        for (uint64_t i = 0; i < d->cap; i++)
            if (d->tab[i].used)
                *slot_of(nt, ncap, &d->tab[i].k) = d->tab[i];
        free(d->tab);
        d->tab = nt;
        d->cap = ncap;
    }
    p = slot_of(d->tab, d->cap, k);
    if (!p->used) {
        p->used = 1;
        p->k = *k;
        p->mindist = UINT64_MAX;
        d->used++;
    }
    p->count += count;
    if (k->carried && dist < p->mindist)
        p->mindist = dist;
}

static struct lthread *lthread_of(struct dep *d, uint32_t thread)
{
    if (thread >= d->nt) {
        uint32_t n = thread + 1 > d->nt * 2 ? thread + 1 : d->nt * 2;
        struct lthread *t = realloc(d->t, (size_t)n * sizeof(*t));
        if (!t) {
            d->nomem = 1;
            return NULL;
        }
        memset(t + d->nt, 0, (size_t)(n - d->nt) * sizeof(*t));
        d->t = t;
        d->nt = n;
    }
    return &d->t[thread];
}

/* The ring frame at depth k of a thread, created on first use. */
static struct lframe *frame_at(struct dep *d, struct lthread *t, uint32_t k)
{
    if (k >= t->nf) {
        uint32_t n = k + 8;
        struct lframe **f = realloc(t->f, (size_t)n * sizeof(*f));
        if (!f) {
            d->nomem = 1;
            return NULL;
        }
        memset(f + t->nf, 0, (size_t)(n - t->nf) * sizeof(*f));
        t->f = f;
        t->nf = n;
    }
    if (!t->f[k] && !(t->f[k] = malloc(sizeof(struct lframe))))
        d->nomem = 1;
    return t->f[k];
}

static void on_loop(void *st, struct ml_bworker *w, uint32_t thread, const uint64_t *rec)
{
    struct dep *d = st;
    struct ml_cstack *cs = ml_bw_stack(w, thread);
    struct lthread *t = lthread_of(d, thread);
    unsigned kind = ML_Q_KIND(rec[0]);
    struct lframe *f;

    if (!cs || !t)
        return;
    t->clock++;
    if (kind == ML_EV_LOOP_EXIT) {
        ml_cstack_pop(cs, ML_CTX_LOOP, rec[1]);
        return;
    }
    if (kind == ML_EV_LOOP_ENTRY) {
        if (ml_cstack_push(cs, ML_CTX_LOOP, rec[1]) || !(f = frame_at(d, t, cs->depth - 1)))
            return;
        f->start = f->iter_start = f->ring[0] = t->clock;
        return;
    }
    if (ml_cstack_iter(cs, rec[1]) || !(f = frame_at(d, t, cs->depth - 1)))
        return;
    f->iter_start = t->clock;
    f->ring[cs->f[cs->depth - 1].iter % DEP_RING] = t->clock;
}

/*
 * Where a store at clock c of this thread lies from the thread's open loops:
 * sets the key's loop and carried, returns the distance in iterations.
 */
static uint64_t classify(struct dep *d, struct ml_bworker *w, uint32_t thread, uint64_t c,
                         struct pair_key *k)
{
    struct ml_cstack *cs = ml_bw_stack(w, thread);
    struct lthread *t = thread < d->nt ? &d->t[thread] : NULL;

    k->loop = 0;
    k->carried = 0;
    for (uint32_t i = 0; cs && t && i < cs->depth && i < t->nf && t->f[i]; i++) {
        const struct lframe *f = t->f[i];
        uint64_t it = cs->f[i].iter, lo, hi;
        if (cs->f[i].kind != ML_CTX_LOOP || c < f->start)
            break;
        k->loop = (uint32_t)cs->f[i].id + 1;
        if (c >= f->iter_start)
            continue;
        k->carried = 1;
        /* The iteration that held clock c: the last one that started at or before it. */
        lo = it >= DEP_RING ? it - DEP_RING + 1 : 0;
        if (f->ring[lo % DEP_RING] > c) {
            d->far++;
            return it - lo + 1;
        }
        hi = it;
        while (lo < hi) {
            uint64_t mid = lo + (hi - lo + 1) / 2;
            if (f->ring[mid % DEP_RING] <= c)
                lo = mid;
            else
                hi = mid - 1;
        }
        return it - lo;
    }
    return 0;
}

struct access {
    struct dep *d;
    struct ml_bworker *w;
    uint32_t thread, site;
    int store;
    uint32_t last_src; /* the previous byte's writer (one dependence per writer run) */
    uint64_t last_clock;
};

static void access_range(void *arg, uint64_t lo, uint64_t hi)
{
    struct access *a = arg;
    struct dep *d = a->d;
    uint64_t clock = a->thread < d->nt ? d->t[a->thread].clock : 0;

    for (uint64_t p = lo; p < hi; p++) {
        struct shadow_ent *e = (struct shadow_ent *)(void *)ml_shadow_at(d->sh, p);
        if (!e) {
            d->unshadowed++;
            continue;
        }
        if (e->site && (e->site != a->last_src || e->clock != a->last_clock)) {
            a->last_src = e->site;
            a->last_clock = e->clock;
            if (e->thread != a->thread + 1) {
                d->cross_thread++;
            } else {
                struct pair_key k = {.src = e->site - 1, .dst = a->site, .kind = a->store ? 2 : 0};
                uint64_t dist = classify(d, a->w, a->thread, e->clock, &k);
                add_pair(d, &k, 1, dist);
            }
        }
        if (a->store) {
            e->site = a->site + 1;
            e->thread = a->thread + 1;
            e->clock = clock;
        }
    }
}

static void on_access(void *st, struct ml_bworker *w, uint32_t thread, const uint64_t *rec)
{
    unsigned kind = ML_Q_KIND(rec[0]), size = ML_Q_AUX(rec[0]);
    uint64_t len = size ? size : ML_Q_EXTRA(rec[0]) ? rec[2] : 0;
    struct access a = {st, w, thread, (uint32_t)ML_Q_ID(rec[0]), 0, 0, 0};

    if (!len || rec[1] + len < rec[1])
        return;
    if (kind != ML_EV_STORE) {
        a.store = 0;
        ml_bw_owned_ranges(w, rec[1], rec[1] + len, access_range, &a);
    }
    if (kind != ML_EV_LOAD) {
        a.store = 1;
        a.last_src = 0;
        ml_bw_owned_ranges(w, rec[1], rec[1] + len, access_range, &a);
    }
}

static void dep_fini(void *st)
{
    struct dep *d = st;

    for (uint32_t i = 0; i < d->nt; i++) {
        for (uint32_t k = 0; k < d->t[i].nf; k++)
            free(d->t[i].f[k]);
        free(d->t[i].f);
    }
    free(d->t);
    free(d->tab);
    ml_shadow_free(d->sh);
    free(d);
}

static int dep_merge(void *into, void *from)
{
    struct dep *a = into, *b = from;

    for (uint64_t i = 0; i < b->cap; i++)
        if (b->tab[i].used)
            add_pair(a, &b->tab[i].k, b->tab[i].count, b->tab[i].k.carried ? b->tab[i].mindist : 0);
    a->cross_thread += b->cross_thread;
    a->far += b->far;
    a->unshadowed += b->unshadowed;
    a->nomem |= b->nomem;
    dep_fini(b);
    return a->nomem ? -ENOMEM : 0;
}

static int by_count(const void *x, const void *y)
{
    const struct pair *a = x, *b = y;

    if (a->count != b->count)
        return a->count < b->count ? 1 : -1;
    if (a->k.src != b->k.src)
        return a->k.src < b->k.src ? -1 : 1;
    return a->k.dst < b->k.dst ? -1 : a->k.dst > b->k.dst;
}

/*
 * Rows are per source line: the copies of one instruction that unrolling or
 * inlining made (same file:line and function) fold into one, keeping the
 * smallest distance; loops fold by header line likewise.
 */
static int fold_lines(struct dep *d, const struct ml_bsites *t)
{
    uint32_t *scanon = ml_bsites_canon_sites(t), *mcanon = ml_bsites_canon_markers(t);
    struct dep folded = {0};
    int rc = -ENOMEM;

    if (!scanon || !mcanon)
        goto out;
    folded.cap = 1024;
    folded.tab = calloc(folded.cap, sizeof(*folded.tab));
    if (!folded.tab)
        goto out;
    for (uint64_t i = 0; i < d->cap; i++) {
        struct pair_key k;
        if (!d->tab[i].used)
            continue;
        k = d->tab[i].k;
        k.src = k.src < t->n ? scanon[k.src] : k.src;
        k.dst = k.dst < t->n ? scanon[k.dst] : k.dst;
        k.loop = k.loop && k.loop - 1 < t->nm ? mcanon[k.loop - 1] + 1 : k.loop;
        add_pair(&folded, &k, d->tab[i].count, d->tab[i].k.carried ? d->tab[i].mindist : 0);
    }
    rc = folded.nomem ? -ENOMEM : 0;
    free(d->tab);
    d->tab = folded.tab;
    d->cap = folded.cap;
    d->used = folded.used;
out:
    free(scanon);
    free(mcanon);
    return rc;
}

static int dep_report(void *st, struct ml_bout *o)
{
    struct dep *d = st;
    struct ml_bsites t = {0};
    struct pair *rows = NULL;
    uint64_t n = 0;
    int rc = ml_bsites_load(&t, o->blobs);

    if (!rc)
        rc = fold_lines(d, &t);
    if (!rc && !(rows = malloc((d->used + 1) * sizeof(*rows))))
        rc = -ENOMEM;
    if (rc) {
        ml_bsites_free(&t);
        return rc;
    }
    for (uint64_t i = 0; i < d->cap; i++)
        if (d->tab[i].used)
            rows[n++] = d->tab[i];
    qsort(rows, n, sizeof(*rows), by_count);
    fprintf(o->csv, "src,dst,kind,loop,carried,distance,count,src_func,dst_func\n");
    fprintf(o->json, "{\"rows\": [");
    if (o->table)
        fprintf(o->table, "%-28s %-28s %-4s %-28s %7s %8s %12s\n", "src", "dst", "kind", "loop",
                "carried", "distance", "count");
    for (uint64_t i = 0; i < n; i++) {
        const struct pair *p = &rows[i];
        char src[512], dst[512], loop[512], dist[32] = "";
        ml_bsites_where(&t, p->k.src, src, sizeof(src));
        ml_bsites_where(&t, p->k.dst, dst, sizeof(dst));
        ml_bsites_marker_where(&t, p->k.loop ? p->k.loop - 1 : UINT32_MAX, loop, sizeof(loop));
        if (p->k.carried)
            snprintf(dist, sizeof(dist), "%" PRIu64, p->mindist);
        ml_csv_str(o->csv, src);
        fputc(',', o->csv);
        ml_csv_str(o->csv, dst);
        fprintf(o->csv, ",%s,", kind_name[p->k.kind]);
        ml_csv_str(o->csv, loop);
        fprintf(o->csv, ",%u,%s,%" PRIu64 ",", p->k.carried, dist, p->count);
        ml_csv_str(o->csv, ml_bsites_func(&t, p->k.src));
        fputc(',', o->csv);
        ml_csv_str(o->csv, ml_bsites_func(&t, p->k.dst));
        fputc('\n', o->csv);
        fprintf(o->json, "%s\n  {\"src\": ", i ? "," : "");
        ml_json_str(o->json, src);
        fprintf(o->json, ", \"dst\": ");
        ml_json_str(o->json, dst);
        fprintf(o->json, ", \"kind\": \"%s\", \"loop\": ", kind_name[p->k.kind]);
        ml_json_str(o->json, loop);
        fprintf(o->json, ", \"carried\": %u, \"distance\": %s, \"count\": %" PRIu64 "}",
                p->k.carried, p->k.carried ? dist : "null", p->count);
        if (o->table)
            fprintf(o->table, "%-28s %-28s %-4s %-28s %7u %8s %12" PRIu64 "\n", src, dst,
                    kind_name[p->k.kind], loop, p->k.carried, dist, p->count);
    }
    fprintf(o->json,
            "],\n \"cross_thread\": %" PRIu64 ", \"distance_lower_bounds\": %" PRIu64
            ", \"unshadowed\": %" PRIu64 ", \"bad_tables\": %u}",
            d->cross_thread, d->far, d->unshadowed, t.bad);
    if (o->table && d->cross_thread)
        fprintf(o->table,
                "%" PRIu64 " accesses depended on another thread's store (see -m sharing)\n",
                d->cross_thread);
    free(rows);
    ml_bsites_free(&t);
    return d->nomem ? -ENOMEM : 0;
}

static const struct ml_bhandler dep_handlers[] = {
    {ML_EV_LOAD, ML_BPART_ALL, on_access},
    {ML_EV_STORE, ML_BPART_ALL, on_access},
    {ML_EV_RMW, ML_BPART_ALL, on_access},
    {ML_EV_LOOP_ENTRY, ML_BPART_ALL, on_loop},
    {ML_EV_LOOP_ITER, ML_BPART_ALL, on_loop},
    {ML_EV_LOOP_EXIT, ML_BPART_ALL, on_loop},
    {0, 0, NULL},
};

const struct ml_module ml_module_dep = {
    .name = "dep",
    .summary = "flow (RAW) and output (WAW) dependences between instructions, loop-carried or not",
    .handlers = dep_handlers,
    .ev_kinds = ML_BEV(ML_EV_LOAD) | ML_BEV(ML_EV_STORE) | ML_BEV(ML_EV_RMW) |
                ML_BEV(ML_EV_LOOP_ENTRY) | ML_BEV(ML_EV_LOOP_ITER) | ML_BEV(ML_EV_LOOP_EXIT),
    .ev_fields = ML_EVF_ADDR | ML_EVF_SIZE,
    .init = dep_init,
    .merge = dep_merge,
    .report = dep_report,
    .fini = dep_fini,
};
