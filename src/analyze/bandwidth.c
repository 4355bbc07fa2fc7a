/* Analysis 'bandwidth': bytes per time interval per thread and marker, raw and (--memory) behind
 * the caches. */
#include "analyze/cachesim.h"
#include "analyze/util.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/*
 * Bytes of a record are size x weight, read for loads, written for stores,
 * both for RMW; a record falls in the interval of its time. With --memory
 * the cache filter of membus runs too: line fills are bytes memory read,
 * write-backs bytes memory wrote, in the interval and row of the access that
 * caused them. A trace written by 'membus --filter' holds only what memory
 * saw, so its raw bandwidth is the memory bandwidth.
 */
enum { RD, WR, MRD, MWR, NV };

struct series { /* a row's bins from `first` on */
    uint32_t first, n, cap;
    uint64_t *v; /* [cap][NV] */
};

struct band {
    uint32_t thread, marker;
    uint64_t t0, t1; /* ticks */
    char *name;      /* "region:x", "mark:y" (set when the trace ends) */
};

#define MAX_BANDS 20000

struct ttr {
    uint32_t pid;
    uint64_t interval_ns;
    uint32_t nbins;
    double ticks_per_bin, ns_per_tick;
    uint64_t tick0;
    double t0_ns; /* of tick0 */
    struct band *bands;
    uint32_t nbands, capbands;
    /* while reading: per (thread, marker) the open band + 1, per thread its mark phase's */
    uint32_t *open, *phase;
    uint32_t nthr, nmark;
};

struct bw {
    const struct ml_an_run *run;
    struct ml_rows rows; /* one counter: series index + 1 */
    struct series *ser;
    uint32_t nser, capser;
    struct ml_csim sim;
    int memory;
    uint64_t mc[ML_CS_N];
    struct ttr *tr;
    int ntr;
    uint64_t bin_end;
    uint32_t bin;
};

static void *start(const struct ml_an_run *run)
{
    const struct ml_an_opts *o = ml_an_options(run);
    struct bw *b = calloc(1, sizeof(*b));

    if (!b)
        return NULL;
    b->run = run;
    b->memory = o->memory;
    ml_rows_init(&b->rows, 1);
    if (b->memory && ml_csim_init(&b->sim, o, 0)) {
        free(b);
        errno = EINVAL;
        return NULL;
    }
    return b;
}

#define MAX_CELLS (1ull << 26) /* bins x rows: 2 GiB of counters at most */

static int begin(void *st, const struct ml_an_input *in)
{
    struct bw *b = st;
    const struct ml_an_opts *o = ml_an_options(b->run);
    struct ttr *t = realloc(b->tr, (size_t)(b->ntr + 1) * sizeof(*t));
    double span, t0;

    if (!t)
        return -ENOMEM;
    b->tr = t;
    t += b->ntr++;
    memset(t, 0, sizeof(*t));
    t->pid = in->info->hdr.pid;
    t0 = ml_trace_ns(in->trace, in->t_first);
    span = ml_trace_ns(in->trace, in->t_last) - t0;
    if (!(span >= 0 && span < 1e18)) /* damaged clock pairs */
        span = 0;
    t->interval_ns = o->interval_ns ? o->interval_ns : ml_auto_interval(span, 100);
    if (span / (double)t->interval_ns > (double)MAX_CELLS) {
        char iv[32];
        fprintf(stderr,
                "memlens: bandwidth: intervals of %s over %.3f s are too many; use a "
                "longer --interval\n",
                ml_fmt_interval(iv, sizeof(iv), t->interval_ns), span / 1e9);
        return -EINVAL;
    }
    t->nbins = (uint32_t)(span / (double)t->interval_ns) + 1;
    t->ns_per_tick = ml_trace_ns(in->trace, in->t_first + 1000000) / 1e6 - t0 / 1e6;
    t->ticks_per_bin = t->ns_per_tick > 0 ? (double)t->interval_ns / t->ns_per_tick : 1;
    t->tick0 = in->t_first;
    t->t0_ns = t0;
    t->nmark = ml_trace_nmarkers(in->trace);
    b->bin = 0;
    b->bin_end = t->tick0 + (uint64_t)t->ticks_per_bin;
    if (b->memory)
        ml_csim_reset(&b->sim);
    return 0;
}

static inline void to_bin(struct bw *b, const struct ttr *t, uint64_t time)
{
    double x;

    if (time < b->bin_end)
        return;
    x = (double)(time - t->tick0) / t->ticks_per_bin;
    b->bin = x >= t->nbins - 1 ? t->nbins - 1 : (uint32_t)x;
    b->bin_end = b->bin + 1 >= t->nbins ? UINT64_MAX
                                        : t->tick0 + (uint64_t)((b->bin + 1) * t->ticks_per_bin);
}

/* The counters of bin `bin` of series s (grown to reach it). */
static uint64_t *cell(struct series *s, uint32_t bin)
{
    if (!s->n) {
        s->first = bin;
    }
    if (bin - s->first >= s->cap) {
        uint32_t cap = s->cap ? s->cap : 16;
        uint64_t *v;
        while (cap <= bin - s->first)
            cap *= 2;
        v = realloc(s->v, (size_t)cap * NV * sizeof(*v));
        if (!v)
            return NULL;
        memset(v + (size_t)s->cap * NV, 0, (size_t)(cap - s->cap) * NV * sizeof(*v));
        s->v = v;
        s->cap = cap;
    }
    if (bin - s->first >= s->n)
        s->n = bin - s->first + 1;
    return s->v + (size_t)(bin - s->first) * NV;
}

static struct series *series_of(struct bw *b, uint32_t g, uint32_t k)
{
    uint64_t *c = ml_rows_at(&b->rows, g, k);

    if (!c)
        return NULL;
    if (!*c) {
        if (b->nser == b->capser) {
            uint32_t cap = b->capser ? 2 * b->capser : 64;
            struct series *v = realloc(b->ser, (size_t)cap * sizeof(*v));
            if (!v)
                return NULL;
            b->ser = v;
            b->capser = cap;
        }
        memset(&b->ser[b->nser], 0, sizeof(b->ser[0]));
        *c = ++b->nser;
    }
    return &b->ser[*c - 1];
}

static int record(void *st, const struct ml_an_input *in, const struct ml_trace_rec *r, size_t n)
{
    struct bw *b = st;
    struct ttr *t = &b->tr[b->ntr - 1];
    uint32_t thr = UINT32_MAX, line = b->memory ? 1u << b->sim.line_shift : 0;
    uint32_t sidx = 0;
    uint64_t *c = NULL;
    int rc;

    for (size_t i = 0; i < n; i++) {
        const struct ml_trace_rec *x = &r[i];
        uint64_t bytes = (uint64_t)x->size * x->weight;
        if (!ml_ev_is_access(x->kind))
            continue;
        if (x->thread != thr) {
            struct series *s = series_of(b, in->thread_base + x->thread, ml_an_key(in, x));
            if (!s)
                return -ENOMEM;
            thr = x->thread;
            sidx = (uint32_t)(s - b->ser);
            c = NULL;
        }
        if (x->time >= b->bin_end || !c) {
            to_bin(b, t, x->time);
            if (!(c = cell(&b->ser[sidx], b->bin)))
                return -ENOMEM;
        }
        if (x->kind != ML_EV_STORE)
            c[RD] += bytes;
        if (x->kind != ML_EV_LOAD)
            c[WR] += bytes;
        if (b->memory) {
            b->mc[ML_CS_MEM_RD] = b->mc[ML_CS_MEM_WR] = 0;
            if ((rc = ml_csim_access(&b->sim, x->thread, x->kind, x->addr, x->size, x->weight,
                                     b->mc)))
                return rc;
            c[MRD] += b->mc[ML_CS_MEM_RD] * line;
            c[MWR] += b->mc[ML_CS_MEM_WR] * line;
        }
    }
    return 0;
}

/* Marker bands for the page: regions (outermost entry to exit) and mark phases, per thread. */
static int add_band(struct ttr *t, uint32_t thread, uint32_t marker, uint64_t t0)
{
    if (t->nbands == MAX_BANDS)
        return 0;
    if (t->nbands == t->capbands) {
        uint32_t cap = t->capbands ? 2 * t->capbands : 64;
        struct band *v = realloc(t->bands, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        t->bands = v;
        t->capbands = cap;
    }
    t->bands[t->nbands] = (struct band){thread, marker, t0, UINT64_MAX, NULL};
    return (int)++t->nbands;
}

static int grow_open(struct ttr *t, uint32_t th)
{
    uint32_t n = th + 1, *o, *p;

    if (th < t->nthr)
        return 0;
    o = realloc(t->open, (size_t)n * (t->nmark + 1) * sizeof(*o));
    if (!o)
        return -ENOMEM;
    t->open = o;
    memset(o + (size_t)t->nthr * (t->nmark + 1), 0,
           (size_t)(n - t->nthr) * (t->nmark + 1) * sizeof(*o));
    p = realloc(t->phase, n * sizeof(*p));
    if (!p)
        return -ENOMEM;
    t->phase = p;
    memset(p + t->nthr, 0, (n - t->nthr) * sizeof(*p));
    t->nthr = n;
    return 0;
}

static int marker(void *st, const struct ml_an_input *in, const struct ml_trace_rec *x)
{
    struct bw *b = st;
    struct ttr *t = &b->tr[b->ntr - 1];
    uint32_t *ob;
    int rc;

    (void)in;
    if ((x->kind != ML_EV_REGION_BEGIN && x->kind != ML_EV_REGION_END && x->kind != ML_EV_MARK) ||
        x->aux2 >= t->nmark)
        return 0;
    if ((rc = grow_open(t, x->thread)))
        return rc;
    ob = &t->open[(size_t)x->thread * (t->nmark + 1) + x->aux2];
    if (x->kind == ML_EV_REGION_BEGIN && !*ob) {
        if ((rc = add_band(t, x->thread, x->aux2, x->time)) < 0)
            return rc;
        *ob = (uint32_t)rc;
    } else if (x->kind == ML_EV_REGION_END && *ob) {
        t->bands[*ob - 1].t1 = x->time;
        *ob = 0;
    } else if (x->kind == ML_EV_MARK) {
        uint32_t *ph = &t->phase[x->thread];
        if (*ph)
            t->bands[*ph - 1].t1 = x->time;
        if ((rc = add_band(t, x->thread, x->aux2, x->time)) < 0)
            return rc;
        *ph = (uint32_t)rc;
    }
    return 0;
}

static int end(void *st, const struct ml_an_input *in)
{
    struct bw *b = st;
    struct ttr *t = &b->tr[b->ntr - 1];

    for (uint32_t i = 0; i < t->nbands; i++) {
        struct band *bd = &t->bands[i];
        const struct ml_trace_marker *mk = ml_trace_marker(in->trace, bd->marker);
        if (bd->t1 == UINT64_MAX)
            bd->t1 = in->t_last;
        if (asprintf(&bd->name, "%s:%s", mk && mk->kind == ML_MK_MARK ? "mark" : "region",
                     mk ? mk->name : "?") < 0) {
            bd->name = NULL;
            return -ENOMEM;
        }
    }
    free(t->open);
    free(t->phase);
    t->open = t->phase = NULL;
    t->nthr = 0;
    return 0;
}

/* ---- report: each row's series, sums over keys per thread, over threads per key, total ---- */

struct agg {
    uint32_t g, k; /* ML_ALL for sums */
    uint64_t *v;   /* [nbins][NV] */
};

struct out {
    struct bw *b;
    struct ml_tab *iv, *sum;
};

static void add_series(uint64_t *dst, const struct series *s)
{
    for (uint32_t i = 0; i < s->n; i++)
        for (int k = 0; k < NV; k++)
            dst[(size_t)(s->first + i) * NV + k] += s->v[(size_t)i * NV + k];
}

static int emit(struct out *o, int tr, uint32_t g, uint32_t k, const uint64_t *v)
{
    const struct ttr *t = &o->b->tr[tr];
    double sec = (double)t->interval_ns / 1e9, peak = 0, mpeak = 0;
    uint64_t rd = 0, wr = 0, mrd = 0, mwr = 0;
    uint32_t first = UINT32_MAX, last = 0;
    int rc = 0;

    for (uint32_t i = 0; i < t->nbins; i++) {
        const uint64_t *c = v + (size_t)i * NV;
        double gbs = (double)(c[RD] + c[WR]) / sec / 1e9,
               mgbs = (double)(c[MRD] + c[MWR]) / sec / 1e9;
        if (!c[RD] && !c[WR] && !c[MRD] && !c[MWR])
            continue;
        first = first == UINT32_MAX ? i : first;
        last = i;
        rd += c[RD];
        wr += c[WR];
        mrd += c[MRD];
        mwr += c[MWR];
        peak = gbs > peak ? gbs : peak;
        mpeak = mgbs > mpeak ? mgbs : mpeak;
    }
    for (uint32_t i = first; first != UINT32_MAX && i <= last && !rc; i++) {
        const uint64_t *c = v + (size_t)i * NV;
        rc |= ml_tab_who(o->iv, o->b->run, tr, g, k);
        rc |= ml_tab_u64(o->iv, (uint64_t)i * t->interval_ns);
        rc |= ml_tab_u64(o->iv, c[RD]);
        rc |= ml_tab_u64(o->iv, c[WR]);
        rc |= ml_tab_f64(o->iv, (double)(c[RD] + c[WR]) / sec / 1e9);
        if (o->b->memory) {
            rc |= ml_tab_u64(o->iv, c[MRD]);
            rc |= ml_tab_u64(o->iv, c[MWR]);
            rc |= ml_tab_f64(o->iv, (double)(c[MRD] + c[MWR]) / sec / 1e9);
        }
    }
    if (first == UINT32_MAX)
        first = last = 0;
    rc |= ml_tab_who(o->sum, o->b->run, tr, g, k);
    rc |= ml_tab_u64(o->sum, rd);
    rc |= ml_tab_u64(o->sum, wr);
    rc |= ml_tab_f64(o->sum, (double)(last - first + 1) * sec);
    rc |= ml_tab_f64(o->sum, (double)(rd + wr) / ((double)(last - first + 1) * sec) / 1e9);
    rc |= ml_tab_f64(o->sum, peak);
    if (o->b->memory) {
        rc |= ml_tab_u64(o->sum, mrd);
        rc |= ml_tab_u64(o->sum, mwr);
        rc |= ml_tab_f64(o->sum, (double)(mrd + mwr) / ((double)(last - first + 1) * sec) / 1e9);
        rc |= ml_tab_f64(o->sum, mpeak);
    }
    return rc ? -ENOMEM : 0;
}

/* Calls fn for every series of trace tr in report order (as ml_rows_visit). */
typedef int (*series_fn)(void *arg, int tr, uint32_t g, uint32_t k, const uint64_t *v);

static int each_series(struct bw *b, int tr, series_fn fn, void *arg)
{
    const struct ttr *t = &b->tr[tr];
    const struct ml_an_opts *o = ml_an_options(b->run);
    uint32_t nkeys = ml_an_nkeys(b->run);
    size_t cells = (size_t)t->nbins * NV;
    uint64_t *thr = calloc(cells + 1, sizeof(*thr)), *all = calloc(cells + 1, sizeof(*all));
    uint64_t **bykey = calloc(nkeys + 1, sizeof(*bykey));
    uint64_t *one = calloc(cells + 1, sizeof(*one));
    int rc = 0, any = 0;

    if (!thr || !all || !bykey || !one) {
        rc = -ENOMEM;
        goto out;
    }
    for (uint32_t g = 0; g < b->rows.nthr && !rc; g++) {
        int have = 0;
        if (ml_an_thread_trace(b->run, g) != tr)
            continue;
        memset(thr, 0, cells * sizeof(*thr));
        for (uint32_t k = 0; k < b->rows.mapcap[g] && !rc; k++) {
            const struct series *s;
            uint32_t i = b->rows.map[g][k];
            if (!i)
                continue;
            s = &b->ser[ml_rows_row(&b->rows, i - 1)[0] - 1];
            have = any = 1;
            add_series(thr, s);
            add_series(all, s);
            if (!bykey[k] && !(bykey[k] = calloc(cells + 1, sizeof(uint64_t)))) {
                rc = -ENOMEM;
                break;
            }
            add_series(bykey[k], s);
            if (o->by != ML_BY_THREAD) {
                memset(one, 0, cells * sizeof(*one));
                add_series(one, s);
                rc = fn(arg, tr, g, k, one);
            }
        }
        if (have && !rc)
            rc = fn(arg, tr, g, ML_ALL, thr);
    }
    for (uint32_t k = 0; k < nkeys && !rc && any && o->by != ML_BY_THREAD; k++)
        if (bykey[k])
            rc = fn(arg, tr, ML_ALL, k, bykey[k]);
    if (any && !rc)
        rc = fn(arg, tr, ML_ALL, ML_ALL, all);
out:
    for (uint32_t k = 0; bykey && k < nkeys; k++)
        free(bykey[k]);
    free(bykey);
    free(thr);
    free(all);
    free(one);
    return rc;
}

static int emit_fn(void *arg, int tr, uint32_t g, uint32_t k, const uint64_t *v)
{
    return emit(arg, tr, g, k, v);
}

static int build(struct bw *b, struct ml_tab **tabs)
{
    struct out o = {b, NULL, NULL};
    int rc = 0;

    tabs[0] = o.iv = ml_tab_new(
        "intervals", "bytes per interval",
        b->memory ? "pid:u thread tid:u marker start_ns:u bytes_read:u bytes_written:u "
                    "gb_per_s:f memory_bytes_read:u memory_bytes_written:u memory_gb_per_s:f"
                  : "pid:u thread tid:u marker start_ns:u bytes_read:u bytes_written:u gb_per_s:f");
    tabs[1] = o.sum = ml_tab_new(
        "summary",
        "bandwidth: bytes, active seconds (first to last busy interval), mean and "
        "peak GB/s of one interval",
        b->memory
            ? "pid:u thread tid:u marker bytes_read:u bytes_written:u seconds:f mean_gb_per_s:f "
              "peak_gb_per_s:f memory_bytes_read:u memory_bytes_written:u "
              "memory_mean_gb_per_s:f memory_peak_gb_per_s:f"
            : "pid:u thread tid:u marker bytes_read:u bytes_written:u seconds:f "
              "mean_gb_per_s:f peak_gb_per_s:f");
    if (!o.iv || !o.sum)
        return -ENOMEM;
    for (int tr = 0; tr < b->ntr && !rc; tr++)
        rc = each_series(b, tr, emit_fn, &o);
    return rc;
}

static int report(void *st, FILE *out, enum ml_an_format fmt)
{
    struct bw *b = st;
    struct ml_tab *tabs[2] = {0};
    char extra[256] = "";
    int rc = build(b, tabs);

    if (rc) {
        ml_tab_free(tabs[0]);
        ml_tab_free(tabs[1]);
        return rc;
    }
    if (fmt == ML_AN_TABLE) {
        struct ml_tab *t[2] = {tabs[1], tabs[0]};
        char iv[32];
        for (int i = 0; i < b->ntr; i++)
            fprintf(out, "bandwidth: pid %u, intervals of %s\n", b->tr[i].pid,
                    ml_fmt_interval(iv, sizeof(iv), b->tr[i].interval_ns));
        /* Intervals are many: the table shows the summary, --csv and --json every interval. */
        if (ml_tab_rows(tabs[0]) > 200) {
            fprintf(out, "(%zu intervals: --csv or --json lists them)\n", ml_tab_rows(tabs[0]));
            ml_tab_free(tabs[0]);
            return ml_tab_print(out, fmt, &tabs[1], 1, NULL);
        }
        return ml_tab_print(out, fmt, t, 2, NULL);
    }
    if (b->ntr)
        snprintf(extra, sizeof(extra), "\"interval_ns\": %llu",
                 (unsigned long long)b->tr[0].interval_ns);
    return ml_tab_print(out, fmt, tabs, 2, extra);
}

struct chart {
    struct bw *b;
    FILE *out;
};

static int chart_fn(void *arg, int tr, uint32_t g, uint32_t k, const uint64_t *v)
{
    struct chart *c = arg;
    struct bw *b = c->b;
    const struct ttr *t = &b->tr[tr];
    double sec = (double)t->interval_ns / 1e9;
    double *x, *y[4];
    const char *names[4] = {"read", "written", "memory read", "memory written"};
    struct ml_band *bands;
    uint32_t nb = 0;
    char title[200], iv[32];
    int rc = 0;

    if (g != ML_ALL || k != ML_ALL)
        return 0;
    x = calloc(t->nbins + 1, sizeof(*x));
    bands = calloc(t->nbands + 1, sizeof(*bands));
    for (int i = 0; i < 4; i++)
        y[i] = calloc(t->nbins + 1, sizeof(double));
    if (!x || !bands || !y[0] || !y[1] || !y[2] || !y[3])
        rc = -ENOMEM;
    for (uint32_t i = 0; !rc && i < t->nbins; i++) {
        x[i] = (double)i * (double)t->interval_ns / 1e6;
        for (int j = 0; j < 4; j++)
            y[j][i] = (double)v[(size_t)i * NV + j] / sec / 1e9;
    }
    for (uint32_t i = 0; !rc && i < t->nbands; i++) {
        const struct band *bd = &t->bands[i];
        bands[nb++] = (struct ml_band){((double)(bd->t0 - t->tick0)) * t->ns_per_tick / 1e6,
                                       ((double)(bd->t1 > bd->t0 ? bd->t1 - t->tick0 : 0)) *
                                           t->ns_per_tick / 1e6,
                                       bd->name ? bd->name : "?", bd->thread};
    }
    snprintf(title, sizeof(title),
             "Bandwidth of pid %u (GB/s per %s interval; bands: regions and "
             "mark phases per thread)",
             t->pid, ml_fmt_interval(iv, sizeof(iv), t->interval_ns));
    if (!rc)
        rc = ml_svg_series(c->out, title, "time (ms)", "GB/s", x, (const double *const *)y, names,
                           b->memory ? 4 : 2, t->nbins, bands, nb);
    free(x);
    free(bands);
    for (int i = 0; i < 4; i++)
        free(y[i]);
    return rc;
}

static int html(void *st, FILE *out)
{
    struct bw *b = st;
    struct chart c = {b, out};
    struct ml_tab *tabs[2] = {0};
    int rc = 0;

    fprintf(out, "<h2>bandwidth</h2>\n");
    for (int tr = 0; tr < b->ntr && !rc; tr++)
        rc = each_series(b, tr, chart_fn, &c);
    if (!rc && !(rc = build(b, tabs)))
        rc = ml_tab_html(out, tabs[1]);
    ml_tab_free(tabs[0]);
    ml_tab_free(tabs[1]);
    return rc;
}

static void bw_free(void *st)
{
    struct bw *b = st;

    if (!b)
        return;
    for (uint32_t i = 0; i < b->nser; i++)
        free(b->ser[i].v);
    free(b->ser);
    for (int i = 0; i < b->ntr; i++) {
        for (uint32_t k = 0; k < b->tr[i].nbands; k++)
            free(b->tr[i].bands[k].name);
        free(b->tr[i].bands);
        free(b->tr[i].open);
        free(b->tr[i].phase);
    }
    free(b->tr);
    if (b->memory)
        ml_csim_free(&b->sim);
    ml_rows_free(&b->rows);
    free(b);
}

const struct ml_analysis ml_an_bandwidth = {
    .name = "bandwidth",
    .summary = "bytes per interval (--interval 1us..1s) per thread and marker; --memory: also "
               "behind the caches",
    .start = start,
    .begin = begin,
    .record = record,
    .marker = marker,
    .end = end,
    .report = report,
    .html = html,
    .free = bw_free,
};
