/* Module 'dep': memory flow (RAW), anti (WAR) and output (WAW) dependences, by loop. */
#include "backend/amap.h"
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
 * Shadow memory holds, per 8-byte word, the last store that wrote it and the
 * last load that read it since (a cell: site and the worker's clock, packed
 * in 64 bits each). A load (RAW) or a store (WAW) of the word makes a
 * dependence from that store; a store also one from that load (WAR). Words
 * whose bytes differ (an int, a char written) are split into two 4-byte
 * cells (in a second shadow) or eight 1-byte cells (in a pool), and joined
 * again when a store covers the word: an aligned access whose bytes share a
 * cell costs one cell update, and results are those of a cell per byte.
 *
 * The clock advances at every loop entry and iteration and whenever the
 * events read switch to another thread; the switches are logged, so the
 * clock of a cell also names the thread that made it. The thread's open loop
 * frames then place the access: the outermost loop whose current invocation
 * holds it but not in the current iteration carries the dependence, at the
 * distance in iterations between the two (each frame keeps the clock at the
 * start of its last DEP_RING iterations; older: a lower bound, counted).
 * Dependences within one iteration name the innermost loop holding both.
 * Accesses of another thread make no dependence here ('sharing' reports
 * them): per-thread results are exact. Data-parallel by address: each worker
 * owns the bytes of its 4 KiB blocks and sees every loop event.
 */
#define DEP_RING           1024u
#define RING0              8u
#define CLOCK_BITS         41
#define CLOCK_MAX          ((1ull << CLOCK_BITS) - 1)
#define SPLIT1             ((1ull << (64 - CLOCK_BITS)) - 1) /* site field of a word split in bytes */
#define SPLIT4             (SPLIT1 - 1)                      /* ... in two 4-byte halves */
#define PACK(site1, clock) ((uint64_t)(site1) << CLOCK_BITS | (clock))
#define P_SITE(p)          ((p) >> CLOCK_BITS) /* site + 1; 0: none */
#define P_CLOCK(p)         ((p)&CLOCK_MAX)
#define DEP_HITS_BITS      10
#define DEP_HITS           (1u << DEP_HITS_BITS) /* pairs cached (a loop's few accesses repeat theirs) */
#define LOOP_MAX           65536u /* loop frames per thread (deeper: counted, not placed) */

enum { RAW, WAR, WAW };

struct cell {
    uint64_t w; /* last store (or a split word's pool index, with site SPLIT1/SPLIT4) */
    uint64_t r; /* last load since that store */
};

struct pool {
    struct cell *c; /* n cells per entry */
    uint64_t len, cap;
    uint64_t free1; /* free entries, chained through their first cell's w; index + 1 */
    unsigned n;
};

struct lframe {
    uint64_t id;
    uint64_t start;      /* clock at entry */
    uint64_t iter_start; /* clock at the start of the current iteration */
    uint64_t iter;       /* iterations started before the current one */
    uint64_t *ring;      /* clock at the start of iteration k, at k % rcap; kept when popped */
    uint32_t rcap;       /* grows from RING0 to DEP_RING with the iterations (deep recursion) */
};

struct lthread {
    struct lframe *f;
    uint32_t depth, cap;
    uint32_t over;              /* frames beyond LOOP_MAX */
    uint64_t moved, moved_size; /* a block realloc ended, until its new block's ALLOC (0: none) */
};

struct obj { /* a live heap or stack object (addr 0: a free slot) */
    uint64_t addr, size;
};

struct seg {
    uint64_t start; /* first clock of a run of one thread's events */
    uint32_t thread;
};

/* The hot path writes the key's words whole (no partial stores to read back as a word). */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "pair_key words assume little-endian");
#define KEY_SD(src, dst)            ((uint64_t)(dst) << 32 | (src))
#define KEY_LK(loop, kind, carried) ((loop) | (uint64_t)(kind) << 32 | (uint64_t)(carried) << 40)

struct pair_key { /* two words, compared whole */
    union {
        struct {
            uint32_t src, dst; /* global site ids */
        };
        uint64_t sd;
    };
    union {
        struct {
            uint32_t loop; /* global marker id + 1, 0: none */
            uint8_t kind;  /* RAW, WAR, WAW */
            uint8_t carried;
            uint16_t zero;
        };
        uint64_t lk;
    };
};

struct pair {
    struct pair_key k;
    uint8_t used;
    uint64_t count, mindist;
};

struct dep {
    struct ml_shadow *sh;  /* a struct cell per 8-byte word */
    struct ml_shadow *sh4; /* two cells per 8-byte word split in halves, else zero */
    struct pool p1;        /* eight cells per word split in bytes */
    uint64_t clock;
    uint32_t cur;       /* thread of the events being read */
    uint64_t cur_start; /* the clock when it began (0: none yet) */
    struct seg *seg;
    uint64_t nseg, capseg;
    struct lthread *t;
    uint32_t nt;
    struct pair *tab;
    uint64_t cap, used;
    struct pair *hit[DEP_HITS]; /* the last pair added by hash of (src, dst, kind), or no_pair */
    struct ml_amap objs;        /* live objects (struct obj) by address, for their sizes */
    uint64_t split1;            /* words split in bytes (pool entries in use) */
    uint64_t cross_thread, far, unshadowed, bad_sites, unmatched;
    int nomem;
};

static const char *const kind_name[] = {"RAW", "WAR", "WAW"};

/* What an empty hit slot points to: a key no pair has (kind 255), never written. */
static struct pair no_pair = {.k = {.sd = UINT64_MAX, .lk = UINT64_MAX}};

static void hits_reset(struct dep *d)
{
    for (unsigned i = 0; i < DEP_HITS; i++)
        d->hit[i] = &no_pair;
}

static void *dep_init(struct ml_bworker *w)
{
    struct dep *d = calloc(1, sizeof(*d));

    (void)w;
    if (!d)
        return NULL;
    d->sh = ml_shadow_new(sizeof(struct cell) / 8, 0);
    d->cap = 1024;
    d->tab = calloc(d->cap, sizeof(*d->tab));
    d->cur = UINT32_MAX;
    d->p1.n = 8;
    d->sh4 = ml_shadow_new(2 * sizeof(struct cell) / 8, 0);
    hits_reset(d);
    if (!d->sh || !d->sh4 || !d->tab || ml_amap_init(&d->objs, sizeof(struct obj), 256)) {
        ml_shadow_free(d->sh);
        ml_shadow_free(d->sh4);
        ml_amap_free(&d->objs);
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
    return a->sd == b->sd && a->lk == b->lk;
}

static struct pair *slot_of(struct pair *tab, uint64_t cap, const struct pair_key *k)
{
    uint64_t i = key_hash(k) & (cap - 1);

    while (tab[i].used && !key_eq(&tab[i].k, k))
        i = (i + 1) & (cap - 1);
    return &tab[i];
}

static inline struct pair **hit_of(struct dep *d, uint64_t sd, uint64_t lk)
{
    return &d->hit[((sd + lk) * 0x9e3779b97f4a7c15ull) >> (64 - DEP_HITS_BITS)];
}

static struct pair *new_pair(struct dep *d, const struct pair_key *k);

/* Adds count instances of the pair (sd, lk) (the words of its key) at distance dist. */
static inline __attribute__((always_inline)) void add_pair(struct dep *d, uint64_t sd, uint64_t lk,
                                                           uint64_t count, uint64_t dist)
{
    struct pair *p = *hit_of(d, sd, lk);

    /* the same pair again (a loop's accesses): no hash table */
    if (__builtin_expect(p->k.sd != sd || p->k.lk != lk, 0)) {
        struct pair_key k = {.sd = sd, .lk = lk};
        if (!(p = new_pair(d, &k)))
            return;
    }
    p->count += count;
    if ((lk >> 40) && dist < p->mindist) /* carried */
        p->mindist = dist;
}

/* The pair of key k, made on first use (NULL: out of memory), cached. */
static struct pair *new_pair(struct dep *d, const struct pair_key *k)
{
    struct pair *p;

    if ((d->used + 1) * 2 > d->cap) {
        uint64_t ncap = d->cap * 2;
        struct pair *nt = calloc(ncap, sizeof(*nt));
        if (!nt) {
            d->nomem = 1;
            return NULL;
        }
        for (uint64_t i = 0; i < d->cap; i++)
            if (d->tab[i].used)
                *slot_of(nt, ncap, &d->tab[i].k) = d->tab[i];
        free(d->tab);
        d->tab = nt;
        d->cap = ncap;
        hits_reset(d);
    }
    p = slot_of(d->tab, d->cap, k);
    if (!p->used) {
        p->used = 1;
        p->k = *k;
        p->mindist = UINT64_MAX;
        d->used++;
    }
    *hit_of(d, k->sd, k->lk) = p;
    return p;
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

/* The events now read are thread's: a new run of the clock. */
static void switch_thread(struct dep *d, uint32_t thread)
{
    if (d->nseg == d->capseg) {
        uint64_t n = d->capseg ? d->capseg * 2 : 64;
        struct seg *s = realloc(d->seg, n * sizeof(*s));
        if (!s) {
            d->nomem = 1;
            return;
        }
        d->seg = s;
        d->capseg = n;
    }
    if (d->clock < CLOCK_MAX)
        d->clock++;
    d->seg[d->nseg++] = (struct seg){d->clock, thread};
    d->cur = thread;
    d->cur_start = d->clock;
}

/* The thread whose access was stamped with clock c. */
static uint32_t thread_at(const struct dep *d, uint64_t c)
{
    uint64_t lo = 0, hi = d->nseg - 1;

    if (c >= d->seg[hi].start)
        return d->seg[hi].thread;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo + 1) / 2;
        if (d->seg[mid].start <= c)
            lo = mid;
        else
            hi = mid - 1;
    }
    return d->seg[lo].thread;
}

/* The innermost open frame of loop id, or -1. */
static int64_t find_loop(const struct lthread *t, uint64_t id)
{
    for (uint32_t i = t->depth; i-- > 0;)
        if (t->f[i].id == id)
            return i;
    return -1;
}

static void loop_entry(struct dep *d, struct lthread *t, uint64_t id)
{
    struct lframe *f;

    if (t->over || t->depth == LOOP_MAX) {
        t->over++;
        return;
    }
    if (t->depth == t->cap) {
        uint32_t n = t->cap ? t->cap * 2 : 16;
        struct lframe *nf = realloc(t->f, (size_t)n * sizeof(*nf));
        if (!nf) {
            d->nomem = 1;
            return;
        }
        memset(nf + t->cap, 0, (size_t)(n - t->cap) * sizeof(*nf));
        t->f = nf;
        t->cap = n;
    }
    f = &t->f[t->depth];
    if (!f->ring && !(f->ring = malloc(RING0 * sizeof(*f->ring)))) {
        d->nomem = 1;
        return;
    }
    if (!f->rcap)
        f->rcap = RING0;
    t->depth++;
    f->id = id;
    f->iter = 0;
    f->start = f->iter_start = f->ring[0] = d->clock;
}

static void on_loop(struct dep *d, struct lthread *t, unsigned kind, const uint64_t *rec)
{
    struct lframe *f;
    int64_t i;

    if (d->clock < CLOCK_MAX)
        d->clock++;
    if (kind == ML_EV_LOOP_ENTRY) {
        loop_entry(d, t, rec[1]);
        return;
    }
    if (t->over) { /* frames beyond the limit close first */
        t->over -= kind == ML_EV_LOOP_EXIT;
        return;
    }
    /* the innermost frame is the common case; an unbalanced exit (longjmp) closes those above */
    i = t->depth && t->f[t->depth - 1].id == rec[1] ? t->depth - 1 : find_loop(t, rec[1]);
    if (i < 0) {
        d->unmatched++;
        return;
    }
    if (kind == ML_EV_LOOP_EXIT) {
        t->depth = (uint32_t)i;
        return;
    }
    t->depth = (uint32_t)i + 1;
    f = &t->f[i];
    f->iter++;
    /* grown before it wraps, the ring keeps iteration k at k: nothing is lost */
    if (f->iter == f->rcap && f->rcap < DEP_RING) {
        uint64_t *r = realloc(f->ring, 2 * f->rcap * sizeof(*r));
        if (r) {
            f->ring = r;
            f->rcap *= 2;
        } else {
            d->nomem = 1;
        }
    }
    f->iter_start = f->ring[f->iter & (f->rcap - 1)] = d->clock;
}

/*
 * The innermost open frame that started at or before c (c at or after the
 * first frame's start). Frame k+1 opened in frame k's current iteration, so
 * starts and iteration starts ascend with depth: that frame is the only one
 * that can carry (those outside it hold c in their current iteration). A
 * binary search: recursion makes deep stacks.
 */
static uint32_t frame_at(const struct lthread *t, uint64_t c)
{
    uint32_t a = 0, b = t->depth - 1;

    while (a < b) {
        uint32_t mid = a + (b - a + 1) / 2;
        if (t->f[mid].start <= c)
            a = mid;
        else
            b = mid - 1;
    }
    return a;
}

/* The distance in iterations of frame f back to clock c, older than its last iteration. */
static uint64_t ring_distance(struct dep *d, const struct lframe *f, uint64_t c)
{
    uint64_t it = f->iter, lo = it >= f->rcap ? it - f->rcap + 1 : 0, hi = it;

    if (f->ring[lo & (f->rcap - 1)] > c) {
        d->far++;
        return it - lo + 1;
    }
    /* The iteration that held clock c: the last one that started at or before it. */
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo + 1) / 2;
        if (f->ring[mid & (f->rcap - 1)] <= c)
            lo = mid;
        else
            hi = mid - 1;
    }
    return it - lo;
}

/*
 * Where an access at clock c of this thread lies from the thread's open
 * loops: sets the key's loop and carried, returns the distance in
 * iterations. Inline for the common cases: before every open loop, in the
 * carrying frame's current or last iteration, found among a few frames.
 */
static inline uint64_t classify(struct dep *d, const struct lthread *t, uint64_t c, uint32_t *loop,
                                unsigned *carried)
{
    uint32_t n = t ? t->depth : 0, i;
    const struct lframe *f;

    *loop = 0;
    *carried = 0;
    if (!n || c < t->f[0].start)
        return 0;
    if (c >= t->f[n - 1].start) {
        i = n - 1;
    } else if (n <= 4) {
        for (i = n - 2; c < t->f[i].start; i--)
            ;
    } else {
        i = frame_at(t, c);
    }
    f = &t->f[i];
    *loop = (uint32_t)f->id + 1;
    if (c >= f->iter_start)
        return 0;
    *carried = 1;
    if (f->iter && f->ring[(f->iter - 1) & (f->rcap - 1)] <= c)
        return 1;
    return ring_distance(d, f, c);
}

struct access {
    struct dep *d;
    struct lthread *t;
    uint32_t thread, site;
    uint64_t me; /* the cell value of this access */
    int load, store;
    uint64_t lw, ww, wr; /* the last cell value each kind made a dependence from (one per run) */
};

/* A dependence of kind from the access whose cell value is from to site, an access of thread. */
static inline __attribute__((always_inline)) void depend_on(struct dep *d, const struct lthread *t,
                                                            uint32_t thread, uint32_t site,
                                                            uint64_t from, unsigned kind)
{
    uint64_t c = P_CLOCK(from), dist;
    uint32_t loop;
    unsigned carried;

    if (c < d->cur_start && thread_at(d, c) != thread) {
        d->cross_thread++;
        return;
    }
    dist = classify(d, t, c, &loop, &carried);
    add_pair(d, KEY_SD(P_SITE(from) - 1, site), KEY_LK(loop, kind, carried), 1, dist);
}

static void depend(struct access *a, uint64_t from, unsigned kind)
{
    depend_on(a->d, a->t, a->thread, a->site, from, kind);
}

static inline void cell_access(struct access *a, struct cell *c)
{
    if (a->load && c->w && c->w != a->lw) {
        a->lw = c->w;
        depend(a, c->w, RAW);
    }
    if (!a->store) {
        c->r = a->me;
        return;
    }
    if (c->w && c->w != a->ww) {
        a->ww = c->w;
        depend(a, c->w, WAW);
    }
    if (c->r && c->r != a->wr) {
        a->wr = c->r;
        depend(a, c->r, WAR);
    }
    c->w = a->me;
    c->r = 0;
}

/* A free entry of pool p (its index), or UINT64_MAX when out of memory. */
static uint64_t pool_get(struct dep *d, struct pool *p)
{
    uint64_t i;

    if (p->free1) {
        i = p->free1 - 1;
        p->free1 = p->c[i * p->n].w;
        return i;
    }
    if (p->len == p->cap) {
        uint64_t n = p->cap ? p->cap * 2 : 1024;
        struct cell *c = n < CLOCK_MAX ? realloc(p->c, n * p->n * sizeof(*c)) : NULL;
        if (!c) {
            d->nomem = 1;
            return UINT64_MAX;
        }
        p->c = c;
        p->cap = n;
    }
    return p->len++;
}

static void pool_put(struct pool *p, uint64_t i)
{
    p->c[i * p->n].w = p->free1;
    p->free1 = i + 1;
}

/*
 * The cells of word cell c (of the word at addr word) at a granularity of g
 * bytes or finer (8: c itself); *gran receives the granularity. NULL: out
 * of memory. Halves live at the word's place in a second shadow (ints are
 * common: no pointer to chase, and prefetched with the cell), bytes in a pool.
 */
static struct cell *cells(struct dep *d, struct cell *c, uint64_t word, unsigned g, unsigned *gran)
{
    uint64_t site = P_SITE(c->w), i;
    struct cell *to, from[2], *h = NULL;
    unsigned n = 1;

    if (site == SPLIT1) {
        *gran = 1;
        return &d->p1.c[P_CLOCK(c->w) * 8];
    }
    if (site == SPLIT4) {
        h = (struct cell *)(void *)ml_shadow_at(d->sh4, word);
        *gran = 4;
        if (g >= 4 || !h)
            return h;
        memcpy(from, h, sizeof(from));
        n = 2;
    } else {
        *gran = 8;
        if (g == 8)
            return c;
        from[0] = *c;
    }
    if (g == 4) {
        if (!(to = (struct cell *)(void *)ml_shadow_at(d->sh4, word)))
            return NULL;
        i = 0;
    } else {
        if ((i = pool_get(d, &d->p1)) == UINT64_MAX)
            return NULL;
        d->split1++;
        to = &d->p1.c[i * 8];
    }
    for (unsigned b = 0; b < 8 / g; b++)
        to[b] = from[b * n * g / 8];
    if (h) /* halves into bytes */
        h[0] = h[1] = (struct cell){0, 0};
    c->w = PACK(g == 4 ? SPLIT4 : SPLIT1, i);
    c->r = 0;
    *gran = g;
    return to;
}

/* A split word whose cells are alike again becomes one cell. */
static void join(struct dep *d, struct cell *c, struct cell *v, unsigned n)
{
    struct cell one = v[0];

    for (unsigned b = 1; b < n; b++)
        if (v[b].w != one.w || v[b].r != one.r)
            return;
    if (n == 8) {
        pool_put(&d->p1, P_CLOCK(c->w));
        d->split1--;
    } else {
        v[0] = v[1] = (struct cell){0, 0};
    }
    *c = one;
}

static void access_range(void *arg, uint64_t lo, uint64_t hi)
{
    struct access *a = arg;
    struct dep *d = a->d;

    while (lo < hi) {
        uint64_t word = lo & ~7ull, end = hi - word < 8 ? hi : word + 8;
        unsigned b0 = (unsigned)(lo - word), b1 = (unsigned)(end - word), g, gran, sh;
        struct cell *c = (struct cell *)(void *)ml_shadow_at(d->sh, word), *v;
        lo = end;
        if (!c) {
            d->unshadowed += b1 - b0;
            continue;
        }
        if (b0 == 0 && b1 == 8 && P_SITE(c->w) < SPLIT4) {
            cell_access(a, c);
            continue;
        }
        /* the granularity this access needs (a load already recorded needs none) */
        g = (b0 | b1) & 3 ? 1 : b1 - b0 == 8 ? 8 : 4;
        if (!a->store && P_SITE(c->w) < SPLIT4 && c->r == a->me)
            g = 8;
        if (!(v = cells(d, c, word, g, &gran))) {
            d->unshadowed += b1 - b0;
            continue;
        }
        sh = gran == 1 ? 0 : gran == 4 ? 2 : 3; /* no division */
        for (unsigned b = b0 >> sh; b < (b1 + gran - 1) >> sh; b++)
            cell_access(a, &v[b]);
        if (gran < 8 && (a->store || b1 - b0 == 8))
            join(d, c, v, 8 / gran);
    }
}

/*
 * Objects that end (a heap block freed, a stack object past its lifetime or
 * its function's exit) have their cells cleared: a new object at the same
 * address starts with no last store or load, so it shows no dependence on
 * the old one's accesses. The events name the object's address only when it
 * ends, so the sizes of live objects are kept by address.
 */
/* Larger objects are not kept: clearing walks an object's blocks and shadow pages. */
#define OBJ_MAX (1ull << 36)

/* Keeps the size of the object at addr, which obj_take has just removed. */
static void obj_put(struct dep *d, uint64_t addr, uint64_t size)
{
    struct obj *o = ml_amap_insert(&d->objs, addr);

    if (o)
        o->size = size;
    else
        d->nomem = 1;
}

/* Removes the object at addr; returns its size (0: none known). */
static uint64_t obj_take(struct dep *d, uint64_t addr)
{
    struct obj *o = ml_amap_find(&d->objs, addr);
    uint64_t size;

    if (!o)
        return 0;
    size = o->size;
    ml_amap_erase(&d->objs, o);
    return size;
}

/* The cell of the word at word in d->sh when its page exists, else NULL (nothing to clear). */
static struct cell *cell_if(struct dep *d, uint64_t word)
{
    uint8_t *p = ml_shadow_page(d->sh, word >> ML_SHADOW_PAGE_BITS, 0);

    return p ? (struct cell *)(void *)(p + ((word & ((1u << ML_SHADOW_PAGE_BITS) - 1)) << 1))
             : NULL;
}

/* Clears bytes [b0, b1) of the word at word (the others belong to another object). */
static void clear_part(struct dep *d, uint64_t word, unsigned b0, unsigned b1)
{
    struct cell *c = cell_if(d, word), *v;
    unsigned gran, sh;

    if (!c || (!c->w && !c->r))
        return;
    if (!(v = cells(d, c, word, (b0 | b1) & 3 ? 1 : 4, &gran)))
        return;
    sh = gran == 1 ? 0 : gran == 4 ? 2 : 3;
    for (unsigned b = b0 >> sh; b < (b1 + gran - 1) >> sh; b++)
        v[b] = (struct cell){0, 0};
    if (gran < 8)
        join(d, c, v, 8 / gran);
}

static void clear_range(void *arg, uint64_t lo, uint64_t hi)
{
    struct dep *d = arg;
    uint64_t a = (lo + 7) & ~7ull, b = hi & ~7ull;

    if (a > b) { /* inside one word */
        clear_part(d, b, (unsigned)(lo - b), (unsigned)(hi - b));
        return;
    }
    if (lo < a)
        clear_part(d, lo & ~7ull, (unsigned)(lo & 7), 8);
    if (b < hi)
        clear_part(d, b, 0, (unsigned)(hi - b));
    for (uint64_t x = a;
         d->split1 && x < b;) { /* words split in bytes give their pool entry back */
        uint64_t end = ((x >> ML_SHADOW_PAGE_BITS) + 1) << ML_SHADOW_PAGE_BITS;
        struct cell *c = cell_if(d, x);
        end = end < b ? end : b;
        for (; c && x < end; x += 8, c++)
            if (P_SITE(c->w) == SPLIT1) {
                pool_put(&d->p1, P_CLOCK(c->w));
                d->split1--;
            }
        x = end;
    }
    ml_shadow_clear(d->sh, a, b);
    ml_shadow_clear(d->sh4, a, b);
}

static void clear_obj(struct dep *d, struct ml_bworker *w, uint64_t lo, uint64_t hi)
{
    if (lo < hi && hi - lo <= OBJ_MAX)
        ml_bw_owned_ranges(w, lo, hi, clear_range, d);
}

/*
 * A new object (ALLOC, STACK_ALLOC). An object still known at its address
 * ended unseen (a frame left by longjmp): cleared now. The new block of a
 * realloc keeps the cells of the bytes it kept in place; a block that moved
 * is cleared (the copy is not an instrumented access).
 */
static void obj_new(struct dep *d, struct ml_bworker *w, struct lthread *t, uint64_t addr,
                    uint64_t size, int realloc)
{
    uint64_t old;

    if (realloc && t->moved) {
        if (t->moved != addr)
            clear_obj(d, w, t->moved, t->moved + t->moved_size);
        else if (size < t->moved_size)
            clear_obj(d, w, addr + size, addr + t->moved_size);
        t->moved = 0;
    }
    if (!addr)
        return;
    if ((old = obj_take(d, addr)))
        clear_obj(d, w, addr, addr + old);
    if (size && size <= OBJ_MAX && addr + size > addr)
        obj_put(d, addr, size);
}

/* An object ends (FREE, STACK_FREE; REALLOC: the new block decides, in obj_new). */
static void obj_end(struct dep *d, struct ml_bworker *w, struct lthread *t, uint64_t addr,
                    int realloc)
{
    uint64_t size = obj_take(d, addr);

    if (!size)
        return;
    if (!realloc) {
        clear_obj(d, w, addr, addr + size);
        return;
    }
    if (t->moved)
        clear_obj(d, w, t->moved, t->moved + t->moved_size);
    t->moved = addr;
    t->moved_size = size;
}

static inline void on_mem(struct dep *d, struct ml_bworker *w, struct lthread *t, uint32_t thread,
                          const uint64_t *rec, int load, int store)
{
    uint64_t size = ML_Q_AUX(rec[0]), addr = rec[1];
    uint64_t len = size ? size : ML_Q_EXTRA(rec[0]) ? rec[2] : 0;
    uint64_t site = ML_Q_ID(rec[0]);
    struct access a;

    a.t = t;
    if (!len || addr + len < addr)
        return;
    if (site >= SPLIT4 - 1) {
        d->bad_sites++;
        return;
    }
    a.d = d;
    a.thread = thread;
    a.site = (uint32_t)site;
    a.me = PACK(site + 1, d->clock);
    a.load = load;
    a.store = store;
    a.lw = a.ww = a.wr = 0;
    /* one 4 KiB block: one owner */
    if (w->n == 1 || (addr >> ML_BPART_BLOCK_BITS) == ((addr + len - 1) >> ML_BPART_BLOCK_BITS)) {
        if (w->n == 1 || ml_bw_owns_addr(w, addr))
            access_range(&a, addr, addr + len);
        return;
    }
    ml_bw_owned_ranges(w, addr, addr + len, access_range, &a);
}

/*
 * The access of site (cell value me) to the n cells v, each holding its
 * bytes whole: as cell_access, one dependence per earlier access in a run.
 * Inlined with n a constant 1 for the most common access, so no loop.
 */
static inline __attribute__((always_inline)) void
cells_access(struct dep *d, const struct lthread *t, uint32_t thread, uint32_t site, uint64_t me,
             struct cell *v, unsigned n, int load, int store)
{
    uint64_t lw = 0, ww = 0, wr = 0;

    for (unsigned i = 0; i < n; i++) {
        struct cell *e = &v[i];
        if (load && e->w && e->w != lw) {
            lw = e->w;
            depend_on(d, t, thread, site, e->w, RAW);
        }
        if (!store) {
            e->r = me;
            continue;
        }
        if (e->w && e->w != ww) {
            ww = e->w;
            depend_on(d, t, thread, site, e->w, WAW);
        }
        if (e->r && e->r != wr) {
            wr = e->r;
            depend_on(d, t, thread, site, e->r, WAR);
        }
        e->w = me;
        e->r = 0;
    }
}

/*
 * The common accesses, without the general path: aligned, of 8 to 64 bytes
 * on words each held by one cell, or of 4 bytes on a word split in halves.
 * The same steps as access_range; returns 0, having changed nothing, to
 * leave the record to on_mem.
 */
static inline __attribute__((always_inline)) int fast_mem(struct dep *d, const struct ml_bworker *w,
                                                          const struct lthread *t, uint32_t thread,
                                                          const uint64_t *rec, int load, int store)
{
    const unsigned size = ML_Q_AUX(rec[0]);
    const uint64_t addr = rec[1], site = ML_Q_ID(rec[0]), me = PACK(site + 1, d->clock);
    struct cell *c, *v;
    unsigned n;

    if (size == 4) {
        if ((addr & 3) || site >= SPLIT4 - 1)
            return 0;
        n = 1;
    } else {
        /* one 4 KiB block (so one owner and one shadow page) */
        if ((size & 7) || !size || (addr & 7) || site >= SPLIT4 - 1 ||
            (addr & ((1u << ML_BPART_BLOCK_BITS) - 1)) + size > (1u << ML_BPART_BLOCK_BITS))
            return 0;
        n = size >> 3;
    }
    if (w->n > 1 && !ml_bw_owns_addr(w, addr))
        return 1; /* another worker's */
    if (!(c = (struct cell *)(void *)ml_shadow_at(d->sh, addr & ~7ull)))
        return 0;
    v = c;
    if (size == 4) {
        if (P_SITE(c->w) != SPLIT4 ||
            !(v = (struct cell *)(void *)ml_shadow_at(d->sh4, addr & ~7ull)))
            return 0;
        v += (addr >> 2) & 1;
    } else if (n == 1) { /* the most common access */
        if (P_SITE(c->w) >= SPLIT4)
            return 0;
        cells_access(d, t, thread, (uint32_t)site, me, c, 1, load, store);
        return 1;
    } else {
        for (unsigned i = 0; i < n; i++)
            if (P_SITE(c[i].w) >= SPLIT4)
                return 0;
    }
    cells_access(d, t, thread, (uint32_t)site, me, v, n, load, store);
    if (v != c && store) { /* halves alike again are one cell */
        struct cell *h = addr & 4 ? v - 1 : v;
        if (h[0].w == h[1].w && h[0].r == h[1].r) {
            *c = *h;
            h[0] = h[1] = (struct cell){0, 0};
        }
    }
    return 1;
}

/* Records ahead of the one handled whose shadow cells are prefetched (they mostly miss the cache).
 */
#define AHEAD 16u

/* Word 0 of a one-unit record of an 8-byte access, kind bits 0-1 aside (1 load, 2 store, 3 RMW). */
#define W0_WORD8_MASK  0xfffcu
#define W0_SCALAR_MASK 0xcffcu     /* ... and of 4 or 8 (or 12) bytes: */
#define W0_SCALAR      (12u << 10) /* one of these bits set */
#define W0_WORD8       (8u << 10)
#define W0_HALF4       (4u << 10)
#define W0_VEC16       (16u << 10)
#define W0_KIND_EXTRA  0x3ffu /* kind and extra units */
_Static_assert(ML_EV_LOAD == 1 && ML_EV_STORE == 2 && ML_EV_RMW == 3, "kind bits: load 1, store 2");
_Static_assert(sizeof(struct cell) == 16, "d->sh: 2 metadata bytes per data byte");

/* The cells of the word at addr (aligned) in s, as ml_shadow_at with its ratio (1 << shift) a
 * constant. */
static inline struct cell *word_cells(struct ml_shadow *s, uint64_t addr, unsigned shift)
{
    uint64_t page = addr >> ML_SHADOW_PAGE_BITS;
    uint32_t i = (uint32_t)page & (ML_SHADOW_TLB - 1);
    uint8_t *p = page == s->tlb[i].page ? s->tlb[i].p : ml_shadow_page(s, page, 1);

    return p ? (struct cell *)(void *)(p + ((addr & ((1u << ML_SHADOW_PAGE_BITS) - 1)) << shift))
             : NULL;
}

/* The cell of the word at addr in d->sh (ratio 2). */
static inline struct cell *cell_at(struct dep *d, uint64_t addr)
{
    return word_cells(d->sh, addr, 1);
}

/* The two half cells of the word at addr in d->sh4 (ratio 4). */
static inline struct cell *halves_at(struct dep *d, uint64_t addr)
{
    return word_cells(d->sh4, addr, 2);
}

/*
 * The access of site (kind 1 load, 2 store, 3 RMW, a constant when inlined)
 * to cell c holding its bytes whole, whose store cw was read: as
 * cells_access with one cell.
 */
static inline __attribute__((always_inline)) void cell1(struct dep *d, const struct lthread *t,
                                                        uint32_t thread, uint64_t site,
                                                        struct cell *c, uint64_t cw, unsigned kind)
{
    uint64_t cr;

    if ((kind & ML_EV_LOAD) && cw)
        depend_on(d, t, thread, (uint32_t)site, cw, RAW);
    if (!(kind & ML_EV_STORE)) {
        c->r = PACK(site + 1, d->clock);
        return;
    }
    cr = c->r;
    if (cw)
        depend_on(d, t, thread, (uint32_t)site, cw, WAW);
    if (cr)
        depend_on(d, t, thread, (uint32_t)site, cr, WAR);
    c->w = PACK(site + 1, d->clock);
    c->r = 0;
}

/*
 * The most common record: an aligned 8-byte access to a word held whole by
 * one cell. Returns 0, having changed nothing, to leave the record to the
 * general path.
 */
static inline __attribute__((always_inline)) int word8(struct dep *d, const struct ml_bworker *w,
                                                       const struct lthread *t, uint32_t thread,
                                                       uint64_t w0, uint64_t addr, unsigned kind)
{
    const uint64_t site = ML_Q_ID(w0);
    struct cell *c;
    uint64_t cw;

    if ((addr & 7) || site >= SPLIT4 - 1)
        return 0;
    if (w->n > 1 && !ml_bw_owns_addr(w, addr))
        return 1; /* another worker's */
    if (!(c = cell_at(d, addr)) || (cw = c->w) >= PACK(SPLIT4, 0))
        return 0;
    cell1(d, t, thread, site, c, cw, kind);
    return 1;
}

/*
 * A 16-byte vector: an access aligned to 8 bytes within one 4 KiB block, to
 * two words each held whole by one cell; as cells_access with two cells.
 */
static inline __attribute__((always_inline)) int vec16(struct dep *d, const struct ml_bworker *w,
                                                       const struct lthread *t, uint32_t thread,
                                                       uint64_t w0, uint64_t addr, unsigned kind)
{
    const uint64_t site = ML_Q_ID(w0), me = PACK(site + 1, d->clock);
    struct cell *c;
    uint64_t w1, w2, r1, r2;

    if ((addr & 7) ||
        (addr & ((1u << ML_BPART_BLOCK_BITS) - 1)) > (1u << ML_BPART_BLOCK_BITS) - 16 ||
        site >= SPLIT4 - 1)
        return 0;
    if (w->n > 1 && !ml_bw_owns_addr(w, addr))
        return 1;
    if (!(c = cell_at(d, addr)) || (w1 = c[0].w) >= PACK(SPLIT4, 0) ||
        (w2 = c[1].w) >= PACK(SPLIT4, 0))
        return 0;
    if (kind & ML_EV_LOAD) {
        if (w1)
            depend_on(d, t, thread, (uint32_t)site, w1, RAW);
        if (w2 && w2 != w1)
            depend_on(d, t, thread, (uint32_t)site, w2, RAW);
    }
    if (!(kind & ML_EV_STORE)) {
        c[0].r = c[1].r = me;
        return 1;
    }
    r1 = c[0].r;
    r2 = c[1].r;
    if (w1)
        depend_on(d, t, thread, (uint32_t)site, w1, WAW);
    if (w2 && w2 != w1)
        depend_on(d, t, thread, (uint32_t)site, w2, WAW);
    if (r1)
        depend_on(d, t, thread, (uint32_t)site, r1, WAR);
    if (r2 && r2 != r1)
        depend_on(d, t, thread, (uint32_t)site, r2, WAR);
    c[0].w = c[1].w = me;
    c[0].r = c[1].r = 0;
    return 1;
}

/*
 * The next most common (an int): an aligned 4-byte access to a word split
 * in halves, whose halves are joined again when a store makes them alike.
 * The halves of a word not split in halves are zero, so halves holding
 * anything say the word is split without its cell being read (loads of an
 * int array stream one shadow, not two).
 */
static inline __attribute__((always_inline)) int half4(struct dep *d, const struct ml_bworker *w,
                                                       const struct lthread *t, uint32_t thread,
                                                       uint64_t w0, uint64_t addr, unsigned kind)
{
    const uint64_t site = ML_Q_ID(w0);
    struct cell *c, *h;

    if ((addr & 3) || site >= SPLIT4 - 1)
        return 0;
    if (w->n > 1 && !ml_bw_owns_addr(w, addr))
        return 1;
    if (!(h = halves_at(d, addr & ~7ull)))
        return 0;
    if (!(h[0].w | h[0].r | h[1].w | h[1].r) &&
        (!(c = cell_at(d, addr & ~7ull)) || P_SITE(c->w) != SPLIT4))
        return 0;
    cell1(d, t, thread, site, h + ((addr >> 2) & 1), h[(addr >> 2) & 1].w, kind);
    if ((kind & ML_EV_STORE) && h[0].w == h[1].w && h[0].r == h[1].r &&
        (c = cell_at(d, addr & ~7ull))) {
        *c = h[0];
        h[0] = h[1] = (struct cell){0, 0};
    }
    return 1;
}

/*
 * The next iteration of the innermost open loop, when its ring need not grow:
 * as on_loop. Returns 0, having changed nothing, to leave it to on_loop.
 */
static inline int iter_inner(struct dep *d, struct lthread *t, uint64_t id)
{
    struct lframe *f;

    if (!t->depth || t->over || (f = &t->f[t->depth - 1])->id != id || f->iter + 1 == f->rcap)
        return 0;
    if (d->clock < CLOCK_MAX)
        d->clock++;
    f->iter++;
    f->iter_start = f->ring[f->iter & (f->rcap - 1)] = d->clock;
    return 1;
}

/*
 * The records of one thread, read in a loop rather than one call each: the
 * shadow cells of the records AHEAD further on are fetched meanwhile.
 */
static uint32_t dep_chunk(void *st, struct ml_bworker *w, uint32_t thread, const uint8_t *data,
                          uint32_t len, uint64_t *records)
{
    struct dep *d = st;
    struct lthread *t;
    uint32_t off = 0;
    uint64_t count = 0;
    int blob;

    if (thread != d->cur)
        switch_thread(d, thread);
    if (!(t = lthread_of(d, thread)))
        return len;
    while (off < len) {
        const uint64_t *rec = (const uint64_t *)(const void *)(data + off);
        const uint64_t w0 = rec[0];
        const unsigned kind = ML_Q_KIND(w0);
        /* a unit AHEAD on may be inside a longer record: a wrong prefetch costs nothing */
        if (off + (AHEAD + 1) * ML_Q_UNIT <= len) {
            /* scalar accesses of 4 and 8 bytes only: vectors stream (the hardware fetches) */
            const uint64_t aw0 = rec[AHEAD * 2], a = rec[AHEAD * 2 + 1] & ~7ull;
            if (!(aw0 & W0_SCALAR_MASK) && (aw0 & W0_SCALAR))
                ml_shadow_prefetch((aw0 & W0_WORD8_MASK) == W0_WORD8 ? d->sh : d->sh4, a);
        }
        /* one unit (len is a multiple of it), so no blob and nothing malformed */
        if ((!(w0 & W0_SCALAR_MASK) || (w0 & W0_WORD8_MASK) == W0_VEC16) && (kind & 3)) {
            int done;
            if ((w0 & W0_WORD8_MASK) == W0_WORD8)
                done = kind == ML_EV_LOAD    ? word8(d, w, t, thread, w0, rec[1], ML_EV_LOAD)
                       : kind == ML_EV_STORE ? word8(d, w, t, thread, w0, rec[1], ML_EV_STORE)
                                             : word8(d, w, t, thread, w0, rec[1], ML_EV_RMW);
            else if ((w0 & W0_WORD8_MASK) == W0_HALF4)
                done = kind == ML_EV_LOAD    ? half4(d, w, t, thread, w0, rec[1], ML_EV_LOAD)
                       : kind == ML_EV_STORE ? half4(d, w, t, thread, w0, rec[1], ML_EV_STORE)
                                             : half4(d, w, t, thread, w0, rec[1], ML_EV_RMW);
            else if ((w0 & W0_WORD8_MASK) == W0_VEC16)
                done = kind == ML_EV_LOAD    ? vec16(d, w, t, thread, w0, rec[1], ML_EV_LOAD)
                       : kind == ML_EV_STORE ? vec16(d, w, t, thread, w0, rec[1], ML_EV_STORE)
                                             : vec16(d, w, t, thread, w0, rec[1], ML_EV_RMW);
            else
                done = 0;
            if (done) {
                off += ML_Q_UNIT;
                count++;
                continue;
            }
        }
        if ((w0 & W0_KIND_EXTRA) == ML_EV_LOOP_ITER && iter_inner(d, t, rec[1])) {
            off += ML_Q_UNIT;
            count++;
            continue;
        }
        uint32_t r = ml_bchunk_rec(data, off, len, &blob);
        if (!r)
            break;
        off += r;
        if (blob)
            continue;
        count++;
        switch (kind) {
        case ML_EV_LOAD:
            if (r != ML_Q_UNIT || !fast_mem(d, w, t, thread, rec, 1, 0))
                on_mem(d, w, t, thread, rec, 1, 0);
            break;
        case ML_EV_STORE:
            if (r != ML_Q_UNIT || !fast_mem(d, w, t, thread, rec, 0, 1))
                on_mem(d, w, t, thread, rec, 0, 1);
            break;
        case ML_EV_RMW:
            if (r != ML_Q_UNIT || !fast_mem(d, w, t, thread, rec, 1, 1))
                on_mem(d, w, t, thread, rec, 1, 1);
            break;
        case ML_EV_LOOP_ENTRY:
        case ML_EV_LOOP_ITER:
        case ML_EV_LOOP_EXIT:
            on_loop(d, t, kind, rec);
            break;
        case ML_EV_ALLOC:
            obj_new(d, w, t, rec[1], ML_Q_ID(rec[0]), ML_Q_AUX(rec[0]) & ML_EV_HEAP_REALLOC);
            break;
        case ML_EV_STACK_ALLOC:
            if (r > ML_Q_UNIT)
                obj_new(d, w, t, rec[1], rec[2], 0);
            break;
        case ML_EV_FREE:
        case ML_EV_STACK_FREE:
            obj_end(d, w, t, rec[1], 0);
            break;
        case ML_EV_REALLOC:
            obj_end(d, w, t, rec[1], 1);
            break;
        }
    }
    *records += count;
    return off;
}

static void dep_fini(void *st)
{
    struct dep *d = st;

    for (uint32_t i = 0; i < d->nt; i++) {
        for (uint32_t k = 0; k < d->t[i].cap; k++)
            free(d->t[i].f[k].ring);
        free(d->t[i].f);
    }
    free(d->t);
    free(d->seg);
    ml_shadow_free(d->sh4);
    free(d->p1.c);
    free(d->tab);
    ml_amap_free(&d->objs);
    ml_shadow_free(d->sh);
    free(d);
}

static int dep_merge(void *into, void *from)
{
    struct dep *a = into, *b = from;

    for (uint64_t i = 0; i < b->cap; i++)
        if (b->tab[i].used)
            add_pair(a, b->tab[i].k.sd, b->tab[i].k.lk, b->tab[i].count,
                     b->tab[i].k.carried ? b->tab[i].mindist : 0);
    a->cross_thread += b->cross_thread;
    a->far += b->far;
    a->unshadowed += b->unshadowed;
    a->bad_sites += b->bad_sites;
    a->unmatched += b->unmatched;
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
    hits_reset(&folded);
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
        add_pair(&folded, k.sd, k.lk, d->tab[i].count, d->tab[i].k.carried ? d->tab[i].mindist : 0);
    }
    rc = folded.nomem ? -ENOMEM : 0;
    free(d->tab);
    d->tab = folded.tab;
    d->cap = folded.cap;
    d->used = folded.used;
    hits_reset(d);
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
            ", \"unshadowed\": %" PRIu64 ", \"bad_site_ids\": %" PRIu64
            ", \"unmatched_loop_events\": %" PRIu64 ", \"bad_tables\": %u}",
            d->cross_thread, d->far, d->unshadowed, d->bad_sites, d->unmatched, t.bad);
    if (o->table && d->cross_thread)
        fprintf(o->table,
                "%" PRIu64 " accesses depended on another thread's store (see -m sharing)\n",
                d->cross_thread);
    free(rows);
    ml_bsites_free(&t);
    return d->nomem ? -ENOMEM : 0;
}

const struct ml_module ml_module_dep = {
    .name = "dep",
    .summary = "flow, anti and output dependences between instructions, loop-carried or not",
    .ev_kinds = ML_BEV(ML_EV_LOAD) | ML_BEV(ML_EV_STORE) | ML_BEV(ML_EV_RMW) |
                ML_BEV(ML_EV_LOOP_ENTRY) | ML_BEV(ML_EV_LOOP_ITER) | ML_BEV(ML_EV_LOOP_EXIT) |
                ML_BEV(ML_EV_ALLOC) | ML_BEV(ML_EV_FREE) | ML_BEV(ML_EV_REALLOC) |
                ML_BEV(ML_EV_STACK_ALLOC) | ML_BEV(ML_EV_STACK_FREE),
    .ev_fields = ML_EVF_ADDR | ML_EVF_SIZE,
    .init = dep_init,
    .merge = dep_merge,
    .report = dep_report,
    .fini = dep_fini,
    .chunk = dep_chunk,
};
