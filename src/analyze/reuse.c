/* Analysis 'reuse': reuse-distance histograms (lines, pages), exact or sampled (SHARDS), and
 * miss-ratio curves. */
#include "analyze/reuse.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/*
 * Distances are measured on each process's merged stream (all threads in
 * time order: what a shared fully associative LRU cache sees) and counted
 * in the row of the accessing thread and its --by interval. A record counts
 * once per line (page) its range touches: the first access with its
 * distance, weight - 1 more at distance 0.
 *
 * Row layout per granularity g (lines, pages): EX + b counts accesses of
 * bin b measured exactly; SM + b sampled accesses by bin of their estimated
 * distance, NR the accesses whose distance was to be estimated (exact
 * count) and NRS the weight of those of them measured. Exact mode
 * measures everything exactly. Sampled mode (SHARDS) counts repeats of the
 * previous key exactly (distance 0) and estimates every other access from
 * the keys whose sampling value (svalue) falls under rate x 2^32, scaled
 * to their exact count: a bin's estimate is SM + b x NR / NRS. A sampled
 * key's distance is exact below 16 (measure()); an unsampled access costs
 * the sampling value and a store. The rate starts at 1 and halves whenever
 * more than keys_max keys are sampled, down to the rate asked for
 * (fixed-size SHARDS with a floor); an access measured at rate R weighs
 * WONE x floor / R in SM and NRS, as it stands for 1 / R accesses.
 */
#define FRONT    16
#define RING     1024       /* entries; a power of two */
#define PREFETCH 8          /* records */
#define WONE     (1u << 20) /* weight of a sampled access at the floor rate */
enum { BINS = ML_REUSE_BINS, EX = 0, SM = BINS, NR = 2 * BINS, NRS, GW };
#define WIDTH (2 * GW)

struct gran {
    struct ml_reuse eng;  /* lines, or sampled pages */
    struct ml_rbins bins; /* pages measured in full (binned) */
    int binned;
    uint32_t shift;
    uint64_t prev; /* the last key (UINT64_MAX: none; keys are addresses >> 6 or more) */
    uint64_t
        *ring;     /* sampled mode: the last RING keys that were not repeats (key << 1 | sampled) */
    uint64_t rpos; /* entries pushed to ring */
    /* sampled mode: per key count of estimated accesses, for the error bound */
    struct ml_map cnt;
    int all;                /* every key measured exactly (no sampling) */
    double rate;            /* sampling rate of this granularity, now */
    double floor;           /* ... and the lowest it may go */
    uint64_t threshold;     /* a key is sampled when svalue(key) < threshold (2^32: all) */
    uint64_t weight;        /* of an estimated access measured now */
    uint64_t nr;            /* estimated accesses, this trace */
    uint64_t sblock, shash; /* the block of the last key (UINT64_MAX: none) and its hash */
};

struct tbound { /* error bound and final rate per trace and granularity */
    double sigma[2], rate[2];
};

struct reuse {
    const struct ml_an_run *run;
    struct ml_rows rows[2]; /* per granularity (the lanes): GW counters per row */
    struct ml_rows all;     /* both, side by side (WIDTH), for the report */
    struct gran g[2];
    double rate;
    uint64_t keys_max; /* sampled keys per granularity before the rate halves */
    int sampled;
    struct tbound *bound;
    int nbound;
};

/*
 * A key's sampling value in [0, 2^32): sampled at rate R iff below R x 2^32.
 * Uniform for each key (so every estimate stays unbiased), but stratified:
 * within each aligned block of 2^SBITS keys the values are a pseudo-random
 * permutation of the block, spread evenly over [0, 2^32) and rotated by a
 * hash of the block, so a block holds R x 2^SBITS sampled keys give or take
 * one. With independent hashes the share of an array's lines that is
 * sampled strays by 1 / sqrt(R x lines): 4.4% for pagerank's 50000-line
 * array at 1%, and every distance that spans that array was off by it (all
 * in one direction for a given hash: the 0.01-0.02 error at 32768 lines).
 * Keys of a block are sampled without replacement rather than
 * independently, which lowers the variance of a sampled total, so the
 * stated bound (computed as for independent keys) stays an upper bound up
 * to the order of one key per block.
 */
#define SBITS 12
#define SMASK ((1u << SBITS) - 1)
static uint16_t sperm[1u << SBITS]; /* a pseudo-random permutation of SBITS bits */

/* Four Feistel rounds on the halves of SBITS bits: a bijection. */
static void sperm_fill(void)
{
    for (uint32_t x = 0; x <= SMASK; x++) {
        uint32_t l = x >> (SBITS / 2), r = x & (SMASK >> (SBITS / 2));
        for (uint32_t i = 0; i < 4; i++) {
            uint32_t t = r;
            r = l ^ (uint32_t)(((r + 64 * i + 1) * 0x9e3779b97f4a7c15ull) >> (64 - SBITS / 2));
            l = t;
        }
        sperm[x] = (uint16_t)(l << (SBITS / 2) | r);
    }
}

/*
 * hb: ml_hash64(key >> SBITS), which callers keep for runs of keys in one
 * block. The block's bijection is the table's, with its input and output
 * xored by bits of hb (a table lookup: the Feistel rounds themselves, keyed
 * per block, cost 12% of stream's sampled time).
 */
static inline uint32_t svalue_h(uint64_t key, uint64_t hb)
{
    uint32_t x = sperm[(key ^ hb) & SMASK] ^ ((uint32_t)(hb >> SBITS) & SMASK);

    return (uint32_t)(hb >> 32) + (x << (32 - SBITS));
}

static inline uint32_t svalue(uint64_t key)
{
    return svalue_h(key, ml_hash64(key >> SBITS));
}

static void *start(const struct ml_an_run *run)
{
    const struct ml_an_opts *o = ml_an_options(run);
    struct reuse *s = calloc(1, sizeof(*s));

    static pthread_once_t once = PTHREAD_ONCE_INIT;

    if (!s)
        return NULL;
    pthread_once(&once, sperm_fill);
    s->run = run;
    s->rate = o->sample;
    s->sampled = o->sample > 0 && o->sample < 1;
    s->keys_max = o->sample_keys ? o->sample_keys : 8192;
    ml_rows_init(&s->rows[0], GW);
    ml_rows_init(&s->rows[1], GW);
    ml_rows_init(&s->all, WIDTH);
    return s;
}

static void set_rate(struct gran *g, double rate)
{
    g->rate = rate;
    g->threshold = (uint64_t)(rate * 4294967296.0);
    g->weight = (uint64_t)(WONE * g->floor / rate + 0.5);
}

static int sampled_key(uint64_t key, void *arg)
{
    return svalue(key) < ((const struct gran *)arg)->threshold;
}

/*
 * Halves the rate (not below the floor) until at most max keys are sampled:
 * keys that are no longer sampled leave the stack and the count map.
 */
static int shrink(struct gran *g, uint64_t max)
{
    while (ml_reuse_keys(&g->eng) > max && g->rate > g->floor) {
        struct ml_map keep;
        set_rate(g, g->rate / 2 > g->floor ? g->rate / 2 : g->floor);
        for (uint32_t k = 0; k < RING; k++)
            g->ring[k] = (g->ring[k] & ~1ull) | (uint64_t)sampled_key(g->ring[k] >> 1, g);
        if (ml_reuse_keep(&g->eng, sampled_key, g) || ml_map_init(&keep, 1024))
            return -ENOMEM;
        ml_map_each(&g->cnt, i)
        {
            uint64_t key = ml_map_key(&g->cnt, i), *v;
            if (!sampled_key(key, g))
                continue;
            if (!(v = ml_map_slot(&keep, key))) {
                ml_map_free(&keep);
                return -ENOMEM;
            }
            *v = g->cnt.vals[i];
        }
        ml_map_free(&g->cnt);
        g->cnt = keep;
    }
    return 0;
}

static int begin(void *st, const struct ml_an_input *in)
{
    struct reuse *s = st;
    uint32_t page = in->info->hdr.page_size ? in->info->hdr.page_size : 4096,
             line = ml_an_options(s->run)->line;
    struct tbound *b = realloc(s->bound, (size_t)(s->nbound + 1) * sizeof(*b));

    if (!b)
        return -ENOMEM;
    s->bound = b;
    memset(&b[s->nbound++], 0, sizeof(*b));
    for (int i = 0; i < 2; i++) {
        struct gran *g = &s->g[i];
        ml_reuse_free(&g->eng);
        ml_rbins_free(&g->bins);
        ml_map_free(&g->cnt);
        free(g->ring);
        memset(g, 0, sizeof(*g));
        /* At least 8 bytes (a hostile header may say a page is 1): keys stay below 2^61, so
         * UINT64_MAX marks "none" and the ring's low bit is free. */
        g->shift = 3;
        g->prev = g->sblock = UINT64_MAX;
        while ((1ull << g->shift) < (i ? page : line))
            g->shift++;
        /*
         * Pages are sampled at the same share of bytes as lines (rate x page /
         * line), all of them from 1/4 on: there are far fewer of them, and too
         * few sampled keys make a poor estimate.
         */
        g->floor = s->rate * (i ? (double)page / line : 1);
        g->all = !s->sampled || g->floor >= 0.25; /* about as costly as measuring all */
        if (g->all)
            g->floor = 1;
        set_rate(g, 1);
        /*
         * Pages measured in full need only the bins of their distances: the
         * marker stack costs about half the bitmap engine's on pagerank's pages
         * (few keys, all in cache), but twice its cost on lines (a marker move
         * is a cache miss there).
         */
        g->binned = i && g->all;
        if (g->binned ? ml_rbins_init(&g->bins) : ml_reuse_init(&g->eng))
            return -ENOMEM;
        if (!g->all && (ml_map_init(&g->cnt, 1024) || !(g->ring = calloc(RING, 8))))
            return -ENOMEM;
    }
    return 0;
}

/*
 * A non-repeat access to sampled key. Its distance below FRONT is exact: the
 * ring holds every key since (sampled or not), so the distinct keys before
 * its previous access are counted there, up to FRONT of them. Beyond them
 * (or the ring), all n keys seen were accessed since key was: its distance
 * is n plus the others, estimated from the sampled ones among them only
 * ((d - f) / rate, d its distance among sampled keys, f the sampled keys of
 * the n; d / rate would count those f 1 / rate times).
 */
static int measure(struct gran *g, uint64_t key, uint64_t *c, uint64_t keys_max)
{
    uint64_t e = key << 1 | 1, seen[FRONT], d, *cnt;
    uint64_t lim = g->rpos < RING ? g->rpos : RING, nsf = 0;
    unsigned n = 0, m;
    int found = 0;

    for (uint64_t j = 1; j <= lim && n < FRONT; j++) {
        uint64_t x = g->ring[(g->rpos - j) & (RING - 1)];
        if (x == e) {
            found = 1;
            break;
        }
        for (m = 0; m < n && seen[m] != x; m++)
            ;
        if (m == n) {
            seen[n++] = x;
            nsf += x & 1;
        }
    }
    g->ring[g->rpos++ & (RING - 1)] = e;
    /* Sampled keys always go through their own stack, to keep their times right. */
    d = ml_reuse_slow(&g->eng, key);
    if (d == UINT64_MAX - 1 || !(cnt = ml_map_slot(&g->cnt, key)))
        return -ENOMEM;
    ++*cnt;
    if (found)
        d = n;
    else if (d != ML_REUSE_COLD)
        d = n + (uint64_t)((double)(d > nsf ? d - nsf : 0) / g->rate + 0.5);
    c[NRS] += g->weight;
    c[SM + ml_reuse_bin(d)] += g->weight;
    if (d == ML_REUSE_COLD && ml_reuse_keys(&g->eng) > keys_max)
        return shrink(g, keys_max);
    return 0;
}

/* One access to key by a record of weight w, counted in c, all keys measured (g->all). */
static inline int count(struct reuse *s, struct gran *g, uint64_t key, uint32_t w, uint64_t *c)
{
    int b;

    if (key == g->prev) {
        c[EX] += w;
        return 0;
    }
    g->prev = key;
    c[EX] += w - 1;
    if (g->binned) {
        if ((b = ml_rbins_access(&g->bins, key)) < 0)
            return b;
    } else {
        uint64_t d = ml_reuse_slow(&g->eng, key);
        if (d == UINT64_MAX - 1)
            return -ENOMEM;
        b = (int)ml_reuse_bin(d);
    }
    if (!s->sampled || b <= (int)ml_reuse_bin(FRONT - 1)) {
        c[EX + b]++;
        return 0;
    }
    /*
     * Every key sampled: the engine's distance is what the ring and the
     * estimate of measure() would give (exact below FRONT, d / 1 above), and
     * the bound is 0 (its 1 - rate factor), so neither is kept.
     */
    c[NR]++;
    c[NRS]++;
    c[SM + b]++;
    g->nr++;
    return 0;
}

/*
 * Lane k of a sampled granularity: most accesses cost a compare with the
 * previous key or a sampling value and a store to the ring, so the loop
 * keeps that state in locals (the row's counters could alias it) and
 * writes it back around measure() and at the end.
 */
static int lane_sampled(struct gran *g, uint64_t keys_max, struct ml_rows *rows,
                        const struct ml_an_input *in, const struct ml_trace_rec *r, size_t n)
{
    uint32_t thr = UINT32_MAX, shift = g->shift;
    uint64_t *cg = NULL, *ring = g->ring, prev = g->prev, rpos = g->rpos, sblock = g->sblock,
             shash = g->shash, threshold = g->threshold, ex = 0, nr = 0;
    int rc = 0;

    for (size_t i = 0; i < n && !rc; i++) {
        const struct ml_trace_rec *x = &r[i];
        uint64_t first, last;
        if (!ml_ev_is_access(x->kind))
            continue;
        if (x->thread != thr) {
            if (cg) {
                cg[EX] += ex;
                cg[NR] += nr;
                g->nr += nr;
                ex = nr = 0;
            }
            thr = x->thread;
            if (!(cg = ml_rows_at(rows, in->thread_base + thr, ml_an_key(in, x))))
                return -ENOMEM;
        }
        first = x->addr >> shift;
        last = (x->addr + (x->size ? x->size - 1 : 0)) >> shift;
        for (uint64_t key = first; key <= last; key++) {
            if (key == prev) {
                ex += x->weight;
                continue;
            }
            prev = key;
            ex += x->weight - 1;
            nr++;
            if (key >> SBITS != sblock) {
                sblock = key >> SBITS;
                shash = ml_hash64(sblock);
            }
            if (svalue_h(key, shash) >= threshold) {
                /* Not sampled: remembered for the short distances of sampled keys, nothing more. */
                ring[rpos++ & (RING - 1)] = key << 1;
                continue;
            }
            g->rpos = rpos;
            if ((rc = measure(g, key, cg, keys_max)))
                break;
            rpos = g->rpos;
            threshold = g->threshold; /* measure may have halved the rate */
        }
    }
    if (cg) {
        cg[EX] += ex;
        cg[NR] += nr;
        g->nr += nr;
    }
    g->rpos = rpos;
    g->prev = prev;
    g->sblock = sblock;
    g->shash = shash;
    return rc;
}

/* Lane k: granularity k (lines, pages), its own engine and rows. */
static int lane(void *st, int k, const struct ml_an_input *in, const struct ml_trace_rec *r,
                size_t n)
{
    struct reuse *s = st;
    struct gran *g = &s->g[k];
    uint32_t thr = UINT32_MAX, shift = g->shift;
    uint64_t *cg = NULL;
    int rc;

    if (!g->all)
        return lane_sampled(g, s->keys_max, &s->rows[k], in, r, n);
    for (size_t i = 0; i < n; i++) {
        const struct ml_trace_rec *x = &r[i];
        uint64_t first, last;
        /* Irregular traces miss the cache on the key's map slot: ask for it a few records early. */
        if (i + PREFETCH < n) {
            if (g->binned)
                ml_rbins_prefetch(&g->bins, r[i + PREFETCH].addr >> shift);
            else
                ml_reuse_prefetch(&g->eng, r[i + PREFETCH].addr >> shift);
        }
        if (!ml_ev_is_access(x->kind))
            continue;
        if (x->thread != thr) {
            thr = x->thread;
            if (!(cg = ml_rows_at(&s->rows[k], in->thread_base + thr, ml_an_key(in, x))))
                return -ENOMEM;
        }
        first = x->addr >> shift;
        last = (x->addr + (x->size ? x->size - 1 : 0)) >> shift;
        if (first == last && first == g->prev) {
            cg[EX] += x->weight;
            continue;
        }
        for (uint64_t key = first; key <= last; key++)
            if ((rc = count(s, g, key, x->weight, cg)))
                return rc;
    }
    return 0;
}

/* The rows of both granularities side by side (once, after the last record). */
static int merge_rows(struct reuse *s)
{
    if (s->all.n)
        return 0;
    for (int k = 0; k < 2; k++)
        for (uint32_t i = 0; i < s->rows[k].n; i++) {
            uint64_t *d = ml_rows_at(&s->all, s->rows[k].thread[i], s->rows[k].key[i]);
            if (!d)
                return -ENOMEM;
            memcpy(d + k * GW, ml_rows_row(&s->rows[k], i), GW * sizeof(*d));
        }
    return 0;
}

static int end(void *st, const struct ml_an_input *in)
{
    struct reuse *s = st;
    struct tbound *b = &s->bound[s->nbound - 1];

    (void)in;
    for (int k = 0; k < 2 && s->sampled; k++) {
        const struct gran *g = &s->g[k];
        double sumsq = 0;
        /*
         * Horvitz-Thompson estimate of a miss ratio over keys sampled with
         * probability R (the final rate: the keys sampled at the end were
         * sampled all along): its variance is at most (1 - R) / R x sum_a
         * c_a^2 / N^2 (c_a: key a's non-repeat accesses, an upper bound of
         * its misses); sum_a c_a^2 is estimated from the sample, / R.
         */
        b->rate[k] = g->rate;
        if (g->all)
            continue; /* rate 1: no sampling error */
        ml_map_each(&g->cnt, i) sumsq += (double)g->cnt.vals[i] * (double)g->cnt.vals[i];
        if (g->nr)
            b->sigma[k] = sqrt((1 - g->rate) / g->rate * sumsq / g->rate) / (double)g->nr;
    }
    return 0;
}

static const char *gname(int k)
{
    return k ? "page" : "line";
}

/* Estimated count of bin b of granularity part c. */
static double est(const uint64_t *c, unsigned b)
{
    return (double)c[EX + b] + (c[NRS] ? (double)c[SM + b] * (double)c[NR] / (double)c[NRS] : 0);
}

static double total_of(const uint64_t *c)
{
    double t = (double)c[NR];

    for (unsigned b = 0; b < BINS; b++)
        t += (double)c[EX + b];
    return t;
}

/* The highest distance bin with a count. */
static unsigned top_of(const uint64_t *c)
{
    unsigned top = 0;

    for (unsigned b = 0; b < BINS - 1; b++)
        if (c[EX + b] || c[SM + b])
            top = b;
    return top;
}

struct rep {
    struct reuse *s;
    struct ml_tab *hist, *mrc;
    FILE *html;
};

static int visit(void *arg, int tr, uint32_t g, uint32_t k, const uint64_t *c)
{
    struct rep *p = arg;
    int rc = 0;

    for (int gi = 0; gi < 2 && !rc; gi++) {
        const uint64_t *cg = c + gi * GW;
        double total = total_of(cg), above;
        unsigned top = top_of(cg);
        above = total - est(cg, 0);
        for (unsigned b = 0; b < BINS && !rc; b++) {
            double v;
            if (b > top && b != BINS - 1)
                continue;
            v = est(cg, b);
            rc |= ml_tab_who(p->hist, p->s->run, tr, g, k);
            rc |= ml_tab_str(p->hist, gname(gi));
            if (b == BINS - 1) {
                rc |= ml_tab_null(p->hist);
                rc |= ml_tab_null(p->hist);
            } else {
                rc |= ml_tab_u64(p->hist, b ? 1ull << (b - 1) : 0);
                rc |= ml_tab_u64(p->hist, b ? (b == 64 ? UINT64_MAX : (1ull << b) - 1) : 0);
            }
            rc |= ml_tab_u64(p->hist, (uint64_t)(v + 0.5));
            if (b == BINS - 1) {
                rc |= ml_tab_null(p->hist);
            } else {
                rc |= ml_tab_f64(p->hist, total ? above / total : 0);
                above -= est(cg, b + 1);
            }
        }
        /* The miss-ratio curve for the totals of each trace. */
        if (g == ML_ALL && k == ML_ALL && total > 0) {
            const struct tbound *bd = &p->s->bound[tr];
            double misses = est(cg, BINS - 1);
            uint64_t unit = 1ull << p->s->g[gi].shift;
            for (unsigned b = BINS - 1; b-- > 1;)
                misses += est(cg, b);
            /* Cache of 2^j entries: misses are cold + distances >= 2^j (bins j + 1 and up). */
            for (unsigned j = 0; j <= top && !rc; j++) {
                rc |= ml_tab_u64(p->mrc, ml_an_trace_pid(p->s->run, tr));
                rc |= ml_tab_str(p->mrc, gname(gi));
                rc |= ml_tab_u64(p->mrc, 1ull << j);
                rc |= ml_tab_u64(p->mrc, (1ull << j) * unit);
                rc |= ml_tab_f64(p->mrc, misses / total);
                if (p->s->sampled)
                    rc |= ml_tab_f64(p->mrc, 3 * bd->sigma[gi]);
                else
                    rc |= ml_tab_f64(p->mrc, 0);
                misses -= est(cg, j + 1);
            }
        }
    }
    return rc ? -ENOMEM : 0;
}

static int build(struct reuse *s, struct rep *p)
{
    p->s = s;
    p->hist = ml_tab_new("histogram",
                         s->sampled ? "reuse distances (sampled; counts are estimates)"
                                    : "reuse distances (exact)",
                         "pid:u thread tid:u marker granularity distance_lo:u distance_hi:u "
                         "count:u lru_miss_ratio:p");
    p->mrc = ml_tab_new("mrc",
                        "miss-ratio curve of a fully associative LRU cache (all threads); "
                        "error_bound: 3 sigma of the sampling error of each miss ratio",
                        "pid:u granularity cache_entries:u cache_bytes:u miss_ratio:p "
                        "error_bound:p");
    if (!p->hist || !p->mrc)
        return -ENOMEM;
    if (merge_rows(s))
        return -ENOMEM;
    return ml_rows_visit(&s->all, s->run, visit, p);
}

static int report(void *st, FILE *out, enum ml_an_format fmt)
{
    struct reuse *s = st;
    struct rep p = {0};
    struct ml_tab *tabs[2];
    char extra[200];
    int rc = build(s, &p);

    tabs[0] = p.hist;
    tabs[1] = p.mrc;
    if (rc) {
        ml_tab_free(p.hist);
        ml_tab_free(p.mrc);
        return rc;
    }
    snprintf(extra, sizeof(extra), "\"mode\": \"%s\", \"rate\": %g, \"page_rate\": %g",
             s->sampled ? "sampled" : "exact", s->sampled ? s->g[0].rate : 1.0,
             s->sampled ? s->g[1].rate : 1.0);
    if (fmt == ML_AN_TABLE && s->sampled)
        fprintf(out,
                "reuse: lines sampled at rate %g (pages at %g), SHARDS (sampled keys' "
                "distances below 16 exact); each miss ratio is within error_bound (3 sigma) of "
                "the exact one, for caches below 16 or of at least 100 / rate entries\n",
                s->g[0].rate, s->g[1].rate);
    return ml_tab_print(out, fmt, tabs, 2, extra);
}

struct chart {
    struct reuse *s;
    FILE *out;
};

/* Charts of the totals of each trace: the histogram and the miss-ratio curve per granularity. */
static int chart(void *arg, int tr, uint32_t g, uint32_t k, const uint64_t *c)
{
    struct chart *ch = arg;
    int rc = 0;

    if (g != ML_ALL || k != ML_ALL)
        return 0;
    for (int gi = 0; gi < 2 && !rc; gi++) {
        const uint64_t *cg = c + gi * GW;
        char lab[BINS + 1][48], title[160];
        const char *lp[BINS + 1];
        double v[BINS + 1], mr[BINS + 1], total = total_of(cg), misses;
        unsigned top = top_of(cg), n = 0;
        uint64_t unit = 1ull << ch->s->g[gi].shift;
        for (unsigned b = 0; b <= top; b++) {
            if (b < 2)
                snprintf(lab[n], sizeof(lab[n]), "%u", b);
            else
                snprintf(lab[n], sizeof(lab[n]), "%llu-%llu", 1ull << (b - 1), (1ull << b) - 1);
            lp[n] = lab[n];
            v[n++] = est(cg, b);
        }
        snprintf(lab[n], sizeof(lab[n]), "cold");
        lp[n] = lab[n];
        v[n++] = est(cg, BINS - 1);
        snprintf(title, sizeof(title), "Reuse distances of %ss, pid %u (%s)", gname(gi),
                 ml_an_trace_pid(ch->s->run, tr), ch->s->sampled ? "sampled estimate" : "exact");
        rc = ml_svg_bars(ch->out, title, "distance (distinct other keys)", "accesses", lp, v, n);
        misses = total;
        n = 0;
        for (unsigned j = 0; j <= top && total > 0; j++) {
            char b[32];
            misses -= est(cg, j);
            snprintf(lab[n], sizeof(lab[n]), "%s",
                     ml_fmt_bytes(b, sizeof(b), (double)(1ull << j) * unit));
            lp[n] = lab[n];
            mr[n++] = misses / total;
        }
        snprintf(title, sizeof(title),
                 "Miss ratio of a fully associative LRU cache by size (%ss), pid %u", gname(gi),
                 ml_an_trace_pid(ch->s->run, tr));
        if (!rc && n)
            rc = ml_svg_bars(ch->out, title, "cache size", "miss ratio", lp, mr, n);
    }
    return rc;
}

static int html(void *st, FILE *out)
{
    struct reuse *s = st;
    struct chart ch = {s, out};

    fprintf(out, "<h2>reuse</h2>\n");
    if (merge_rows(s))
        return -ENOMEM;
    return ml_rows_visit(&s->all, s->run, chart, &ch);
}

static void reuse_free(void *st)
{
    struct reuse *s = st;

    if (!s)
        return;
    for (int i = 0; i < 2; i++) {
        ml_reuse_free(&s->g[i].eng);
        ml_rbins_free(&s->g[i].bins);
        ml_map_free(&s->g[i].cnt);
        free(s->g[i].ring);
    }
    for (int k = 0; k < 2; k++)
        ml_rows_free(&s->rows[k]);
    ml_rows_free(&s->all);
    free(s->bound);
    free(s);
}

const struct ml_analysis ml_an_reuse = {
    .name = "reuse",
    .summary = "reuse-distance histograms of lines and pages (exact, or --sample R: SHARDS) "
               "and the LRU miss-ratio curve",
    .start = start,
    .begin = begin,
    .end = end,
    .report = report,
    .html = html,
    .free = reuse_free,
    .lanes = 2,
    .lane = lane,
};
