/* Analysis driver: streams each trace chunk by chunk, merging its threads' records by time. */
#include "analyze/analyze.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

const struct ml_analysis *const ml_analyses[] = {&ml_an_summary, &ml_an_dump, &ml_an_select, NULL};

const struct ml_analysis *ml_analysis_find(const char *name)
{
    for (size_t i = 0; ml_analyses[i]; i++)
        if (!strcmp(ml_analyses[i]->name, name))
            return ml_analyses[i];
    return NULL;
}

static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return code;
}

/* One thread of a trace: its data chunks in sequence, the decoded one and a position in it. */
struct cursor {
    uint32_t thread;
    size_t *chunks;
    size_t nchunks, next;
    struct ml_trace_dec *dec;
    const struct ml_trace_rec *recs;
    size_t n, pos;
};

static int by_thread_seq(const void *a, const void *b, void *arg)
{
    const struct ml_trace *t = arg;
    const struct ml_trace_chunk *x = ml_trace_chunk(t, *(const size_t *)a),
                                *y = ml_trace_chunk(t, *(const size_t *)b);

    if (x->thread != y->thread)
        return x->thread < y->thread ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Decodes the thread's next chunk that decodes; 0 when there is none left. */
static int refill(struct ml_trace *t, struct cursor *c, const struct ml_an_opts *o, size_t *done,
                  size_t total)
{
    char err[300];

    while (c->pos >= c->n && c->next < c->nchunks) {
        size_t i = c->chunks[c->next++];
        size_t n;
        (*done)++;
        if (o->progress && (*done % 64 == 0 || *done == total))
            fprintf(stderr, "\rmemlens: %zu/%zu chunks", *done, total);
        if (ml_trace_decode(c->dec, i, &c->recs, &n, err, sizeof(err))) {
            if (o->warn)
                fprintf(o->warn, "memlens: '%s': %s; skipped\n", ml_trace_info(t)->path, err);
            continue;
        }
        c->n = n;
        c->pos = 0;
    }
    return c->pos < c->n;
}

/* Hands records [r, r + n) to every analysis, markers also to their marker callbacks. */
static int deliver(const struct ml_analysis *const *an, void **st, int nan,
                   const struct ml_an_input *in, const struct ml_trace_rec *r, size_t n)
{
    size_t from = 0;
    int rc;

    for (size_t i = 0; i <= n; i++) {
        if (i < n && !ml_ev_is_marker(r[i].kind))
            continue;
        for (int a = 0; a < nan && i > from; a++)
            if ((rc = an[a]->record(st[a], in, r + from, i - from)))
                return rc;
        if (i == n)
            break;
        for (int a = 0; a < nan; a++)
            if ((rc = an[a]->record(st[a], in, r + i, 1)) ||
                (an[a]->marker && (rc = an[a]->marker(st[a], in, r + i))))
                return rc;
        from = i + 1;
    }
    return 0;
}

static int run_trace(const char *path, int index, const struct ml_analysis *const *an, void **st,
                     int nan, const struct ml_an_opts *o, char *err, size_t errlen)
{
    struct ml_trace *t;
    struct cursor *cur = NULL;
    size_t *order = NULL, nc, ncur = 0, done = 0;
    struct ml_an_input in;
    int rc = ml_trace_open(path, &t, err, errlen);

    if (rc)
        return rc;
    in = (struct ml_an_input){t, ml_trace_info(t), index};
    for (size_t i = 0; o->warn && i < in.info->nproblems; i++)
        fprintf(o->warn, "memlens: '%s': %s\n", path, in.info->problems[i].what);
    nc = ml_trace_nchunks(t);
    order = calloc(nc + 1, sizeof(*order));
    cur = calloc(nc + 1, sizeof(*cur));
    if (!order || !cur) {
        rc = fail(err, errlen, -ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < nc; i++)
        order[i] = i;
    qsort_r(order, nc, sizeof(*order), by_thread_seq, t);
    for (size_t i = 0; i < nc;) {
        size_t j = i;
        uint32_t th = ml_trace_chunk(t, order[i])->thread;
        while (j < nc && ml_trace_chunk(t, order[j])->thread == th)
            j++;
        cur[ncur] = (struct cursor){.thread = th, .chunks = order + i, .nchunks = j - i};
        cur[ncur].dec = ml_trace_dec_new(t);
        if (!cur[ncur++].dec) {
            rc = fail(err, errlen, -ENOMEM, "out of memory");
            goto out;
        }
        i = j;
    }
    for (int a = 0; a < nan; a++)
        if (an[a]->begin && (rc = an[a]->begin(st[a], &in))) {
            fail(err, errlen, rc, "analysis '%s' failed on '%s'", an[a]->name, path);
            goto out;
        }
    for (;;) {
        struct cursor *best = NULL;
        uint64_t second = UINT64_MAX;
        size_t end;
        for (size_t k = 0; k < ncur; k++) {
            struct cursor *c = &cur[k];
            if (!refill(t, c, o, &done, nc))
                continue;
            if (!best || c->recs[c->pos].time < best->recs[best->pos].time) {
                if (best && best->recs[best->pos].time < second)
                    second = best->recs[best->pos].time;
                best = c;
            } else if (c->recs[c->pos].time < second) {
                second = c->recs[c->pos].time;
            }
        }
        if (!best)
            break;
        /* A run of the earliest thread up to the next thread's first record. */
        end = best->pos + 1;
        while (end < best->n && best->recs[end].time <= second)
            end++;
        rc = deliver(an, st, nan, &in, best->recs + best->pos, end - best->pos);
        if (rc) {
            fail(err, errlen, rc, "analysis failed on '%s'", path);
            goto out;
        }
        best->pos = end;
    }
    if (o->progress && nc)
        fputc('\n', stderr);
    for (int a = 0; a < nan && !rc; a++)
        if (an[a]->end && (rc = an[a]->end(st[a], &in)))
            fail(err, errlen, rc, "analysis '%s' failed on '%s'", an[a]->name, path);
out:
    for (size_t k = 0; k < ncur; k++)
        ml_trace_dec_free(cur[k].dec);
    free(cur);
    free(order);
    ml_trace_close(t);
    return rc;
}

int ml_an_run(const char *const *paths, int npaths, const struct ml_analysis *const *an, void **st,
              int nan, const struct ml_an_opts *o, char *err, size_t errlen)
{
    int rc = 0;

    for (int i = 0; i < npaths && !rc; i++)
        rc = run_trace(paths[i], i, an, st, nan, o, err, errlen);
    return rc;
}
