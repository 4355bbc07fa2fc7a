/* memlens report --merge: profiles of one program summed per thread index (see merge.h). */
#include "report/merge.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * The sums of one thread index over the group's profiles. The records that
 * sum exited threads (EXITED) are summed apart, under EXITED_KEY, whatever
 * their index in each profile.
 */
#define EXITED_KEY UINT32_MAX

struct mthread {
    uint32_t index;               /* or EXITED_KEY */
    uint64_t exited;              /* threads the EXITED records sum */
    uint64_t *counts;             /* [nunits] */
    struct ml_prof_rstat *rstats; /* [nregions] */
    uint64_t *events;             /* [nregions * nevents], NULL without events */
    uint64_t *exact;              /* [nunits * ML_NCLASS], NULL outside exact mode */
    uint64_t *timed;              /* [nregions] executions that read the clock */
    uint64_t *timed_ticks;        /* [nregions] their ticks, in ns */
};

struct group {
    unsigned char *key; /* canonical tables (key_of) */
    size_t keylen;
    uint64_t hash;
    struct ml_profile *tmpl; /* the group's first profile: its tables are the merged one's */
    struct ml_profile prof;  /* the merged profile; its threads are rebuilt on request */
    struct mthread *mt;      /* sorted by index */
    size_t nmt, capmt;
    uint64_t *ticks;          /* [nregions]: sum of the profiles' total ticks, in ns */
    double *cal;              /* [nregions]: same for calibrated ticks; < 0 once one is unknown */
    uint32_t *meta;           /* key, value pairs of tmpl's META that all profiles share */
    double incr_ns, timer_ns; /* sums over profiles with a CALIB section (thousandths of ns) */
    uint64_t ncalib;
    struct ml_prof_calib calib; /* their mean */
    int no_clock;               /* some profile has no clock rate */
    char *name;                 /* the program, told apart from other builds of it */
    unsigned char *tick_unit;   /* [nunits]: the unit counts clock ticks (ML_UI_NOTSEEN_TICKS) */
};

/* A growing byte buffer for canonical keys; err is set once an allocation failed. */
struct buf {
    unsigned char *b;
    size_t len, cap;
    int err;
};

struct ml_merge {
    struct group *g;
    size_t n, cap;
    struct buf key; /* the key of the profile being added, reused from one to the next */
};

static void put(struct buf *b, const void *p, size_t n)
{
    if (b->err || !n)
        return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        unsigned char *nb;
        while (cap < b->len + n)
            cap *= 2;
        nb = realloc(b->b, cap);
        if (!nb) {
            b->err = 1;
            return;
        }
        b->b = nb;
        b->cap = cap;
    }
    memcpy(b->b + b->len, p, n);
    b->len += n;
}

static void put_u64(struct buf *b, uint64_t v)
{
    put(b, &v, sizeof(v));
}

static void put_str(struct buf *b, const char *s)
{
    put(b, s, strlen(s) + 1);
}

/*
 * What makes profiles of the same program: their tables with strings
 * resolved (string offsets differ between runs: META values such as the host
 * come first in the string table).
 */
static int key_of(const struct ml_profile *p, struct buf *b)
{
    const char *prog = ml_profile_meta(p, "program");

    put_str(b, prog ? prog : "");
    put_u64(b, p->nregions);
    for (uint64_t i = 0; i < p->nregions; i++)
        put_str(b, ml_profile_str(p, p->regions[i]));
    put_u64(b, p->nregset_words);
    put(b, p->regsets, p->nregset_words * 4);
    put_u64(b, p->nmodules);
    for (uint64_t i = 0; i < p->nmodules; i++) {
        put_str(b, ml_profile_str(p, p->modules[i].name));
        put_u64(b, p->modules[i].first_unit);
        put_u64(b, p->modules[i].nunits);
    }
    put_u64(b, p->nunits);
    for (uint64_t i = 0; i < p->nunits; i++) {
        const struct ml_prof_unit *u = &p->units[i];
        uint32_t fixed[4] = {u->kind, u->module, u->line, u->regset};
        put(b, fixed, sizeof(fixed));
        put_str(b, ml_profile_str(p, u->func));
        put_str(b, ml_profile_str(p, u->file));
        put(b, u->facts, sizeof(u->facts));
    }
    put_u64(b, p->ncalls);
    for (uint64_t i = 0; i < p->ncalls; i++) {
        put_u64(b, p->calls[i].unit);
        put_str(b, ml_profile_str(p, p->calls[i].callee));
        put_u64(b, p->calls[i].per_exec);
    }
    put_u64(b, p->nentries);
    put(b, p->entries, p->nentries * 4);
    put_u64(b, p->nevents);
    for (uint32_t e = 0; e < p->nevents; e++)
        put_str(b, p->event_names[e]);
    put_u64(b, p->nuinfo);
    for (uint64_t i = 0; i < p->nuinfo; i++) {
        uint32_t fixed[2] = {p->uinfo[i].unit, p->uinfo[i].kind};
        put(b, fixed, sizeof(fixed));
        put_str(b, ml_profile_str(p, p->uinfo[i].name));
    }
    put_u64(b, p->rflags ? p->nregions : 0);
    if (p->rflags)
        put(b, p->rflags, p->nregions * 4);
    /* Exact and counting builds of one program stay apart: a partial exact sum would mislead. */
    put_u64(b, (uint64_t)p->exact);
    return b->err ? -ENOMEM : 0;
}

/*
 * FNV-1a over 64-bit words (then the tail bytes): a quick filter before the
 * keys are compared whole, and a short name for a group's tables.
 */
static uint64_t fnv1a(const unsigned char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull, w;
    size_t i = 0;

    for (; i + 8 <= n; i += 8) {
        memcpy(&w, s + i, 8);
        h = (h ^ w) * 0x100000001b3ull;
    }
    for (; i < n; i++)
        h = (h ^ s[i]) * 0x100000001b3ull;
    return h;
}

/* Room for one more of n elements of size bytes in *p (capacity *cap, doubling): 0 or -ENOMEM. */
static int grow(void **p, size_t *cap, size_t n, size_t size)
{
    size_t c = *cap ? 2 * *cap : 8;
    void *np;

    if (n < *cap)
        return 0;
    np = realloc(*p, c * size);
    if (!np)
        return -ENOMEM;
    *p = np;
    *cap = c;
    return 0;
}

struct ml_merge *ml_merge_new(void)
{
    return calloc(1, sizeof(struct ml_merge));
}

static void group_free(struct group *g)
{
    for (size_t t = 0; t < g->nmt; t++) {
        free(g->mt[t].counts);
        free(g->mt[t].rstats);
        free(g->mt[t].events);
        free(g->mt[t].exact);
        free(g->mt[t].timed);
        free(g->mt[t].timed_ticks);
    }
    free(g->mt);
    free(g->prof.threads);
    free(g->ticks);
    free(g->cal);
    free(g->meta);
    free(g->key);
    free(g->tick_unit);
    free(g->name);
    ml_profile_free(g->tmpl);
}

void ml_merge_free(struct ml_merge *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n; i++)
        group_free(&m->g[i]);
    free(m->g);
    free(m->key.b);
    free(m);
}

size_t ml_merge_count(const struct ml_merge *m)
{
    return m->n;
}

/* A new group whose tables are those of p (which it keeps), with a copy of key. */
static struct group *group_new(struct ml_merge *m, struct ml_profile *p, const struct buf *key,
                               uint64_t hash)
{
    struct group *g;
    struct ml_profile *q;

    if (grow((void **)&m->g, &m->cap, m->n, sizeof(*m->g)))
        return NULL;
    g = &m->g[m->n];
    memset(g, 0, sizeof(*g));
    g->ticks = calloc(p->nregions + 1, sizeof(*g->ticks));
    g->cal = calloc(p->nregions + 1, sizeof(*g->cal));
    g->meta = calloc(2 * p->nmeta + 1, sizeof(*g->meta));
    g->key = malloc(key->len + 1);
    g->tick_unit = calloc(p->nunits + 1, 1);
    if (!g->ticks || !g->cal || !g->meta || !g->key || !g->tick_unit) {
        free(g->ticks);
        free(g->cal);
        free(g->meta);
        free(g->key);
        free(g->tick_unit);
        return NULL;
    }
    m->n++;
    for (uint64_t i = 0; i < p->nuinfo; i++)
        g->tick_unit[p->uinfo[i].unit] = p->uinfo[i].kind == ML_UI_NOTSEEN_TICKS;
    if (p->nmeta)
        memcpy(g->meta, p->meta, 2 * p->nmeta * sizeof(*g->meta));
    memcpy(g->key, key->b, key->len);
    g->keylen = key->len;
    g->hash = hash;
    g->tmpl = p;
    q = &g->prof;
    q->hdr = p->hdr;
    q->hdr.pid = q->hdr.ppid = 0;
    q->hdr.token = 0; /* one per process: a sum has none, nor a rank */
    q->hdr.rank = q->hdr.nranks = 0;
    q->hdr.wall_ns = 0;
    q->hdr.flags = 0;
    q->strtab = p->strtab;
    q->strtab_len = p->strtab_len;
    q->meta = g->meta;
    q->nmeta = p->nmeta;
    q->regions = p->regions;
    q->nregions = p->nregions;
    q->regsets = p->regsets;
    q->nregset_words = p->nregset_words;
    q->units = p->units;
    q->nunits = p->nunits;
    q->calls = p->calls;
    q->ncalls = p->ncalls;
    q->inl = p->inl;
    q->ninl = p->ninl;
    q->uinfo = p->uinfo;
    q->nuinfo = p->nuinfo;
    q->rflags = p->rflags;
    q->modules = p->modules;
    q->nmodules = p->nmodules;
    q->nevents = p->nevents;
    q->event_names = p->event_names;
    q->entries = p->entries;
    q->nentries = p->nentries;
    q->exact = p->exact;
    q->merged_fingerprint = hash;
    q->merged_ticks = g->ticks;
    q->merged_cal = g->cal;
    return g;
}

/* The sums of thread index idx, made on first sight (kept sorted by index). */
static struct mthread *thread_of(struct group *g, uint32_t idx)
{
    size_t lo = 0, hi = g->nmt;
    struct mthread *t;

    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (g->mt[mid].index == idx)
            return &g->mt[mid];
        if (g->mt[mid].index < idx)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (grow((void **)&g->mt, &g->capmt, g->nmt, sizeof(*g->mt)))
        return NULL;
    t = &g->mt[lo];
    memmove(t + 1, t, (g->nmt - lo) * sizeof(*t));
    memset(t, 0, sizeof(*t));
    t->index = idx;
    t->counts = calloc(g->prof.nunits + 1, sizeof(*t->counts));
    t->rstats = calloc(g->prof.nregions + 1, sizeof(*t->rstats));
    t->timed = calloc(g->prof.nregions + 1, sizeof(*t->timed));
    t->timed_ticks = calloc(g->prof.nregions + 1, sizeof(*t->timed_ticks));
    if (g->prof.nevents)
        t->events = calloc(g->prof.nregions * g->prof.nevents + 1, sizeof(*t->events));
    if (g->prof.exact)
        t->exact = calloc(g->prof.nunits * ML_NCLASS + 1, sizeof(*t->exact));
    g->nmt++;
    if (!t->counts || !t->rstats || !t->timed || !t->timed_ticks ||
        (g->prof.nevents && !t->events) || (g->prof.exact && !t->exact))
        return NULL; /* freed with the group */
    return t;
}

/* A META key whose value differs in p no longer describes the group: it is dropped. */
static void keep_common_meta(struct group *g, const struct ml_profile *p)
{
    const struct ml_profile *t = g->tmpl;
    uint64_t n = 0;

    for (uint64_t i = 0; i < g->prof.nmeta; i++) {
        const char *v = ml_profile_meta(p, ml_profile_str(t, g->meta[2 * i]));
        if (v && !strcmp(v, ml_profile_str(t, g->meta[2 * i + 1]))) {
            g->meta[2 * n] = g->meta[2 * i];
            g->meta[2 * n + 1] = g->meta[2 * i + 1];
            n++;
        }
    }
    g->prof.nmeta = n;
}

/* Ticks times ns per tick, rounded; saturates (a corrupt count must not be undefined). */
static uint64_t to_ns(uint64_t ticks, double ns)
{
    double x = (double)ticks * ns + 0.5;

    return x >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)x;
}

/* Adds p's figures to g; ticks become nanoseconds through p's own clock rate. */
static int fold(struct group *g, const struct ml_profile *p, const struct ml_report *r)
{
    double ns = p->hdr.tsc_hz ? 1e9 / (double)p->hdr.tsc_hz : 0;
    struct ml_profile *q = &g->prof;

    if (!p->hdr.tsc_hz)
        g->no_clock = 1;
    for (uint64_t t = 0; t < p->nthreads; t++) {
        const struct ml_profile_thread *pt = &p->threads[t];
        struct mthread *mt = thread_of(g, pt->exited ? EXITED_KEY : pt->index);
        if (!mt)
            return -ENOMEM;
        mt->exited += pt->exited;
        /* Time in not-seen calls becomes ns like the regions' time it is a share of. */
        for (uint64_t u = 0; u < q->nunits; u++)
            mt->counts[u] += g->tick_unit[u] ? to_ns(pt->counts[u], ns) : pt->counts[u];
        for (uint64_t reg = 0; reg < q->nregions; reg++) {
            mt->rstats[reg].entries += pt->rstats[reg].entries;
            mt->rstats[reg].measured += pt->rstats[reg].measured;
            mt->rstats[reg].ticks += to_ns(pt->rstats[reg].ticks, ns);
            mt->timed[reg] += pt->timed ? pt->timed[reg] : pt->rstats[reg].measured;
            mt->timed_ticks[reg] +=
                to_ns(pt->timed_ticks ? pt->timed_ticks[reg] : pt->rstats[reg].ticks, ns);
        }
        for (uint64_t e = 0; pt->events && e < q->nregions * q->nevents; e++)
            mt->events[e] += pt->events[e];
        for (uint64_t x = 0; pt->exact && x < q->nunits * ML_NCLASS; x++)
            mt->exact[x] += pt->exact[x];
    }
    for (uint64_t reg = 0; reg < q->nregions; reg++) {
        const struct ml_rstats *tot = &r->totals[reg];
        if (!tot->timed)
            continue;
        g->ticks[reg] += to_ns(tot->ticks, ns);
        if (tot->cal_ticks < 0)
            g->cal[reg] = -1;
        else if (g->cal[reg] >= 0)
            g->cal[reg] += tot->cal_ticks * ns;
    }
    if (p->calib) {
        g->incr_ns += (double)p->calib->incr_mticks * ns;
        g->timer_ns += (double)p->calib->timer_mticks * ns;
        g->ncalib++;
    }
    keep_common_meta(g, p);
    if (!q->merged || p->hdr.start_ns < q->hdr.start_ns)
        q->hdr.start_ns = p->hdr.start_ns;
    if (p->hdr.sample > q->hdr.sample)
        q->hdr.sample = p->hdr.sample;
    q->hdr.wall_ns += p->hdr.wall_ns;
    q->hdr.flags |= p->hdr.flags & ML_PROF_F_SIGNAL; /* not ML_PROF_F_RANK */
    q->merged++;
    return 0;
}

int ml_merge_add(struct ml_merge *m, struct ml_profile *p, const struct ml_report *r)
{
    struct buf *key = &m->key;
    struct group *g = NULL;
    uint64_t hash;
    int rc;

    key->len = 0;
    key->err = 0;
    rc = key_of(p, key);
    if (rc)
        goto out;
    hash = fnv1a(key->b, key->len);
    for (size_t i = 0; i < m->n && !g; i++)
        if (m->g[i].hash == hash && m->g[i].keylen == key->len &&
            !memcmp(m->g[i].key, key->b, key->len))
            g = &m->g[i];
    if (!g) {
        g = group_new(m, p, key, hash);
        if (!g) {
            rc = -ENOMEM;
            goto out;
        }
    }
    rc = fold(g, p, r);
    if (g->tmpl == p)
        p = NULL; /* the group keeps its first profile */
out:
    ml_profile_free(p);
    return rc;
}

/* The program's path; "path [tables <fingerprint>]" when another group has the same path. */
static const char *group_name(struct ml_merge *m, struct group *g)
{
    const char *prog = ml_profile_meta(g->tmpl, "program");
    int twin = 0;

    if (!prog || !*prog)
        prog = "(unknown program)";
    for (size_t k = 0; k < m->n && !twin; k++) {
        const char *other = ml_profile_meta(m->g[k].tmpl, "program");
        twin = &m->g[k] != g && other && !strcmp(other, prog);
    }
    free(g->name);
    g->name = NULL;
    if (twin && asprintf(&g->name, "%s [tables %016llx]", prog, (unsigned long long)g->hash) < 0)
        g->name = NULL;
    return g->name ? g->name : twin ? NULL : prog;
}

const struct ml_profile *ml_merge_profile(struct ml_merge *m, size_t i, const char **name)
{
    struct group *g = &m->g[i];
    struct ml_profile *q = &g->prof;
    struct ml_profile_thread *th = realloc(q->threads, (g->nmt + 1) * sizeof(*th));

    if (!th)
        return NULL;
    q->threads = th;
    q->nthreads = g->nmt;
    for (size_t t = 0; t < g->nmt; t++) {
        const struct mthread *mt = &g->mt[t];
        /* The exited threads' row (sorted last) takes the index after the others'. */
        uint32_t idx = mt->index != EXITED_KEY ? mt->index : t ? g->mt[t - 1].index + 1 : 0;
        th[t] = (struct ml_profile_thread){.tid = 0,
                                           .index = idx,
                                           .exited = mt->exited,
                                           .counts = mt->counts,
                                           .rstats = mt->rstats,
                                           .events = mt->events,
                                           .timed = mt->timed,
                                           .timed_ticks = mt->timed_ticks,
                                           .exact = mt->exact};
    }
    q->hdr.tsc_hz = g->no_clock ? 0 : 1000000000ull;
    q->calib = NULL;
    if (g->ncalib) {
        g->calib.incr_mticks = to_ns(1, g->incr_ns / (double)g->ncalib);
        g->calib.timer_mticks = to_ns(1, g->timer_ns / (double)g->ncalib);
        q->calib = &g->calib;
    }
    *name = group_name(m, g);
    return *name ? q : NULL;
}
