/* Region profile aggregation: unit counters times static facts, per region and thread. */
#include "report/report.h"

#include <errno.h>
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
 * Groups call records by (region, callee name): several call sites, and
 * several string table entries, may name the same function.
 */
static int build_callees(struct ml_report *r)
{
    const struct ml_profile *p = r->prof;
    struct call_ref *refs = NULL;
    uint64_t nrefs = 0, ngroups = 0, i, j;
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
        /* A call site that never ran says nothing about where time went. */
        if (c->total)
            r->ncallees++;
    }
    qsort(r->callees, r->ncallees, sizeof(*r->callees), callee_cmp);
    r->callee_store = calls;
    calls = NULL;
    rc = 0;
out:
    free(refs);
    free(calls);
    return rc;
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
    if (!r->cells || !r->totals || !r->unit_counts)
        goto out;

    for (uint64_t t = 0; t < nt; t++) {
        const struct ml_profile_thread *th = &p->threads[t];
        for (uint64_t reg = 0; reg < nr; reg++) {
            struct ml_rstats *c = &r->cells[reg * nt + t];
            c->entries = th->rstats[reg].entries;
            c->ticks = th->rstats[reg].ticks;
            c->active = c->timed = c->entries > 0;
        }
        for (uint64_t u = 0; u < p->nunits; u++) {
            uint64_t cnt = th->counts[u];
            const uint64_t *facts = p->units[u].facts;
            const uint32_t *ids;
            uint32_t n;

            r->unit_counts[u] += cnt;
            if (!cnt)
                continue;
            ids = ml_profile_regset(p, p->units[u].regset, &n);
            for (uint32_t k = 0; k < n; k++) {
                struct ml_rstats *c = &r->cells[(uint64_t)ids[k] * nt + t];
                c->active = 1;
                for (int f = 0; f < ML_NFACTS; f++)
                    c->v[f] += cnt * facts[f];
            }
        }
    }

    for (uint64_t u = 0; u < p->nunits; u++) {
        uint32_t n;
        const uint32_t *ids = ml_profile_regset(p, p->units[u].regset, &n);
        for (uint32_t k = 0; k < n; k++)
            r->totals[ids[k]].counters++;
    }
    for (uint64_t reg = 0; reg < nr; reg++) {
        struct ml_rstats *tot = &r->totals[reg];
        for (uint64_t t = 0; t < nt; t++) {
            const struct ml_rstats *c = &r->cells[reg * nt + t];
            tot->entries += c->entries;
            for (int f = 0; f < ML_NFACTS; f++)
                tot->v[f] += c->v[f];
            tot->active |= c->active;
            if (c->entries) {
                tot->timed = 1;
                if (c->ticks > tot->ticks)
                    tot->ticks = c->ticks;
            }
        }
        for (uint64_t t = 0; t < nt; t++) {
            struct ml_rstats *c = &r->cells[reg * nt + t];
            c->counters = tot->counters;
            if (c->active && !c->entries && tot->timed) {
                c->ticks = tot->ticks;
                c->timed = c->borrowed = 1;
            }
        }
    }
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

double ml_rstats_seconds(const struct ml_rstats *s, uint64_t tsc_hz)
{
    if (!s->timed || !tsc_hz)
        return -1;
    return (double)s->ticks / (double)tsc_hz;
}

double ml_report_gbs(uint64_t bytes, double seconds)
{
    if (seconds <= 0)
        return -1;
    return (double)bytes / seconds / 1e9;
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
