/* Module 'sharing': cache lines that threads share, truly (same bytes) or falsely (same line). */
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
 * Per byte, the last store (site, thread); per 64-byte line, the last
 * storing thread, its site and the bytes it stored since another thread
 * stored there. True sharing: a load of bytes another thread stored last
 * (cross-thread flow), or a store over them (cross-thread output). False
 * sharing: a store to a line whose last store came from another thread and
 * touched none of the same bytes. Counted per (line, src, dst, threads,
 * kind). Events of different threads are seen in the order in which their
 * chunks reach the backend (docs/profile.md, "Cross-thread order"), so
 * counts are lower bounds of the interleavings; which lines are shared, by
 * which instructions and how, is what the module is for. Data-parallel by
 * address: a line never spans two workers.
 */
#define LINE 64u

struct byte_ent {
    uint32_t site;   /* global site id + 1; 0: never stored */
    uint32_t thread; /* + 1 */
};

struct line_ent {
    uint32_t thread; /* + 1 of the last storing thread */
    uint32_t site;
    uint64_t mask; /* bytes it stored since the line changed thread */
};

struct skey {
    uint64_t line;
    uint32_t src, dst;
    uint32_t ta, tb;
    uint32_t kind; /* 1 true, 0 false */
};

struct sent {
    struct skey k;
    uint64_t count;
    int used;
};

struct sharing {
    struct ml_shadow *bytes, *lines;
    struct sent *tab;
    uint64_t cap, used;
    uint64_t unshadowed;
    int nomem;
};

static void *sh_init(struct ml_bworker *w)
{
    struct sharing *s = calloc(1, sizeof(*s));

    (void)w;
    if (!s)
        return NULL;
    s->bytes = ml_shadow_new(sizeof(struct byte_ent), 0);
    s->lines = ml_shadow_new(1, 0);
    s->cap = 256;
    s->tab = calloc(s->cap, sizeof(*s->tab));
    if (!s->bytes || !s->lines || !s->tab) {
        ml_shadow_free(s->bytes);
        ml_shadow_free(s->lines);
        free(s->tab);
        free(s);
        return NULL;
    }
    return s;
}

static uint64_t skey_hash(const struct skey *k)
{
    uint64_t h = k->line * 0x9e3779b97f4a7c15ull;

    h ^= ((uint64_t)k->src << 32 | k->dst) * 0xbf58476d1ce4e5b9ull;
    h ^= ((uint64_t)k->ta << 33 | (uint64_t)k->tb << 1 | k->kind) * 0x94d049bb133111ebull;
    return h ^ (h >> 31);
}

static struct sent *sfind(struct sent *tab, uint64_t cap, const struct skey *k)
{
    uint64_t i = skey_hash(k) & (cap - 1);

    while (tab[i].used && memcmp(&tab[i].k, k, sizeof(*k)))
        i = (i + 1) & (cap - 1);
    return &tab[i];
}

static void sadd(struct sharing *s, const struct skey *k, uint64_t n)
{
    struct sent *e;

    if ((s->used + 1) * 2 > s->cap) {
        uint64_t ncap = s->cap * 2;
        struct sent *nt = calloc(ncap, sizeof(*nt));
        if (!nt) {
            s->nomem = 1;
            return;
        }
        for (uint64_t i = 0; i < s->cap; i++)
            if (s->tab[i].used)
                *sfind(nt, ncap, &s->tab[i].k) = s->tab[i];
        free(s->tab);
        s->tab = nt;
        s->cap = ncap;
    }
    e = sfind(s->tab, s->cap, k);
    if (!e->used) {
        e->used = 1;
        e->k = *k;
        s->used++;
    }
    e->count += n;
}

static void pair(struct sharing *s, uint64_t addr, uint32_t src, uint32_t dst, uint32_t ta,
                 uint32_t tb, uint32_t kind)
{
    struct skey k;

    memset(&k, 0, sizeof(k)); /* keys are compared bytewise */
    k.line = addr & ~(uint64_t)(LINE - 1);
    k.src = src;
    k.dst = dst;
    k.ta = ta;
    k.tb = tb;
    k.kind = kind;
    sadd(s, &k, 1);
}

static void on_access(void *st, struct ml_bworker *w, uint32_t thread, const uint64_t *rec)
{
    struct sharing *s = st;
    unsigned kind = ML_Q_KIND(rec[0]), size = ML_Q_AUX(rec[0]);
    uint64_t len = size ? size : ML_Q_EXTRA(rec[0]) ? rec[2] : 0, a = rec[1];
    uint32_t site = (uint32_t)ML_Q_ID(rec[0]), me = thread + 1, last_src = 0, last_thr = 0;

    (void)w;
    if (!len || a + len < a)
        return;
    if (kind != ML_EV_STORE) /* loads of bytes another thread stored last */
        for (uint64_t p = a; p < a + len; p++) {
            const struct byte_ent *b = (const void *)ml_shadow_peek(s->bytes, p);
            if (b->thread && b->thread != me && (b->site != last_src || b->thread != last_thr)) {
                last_src = b->site;
                last_thr = b->thread;
                pair(s, p, b->site - 1, site, b->thread - 1, thread, 1);
            }
        }
    if (kind == ML_EV_LOAD)
        return;
    for (uint64_t line = a & ~(uint64_t)(LINE - 1); line < a + len; line += LINE) {
        uint64_t lo = line > a ? line : a, hi = line + LINE < a + len ? line + LINE : a + len;
        uint64_t m = (hi - lo == 64 ? ~0ull : ((1ull << (hi - lo)) - 1)) << (lo - line);
        struct line_ent *l = (void *)ml_shadow_at(s->lines, line);
        if (!l) {
            s->unshadowed++;
            continue;
        }
        if (l->thread && l->thread != me) {
            pair(s, line, l->site, site, l->thread - 1, thread, (l->mask & m) != 0);
            l->mask = 0;
        }
        l->thread = me;
        l->site = site;
        l->mask |= m;
        for (uint64_t p = lo; p < hi; p++) {
            struct byte_ent *b = (void *)ml_shadow_at(s->bytes, p);
            if (b) {
                b->site = site + 1;
                b->thread = me;
            }
        }
    }
}

static void sh_fini(void *st)
{
    struct sharing *s = st;

    ml_shadow_free(s->bytes);
    ml_shadow_free(s->lines);
    free(s->tab);
    free(s);
}

static int sh_merge(void *into, void *from)
{
    struct sharing *a = into, *b = from;

    for (uint64_t i = 0; i < b->cap; i++)
        if (b->tab[i].used)
            sadd(a, &b->tab[i].k, b->tab[i].count);
    a->unshadowed += b->unshadowed;
    a->nomem |= b->nomem;
    sh_fini(b);
    return a->nomem ? -ENOMEM : 0;
}

static int by_count(const void *x, const void *y)
{
    const struct sent *a = x, *b = y;

    if (a->count != b->count)
        return a->count < b->count ? 1 : -1;
    return a->k.line < b->k.line ? -1 : a->k.line > b->k.line;
}

static int sh_report(void *st, struct ml_bout *o)
{
    struct sharing *s = st;
    struct ml_bsites t = {0};
    struct sent *rows = malloc((s->used + 1) * sizeof(*rows));
    uint64_t n = 0;

    if (!rows || ml_bsites_load(&t, o->blobs)) {
        free(rows);
        ml_bsites_free(&t);
        return -ENOMEM;
    }
    for (uint64_t i = 0; i < s->cap; i++)
        if (s->tab[i].used)
            rows[n++] = s->tab[i];
    qsort(rows, n, sizeof(*rows), by_count);
    fprintf(o->csv, "line_addr,src,dst,threads,kind,count\n");
    fprintf(o->json, "{\"rows\": [");
    if (o->table)
        fprintf(o->table, "%-18s %-28s %-28s %-9s %-5s %12s\n", "line", "src", "dst", "threads",
                "kind", "count");
    for (uint64_t i = 0; i < n; i++) {
        const struct sent *e = &rows[i];
        char src[512], dst[512], thr[32];
        const char *kind = e->k.kind ? "true" : "false";
        ml_bsites_where(&t, e->k.src, src, sizeof(src));
        ml_bsites_where(&t, e->k.dst, dst, sizeof(dst));
        snprintf(thr, sizeof(thr), "%u-%u", e->k.ta, e->k.tb);
        fprintf(o->csv, "0x%" PRIx64 ",", e->k.line);
        ml_csv_str(o->csv, src);
        fputc(',', o->csv);
        ml_csv_str(o->csv, dst);
        fprintf(o->csv, ",%s,%s,%" PRIu64 "\n", thr, kind, e->count);
        fprintf(o->json, "%s\n  {\"line_addr\": \"0x%" PRIx64 "\", \"src\": ", i ? "," : "",
                e->k.line);
        ml_json_str(o->json, src);
        fprintf(o->json, ", \"dst\": ");
        ml_json_str(o->json, dst);
        fprintf(o->json, ", \"threads\": \"%s\", \"kind\": \"%s\", \"count\": %" PRIu64 "}", thr,
                kind, e->count);
        if (o->table)
            fprintf(o->table, "0x%-16" PRIx64 " %-28s %-28s %-9s %-5s %12" PRIu64 "\n", e->k.line,
                    src, dst, thr, kind, e->count);
    }
    fprintf(o->json, "],\n \"unshadowed\": %" PRIu64 ", \"bad_tables\": %u}", s->unshadowed, t.bad);
    free(rows);
    ml_bsites_free(&t);
    return s->nomem ? -ENOMEM : 0;
}

static const struct ml_bhandler sh_handlers[] = {
    {ML_EV_LOAD, ML_BPART_ADDR, on_access},
    {ML_EV_STORE, ML_BPART_ADDR, on_access},
    {ML_EV_RMW, ML_BPART_ADDR, on_access},
    {0, 0, NULL},
};

const struct ml_module ml_module_sharing = {
    .name = "sharing",
    .summary = "cache lines shared by threads: true (same bytes) and false (same line) sharing",
    .handlers = sh_handlers,
    .ev_kinds = ML_BEV(ML_EV_LOAD) | ML_BEV(ML_EV_STORE) | ML_BEV(ML_EV_RMW),
    .ev_fields = ML_EVF_ADDR | ML_EVF_SIZE,
    .init = sh_init,
    .merge = sh_merge,
    .report = sh_report,
    .fini = sh_fini,
};
