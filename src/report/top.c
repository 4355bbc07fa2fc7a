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

/* Does row f stand for (module, func), inlined into `into` (ML_TOP_NO_PARENT: not inlined)? */
static int fn_is(const struct ml_report *r, const struct ml_top_fn *f, uint32_t module,
                 uint32_t func, uint32_t into)
{
    const struct ml_profile *p = r->prof;

    if (f->module != module || (f->into == ML_TOP_NO_PARENT) != (into == ML_TOP_NO_PARENT))
        return 0;
    if (into != ML_TOP_NO_PARENT && f->into != into &&
        strcmp(ml_profile_str(p, f->into), ml_profile_str(p, into)))
        return 0;
    return f->func == func || !strcmp(ml_profile_str(p, f->func), ml_profile_str(p, func));
}

/*
 * The row of unit ui's function in t, added on first sight; into: the
 * function it was inlined into (ui is then an inlined share), or
 * ML_TOP_NO_PARENT.
 */
static struct ml_top_fn *find_fn(struct ml_top *t, const struct ml_report *r, uint32_t ui,
                                 uint32_t into, size_t *cap)
{
    const struct ml_prof_unit *u = &r->prof->units[ui];

    for (size_t i = t->nfns; i-- > 0;)
        if (fn_is(r, &t->fns[i], u->module, u->func, into))
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
    t->fns[t->nfns].into = into;
    t->fns[t->nfns].parent = ML_TOP_NO_PARENT;
    return &t->fns[t->nfns++];
}

int ml_top_is_omp(const char *sym)
{
    return !strncmp(sym, ".omp_outlined.", 14);
}

/*
 * The function an OpenMP body at (module, file, line) was outlined from: of
 * the other functions with units in that module and file (every unit of the
 * profile, counted or not), the one whose line range holds line most
 * tightly, else the one that starts last before it. Lines come from -g;
 * inlining can widen a range, never narrow it.
 */
static uint32_t omp_parent(const struct ml_profile *p, const struct ml_top_fn *f)
{
    const char *file = ml_profile_str(p, f->file);
    uint32_t best = ML_TOP_NO_PARENT, best_span = UINT32_MAX;
    struct span {
        uint32_t func, lo, hi;
    } *s = NULL;
    size_t n = 0, cap = 0;

    for (uint64_t ui = 0; ui < p->nunits; ui++) {
        const struct ml_prof_unit *u = &p->units[ui];
        const char *name = ml_profile_str(p, u->func);
        size_t k;
        if (u->module != f->module || !u->line || ml_top_is_omp(name) ||
            strcmp(ml_profile_str(p, u->file), file))
            continue;
        for (k = n; k-- > 0;)
            if (s[k].func == u->func || !strcmp(ml_profile_str(p, s[k].func), name))
                break;
        if (k == SIZE_MAX) {
            if (n == cap) {
                struct span *g = realloc(s, (cap = cap ? 2 * cap : 16) * sizeof(*g));
                if (!g)
                    break; /* out of memory: no parent, the body keeps its own name */
                s = g;
            }
            s[k = n++] = (struct span){u->func, u->line, u->line};
        }
        s[k].lo = u->line < s[k].lo ? u->line : s[k].lo;
        s[k].hi = u->line > s[k].hi ? u->line : s[k].hi;
    }
    /* A range holding the line, the tightest; else the function that starts last before it
       (a parallel loop at a function's end lies past its last counted block). */
    for (size_t k = 0; k < n; k++)
        if (s[k].lo <= f->line && f->line <= s[k].hi && s[k].hi - s[k].lo < best_span) {
            best = s[k].func;
            best_span = s[k].hi - s[k].lo;
        }
    for (size_t k = 0, lo = 0; k < n && best_span == UINT32_MAX; k++)
        if (s[k].lo <= f->line && s[k].lo > lo) {
            lo = s[k].lo;
            best = s[k].func;
        }
    free(s);
    return best;
}

const char *ml_top_fn_name(const struct ml_report *r, const struct ml_top_fn *f, char *buf,
                           size_t len)
{
    const struct ml_profile *p = r->prof;
    const char *sym = ml_profile_str(p, f->func);
    char d[ML_REPORT_LONG];

    if (f->into != ML_TOP_NO_PARENT) {
        char c[ML_REPORT_LONG];
        snprintf(buf, len, "%s (inlined into %s)", ml_report_demangle(sym, d, sizeof(d)),
                 ml_report_demangle(ml_profile_str(p, f->into), c, sizeof(c)));
        return buf;
    }
    if (!ml_top_is_omp(sym))
        return ml_report_demangle(sym, buf, len);
    if (!f->line)
        snprintf(buf, len, "omp parallel (%s)", sym);
    else if (f->parent == ML_TOP_NO_PARENT)
        snprintf(buf, len, "omp parallel @%s:%u", ml_profile_str(p, f->file), f->line);
    else
        snprintf(buf, len, "%s \xe2\x80\xba omp parallel @%s:%u",
                 ml_report_demangle(ml_profile_str(p, f->parent), d, sizeof(d)),
                 ml_profile_str(p, f->file), f->line);
    return buf;
}

/* Linear, newest first: few functions are hot, and units of one function come together. */
const struct ml_top_fn *ml_top_fn_of(const struct ml_top *t, const struct ml_report *r, uint32_t u)
{
    const struct ml_prof_unit *pu = &r->prof->units[u];

    for (size_t i = t->nfns; i-- > 0;)
        if (fn_is(r, &t->fns[i], pu->module, pu->func, ML_TOP_NO_PARENT))
            return &t->fns[i];
    return NULL;
}

/* Adds c counts of unit u to row f: its facts, and its line (the lowest in f's file). */
static void add_unit(const struct ml_profile *p, struct ml_top_fn *f, const struct ml_prof_unit *u,
                     uint64_t c)
{
    for (int k = 0; k < ML_NFACTS; k++)
        f->v[k] += c * u->facts[k];
    /* The writer stores each unit's strings apart: compare file names, not offsets. */
    if (u->line && (!f->line || (!strcmp(ml_profile_str(p, u->file), ml_profile_str(p, f->file)) &&
                                 u->line < f->line))) {
        f->file = u->file;
        f->line = u->line;
    }
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
        f = find_fn(t, r, ui, ML_TOP_NO_PARENT, &cap);
        if (!f)
            goto out;
        if (ml_top_is_entry(p, ui)) {
            f->known = 1;
            f->executions += c;
            f->entry_line = u->line;
        }
        add_unit(p, f, u, c);
    }
    /*
     * Inlined functions: their share of a host unit, counted by the host's count. Not an
     * OpenMP body (with -g clang outlines it as ".omp_outlined._debug__" and inlines that
     * into the ".omp_outlined." it calls): its row is the parallel region's already.
     */
    for (uint64_t i = 0; i < p->ninl; i++) {
        const struct ml_prof_unit *u = &p->units[p->inl[i].unit];
        uint64_t c = r->unit_counts[p->inl[i].host];
        struct ml_top_fn *f;
        if (!c || !ml_report_unit_shown(r, u, o) || ml_top_is_omp(ml_profile_str(p, u->func)))
            continue;
        f = find_fn(t, r, p->inl[i].unit, p->units[p->inl[i].host].func, &cap);
        if (!f)
            goto out;
        add_unit(p, f, u, c);
    }
    /*
     * An OpenMP body's entry block carries its parent's line at -O0, and so do the blocks
     * memlens splits from it: place the body by its other lines.
     */
    for (size_t k = 0; k < t->nunits; k++) {
        const struct ml_prof_unit *u = &p->units[t->units[k]];
        struct ml_top_fn *f = (struct ml_top_fn *)ml_top_fn_of(t, r, t->units[k]);
        if (f && u->line && u->line != f->entry_line && (!f->body_line || u->line < f->body_line) &&
            !strcmp(ml_profile_str(p, u->file), ml_profile_str(p, f->file)))
            f->body_line = u->line;
    }
    for (size_t i = 0; i < t->nfns; i++)
        if (ml_top_is_omp(ml_profile_str(p, t->fns[i].func)) && t->fns[i].body_line)
            t->fns[i].line = t->fns[i].body_line;
    for (size_t i = 0; i < t->nfns; i++)
        if (ml_top_is_omp(ml_profile_str(p, t->fns[i].func)) && t->fns[i].line &&
            t->fns[i].into == ML_TOP_NO_PARENT)
            t->fns[i].parent = omp_parent(p, &t->fns[i]);
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
