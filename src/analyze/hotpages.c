/* Analysis 'hotpages': top-N pages and lines per thread and marker; hit rate of an N-entry hot-page
 * LRU over time. */
#include "analyze/util.h"

#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/*
 * Accesses are weighted (a record of weight w is w accesses to its first
 * line and page; a record whose range spans several lines or pages counts
 * for each). Counts are kept per (row, page) and (row, line), a row being a
 * (thread, --by interval); the top N of every row and of the sums over
 * threads and intervals are reported. The LRU of hot pages (--lru N, 128 by
 * default) sees each process's merged stream; its hit rate is given per
 * time interval (--interval, automatic: about 100 per trace).
 */
#define ROW_SHIFT_PAGE 36 /* (row << 36 | page): 48-bit virtual pages of 4 KiB and up */
#define ROW_SHIFT_LINE 42

/*
 * The hot-page LRU. Its 16 most recent pages are a short move-to-front list
 * (most hits land there, without hashing). The rest, up to cap pages, are in
 * the order they left the front: a ring of table slots, appended at head and
 * evicted at tail. A page accessed again from the rest leaves its ring entry
 * behind, marked stale: each page's table entry holds the ring position of
 * its one live entry, and the page is in the rest exactly when that position
 * is at or after tail. So an access costs one probe of an open-addressed
 * table of every page seen (key and position side by side, never deleted)
 * and a few stores; the tail skips stale entries without reading the table
 * (the ring is small: it stays in cache), and a full ring is compacted in
 * place. The front remembers each page's table slot, so a page pushed out
 * of it needs no hashing either. Exact: the hits are an LRU of cap pages.
 */
struct lpage {
    uint64_t key; /* page + 1; 0: empty */
    uint64_t pos; /* ring position of its live entry; below tail: not in the rest */
};

struct pstat;

struct lru {
    struct ml_mtf front;        /* min(ML_MTF_MAX, cap) pages; unused keys UINT64_MAX */
    uint32_t fslot[ML_MTF_MAX]; /* table slot of the page in each slot of the front */
    /*
     * The fused pass (both lanes on one thread): the counters of the (row,
     * page) each slot of the front last served, so a hit there needs no
     * lookup of its counters either. A slot's new page cannot match its key.
     */
    uint64_t fkey[ML_MTF_MAX];
    struct pstat *fps[ML_MTF_MAX];
    struct lpage *tab;                /* 2^tbits entries */
    uint32_t tbits, rest;             /* the rest's capacity (cap - front) */
    uint64_t tn;                      /* pages in the table */
    uint32_t *ring;                   /* table slots, position p at p & rmask */
    uint64_t rmask, head, tail, live; /* positions from 1; live entries in [tail, head) */
    uint64_t nrest;                   /* accesses that missed the front */
};

struct tbin {
    uint64_t acc, hit;
};

struct ttr { /* one trace */
    uint32_t pid;
    uint64_t interval_ns;
    double t0_ns;
    struct tbin *bins;
    uint32_t nbins;
    /* --html: accesses per (page, bin) for the heat map */
    struct ml_map heat;
    uint32_t heat_div; /* bins merged per heat column */
};

/*
 * Counts while reading: one record per (row, page) with a counter per line
 * of the page, found through a map; each thread keeps the counters of its
 * recent pages in a small direct-mapped cache, so most accesses add to a
 * counter directly.
 * The page and line maps of the report are built when the trace ends.
 */
struct pstat {
    uint64_t page;
    uint32_t row, pad;
    uint64_t lines[]; /* lines per page */
};

#define PS_BLOCK 1024 /* records per block: addresses stay valid */

/*
 * A thread's cache of page counters: direct-mapped by a hash of (row, page),
 * so that a change of row needs no flush, and large enough for the pages an
 * irregular kernel keeps going back to (a few thousand).
 */
#define HC_BITS 12
#define HC      (1u << HC_BITS)

struct hslot {
    uint64_t key;     /* row << ROW_SHIFT_PAGE | page; HC_EMPTY: none */
    struct pstat *ps; /* beside its key: one cache line per lookup */
};

#define HC_EMPTY UINT64_MAX /* no (row, page) has it: rows stay below 2^28 */

struct hthr {
    struct hslot c[HC];
    uint32_t row;
};

struct hotpages {
    const struct ml_an_run *run;
    struct ml_rows rows;        /* one counter per row: its accesses */
    struct ml_map pages, lines; /* (row, page) and (row, line) -> accesses, for the report */
    struct ml_map pmap;         /* (row, page) -> pstat index + 1, while reading */
    uint8_t **blocks;
    size_t nps, nblocks;
    uint32_t lpp, ps_size; /* lines per page, bytes per pstat */
    uint32_t lru_n;
    uint32_t page_shift, line_shift;
    struct hthr **thr; /* per thread, allocated on first use */
    uint32_t nthr, base;
    struct ttr *tr;
    int ntr;
    int html;
    uint64_t batch0; /* batches lane 0 has run */
    /*
     * Lane 1 (the LRU, time bins and heat map) writes only what follows, on
     * cache lines of its own; lane 0 (the counters) only what precedes.
     */
    _Alignas(64) struct lru lru;
    /* the current time bin */
    uint64_t tick0, bin_end;
    double ticks_per_bin;
    uint32_t bin;
    /* Whether records ahead are prefetched: set by lane 1, read by lane 0 at its next batch. */
    _Atomic int pf;
    uint64_t batch1; /* batches lane 1 has run */
    /*
     * Whether lane 0 runs both lanes of batch k (fused[k & 1]) while lane 1
     * idles: set for batch k + 1 by the lane that ran the LRU in batch k,
     * which no lane reads before the barrier that ends batch k.
     */
    _Alignas(64) int fused[2];
    _Alignas(64) char end_[1];
};

static void threads_free(struct hotpages *h)
{
    for (uint32_t i = 0; i < h->nthr; i++)
        free(h->thr[i]);
    free(h->thr);
    h->thr = NULL;
    h->nthr = 0;
}

#define LRU_TAB0 1024 /* first size of the page table */

static int lru_init(struct lru *l, uint32_t cap)
{
    uint64_t ring = 16;

    memset(l, 0, sizeof(*l));
    ml_mtf_init(&l->front, cap < ML_MTF_MAX ? cap : ML_MTF_MAX);
    for (int i = 0; i < ML_MTF_MAX; i++)
        l->front.key[i] = l->fkey[i] = UINT64_MAX; /* no page, no (row, page) */
    l->rest = cap - l->front.cap;
    if (!l->rest)
        return 0;
    /* Room for 4x the live entries: a compaction comes after at least 3 x rest appends. */
    while (ring < 4 * (uint64_t)l->rest)
        ring *= 2;
    l->rmask = ring - 1;
    l->head = l->tail = 1;
    l->tbits = 10;
    l->tab = calloc(LRU_TAB0, sizeof(*l->tab));
    l->ring = malloc(ring * sizeof(*l->ring));
    return l->tab && l->ring ? 0 : -ENOMEM;
}

static void lru_free(struct lru *l)
{
    free(l->tab);
    free(l->ring);
    memset(l, 0, sizeof(*l));
}

static inline uint32_t tab_home(uint64_t key, uint32_t bits)
{
    return (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> (64 - bits));
}

/* The slot of key (page + 1) in tab, or of the empty entry where it belongs. */
static inline uint32_t tab_probe(const struct lpage *tab, uint32_t bits, uint64_t key)
{
    uint32_t mask = (1u << bits) - 1, i = tab_home(key, bits);

    while (tab[i].key && tab[i].key != key)
        i = (i + 1) & mask;
    return i;
}

#define RING_STALE UINT32_MAX /* a ring entry whose page went back to the front */

/* Drops the rest's stale ring entries: its live ones move up to [tail, tail + live). */
static void ring_compact(struct lru *l)
{
    uint64_t to = l->tail;

    for (uint64_t p = l->tail; p != l->head; p++) {
        uint32_t s = l->ring[p & l->rmask];
        if (s != RING_STALE) {
            l->ring[to & l->rmask] = s;
            l->tab[s].pos = to++;
        }
    }
    l->head = to;
}

/* Doubles the page table; the ring and the front follow their pages to the new slots. */
static int tab_grow(struct lru *l)
{
    uint32_t bits = l->tbits + 1;
    struct lpage *t = calloc((size_t)1 << bits, sizeof(*t));

    if (!t)
        return -ENOMEM;
    ring_compact(l);
    for (uint64_t i = 0; i < (1ull << l->tbits); i++)
        if (l->tab[i].key)
            t[tab_probe(t, bits, l->tab[i].key)].key = l->tab[i].key;
    for (uint64_t p = l->tail; p != l->head; p++) {
        uint32_t *s = &l->ring[p & l->rmask];
        *s = tab_probe(t, bits, l->tab[*s].key);
        t[*s].pos = p;
    }
    for (uint32_t i = 0; i < l->front.n; i++)
        l->fslot[i] = tab_probe(t, bits, l->front.key[i] + 1);
    free(l->tab);
    l->tab = t;
    l->tbits = bits;
    return 0;
}

/* Page's table slot, its entry created on first use; -ENOMEM as a negative. */
static inline int64_t tab_slot(struct lru *l, uint64_t page)
{
    uint32_t i = tab_probe(l->tab, l->tbits, page + 1);
    int rc;

    if (l->tab[i].key)
        return i;
    if ((l->tn + 1) * 2 > (1ull << l->tbits)) {
        if ((rc = tab_grow(l)))
            return rc;
        i = tab_probe(l->tab, l->tbits, page + 1);
    }
    l->tab[i].key = page + 1;
    l->tn++;
    return i;
}

/* The page in table slot s, pushed out of the front, goes to the head of the rest. */
static inline void rest_push(struct lru *l, uint32_t s)
{
    if (l->head - l->tail > l->rmask)
        ring_compact(l);
    l->tab[s].pos = l->head;
    l->ring[l->head & l->rmask] = s;
    l->head++;
    if (++l->live <= l->rest)
        return;
    /* Full: the least recent live entry leaves (its position falls below tail). */
    while (l->ring[l->tail & l->rmask] == RING_STALE)
        l->tail++;
    l->tail++;
    l->live--;
}

/* Slow path of an access that missed the front: 1 on a hit in the rest, 0 on a miss; -ENOMEM. */
static int lru_rest(struct lru *l, uint64_t page, uint8_t tag)
{
    uint64_t old;
    int64_t s = 0;
    uint32_t fs;
    int hit = 0, full;

    l->nrest++;
    if (l->rest) {
        if ((s = tab_slot(l, page)) < 0)
            return (int)s;
        if (l->tab[s].pos >= l->tail) { /* out of the rest: its ring entry goes stale */
            l->ring[l->tab[s].pos & l->rmask] = RING_STALE;
            l->tab[s].pos = 0;
            l->live--;
            hit = 1;
        }
    }
    full = l->front.n == l->front.cap;
    fs = full ? l->fslot[(l->front.ord >> (4 * (l->front.cap - 1))) & 15] : 0;
    ml_mtf_push(&l->front, page, tag, &old);
    l->fslot[l->front.ord & 15] = (uint32_t)s;
    if (full && l->rest)
        rest_push(l, fs);
    return hit;
}

/* 1 on a hit, 0 on a miss; -ENOMEM. */
static inline int lru_access(struct lru *l, uint64_t page)
{
    uint8_t tag = ml_mtf_tag(page);
    int i = ml_mtf_find(&l->front, page, tag);

    if (i >= 0) {
        ml_mtf_touch(&l->front, i);
        return 1;
    }
    return lru_rest(l, page, tag);
}

static void *start(const struct ml_an_run *run)
{
    const struct ml_an_opts *o = ml_an_options(run);
    struct hotpages *h = aligned_alloc(64, (sizeof(*h) + 63) / 64 * 64);

    if (!h)
        return NULL;
    memset(h, 0, sizeof(*h));
    h->run = run;
    h->html = o->html != NULL;
    ml_rows_init(&h->rows, 1);
    while ((1u << h->line_shift) < o->line)
        h->line_shift++;
    if (ml_map_init(&h->pages, 4096) || ml_map_init(&h->lines, 4096) ||
        ml_map_init(&h->pmap, 4096) ||
        lru_init(&h->lru, h->lru_n = o->lru_pages ? o->lru_pages : 128)) {
        ml_map_free(&h->pages);
        ml_map_free(&h->lines);
        lru_free(&h->lru);
        free(h);
        return NULL;
    }
    return h;
}

#define MAX_BINS (1u << 22)

static int begin(void *st, const struct ml_an_input *in)
{
    struct hotpages *h = st;
    const struct ml_an_opts *o = ml_an_options(h->run);
    uint32_t page = in->info->hdr.page_size ? in->info->hdr.page_size : 4096;
    struct ttr *t = realloc(h->tr, (size_t)(h->ntr + 1) * sizeof(*t));
    double span, ns_per_tick;

    if (!t)
        return -ENOMEM;
    h->tr = t;
    t += h->ntr++;
    memset(t, 0, sizeof(*t));
    t->pid = in->info->hdr.pid;
    h->page_shift = 0;
    while ((1u << h->page_shift) < page)
        h->page_shift++;
    if (h->page_shift < h->line_shift)
        h->page_shift = h->line_shift;
    h->lpp = 1u << (h->page_shift - h->line_shift);
    h->ps_size = (uint32_t)(sizeof(struct pstat) + h->lpp * sizeof(uint64_t));
    /* Bins over the trace's span. */
    t->t0_ns = ml_trace_ns(in->trace, in->t_first);
    span = ml_trace_ns(in->trace, in->t_last) - t->t0_ns;
    if (!(span >= 0 && span < 1e18)) /* damaged clock pairs */
        span = 0;
    t->interval_ns = o->interval_ns ? o->interval_ns : ml_auto_interval(span, 100);
    t->nbins = (uint32_t)(span / (double)t->interval_ns) + 1;
    if (t->nbins > MAX_BINS) {
        fprintf(stderr,
                "memlens: hotpages: an interval of %llu ns makes too many bins over %.3f s\n",
                (unsigned long long)t->interval_ns, span / 1e9);
        return -EINVAL;
    }
    t->bins = calloc(t->nbins, sizeof(*t->bins));
    t->heat_div = 1;
    if (!t->bins || (h->html && ml_map_init(&t->heat, 4096)))
        return -ENOMEM;
    ns_per_tick = ml_trace_ns(in->trace, in->t_first + 1000000) / 1e6 -
                  ml_trace_ns(in->trace, in->t_first) / 1e6;
    h->ticks_per_bin = ns_per_tick > 0 ? (double)t->interval_ns / ns_per_tick : 1;
    h->tick0 = in->t_first;
    h->bin = 0;
    h->bin_end = h->tick0 + (uint64_t)h->ticks_per_bin;
    h->base = in->thread_base;
    /* A new process: a new LRU, and nothing pending. */
    {
        lru_free(&h->lru);
        if (lru_init(&h->lru, h->lru_n))
            return -ENOMEM;
    }
    threads_free(h);
    return 0;
}

static inline int add_count(struct ml_map *m, uint64_t key, uint64_t n)
{
    uint64_t *c = ml_map_slot(m, key);

    if (!c)
        return -ENOMEM;
    *c += n;
    return 0;
}

/* Heat-map cells stay under this many: the time resolution halves when they would not. */
#define MAX_HEAT (1u << 23)

static int heat_add(struct ttr *t, uint64_t page, uint32_t bin, uint64_t n)
{
    uint32_t col = bin / t->heat_div;

    if (t->heat.n >= MAX_HEAT) {
        struct ml_map m;
        if (ml_map_init(&m, t->heat.n))
            return -ENOMEM;
        t->heat_div *= 2;
        ml_map_each(&t->heat, i)
        {
            uint64_t k = ml_map_key(&t->heat, i);
            if (add_count(&m, (k & ~0xffffull) | ((k & 0xffff) / 2), t->heat.vals[i])) {
                ml_map_free(&m);
                return -ENOMEM;
            }
        }
        ml_map_free(&t->heat);
        t->heat = m;
        col = bin / t->heat_div;
    }
    return add_count(&t->heat, page << 16 | (col & 0xffff), n);
}

static struct pstat *ps_at(struct hotpages *h, size_t i)
{
    return (struct pstat *)(h->blocks[i / PS_BLOCK] + (i % PS_BLOCK) * (size_t)h->ps_size);
}

/* The counters of (row, page), created on first use. */
static struct pstat *ps_get(struct hotpages *h, uint32_t row, uint64_t page)
{
    uint64_t *slot = ml_map_slot(&h->pmap, (uint64_t)row << ROW_SHIFT_PAGE | page);
    struct pstat *ps;

    if (!slot)
        return NULL;
    if (*slot)
        return ps_at(h, *slot - 1);
    if (h->nps == h->nblocks * PS_BLOCK) {
        uint8_t **b = realloc(h->blocks, (h->nblocks + 1) * sizeof(*b));
        if (!b)
            return NULL;
        h->blocks = b;
        if (!(b[h->nblocks] = calloc(PS_BLOCK, h->ps_size)))
            return NULL;
        h->nblocks++;
    }
    ps = ps_at(h, h->nps);
    ps->page = page;
    ps->row = row;
    *slot = ++h->nps;
    return ps;
}

/* The cache key of page in thread p's row, and its slot. */
static inline uint64_t hc_key(const struct hthr *p, uint64_t page)
{
    return (uint64_t)p->row << ROW_SHIFT_PAGE | page;
}

static inline unsigned hc_slot(uint64_t key)
{
    return (unsigned)((key * 0x9e3779b97f4a7c15ull) >> (64 - HC_BITS));
}

/* The counters of page for thread p's row, through its cache. */
static inline struct pstat *ps_of(struct hotpages *h, struct hthr *p, uint64_t page)
{
    uint64_t key = hc_key(p, page);
    struct hslot *c = &p->c[hc_slot(key)];

    if (c->key != key) {
        struct pstat *ps = ps_get(h, p->row, page);
        if (!ps)
            return NULL;
        c->key = key;
        c->ps = ps;
    }
    return c->ps;
}

/* Moves the trace's counters into the report's maps. */
static int collect(struct hotpages *h)
{
    for (size_t i = 0; i < h->nps; i++) {
        struct pstat *ps = ps_at(h, i);
        uint64_t sum = 0;
        for (uint32_t l = 0; l < h->lpp; l++) {
            if (!ps->lines[l])
                continue;
            sum += ps->lines[l];
            if (add_count(&h->lines,
                          (uint64_t)ps->row << ROW_SHIFT_LINE |
                              (ps->page << (h->page_shift - h->line_shift) | l),
                          ps->lines[l]))
                return -ENOMEM;
        }
        if (add_count(&h->pages, (uint64_t)ps->row << ROW_SHIFT_PAGE | ps->page, sum))
            return -ENOMEM;
    }
    for (size_t b = 0; b < h->nblocks; b++)
        free(h->blocks[b]);
    free(h->blocks);
    h->blocks = NULL;
    h->nblocks = h->nps = 0;
    ml_map_free(&h->pmap);
    return ml_map_init(&h->pmap, 4096);
}

static struct hthr *thread_of(struct hotpages *h, uint32_t i)
{
    if (i >= h->nthr) {
        struct hthr **v = realloc(h->thr, (size_t)(i + 1) * sizeof(*v));
        if (!v)
            return NULL;
        memset(v + h->nthr, 0, (size_t)(i + 1 - h->nthr) * sizeof(*v));
        h->thr = v;
        h->nthr = i + 1;
    }
    if (!h->thr[i]) {
        if (!(h->thr[i] = malloc(sizeof(**h->thr))))
            return NULL;
        for (uint32_t k = 0; k < HC; k++)
            h->thr[i]->c[k].key = HC_EMPTY;
        h->thr[i]->row = UINT32_MAX;
    }
    return h->thr[i];
}

/* Moves the current bin forward to the record's time. */
static inline void to_bin(struct hotpages *h, struct ttr *t, uint64_t time)
{
    if (time < h->bin_end)
        return;
    {
        double b = (double)(time - h->tick0) / h->ticks_per_bin;
        h->bin = b >= t->nbins - 1 ? t->nbins - 1 : (uint32_t)b;
        h->bin_end = h->bin + 1 >= t->nbins
                         ? UINT64_MAX
                         : h->tick0 + (uint64_t)((h->bin + 1) * h->ticks_per_bin);
    }
}

/* Thread thr's state, its row that of the record's key: *p and its counters *rowc. */
static int thread_row(struct hotpages *h, const struct ml_an_input *in,
                      const struct ml_trace_rec *x, struct hthr **p, uint64_t **rowc)
{
    uint32_t thr = x->thread, row;

    if (thr >= h->nthr || !(*p = h->thr[thr]) || (*p)->row == UINT32_MAX ||
        h->rows.key[(*p)->row] != ml_an_key(in, x)) {
        if (!(*p = thread_of(h, thr)))
            return -ENOMEM;
        if ((row = ml_rows_id(&h->rows, in->thread_base + thr, ml_an_key(in, x))) == UINT32_MAX)
            return -ENOMEM;
        (*p)->row = row; /* its cache stays: keyed by row too */
    }
    *rowc = ml_rows_row(&h->rows, (*p)->row);
    return 0;
}

/* One line l of page of a record of weight w: its counter (lane 0). */
static inline int count_line(struct hotpages *h, struct hthr *p, uint64_t page, uint64_t l,
                             uint64_t w)
{
    struct pstat *ps = ps_of(h, p, page);

    if (!ps)
        return -ENOMEM;
    ps->lines[l & (h->lpp - 1)] += w;
    return 0;
}

/* LRU accesses and misses of the current bin not yet added to it (lane 1). */
struct pend {
    uint64_t acc, miss;
};

static inline void pend_flush(struct hotpages *h, struct ttr *t, struct pend *q)
{
    t->bins[h->bin].acc += q->acc;
    t->bins[h->bin].hit += q->acc - q->miss;
    q->acc = q->miss = 0;
}

/* ... and its access to the LRU, time bin and heat map (lane 1). */
static inline int lru_line(struct hotpages *h, struct ttr *t, uint64_t page, uint64_t w,
                           struct pend *q)
{
    int rc = lru_access(&h->lru, page);

    if (rc < 0)
        return rc;
    q->acc += w;
    q->miss += (uint64_t)!rc;
    return h->html ? heat_add(t, page, h->bin, w) : 0;
}

/*
 * Moves page to the top of the LRU's front and returns its slot there, or -1
 * when it is not in the front. The three most recent pages are compared
 * without hashing the tag (unused keys match no page; ranks past those in
 * use name slots of lower ranks, compared first), and moving them up is a
 * rotation of the low nibbles of the order.
 */
static inline __attribute__((always_inline)) int front_hit(struct ml_mtf *f, uint64_t page)
{
    uint64_t o = f->ord;
    unsigned s;
    int r;

    if (f->key[s = o & 15] == page)
        return (int)s;
    if (f->key[s = (o >> 4) & 15] == page) {
        f->ord = (o & ~0xffull) | (o & 15) << 4 | s;
        return (int)s;
    }
    if (f->key[s = (o >> 8) & 15] == page) {
        f->ord = (o & ~0xfffull) | (o & 0xff) << 4 | s;
        return (int)s;
    }
    if ((r = ml_mtf_find(f, page, ml_mtf_tag(page))) < 0)
        return -1;
    ml_mtf_touch(f, r);
    return (int)(o >> (4 * r)) & 15;
}

/*
 * What a batch's loop keeps in registers (its stores through counters would
 * make the compiler reload them from h): the geometry, the current thread's
 * row and accesses, the current bin's end and its pending LRU figures.
 */
struct cur {
    struct hthr *p;
    uint64_t *rowc;  /* the row's counter, */
    uint64_t rowacc; /* and accesses not yet added to it */
    uint64_t rowkey; /* p's row << ROW_SHIFT_PAGE */
    uint64_t bin_end;
    uint64_t lmask; /* lines per page - 1 */
    uint32_t line_shift, lshift;
    struct pend q;
};

/*
 * A record (both lanes, or lane 0 or 1 alone): a range counts once for each
 * line, and for each page once per line in it. With FAST in lanes (no heat
 * map to feed), a record on one line takes the short paths.
 */
#define FAST 4
static inline __attribute__((always_inline)) int
one_rec(struct hotpages *h, struct ttr *t, struct cur *c, const struct ml_trace_rec *x, int lanes)
{
    uint64_t w = x->weight, line = x->addr >> c->line_shift,
             end = (x->addr + (x->size ? x->size - 1 : 0)) >> c->line_shift;
    int rc;

    if (lanes & 1)
        c->rowacc += w;
    if ((lanes & 2) && x->time >= c->bin_end) {
        pend_flush(h, t, &c->q);
        to_bin(h, t, x->time);
        c->bin_end = h->bin_end;
    }
    /* The common case, one line: a page in the LRU's front has its counters at hand. */
    if ((lanes & 7) == 7 && line == end) {
        uint64_t page = line >> c->lshift, key = c->rowkey | page;
        struct lru *L = &h->lru;
        int fs = front_hit(&L->front, page);
        struct pstat *ps;
        if (fs >= 0) {
            ps = L->fps[fs];
            if (L->fkey[fs] != key) {
                if (!(ps = ps_of(h, c->p, page)))
                    return -ENOMEM;
                L->fkey[fs] = key;
                L->fps[fs] = ps;
            }
            ps->lines[line & c->lmask] += w;
            c->q.acc += w;
            return 0;
        }
        /* Not in the front (searched once): the rest, and the new front slot serves it next. */
        if (!(ps = ps_of(h, c->p, page)))
            return -ENOMEM;
        ps->lines[line & c->lmask] += w;
        if ((rc = lru_rest(L, page, ml_mtf_tag(page))) < 0)
            return rc;
        fs = L->front.ord & 15;
        L->fkey[fs] = key;
        L->fps[fs] = ps;
        c->q.acc += w;
        c->q.miss += (uint64_t)!rc;
        return 0;
    } else if ((lanes & 4) && line == end) {
        uint64_t page = line >> c->lshift;
        if (lanes & 1) {
            uint64_t key = c->rowkey | page;
            struct hslot *s = &c->p->c[hc_slot(key)];
            if (s->key != key)
                return count_line(h, c->p, page, line, w);
            s->ps->lines[line & c->lmask] += w;
            return 0;
        }
        c->q.acc += w;
        if (front_hit(&h->lru.front, page) >= 0)
            return 0;
        if ((rc = lru_rest(&h->lru, page, ml_mtf_tag(page))) < 0)
            return rc;
        c->q.miss += (uint64_t)!rc;
        return 0;
    }
    for (uint64_t l = line;; l++) {
        if (((lanes & 1) && (rc = count_line(h, c->p, l >> c->lshift, l, w))) ||
            ((lanes & 2) && (rc = lru_line(h, t, l >> c->lshift, w, &c->q))))
            return rc;
        if (l == end)
            return 0;
    }
}

/*
 * Irregular traces miss the cache on the counters and the LRU's table: the
 * entries of the record PF_FAR ahead are fetched, and the counter of the one
 * PF_NEAR ahead once its cache slot has come (a record of another thread or
 * not an access only wastes a prefetch).
 */
#define PF_FAR  24
#define PF_NEAR 12
/*
 * On a regular trace the pages are in the LRU's front and every prefetch is
 * wasted (stream: 1.27 CPU s against 1.03 without): the LRU lane turns them on
 * for the next PF_BLOCK records only when more than 1 in PF_RATIO of the last
 * block missed the front, and the counter lane follows its last decision.
 */
#define PF_BLOCK 2048
#define PF_RATIO 16

static inline __attribute__((always_inline)) void
prefetch(const struct hotpages *h, const struct cur *c, const struct ml_trace_rec *x, int lanes)
{
    uint64_t page = x[PF_FAR].addr >> (c->line_shift + c->lshift);

    if ((lanes & 2) && h->lru.tab)
        __builtin_prefetch(&h->lru.tab[tab_home(page + 1, h->lru.tbits)]);
    if ((lanes & 1) && c->p) {
        uint64_t line = x[PF_NEAR].addr >> c->line_shift, key = c->rowkey | line >> c->lshift;
        const struct hslot *s = &c->p->c[hc_slot(c->rowkey | page)];
        __builtin_prefetch(s);
        s = &c->p->c[hc_slot(key)];
        if (s->key == key)
            __builtin_prefetch(&s->ps->lines[line & c->lmask], 1);
    }
}

/* The lanes in mask lanes (1: counters, 2: LRU; 3: both in one pass) over a batch. */
/* One record of a batch: a change of thread also changes the counters' row (lane 0). */
static inline __attribute__((always_inline)) int step(struct hotpages *h,
                                                      const struct ml_an_input *in, struct ttr *t,
                                                      struct cur *c, uint32_t *thr,
                                                      const struct ml_trace_rec *x, int lanes)
{
    int rc;

    if (!ml_ev_is_access(x->kind))
        return 0;
    /* Keys change only between calls: a thread's row is checked once per call. */
    if ((lanes & 1) && x->thread != *thr) {
        if (c->rowc)
            c->rowc[0] += c->rowacc;
        c->rowacc = 0;
        if ((rc = thread_row(h, in, x, &c->p, &c->rowc)))
            return rc;
        c->rowkey = hc_key(c->p, 0);
    }
    *thr = x->thread;
    return one_rec(h, t, c, x, lanes);
}

static inline __attribute__((always_inline)) int run(struct hotpages *h,
                                                     const struct ml_an_input *in,
                                                     const struct ml_trace_rec *r, size_t n,
                                                     int lanes)
{
    struct ttr *t = &h->tr[h->ntr - 1];
    uint32_t thr = UINT32_MAX;
    struct cur c = {
        NULL,  NULL, 0, 0, h->bin_end, h->lpp - 1, h->line_shift, h->page_shift - h->line_shift,
        {0, 0}};
    int rc = 0, pf = atomic_load_explicit(&h->pf, memory_order_relaxed);
    uint64_t nrest = h->lru.nrest;

    /* Blocks of PF_BLOCK records, the first part of each with prefetches when they pay. */
    for (size_t b = 0, i, e, pe; b < n && !rc; b = e) {
        e = n - b > PF_BLOCK ? b + PF_BLOCK : n;
        if ((lanes & 2) && b) {
            pf = (h->lru.nrest - nrest) * PF_RATIO > PF_BLOCK;
            nrest = h->lru.nrest;
        }
        pe = !pf || n - b <= PF_FAR ? b : n - e >= PF_FAR ? e : n - PF_FAR;
        for (i = b; i < pe && !rc; i++) {
            prefetch(h, &c, r + i, lanes);
            rc = step(h, in, t, &c, &thr, r + i, lanes);
        }
        for (; i < e && !rc; i++)
            rc = step(h, in, t, &c, &thr, r + i, lanes);
    }
    if (c.rowc)
        c.rowc[0] += c.rowacc;
    if (lanes & 2) {
        pend_flush(h, t, &c.q);
        atomic_store_explicit(&h->pf, pf, memory_order_relaxed);
    }
    return rc;
}

static int record(void *st, const struct ml_an_input *in, const struct ml_trace_rec *r, size_t n)
{
    return ((struct hotpages *)st)->html ? run(st, in, r, n, 3) : run(st, in, r, n, 3 | FAST);
}

/*
 * With -j2 each lane reads every record again, and on two cores the lane
 * thread competes with the decoding worker: splitting pays only when the
 * LRU is expensive, i.e. when many accesses miss its front. Below 1 in
 * FUSE_RATIO (stream: almost none) lane 0 runs both lanes' pass, as at -j1.
 */
#define FUSE_RATIO 16

static int lane(void *st, int l, const struct ml_an_input *in, const struct ml_trace_rec *r,
                size_t n)
{
    struct hotpages *h = st;
    uint64_t k = l ? ++h->batch1 : ++h->batch0, nrest;
    int fused = h->fused[k & 1], rc;

    if (fused != !l)
        return l ? 0 : run(h, in, r, n, 1 | FAST);
    nrest = h->lru.nrest; /* this lane alone runs the LRU in this batch */
    if (l)
        rc = h->html ? run(h, in, r, n, 2) : run(h, in, r, n, 2 | FAST);
    else
        rc = record(h, in, r, n);
    h->fused[(k + 1) & 1] = (h->lru.nrest - nrest) * FUSE_RATIO <= n;
    return rc;
}

static int end(void *st, const struct ml_an_input *in)
{
    struct hotpages *h = st;
    (void)in;
    return collect(h);
}

/* ---- report ---- */

struct ent {
    uint32_t agg; /* aggregate row */
    uint64_t addr, count;
};

static int by_agg_count(const void *a, const void *b)
{
    const struct ent *x = a, *y = b;

    if (x->agg != y->agg)
        return x->agg < y->agg ? -1 : 1;
    if (x->count != y->count)
        return x->count < y->count ? 1 : -1;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/*
 * Aggregate rows: every row (thread, key), (thread, all), (all of a trace,
 * key), (all, all); numbered in the order ml_rows_visit reports them.
 */
struct aggs {
    struct ml_map id; /* (g + 1) << 32 | (k + 1), trace in high bits for ALL -> id + 1 */
    uint32_t n;
    uint64_t *total; /* accesses per aggregate */
    uint32_t *g, *k;
    int *tr;
};

static uint64_t agg_key(int tr, uint32_t g, uint32_t k)
{
    return ((uint64_t)(g == ML_ALL ? 0xffffff00u + (uint32_t)tr : g) << 32) | k;
}

static int agg_visit(void *arg, int tr, uint32_t g, uint32_t k, const uint64_t *c)
{
    struct aggs *a = arg;
    uint64_t *slot = ml_map_slot(&a->id, agg_key(tr, g, k));
    uint32_t i = a->n;

    if (!slot)
        return -ENOMEM;
    *slot = i + 1;
    {
        uint64_t *t = realloc(a->total, (i + 1) * sizeof(*t));
        uint32_t *gg, *kk;
        int *tt;
        if (!t)
            return -ENOMEM;
        a->total = t;
        gg = realloc(a->g, (i + 1) * sizeof(*gg));
        if (!gg)
            return -ENOMEM;
        a->g = gg;
        kk = realloc(a->k, (i + 1) * sizeof(*kk));
        if (!kk)
            return -ENOMEM;
        a->k = kk;
        tt = realloc(a->tr, (i + 1) * sizeof(*tt));
        if (!tt)
            return -ENOMEM;
        a->tr = tt;
    }
    a->total[i] = c[0];
    a->g[i] = g;
    a->k[i] = k;
    a->tr[i] = tr;
    a->n++;
    return 0;
}

/* "Less hot" for the min-heap: fewer accesses, or the higher address among equals. */
static int colder(const struct ent *x, const struct ent *y)
{
    return x->count != y->count ? x->count < y->count : x->addr > y->addr;
}

/* Keeps the top n entries in heap h of *len (min-heap on colder). */
static void heap_push(struct ent *h, uint32_t *len, uint32_t n, const struct ent *e)
{
    uint32_t i;

    if (*len < n) {
        for (i = (*len)++; i && colder(e, &h[(i - 1) / 2]); i = (i - 1) / 2)
            h[i] = h[(i - 1) / 2];
        h[i] = *e;
        return;
    }
    if (!colder(&h[0], e))
        return;
    for (i = 0;;) {
        uint32_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && colder(&h[c + 1], &h[c]))
            c++;
        if (!colder(&h[c], e))
            break;
        h[i] = h[c];
        i = c;
    }
    h[i] = *e;
}

/* The top entries of m summed into every aggregate each row belongs to; sorted by aggregate and
 * count. */
static struct ent *gather(struct hotpages *h, const struct aggs *a, const struct ml_map *m,
                          int shift, size_t *n)
{
    uint32_t top = ml_an_options(h->run)->top ? ml_an_options(h->run)->top : 10;
    struct ml_map sum;
    struct ent *v;
    size_t k = 0;
    const struct ml_an_opts *o = ml_an_options(h->run);

    /* The aggregates of each row (ids + 1; 0: none), found once rather than once per entry. */
    uint64_t(*ids)[4] = calloc((size_t)h->rows.n + 1, sizeof(*ids));

    if (!ids || ml_map_init(&sum, m->n * 2 + 16)) {
        free(ids);
        return NULL;
    }
    for (uint32_t row = 0; row < h->rows.n; row++) {
        uint32_t g = h->rows.thread[row], kk = h->rows.key[row];
        int tr = ml_an_thread_trace(h->run, g), nids = 0;
        uint64_t *x;
        if (o->by != ML_BY_THREAD) {
            x = ml_map_find(&a->id, agg_key(tr, g, kk));
            ids[row][nids++] = x ? *x : 0;
            x = ml_map_find(&a->id, agg_key(tr, ML_ALL, kk));
            ids[row][nids++] = x ? *x : 0;
        }
        x = ml_map_find(&a->id, agg_key(tr, g, ML_ALL));
        ids[row][nids++] = x ? *x : 0;
        x = ml_map_find(&a->id, agg_key(tr, ML_ALL, ML_ALL));
        ids[row][nids++] = x ? *x : 0;
    }
    ml_map_each(m, i)
    {
        uint64_t key = ml_map_key(m, i), addr = key & ((1ull << shift) - 1);
        const uint64_t *id = ids[key >> shift];
        for (int j = 0; j < 4; j++) {
            uint64_t *c;
            if (!id[j])
                continue;
            /* 20 bits of aggregate id above 44 bits of address: enough for pages and lines. */
            if (!(c = ml_map_slot(&sum, (id[j] - 1) << 44 | (addr & ((1ull << 44) - 1))))) {
                ml_map_free(&sum);
                free(ids);
                return NULL;
            }
            *c += m->vals[i];
        }
    }
    free(ids);
    /* Only the top N of each aggregate: a min-heap of N per aggregate, then sorted. */
    v = malloc(((size_t)a->n * top + 1) * sizeof(*v));
    if (v) {
        uint32_t *len = calloc(a->n + 1, sizeof(*len));
        if (!len) {
            free(v);
            ml_map_free(&sum);
            return NULL;
        }
        ml_map_each(&sum, i)
        {
            uint64_t key = ml_map_key(&sum, i);
            struct ent e = {(uint32_t)(key >> 44), key & ((1ull << 44) - 1), sum.vals[i]};
            struct ent *hp = v + (size_t)e.agg * top;
            heap_push(hp, &len[e.agg], top, &e);
        }
        for (uint32_t g = 0; g < a->n; g++) {
            memmove(v + k, v + (size_t)g * top, len[g] * sizeof(*v));
            k += len[g];
        }
        free(len);
        qsort(v, k, sizeof(*v), by_agg_count);
    }
    *n = k;
    ml_map_free(&sum);
    return v;
}

static int top_rows(struct hotpages *h, const struct aggs *a, struct ml_tab *t, const char *gran,
                    const struct ent *v, size_t n, int shift)
{
    uint32_t top = ml_an_options(h->run)->top ? ml_an_options(h->run)->top : 10, rank = 0;
    int rc = 0;

    for (size_t i = 0; i < n && !rc; i++) {
        char addr[32];
        rank = i && v[i].agg == v[i - 1].agg ? rank + 1 : 1;
        if (rank > top)
            continue;
        snprintf(addr, sizeof(addr), "%#llx", (unsigned long long)(v[i].addr << shift));
        rc |= ml_tab_str(t, gran);
        rc |= ml_tab_who(t, h->run, a->tr[v[i].agg], a->g[v[i].agg], a->k[v[i].agg]);
        rc |= ml_tab_u64(t, rank);
        rc |= ml_tab_str(t, addr);
        rc |= ml_tab_u64(t, v[i].count);
        rc |=
            ml_tab_f64(t, a->total[v[i].agg] ? (double)v[i].count / (double)a->total[v[i].agg] : 0);
    }
    return rc ? -ENOMEM : 0;
}

static int build(struct hotpages *h, struct ml_tab **tabs)
{
    struct aggs a;
    struct ent *pv = NULL, *lv = NULL;
    size_t np = 0, nl = 0, k = 0;
    uint32_t lru = ml_an_options(h->run)->lru_pages ? ml_an_options(h->run)->lru_pages : 128;
    char title[200];
    int rc = -ENOMEM;

    memset(&a, 0, sizeof(a));
    snprintf(title, sizeof(title),
             "hot-page LRU of %u pages (merged stream of each process): hits per interval", lru);
    tabs[0] = ml_tab_new("top",
                         "hottest pages and lines by accesses (rank within each thread and marker)",
                         "granularity pid:u thread tid:u marker rank:u address accesses:u share:p");
    tabs[1] = ml_tab_new("lru", title, "pid:u start_ns:u accesses:u hits:u hit_rate:p");
    if (!tabs[0] || !tabs[1] || ml_map_init(&a.id, 64))
        goto out;
    if ((rc = ml_rows_visit(&h->rows, h->run, agg_visit, &a)))
        goto out;
    rc = -ENOMEM;
    if (!(pv = gather(h, &a, &h->pages, ROW_SHIFT_PAGE, &np)) ||
        !(lv = gather(h, &a, &h->lines, ROW_SHIFT_LINE, &nl)))
        goto out;
    /* Pages then lines of each aggregate, in the aggregates' report order. */
    rc = 0;
    for (uint32_t g = 0; g < a.n && !rc; g++) {
        size_t i = k;
        while (k < np && pv[k].agg == g)
            k++;
        rc = top_rows(h, &a, tabs[0], "page", pv + i, k - i, (int)h->page_shift);
        {
            size_t lo = 0, hi = nl;
            while (lo < hi && lv[lo].agg < g)
                lo++;
            hi = lo;
            while (hi < nl && lv[hi].agg == g)
                hi++;
            if (!rc)
                rc = top_rows(h, &a, tabs[0], "line", lv + lo, hi - lo, (int)h->line_shift);
        }
    }
    for (int i = 0; i < h->ntr && !rc; i++) {
        const struct ttr *t = &h->tr[i];
        for (uint32_t b = 0; b < t->nbins && !rc; b++) {
            rc |= ml_tab_u64(tabs[1], t->pid);
            rc |= ml_tab_u64(tabs[1], (uint64_t)b * t->interval_ns);
            rc |= ml_tab_u64(tabs[1], t->bins[b].acc);
            rc |= ml_tab_u64(tabs[1], t->bins[b].hit);
            if (t->bins[b].acc)
                rc |= ml_tab_f64(tabs[1], (double)t->bins[b].hit / (double)t->bins[b].acc);
            else
                rc |= ml_tab_null(tabs[1]);
        }
        rc = rc ? -ENOMEM : 0;
    }
out:
    free(pv);
    free(lv);
    ml_map_free(&a.id);
    free(a.total);
    free(a.g);
    free(a.k);
    free(a.tr);
    return rc;
}

static int report(void *st, FILE *out, enum ml_an_format fmt)
{
    struct ml_tab *tabs[2] = {0};
    int rc = build(st, tabs);

    if (rc) {
        ml_tab_free(tabs[0]);
        ml_tab_free(tabs[1]);
        return rc;
    }
    return ml_tab_print(out, fmt, tabs, 2, NULL);
}

struct hp {
    uint64_t page, count;
};

static int by_hp(const void *a, const void *b)
{
    const struct hp *x = a, *y = b;

    if (x->count != y->count)
        return x->count < y->count ? 1 : -1;
    return x->page < y->page ? -1 : x->page > y->page;
}

static int by_page(const void *a, const void *b)
{
    const struct hp *x = a, *y = b;

    return x->page < y->page ? -1 : x->page > y->page;
}

/* Heat map of trace i: the 40 hottest pages (in address order) x time. */
static int heat_html(struct hotpages *h, FILE *out, const struct ttr *t)
{
    struct ml_map tot;
    struct hp *v = NULL;
    size_t n = 0, rows;
    uint32_t cols = (t->nbins + t->heat_div - 1) / t->heat_div;
    double *cells = NULL;
    char(*labels)[24] = NULL, title[160], xl[64], iv[32];
    const char **lp = NULL;
    int rc = -ENOMEM;

    if (ml_map_init(&tot, 1024))
        return -ENOMEM;
    ml_map_each(&t->heat, i)
    {
        uint64_t *c = ml_map_slot(&tot, ml_map_key(&t->heat, i) >> 16);
        if (!c)
            goto out;
        *c += t->heat.vals[i];
    }
    v = malloc((tot.n + 1) * sizeof(*v));
    if (!v)
        goto out;
    ml_map_each(&tot, i) v[n++] = (struct hp){ml_map_key(&tot, i), tot.vals[i]};
    qsort(v, n, sizeof(*v), by_hp);
    rows = n < 40 ? n : 40;
    qsort(v, rows, sizeof(*v), by_page);
    cells = calloc(rows * cols + 1, sizeof(*cells));
    labels = calloc(rows + 1, sizeof(*labels));
    lp = calloc(rows + 1, sizeof(*lp));
    if (!cells || !labels || !lp)
        goto out;
    for (size_t r = 0; r < rows; r++) {
        snprintf(labels[r], sizeof(labels[r]), "%#llx",
                 (unsigned long long)(v[r].page << h->page_shift));
        lp[r] = labels[r];
        for (uint32_t c = 0; c < cols; c++) {
            uint64_t *x = ml_map_find(&t->heat, v[r].page << 16 | c);
            cells[r * cols + c] = x ? (double)*x : 0;
        }
    }
    snprintf(title, sizeof(title), "Accesses per page over time, pid %u (the %zu hottest pages)",
             t->pid, rows);
    snprintf(xl, sizeof(xl), "time (columns of %s)",
             ml_fmt_interval(iv, sizeof(iv), t->interval_ns * t->heat_div));
    rc = ml_svg_heat(out, title, lp, rows, cols, cells, xl, (double)t->interval_ns * t->heat_div);
out:
    ml_map_free(&tot);
    free(v);
    free(cells);
    free(labels);
    free(lp);
    return rc;
}

static int html(void *st, FILE *out)
{
    struct hotpages *h = st;
    struct ml_tab *tabs[2] = {0};
    int rc = build(h, tabs);

    if (!rc) {
        fprintf(out, "<h2>hot pages</h2>\n");
        for (int i = 0; i < h->ntr && !rc; i++)
            rc = heat_html(h, out, &h->tr[i]);
        for (int i = 0; i < h->ntr && !rc; i++) {
            const struct ttr *t = &h->tr[i];
            double *x = calloc(t->nbins + 1, sizeof(*x)), *y = calloc(t->nbins + 1, sizeof(*y));
            const double *ys[1] = {y};
            const char *names[1] = {"hit rate"};
            char title[160];
            if (!x || !y)
                rc = -ENOMEM;
            for (uint32_t b = 0; !rc && b < t->nbins; b++) {
                x[b] = (double)b * (double)t->interval_ns / 1e6;
                y[b] = t->bins[b].acc ? (double)t->bins[b].hit / (double)t->bins[b].acc : NAN;
            }
            snprintf(title, sizeof(title), "Hit rate of a %u-page LRU of hot pages, pid %u",
                     h->lru_n, t->pid);
            if (!rc)
                rc = ml_svg_series(out, title, "time (ms)", "hit rate", x, ys, names, 1, t->nbins,
                                   NULL, 0);
            free(x);
            free(y);
        }
        if (!rc)
            rc = ml_tab_html(out, tabs[0]);
    }
    ml_tab_free(tabs[0]);
    ml_tab_free(tabs[1]);
    return rc;
}

static void hp_free(void *st)
{
    struct hotpages *h = st;

    if (!h)
        return;
    ml_map_free(&h->pages);
    ml_map_free(&h->lines);
    ml_map_free(&h->pmap);
    for (size_t b = 0; b < h->nblocks; b++)
        free(h->blocks[b]);
    free(h->blocks);
    lru_free(&h->lru);
    for (int i = 0; i < h->ntr; i++) {
        free(h->tr[i].bins);
        ml_map_free(&h->tr[i].heat);
    }
    free(h->tr);
    threads_free(h);
    ml_rows_free(&h->rows);
    free(h);
}

const struct ml_analysis ml_an_hotpages = {
    .name = "hotpages",
    .summary = "top-N pages and lines per thread and marker; hit rate of an N-entry LRU of hot "
               "pages over time",
    .start = start,
    .begin = begin,
    .record = record,
    .end = end,
    .report = report,
    .html = html,
    .free = hp_free,
    .lanes = 2,
    .lane = lane,
};
