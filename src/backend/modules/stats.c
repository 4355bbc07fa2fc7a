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
 * worker counts the records whose word 1 it owns.
 */
struct cell {
    uint64_t events, sum;
};

struct stats {
    struct cell *c; /* [nthreads][256] */
    uint32_t nthreads;
    int nomem;
};

static void *stats_init(struct ml_bworker *w)
{
    (void)w;
    return calloc(1, sizeof(struct stats));
}

static struct cell *cell_of(struct stats *s, uint32_t thread, unsigned kind)
{
    if (thread >= s->nthreads) {
        uint32_t n = thread + 1 > s->nthreads * 2 ? thread + 1 : s->nthreads * 2;
        struct cell *c = realloc(s->c, (size_t)n * 256 * sizeof(*c));
        if (!c) {
            s->nomem = 1;
            return NULL;
        }
        memset(c + (size_t)s->nthreads * 256, 0, (size_t)(n - s->nthreads) * 256 * sizeof(*c));
        s->c = c;
        s->nthreads = n;
    }
    return &s->c[(size_t)thread * 256 + kind];
}

static void stats_event(void *st, struct ml_bworker *w, uint32_t thread, const uint64_t *rec)
{
    struct stats *s = st;
    struct cell *c = thread < s->nthreads ? &s->c[(size_t)thread * 256 + ML_Q_KIND(rec[0])]
                                          : cell_of(s, thread, ML_Q_KIND(rec[0]));

    (void)w;
    if (c) {
        c->events++;
        c->sum += rec[1];
    }
}

static int stats_merge(void *into, void *from)
{
    struct stats *a = into, *b = from;
    int rc = 0;

    for (uint32_t t = 0; t < b->nthreads && !rc; t++)
        for (unsigned k = 0; k < 256; k++) {
            const struct cell *y = &b->c[(size_t)t * 256 + k];
            struct cell *x;
            if (!y->events)
                continue;
            if (!(x = cell_of(a, t, k))) {
                rc = -ENOMEM;
                break;
            }
            x->events += y->events;
            x->sum += y->sum;
        }
    a->nomem |= b->nomem;
    free(b->c);
    free(b);
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
        for (unsigned k = 0; k < 256; k++) {
            const struct cell *c = &s->c[(size_t)t * 256 + k];
            if (!c->events)
                continue;
            total += c->events;
            fprintf(o->csv, "%u,%u,%" PRIu64 ",%" PRIu64 "\n", t, k, c->events, c->sum);
            fprintf(o->json, "%s\n  {\"thread\": %u, \"kind\": %u, \"events\": %" PRIu64
                    ", \"sum\": %" PRIu64 "}", sep, t, k, c->events, c->sum);
            if (o->table)
                fprintf(o->table, "%8u %6u %14" PRIu64 " %20" PRIu64 "\n", t, k, c->events,
                        c->sum);
            sep = ",";
        }
    fprintf(o->json, "],\n \"blobs\": [");
    sep = "";
    for (const struct ml_bblob *b = o->blobs; b; b = b->next) {
        uint64_t h = 0xcbf29ce484222325ull;
        fnv(&h, b->data, b->len);
        fprintf(o->json, "%s\n  {\"thread\": %u, \"tag\": %" PRIu64 ", \"bytes\": %" PRIu64
                ", \"fnv1a\": %" PRIu64 "}", sep, b->thread, b->tag, b->len, h);
        if (o->table)
            fprintf(o->table, "blob tag %" PRIu64 " from thread %u: %" PRIu64 " bytes\n",
                    b->tag, b->thread, b->len);
        sep = ",";
    }
    fprintf(o->json, "]}");
    if (o->table)
        fprintf(o->table, "%8s %6s %14" PRIu64 "\n", "total", "", total);
    return s->nomem ? -ENOMEM : 0;
}

static void stats_fini(void *st)
{
    struct stats *s = st;

    free(s->c);
    free(s);
}

static const struct ml_bhandler stats_handlers[] = {
    {ML_BKIND_ANY, ML_BPART_ADDR, stats_event},
    {0},
};

const struct ml_module ml_module_stats = {
    .name = "stats",
    .summary = "events received per thread and kind, with a checksum (checks the queue)",
    .handlers = stats_handlers,
    .init = stats_init,
    .merge = stats_merge,
    .report = stats_report,
    .fini = stats_fini,
};
