/* Analysis 'export': the trace as a Perfetto (Chrome JSON) timeline and as Dinero IV input. */
#include "analyze/cachesim.h"
#include "analyze/util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/*
 * --perfetto FILE: Chrome JSON trace events. Per thread, regions,
 * functions and loops are slices (B/E) on the thread's track, kept nested:
 * an end that is not the innermost open slice closes the slices inside it
 * and reopens them; mark phases are slices on a track of their own; I/O
 * calls are instant events. Per process, counter tracks: bytes read and
 * written per interval (GB/s) and the l1 and llc miss ratios of the membus
 * cache filter. Times are CLOCK_MONOTONIC microseconds, so several
 * processes line up.
 *
 * --din FILE: Dinero IV's din format, one reference per line "label
 * address" (0 read, 1 write, hex address): a record of weight w is w
 * references, an RMW a read then a write, a range of several lines one
 * reference per line.
 */
struct slice {
    uint32_t marker;
    uint16_t kind; /* entry kind */
};

struct ethr {
    struct slice *open;
    uint32_t n, cap;
    int phase; /* a phase slice is open */
    uint32_t tid;
};

struct export
{
    const struct ml_an_run *run;
    struct ml_outfile pf, din;
    FILE *p, *d;
    int first; /* no event written yet */
    /* the trace being read */
    const struct ml_trace *t;
    uint64_t mono0;
    uint32_t pid;
    struct ethr *thr;
    uint32_t nthr;
    /* counters */
    struct ml_csim sim;
    uint64_t cs[ML_CS_N], rd, wr;
    uint64_t interval_ticks, bin_end, tick0;
    double ns_per_tick;
    char err[300];
};

static void *start(const struct ml_an_run *run)
{
    const struct ml_an_opts *o = ml_an_options(run);
    struct export *e = calloc(1, sizeof(*e));

    if (!e)
        return NULL;
    e->run = run;
    e->first = 1;
    e->pf.fd = e->din.fd = -1;
    if (ml_csim_init(&e->sim, o, 0))
        goto fail;
    if (o->perfetto) {
        if (ml_outfile_open(&e->pf, o->perfetto, o->force, e->err, sizeof(e->err)))
            goto fail;
        e->p = e->pf.f;
        fputs("{\"displayTimeUnit\": \"ns\", \"traceEvents\": [", e->p);
    }
    if (o->din) {
        if (ml_outfile_open(&e->din, o->din, o->force, e->err, sizeof(e->err)))
            goto fail;
        e->d = e->din.f;
    }
    if (!e->p && !e->d) {
        snprintf(e->err, sizeof(e->err), "export needs --perfetto FILE or --din FILE");
        goto fail;
    }
    return e;
fail:
    fprintf(stderr, "memlens: export: %s\n", e->err[0] ? e->err : "invalid cache geometry");
    if (e->pf.path)
        ml_outfile_abort(&e->pf);
    if (e->din.path)
        ml_outfile_abort(&e->din);
    ml_csim_free(&e->sim);
    free(e);
    errno = EINVAL;
    return NULL;
}

static double us(const struct export *e, uint64_t tick)
{
    return ((double)e->mono0 + ml_trace_ns(e->t, tick)) / 1e3;
}

static void sep(struct export *e)
{
    fputs(e->first ? "\n" : ",\n", e->p);
    e->first = 0;
}

static void meta_name(struct export *e, uint32_t tid, const char *what, const char *name)
{
    sep(e);
    fprintf(e->p,
            "{\"ph\": \"M\", \"pid\": %u, \"tid\": %u, \"name\": \"%s\", \"args\": {\"name\": ",
            e->pid, tid, what);
    ml_json_str(e->p, name);
    fputs("}}", e->p);
}

static int begin(void *st, const struct ml_an_input *in)
{
    struct export *e = st;
    const char *prog = "?";
    const struct ml_an_opts *o = ml_an_options(e->run);
    double span;

    for (uint32_t i = 0; i < e->nthr; i++)
        free(e->thr[i].open);
    free(e->thr);
    e->thr = NULL;
    e->nthr = 0;
    e->t = in->trace;
    e->mono0 = in->info->hdr.mono0;
    e->pid = in->info->hdr.pid;
    for (size_t i = 0; i + 1 < in->info->nmeta; i += 2) /* nmeta: strings */
        if (!strcmp(in->info->meta[i], "program"))
            prog = in->info->meta[i + 1];
    if (e->p) {
        char name[300];
        snprintf(name, sizeof(name), "%s (pid %u)", prog, e->pid);
        meta_name(e, e->pid, "process_name", name);
    }
    ml_csim_reset(&e->sim);
    memset(e->cs, 0, sizeof(e->cs));
    e->rd = e->wr = 0;
    e->ns_per_tick = ml_trace_ns(in->trace, in->t_first + 1000000) / 1e6 -
                     ml_trace_ns(in->trace, in->t_first) / 1e6;
    span = ml_trace_ns(in->trace, in->t_last) - ml_trace_ns(in->trace, in->t_first);
    if (!(span >= 0 && span < 1e18)) /* damaged clock pairs */
        span = 0;
    {
        uint64_t iv = o->interval_ns ? o->interval_ns : ml_auto_interval(span, 1000);
        e->interval_ticks = e->ns_per_tick > 0 ? (uint64_t)((double)iv / e->ns_per_tick) : 1;
    }
    if (!e->interval_ticks)
        e->interval_ticks = 1;
    e->tick0 = in->t_first;
    e->bin_end = e->tick0 + e->interval_ticks;
    return 0;
}

static struct ethr *thread_of(struct export *e, const struct ml_an_input *in, uint32_t i)
{
    if (i >= e->nthr) {
        struct ethr *v = realloc(e->thr, (size_t)(i + 1) * sizeof(*v));
        if (!v)
            return NULL;
        memset(v + e->nthr, 0, (size_t)(i + 1 - e->nthr) * sizeof(*v));
        e->thr = v;
        e->nthr = i + 1;
    }
    if (!e->thr[i].tid) {
        char name[64];
        e->thr[i].tid = ml_an_thread_tid(e->run, in->thread_base + i);
        if (!e->thr[i].tid)
            e->thr[i].tid = e->pid + 0x1000000u + i; /* no thread-start seen yet */
        if (e->p) {
            snprintf(name, sizeof(name), "thread %u (tid %u)", i, e->thr[i].tid);
            meta_name(e, e->thr[i].tid, "thread_name", name);
            snprintf(name, sizeof(name), "thread %u phases", i);
            meta_name(e, e->thr[i].tid | 0x40000000u, "thread_name", name);
        }
    }
    return &e->thr[i];
}

static void slice_ev(struct export *e, const char *ph, uint32_t tid, double ts,
                     const struct ml_an_input *in, uint32_t marker, unsigned kind)
{
    const struct ml_trace_marker *m = ml_trace_marker(in->trace, marker);
    static const char *const cat[] = {"?", "region", "mark", "function", "loop", "trace", "pages"};

    sep(e);
    fprintf(e->p, "{\"ph\": \"%s\", \"pid\": %u, \"tid\": %u, \"ts\": %.3f, \"name\": ", ph, e->pid,
            tid, ts);
    ml_json_str(e->p, m ? m->name : "?");
    fprintf(e->p, ", \"cat\": \"%s\"}", cat[m && m->kind < 7 ? m->kind : 0]);
    (void)kind;
}

static int push(struct ethr *t, uint32_t marker, uint16_t kind)
{
    if (t->n == t->cap) {
        uint32_t cap = t->cap ? 2 * t->cap : 16;
        struct slice *v = realloc(t->open, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        t->open = v;
        t->cap = cap;
    }
    t->open[t->n++] = (struct slice){marker, kind};
    return 0;
}

static int perfetto_marker(struct export *e, const struct ml_an_input *in,
                           const struct ml_trace_rec *x)
{
    struct ethr *t = thread_of(e, in, x->thread);
    double ts;
    uint16_t open_kind;

    if (!t)
        return -ENOMEM;
    ts = us(e, x->time);
    switch (x->kind) {
    case ML_EV_MARK:
        if (t->phase)
            slice_ev(e, "E", t->tid | 0x40000000u, ts, in, t->phase - 1, 0);
        slice_ev(e, "B", t->tid | 0x40000000u, ts, in, x->aux2, 0);
        t->phase = (int)x->aux2 + 1;
        return 0;
    case ML_EV_REGION_BEGIN:
    case ML_EV_FUNC_ENTRY:
    case ML_EV_LOOP_ENTRY:
        slice_ev(e, "B", t->tid, ts, in, x->aux2, x->kind);
        return push(t, x->aux2, x->kind);
    case ML_EV_REGION_END:
        open_kind = ML_EV_REGION_BEGIN;
        break;
    case ML_EV_FUNC_EXIT:
        open_kind = ML_EV_FUNC_ENTRY;
        break;
    case ML_EV_LOOP_EXIT:
        open_kind = ML_EV_LOOP_ENTRY;
        break;
    default:
        return 0;
    }
    for (uint32_t i = t->n; i-- > 0;) {
        if (t->open[i].marker != x->aux2 || t->open[i].kind != open_kind)
            continue;
        /* Close the slices inside it; a region end reopens them (they are still open). */
        for (uint32_t j = t->n; j-- > i;)
            slice_ev(e, "E", t->tid, ts, in, t->open[j].marker, 0);
        if (open_kind == ML_EV_REGION_BEGIN) {
            for (uint32_t j = i + 1; j < t->n; j++)
                slice_ev(e, "B", t->tid, ts, in, t->open[j].marker, 0);
            memmove(t->open + i, t->open + i + 1, (t->n - i - 1) * sizeof(*t->open));
            t->n--;
        } else {
            t->n = i;
        }
        break;
    }
    return 0;
}

static void counters(struct export *e, uint64_t tick)
{
    double t = us(e, tick), sec = (double)e->interval_ticks * e->ns_per_tick / 1e9;

    sep(e);
    fprintf(e->p,
            "{\"ph\": \"C\", \"pid\": %u, \"ts\": %.3f, \"name\": \"bandwidth (GB/s)\", "
            "\"args\": {\"read\": %.4f, \"written\": %.4f}}",
            e->pid, t, (double)e->rd / sec / 1e9, (double)e->wr / sec / 1e9);
    sep(e);
    fprintf(
        e->p,
        "{\"ph\": \"C\", \"pid\": %u, \"ts\": %.3f, \"name\": \"miss ratio\", \"args\": "
        "{\"l1\": %.4f, \"llc\": %.4f}}",
        e->pid, t,
        e->cs[ML_CS_ACCESSES] ? (double)e->cs[ML_CS_L1_MISS] / (double)e->cs[ML_CS_ACCESSES] : 0,
        e->cs[ML_CS_LLC_ACC] ? (double)e->cs[ML_CS_LLC_MISS] / (double)e->cs[ML_CS_LLC_ACC] : 0);
    memset(e->cs, 0, sizeof(e->cs));
    e->rd = e->wr = 0;
}

static void din_ref(FILE *d, int label, uint64_t addr, uint32_t w)
{
    for (uint32_t i = 0; i < w; i++)
        fprintf(d, "%d %" PRIx64 "\n", label, addr);
}

static int record(void *st, const struct ml_an_input *in, const struct ml_trace_rec *r, size_t n)
{
    struct export *e = st;
    int rc;

    for (size_t i = 0; i < n; i++) {
        const struct ml_trace_rec *x = &r[i];
        if (!ml_ev_is_access(x->kind)) {
            if (e->p && ml_ev_is_marker(x->kind) && (rc = perfetto_marker(e, in, x)))
                return rc;
            if (e->p && x->kind == ML_EV_IO) {
                struct ethr *t = thread_of(e, in, x->thread);
                if (!t)
                    return -ENOMEM;
                sep(e);
                fprintf(e->p,
                        "{\"ph\": \"i\", \"s\": \"t\", \"pid\": %u, \"tid\": %u, \"ts\": %.3f, "
                        "\"name\": \"%s\", \"cat\": \"io\", \"args\": {\"fd\": %u, \"kind\": "
                        "\"%s\", \"requested\": %u, \"transferred\": %" PRIu64 "}}",
                        e->pid, t->tid, us(e, x->time), ml_io_call_name(x->aux2 & 0xff),
                        x->aux2 >> 16, ml_fd_kind_name((x->aux2 >> 8) & 0xff), x->size, x->aux);
            }
            continue;
        }
        if (e->d) {
            uint64_t line = 1ull << e->sim.line_shift, a = x->addr,
                     last = (x->addr + (x->size ? x->size - 1 : 0)) & ~(line - 1);
            for (;;) {
                if (x->kind != ML_EV_STORE)
                    din_ref(e->d, 0, a, x->weight);
                if (x->kind != ML_EV_LOAD)
                    din_ref(e->d, 1, a, x->weight);
                if ((a & ~(line - 1)) >= last)
                    break;
                a = (a & ~(line - 1)) + line;
            }
        }
        if (e->p) {
            uint64_t bytes = (uint64_t)x->size * x->weight;
            if (!e->nthr || x->thread >= e->nthr || !e->thr[x->thread].tid)
                if (!thread_of(e, in, x->thread))
                    return -ENOMEM;
            while (x->time >= e->bin_end) {
                counters(e, e->bin_end - e->interval_ticks);
                e->bin_end += e->interval_ticks;
                if (x->time - e->bin_end > 1000 * e->interval_ticks) /* skip a long idle gap */
                    e->bin_end = x->time - x->time % e->interval_ticks + e->interval_ticks;
            }
            if (x->kind != ML_EV_STORE)
                e->rd += bytes;
            if (x->kind != ML_EV_LOAD)
                e->wr += bytes;
            if ((rc = ml_csim_access(&e->sim, x->thread, x->kind, x->addr, x->size, x->weight,
                                     e->cs)))
                return rc;
        }
    }
    if ((e->p && ferror(e->p)) || (e->d && ferror(e->d)))
        return -EIO;
    return 0;
}

static int end(void *st, const struct ml_an_input *in)
{
    struct export *e = st;
    uint64_t ts = in->t_last;

    if (!e->p)
        return 0;
    counters(e, e->bin_end - e->interval_ticks);
    /* Slices still open at the end of the trace end there. */
    for (uint32_t i = 0; i < e->nthr; i++) {
        struct ethr *t = &e->thr[i];
        while (t->n) {
            t->n--;
            slice_ev(e, "E", t->tid, us(e, ts), in, t->open[t->n].marker, 0);
        }
        if (t->phase)
            slice_ev(e, "E", t->tid | 0x40000000u, us(e, ts), in, t->phase - 1, 0);
        t->phase = 0;
    }
    return ferror(e->p) ? -EIO : 0;
}

static int report(void *st, FILE *out, enum ml_an_format fmt)
{
    struct export *e = st;
    const struct ml_an_opts *o = ml_an_options(e->run);
    int rc = 0;

    if (e->p) {
        fputs("\n]}\n", e->p);
        e->p = NULL;
        rc = ml_outfile_commit(&e->pf, o->force, e->err, sizeof(e->err));
        if (rc)
            fprintf(stderr, "memlens: export: %s\n", e->err);
        else if (fmt == ML_AN_TABLE)
            fprintf(out, "export: Perfetto trace in '%s' (open it in ui.perfetto.dev)\n",
                    o->perfetto);
    }
    if (e->d && !rc) {
        e->d = NULL;
        rc = ml_outfile_commit(&e->din, o->force, e->err, sizeof(e->err));
        if (rc)
            fprintf(stderr, "memlens: export: %s\n", e->err);
        else if (fmt == ML_AN_TABLE)
            fprintf(out, "export: Dinero IV input in '%s' (dineroIV -informat d < %s)\n", o->din,
                    o->din);
    }
    if (fmt == ML_AN_JSON) {
        fputs("{\"perfetto\": ", out);
        if (o->perfetto)
            ml_json_str(out, o->perfetto);
        else
            fputs("null", out);
        fputs(", \"din\": ", out);
        if (o->din)
            ml_json_str(out, o->din);
        else
            fputs("null", out);
        fputs("}\n", out);
    }
    return rc;
}

static void export_free(void *st)
{
    struct export *e = st;

    if (!e)
        return;
    if (e->pf.path)
        ml_outfile_abort(&e->pf);
    if (e->din.path)
        ml_outfile_abort(&e->din);
    for (uint32_t i = 0; i < e->nthr; i++)
        free(e->thr[i].open);
    free(e->thr);
    ml_csim_free(&e->sim);
    free(e);
}

const struct ml_analysis ml_an_export = {
    .name = "export",
    .summary = "--perfetto FILE: Chrome JSON timeline (markers as slices, bandwidth and miss "
               "ratios as counters); --din FILE: Dinero IV input",
    .start = start,
    .begin = begin,
    .record = record,
    .end = end,
    .report = report,
    .free = export_free,
};
