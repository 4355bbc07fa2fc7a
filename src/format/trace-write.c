/* Trace file writer for tools: filtered traces (membus), tests and benchmarks; same format as the
 * runtime's. */
#include "format/trace.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

struct tw_thread {
    struct ml_tenc enc;
    uint32_t tid, seq;
    int open;    /* a chunk is being built */
    uint64_t t0; /* its first time */
};

struct ml_trace_writer {
    int fd;
    int err; /* first write error (negative errno), then sticky */
    uint32_t chunk_records;
    struct ml_tsite *tsites;
    uint32_t nsites;
    struct tw_thread *thr;
    uint32_t nthr;
    uint64_t records;
    uint64_t clk_tick, clk_ns;
    ZSTD_CCtx *cctx;
    int level;
    struct ml_tzstd z;
    struct ml_tbuf out;
};

static size_t z_compress(void *ctx, void *dst, size_t cap, const void *src, size_t n)
{
    struct ml_trace_writer *w = ctx;
    size_t r = ZSTD_compressCCtx(w->cctx, dst, cap, src, n, w->level);

    return ZSTD_isError(r) ? 0 : r;
}

static size_t z_bound(size_t n)
{
    return ZSTD_compressBound(n);
}

/* Writes out w->out whole; the first failure sticks. */
static int flush_out(struct ml_trace_writer *w)
{
    size_t done = 0;

    while (!w->err && done < w->out.len) {
        ssize_t n = write(w->fd, w->out.p + done, w->out.len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            w->err = n < 0 ? -errno : -EIO;
        else
            done += (size_t)n;
    }
    w->out.len = 0;
    return w->err;
}

static int put_chunk(struct ml_trace_writer *w, struct ml_chunk_header *h, const void *p, size_t n)
{
    if (w->err)
        return w->err;
    if (ml_chunk_build(&w->out, w->level ? &w->z : NULL, h, p, n))
        return w->err = -ENOMEM;
    return flush_out(w);
}

int ml_tw_open(struct ml_trace_writer **out, int fd, const struct ml_trace_header *hdr,
               const struct ml_ev_site *sites, uint32_t nsites, const struct ml_ev_marker *markers,
               uint32_t nmarkers, const char *const *meta, size_t nmeta, int level)
{
    struct ml_trace_writer *w = calloc(1, sizeof(*w));
    struct ml_trace_header h = *hdr;
    struct ml_tbuf tab = {0};
    struct ml_chunk_header ch;
    int rc = -ENOMEM;

    *out = NULL;
    if (!w)
        return -ENOMEM;
    w->fd = fd;
    w->level = level;
    w->chunk_records = ML_CHUNK_MAX_RECORDS;
    w->z = (struct ml_tzstd){z_compress, z_bound, w};
    w->tsites = calloc((size_t)nsites + 1, sizeof(*w->tsites));
    if (!w->tsites || (level && !(w->cctx = ZSTD_createCCtx())))
        goto fail;
    w->nsites = nsites;
    for (uint32_t i = 0; i < nsites; i++) {
        w->tsites[i].kind = (uint8_t)sites[i].kind;
        w->tsites[i].size = sites[i].size;
        w->tsites[i].weight = sites[i].weight;
        w->tsites[i].marker = sites[i].marker;
    }
    ml_trace_header_fill(&h);
    w->out.len = 0;
    if (ml_tbuf_room(&w->out, sizeof(h)))
        goto fail;
    memcpy(w->out.p, &h, sizeof(h));
    w->out.len = sizeof(h);
    if ((rc = flush_out(w)))
        goto fail;
    /* Tables before any data chunk, as the runtime writes them. */
    rc = -ENOMEM;
    for (uint32_t i = 0; i < nsites; i++)
        if (ml_tbuf_site(&tab, &sites[i], 0))
            goto fail;
    memset(&ch, 0, sizeof(ch));
    ch.type = ML_CK_SITES;
    ch.count = nsites;
    if (nsites && (rc = put_chunk(w, &ch, tab.p, tab.len)))
        goto fail;
    tab.len = 0;
    rc = -ENOMEM;
    for (uint32_t i = 0; i < nmarkers; i++)
        if (ml_tbuf_marker(&tab, &markers[i]))
            goto fail;
    memset(&ch, 0, sizeof(ch));
    ch.type = ML_CK_MARKERS;
    ch.count = nmarkers;
    if (nmarkers && (rc = put_chunk(w, &ch, tab.p, tab.len)))
        goto fail;
    tab.len = 0;
    rc = -ENOMEM;
    for (size_t i = 0; i + 1 < 2 * nmeta; i += 2)
        if (ml_tbuf_meta(&tab, meta[i], meta[i + 1]))
            goto fail;
    memset(&ch, 0, sizeof(ch));
    ch.type = ML_CK_META;
    ch.count = (uint32_t)nmeta;
    if (nmeta && (rc = put_chunk(w, &ch, tab.p, tab.len)))
        goto fail;
    free(tab.p);
    *out = w;
    return 0;
fail:
    free(tab.p);
    ml_tw_free(w);
    return rc;
}

void ml_tw_chunk_records(struct ml_trace_writer *w, uint32_t n)
{
    w->chunk_records = n && n <= ML_CHUNK_MAX_RECORDS ? n : ML_CHUNK_MAX_RECORDS;
}

void ml_tw_clock(struct ml_trace_writer *w, uint64_t tick, uint64_t ns)
{
    w->clk_tick = tick;
    w->clk_ns = ns;
}

static struct tw_thread *thread_of(struct ml_trace_writer *w, uint32_t thread)
{
    if (thread >= w->nthr) {
        uint32_t n = thread + 1;
        struct tw_thread *v;
        if (n > (1u << 20))
            return NULL;
        v = realloc(w->thr, (size_t)n * sizeof(*v));
        if (!v)
            return NULL;
        memset(v + w->nthr, 0, (size_t)(n - w->nthr) * sizeof(*v));
        w->thr = v;
        w->nthr = n;
    }
    return &w->thr[thread];
}

static int end_chunk(struct ml_trace_writer *w, uint32_t thread)
{
    struct tw_thread *t = &w->thr[thread];
    struct ml_chunk_header h;

    if (!t->open)
        return w->err;
    if (ml_tenc_reserve(&t->enc, 16))
        return w->err = w->err ? w->err : -ENOMEM;
    {
        uint8_t *p = ml_tenc_flush_run(&t->enc, t->enc.out + t->enc.len);
        t->enc.len = (size_t)(p - t->enc.out);
    }
    memset(&h, 0, sizeof(h));
    h.type = ML_CK_DATA;
    h.thread = thread;
    h.seq = t->seq++;
    h.count = t->enc.count;
    h.t_first = t->t0;
    h.t_last = t->enc.t_cur;
    h.clk_tick = w->clk_tick;
    h.clk_ns = w->clk_ns;
    h.tid = t->tid;
    t->open = 0;
    return put_chunk(w, &h, t->enc.out, t->enc.len);
}

/* The thread's encoder with room for one more record, starting a chunk at time t if needed. */
static struct tw_thread *room(struct ml_trace_writer *w, uint32_t thread, uint32_t tid, uint64_t t)
{
    struct tw_thread *th = thread_of(w, thread);

    if (!th) {
        w->err = w->err ? w->err : -ENOMEM;
        return NULL;
    }
    if (tid)
        th->tid = tid;
    if (th->open && th->enc.count >= w->chunk_records && end_chunk(w, thread))
        return NULL;
    th->enc.sites = w->tsites;
    th->enc.nsites = w->nsites;
    if (ml_tenc_reserve(&th->enc, 16 + 10 * (2 + ML_TOK_MAX_FIELDS))) {
        w->err = w->err ? w->err : -ENOMEM;
        return NULL;
    }
    if (!th->open) {
        ml_tenc_begin(&th->enc, t);
        th->t0 = t;
        th->open = 1;
    }
    return th;
}

int ml_tw_put(struct ml_trace_writer *w, uint32_t thread, uint32_t tid, uint32_t site,
              uint64_t addr, uint32_t size, uint32_t weight, uint64_t t, int exact)
{
    struct tw_thread *th;

    if (w->err)
        return w->err;
    if (site >= w->nsites)
        return -EINVAL;
    if (!(th = room(w, thread, tid, t)))
        return w->err;
    if (!ml_ev_is_access(w->tsites[site].kind))
        addr = 0;
    ml_tenc_put(&th->enc, site, addr, size, weight, exact, t);
    w->records++;
    return 0;
}

int ml_tw_time(struct ml_trace_writer *w, uint32_t thread, uint64_t t)
{
    struct tw_thread *th;

    if (w->err)
        return w->err;
    if (!(th = room(w, thread, 0, t)))
        return w->err;
    ml_tenc_time(&th->enc, t);
    return 0;
}

int ml_tw_event(struct ml_trace_writer *w, uint32_t thread, uint32_t tid, unsigned kind, uint64_t t,
                const uint64_t *fields, unsigned nfields)
{
    struct tw_thread *th;

    if (w->err)
        return w->err;
    if (!kind || kind >= ML_EV_NKINDS || nfields > ML_TOK_MAX_FIELDS)
        return -EINVAL;
    if (!(th = room(w, thread, tid, t)))
        return w->err;
    ml_tenc_event(&th->enc, kind, t, fields, nfields);
    w->records++;
    return 0;
}

int ml_tw_finish(struct ml_trace_writer *w, const struct ml_trace_end *end)
{
    struct ml_chunk_header h;
    struct ml_trace_end e;
    int rc = 0;

    for (uint32_t i = 0; i < w->nthr && !rc; i++)
        rc = end_chunk(w, i);
    if (!rc && end) {
        e = *end;
        e.nthreads = e.nthreads ? e.nthreads : w->nthr;
        e.records = e.records ? e.records : w->records;
        memset(&h, 0, sizeof(h));
        h.type = ML_CK_END;
        rc = put_chunk(w, &h, &e, sizeof(e));
    }
    rc = rc ? rc : w->err;
    ml_tw_free(w);
    return rc;
}

void ml_tw_free(struct ml_trace_writer *w)
{
    if (!w)
        return;
    for (uint32_t i = 0; i < w->nthr; i++)
        ml_tenc_free(&w->thr[i].enc);
    free(w->thr);
    free(w->tsites);
    free(w->out.p);
    ZSTD_freeCCtx(w->cctx);
    free(w);
}
