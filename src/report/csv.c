/* CSV report renderers: one row per region and thread, or one row per counting unit. */
#include "report/report.h"
#include "format/csv.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

/* Unknown quantities (no time, so no bandwidth) are empty fields. */
static void csv_double(FILE *f, double x, const char *fmt)
{
    fputc(',', f);
    if (x >= 0)
        fprintf(f, fmt, x);
}

/* An unsigned count, or an empty field when unknown (known = 0). */
static void csv_count(FILE *f, int known, uint64_t v)
{
    fputc(',', f);
    if (known)
        fprintf(f, "%" PRIu64, v);
}

/* The last column: the MPI rank of the process, empty when it was not part of a job. */
static void csv_rank(FILE *f, const struct ml_profile *p)
{
    if (p->hdr.flags & ML_PROF_F_RANK)
        fprintf(f, ",%u\n", p->hdr.rank);
    else
        fputs(",\n", f);
}

/* Sampling, overhead corrections and event sums: the columns after time_borrowed. */
static void csv_more(FILE *f, const struct ml_report *r, const struct ml_rstats *s)
{
    char ev[ML_MAX_EVENTS * (ML_EVENT_NAME + 24) + 1] = "";
    int n = 0;
    uint64_t hz = r->prof->hdr.tsc_hz;
    double cf = ml_rstats_ticks_seconds(s, s->cf_ticks, hz);
    double cal = ml_rstats_ticks_seconds(s, s->cal_ticks, hz);
    int sc = s->scale >= 0;

    fprintf(f, ",%" PRIu64, s->measured);
    csv_double(f, s->scale, "%.6f");
    csv_double(f, ml_rstats_ticks_seconds(s, s->est_ticks, hz), "%.9f");
    csv_count(f, sc, ml_rstats_est(s, s->v[ML_F_INSTR]));
    csv_count(f, sc, ml_rstats_est(s, s->v[ML_F_LOADS]));
    csv_count(f, sc, ml_rstats_est(s, s->v[ML_F_STORES]));
    csv_count(f, sc, ml_rstats_est(s, ml_rstats_read(s)));
    csv_count(f, sc, ml_rstats_est(s, ml_rstats_written(s)));
    csv_double(f, s->cf, "%.6f");
    csv_double(f, cf, "%.9f");
    csv_double(f, cal, "%.9f");
    csv_double(f, ml_report_gbs(ml_rstats_read(s), cf), "%.6f");
    csv_double(f, ml_report_gbs(ml_rstats_written(s), cf), "%.6f");
    csv_double(f, ml_report_gbs(ml_rstats_read(s), cal), "%.6f");
    csv_double(f, ml_report_gbs(ml_rstats_written(s), cal), "%.6f");
    /* Event sums as name=value;... in one field: profiles of one report may differ in events. */
    for (uint32_t e = 0; e < r->prof->nevents; e++)
        n += snprintf(ev + n, sizeof(ev) - n, "%s%s=%" PRIu64, e ? ";" : "",
                      r->prof->event_names[e], s->ev[e]);
    fputc(',', f);
    ml_csv_str(f, ev);
    csv_rank(f, r->prof);
}

static void csv_stats(FILE *f, const struct ml_report *r, uint64_t reg, const char *thread,
                      const char *tid, const struct ml_rstats *s)
{
    static const int cols[] = {ML_F_I_INT,    ML_F_I_FP,    ML_F_I_VEC,     ML_F_I_MEM,
                               ML_F_I_BRANCH, ML_F_I_CALL,  ML_F_I_OTHER,   ML_F_INSTR,
                               ML_F_LOADS,    ML_F_STORES,  ML_F_RD_HEAP,   ML_F_RD_GLOBAL,
                               ML_F_RD_STACK, ML_F_WR_HEAP, ML_F_WR_GLOBAL, ML_F_WR_STACK};
    double sec = ml_rstats_seconds(s, r->prof->hdr.tsc_hz);

    ml_csv_str(f, r->name);
    fprintf(f, ",%u,", r->prof->hdr.pid);
    ml_csv_str(f, ml_profile_str(r->prof, r->prof->regions[reg]));
    fprintf(f, ",%s,%s,%" PRIu64, thread, tid, s->entries);
    csv_double(f, sec, "%.9f");
    for (size_t i = 0; i < sizeof(cols) / sizeof(cols[0]); i++)
        fprintf(f, ",%" PRIu64, s->v[cols[i]]);
    csv_double(f, ml_report_gbs(ml_rstats_read(s), sec), "%.6f");
    csv_double(f, ml_report_gbs(ml_rstats_written(s), sec), "%.6f");
    fprintf(f, ",%d,%" PRIu64 ",%" PRIu64, s->borrowed, s->counters, s->v[ML_F_INCR]);
    csv_more(f, r, s);
}

int ml_report_csv(FILE *f, struct ml_report *const *reps, size_t n, const struct ml_report_opts *o)
{
    fputs("profile,pid,region,thread,tid,executions,seconds,instr_int,instr_fp,instr_vec,"
          "instr_mem,instr_branch,instr_call,instr_other,instructions,loads,stores,rd_heap,"
          "rd_global,rd_stack,wr_heap,wr_global,wr_stack,read_gbs,write_gbs,time_borrowed,"
          "counters,increments,measured,scale,est_seconds,est_instructions,est_loads,"
          "est_stores,est_bytes_read,est_bytes_written,cf,cf_seconds,cal_seconds,read_gbs_cf,"
          "write_gbs_cf,read_gbs_cal,write_gbs_cal,events,rank\n",
          f);
    for (size_t i = 0; i < n; i++) {
        const struct ml_report *r = reps[i];
        for (uint64_t reg = 0; reg < r->nregions; reg++) {
            if (!r->totals[reg].active || !ml_report_region_shown(r, reg, o))
                continue;
            for (uint64_t t = 0; t < r->nthreads && o->rows != ML_REPORT_TOTALS; t++) {
                const struct ml_rstats *c = ml_report_cell(r, reg, t);
                char idx[16], tid[32];
                if (!c->active)
                    continue;
                snprintf(idx, sizeof(idx), "%u", r->prof->threads[t].index);
                ml_report_tid(&r->prof->threads[t], tid, sizeof(tid));
                csv_stats(f, r, reg, idx, tid, c);
            }
            csv_stats(f, r, reg, "total", "", &r->totals[reg]);
        }
    }
    fflush(f);
    return ferror(f) ? -EIO : 0;
}

static void csv_regions(FILE *f, const struct ml_report *r, const struct ml_prof_unit *u)
{
    uint32_t n;
    const uint32_t *ids = ml_profile_regset(r->prof, u->regset, &n);
    int quote = 0;

    /* Names joined with ';' form one field; quote it if any name needs quoting. */
    for (uint32_t k = 0; k < n; k++)
        quote |= !!strpbrk(ml_profile_str(r->prof, r->prof->regions[ids[k]]), ",\"\r\n");
    if (quote)
        fputc('"', f);
    for (uint32_t k = 0; k < n; k++) {
        const char *s = ml_profile_str(r->prof, r->prof->regions[ids[k]]);
        if (k)
            fputc(';', f);
        for (; *s; s++) {
            if (*s == '"')
                fputc('"', f);
            fputc(*s, f);
        }
    }
    if (quote)
        fputc('"', f);
}

int ml_report_blocks_csv(FILE *f, struct ml_report *const *reps, size_t n,
                         const struct ml_report_opts *o)
{
    char buf[4096];

    fputs("profile,pid,unit,kind,regions,module,function,file,line,executions,instructions,"
          "loads,stores,bytes_read,bytes_written,rank\n",
          f);
    for (size_t i = 0; i < n; i++) {
        const struct ml_report *r = reps[i];
        const struct ml_profile *p = r->prof;
        for (uint64_t ui = 0; ui < p->nunits; ui++) {
            const struct ml_prof_unit *u = &p->units[ui];
            const uint64_t c = r->unit_counts[ui];
            const uint64_t *fa = u->facts;
            if (!ml_report_unit_shown(r, u, o))
                continue;
            ml_csv_str(f, r->name);
            fprintf(f, ",%u,%" PRIu64 ",%s,", p->hdr.pid, ui,
                    u->kind == ML_UNIT_BYTES ? "bytes" : "block");
            csv_regions(f, r, u);
            fputc(',', f);
            ml_csv_str(f, u->module < p->nmodules ? ml_profile_str(p, p->modules[u->module].name)
                                                  : "");
            fputc(',', f);
            ml_csv_str(f, ml_report_demangle(ml_profile_str(p, u->func), buf, sizeof(buf)));
            fputc(',', f);
            ml_csv_str(f, ml_profile_str(p, u->file));
            fprintf(f, ",%u,", u->line);
            /* A bytes unit counts bytes moved, not executions. */
            if (u->kind != ML_UNIT_BYTES)
                fprintf(f, "%" PRIu64, c);
            fprintf(f, ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64,
                    c * fa[ML_F_INSTR], c * fa[ML_F_LOADS], c * fa[ML_F_STORES],
                    c * (fa[ML_F_RD_HEAP] + fa[ML_F_RD_GLOBAL] + fa[ML_F_RD_STACK]),
                    c * (fa[ML_F_WR_HEAP] + fa[ML_F_WR_GLOBAL] + fa[ML_F_WR_STACK]));
            csv_rank(f, p);
        }
    }
    fflush(f);
    return ferror(f) ? -EIO : 0;
}

/* ---- --top ---- */

static void csv_top_fn(FILE *f, const struct ml_report *r, const char *ranking, size_t rank,
                       const struct ml_top_fn *fn)
{
    const struct ml_profile *p = r->prof;
    const uint64_t *v = fn->v;
    char buf[4096];

    ml_csv_str(f, r->name);
    fprintf(f, ",%u,%s,%zu,function,,,", p->hdr.pid, ranking, rank);
    ml_csv_str(f, fn->module < p->nmodules ? ml_profile_str(p, p->modules[fn->module].name) : "");
    fputc(',', f);
    ml_csv_str(f, ml_report_demangle(ml_profile_str(p, fn->func), buf, sizeof(buf)));
    fputc(',', f);
    ml_csv_str(f, fn->line ? ml_profile_str(p, fn->file) : "");
    fprintf(f, ",%u,", fn->line);
    if (fn->known)
        fprintf(f, "%" PRIu64, fn->executions);
    fprintf(f, ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 "\n", v[ML_F_INSTR],
            v[ML_F_LOADS], v[ML_F_STORES], v[ML_F_RD_HEAP] + v[ML_F_RD_GLOBAL] + v[ML_F_RD_STACK],
            v[ML_F_WR_HEAP] + v[ML_F_WR_GLOBAL] + v[ML_F_WR_STACK]);
}

static void csv_top_unit(FILE *f, const struct ml_report *r, const char *ranking, size_t rank,
                         uint32_t ui)
{
    const struct ml_profile *p = r->prof;
    const struct ml_prof_unit *u = &p->units[ui];
    const uint64_t c = r->unit_counts[ui], *fa = u->facts;
    char buf[4096];

    ml_csv_str(f, r->name);
    fprintf(f, ",%u,%s,%zu,%s,%u,", p->hdr.pid, ranking, rank,
            u->kind == ML_UNIT_BYTES ? "bytes" : "block", ui);
    csv_regions(f, r, u);
    fputc(',', f);
    ml_csv_str(f, u->module < p->nmodules ? ml_profile_str(p, p->modules[u->module].name) : "");
    fputc(',', f);
    ml_csv_str(f, ml_report_demangle(ml_profile_str(p, u->func), buf, sizeof(buf)));
    fputc(',', f);
    ml_csv_str(f, ml_profile_str(p, u->file));
    fprintf(f, ",%u,", u->line);
    if (u->kind != ML_UNIT_BYTES)
        fprintf(f, "%" PRIu64, c);
    fprintf(f, ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 "\n", c * fa[ML_F_INSTR],
            c * fa[ML_F_LOADS], c * fa[ML_F_STORES],
            c * (fa[ML_F_RD_HEAP] + fa[ML_F_RD_GLOBAL] + fa[ML_F_RD_STACK]),
            c * (fa[ML_F_WR_HEAP] + fa[ML_F_WR_GLOBAL] + fa[ML_F_WR_STACK]));
}

int ml_report_top_csv(FILE *f, struct ml_report *const *reps, size_t n,
                      const struct ml_report_opts *o)
{
    fputs("profile,pid,ranking,rank,kind,unit,regions,module,function,file,line,executions,"
          "instructions,loads,stores,bytes_read,bytes_written\n",
          f);
    for (size_t i = 0; i < n; i++) {
        const struct ml_report *r = reps[i];
        struct ml_top *t;
        int rc = ml_top_build(r, o, &t);
        if (rc)
            return rc;
        for (size_t k = 0; k < t->nfns && k < o->top; k++)
            csv_top_fn(f, r, "bytes", k + 1, &t->fns[t->fns_by_bytes[k]]);
        for (size_t k = 0; k < t->nunits && k < o->top; k++)
            csv_top_unit(f, r, "bytes", k + 1, t->units_by_bytes[k]);
        for (size_t k = 0; k < t->nfns && k < o->top; k++)
            csv_top_fn(f, r, "executions", k + 1, &t->fns[t->fns_by_execs[k]]);
        for (size_t k = 0; k < t->nunits_by_execs && k < o->top; k++)
            csv_top_unit(f, r, "executions", k + 1, t->units_by_execs[k]);
        ml_top_free(t);
    }
    fflush(f);
    return ferror(f) ? -EIO : 0;
}
