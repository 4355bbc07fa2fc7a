/* Module 'value': per load, whether its value is constant, from a small set, strided or varied. */
#include "backend/backend.h"
#include "backend/sites.h"
#include "backend/vprof.h"
#include "format/csv.h"
#include "format/events.h"
#include "format/json.h"
#include "format/queue.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/*
 * Loads only, with their values (the instrumenter sends no stores for this
 * module). Each load site has a value profile (vprof.h): distinct values
 * with counts up to ML_VPROF_SET_MAX, and per thread whether the thread's
 * values form a progression. Data-parallel by instruction: a site's events
 * all go to one worker, in each thread's order, so 1 and N workers give the
 * same profiles. Rows are per load instruction, not folded by source line
 * as other modules do: one line holds several loads (at -O0 the pointer and
 * the element of p[i], at the same column), and copies of one load made by
 * unrolling each see their own share of the values.
 */
#define MAX_SITES (1u << 22) /* as the table reader: more cannot be named */

static const char *const type_name[] = {"", "int", "float", "double", "pointer"};

struct value {
    struct ml_vprof **site; /* by global site id */
    uint32_t nsite;
    uint64_t bad_ids; /* loads of site ids beyond MAX_SITES */
    int nomem;
};

static void *va_init(struct ml_bworker *w)
{
    (void)w;
    return calloc(1, sizeof(struct value));
}

static __attribute__((noinline)) struct ml_vprof *prof_new(struct value *s, uint64_t id)
{
    if (id >= MAX_SITES) {
        s->bad_ids++;
        return NULL;
    }
    if (id >= s->nsite) {
        uint32_t n = s->nsite ? s->nsite : 1024;
        struct ml_vprof **t;
        while (n <= id)
            n *= 2;
        if (!(t = realloc(s->site, (size_t)n * sizeof(*t)))) {
            s->nomem = 1;
            return NULL;
        }
        memset(t + s->nsite, 0, (size_t)(n - s->nsite) * sizeof(*t));
        s->site = t;
        s->nsite = n;
    }
    if (!s->site[id] && !(s->site[id] = calloc(1, sizeof(struct ml_vprof))))
        s->nomem = 1;
    return s->site[id];
}

/* The profile of site id, created on first use; NULL: bad id or no memory (counted). */
static inline struct ml_vprof *prof(struct value *s, uint64_t id)
{
    return id < s->nsite && s->site[id] ? s->site[id] : prof_new(s, id);
}

static void on_load(void *st, struct ml_bworker *w, uint32_t thread, const uint64_t *rec)
{
    struct ml_vprof *p = prof(st, ML_Q_ID(rec[0]));
    unsigned size = ML_Q_AUX(rec[0]);

    (void)w;
    if (!p)
        return;
    /* a value unit follows the address only for scalars of 1..8 bytes (size in aux) */
    if (size && size <= 8 && ML_Q_EXTRA(rec[0]) && rec[3] >= ML_Q_VAL_INT && rec[3] <= ML_Q_VAL_PTR)
        ml_vprof_add(p, thread, rec[2], (unsigned)rec[3], size);
    else if (!p->novalue++ && !p->n)
        p->size = size; /* 0: 64 bytes or more */
}

static void va_fini(void *st)
{
    struct value *s = st;

    for (uint32_t i = 0; i < s->nsite; i++)
        if (s->site[i]) {
            ml_vprof_fini(s->site[i]);
            free(s->site[i]);
        }
    free(s->site);
    free(s);
}

/* Folds p into s's entry of id and frees p. */
static void fold(struct value *s, uint64_t id, struct ml_vprof *p)
{
    struct ml_vprof *into = prof(s, id);

    if (into)
        ml_vprof_merge(into, p);
    s->nomem |= p->nomem;
    ml_vprof_fini(p);
    free(p);
}

static int va_merge(void *into, void *from)
{
    struct value *a = into, *b = from;

    for (uint32_t i = 0; i < b->nsite; i++)
        if (b->site[i]) {
            struct ml_vprof *p = b->site[i];
            b->site[i] = NULL;
            fold(a, i, p);
        }
    a->bad_ids += b->bad_ids;
    a->nomem |= b->nomem;
    va_fini(b);
    return a->nomem ? -ENOMEM : 0;
}

struct row {
    uint32_t id;
    struct ml_vprof *p;
};

static int by_count(const void *x, const void *y)
{
    const struct row *a = x, *b = y;
    uint64_t na = a->p->n + a->p->novalue, nb = b->p->n + b->p->novalue;

    if (na != nb)
        return na < nb ? 1 : -1;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* "v:c;v:c" of a set, most frequent first (ties: as ml_vprof_class picks). */
static void set_text(const struct ml_vprof *p, char *buf, size_t len)
{
    uint32_t ord[ML_VPROF_SET_MAX];
    size_t k = 0;

    *buf = 0;
    for (uint32_t i = 0; i < p->nvals; i++) {
        uint32_t j = i;
        for (; j > 0; j--) {
            const uint32_t o = ord[j - 1];
            if (p->cnt[o] > p->cnt[i] || (p->cnt[o] == p->cnt[i] && p->val[o] < p->val[i]))
                break;
            ord[j] = o;
        }
        ord[j] = i;
    }
    for (uint32_t i = 0; i < p->nvals && k + 1 < len; i++) {
        char v[64];
        ml_vprof_fmt(p, p->val[ord[i]], 0, v, sizeof(v));
        k += (size_t)snprintf(buf + k, len - k, "%s%s:%" PRIu64, i ? ";" : "", v, p->cnt[ord[i]]);
    }
}

static void write_row(struct ml_bout *o, const struct ml_bsites *t, const struct row *r, int first)
{
    const struct ml_vprof *p = r->p;
    uint64_t value, stride;
    enum ml_vkind k = ml_vprof_class(p, &value, &stride);
    const struct ml_bsite *site = r->id < t->n ? &t->s[r->id] : NULL;
    const char *kind = ml_vkind_name(k), *type = type_name[k == ML_VK_NONE ? 0 : p->type];
    char load[512], vtxt[64] = "", stxt[64] = "", dist[16], set[1024] = "";

    ml_bsites_where(t, r->id, load, sizeof(load));
    if (k != ML_VK_NONE && k != ML_VK_VARIED)
        ml_vprof_fmt(p, value, 0, vtxt, sizeof(vtxt));
    if (k == ML_VK_STRIDED)
        ml_vprof_fmt(p, stride, 1, stxt, sizeof(stxt));
    if (p->overflow || p->nomem)
        snprintf(dist, sizeof(dist), ">%u", ML_VPROF_SET_MAX);
    else
        snprintf(dist, sizeof(dist), "%u", p->nvals);
    if (k == ML_VK_CONSTANT || k == ML_VK_SET)
        set_text(p, set, sizeof(set));
    ml_csv_str(o->csv, load);
    fprintf(o->csv, ",%s,%s,%s,%" PRIu64 ",", kind, vtxt, stxt, p->n + p->novalue);
    ml_csv_str(o->csv, ml_bsites_func(t, r->id));
    fprintf(o->csv, ",%u,%s,%u,%s,%s,%u\n", site ? site->column : 0, type, p->size, dist, set,
            p->nseq);
    fprintf(o->json, "%s\n  {\"load\": ", first ? "" : ",");
    ml_json_str(o->json, load);
    fprintf(o->json, ", \"kind\": \"%s\", \"value\": ", kind);
    ml_json_str(o->json, vtxt);
    fprintf(o->json, ", \"stride\": ");
    ml_json_str(o->json, stxt);
    fprintf(o->json, ", \"count\": %" PRIu64 ", \"function\": ", p->n + p->novalue);
    ml_json_str(o->json, ml_bsites_func(t, r->id));
    fprintf(o->json,
            ", \"column\": %u, \"type\": \"%s\", \"size\": %u, \"distinct\": \"%s\", \"values\": ",
            site ? site->column : 0, type, p->size, dist);
    ml_json_str(o->json, set);
    fprintf(o->json, ", \"threads\": %u}", p->nseq);
    if (o->table)
        fprintf(o->table, "%-28s %-8s %20s %12s %12" PRIu64 " %8s  %s\n", load, kind, vtxt, stxt,
                p->n + p->novalue, dist, ml_bsites_func(t, r->id));
}

static int va_report(void *st, struct ml_bout *o)
{
    struct value *s = st;
    struct ml_bsites t = {0};
    uint32_t n = 0;
    struct row *rows = NULL;
    int rc = ml_bsites_load(&t, o->blobs), valued = 0;

    if (rc)
        goto out;
    if (!(rows = malloc(((size_t)s->nsite + 1) * sizeof(*rows)))) {
        rc = -ENOMEM;
        goto out;
    }
    for (uint32_t i = 0; i < s->nsite; i++)
        if (s->site[i])
            rows[n++] = (struct row){i, s->site[i]};
    qsort(rows, n, sizeof(*rows), by_count);
    fprintf(o->csv,
            "load,kind,value,stride,count,function,column,type,size,distinct,values,threads\n");
    fprintf(o->json, "{\"set_max\": %u, \"rows\": [", ML_VPROF_SET_MAX);
    if (o->table)
        fprintf(o->table, "%-28s %-8s %20s %12s %12s %8s  %s\n", "load", "kind", "value", "stride",
                "count", "distinct", "function");
    for (uint32_t i = 0; i < n; i++) {
        write_row(o, &t, &rows[i], !i);
        valued |= rows[i].p->n != 0;
    }
    fprintf(o->json, "],\n \"bad_site_ids\": %" PRIu64 ", \"bad_tables\": %u}", s->bad_ids, t.bad);
    /* loads arrived but not one value: built for another module */
    if (o->table && n && !valued)
        fprintf(o->table, "no load carried a value: build the program with 'memlens cc "
                          "--events=value' (and -fno-vectorize to see vectorised loops)\n");
    rc = s->nomem ? -ENOMEM : 0;
out:
    free(rows);
    ml_bsites_free(&t);
    return rc;
}

/*
 * The records of one thread, walked here rather than with a call per event
 * (a value build sends little but two-unit load records, which the driver's
 * walk takes on its slow path); a load goes to the worker owning its id, in
 * the thread's order, as with a handler partitioned by id.
 */
static uint32_t va_chunk(void *st, struct ml_bworker *w, uint32_t thread, const uint8_t *data,
                         uint32_t len, uint64_t *records)
{
    const uint32_t me = w->index, n = w->n;
    uint32_t off = 0;
    uint64_t count = 0;

    while (off < len) {
        const uint64_t *rec = (const uint64_t *)(const void *)(data + off);
        const unsigned kind = ML_Q_KIND(rec[0]);
        if (__builtin_expect(kind == ML_EV_LOAD_VALUE && !ML_Q_EXTRA(rec[0]), 1)) {
            /* a value build: the value in word 1, its size and type in aux */
            off += ML_Q_UNIT;
            count++;
            if (n == 1 || ml_bpart_id(ML_Q_ID(rec[0]), n) == me) {
                struct ml_vprof *p = prof(st, ML_Q_ID(rec[0]));
                unsigned aux = ML_Q_AUX(rec[0]);
                if (p)
                    ml_vprof_add(p, thread, rec[1], ML_Q_VAL_TYPE(aux), ML_Q_VAL_SIZE(aux));
            }
            continue;
        }
        if (kind == ML_EV_LOAD && ML_Q_EXTRA(rec[0]) == 1 && len - off >= 2 * ML_Q_UNIT) {
            off += 2 * ML_Q_UNIT;
        } else {
            uint32_t r = ml_q_record_len(data, off, len);
            if (!r)
                break;
            off += r;
            if (kind == ML_Q_KIND_BLOB)
                continue;
        }
        count++;
        if (kind == ML_EV_LOAD && (n == 1 || ml_bpart_id(ML_Q_ID(rec[0]), n) == me))
            on_load(st, w, thread, rec); /* with its address: another module's build */
    }
    *records += count;
    return off;
}

const struct ml_module ml_module_value = {
    .name = "value",
    .summary = "per load: constant, a small set of values, strided (per thread) or varied",
    .ev_kinds = ML_BEV(ML_EV_LOAD),
    .ev_fields = ML_EVF_SIZE | ML_EVF_VALUE, /* no address: loads send ML_EV_LOAD_VALUE */
    .init = va_init,
    .merge = va_merge,
    .report = va_report,
    .fini = va_fini,
    .chunk = va_chunk,
};
