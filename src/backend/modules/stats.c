/* Module 'stats': what arrived through the queue, per thread and event kind, with a checksum. */
#include "backend/backend.h"
#include "format/json.h"
#include "format/queue.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/*
 * Counts every record by (program thread, kind) and sums its word 1 (mod
 * 2^64): a check that the queue delivers every event once, unchanged, and a
 * first look at a program's event mix. Data-parallel by address: each
 * worker counts the records whose word 1 it owns, or, when the driver deals
 * chunks out whole (stats alone, or with other chunk_any modules), every
 * record of the chunks it gets. It reads whole chunks, so that 'memlens
 * profile -m stats' measures the queue rather than a call per event
 * (bench/queue.sh).
 */
struct cell {
    uint64_t events, sum;
};

struct stats {
    struct cell **rows; /* [nthreads], each NULL or 256 cells */
    uint32_t nthreads;
    int nomem;
};

static void *stats_init(struct ml_bworker *w)
{
    (void)w;
    return calloc(1, sizeof(struct stats));
}

/* Thread t's 256 cells, created on first use; NULL when out of memory. */
static struct cell *row_of(struct stats *s, uint32_t t)
{
    if (t >= s->nthreads) {
        uint32_t n = t + 1 > s->nthreads * 2 ? t + 1 : s->nthreads * 2;
        struct cell **r = realloc(s->rows, (size_t)n * sizeof(*r));
        if (!r) {
            s->nomem = 1;
            return NULL;
        }
        memset(r + s->nthreads, 0, (size_t)(n - s->nthreads) * sizeof(*r));
        s->rows = r;
        s->nthreads = n;
    }
    if (!s->rows[t] && !(s->rows[t] = calloc(256, sizeof(struct cell))))
        s->nomem = 1;
    return s->rows[t];
}

/* A few instructions per record, no call: the queue's own speed shows through. */
static uint32_t stats_chunk(void *st, struct ml_bworker *w, uint32_t thread, const uint8_t *data,
                            uint32_t len, uint64_t *records)
{
    struct cell *row = row_of(st, thread);
    const uint32_t me = w->index, n = w->whole ? 1 : w->n; /* dealt chunks are all ours */
    uint32_t off = 0;
    uint64_t count = 0;

    if (!row)
        return len;
    while (off < len) {
        const uint64_t *rec = (const uint64_t *)(const void *)(data + off);
        const unsigned kind = ML_Q_KIND(rec[0]);
        int blob;
        uint32_t r = ml_bchunk_rec(data, off, len, &blob);
        uint64_t own;
        if (!r)
            break;
        off += r;
        if (blob)
            continue;
        count++;
        own = n == 1 || ml_bpart_addr(rec[1], n) == me;
        row[kind].events += own;
        row[kind].sum += rec[1] & -own;
    }
    *records += count;
    return off;
}

static void stats_fini(void *st)
{
    struct stats *s = st;

    for (uint32_t t = 0; t < s->nthreads; t++)
        free(s->rows[t]);
    free(s->rows);
    free(s);
}

static int stats_merge(void *into, void *from)
{
    struct stats *a = into, *b = from;
    int rc = 0;

    for (uint32_t t = 0; t < b->nthreads && !rc; t++) {
        struct cell *x;
        if (!b->rows[t])
            continue;
        if (!(x = row_of(a, t))) {
            rc = -ENOMEM;
            break;
        }
        for (unsigned k = 0; k < 256; k++) {
            x[k].events += b->rows[t][k].events;
            x[k].sum += b->rows[t][k].sum;
        }
    }
    a->nomem |= b->nomem;
    stats_fini(b);
    return rc;
}

static void fnv(uint64_t *h, const uint8_t *p, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        *h = (*h ^ p[i]) * 0x100000001b3ull;
}

static int stats_report(void *st, struct ml_bout *o)
{
    struct stats *s = st;
    uint64_t total = 0;
    const char *sep = "";

    fprintf(o->csv, "thread,kind,events,sum\n");
    fprintf(o->json, "{\"rows\": [");
    if (o->table)
        fprintf(o->table, "%8s %6s %14s %20s\n", "thread", "kind", "events", "sum");
    for (uint32_t t = 0; t < s->nthreads; t++)
        for (unsigned k = 0; k < 256 && s->rows[t]; k++) {
            const struct cell *c = &s->rows[t][k];
            if (!c->events)
                continue;
            total += c->events;
            fprintf(o->csv, "%u,%u,%" PRIu64 ",%" PRIu64 "\n", t, k, c->events, c->sum);
            fprintf(o->json,
                    "%s\n  {\"thread\": %u, \"kind\": %u, \"events\": %" PRIu64
                    ", \"sum\": %" PRIu64 "}",
                    sep, t, k, c->events, c->sum);
            if (o->table)
                fprintf(o->table, "%8u %6u %14" PRIu64 " %20" PRIu64 "\n", t, k, c->events, c->sum);
            sep = ",";
        }
    fprintf(o->json, "],\n \"blobs\": [");
    sep = "";
    for (const struct ml_bblob *b = o->blobs; b; b = b->next) {
        uint64_t h = 0xcbf29ce484222325ull;
        fnv(&h, b->data, b->len);
        fprintf(o->json,
                "%s\n  {\"thread\": %u, \"tag\": %" PRIu64 ", \"bytes\": %" PRIu64
                ", \"fnv1a\": %" PRIu64 "}",
                sep, b->thread, b->tag, b->len, h);
        if (o->table)
            fprintf(o->table, "blob tag %" PRIu64 " from thread %u: %" PRIu64 " bytes\n", b->tag,
                    b->thread, b->len);
        sep = ",";
    }
    fprintf(o->json, "]}");
    if (o->table)
        fprintf(o->table, "%8s %6s %14" PRIu64 "\n", "total", "", total);
    return s->nomem ? -ENOMEM : 0;
}

const struct ml_module ml_module_stats = {
    .name = "stats",
    .summary = "events received per thread and kind, with a checksum (checks the queue)",
    .init = stats_init,
    .merge = stats_merge,
    .report = stats_report,
    .fini = stats_fini,
    .chunk = stats_chunk,
    .chunk_any = 1,
};
