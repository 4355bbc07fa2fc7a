/* CSV report renderers: one row per region and thread, or one row per counting unit. */
#include "report/report.h"
#include "format/csv.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

/* The first two columns: the profile's name and pid (empty for a merged profile). */
static void csv_who(FILE *f, const struct ml_report *r)
{
    ml_csv_str(f, r->name);
    if (r->prof->merged)
        fputs(",,", f);
    else
        fprintf(f, ",%u,", r->prof->hdr.pid);
}

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

/*
 * The columns up to `profiles`: the MPI rank of the process (empty when it was not part of
 * a job, and for a merged profile; not in --top rows, whose rank is the
 * ranking's), then how many profiles the row sums (1 without --merge).
 */
static void csv_tail(FILE *f, const struct ml_report *r, int mpi_rank)
{
    const struct ml_profile *p = r->prof;

    if (mpi_rank && (p->hdr.flags & ML_PROF_F_RANK))
        fprintf(f, ",%u", p->hdr.rank);
    else if (mpi_rank)
        fputc(',', f);
    fprintf(f, ",%" PRIu64, p->merged ? p->merged : 1);
}

/* The columns after time_borrowed: sampling, corrections, events, rank, profiles, exact, note,
   library work, computed goto. */
static void csv_more(FILE *f, const struct ml_report *r, uint64_t reg, const struct ml_rstats *s)
{
    char note[256];
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
    csv_tail(f, r, 1);
    /* Exact mode's bytes by address class, empty without an EXACT section. */
    for (int x = 0; x < ML_NCLASS; x++)
        csv_count(f, r->prof->exact, s->x[x]);
    fputc(',', f);
    ml_csv_str(f, ml_report_note(r, reg, s, note, sizeof(note)) ? note : "");
    /* Library work and the computed-goto flag, appended so older readers keep their columns. */
    csv_double(f, ml_rstats_notseen_share(s), "%.6f");
    fprintf(f, ",%" PRIu64 ",%" PRIu64 ",%d\n", s->alloc_bytes, s->frees,
            (s->rflags & ML_RFLAG_NO_PLAIN) != 0);
}

static void csv_stats(FILE *f, const struct ml_report *r, uint64_t reg, const char *thread,
                      const char *tid, const struct ml_rstats *s)
{
    static const int cols[] = {ML_F_I_INT,    ML_F_I_FP,    ML_F_I_VEC,     ML_F_I_MEM,
                               ML_F_I_BRANCH, ML_F_I_CALL,  ML_F_I_OTHER,   ML_F_INSTR,
                               ML_F_LOADS,    ML_F_STORES,  ML_F_RD_HEAP,   ML_F_RD_GLOBAL,
                               ML_F_RD_STACK, ML_F_WR_HEAP, ML_F_WR_GLOBAL, ML_F_WR_STACK};
    double sec = ml_rstats_seconds(s, r->prof->hdr.tsc_hz);

    csv_who(f, r);
    ml_csv_str(f, ml_profile_str(r->prof, r->prof->regions[reg]));
    fprintf(f, ",%s,%s,%" PRIu64, thread, tid, s->entries);
    csv_double(f, sec, "%.9f");
    for (size_t i = 0; i < sizeof(cols) / sizeof(cols[0]); i++)
        fprintf(f, ",%" PRIu64, s->v[cols[i]]);
    csv_double(f, ml_report_gbs(ml_rstats_read(s), sec), "%.6f");
    csv_double(f, ml_report_gbs(ml_rstats_written(s), sec), "%.6f");
    fprintf(f, ",%d,%" PRIu64 ",%" PRIu64, s->borrowed, s->counters, s->v[ML_F_INCR]);
    csv_more(f, r, reg, s);
}

static void csv_begin(FILE *f, const struct ml_report_opts *o)
{
    (void)o;
    fputs("profile,pid,region,thread,tid,executions,seconds,instr_int,instr_fp,instr_vec,"
          "instr_mem,instr_branch,instr_call,instr_other,instructions,loads,stores,rd_heap,"
          "rd_global,rd_stack,wr_heap,wr_global,wr_stack,read_gbs,write_gbs,time_borrowed,"
          "counters,increments,measured,scale,est_seconds,est_instructions,est_loads,"
          "est_stores,est_bytes_read,est_bytes_written,cf,cf_seconds,cal_seconds,read_gbs_cf,"
          "write_gbs_cf,read_gbs_cal,write_gbs_cal,events,rank,profiles,exact_rd_heap,"
          "exact_rd_global,exact_rd_stack,exact_wr_heap,exact_wr_global,exact_wr_stack,note,"
          "notseen_share,alloc_bytes,frees,computed_goto\n",
          f);
}

static int csv_profile(FILE *f, const struct ml_report *r, const struct ml_timeline *t, size_t i,
                       const struct ml_report_opts *o)
{
    (void)t, (void)i;
    for (uint64_t reg = 0; reg < r->nregions; reg++) {
        if (!r->totals[reg].active || !ml_report_region_shown(r, reg, o))
            continue;
        for (uint64_t th = 0; th < r->nthreads && o->rows != ML_REPORT_TOTALS; th++) {
            const struct ml_rstats *c = ml_report_cell(r, reg, th);
            char idx[16], tid[32] = "";
            if (!c->active)
                continue;
            snprintf(idx, sizeof(idx), "%u", r->prof->threads[th].index);
            /* A merged row has no tid: empty, as unknown values are. */
            if (!r->prof->merged || r->prof->threads[th].exited)
                ml_report_tid(r->prof, th, tid, sizeof(tid));
            csv_stats(f, r, reg, idx, tid, c);
        }
        csv_stats(f, r, reg, "total", "", &r->totals[reg]);
    }
    return 0;
}

const struct ml_renderer ml_render_csv = {.begin = csv_begin, .profile = csv_profile};

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

static void blocks_begin(FILE *f, const struct ml_report_opts *o)
{
    (void)o;
    fputs("profile,pid,unit,kind,regions,module,function,file,line,executions,instructions,"
          "loads,stores,bytes_read,bytes_written,rank,profiles\n",
          f);
}

/*
 * The columns of a unit from its regions on (--blocks and --top rows):
 * regions, module, function, file, line, executions, instructions, loads,
 * stores, bytes_read, bytes_written, [rank,] profiles.
 */
/* One unit's columns; name: --top's last column (the row's shown name), or NULL (--blocks). */
static void csv_unit(FILE *f, const struct ml_report *r, uint32_t ui, int mpi_rank,
                     const char *name)
{
    const struct ml_profile *p = r->prof;
    const struct ml_prof_unit *u = &p->units[ui];
    const uint64_t c = r->unit_counts[ui], *fa = u->facts;
    char buf[ML_REPORT_LONG];

    csv_regions(f, r, u);
    fputc(',', f);
    ml_csv_str(f, u->module < p->nmodules ? ml_profile_str(p, p->modules[u->module].name) : "");
    fputc(',', f);
    ml_csv_str(f, ml_report_demangle(ml_profile_str(p, u->func), buf, sizeof(buf)));
    fputc(',', f);
    ml_csv_str(f, ml_profile_str(p, u->file));
    fprintf(f, ",%u,", u->line);
    /* A bytes unit counts bytes moved, not executions. */
    if (u->kind != ML_UNIT_BYTES)
        fprintf(f, "%" PRIu64, c);
    fprintf(f, ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64, c * fa[ML_F_INSTR],
            c * fa[ML_F_LOADS], c * fa[ML_F_STORES],
            c * (fa[ML_F_RD_HEAP] + fa[ML_F_RD_GLOBAL] + fa[ML_F_RD_STACK]),
            c * (fa[ML_F_WR_HEAP] + fa[ML_F_WR_GLOBAL] + fa[ML_F_WR_STACK]));
    csv_tail(f, r, mpi_rank);
    if (name) { /* --top: a block is never an inlined function's row (empty inlined_into) */
        fputc(',', f);
        ml_csv_str(f, name);
        fputc(',', f);
    }
    fputc('\n', f);
}

static int blocks_profile(FILE *f, const struct ml_report *r, const struct ml_timeline *t, size_t i,
                          const struct ml_report_opts *o)
{
    const struct ml_profile *p = r->prof;

    (void)t, (void)i;
    for (uint64_t ui = 0; ui < p->nunits; ui++) {
        const struct ml_prof_unit *u = &p->units[ui];
        if (r->share[ui] || !ml_report_unit_shown(r, u, o))
            continue;
        csv_who(f, r);
        fprintf(f, "%" PRIu64 ",%s,", ui, u->kind == ML_UNIT_BYTES ? "bytes" : "block");
        csv_unit(f, r, (uint32_t)ui, 1, NULL);
    }
    return 0;
}

const struct ml_renderer ml_render_blocks = {.begin = blocks_begin, .profile = blocks_profile};

/* ---- --top ---- */

static void csv_top_fn(FILE *f, const struct ml_report *r, const char *ranking, size_t rank,
                       const struct ml_top_fn *fn, char *name)
{
    const struct ml_profile *p = r->prof;
    const uint64_t *v = fn->v;
    char buf[ML_REPORT_LONG];

    csv_who(f, r);
    fprintf(f, "%s,%zu,function,,,", ranking, rank);
    ml_csv_str(f, fn->module < p->nmodules ? ml_profile_str(p, p->modules[fn->module].name) : "");
    fputc(',', f);
    ml_csv_str(f, ml_report_demangle(ml_profile_str(p, fn->func), buf, sizeof(buf)));
    fputc(',', f);
    ml_csv_str(f, fn->line ? ml_profile_str(p, fn->file) : "");
    fprintf(f, ",%u,", fn->line);
    if (fn->known)
        fprintf(f, "%" PRIu64, fn->executions);
    fprintf(f, ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64, v[ML_F_INSTR],
            v[ML_F_LOADS], v[ML_F_STORES], v[ML_F_RD_HEAP] + v[ML_F_RD_GLOBAL] + v[ML_F_RD_STACK],
            v[ML_F_WR_HEAP] + v[ML_F_WR_GLOBAL] + v[ML_F_WR_STACK]);
    csv_tail(f, r, 0);
    fputc(',', f);
    ml_csv_str(f, ml_top_fn_name(r, fn, name, ML_REPORT_LONG));
    fputc(',', f);
    if (fn->into != ML_TOP_NO_PARENT)
        ml_csv_str(f, ml_report_demangle(ml_profile_str(p, fn->into), buf, sizeof(buf)));
    fputc('\n', f);
}

static void csv_top_unit(FILE *f, const struct ml_report *r, const struct ml_top *t,
                         const char *ranking, size_t rank, uint32_t ui, char *name)
{
    csv_who(f, r);
    fprintf(f, "%s,%zu,%s,%u,", ranking, rank,
            r->prof->units[ui].kind == ML_UNIT_BYTES ? "bytes" : "block", ui);
    csv_unit(f, r, ui, 0, ml_top_fn_name(r, ml_top_fn_of(t, r, ui), name, ML_REPORT_LONG));
}

static void top_csv_begin(FILE *f, const struct ml_report_opts *o)
{
    (void)o;
    fputs("profile,pid,ranking,rank,kind,unit,regions,module,function,file,line,executions,"
          "instructions,loads,stores,bytes_read,bytes_written,profiles,name,inlined_into\n",
          f);
}

static int top_csv_profile(FILE *f, const struct ml_report *r, const struct ml_timeline *tl,
                           size_t i, const struct ml_report_opts *o)
{
    char name[ML_REPORT_LONG];
    struct ml_top *t;
    int rc = ml_top_build(r, o, &t);

    (void)tl, (void)i;
    if (rc)
        return rc;
    for (size_t k = 0; k < t->nfns && k < o->top; k++)
        csv_top_fn(f, r, "bytes", k + 1, &t->fns[t->fns_by_bytes[k]], name);
    for (size_t k = 0; k < t->nunits && k < o->top; k++)
        csv_top_unit(f, r, t, "bytes", k + 1, t->units_by_bytes[k], name);
    for (size_t k = 0; k < t->nfns && k < o->top; k++)
        csv_top_fn(f, r, "executions", k + 1, &t->fns[t->fns_by_execs[k]], name);
    for (size_t k = 0; k < t->nunits_by_execs && k < o->top; k++)
        csv_top_unit(f, r, t, "executions", k + 1, t->units_by_execs[k], name);
    ml_top_free(t);
    return 0;
}

const struct ml_renderer ml_render_top_csv = {.begin = top_csv_begin, .profile = top_csv_profile};
