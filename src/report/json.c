/* JSON report renderer: every profile with its regions, threads, not-seen calls and units. */
#include "report/report.h"
#include "format/json.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

/* JSON has no NaN or infinity: unknown values are null. */
static void json_num(FILE *f, double x)
{
    if (x >= 0)
        fprintf(f, "%.9g", x);
    else
        fputs("null", f);
}

/* The tid of thread t, or null in a merged profile (its rows sum several processes). */
static void json_tid(FILE *f, const struct ml_profile *p, uint64_t t)
{
    if (p->merged)
        fputs("null", f);
    else
        fprintf(f, "%u", p->threads[t].tid);
}

/* A count, or null when unknown (known = 0). */
static void json_count(FILE *f, int known, uint64_t v)
{
    if (known)
        fprintf(f, "%" PRIu64, v);
    else
        fputs("null", f);
}

/* Sampling, overhead corrections, event sums, exact bytes and note of one row (docs/report.md). */
static void json_more(FILE *f, const struct ml_report *r, uint64_t reg, const struct ml_rstats *s)
{
    char note[256];
    uint64_t hz = r->prof->hdr.tsc_hz;
    double cf = ml_rstats_ticks_seconds(s, s->cf_ticks, hz);
    double cal = ml_rstats_ticks_seconds(s, s->cal_ticks, hz);
    int sc = s->scale >= 0;

    fprintf(f, ", \"measured\": %" PRIu64 ", \"scale\": ", s->measured);
    json_num(f, s->scale);
    fputs(", \"estimated\": {\"seconds\": ", f);
    json_num(f, ml_rstats_ticks_seconds(s, s->est_ticks, hz));
    fputs(", \"instructions\": ", f);
    json_count(f, sc, ml_rstats_est(s, s->v[ML_F_INSTR]));
    fputs(", \"loads\": ", f);
    json_count(f, sc, ml_rstats_est(s, s->v[ML_F_LOADS]));
    fputs(", \"stores\": ", f);
    json_count(f, sc, ml_rstats_est(s, s->v[ML_F_STORES]));
    fputs(", \"bytes_read\": ", f);
    json_count(f, sc, ml_rstats_est(s, ml_rstats_read(s)));
    fputs(", \"bytes_written\": ", f);
    json_count(f, sc, ml_rstats_est(s, ml_rstats_written(s)));
    fprintf(f, "}, \"correction\": {\"increments\": %" PRIu64 ", \"cf\": ", s->v[ML_F_INCR]);
    json_num(f, s->cf);
    fputs(", \"cf_seconds\": ", f);
    json_num(f, cf);
    fputs(", \"calibrated_seconds\": ", f);
    json_num(f, cal);
    fputs(", \"read_gbs_cf\": ", f);
    json_num(f, ml_report_gbs(ml_rstats_read(s), cf));
    fputs(", \"write_gbs_cf\": ", f);
    json_num(f, ml_report_gbs(ml_rstats_written(s), cf));
    fputs(", \"read_gbs_calibrated\": ", f);
    json_num(f, ml_report_gbs(ml_rstats_read(s), cal));
    fputs(", \"write_gbs_calibrated\": ", f);
    json_num(f, ml_report_gbs(ml_rstats_written(s), cal));
    fputs(", \"notseen_share\": ", f);
    json_num(f, ml_rstats_notseen_share(s));
    fprintf(f, ", \"alloc_bytes\": %" PRIu64 ", \"frees\": %" PRIu64 ", \"computed_goto\": %s",
            s->alloc_bytes, s->frees, (s->rflags & ML_RFLAG_NO_PLAIN) ? "true" : "false");
    fputs("}, \"events\": {", f);
    for (uint32_t e = 0; e < r->prof->nevents; e++) {
        fputs(e ? ", " : "", f);
        ml_json_str(f, r->prof->event_names[e]);
        fprintf(f, ": %" PRIu64, s->ev[e]);
    }
    fputs("}, \"exact\": ", f);
    if (r->prof->exact)
        fprintf(
            f,
            "{\"bytes_read\": {\"heap\": %" PRIu64 ", \"global\": %" PRIu64 ", \"stack\": %" PRIu64
            ", \"total\": %" PRIu64 "}, \"bytes_written\": {\"heap\": %" PRIu64
            ", \"global\": %" PRIu64 ", \"stack\": %" PRIu64 ", \"total\": %" PRIu64 "}}",
            s->x[ML_C_RD_HEAP], s->x[ML_C_RD_GLOBAL], s->x[ML_C_RD_STACK], ml_rstats_xread(s),
            s->x[ML_C_WR_HEAP], s->x[ML_C_WR_GLOBAL], s->x[ML_C_WR_STACK], ml_rstats_xwritten(s));
    else
        fputs("null", f);
    fputs(", \"note\": ", f);
    if (ml_report_note(r, reg, s, note, sizeof(note)))
        ml_json_str(f, note);
    else
        fputs("null", f);
}

static void json_stats(FILE *f, const struct ml_report *r, uint64_t reg, const struct ml_rstats *s)
{
    double sec = ml_rstats_seconds(s, r->prof->hdr.tsc_hz);

    fprintf(f, "\"executions\": %" PRIu64 ", \"ticks\": ", s->entries);
    if (s->timed)
        fprintf(f, "%" PRIu64, s->ticks);
    else
        fputs("null", f);
    fputs(", \"seconds\": ", f);
    json_num(f, sec);
    fprintf(f, ", \"time_borrowed\": %s, \"instructions\": {", s->borrowed ? "true" : "false");
    for (int k = ML_F_I_INT; k <= ML_F_INSTR; k++)
        fprintf(f, "%s\"%s\": %" PRIu64, k == ML_F_I_INT ? "" : ", ",
                k == ML_F_INSTR ? "total" : ml_fact_names[k], s->v[k]);
    fprintf(f, "}, \"loads\": %" PRIu64 ", \"stores\": %" PRIu64, s->v[ML_F_LOADS],
            s->v[ML_F_STORES]);
    fprintf(f,
            ", \"bytes_read\": {\"heap\": %" PRIu64 ", \"global\": %" PRIu64 ", \"stack\": %" PRIu64
            ", \"total\": %" PRIu64 "}",
            s->v[ML_F_RD_HEAP], s->v[ML_F_RD_GLOBAL], s->v[ML_F_RD_STACK], ml_rstats_read(s));
    fprintf(f,
            ", \"bytes_written\": {\"heap\": %" PRIu64 ", \"global\": %" PRIu64
            ", \"stack\": %" PRIu64 ", \"total\": %" PRIu64 "}",
            s->v[ML_F_WR_HEAP], s->v[ML_F_WR_GLOBAL], s->v[ML_F_WR_STACK], ml_rstats_written(s));
    fputs(", \"read_gbs\": ", f);
    json_num(f, ml_report_gbs(ml_rstats_read(s), sec));
    fputs(", \"write_gbs\": ", f);
    json_num(f, ml_report_gbs(ml_rstats_written(s), sec));
    fprintf(f, ", \"counters\": %" PRIu64 ", \"increments\": %" PRIu64, s->counters,
            s->v[ML_F_INCR]);
    json_more(f, r, reg, s);
}

static void json_region(FILE *f, const struct ml_report *r, uint64_t reg,
                        const struct ml_report_opts *o)
{
    char buf[ML_REPORT_LONG];
    int first = 1;

    fprintf(f, "{\"id\": %" PRIu64 ", \"name\": ", reg);
    ml_json_str(f, ml_profile_str(r->prof, r->prof->regions[reg]));
    fputs(", \"total\": {", f);
    json_stats(f, r, reg, &r->totals[reg]);
    fputs("},\n       \"threads\": [", f);
    for (uint64_t t = 0; t < r->nthreads && o->rows != ML_REPORT_TOTALS; t++) {
        const struct ml_rstats *c = ml_report_cell(r, reg, t);
        if (!c->active)
            continue;
        fprintf(f, "%s\n        {\"index\": %u, \"tid\": ", first ? "" : ",",
                r->prof->threads[t].index);
        json_tid(f, r->prof, t);
        fputs(", ", f);
        if (r->prof->threads[t].exited)
            fprintf(f, "\"exited\": %" PRIu64 ", ", r->prof->threads[t].exited);
        json_stats(f, r, reg, c);
        fputc('}', f);
        first = 0;
    }
    fputs("],\n       \"not_seen\": [", f);
    first = 1;
    for (uint64_t i = 0; i < r->ncallees; i++) {
        const struct ml_report_callee *c = &r->callees[i];
        if (c->region != reg)
            continue;
        fprintf(f, "%s\n        {\"callee\": ", first ? "" : ",");
        ml_json_str(f, ml_report_demangle(c->name, buf, sizeof(buf)));
        fputs(", \"symbol\": ", f);
        ml_json_str(f, c->name);
        fprintf(f, ", \"calls\": %" PRIu64 ", \"per_thread\": [", c->total);
        for (uint64_t t = 0; t < r->nthreads; t++)
            fprintf(f, "%s%" PRIu64, t ? ", " : "", c->calls[t]);
        fputs("]}", f);
        first = 0;
    }
    fputs("]}", f);
}

static void json_units(FILE *f, const struct ml_report *r, const struct ml_report_opts *o)
{
    const struct ml_profile *p = r->prof;
    char buf[ML_REPORT_LONG];
    int first = 1;

    for (uint64_t ui = 0; ui < p->nunits; ui++) {
        const struct ml_prof_unit *u = &p->units[ui];
        uint32_t n;
        const uint32_t *ids = ml_profile_regset(p, u->regset, &n);
        int shown = !o->nregion_names && !r->share[ui];

        for (uint32_t k = 0; k < n && !r->share[ui]; k++)
            shown |= ml_report_region_shown(r, ids[k], o);
        if (!shown)
            continue;
        fprintf(f, "%s\n      {\"unit\": %" PRIu64 ", \"kind\": \"%s\", \"regions\": [",
                first ? "" : ",", ui, u->kind == ML_UNIT_BYTES ? "bytes" : "block");
        for (uint32_t k = 0; k < n; k++)
            fprintf(f, "%s%u", k ? ", " : "", ids[k]);
        fputs("], \"module\": ", f);
        ml_json_str(f,
                    u->module < p->nmodules ? ml_profile_str(p, p->modules[u->module].name) : "");
        fputs(", \"function\": ", f);
        ml_json_str(f, ml_report_demangle(ml_profile_str(p, u->func), buf, sizeof(buf)));
        fputs(", \"symbol\": ", f);
        ml_json_str(f, ml_profile_str(p, u->func));
        fputs(", \"file\": ", f);
        ml_json_str(f, ml_profile_str(p, u->file));
        fprintf(f, ", \"line\": %u, \"count\": %" PRIu64 ", \"facts\": {", u->line,
                r->unit_counts[ui]);
        for (int k = 0; k < ML_NFACTS; k++)
            fprintf(f, "%s\"%s\": %" PRIu64, k ? ", " : "", ml_fact_names[k], u->facts[k]);
        fputs("}}", f);
        first = 0;
    }
}

static void json_profile(FILE *f, const struct ml_report *r, const struct ml_report_opts *o)
{
    const struct ml_profile *p = r->prof;
    static const char *const clocks[] = {"unknown", "tsc", "cntvct", "monotonic"};
    int first = 1;

    fputs("    {\"profile\": ", f);
    ml_json_str(f, r->name);
    if (p->merged)
        fprintf(f, ", \"profiles\": %" PRIu64 ", \"tables\": \"%016" PRIx64 "\", \"pid\": null",
                p->merged, p->merged_fingerprint);
    else
        fprintf(f, ", \"profiles\": 1, \"pid\": %u, \"ppid\": %u", p->hdr.pid, p->hdr.ppid);
    fprintf(f,
            ", \"tsc_hz\": %" PRIu64 ", \"clock\": \"%s\""
            ", \"start_ns\": %" PRIu64 ", \"wall_ns\": %" PRIu64 ", \"sample\": %" PRIu64
            ", \"signal\": %s,\n     ",
            p->hdr.tsc_hz, p->hdr.clock < 4 ? clocks[p->hdr.clock] : "unknown", p->hdr.start_ns,
            p->hdr.wall_ns, p->hdr.sample, p->hdr.flags & ML_PROF_F_SIGNAL ? "true" : "false");
    /* Version 2 profiles have no token; processes outside an MPI job (and merges) no rank. */
    if (p->hdr.token)
        fprintf(f, "\"token\": \"%016" PRIx64 "\", ", p->hdr.token);
    else
        fputs("\"token\": null, ", f);
    if (p->hdr.flags & ML_PROF_F_RANK)
        fprintf(f, "\"rank\": %u, ", p->hdr.rank);
    else
        fputs("\"rank\": null, ", f);
    if (p->hdr.nranks)
        fprintf(f, "\"nranks\": %u,\n     \"meta\": {", p->hdr.nranks);
    else
        fputs("\"nranks\": null,\n     \"meta\": {", f);
    for (uint64_t i = 0; i < p->nmeta; i++) {
        if (i)
            fputs(", ", f);
        ml_json_str(f, ml_profile_str(p, p->meta[2 * i]));
        fputs(": ", f);
        ml_json_str(f, ml_profile_str(p, p->meta[2 * i + 1]));
    }
    fputs("},\n     \"calibration\": ", f);
    if (p->calib)
        fprintf(f, "{\"increment_ticks\": %.3f, \"timer_ticks\": %.3f}",
                (double)p->calib->incr_mticks / 1000, (double)p->calib->timer_mticks / 1000);
    else
        fputs("null", f);
    fputs(", \"events\": [", f);
    for (uint32_t e = 0; e < p->nevents; e++) {
        fputs(e ? ", " : "", f);
        ml_json_str(f, p->event_names[e]);
    }
    fputs("],\n     \"threads\": [", f);
    for (uint64_t t = 0; t < p->nthreads; t++) {
        fprintf(f, "%s{\"index\": %u, \"tid\": ", t ? ", " : "", p->threads[t].index);
        json_tid(f, p, t);
        if (p->threads[t].exited)
            fprintf(f, ", \"exited\": %" PRIu64, p->threads[t].exited);
        fputc('}', f);
    }
    fputs("],\n     \"regions\": [", f);
    for (uint64_t reg = 0; reg < r->nregions; reg++) {
        if (!ml_report_region_shown(r, reg, o))
            continue;
        fputs(first ? "\n      " : ",\n      ", f);
        json_region(f, r, reg, o);
        first = 0;
    }
    fputs("],\n     \"units\": [", f);
    json_units(f, r, o);
    fputs("]}", f);
}

static void json_begin(FILE *f, const struct ml_report_opts *o)
{
    (void)o;
    fputs("{\"profiles\": [\n", f);
}

static void json_end(FILE *f, const struct ml_report_opts *o)
{
    (void)o;
    fputs("\n]}\n", f);
}

static int json_one(FILE *f, const struct ml_report *r, const struct ml_timeline *t, size_t i,
                    const struct ml_report_opts *o)
{
    (void)t;
    if (i)
        fputs(",\n", f);
    json_profile(f, r, o);
    return 0;
}

const struct ml_renderer ml_render_json = {
    .begin = json_begin, .profile = json_one, .end = json_end};

/* ---- --top ---- */

static void json_top_fn(FILE *f, const struct ml_report *r, const struct ml_top_fn *fn)
{
    const struct ml_profile *p = r->prof;
    const uint64_t *v = fn->v;
    char buf[ML_REPORT_LONG];

    fputs("{\"function\": ", f);
    ml_json_str(f, ml_report_demangle(ml_profile_str(p, fn->func), buf, sizeof(buf)));
    fputs(", \"name\": ", f);
    ml_json_str(f, ml_top_fn_name(r, fn, buf, sizeof(buf)));
    fputs(", \"symbol\": ", f);
    ml_json_str(f, ml_profile_str(p, fn->func));
    fputs(", \"inlined_into\": ", f);
    if (fn->into != ML_TOP_NO_PARENT)
        ml_json_str(f, ml_report_demangle(ml_profile_str(p, fn->into), buf, sizeof(buf)));
    else
        fputs("null", f);
    fputs(", \"module\": ", f);
    ml_json_str(f, fn->module < p->nmodules ? ml_profile_str(p, p->modules[fn->module].name) : "");
    fputs(", \"file\": ", f);
    ml_json_str(f, fn->line ? ml_profile_str(p, fn->file) : "");
    fprintf(f, ", \"line\": %u, \"calls\": ", fn->line);
    if (fn->known)
        fprintf(f, "%" PRIu64, fn->executions);
    else
        fputs("null", f);
    fprintf(f,
            ", \"instructions\": %" PRIu64 ", \"loads\": %" PRIu64 ", \"stores\": %" PRIu64
            ", \"bytes_read\": %" PRIu64 ", \"bytes_written\": %" PRIu64 "}",
            v[ML_F_INSTR], v[ML_F_LOADS], v[ML_F_STORES],
            v[ML_F_RD_HEAP] + v[ML_F_RD_GLOBAL] + v[ML_F_RD_STACK],
            v[ML_F_WR_HEAP] + v[ML_F_WR_GLOBAL] + v[ML_F_WR_STACK]);
}

static void json_top_unit(FILE *f, const struct ml_report *r, const struct ml_top *t, uint32_t ui)
{
    const struct ml_profile *p = r->prof;
    const struct ml_prof_unit *u = &p->units[ui];
    const uint64_t c = r->unit_counts[ui], *fa = u->facts;
    uint32_t n;
    const uint32_t *ids = ml_profile_regset(p, u->regset, &n);
    char buf[ML_REPORT_LONG];

    fprintf(f, "{\"unit\": %u, \"kind\": \"%s\", \"entry\": %s, \"function\": ", ui,
            u->kind == ML_UNIT_BYTES ? "bytes" : "block",
            ml_top_is_entry(p, ui) ? "true" : "false");
    ml_json_str(f, ml_report_demangle(ml_profile_str(p, u->func), buf, sizeof(buf)));
    fputs(", \"name\": ", f);
    ml_json_str(f, ml_top_fn_name(r, ml_top_fn_of(t, r, ui), buf, sizeof(buf)));
    fputs(", \"symbol\": ", f);
    ml_json_str(f, ml_profile_str(p, u->func));
    fputs(", \"regions\": [", f);
    for (uint32_t k = 0; k < n; k++) {
        if (k)
            fputs(", ", f);
        ml_json_str(f, ml_profile_str(p, p->regions[ids[k]]));
    }
    fputs("], \"file\": ", f);
    ml_json_str(f, ml_profile_str(p, u->file));
    fprintf(f, ", \"line\": %u, \"executions\": ", u->line);
    /* A bytes unit counts bytes moved, not executions. */
    if (u->kind == ML_UNIT_BYTES)
        fputs("null", f);
    else
        fprintf(f, "%" PRIu64, c);
    fprintf(f,
            ", \"instructions\": %" PRIu64 ", \"loads\": %" PRIu64 ", \"stores\": %" PRIu64
            ", \"bytes_read\": %" PRIu64 ", \"bytes_written\": %" PRIu64 "}",
            c * fa[ML_F_INSTR], c * fa[ML_F_LOADS], c * fa[ML_F_STORES],
            c * (fa[ML_F_RD_HEAP] + fa[ML_F_RD_GLOBAL] + fa[ML_F_RD_STACK]),
            c * (fa[ML_F_WR_HEAP] + fa[ML_F_WR_GLOBAL] + fa[ML_F_WR_STACK]));
}

static int json_top_one(FILE *f, const struct ml_report *r, const struct ml_report_opts *o)
{
    struct ml_top *t;
    size_t nf, nu, ne;
    int rc = ml_top_build(r, o, &t);

    if (rc)
        return rc;
    nf = t->nfns < o->top ? t->nfns : o->top;
    nu = t->nunits < o->top ? t->nunits : o->top;
    ne = t->nunits_by_execs < o->top ? t->nunits_by_execs : o->top;
    fputs("    {\"profile\": ", f);
    ml_json_str(f, r->name);
    if (r->prof->merged)
        fprintf(f, ", \"profiles\": %" PRIu64 ", \"pid\": null", r->prof->merged);
    else
        fprintf(f, ", \"profiles\": 1, \"pid\": %u", r->prof->hdr.pid);
    fprintf(f, ", \"bytes\": %" PRIu64 ",\n     \"functions_by_bytes\": [", t->bytes);
    for (size_t i = 0; i < nf; i++) {
        fputs(i ? ",\n      " : "\n      ", f);
        json_top_fn(f, r, &t->fns[t->fns_by_bytes[i]]);
    }
    fputs("],\n     \"functions_by_calls\": [", f);
    for (size_t i = 0; i < nf; i++) {
        fputs(i ? ",\n      " : "\n      ", f);
        json_top_fn(f, r, &t->fns[t->fns_by_execs[i]]);
    }
    fputs("],\n     \"blocks_by_bytes\": [", f);
    for (size_t i = 0; i < nu; i++) {
        fputs(i ? ",\n      " : "\n      ", f);
        json_top_unit(f, r, t, t->units_by_bytes[i]);
    }
    fputs("],\n     \"blocks_by_executions\": [", f);
    for (size_t i = 0; i < ne; i++) {
        fputs(i ? ",\n      " : "\n      ", f);
        json_top_unit(f, r, t, t->units_by_execs[i]);
    }
    fputs("]}", f);
    ml_top_free(t);
    return 0;
}

static int json_top_profile(FILE *f, const struct ml_report *r, const struct ml_timeline *t,
                            size_t i, const struct ml_report_opts *o)
{
    (void)t;
    if (i)
        fputs(",\n", f);
    return json_top_one(f, r, o);
}

const struct ml_renderer ml_render_top_json = {
    .begin = json_begin, .profile = json_top_profile, .end = json_end};
