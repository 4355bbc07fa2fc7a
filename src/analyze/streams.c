/* Analysis 'streams': stream coverage in windows of 8..64 accesses (virtual, physical), per thread
 * and merged; strides. */
#include "analyze/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/*
 * A stream (one thread's accesses, or the process's merged in time order)
 * is seen as a sequence of line elements: consecutive accesses of the
 * stream to one line are one element (what a memory bus sees of them). An
 * element of line L is sequential within a window of W elements when one of
 * the W elements before it touched line L - 1 or L + 1, or touched L and
 * was itself sequential (so interleaved streams keep their status). The
 * coverage for W is the share of accesses (weights) in sequential elements.
 * Windows: 8, 16, 32, 64. Physical addresses come from the trace's frame
 * numbers (pfn records); accesses to pages without a known frame are left
 * out of the physical figures.
 */
#define NW   4
#define WMAX 64

/* Window bits allowed for an element j back: W >= j. */
static inline unsigned wmask(uint32_t j)
{
    return j <= 8 ? 0xf : j <= 16 ? 0xe : j <= 32 ? 0xc : 0x8;
}

struct win {
    uint64_t line[WMAX];
    uint8_t flags[WMAX];
    uint32_t head, n; /* next slot, elements held */
};

/* Classifies line L in window w (pushing a new element unless it repeats the last one). */
static inline unsigned classify(struct win *w, uint64_t L)
{
    unsigned mask = 0;

    if (w->n) {
        uint32_t last = (w->head + WMAX - 1) % WMAX;
        if (w->line[last] == L)
            return w->flags[last];
    }
    for (uint32_t j = 1; j <= w->n; j++) {
        uint32_t at = (w->head + WMAX - j) % WMAX;
        uint64_t e = w->line[at];
        unsigned allowed = wmask(j);
        if ((allowed & ~mask) == 0)
            break;
        if (e == L + 1 || e + 1 == L)
            mask |= allowed;
        else if (e == L)
            mask |= w->flags[at] & allowed;
    }
    w->line[w->head] = L;
    w->flags[w->head] = (uint8_t)mask;
    w->head = (w->head + 1) % WMAX;
    if (w->n < WMAX)
        w->n++;
    return mask;
}

/* Row: for each of 4 views (virtual thread, virtual merged, physical thread, physical merged)
 * accesses and covered per W. */
enum { VW = 1 + NW, WIDTH = 4 * VW };

struct sthr {
    struct win win[2]; /* virtual, physical */
    uint64_t *last;    /* per site: last address (0: none) */
};

#define MAX_STRIDES 65536

struct tstrides {
    uint32_t pid;
    struct ml_map map; /* stride -> count */
    uint64_t other, total;
};

struct streams {
    const struct ml_an_run *run;
    struct ml_rows rows;
    uint32_t line_shift, page_shift;
    struct win merged[2];
    struct sthr *thr;
    uint32_t nthr, nsites;
    struct ml_map frames; /* virtual page -> frame + 1 */
    uint64_t fpage, fval; /* last lookup */
    int pfn;
    struct tstrides *tr;
    int ntr;
};

static void *start(const struct ml_an_run *run)
{
    struct streams *s = calloc(1, sizeof(*s));

    if (!s)
        return NULL;
    s->run = run;
    ml_rows_init(&s->rows, WIDTH);
    while ((1u << s->line_shift) < ml_an_options(run)->line)
        s->line_shift++;
    return s;
}

static void drop_threads(struct streams *s)
{
    for (uint32_t i = 0; i < s->nthr; i++)
        free(s->thr[i].last);
    free(s->thr);
    s->thr = NULL;
    s->nthr = 0;
}

static int begin(void *st, const struct ml_an_input *in)
{
    struct streams *s = st;
    uint32_t page = in->info->hdr.page_size ? in->info->hdr.page_size : 4096;
    struct tstrides *t = realloc(s->tr, (size_t)(s->ntr + 1) * sizeof(*t));

    if (!t)
        return -ENOMEM;
    s->tr = t;
    t += s->ntr++;
    memset(t, 0, sizeof(*t));
    t->pid = in->info->hdr.pid;
    if (ml_map_init(&t->map, 256))
        return -ENOMEM;
    drop_threads(s);
    memset(s->merged, 0, sizeof(s->merged));
    ml_map_free(&s->frames);
    if (ml_map_init(&s->frames, 1024))
        return -ENOMEM;
    s->fpage = UINT64_MAX;
    s->page_shift = 0;
    while ((1u << s->page_shift) < page)
        s->page_shift++;
    s->nsites = ml_trace_nsites(in->trace);
    s->pfn = !!(in->info->hdr.flags & ML_TF_PFN);
    return 0;
}

static struct sthr *thread_of(struct streams *s, uint32_t i)
{
    if (i >= s->nthr) {
        struct sthr *v = realloc(s->thr, (size_t)(i + 1) * sizeof(*v));
        if (!v)
            return NULL;
        memset(v + s->nthr, 0, (size_t)(i + 1 - s->nthr) * sizeof(*v));
        s->thr = v;
        s->nthr = i + 1;
    }
    if (!s->thr[i].last && !(s->thr[i].last = calloc((size_t)s->nsites + 1, sizeof(uint64_t))))
        return NULL;
    return &s->thr[i];
}

static inline void add(uint64_t *v, unsigned mask, uint32_t w)
{
    v[0] += w;
    for (int k = 0; k < NW; k++)
        if (mask & (1u << k))
            v[1 + k] += w;
}

static int stride(struct streams *s, struct sthr *t, const struct ml_trace_rec *x)
{
    struct tstrides *ts = &s->tr[s->ntr - 1];
    uint64_t prev;

    if (x->site >= s->nsites)
        return 0;
    prev = t->last[x->site];
    t->last[x->site] = x->addr;
    if (!prev)
        return 0;
    ts->total++;
    {
        uint64_t d = x->addr - prev, *c = ml_map_find(&ts->map, d);
        if (c)
            ++*c;
        else if (ts->map.n >= MAX_STRIDES)
            ts->other++;
        else if ((c = ml_map_slot(&ts->map, d)))
            *c = 1;
        else
            return -ENOMEM;
    }
    return 0;
}

/* Physical line of a virtual line, or UINT64_MAX when its page's frame is unknown. */
static inline uint64_t phys(struct streams *s, uint64_t vline)
{
    uint64_t page = vline >> (s->page_shift - s->line_shift), *f;

    if (page != s->fpage) {
        f = ml_map_find(&s->frames, page);
        s->fpage = page;
        s->fval = f ? *f : 0;
    }
    if (!s->fval)
        return UINT64_MAX;
    return ((s->fval - 1) << (s->page_shift - s->line_shift)) |
           (vline & ((1ull << (s->page_shift - s->line_shift)) - 1));
}

static int record(void *st, const struct ml_an_input *in, const struct ml_trace_rec *r, size_t n)
{
    struct streams *s = st;
    uint32_t thr = UINT32_MAX;
    uint64_t *c = NULL;
    struct sthr *t = NULL;
    int rc;

    for (size_t i = 0; i < n; i++) {
        const struct ml_trace_rec *x = &r[i];
        uint64_t first, last;
        if (!ml_ev_is_access(x->kind)) {
            if (x->kind == ML_EV_PFN && x->aux) {
                uint64_t *f = ml_map_slot(&s->frames, x->addr >> s->page_shift);
                if (!f)
                    return -ENOMEM;
                *f = x->aux + 1;
                s->fpage = UINT64_MAX;
            } else if (x->kind == ML_EV_MUNMAP) {
                for (uint64_t p = x->addr >> s->page_shift;
                     x->aux && p <= (x->addr + x->aux - 1) >> s->page_shift && s->frames.n; p++)
                    ml_map_del(&s->frames, p);
                s->fpage = UINT64_MAX;
            }
            continue;
        }
        if (x->thread != thr) {
            thr = x->thread;
            if (!(c = ml_rows_at(&s->rows, in->thread_base + thr, ml_an_key(in, x))) ||
                !(t = thread_of(s, thr)))
                return -ENOMEM;
        }
        if ((rc = stride(s, t, x)))
            return rc;
        first = x->addr >> s->line_shift;
        last = (x->addr + (x->size ? x->size - 1 : 0)) >> s->line_shift;
        for (uint64_t l = first; l <= last; l++) {
            uint64_t p;
            add(c, classify(&t->win[0], l), x->weight);
            add(c + VW, classify(&s->merged[0], l), x->weight);
            if (s->pfn && (p = phys(s, l)) != UINT64_MAX) {
                add(c + 2 * VW, classify(&t->win[1], p), x->weight);
                add(c + 3 * VW, classify(&s->merged[1], p), x->weight);
            }
            if (l == UINT64_MAX)
                break;
        }
    }
    return 0;
}

struct rep {
    struct streams *s;
    struct ml_tab *t;
};

static int visit(void *arg, int tr, uint32_t g, uint32_t k, const uint64_t *c)
{
    struct rep *p = arg;
    static const char *const space[] = {"virtual", "virtual", "physical", "physical"},
                             *const stream[] = {"thread", "merged", "thread", "merged"};
    int rc = 0;

    for (int v = 0; v < 4 && !rc; v++) {
        const uint64_t *cv = c + v * VW;
        if (v >= 2 && !cv[0])
            continue;
        rc |= ml_tab_str(p->t, space[v]);
        rc |= ml_tab_str(p->t, stream[v]);
        rc |= ml_tab_who(p->t, p->s->run, tr, g, k);
        rc |= ml_tab_u64(p->t, cv[0]);
        for (int w = 0; w < NW; w++)
            rc |= ml_tab_f64(p->t, cv[0] ? (double)cv[1 + w] / (double)cv[0] : 0);
    }
    return rc ? -ENOMEM : 0;
}

struct sc {
    int64_t stride;
    uint64_t count;
};

static int by_count(const void *a, const void *b)
{
    const struct sc *x = a, *y = b;

    if (x->count != y->count)
        return x->count < y->count ? 1 : -1;
    return x->stride < y->stride ? -1 : x->stride > y->stride;
}

/* The most frequent strides of trace i, sorted; *n of them. */
static struct sc *top_strides(const struct tstrides *t, size_t *n, size_t max)
{
    struct sc *v = malloc((t->map.n + 1) * sizeof(*v));
    size_t k = 0;

    if (!v)
        return NULL;
    ml_map_each(&t->map, i)
    {
        v[k].stride = (int64_t)ml_map_key(&t->map, i);
        v[k++].count = t->map.vals[i];
    }
    qsort(v, k, sizeof(*v), by_count);
    *n = k < max ? k : max;
    return v;
}

static int strides_tab(struct streams *s, struct ml_tab *t)
{
    int rc = 0;

    for (int i = 0; i < s->ntr && !rc; i++) {
        const struct tstrides *ts = &s->tr[i];
        size_t n;
        uint64_t shown = 0;
        struct sc *v = top_strides(ts, &n, 32);
        if (!v)
            return -ENOMEM;
        for (size_t k = 0; k < n; k++) {
            rc |= ml_tab_u64(t, ts->pid);
            rc |= ml_tab_i64(t, v[k].stride);
            rc |= ml_tab_u64(t, v[k].count);
            rc |= ml_tab_f64(t, ts->total ? (double)v[k].count / (double)ts->total : 0);
            shown += v[k].count;
        }
        if (ts->total > shown) {
            rc |= ml_tab_u64(t, ts->pid);
            rc |= ml_tab_null(t);
            rc |= ml_tab_u64(t, ts->total - shown);
            rc |= ml_tab_f64(t, (double)(ts->total - shown) / (double)ts->total);
        }
        free(v);
    }
    return rc ? -ENOMEM : 0;
}

static int build(struct streams *s, struct ml_tab **tabs)
{
    struct rep p = {s, NULL};
    int rc;

    tabs[0] = p.t = ml_tab_new(
        "coverage",
        "stream coverage: share of accesses in sequential streams within windows of W line "
        "elements (thread: each thread's own stream; merged: the process's)",
        "space stream pid:u thread tid:u marker accesses:u coverage_w8:p coverage_w16:p "
        "coverage_w32:p coverage_w64:p");
    tabs[1] = ml_tab_new("strides",
                         "strides between consecutive records of one instruction (bytes; "
                         "the 32 most frequent, then all others)",
                         "pid:u stride:i count:u share:p");
    if (!tabs[0] || !tabs[1])
        return -ENOMEM;
    rc = ml_rows_visit(&s->rows, s->run, visit, &p);
    return rc ? rc : strides_tab(s, tabs[1]);
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

static int html(void *st, FILE *out)
{
    struct streams *s = st;
    struct ml_tab *tabs[2] = {0};
    int rc = build(s, tabs);

    if (!rc) {
        fprintf(out, "<h2>streams</h2>\n");
        rc = ml_tab_html(out, tabs[0]);
    }
    for (int i = 0; i < s->ntr && !rc; i++) {
        size_t n;
        struct sc *v = top_strides(&s->tr[i], &n, 24);
        char title[128], (*labels)[24] = v ? calloc(n + 1, sizeof(*labels)) : NULL;
        double *vals = v ? calloc(n + 1, sizeof(*vals)) : NULL;
        const char **lp = v ? calloc(n + 1, sizeof(*lp)) : NULL;
        if (!v || !labels || !vals || !lp)
            rc = -ENOMEM;
        for (size_t k = 0; !rc && k < n; k++) {
            snprintf(labels[k], sizeof(labels[k]), "%lld", (long long)v[k].stride);
            lp[k] = labels[k];
            vals[k] = (double)v[k].count;
        }
        snprintf(title, sizeof(title), "Strides of pid %u (records of one instruction)",
                 s->tr[i].pid);
        if (!rc)
            rc = ml_svg_bars(out, title, "stride (bytes)", "records", lp, vals, n);
        free(v);
        free(labels);
        free(vals);
        free(lp);
    }
    ml_tab_free(tabs[0]);
    ml_tab_free(tabs[1]);
    return rc;
}

static void streams_free(void *st)
{
    struct streams *s = st;

    if (!s)
        return;
    drop_threads(s);
    ml_map_free(&s->frames);
    for (int i = 0; i < s->ntr; i++)
        ml_map_free(&s->tr[i].map);
    free(s->tr);
    ml_rows_free(&s->rows);
    free(s);
}

const struct ml_analysis ml_an_streams = {
    .name = "streams",
    .summary = "stream coverage in windows of 8, 16, 32, 64 accesses (virtual and physical, per "
               "thread and merged) and strides",
    .start = start,
    .begin = begin,
    .record = record,
    .end = NULL,
    .report = report,
    .html = html,
    .free = streams_free,
};
