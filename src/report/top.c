/* Hottest code (--top): functions and counting units ranked by bytes moved and by executions. */
#include "report/report.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int ml_report_unit_shown(const struct ml_report *r, const struct ml_prof_unit *u,
                         const struct ml_report_opts *o)
{
    uint32_t n;
    const uint32_t *ids = ml_profile_regset(r->prof, u->regset, &n);

    if (!o->nregion_names)
        return 1;
    for (uint32_t k = 0; k < n; k++)
        if (ml_report_region_shown(r, ids[k], o))
            return 1;
    return 0;
}

uint64_t ml_top_unit_bytes(const struct ml_report *r, uint32_t u)
{
    const uint64_t *fa = r->prof->units[u].facts;

    return r->unit_counts[u] * (fa[ML_F_RD_HEAP] + fa[ML_F_RD_GLOBAL] + fa[ML_F_RD_STACK] +
                                fa[ML_F_WR_HEAP] + fa[ML_F_WR_GLOBAL] + fa[ML_F_WR_STACK]);
}

static int u32_cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

    return x < y ? -1 : x > y;
}

int ml_top_is_entry(const struct ml_profile *p, uint32_t u)
{
    return p->nentries && bsearch(&u, p->entries, p->nentries, sizeof(u), u32_cmp);
}

static int desc(uint64_t x, uint64_t y)
{
    return x > y ? -1 : x < y;
}

static uint64_t fn_bytes(const struct ml_top_fn *f)
{
    return f->v[ML_F_RD_HEAP] + f->v[ML_F_RD_GLOBAL] + f->v[ML_F_RD_STACK] + f->v[ML_F_WR_HEAP] +
           f->v[ML_F_WR_GLOBAL] + f->v[ML_F_WR_STACK];
}

/* Ties go to the name, then the module, so that output is stable. */
static int fn_tie(const struct ml_report *r, const struct ml_top_fn *x, const struct ml_top_fn *y)
{
    int c = strcmp(ml_profile_str(r->prof, x->func), ml_profile_str(r->prof, y->func));

    return c ? c : x->module < y->module ? -1 : x->module > y->module;
}

struct sort_ctx {
    const struct ml_report *r;
    const struct ml_top *t;
};

static int fn_by_bytes(const void *a, const void *b, void *arg)
{
    const struct sort_ctx *c = arg;
    const struct ml_top_fn *x = &c->t->fns[*(const size_t *)a], *y = &c->t->fns[*(const size_t *)b];
    int d = desc(fn_bytes(x), fn_bytes(y));

    if (!d)
        d = desc(x->executions, y->executions);
    return d ? d : fn_tie(c->r, x, y);
}

static int fn_by_execs(const void *a, const void *b, void *arg)
{
    const struct sort_ctx *c = arg;
    const struct ml_top_fn *x = &c->t->fns[*(const size_t *)a], *y = &c->t->fns[*(const size_t *)b];
    int d = desc(x->executions, y->executions);

    if (!d)
        d = desc(fn_bytes(x), fn_bytes(y));
    return d ? d : fn_tie(c->r, x, y);
}

static int unit_by_bytes(const void *a, const void *b, void *arg)
{
    const struct sort_ctx *c = arg;
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    int d = desc(ml_top_unit_bytes(c->r, x), ml_top_unit_bytes(c->r, y));

    if (!d)
        d = desc(c->r->unit_counts[x], c->r->unit_counts[y]);
    return d ? d : x < y ? -1 : x > y;
}

static int unit_by_execs(const void *a, const void *b, void *arg)
{
    const struct sort_ctx *c = arg;
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    int d = desc(c->r->unit_counts[x], c->r->unit_counts[y]);

    if (!d)
        d = desc(ml_top_unit_bytes(c->r, x), ml_top_unit_bytes(c->r, y));
    return d ? d : x < y ? -1 : x > y;
}

/* The function of unit u in t, added on first sight (linear: few functions are hot). */
static struct ml_top_fn *find_fn(struct ml_top *t, const struct ml_report *r,
                                 const struct ml_prof_unit *u, size_t *cap)
{
    for (size_t i = t->nfns; i-- > 0;)
        if (t->fns[i].module == u->module &&
            !strcmp(ml_profile_str(r->prof, t->fns[i].func), ml_profile_str(r->prof, u->func)))
            return &t->fns[i];
    if (t->nfns == *cap) {
        size_t c = *cap ? 2 * *cap : 64;
        struct ml_top_fn *f = realloc(t->fns, c * sizeof(*f));
        if (!f)
            return NULL;
        t->fns = f;
        *cap = c;
    }
    memset(&t->fns[t->nfns], 0, sizeof(t->fns[0]));
    t->fns[t->nfns].module = u->module;
    t->fns[t->nfns].func = u->func;
    return &t->fns[t->nfns++];
}

int ml_top_build(const struct ml_report *r, const struct ml_report_opts *o, struct ml_top **out)
{
    const struct ml_profile *p = r->prof;
    struct ml_top *t = calloc(1, sizeof(*t));
    struct sort_ctx sc = {r, t};
    size_t cap = 0;
    int rc = -ENOMEM;

    *out = NULL;
    if (!t)
        return -ENOMEM;
    t->units = calloc(p->nunits + 1, sizeof(*t->units));
    t->units_by_bytes = calloc(p->nunits + 1, sizeof(*t->units_by_bytes));
    t->units_by_execs = calloc(p->nunits + 1, sizeof(*t->units_by_execs));
    if (!t->units || !t->units_by_bytes || !t->units_by_execs)
        goto out;
    for (uint32_t ui = 0; ui < p->nunits; ui++) {
        const struct ml_prof_unit *u = &p->units[ui];
        uint64_t c = r->unit_counts[ui];
        struct ml_top_fn *f;
        if (!c || !ml_report_unit_shown(r, u, o))
            continue;
        t->units[t->nunits++] = ui;
        t->bytes += ml_top_unit_bytes(r, ui);
        f = find_fn(t, r, u, &cap);
        if (!f)
            goto out;
        for (int k = 0; k < ML_NFACTS; k++)
            f->v[k] += c * u->facts[k];
        if (ml_top_is_entry(p, ui)) {
            f->known = 1;
            f->executions += c;
        }
        /* The writer stores each unit's strings apart: compare file names, not offsets. */
        if (u->line &&
            (!f->line || (!strcmp(ml_profile_str(p, u->file), ml_profile_str(p, f->file)) &&
                          u->line < f->line))) {
            f->file = u->file;
            f->line = u->line;
        }
    }
    t->fns_by_bytes = calloc(t->nfns + 1, sizeof(*t->fns_by_bytes));
    t->fns_by_execs = calloc(t->nfns + 1, sizeof(*t->fns_by_execs));
    if (!t->fns_by_bytes || !t->fns_by_execs)
        goto out;
    for (size_t i = 0; i < t->nfns; i++)
        t->fns_by_bytes[i] = t->fns_by_execs[i] = i;
    qsort_r(t->fns_by_bytes, t->nfns, sizeof(size_t), fn_by_bytes, &sc);
    qsort_r(t->fns_by_execs, t->nfns, sizeof(size_t), fn_by_execs, &sc);
    for (size_t i = 0; i < t->nunits; i++) {
        t->units_by_bytes[i] = t->units[i];
        /* A bytes unit counts bytes moved: it has no executions to rank. */
        if (p->units[t->units[i]].kind == ML_UNIT_BLOCK)
            t->units_by_execs[t->nunits_by_execs++] = t->units[i];
    }
    qsort_r(t->units_by_bytes, t->nunits, sizeof(uint32_t), unit_by_bytes, &sc);
    qsort_r(t->units_by_execs, t->nunits_by_execs, sizeof(uint32_t), unit_by_execs, &sc);
    rc = 0;
out:
    if (rc) {
        ml_top_free(t);
        return rc;
    }
    *out = t;
    return 0;
}

void ml_top_free(struct ml_top *t)
{
    if (!t)
        return;
    free(t->fns);
    free(t->units);
    free(t->fns_by_bytes);
    free(t->fns_by_execs);
    free(t->units_by_bytes);
    free(t->units_by_execs);
    free(t);
}
