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
 * Per 64-byte line, the owner (the thread that stored there last), its last
 * store's site and the bytes it stored since it took the line; per byte, the
 * last store (site, thread). True sharing: a load of bytes another thread
 * stored last (cross-thread flow), or a store over them (cross-thread
 * output). False sharing: a store to a line whose last store came from
 * another thread and touched none of the same bytes. Counted per (line, src,
 * dst, threads, kind). Events of different threads are seen in the order in
 * which their chunks reach the backend (docs/profile.md, "Cross-thread
 * order"), so counts are lower bounds of the interleavings; which lines are
 * shared, by which instructions and how, is what the module is for.
 * Data-parallel by address: a line never spans two workers.
 *
 * Fast path: almost every access is a thread touching a line it owns. The
 * line keeps the owner's stores of up to two sites as byte masks (a loop's
 * store and the initialisation before it) instead of writing 8 bytes of
 * per-byte shadow per byte stored; the per-byte entries are written only
 * for a third site, and for the owner's pending bytes when another thread
 * takes the line. A load by the owner of bytes it stored, or of a line no
 * other thread stored in, does nothing more than read the line's header: 16
 * bytes per line, apart from the slots (48 bytes) that only stores and the
 * slow path read, so that gathers over read-mostly data (a sparse matrix's
 * vector, a graph) miss the cache four times less often.
 */
#define LINE 64u

struct byte_ent {
    uint32_t site;   /* global site id + 1; 0: never stored */
    uint32_t thread; /* + 1 */
};

#define SLOTS  4
#define OTHERS (1u << 31) /* in owner: bytes outside mask may hold stores (per-byte entries) */
/*
 * In owner: every byte of mask was stored by site, and the slots are not in use (slot 0 is (site,
 * mask), the others free). A loop storing through a line from one site (an array's
 * initialisation, a stream) then touches only the header: one metadata line per store, not two.
 */
#define SOLE          (1u << 30)
#define THREAD(owner) ((owner) & ~(OTHERS | SOLE))

struct line_ent {   /* the header */
    uint32_t owner; /* thread + 1 of the last storing thread (0: never stored), | OTHERS, SOLE */
    uint32_t site;  /* the owner's last store (src of false sharing) */
    uint64_t mask;  /* bytes the owner stored since it took the line */
};

struct line_slots {
    uint64_t m[SLOTS]; /* bytes of mask last stored by site s[k] - 1, not written per byte */
    uint32_t s[SLOTS];
};

/* Headers: a ratio-1 shadow of line / HDR_DIV, i.e. 16 bytes per line; slots: of the line. */
#define HDR_DIV 4

/*
 * Lines are read through a small direct-mapped cache of metadata pages (accesses alternate
 * between arrays, which a one-page memo would miss every time), indexed by a hash of the page
 * number: arrays of a power-of-two size lie a multiple of 64 pages apart, and would take turns
 * in one entry if the index were the page number's low bits.
 */
#define PCACHE_BITS 6
#define PCACHE      (1u << PCACHE_BITS)

static inline uint32_t pcache_slot(uint64_t page)
{
    return (uint32_t)((page * 0x9e3779b97f4a7c15ull) >> (64 - PCACHE_BITS));
}

struct pcache {
    uint64_t page;
    uint8_t *p;
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

#define PEND 32 /* pairs buffered (sflush) */

struct spend {
    struct skey k;
    uint64_t count;
};

struct sharing {
    struct ml_shadow *bytes, *hdrs, *slots;
    struct pcache hc[PCACHE], sc[PCACHE];
    struct sent *tab;
    uint64_t cap, used;
    struct spend pend[PEND];
    uint32_t npend;
    uint64_t unshadowed;
    uint32_t storer; /* thread + 1 of the only thread that stored in this worker's lines; 0: none,
                        UINT32_MAX: several */
    int nomem;
};

static void *sh_init(struct ml_bworker *w)
{
    struct sharing *s = calloc(1, sizeof(*s));

    (void)w;
    if (!s)
        return NULL;
    s->bytes = ml_shadow_new(sizeof(struct byte_ent), 0);
    s->hdrs = ml_shadow_new(1, 0);
    s->slots = ml_shadow_new(1, 0);
    s->cap = 256;
    s->tab = calloc(s->cap, sizeof(*s->tab));
    if (!s->bytes || !s->hdrs || !s->slots || !s->tab) {
        ml_shadow_free(s->bytes);
        ml_shadow_free(s->hdrs);
        ml_shadow_free(s->slots);
        free(s->tab);
        free(s);
        return NULL;
    }
    for (uint32_t i = 0; i < PCACHE; i++)
        s->hc[i].page = s->sc[i].page = UINT64_MAX;
    return s;
}

/* The metadata of key in sh (ratio 1) through the page cache c; NULL: see line_of. */
static inline uint8_t *meta_of(struct ml_shadow *sh, struct pcache *pc, uint64_t key, int create)
{
    uint64_t page = key >> ML_SHADOW_PAGE_BITS;
    struct pcache *c = &pc[pcache_slot(page)];

    /* a page never stored in is remembered too: loads of it are many (calloc, read()) */
    if (__builtin_expect(c->page != page || (create && !c->p), 0)) {
        c->page = page;
        c->p = ml_shadow_page(sh, page, create);
    }
    return c->p ? c->p + (key & ((1u << ML_SHADOW_PAGE_BITS) - 1)) : NULL;
}

/* The line's header; NULL when not shadowed (or, unless create, never stored in). */
static inline struct line_ent *line_of(struct sharing *s, uint64_t line, int create)
{
    _Static_assert(sizeof(struct line_ent) == LINE / HDR_DIV, "a header fills its metadata");
    return (void *)meta_of(s->hdrs, s->hc, line / HDR_DIV, create);
}

/* The line's slots (all free when never stored in); NULL when not shadowed. Not for SOLE lines:
 * see slots_read. */
static inline struct line_slots *slots_of(struct sharing *s, uint64_t line, int create)
{
    static const struct line_slots none;
    struct line_slots *sl = (void *)meta_of(s->slots, s->sc, line, create);

    _Static_assert(sizeof(struct line_slots) <= LINE, "slots fit their metadata");
    return sl || create ? sl : (struct line_slots *)&none;
}

/* The slots of a line the slow paths read: from the header when SOLE, in tmp. */
static inline const struct line_slots *slots_read(struct sharing *s, const struct line_ent *l,
                                                  uint64_t line, struct line_slots *tmp)
{
    if (!(l->owner & SOLE))
        return slots_of(s, line, 0);
    memset(tmp, 0, sizeof(*tmp));
    tmp->m[0] = l->mask;
    tmp->s[0] = l->site + 1;
    return tmp;
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

/* Room for n more keys at a load factor of at most 1/2; 0, or -1 when out of memory. */
static int sroom(struct sharing *s, uint64_t n)
{
    while ((s->used + n) * 2 > s->cap) {
        uint64_t ncap = s->cap * 2;
        struct sent *nt = calloc(ncap, sizeof(*nt));
        if (!nt) {
            s->nomem = 1;
            return -1;
        }
        for (uint64_t i = 0; i < s->cap; i++)
            if (s->tab[i].used)
                *sfind(nt, ncap, &s->tab[i].k) = s->tab[i];
        free(s->tab);
        s->tab = nt;
        s->cap = ncap;
    }
    return 0;
}

static void sadd(struct sharing *s, const struct skey *k, uint64_t n)
{
    struct sent *e;

    if (sroom(s, 1))
        return;
    e = sfind(s->tab, s->cap, k);
    if (!e->used) {
        e->used = 1;
        e->k = *k;
        s->used++;
    }
    e->count += n;
}

/*
 * Pairs wait in a small buffer and go to the table together: their slots are
 * prefetched first, so that the table's cache misses (a row per line and pair
 * of sites and threads: a large table) overlap instead of following each other.
 */
static void sflush(struct sharing *s)
{
    uint64_t at[PEND];

    if (!s->npend || sroom(s, s->npend)) {
        s->npend = 0;
        return;
    }
    for (uint32_t i = 0; i < s->npend; i++) {
        at[i] = skey_hash(&s->pend[i].k) & (s->cap - 1);
        __builtin_prefetch(&s->tab[at[i]]);
    }
    for (uint32_t i = 0; i < s->npend; i++) {
        const struct skey *k = &s->pend[i].k;
        uint64_t j = at[i];
        while (s->tab[j].used && memcmp(&s->tab[j].k, k, sizeof(*k)))
            j = (j + 1) & (s->cap - 1);
        if (!s->tab[j].used) {
            s->tab[j].used = 1;
            s->tab[j].k = *k;
            s->used++;
        }
        s->tab[j].count += s->pend[i].count;
    }
    s->npend = 0;
}

static void pair(struct sharing *s, uint64_t line, uint32_t src, uint32_t dst, uint32_t ta,
                 uint32_t tb, uint32_t kind)
{
    struct spend *e;

    if (s->npend) { /* a loop over a shared line repeats one pair: count it without hashing */
        e = &s->pend[s->npend - 1];
        if (e->k.line == line && e->k.src == src && e->k.dst == dst && e->k.ta == ta &&
            e->k.tb == tb && e->k.kind == kind) {
            e->count++;
            return;
        }
    }
    if (s->npend == PEND)
        sflush(s);
    e = &s->pend[s->npend++];
    memset(&e->k, 0, sizeof(e->k)); /* keys are compared bytewise */
    e->k.line = line;
    e->k.src = src;
    e->k.dst = dst;
    e->k.ta = ta;
    e->k.tb = tb;
    e->k.kind = kind;
    e->count = 1;
}

/* Bytes [lo, lo + n) of a line, n >= 1. */
static inline uint64_t bytes_mask(uint64_t lo, uint64_t n)
{
    return (n >= 64 ? ~0ull : ((1ull << n) - 1)) << lo;
}

/* Writes the per-byte entries of the bytes in m: stored last by site + 1 of thread + 1 = t. */
static void put_bytes(struct sharing *s, uint64_t line, uint64_t m, uint32_t site1, uint32_t t)
{
    struct byte_ent *b = (void *)ml_shadow_at(s->bytes, line);

    if (!b) {
        s->unshadowed++;
        return;
    }
    for (; m; m &= m - 1) {
        struct byte_ent *e = &b[__builtin_ctzll(m)];
        e->site = site1;
        e->thread = t;
    }
}

/* Pairs already made by one access: consecutive bytes of one store make one pair. */
struct seen {
    uint32_t src, thr;
};

/* A load of bytes m of line l by thread me - 1 (the slow path: a byte another thread may have
 * stored last). */
static void load_slow(struct sharing *s, const struct line_ent *l, uint64_t line, uint64_t m,
                      uint32_t site, uint32_t me, struct seen *v)
{
    struct line_slots tmp;
    const struct line_slots *sl = slots_read(s, l, line, &tmp);
    const uint32_t owner = THREAD(l->owner);
    const struct byte_ent *b;

    /* reading what another thread stored, all from one of its sites: one pair */
    for (int k = 0; owner != me && sl && k < SLOTS; k++)
        if (!(m & ~sl->m[k])) {
            if (sl->s[k] != v->src || owner != v->thr) {
                v->src = sl->s[k];
                v->thr = owner;
                pair(s, line, sl->s[k] - 1, site, owner - 1, me - 1, 1);
            }
            return;
        }
    b = (const void *)ml_shadow_peek(s->bytes, line);
    for (; m; m &= m - 1) {
        unsigned i = (unsigned)__builtin_ctzll(m);
        uint32_t src = b[i].site, thr = b[i].thread;
        for (int k = 0; sl && k < SLOTS; k++)
            if (sl->m[k] >> i & 1) {
                src = sl->s[k];
                thr = owner;
            }
        if (thr && thr != me && (src != v->src || thr != v->thr)) {
            v->src = src;
            v->thr = thr;
            pair(s, line, src - 1, site, thr - 1, me - 1, 1);
        }
    }
}

static inline void load_line(struct sharing *s, const struct line_ent *l, uint64_t line, uint64_t m,
                             uint32_t site, uint32_t me, struct seen *v)
{
    if (!l->owner)
        return; /* never stored in */
    if (THREAD(l->owner) == me) {
        m &= ~l->mask; /* bytes this thread stored last are its own */
        if (!m || !(l->owner & OTHERS))
            return;
    }
    load_slow(s, l, line, m, site, me, v);
}

/* Another thread takes the line: false or true sharing with its owner, whose pending bytes go
 * to the per-byte entries. The line starts SOLE for its new owner. */
static void take_line(struct sharing *s, struct line_ent *l, uint64_t line, uint64_t m,
                      uint32_t site, uint32_t me)
{
    uint32_t prev = THREAD(l->owner);

    if (prev) {
        struct line_slots tmp;
        const struct line_slots *sl = slots_read(s, l, line, &tmp);
        pair(s, line, l->site, site, prev - 1, me - 1, (l->mask & m) != 0);
        for (int k = 0; sl && k < SLOTS; k++)
            if (sl->m[k])
                put_bytes(s, line, sl->m[k], sl->s[k], prev);
    }
    l->owner = (prev ? me | OTHERS : me) | SOLE;
    l->mask = 0;
}

/* The bytes m of a store of site1 - 1 whose site is not in slot 0: the slots are searched, the
 * site's slot (or a free one) moves to the front; without one, the bytes are written per byte. */
static void store_slots(struct sharing *s, struct line_slots *l, uint64_t line, uint64_t m,
                        uint32_t site1, uint32_t me)
{
    int k = -1;

    for (int j = SLOTS - 1; j >= 0; j--) { /* this site's slot, else a free one */
        l->m[j] &= ~m;
        if (l->s[j] == site1 || (!l->m[j] && (k < 0 || l->s[k] != site1)))
            k = j;
    }
    if (k < 0) {
        put_bytes(s, line, m, site1, me);
        return;
    }
    if (k) {
        uint64_t t = l->m[k];
        l->m[k] = l->m[0];
        l->s[k] = l->s[0];
        l->m[0] = t;
    }
    l->s[0] = site1;
    l->m[0] |= m;
}

static inline void store_line(struct sharing *s, struct line_ent *l, uint64_t line, uint64_t m,
                              uint32_t site, uint32_t me)
{
    struct line_slots *sl;

    if (__builtin_expect(THREAD(l->owner) != me, 0))
        take_line(s, l, line, m, site, me);
    if (__builtin_expect((l->owner & SOLE) && (l->site == site || !l->mask), 1)) {
        l->site = site;
        l->mask |= m;
        if (l->mask == ~0ull)
            l->owner = me | SOLE;
        return;
    }
    if (!(sl = slots_of(s, line, 1))) {
        s->unshadowed++;
        return;
    }
    if (l->owner & SOLE) { /* a second site: the slots come into use, slot 0 from the header */
        memset(sl, 0, sizeof(*sl));
        sl->m[0] = l->mask;
        sl->s[0] = l->site + 1;
        l->owner &= ~SOLE;
    }
    l->site = site;
    l->mask |= m;
    if (l->mask == ~0ull)
        l->owner = me;
    if (__builtin_expect(sl->s[0] == site + 1, 1)) { /* the line's last store site, mostly */
        _Static_assert(SLOTS == 4, "the slots below");
        sl->m[0] |= m;
        sl->m[1] &= ~m;
        sl->m[2] &= ~m;
        sl->m[3] &= ~m;
    } else {
        store_slots(s, sl, line, m, site + 1, me);
    }
}

/* An access of more than one line, or of 64 bytes or more (at most MAX_ACCESS). */
#define MAX_ACCESS (1u << 20)

static void access_lines(struct sharing *s, uint32_t me, const uint64_t *rec)
{
    unsigned kind = ML_Q_KIND(rec[0]), size = ML_Q_AUX(rec[0]);
    uint64_t len = size ? size : ML_Q_EXTRA(rec[0]) ? rec[2] : 0, a = rec[1], end = a + len;
    uint32_t site = (uint32_t)ML_Q_ID(rec[0]);
    struct seen v = {0, 0};

    if (!len || end < a)
        return;
    if (len > MAX_ACCESS) { /* no load or store is that long: a corrupt record */
        s->unshadowed++;
        return;
    }
    for (uint64_t line = a & ~(uint64_t)(LINE - 1); line < end; line += LINE) {
        uint64_t lo = line > a ? line : a, hi = line + LINE < end ? line + LINE : end;
        uint64_t m = bytes_mask(lo - line, hi - lo);
        struct line_ent *l = line_of(s, line, kind != ML_EV_LOAD);
        if (!l) {
            s->unshadowed += kind != ML_EV_LOAD; /* a load of a page never stored in: nothing */
            continue;
        }
        if (kind != ML_EV_STORE)
            load_line(s, l, line, m, site, me, &v);
        if (kind != ML_EV_LOAD)
            store_line(s, l, line, m, site, me);
    }
}

/* An access of kind (load, store, atomic) by thread me - 1; most are of 1 to 63 bytes in a line. */
static inline void on_access(struct sharing *s, uint32_t me, unsigned kind, const uint64_t *rec)
{
    const uint64_t a = rec[1], off = a & (LINE - 1);
    const unsigned size = ML_Q_AUX(rec[0]);
    uint32_t site = (uint32_t)ML_Q_ID(rec[0]);
    struct line_ent *l;
    uint64_t m;

    if (__builtin_expect(!size || off + size > LINE, 0)) {
        access_lines(s, me, rec);
        return;
    }
    m = ((1ull << size) - 1) << off;
    if (!(l = line_of(s, a - off, kind != ML_EV_LOAD))) {
        s->unshadowed += kind != ML_EV_LOAD; /* a load of a page never stored in: nothing */
        return;
    }
    if (kind != ML_EV_STORE) {
        struct seen v = {0, 0};
        load_line(s, l, a - off, m, site, me, &v);
    }
    if (kind != ML_EV_LOAD)
        store_line(s, l, a - off, m, site, me);
}

static void sh_fini(void *st)
{
    struct sharing *s = st;

    ml_shadow_free(s->bytes);
    ml_shadow_free(s->hdrs);
    ml_shadow_free(s->slots);
    free(s->tab);
    free(s);
}

static int sh_merge(void *into, void *from)
{
    struct sharing *a = into, *b = from;

    sflush(a);
    sflush(b);
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
    struct sent *rows;
    uint64_t n = 0;

    sflush(s);
    rows = malloc((s->used + 1) * sizeof(*rows));

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

/*
 * The module walks chunks itself (no call per event) and handles the
 * accesses of the blocks this worker owns (backend.h, ML_BPART_ADDR).
 * Prefetching the line entry of the access 8 records ahead was tried: it
 * cost more than it saved (bench/profile.sh kernels, CPU time).
 */
static uint32_t sh_chunk(void *st, struct ml_bworker *w, uint32_t thread, const uint8_t *data,
                         uint32_t len, uint64_t *records)
{
    struct sharing *s = st;
    const uint32_t me = w->index, n = w->n;
    uint32_t off = 0;
    uint64_t count = 0;

    while (off < len) {
        const uint64_t *rec = (const uint64_t *)(const void *)(data + off);
        const unsigned kind = ML_Q_KIND(rec[0]);
        int blob;
        uint32_t r = ml_bchunk_rec(data, off, len, &blob);
        if (!r)
            break;
        off += r;
        if (blob)
            continue;
        count++;
        /* a load can only see another thread's bytes once another thread stored */
        if (kind == ML_EV_LOAD && (!s->storer || s->storer == thread + 1))
            continue;
        if (kind - ML_EV_LOAD > ML_EV_RMW - ML_EV_LOAD || (n > 1 && ml_bpart_addr(rec[1], n) != me))
            continue;
        if (kind != ML_EV_LOAD && s->storer != thread + 1)
            s->storer = s->storer ? UINT32_MAX : thread + 1;
        on_access(s, thread + 1, kind, rec);
    }
    *records += count;
    return off;
}

const struct ml_module ml_module_sharing = {
    .name = "sharing",
    .summary = "cache lines shared by threads: true (same bytes) and false (same line) sharing",
    .chunk = sh_chunk,
    .ev_kinds = ML_BEV(ML_EV_LOAD) | ML_BEV(ML_EV_STORE) | ML_BEV(ML_EV_RMW),
    .ev_fields = ML_EVF_ADDR | ML_EVF_SIZE,
    .ev_shared_loads = 1,
    .init = sh_init,
    .merge = sh_merge,
    .report = sh_report,
    .fini = sh_fini,
};
