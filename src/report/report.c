/* Region profile aggregation: unit counters times static facts, per region and thread. */
#include "report/report.h"

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* From libstdc++ (the tool links it); declared here to keep the tool in C. */
extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

const char *const ml_fact_names[ML_NFACTS] = {
    [ML_F_LOADS] = "loads",         [ML_F_STORES] = "stores",
    [ML_F_RD_HEAP] = "rd_heap",     [ML_F_RD_GLOBAL] = "rd_global",
    [ML_F_RD_STACK] = "rd_stack",   [ML_F_WR_HEAP] = "wr_heap",
    [ML_F_WR_GLOBAL] = "wr_global", [ML_F_WR_STACK] = "wr_stack",
    [ML_F_I_INT] = "int",           [ML_F_I_FP] = "fp",
    [ML_F_I_VEC] = "vec",           [ML_F_I_MEM] = "mem",
    [ML_F_I_BRANCH] = "branch",     [ML_F_I_CALL] = "call",
    [ML_F_I_OTHER] = "other",       [ML_F_INSTR] = "instructions",
    [ML_F_INCR] = "increments",
};

struct call_ref {
    uint32_t region;
    uint32_t call;
    const char *name;
};

static int call_ref_cmp(const void *a, const void *b)
{
    const struct call_ref *x = a, *y = b;

    if (x->region != y->region)
        return x->region < y->region ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int callee_cmp(const void *a, const void *b)
{
    const struct ml_report_callee *x = a, *y = b;

    if (x->region != y->region)
        return x->region < y->region ? -1 : 1;
    if (x->total != y->total)
        return x->total > y->total ? -1 : 1;
    return strcmp(x->name, y->name);
}

/*
 * (region, function) pairs of instrumented functions that were entered while
 * counting for the region: their entry units counted there (dynamic
 * attribution, docs/regions.md). A call to such a function reached code
 * memlens counted, so it is not "not seen". Sorted like call_ref (call unused).
 */
static struct call_ref *entered_functions(const struct ml_profile *p, uint64_t *n)
{
    struct call_ref *e = NULL;
    uint64_t cap = 0;

    *n = 0;
    for (uint64_t i = 0; i < p->nentries; i++) {
        uint32_t u = p->entries[i], nr;
        const uint32_t *ids = ml_profile_regset(p, p->units[u].regset, &nr);
        uint64_t c = 0;
        for (uint64_t t = 0; t < p->nthreads && !c; t++)
            c = p->threads[t].counts[u];
        for (uint32_t k = 0; c && k < nr; k++) {
            if (*n == cap) {
                struct call_ref *g = realloc(e, (cap = cap ? 2 * cap : 64) * sizeof(*g));
                if (!g) {
                    free(e);
                    *n = 0;
                    return NULL;
                }
                e = g;
            }
            e[(*n)++] = (struct call_ref){ids[k], 0, ml_profile_str(p, p->units[u].func)};
        }
    }
    if (*n)
        qsort(e, *n, sizeof(*e), call_ref_cmp);
    return e;
}

/*
 * Groups call records by (region, callee name): several call sites, and
 * several string table entries, may name the same function. Callees that
 * counted themselves in the region (entered_functions) are left out.
 */
static int build_callees(struct ml_report *r)
{
    const struct ml_profile *p = r->prof;
    struct call_ref *refs = NULL, *entered = NULL;
    uint64_t nrefs = 0, ngroups = 0, nentered = 0, i, j;
    uint64_t *calls = NULL;
    int rc = -ENOMEM;

    for (i = 0; i < p->ncalls; i++) {
        uint32_t n;
        ml_profile_regset(p, p->units[p->calls[i].unit].regset, &n);
        nrefs += n;
    }
    if (!nrefs)
        return 0;
    refs = calloc(nrefs, sizeof(*refs));
    if (!refs)
        goto out;
    nrefs = 0;
    for (i = 0; i < p->ncalls; i++) {
        uint32_t n;
        const uint32_t *ids = ml_profile_regset(p, p->units[p->calls[i].unit].regset, &n);
        for (uint32_t k = 0; k < n; k++) {
            refs[nrefs].region = ids[k];
            refs[nrefs].call = (uint32_t)i;
            refs[nrefs].name = ml_profile_str(p, p->calls[i].callee);
            nrefs++;
        }
    }
    qsort(refs, nrefs, sizeof(*refs), call_ref_cmp);
    entered = entered_functions(p, &nentered);
    for (i = 0; i < nrefs; i++)
        if (i == 0 || call_ref_cmp(&refs[i - 1], &refs[i]))
            ngroups++;
    if (r->nthreads && ngroups > SIZE_MAX / sizeof(*calls) / r->nthreads)
        goto out;
    r->callees = calloc(ngroups, sizeof(*r->callees));
    calls = calloc(ngroups * (r->nthreads ? r->nthreads : 1), sizeof(*calls));
    if (!r->callees || !calls)
        goto out;
    r->ncallees = 0;
    for (i = 0; i < nrefs; i = j) {
        struct ml_report_callee *c = &r->callees[r->ncallees];
        c->region = refs[i].region;
        c->name = refs[i].name;
        c->calls = calls + r->ncallees * r->nthreads;
        for (j = i; j < nrefs && !call_ref_cmp(&refs[i], &refs[j]); j++) {
            const struct ml_prof_call *call = &p->calls[refs[j].call];
            for (uint64_t t = 0; t < r->nthreads; t++) {
                uint64_t k = p->threads[t].counts[call->unit] * call->per_exec;
                c->calls[t] += k;
                c->total += k;
            }
        }
        /* A call site that never ran says nothing about where time went; a callee that counted
           itself was seen. */
        if (c->total &&
            !(nentered && bsearch(&refs[i], entered, nentered, sizeof(*entered), call_ref_cmp))) {
            r->ncallees++;
        } else {
            memset(c->calls, 0, r->nthreads * sizeof(*c->calls));
            c->total = 0;
        }
    }
    qsort(r->callees, r->ncallees, sizeof(*r->callees), callee_cmp);
    r->callee_store = calls;
    calls = NULL;
    rc = 0;
out:
    free(refs);
    free(entered);
    free(calls);
    return rc;
}

double ml_rstats_notseen_share(const struct ml_rstats *s)
{
    return s->timed_ticks ? (double)s->notseen_ticks / (double)s->timed_ticks : -1;
}

/* The published correction factor: 1 + 2 n / (loads + stores); see docs/report.md. */
static double correction_factor(const struct ml_rstats *s)
{
    uint64_t mem = s->v[ML_F_LOADS] + s->v[ML_F_STORES];

    if (!s->v[ML_F_INCR])
        return 1;
    if (!mem)
        return -1;
    return 1 + 2.0 * (double)s->v[ML_F_INCR] / (double)mem;
}

static void derive_row(struct ml_rstats *c, double scale, const struct ml_prof_calib *cal,
                       int own_cal)
{
    c->scale = scale;
    c->est_ticks = c->timed && scale >= 0 ? (double)c->ticks * scale : -1;
    c->cf = correction_factor(c);
    c->cf_ticks = c->timed && c->cf > 0 ? (double)c->ticks / c->cf : -1;
    if (own_cal) {
        double t = (double)c->ticks - (double)c->v[ML_F_INCR] * (double)cal->incr_mticks / 1000 -
                   (double)c->measured * (double)cal->timer_mticks / 1000;
        c->cal_ticks = t > 0 ? t : -1;
    }
}

/* Sampling scale and overhead corrections of every cell and total (struct ml_rstats). */
static void derive(struct ml_report *r)
{
    const struct ml_prof_calib *cal = r->prof->calib;

    for (uint64_t reg = 0; reg < r->nregions; reg++) {
        struct ml_rstats *tot = &r->totals[reg];
        double scale = tot->measured ? (double)tot->entries / (double)tot->measured : -1;
        double best = -1;

        for (uint64_t t = 0; t < r->nthreads; t++) {
            struct ml_rstats *c = &r->cells[reg * r->nthreads + t];
            c->cal_ticks = -1;
            if (c->borrowed)
                derive_row(c, scale, cal, 0);
            else
                derive_row(c, c->measured ? (double)c->entries / (double)c->measured : -1, cal,
                           cal && c->timed);
            if (!c->borrowed && c->cal_ticks > best)
                best = c->cal_ticks;
        }
        tot->cal_ticks = -1;
        derive_row(tot, scale, cal, 0);
        /* Merged: the runs' calibrated totals add up, as their times do. */
        if (r->prof->merged_cal)
            best = r->prof->merged_cal[reg];
        tot->cal_ticks = best;
        for (uint64_t t = 0; t < r->nthreads; t++) {
            struct ml_rstats *c = &r->cells[reg * r->nthreads + t];
            if (c->borrowed)
                c->cal_ticks = best;
        }
    }
}

int ml_report_build(const struct ml_profile *p, const char *name, struct ml_report **out)
{
    struct ml_report *r;
    uint64_t nr = p->nregions, nt = p->nthreads;
    int rc = -ENOMEM;

    *out = NULL;
    r = calloc(1, sizeof(*r));
    if (!r)
        return -ENOMEM;
    r->prof = p;
    r->name = name;
    r->nregions = nr;
    r->nthreads = nt;
    /* The parser bounds nregions * nthreads by the file size (16 bytes per rstat). */
    r->cells = calloc(nr * nt + 1, sizeof(*r->cells));
    r->totals = calloc(nr + 1, sizeof(*r->totals));
    r->unit_counts = calloc(p->nunits + 1, sizeof(*r->unit_counts));
    r->share = calloc(p->nunits + 1, 1);
    if (!r->cells || !r->totals || !r->unit_counts || !r->share)
        goto out;

    for (uint64_t t = 0; t < nt; t++) {
        const struct ml_profile_thread *th = &p->threads[t];
        for (uint64_t reg = 0; reg < nr; reg++) {
            struct ml_rstats *c = &r->cells[reg * nt + t];
            c->entries = th->rstats[reg].entries;
            c->ticks = th->rstats[reg].ticks;
            c->measured = th->rstats[reg].measured;
            c->active = c->entries > 0;
            c->timed = c->measured > 0; /* sampled away entirely: the time is unknown */
            for (uint32_t e = 0; th->events && e < p->nevents; e++)
                c->ev[e] = th->events[reg * p->nevents + e];
            c->timed_ticks = th->timed_ticks ? th->timed_ticks[reg] : c->ticks;
            c->rflags = p->rflags ? p->rflags[reg] : 0;
        }
        for (uint64_t i = 0; i < p->nuinfo; i++) {
            const struct ml_prof_unitinfo *ui = &p->uinfo[i];
            uint64_t cnt = th->counts[ui->unit];
            uint32_t n;
            const uint32_t *ids = ml_profile_regset(p, p->units[ui->unit].regset, &n);
            for (uint32_t k = 0; cnt && k < n; k++) {
                struct ml_rstats *c = &r->cells[(uint64_t)ids[k] * nt + t];
                if (ui->kind == ML_UI_NOTSEEN_TICKS)
                    c->notseen_ticks += cnt;
                else if (ui->kind == ML_UI_ALLOC_BYTES)
                    c->alloc_bytes += cnt;
                else if (ui->kind == ML_UI_FREE_CALLS)
                    c->frees += cnt;
            }
        }
        for (uint64_t u = 0; u < p->nunits; u++) {
            uint64_t cnt = th->counts[u];
            const uint64_t *facts = p->units[u].facts;
            const uint32_t *ids;
            uint32_t n;

            r->unit_counts[u] += cnt;
            ids = ml_profile_regset(p, p->units[u].regset, &n);
            for (uint32_t k = 0; th->exact && k < n; k++)
                for (int x = 0; x < ML_NCLASS; x++)
                    r->cells[(uint64_t)ids[k] * nt + t].x[x] += th->exact[u * ML_NCLASS + x];
            if (!cnt)
                continue;
            for (uint32_t k = 0; k < n; k++) {
                struct ml_rstats *c = &r->cells[(uint64_t)ids[k] * nt + t];
                c->active = 1;
                for (int f = 0; f < ML_NFACTS; f++)
                    c->v[f] += cnt * facts[f];
            }
        }
    }

    for (uint64_t i = 0; i < p->ninl; i++)
        r->share[p->inl[i].unit] = 1;
    for (uint64_t u = 0; u < p->nunits; u++) {
        uint32_t n;
        const uint32_t *ids = ml_profile_regset(p, p->units[u].regset, &n);
        for (uint32_t k = 0; k < n && !r->share[u]; k++)
            r->totals[ids[k]].counters++;
    }
    for (uint64_t reg = 0; reg < nr; reg++) {
        struct ml_rstats *tot = &r->totals[reg];
        for (uint64_t t = 0; t < nt; t++) {
            const struct ml_rstats *c = &r->cells[reg * nt + t];
            tot->entries += c->entries;
            tot->measured += c->measured;
            for (uint32_t e = 0; e < p->nevents; e++)
                tot->ev[e] += c->ev[e];
            for (int f = 0; f < ML_NFACTS; f++)
                tot->v[f] += c->v[f];
            for (int x = 0; x < ML_NCLASS; x++)
                tot->x[x] += c->x[x];
            tot->notseen_ticks += c->notseen_ticks;
            tot->timed_ticks += c->timed_ticks;
            tot->alloc_bytes += c->alloc_bytes;
            tot->frees += c->frees;
            tot->rflags |= c->rflags;
            tot->active |= c->active;
            if (c->timed) {
                tot->timed = 1;
                if (c->ticks > tot->ticks)
                    tot->ticks = c->ticks;
            }
        }
        /* Merged: each run took its longest thread's time, and the runs' times add up. */
        if (p->merged_ticks)
            tot->ticks = p->merged_ticks[reg];
        for (uint64_t t = 0; t < nt; t++) {
            struct ml_rstats *c = &r->cells[reg * nt + t];
            c->counters = tot->counters;
            if (c->active && !c->entries && tot->timed) {
                c->ticks = tot->ticks;
                c->timed = c->borrowed = 1;
            }
        }
    }
    derive(r);
    rc = build_callees(r);
out:
    if (rc) {
        ml_report_free(r);
        return rc;
    }
    *out = r;
    return 0;
}

void ml_report_free(struct ml_report *r)
{
    if (!r)
        return;
    free(r->cells);
    free(r->totals);
    free(r->callees);
    free(r->callee_store);
    free(r->unit_counts);
    free(r->share);
    free(r);
}

uint64_t ml_rstats_read(const struct ml_rstats *s)
{
    return s->v[ML_F_RD_HEAP] + s->v[ML_F_RD_GLOBAL] + s->v[ML_F_RD_STACK];
}

uint64_t ml_rstats_written(const struct ml_rstats *s)
{
    return s->v[ML_F_WR_HEAP] + s->v[ML_F_WR_GLOBAL] + s->v[ML_F_WR_STACK];
}

uint64_t ml_rstats_xread(const struct ml_rstats *s)
{
    return s->x[ML_C_RD_HEAP] + s->x[ML_C_RD_GLOBAL] + s->x[ML_C_RD_STACK];
}

uint64_t ml_rstats_xwritten(const struct ml_rstats *s)
{
    return s->x[ML_C_WR_HEAP] + s->x[ML_C_WR_GLOBAL] + s->x[ML_C_WR_STACK];
}

double ml_rstats_seconds(const struct ml_rstats *s, uint64_t tsc_hz)
{
    if (!s->timed || !tsc_hz)
        return -1;
    return (double)s->ticks / (double)tsc_hz;
}

double ml_rstats_ticks_seconds(const struct ml_rstats *s, double ticks, uint64_t tsc_hz)
{
    if (!s->timed || !tsc_hz || ticks < 0)
        return -1;
    return ticks / (double)tsc_hz;
}

uint64_t ml_rstats_est(const struct ml_rstats *s, uint64_t v)
{
    double x;

    if (s->scale < 0)
        return v;
    x = (double)v * s->scale + 0.5;
    return x >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)x;
}

int ml_report_sampled(const struct ml_report *r)
{
    if (r->prof->hdr.sample > 1)
        return 1;
    for (uint64_t reg = 0; reg < r->nregions; reg++)
        if (r->totals[reg].measured != r->totals[reg].entries)
            return 1;
    return 0;
}

double ml_report_gbs(uint64_t bytes, double seconds)
{
    if (seconds <= 0)
        return -1;
    return (double)bytes / seconds / 1e9;
}

const char *ml_report_tid(const struct ml_profile *p, uint64_t t, char *buf, size_t len)
{
    if (p->threads[t].exited)
        snprintf(buf, len, "exited:%" PRIu64, p->threads[t].exited);
    else if (p->merged)
        snprintf(buf, len, "-");
    else
        snprintf(buf, len, "%u", p->threads[t].tid);
    return buf;
}

const char *ml_report_note(const struct ml_report *r, uint64_t region, const struct ml_rstats *s,
                           char *buf, size_t len)
{
    (void)r, (void)region;
    /* Sampling may leave a coarse region with no measured execution: its figures are empty. */
    if (s->entries && !s->measured) {
        snprintf(buf, len, "0 of %" PRIu64 " measured: rerun with MEMLENS_SAMPLE=1", s->entries);
        return buf;
    }
    return NULL;
}

const char *ml_report_demangle(const char *name, char *buf, size_t len)
{
    char *d;
    int status = 0;

    if (strncmp(name, "_Z", 2) != 0 || !len)
        return name;
    d = __cxa_demangle(name, NULL, NULL, &status);
    if (!d || status)
        return name;
    snprintf(buf, len, "%s", d);
    free(d);
    return buf;
}

int ml_report_region_shown(const struct ml_report *r, uint64_t region,
                           const struct ml_report_opts *o)
{
    const char *name;

    if (!o->nregion_names)
        return 1;
    name = ml_profile_str(r->prof, r->prof->regions[region]);
    for (size_t i = 0; i < o->nregion_names; i++)
        if (!strcmp(name, o->regions[i]))
            return 1;
    return 0;
}
