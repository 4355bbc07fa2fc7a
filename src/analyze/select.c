/* Analysis 'select': dynamic MA/AIA of selective machine-code traces, and accuracy against ns. */
#include "analyze/analyze.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/*
 * Machine-code traces (--trace=asm) name each access site's basic block, a
 * marker of kind "block" whose name carries the block's static figures
 * ("<source>:<function>:<n> m=.. ma=.. aia=.. C=.."). Per trace this
 * analysis counts each block's executions (the records of its first site),
 * weights the static MA and AIA by them, and builds per-chunk access counts
 * (record weights at the chunk of the record's address, C from the markers).
 * Given a second trace of the same program and input built with mode=ns, it
 * compares them: the per-chunk count error sum |selective - ns| / sum ns, and
 * the measured accuracies: per block, the accesses whose chunk the selective
 * trace gives (MA: the same chunk; AIA: that chunk or a neighbour), as
 * matched counts of the two per-block chunk histograms. Both runs must place
 * memory alike (no address randomisation, the same allocations): the layout
 * agreement, the fraction of the selective trace's accesses at chunks the ns
 * trace touched at all, is 1 when they did (every recorded address is real).
 */

struct blk {
    char *key; /* "<source>:<function>:<n>" */
    uint32_t m;
    double ma, aia;
};

/* (block, chunk) -> accesses; block UINT32_MAX: the whole trace. */
struct cell {
    uint32_t b, used;
    uint64_t chunk, n;
};

struct map {
    struct cell *c;
    size_t cap, n;
};

struct tstate {
    char *path;
    uint64_t *exec; /* per block known when its records began */
    uint32_t nexec;
    struct map cells;
    uint64_t accesses, records;
    int has_blocks;
};

struct sel {
    struct blk *blk;
    uint32_t nblk;
    uint32_t chunk;
    struct tstate t[2];
    int ntraces;
    /* the trace being read */
    uint32_t *site_blk; /* global site -> block, or UINT32_MAX */
    uint8_t *site_first;
    uint32_t nsites;
};

static uint64_t hash(uint32_t b, uint64_t c)
{
    uint64_t h = (c ^ ((uint64_t)b << 40)) * 0x9e3779b97f4a7c15ull;

    return h ^ (h >> 29);
}

static struct cell *cell(struct map *m, uint32_t b, uint64_t c)
{
    size_t i;

    if (2 * (m->n + 1) > m->cap) {
        struct map g = {calloc(m->cap ? 2 * m->cap : 1024, sizeof(struct cell)),
                        m->cap ? 2 * m->cap : 1024, 0};

        if (!g.c)
            return NULL;
        for (size_t k = 0; k < m->cap; k++)
            if (m->c[k].used)
                *cell(&g, m->c[k].b, m->c[k].chunk) = m->c[k];
        free(m->c);
        *m = g;
    }
    for (i = hash(b, c) & (m->cap - 1); m->c[i].used; i = (i + 1) & (m->cap - 1))
        if (m->c[i].b == b && m->c[i].chunk == c)
            return &m->c[i];
    m->c[i] = (struct cell){b, 1, c, 0};
    m->n++;
    return &m->c[i];
}

static uint64_t get(struct map *m, uint32_t b, uint64_t c)
{
    if (!m->cap)
        return 0;
    for (size_t i = hash(b, c) & (m->cap - 1); m->c[i].used; i = (i + 1) & (m->cap - 1))
        if (m->c[i].b == b && m->c[i].chunk == c)
            return m->c[i].n;
    return 0;
}

static void *start(const struct ml_an_run *run)
{
    struct sel *s = calloc(1, sizeof(struct sel));

    (void)run;
    if (s)
        s->chunk = 4096;
    return s;
}

/* The block of a marker name, added when new; UINT32_MAX when it is no block marker. */
static uint32_t block_of(struct sel *s, const struct ml_trace_marker *mk)
{
    const char *sp, *p;
    size_t len;
    struct blk b = {0};

    if (mk->kind != ML_MK_BLOCK || !(sp = strchr(mk->name, ' ')))
        return UINT32_MAX;
    len = (size_t)(sp - mk->name);
    for (uint32_t i = 0; i < s->nblk; i++)
        if (strlen(s->blk[i].key) == len && !strncmp(s->blk[i].key, mk->name, len))
            return i;
    if ((p = strstr(sp, " m=")))
        b.m = (uint32_t)strtoul(p + 3, NULL, 10);
    if ((p = strstr(sp, " ma=")))
        b.ma = strtod(p + 4, NULL);
    if ((p = strstr(sp, " aia=")))
        b.aia = strtod(p + 5, NULL);
    if ((p = strstr(sp, " C=")) && strtoul(p + 3, NULL, 10))
        s->chunk = (uint32_t)strtoul(p + 3, NULL, 10);
    struct blk *v = realloc(s->blk, (s->nblk + 1) * sizeof(*v));

    if (!v || !(b.key = strndup(mk->name, len))) {
        if (v)
            s->blk = v;
        return UINT32_MAX - 1;
    }
    s->blk = v;
    v[s->nblk] = b;
    return s->nblk++;
}

static int begin(void *st, const struct ml_an_input *in)
{
    struct sel *s = st;
    struct tstate *t;
    uint32_t nm = ml_trace_nmarkers(in->trace), *mblk;

    if (s->ntraces == 2)
        return -E2BIG;
    t = &s->t[s->ntraces++];
    t->path = strdup(in->info->path);
    s->nsites = ml_trace_nsites(in->trace);
    free(s->site_blk);
    free(s->site_first);
    s->site_blk = malloc((s->nsites + 1) * sizeof(uint32_t));
    s->site_first = calloc(s->nsites + 1, 1);
    mblk = malloc((nm + 1) * sizeof(uint32_t));
    if (!t->path || !s->site_blk || !s->site_first || !mblk) {
        free(mblk);
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < nm; i++) {
        mblk[i] = block_of(s, ml_trace_marker(in->trace, i));
        if (mblk[i] == UINT32_MAX - 1) {
            free(mblk);
            return -ENOMEM;
        }
    }
    for (uint32_t i = 0; i < s->nsites; i++) {
        const struct ml_trace_site *site = ml_trace_site(in->trace, i);
        uint32_t b = site->marker < nm ? mblk[site->marker] : UINT32_MAX;

        s->site_blk[i] = ml_ev_is_access(site->kind) ? b : UINT32_MAX;
        /* A block's sites are consecutive: its first one runs once per execution. */
        s->site_first[i] = b != UINT32_MAX && (!i || s->site_blk[i - 1] != b);
        t->has_blocks |= b != UINT32_MAX;
    }
    free(mblk);
    return 0;
}

static int record(void *st, const struct ml_an_input *in, const struct ml_trace_rec *r, size_t n)
{
    struct sel *s = st;
    struct tstate *t = &s->t[s->ntraces - 1];

    (void)in;
    if (!t->exec) {
        t->exec = calloc(s->nblk + 1, sizeof(uint64_t));
        if (!t->exec)
            return -ENOMEM;
        t->nexec = s->nblk;
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t b;
        uint64_t c;
        struct cell *x, *y;

        if (!ml_ev_is_access(r[i].kind) || r[i].site >= s->nsites)
            continue;
        b = s->site_blk[r[i].site];
        c = r[i].addr / s->chunk;
        t->records++;
        t->accesses += r[i].weight;
        if (!(x = cell(&t->cells, UINT32_MAX, c)))
            return -ENOMEM;
        x->n += r[i].weight;
        if (b == UINT32_MAX)
            continue;
        if (s->site_first[r[i].site] && b < t->nexec)
            t->exec[b]++;
        if (!(y = cell(&t->cells, b, c)))
            return -ENOMEM;
        y->n += r[i].weight;
    }
    return 0;
}

/* Static MA and AIA weighted by executions: the dynamic estimates. */
static void dynamic(const struct sel *s, const struct tstate *t, double *ma, double *aia)
{
    double n = 0;

    *ma = *aia = 0;
    for (uint32_t b = 0; b < t->nexec; b++) {
        double w = (double)t->exec[b] * s->blk[b].m;

        n += w;
        *ma += w * s->blk[b].ma;
        *aia += w * s->blk[b].aia;
    }
    if (n > 0) {
        *ma /= n;
        *aia /= n;
    }
}

/* Matched accesses of the selective trace a against the ns trace e. */
static int compare(const struct sel *s, struct tstate *a, struct tstate *e, double *err,
                   double *mma, double *maia, double *layout)
{
    uint64_t diff = 0, total = 0, same = 0, near = 0, all = 0, agree = 0, sel = 0;
    struct map left = {0}, want = {0};

    for (size_t i = 0; i < e->cells.cap; i++) {
        const struct cell *x = &e->cells.c[i];

        if (!x->used)
            continue;
        uint64_t got = get(&a->cells, x->b, x->chunk), m = got < x->n ? got : x->n;

        if (x->b == UINT32_MAX) {
            diff += got > x->n ? got - x->n : x->n - got;
            total += x->n;
            continue;
        }
        all += x->n;
        same += m;
        struct cell *l = cell(&left, x->b, x->chunk), *w = cell(&want, x->b, x->chunk);

        if (!l || !w)
            goto nomem;
        l->n = got - m;
        w->n = x->n - m;
    }
    /* whole-trace cells only in the selective trace */
    for (size_t i = 0; i < a->cells.cap; i++) {
        const struct cell *x = &a->cells.c[i];

        if (x->used && x->b == UINT32_MAX) {
            int seen = get(&e->cells, UINT32_MAX, x->chunk) != 0;

            diff += seen ? 0 : x->n;
            agree += seen ? x->n : 0;
            sel += x->n;
        }
        if (x->used && x->b != UINT32_MAX && !get(&e->cells, x->b, x->chunk)) {
            struct cell *l = cell(&left, x->b, x->chunk);

            if (!l)
                goto nomem;
            l->n = x->n;
        }
    }
    /* within one chunk: what is left of the ns counts, from the neighbours' leftovers */
    near = same;
    for (size_t i = 0; i < want.cap; i++) {
        struct cell *w = &want.c[i];

        for (int d = -1; w->used && w->n && d <= 1; d += 2) {
            struct cell *l = cell(&left, w->b, w->chunk + d);
            uint64_t m;

            if (!l)
                goto nomem;
            m = l->n < w->n ? l->n : w->n;
            l->n -= m, w->n -= m, near += m;
        }
    }
    (void)s;
    *err = total ? (double)diff / total : 0;
    *mma = all ? (double)same / all : 0;
    *maia = all ? (double)near / all : 0;
    *layout = sel ? (double)agree / sel : 0;
    free(left.c);
    free(want.c);
    return 0;
nomem:
    free(left.c);
    free(want.c);
    return -ENOMEM;
}

static int report(void *st, FILE *out, enum ml_an_format fmt)
{
    struct sel *s = st;
    double ma[2], aia[2], err = 0, mma = 0, maia = 0, layout = 0;
    uint64_t blocks[2] = {0, 0};
    int rc;

    for (int i = 0; i < s->ntraces; i++) {
        dynamic(s, &s->t[i], &ma[i], &aia[i]);
        for (uint32_t b = 0; b < s->t[i].nexec; b++)
            blocks[i] += s->t[i].exec[b] != 0;
    }
    if (s->ntraces == 2 && (rc = compare(s, &s->t[0], &s->t[1], &err, &mma, &maia, &layout)))
        return rc;
    if (fmt == ML_AN_CSV) {
        fprintf(out, "trace,blocks,records,accesses,chunk,static_ma,static_aia,against,"
                     "chunk_error,measured_ma,measured_aia,layout\n");
        fprintf(out, "%s,%llu,%llu,%llu,%u,%.4f,%.4f,%s,", s->t[0].path,
                (unsigned long long)blocks[0], (unsigned long long)s->t[0].records,
                (unsigned long long)s->t[0].accesses, s->chunk, ma[0], aia[0],
                s->ntraces == 2 ? s->t[1].path : "");
        if (s->ntraces == 2)
            fprintf(out, "%.4f,%.4f,%.4f,%.4f\n", err, mma, maia, layout);
        else
            fprintf(out, ",,,\n");
    } else if (fmt == ML_AN_JSON) {
        fprintf(out,
                "{\"trace\": \"%s\", \"blocks\": %llu, \"records\": %llu, \"accesses\": %llu, "
                "\"chunk\": %u, \"static_ma\": %.4f, \"static_aia\": %.4f",
                s->t[0].path, (unsigned long long)blocks[0], (unsigned long long)s->t[0].records,
                (unsigned long long)s->t[0].accesses, s->chunk, ma[0], aia[0]);
        if (s->ntraces == 2)
            fprintf(out,
                    ", \"against\": \"%s\", \"against_accesses\": %llu, \"chunk_error\": %.4f, "
                    "\"measured_ma\": %.4f, \"measured_aia\": %.4f, \"layout\": %.4f",
                    s->t[1].path, (unsigned long long)s->t[1].accesses, err, mma, maia, layout);
        fprintf(out, "}\n");
    } else {
        if (!s->t[0].has_blocks)
            fprintf(out, "%s: no machine-code blocks (built without --trace=asm)\n", s->t[0].path);
        fprintf(out,
                "%s: %llu blocks executed, %llu records for %llu accesses, chunk %u B\n"
                "  static estimates weighted by block executions: MA %.4f AIA %.4f\n",
                s->t[0].path, (unsigned long long)blocks[0], (unsigned long long)s->t[0].records,
                (unsigned long long)s->t[0].accesses, s->chunk, ma[0], aia[0]);
        if (s->ntraces == 2)
            fprintf(out,
                    "  against %s (%llu accesses): per-chunk count error %.4f, "
                    "measured MA %.4f AIA %.4f; layout agreement %.4f%s\n",
                    s->t[1].path, (unsigned long long)s->t[1].accesses, err, mma, maia, layout,
                    layout < 0.999 ? " (the runs placed memory apart: figures not comparable)"
                                   : "");
    }
    return 0;
}

static void sel_free(void *st)
{
    struct sel *s = st;

    if (!s)
        return;
    for (uint32_t b = 0; b < s->nblk; b++)
        free(s->blk[b].key);
    for (int i = 0; i < 2; i++) {
        free(s->t[i].path);
        free(s->t[i].exec);
        free(s->t[i].cells.c);
    }
    free(s->blk);
    free(s->site_blk);
    free(s->site_first);
    free(s);
}

const struct ml_analysis ml_an_select = {
    .name = "select",
    .summary = "selective machine-code traces: MA/AIA by block executions; with a second, "
               "ns trace: per-chunk error, measured MA/AIA",
    .start = start,
    .begin = begin,
    .record = record,
    .report = report,
    .free = sel_free,
};
