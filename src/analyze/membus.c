/* Analysis 'membus': what memory sees behind the caches (fills and write-backs), per level, thread
 * and marker. */
#include "analyze/cachesim.h"
#include "analyze/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct membus {
    const struct ml_an_run *run;
    struct ml_csim sim;
    struct ml_rows rows;
    /* --filter: the trace of what memory sees */
    struct ml_outfile of;
    struct ml_trace_writer *w;
    uint32_t site_fill, site_wb;
    int ntr;
    char err[300];
};

static void *start(const struct ml_an_run *run)
{
    const struct ml_an_opts *o = ml_an_options(run);
    struct membus *m = calloc(1, sizeof(*m));

    if (!m)
        return NULL;
    m->run = run;
    m->of.fd = -1;
    if (ml_csim_init(&m->sim, o, o->filter != NULL) || ml_rows_init(&m->rows, ML_CS_N)) {
        ml_csim_free(&m->sim);
        free(m);
        errno = EINVAL;
        return NULL;
    }
    /* --filter writes what memory sees at each record's time: run every access to the end */
    m->sim.batch = o->filter == NULL;
    return m;
}

/* Output name for trace i: the --filter name, or with several traces "<name>.<pid>.mlt". */
static char *filter_name(const char *base, const struct ml_an_input *in, int several)
{
    char *p;
    size_t len = strlen(base);

    if (!several)
        return strdup(base);
    if (len > 4 && !strcmp(base + len - 4, ".mlt"))
        len -= 4;
    if (asprintf(&p, "%.*s.%u.mlt", (int)len, base, in->info->hdr.pid) < 0)
        return NULL;
    return p;
}

/* Opens the filtered trace: the input's sites and markers (same ids), then a fill and a write-back
 * site. */
static int open_filter(struct membus *m, const struct ml_an_input *in)
{
    const struct ml_an_opts *o = ml_an_options(m->run);
    uint32_t ns = ml_trace_nsites(in->trace), nm = ml_trace_nmarkers(in->trace);
    struct ml_ev_site *sites = calloc((size_t)ns + 2, sizeof(*sites));
    struct ml_ev_marker *marks = calloc((size_t)nm + 1, sizeof(*marks));
    const char **meta = calloc(in->info->nmeta + 2, sizeof(*meta)); /* nmeta: strings */
    struct ml_trace_header h = in->info->hdr;
    char geo[256], *name = NULL;
    int rc = -ENOMEM;

    if (!sites || !marks || !meta)
        goto out;
    for (uint32_t i = 0; i < ns; i++) {
        const struct ml_trace_site *s = ml_trace_site(in->trace, i);
        sites[i] = (struct ml_ev_site){s->kind,   s->size, s->weight, s->marker, s->line,
                                       s->column, s->func, s->file,   s->text};
    }
    m->site_fill = ns;
    m->site_wb = ns + 1;
    sites[ns] = (struct ml_ev_site){ML_EV_LOAD, o->line, 1, ML_EV_NOID, 0, 0, "", "", "fill"};
    sites[ns + 1] =
        (struct ml_ev_site){ML_EV_STORE, o->line, 1, ML_EV_NOID, 0, 0, "", "", "write-back"};
    for (uint32_t i = 0; i < nm; i++) {
        const struct ml_trace_marker *k = ml_trace_marker(in->trace, i);
        marks[i] = (struct ml_ev_marker){k->kind, k->line, k->name, k->file, k->func};
    }
    for (size_t i = 0; i + 1 < in->info->nmeta; i += 2) {
        meta[i] = in->info->meta[i];
        meta[i + 1] = in->info->meta[i + 1];
    }
    meta[in->info->nmeta & ~(size_t)1] = "filter";
    meta[(in->info->nmeta & ~(size_t)1) + 1] = ml_csim_describe(&m->sim, geo, sizeof(geo));
    h.flags &= ~ML_TF_COLLAPSE;
    name = filter_name(o->filter, in, m->ntr > 1);
    if (!name)
        goto out;
    if ((rc = ml_outfile_open(&m->of, name, o->force, m->err, sizeof(m->err))))
        goto out;
    rc = ml_tw_open(&m->w, m->of.fd, &h, sites, ns + 2, marks, nm, (const char *const *)meta,
                    in->info->nmeta / 2 + 1, 1);
    if (rc)
        snprintf(m->err, sizeof(m->err), "cannot write '%s': %s", name, strerror(-rc));
out:
    free(name);
    free(sites);
    free(marks);
    free(meta);
    return rc;
}

static int begin(void *st, const struct ml_an_input *in)
{
    struct membus *m = st;

    ml_csim_reset(&m->sim);
    m->ntr = in->ninputs;
    if (ml_an_options(m->run)->filter) {
        int rc = open_filter(m, in);
        if (rc) {
            fprintf(stderr, "memlens: membus: %s\n", m->err);
            return rc;
        }
    }
    return 0;
}

/* Passes a marker or event on to the filtered trace, at its time. */
static int pass_on(struct membus *m, const struct ml_an_input *in, const struct ml_trace_rec *x)
{
    uint32_t tid = ml_an_thread_tid(m->run, in->thread_base + x->thread);

    if (ml_ev_is_marker(x->kind))
        return ml_tw_put(m->w, x->thread, tid, x->site, 0, 0, 1, x->time, 1);
    if (x->kind >= ML_EV_THREAD_START && x->kind < ML_EV_NKINDS) {
        uint64_t f[5] = {x->addr, x->aux, x->size, x->aux2,
                         x->site == ML_EV_NOID ? 0 : (uint64_t)x->site + 1};
        return ml_tw_event(m->w, x->thread, tid, x->kind, x->time, f, 5);
    }
    return 0;
}

static int drain(struct membus *m, const struct ml_an_input *in, const struct ml_trace_rec *x)
{
    uint32_t tid = ml_an_thread_tid(m->run, in->thread_base + x->thread),
             line = 1u << m->sim.line_shift;
    int rc = 0;

    ml_tw_clock(m->w, x->time, in->info->hdr.mono0 + (uint64_t)ml_trace_ns(in->trace, x->time));
    for (uint32_t i = 0; i < m->sim.nmem && !rc; i++)
        rc = ml_tw_put(m->w, x->thread, tid, m->sim.mem[i].write ? m->site_wb : m->site_fill,
                       m->sim.mem[i].line << m->sim.line_shift, line, 1, x->time, 1);
    m->sim.nmem = 0;
    return rc;
}

static int record(void *st, const struct ml_an_input *in, const struct ml_trace_rec *r, size_t n)
{
    struct membus *m = st;
    uint32_t thr = UINT32_MAX;
    uint64_t *c = NULL;
    int rc;

    for (size_t i = 0; i < n; i++) {
        const struct ml_trace_rec *x = &r[i];
        if (!ml_ev_is_access(x->kind)) {
            if (m->w && (rc = pass_on(m, in, x)))
                return rc;
            continue;
        }
        if (x->thread != thr) {
            thr = x->thread;
            if (!(c = ml_rows_at(&m->rows, in->thread_base + thr, ml_an_key(in, x))))
                return -ENOMEM;
        }
        if ((rc = ml_csim_access(&m->sim, x->thread, x->kind, x->addr, x->size, x->weight, c)))
            return rc;
        if (m->sim.nmem && (rc = drain(m, in, x)))
            return rc;
    }
    return ml_csim_flush(&m->sim);
}

static int end(void *st, const struct ml_an_input *in)
{
    struct membus *m = st;
    const struct ml_an_opts *o = ml_an_options(m->run);
    struct ml_trace_end e;
    int rc;

    if (!m->w)
        return 0;
    memset(&e, 0, sizeof(e));
    e = in->info->end;
    e.records = 0;
    e.nthreads = 0;
    if (!in->info->ended)
        e.reason = ML_END_SIGNAL; /* the input was cut short: say it ended abnormally */
    rc = ml_tw_finish(m->w, &e);
    m->w = NULL;
    if (rc) {
        snprintf(m->err, sizeof(m->err), "cannot write '%s': %s", m->of.path, strerror(-rc));
        ml_outfile_abort(&m->of);
    } else {
        rc = ml_outfile_commit(&m->of, o->force, m->err, sizeof(m->err));
    }
    if (rc)
        fprintf(stderr, "memlens: membus: %s\n", m->err);
    return rc;
}

struct rep {
    struct membus *m;
    struct ml_tab *t;
    uint32_t line;
};

static int level_row(struct rep *p, int tr, uint32_t g, uint32_t k, const char *level, uint64_t acc,
                     const uint64_t *miss, uint64_t in_lines, uint64_t out_lines)
{
    int rc = ml_tab_str(p->t, level);

    rc |= ml_tab_who(p->t, p->m->run, tr, g, k);
    rc |= ml_tab_u64(p->t, acc);
    if (miss) {
        rc |= ml_tab_u64(p->t, *miss);
        rc |= ml_tab_f64(p->t, acc ? (double)*miss / (double)acc : 0);
    } else {
        rc |= ml_tab_null(p->t);
        rc |= ml_tab_null(p->t);
    }
    rc |= ml_tab_u64(p->t, in_lines * p->line);
    rc |= ml_tab_u64(p->t, out_lines * p->line);
    return rc ? -ENOMEM : 0;
}

static int visit(void *arg, int tr, uint32_t g, uint32_t k, const uint64_t *c)
{
    struct rep *p = arg;
    const struct ml_csim *s = &p->m->sim;
    int rc = level_row(p, tr, g, k, "l1", c[ML_CS_ACCESSES], &c[ML_CS_L1_MISS], c[ML_CS_L1_MISS],
                       c[ML_CS_L1_WB]);

    if (!rc && s->geom[1].size)
        rc = level_row(p, tr, g, k, "l2", c[ML_CS_L2_ACC], &c[ML_CS_L2_MISS], c[ML_CS_L2_MISS],
                       c[ML_CS_L2_WB]);
    if (!rc && s->geom[2].size)
        rc = level_row(p, tr, g, k, "llc", c[ML_CS_LLC_ACC], &c[ML_CS_LLC_MISS], c[ML_CS_LLC_MISS],
                       c[ML_CS_LLC_WB]);
    if (!rc)
        rc = level_row(p, tr, g, k, "memory", c[ML_CS_MEM_RD] + c[ML_CS_MEM_WR], NULL,
                       c[ML_CS_MEM_RD], c[ML_CS_MEM_WR]);
    return rc;
}

static int report(void *st, FILE *out, enum ml_an_format fmt)
{
    struct membus *m = st;
    char geo[256], title[400], extra[400];
    struct rep p = {m, NULL, 1u << m->sim.line_shift};
    int rc;

    ml_csim_describe(&m->sim, geo, sizeof(geo));
    snprintf(title, sizeof(title),
             "membus: %s; per level: accesses reaching it, misses, bytes it filled from and "
             "wrote back to the level below (memory: what DRAM sees)",
             geo);
    p.t = ml_tab_new("levels", title,
                     "level pid:u thread tid:u marker accesses:u misses:u miss_ratio:p "
                     "bytes_from_memory:u bytes_to_memory:u");
    if (!p.t)
        return -ENOMEM;
    rc = ml_rows_visit(&m->rows, m->run, visit, &p);
    if (rc) {
        ml_tab_free(p.t);
        return rc;
    }
    extra[0] = 0;
    if (fmt == ML_AN_JSON) {
        FILE *f = fmemopen(extra, sizeof(extra), "w");
        if (f) {
            fputs("\"geometry\": ", f);
            ml_json_str(f, geo);
            fclose(f);
        }
    }
    return ml_tab_print(out, fmt, &p.t, 1, extra);
}

static int html(void *st, FILE *out)
{
    struct membus *m = st;
    char geo[256];
    struct rep p = {m, NULL, 1u << m->sim.line_shift};
    int rc;

    p.t = ml_tab_new("levels", "",
                     "level pid:u thread tid:u marker accesses:u misses:u miss_ratio:p "
                     "bytes_from_memory:u bytes_to_memory:u");
    if (!p.t)
        return -ENOMEM;
    rc = ml_rows_visit(&m->rows, m->run, visit, &p);
    if (!rc) {
        fprintf(out, "<h2>membus: what memory sees</h2>\n<p>%s</p>\n",
                ml_csim_describe(&m->sim, geo, sizeof(geo)));
        rc = ml_tab_html(out, p.t);
    }
    ml_tab_free(p.t);
    return rc;
}

static void membus_free(void *st)
{
    struct membus *m = st;

    if (!m)
        return;
    ml_tw_free(m->w);
    if (m->of.path)
        ml_outfile_abort(&m->of);
    ml_csim_free(&m->sim);
    ml_rows_free(&m->rows);
    free(m);
}

const struct ml_analysis ml_an_membus = {
    .name = "membus",
    .summary = "cache filter (private l1/l2, shared llc, LRU): misses and bytes per level, "
               "what memory sees; --filter writes it as a trace",
    .start = start,
    .begin = begin,
    .record = record,
    .end = end,
    .report = report,
    .html = html,
    .free = membus_free,
};
