/* Trace reader: indexes chunks, loads tables, decodes data chunks independently (validating all).
 */
#include "format/trace.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

/* Hostile files must not make the reader allocate without bound. */
#define MAX_TABLE_IDS (1u << 26)
#define MAX_PROBLEMS  64

struct ml_trace {
    int fd;             /* -1 for memory traces */
    const uint8_t *mem; /* memory traces */
    uint64_t size;
    char *path;
    struct ml_trace_info info;
    struct ml_trace_problem problems[MAX_PROBLEMS];
    size_t nproblems_total;
    struct ml_trace_chunk *chunks; /* data chunks */
    uint32_t *tids;                /* [info.nthreads] OS thread ids */
    size_t nchunks, capchunks;
    struct ml_trace_site *sites;
    struct ml_tsite *tsites; /* the decoder's view of the same table */
    uint32_t nsites;
    struct ml_trace_marker *markers;
    uint32_t nmarkers;
    char **meta;
    size_t nmeta;
    char **strings; /* every string the tables own */
    size_t nstrings, capstrings;
    /* ticks -> ns: ns = (tick - fit_tick) * fit_rate + fit_ns */
    double fit_rate;
    uint64_t fit_tick;
    double fit_ns;
};

static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
    va_list ap;

    if (errlen) {
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

static void problem(struct ml_trace *t, uint64_t off, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void problem(struct ml_trace *t, uint64_t off, const char *fmt, ...)
{
    va_list ap;

    t->nproblems_total++;
    if (t->info.nproblems >= MAX_PROBLEMS)
        return;
    t->problems[t->info.nproblems].offset = off;
    va_start(ap, fmt);
    vsnprintf(t->problems[t->info.nproblems].what, sizeof(t->problems[0].what), fmt, ap);
    va_end(ap);
    t->info.nproblems++;
}

/* Reads n bytes at off; returns the bytes read (short at the end of the file) or -errno. */
static ssize_t src_read(const struct ml_trace *t, uint64_t off, void *buf, size_t n)
{
    size_t got = 0;

    if (off >= t->size)
        return 0;
    if (n > t->size - off)
        n = (size_t)(t->size - off);
    if (t->mem) {
        memcpy(buf, t->mem + off, n);
        return (ssize_t)n;
    }
    while (got < n) {
        ssize_t r = pread(t->fd, (char *)buf + got, n - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (r == 0)
            break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

static int header_ok(const struct ml_chunk_header *h)
{
    return h->magic == ML_CHUNK_MAGIC &&
           ml_crc32c(0, h, offsetof(struct ml_chunk_header, header_crc)) == h->header_crc;
}

/*
 * Payload of a chunk, checked and decompressed: *data points into *stored or
 * *raw (both owned by the caller, grown as needed).
 */
static int load_payload(const struct ml_trace *t, uint64_t off, const struct ml_chunk_header *h,
                        uint8_t **stored, size_t *stored_cap, uint8_t **raw, size_t *raw_cap,
                        const uint8_t **data, void *dctx, char *err, size_t errlen)
{
    ssize_t r;

    if (h->raw_size > ML_CHUNK_MAX_RAW || h->size > ML_CHUNK_MAX_RAW)
        return fail(err, errlen, -EINVAL, "chunk at offset %llu: payload of %u bytes is too large",
                    (unsigned long long)off, h->raw_size > h->size ? h->raw_size : h->size);
    if (*stored_cap < (size_t)h->size + 1) {
        uint8_t *p = realloc(*stored, (size_t)h->size + 1);
        if (!p)
            return fail(err, errlen, -ENOMEM, "out of memory");
        *stored = p;
        *stored_cap = (size_t)h->size + 1;
    }
    r = src_read(t, off + sizeof(*h), *stored, h->size);
    if (r < 0)
        return fail(err, errlen, (int)r, "cannot read chunk at offset %llu: %s",
                    (unsigned long long)off, strerror((int)-r));
    if ((size_t)r < h->size)
        return fail(err, errlen, -EINVAL,
                    "chunk at offset %llu: truncated (the trace was cut short)",
                    (unsigned long long)off);
    if (ml_crc32c(0, *stored, h->size) != h->payload_crc)
        return fail(err, errlen, -EINVAL, "chunk at offset %llu: payload checksum mismatch",
                    (unsigned long long)off);
    if (!(h->flags & ML_CF_ZSTD)) {
        if (h->size != h->raw_size)
            return fail(err, errlen, -EINVAL, "chunk at offset %llu: size %u, raw size %u",
                        (unsigned long long)off, h->size, h->raw_size);
        *data = *stored;
        return 0;
    }
    if (*raw_cap < (size_t)h->raw_size + 1) {
        uint8_t *p = realloc(*raw, (size_t)h->raw_size + 1);
        if (!p)
            return fail(err, errlen, -ENOMEM, "out of memory");
        *raw = p;
        *raw_cap = (size_t)h->raw_size + 1;
    }
    {
        unsigned long long fcs = ZSTD_getFrameContentSize(*stored, h->size);
        size_t n;
        if (fcs != h->raw_size)
            return fail(err, errlen, -EINVAL,
                        "chunk at offset %llu: compressed frame does not hold %u bytes",
                        (unsigned long long)off, h->raw_size);
        n = ZSTD_decompressDCtx(dctx, *raw, h->raw_size, *stored, h->size);
        if (ZSTD_isError(n) || n != h->raw_size)
            return fail(err, errlen, -EINVAL, "chunk at offset %llu: cannot decompress: %s",
                        (unsigned long long)off,
                        ZSTD_isError(n) ? ZSTD_getErrorName(n) : "short frame");
    }
    *data = *raw;
    return 0;
}

/* ---- tables ---- */

struct rd {
    const uint8_t *p, *end;
    int bad;
};

static uint64_t rd_varint_slow(struct rd *r)
{
    uint64_t v = 0;

    for (int shift = 0; shift < 64; shift += 7) {
        if (r->p >= r->end) {
            r->bad = 1;
            return 0;
        }
        uint8_t b = *r->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return v;
    }
    r->bad = 1;
    return 0;
}

/*
 * A varint of up to 8 bytes with 8 bytes readable: one load, the end found
 * in the word of continuation bits, the 7-bit groups packed without a loop
 * (irregular traces have a varint or two of 2-4 bytes in every record).
 */
static inline __attribute__((always_inline)) uint64_t rd_varint(struct rd *r)
{
    uint64_t w, stop, x;
    unsigned len;

    if (r->p < r->end && !(*r->p & 0x80))
        return *r->p++;
    if (r->end - r->p < 8)
        return rd_varint_slow(r);
    memcpy(&w, r->p, 8);
    stop = ~w & 0x8080808080808080ull;
    if (!stop)
        return rd_varint_slow(r);
    len = ((unsigned)__builtin_ctzll(stop) >> 3) + 1;
    if (len < 8)
        w &= (1ull << (8 * len)) - 1;
    x = (w & 0x7f) | (w >> 1 & 0x3f80) | (w >> 2 & 0x1fc000) | (w >> 3 & 0xfe00000) |
        (w >> 4 & 0x7f0000000ull) | (w >> 5 & 0x3f800000000ull) | (w >> 6 & 0x1fc0000000000ull) |
        (w >> 7 & 0xfe000000000000ull);
    r->p += len;
    return x;
}

static uint32_t rd_u32(struct rd *r)
{
    uint64_t v = rd_varint(r);

    if (v > UINT32_MAX)
        r->bad = 1;
    return (uint32_t)v;
}

static const char *rd_str(struct ml_trace *t, struct rd *r)
{
    uint64_t n = rd_varint(r);
    char *s;

    if (r->bad || n > (uint64_t)(r->end - r->p)) {
        r->bad = 1;
        return "";
    }
    if (t->nstrings == t->capstrings) {
        size_t cap = t->capstrings ? 2 * t->capstrings : 256;
        char **v = realloc(t->strings, cap * sizeof(*v));
        if (!v) {
            r->bad = 1;
            return "";
        }
        t->strings = v;
        t->capstrings = cap;
    }
    s = malloc(n + 1);
    if (!s) {
        r->bad = 1;
        return "";
    }
    memcpy(s, r->p, n);
    s[n] = 0;
    for (uint64_t i = 0; i < n; i++) /* names are printed: no control characters */
        if ((unsigned char)s[i] < 0x20)
            s[i] = '?';
    r->p += n;
    t->strings[t->nstrings++] = s;
    return s;
}

/* Grows *v from *n to n elements of size elem, zeroing the new ones; 0 or -ENOMEM. */
static int grow_zeroed(void **v, uint32_t *have, uint32_t n, size_t elem)
{
    void *p;

    if (n <= *have)
        return 0;
    p = realloc(*v, (size_t)n * elem);
    if (!p)
        return -ENOMEM;
    memset((char *)p + (size_t)*have * elem, 0, (size_t)(n - *have) * elem);
    *v = p;
    *have = n;
    return 0;
}

static int grow_sites(struct ml_trace *t, uint32_t n)
{
    uint32_t old = t->nsites, have = t->nsites;

    if (grow_zeroed((void **)&t->tsites, &have, n, sizeof(*t->tsites)) ||
        grow_zeroed((void **)&t->sites, &t->nsites, n, sizeof(*t->sites)))
        return -ENOMEM;
    for (uint32_t i = old; i < n; i++) {
        t->sites[i].marker = ML_EV_NOID;
        t->sites[i].func = t->sites[i].file = t->sites[i].text = "";
        t->tsites[i].marker = ML_EV_NOID;
    }
    return 0;
}

static int grow_markers(struct ml_trace *t, uint32_t n)
{
    uint32_t old = t->nmarkers;

    if (grow_zeroed((void **)&t->markers, &t->nmarkers, n, sizeof(*t->markers)))
        return -ENOMEM;
    for (uint32_t i = old; i < n; i++)
        t->markers[i].name = t->markers[i].file = t->markers[i].func = "";
    return 0;
}

static const char *parse_table(struct ml_trace *t, const struct ml_chunk_header *h,
                               const uint8_t *p, size_t n)
{
    struct rd r = {p, p + n, 0};

    if ((uint64_t)h->seq + h->count > MAX_TABLE_IDS)
        return "table ids out of range";
    if (h->type == ML_CK_SITES) {
        if (grow_sites(t, h->seq + h->count))
            return "out of memory";
        for (uint32_t i = 0; i < h->count && !r.bad; i++) {
            struct ml_trace_site *s = &t->sites[h->seq + i];
            struct ml_tsite *ts = &t->tsites[h->seq + i];
            uint32_t marker;
            if (r.p >= r.end) {
                r.bad = 1;
                break;
            }
            s->kind = *r.p++;
            s->size = rd_u32(&r);
            s->weight = rd_u32(&r);
            marker = rd_u32(&r);
            s->marker = marker ? marker - 1 : ML_EV_NOID;
            s->line = rd_u32(&r);
            s->column = rd_u32(&r);
            s->func = rd_str(t, &r);
            s->file = rd_str(t, &r);
            s->text = rd_str(t, &r);
            ts->kind = (uint8_t)s->kind;
            ts->size = s->size;
            ts->weight = s->weight;
            ts->marker = s->marker;
        }
    } else if (h->type == ML_CK_MARKERS) {
        if (grow_markers(t, h->seq + h->count))
            return "out of memory";
        for (uint32_t i = 0; i < h->count && !r.bad; i++) {
            struct ml_trace_marker *m = &t->markers[h->seq + i];
            if (r.p >= r.end) {
                r.bad = 1;
                break;
            }
            m->kind = *r.p++;
            m->line = rd_u32(&r);
            m->name = rd_str(t, &r);
            m->file = rd_str(t, &r);
            m->func = rd_str(t, &r);
        }
    } else if (h->type == ML_CK_META) {
        for (uint32_t i = 0; i < h->count && !r.bad; i++) {
            char **v = realloc(t->meta, (t->nmeta + 2) * sizeof(*v));
            if (!v)
                return "out of memory";
            t->meta = v;
            t->meta[t->nmeta] = (char *)rd_str(t, &r);
            t->meta[t->nmeta + 1] = (char *)rd_str(t, &r);
            if (!r.bad)
                t->nmeta += 2;
        }
    }
    return r.bad ? "table entries run past the payload" : NULL;
}

/* ---- index ---- */

/* The next offset after off where a valid chunk header starts, or the file size. */
static uint64_t resync(const struct ml_trace *t, uint64_t off)
{
    uint8_t buf[65536 + sizeof(struct ml_chunk_header)];

    for (uint64_t at = off + 1; at + sizeof(struct ml_chunk_header) <= t->size;) {
        ssize_t n = src_read(t, at, buf, sizeof(buf));
        if (n < (ssize_t)sizeof(struct ml_chunk_header))
            break;
        for (ssize_t i = 0; i + (ssize_t)sizeof(struct ml_chunk_header) <= n; i++) {
            struct ml_chunk_header h;
            if (buf[i] != 'M' || buf[i + 1] != 'L' || buf[i + 2] != 'C' || buf[i + 3] != 'K')
                continue;
            memcpy(&h, buf + i, sizeof(h));
            if (header_ok(&h))
                return at + (uint64_t)i;
        }
        at += (uint64_t)n - sizeof(struct ml_chunk_header) + 1;
    }
    return t->size;
}

static int add_chunk(struct ml_trace *t, uint64_t off, const struct ml_chunk_header *h)
{
    struct ml_trace_chunk *c;

    if (t->nchunks == t->capchunks) {
        size_t cap = t->capchunks ? 2 * t->capchunks : 256;
        c = realloc(t->chunks, cap * sizeof(*c));
        if (!c)
            return -ENOMEM;
        t->chunks = c;
        t->capchunks = cap;
    }
    c = &t->chunks[t->nchunks++];
    c->offset = off;
    c->type = h->type;
    c->flags = h->flags;
    c->thread = h->thread;
    c->seq = h->seq;
    c->count = h->count;
    c->raw_size = h->raw_size;
    c->size = h->size;
    c->t_first = h->t_first;
    c->t_last = h->t_last;
    return 0;
}

struct clkpair {
    uint64_t tick, ns;
};

static int index_chunks(struct ml_trace *t, char *err, size_t errlen)
{
    uint64_t off = sizeof(struct ml_trace_header);
    uint8_t *stored = NULL, *raw = NULL;
    const uint8_t *data = NULL;
    size_t scap = 0, rcap = 0;
    ZSTD_DCtx *dctx = ZSTD_createDCtx();
    struct clkpair lo = {0, 0}, hi = {0, 0};
    int have = 0, rc = 0;

    if (!dctx)
        return fail(err, errlen, -ENOMEM, "out of memory");
    while (off < t->size) {
        struct ml_chunk_header h;
        ssize_t n = src_read(t, off, &h, sizeof(h));
        char why[200];
        const char *bad = NULL;

        if (n < 0) {
            rc = fail(err, errlen, (int)n, "cannot read '%s': %s", t->path, strerror((int)-n));
            goto out;
        }
        if ((size_t)n < sizeof(h)) {
            problem(t, off, "truncated chunk header at offset %llu (the trace was cut short)",
                    (unsigned long long)off);
            break;
        }
        if (!header_ok(&h)) {
            uint64_t next = resync(t, off);
            problem(t, off, "damaged chunk header at offset %llu; skipped %llu bytes",
                    (unsigned long long)off, (unsigned long long)(next - off));
            off = next;
            continue;
        }
        if (h.size > t->size - off - sizeof(h)) {
            problem(t, off, "truncated chunk at offset %llu (the trace was cut short)",
                    (unsigned long long)off);
            break;
        }
        if (h.type == ML_CK_DATA) {
            if (h.count > ML_CHUNK_MAX_RECORDS || h.raw_size > ML_CHUNK_MAX_RAW)
                bad = "record count or size out of range";
            else if (add_chunk(t, off, &h)) {
                rc = fail(err, errlen, -ENOMEM, "out of memory");
                goto out;
            }
            if (!bad) {
                t->info.records += h.count;
                t->info.data_raw += h.raw_size;
                t->info.data_stored += h.size;
                if (h.thread + 1u > t->info.nthreads && h.thread < MAX_TABLE_IDS) {
                    uint32_t *v = realloc(t->tids, (h.thread + 1u) * sizeof(*v));
                    if (!v) {
                        rc = fail(err, errlen, -ENOMEM, "out of memory");
                        goto out;
                    }
                    memset(v + t->info.nthreads, 0,
                           (h.thread + 1u - t->info.nthreads) * sizeof(*v));
                    t->tids = v;
                    t->info.nthreads = h.thread + 1;
                }
                if (h.thread < t->info.nthreads && h.tid)
                    t->tids[h.thread] = h.tid;
                if (h.clk_ns) {
                    if (!have || h.clk_tick < lo.tick)
                        lo = (struct clkpair){h.clk_tick, h.clk_ns};
                    if (!have || h.clk_tick > hi.tick)
                        hi = (struct clkpair){h.clk_tick, h.clk_ns};
                    have = 1;
                }
            }
        } else if (h.type == ML_CK_SITES || h.type == ML_CK_MARKERS || h.type == ML_CK_META ||
                   h.type == ML_CK_END) {
            if (load_payload(t, off, &h, &stored, &scap, &raw, &rcap, &data, dctx, why,
                             sizeof(why))) {
                problem(t, off, "%s", why);
                bad = NULL;
            } else if (h.type == ML_CK_END) {
                if (h.raw_size != sizeof(t->info.end))
                    bad = "end record of the wrong size";
                else {
                    memcpy(&t->info.end, data, sizeof(t->info.end));
                    t->info.ended = 1;
                }
            } else {
                bad = parse_table(t, &h, data, h.raw_size);
            }
        }
        if (bad)
            problem(t, off, "chunk at offset %llu: %s", (unsigned long long)off, bad);
        off += sizeof(h) + h.size;
    }
    /* Ticks to ns: the widest pair of clock readings; the header's start otherwise. */
    if (have && hi.tick > lo.tick && hi.ns > lo.ns) {
        t->fit_rate = (double)(hi.ns - lo.ns) / (double)(hi.tick - lo.tick);
        t->fit_tick = lo.tick;
        t->fit_ns = (double)lo.ns - (double)t->info.hdr.mono0;
    } else if (have && hi.tick > t->info.hdr.tick0 && hi.ns > t->info.hdr.mono0) {
        t->fit_rate = (double)(hi.ns - t->info.hdr.mono0) / (double)(hi.tick - t->info.hdr.tick0);
        t->fit_tick = t->info.hdr.tick0;
        t->fit_ns = 0;
    } else {
        t->fit_rate = 1;
        t->fit_tick = t->info.hdr.tick0;
        t->fit_ns = 0;
    }
out:
    free(raw);
    free(stored);
    ZSTD_freeDCtx(dctx);
    return rc;
}

static int open_common(struct ml_trace *t, struct ml_trace **out, char *err, size_t errlen)
{
    struct ml_trace_header *hd = &t->info.hdr;
    ssize_t n = src_read(t, 0, hd, sizeof(*hd));
    int rc;

    if (n < 0) {
        rc = fail(err, errlen, (int)n, "cannot read '%s': %s", t->path, strerror((int)-n));
        goto bad;
    }
    if ((size_t)n < sizeof(*hd) || memcmp(hd->magic, ML_TRACE_MAGIC, 8)) {
        rc = fail(err, errlen, -EINVAL, "'%s' is not a memlens trace", t->path);
        goto bad;
    }
    if (hd->version < ML_TRACE_VERSION_MIN || hd->version > ML_TRACE_VERSION) {
        rc = fail(err, errlen, -EINVAL,
                  "'%s' is a version %u trace; this memlens reads versions %d to %d", t->path,
                  hd->version, ML_TRACE_VERSION_MIN, ML_TRACE_VERSION);
        goto bad;
    }
    if (hd->header_size != sizeof(*hd) ||
        ml_crc32c(0, hd, offsetof(struct ml_trace_header, header_crc)) != hd->header_crc) {
        rc = fail(err, errlen, -EINVAL, "'%s': damaged trace header", t->path);
        goto bad;
    }
    /* 0 means unknown (analyses take 4 KiB); else what sysconf said, a power of two (4 to 64 KiB
     * on machines we know of). Analyses shift by it: a hostile value must not reach them. */
    if (hd->page_size && (hd->page_size < 512 || hd->page_size > (1u << 18) ||
                          (hd->page_size & (hd->page_size - 1)))) {
        rc = fail(err, errlen, -EINVAL,
                  "'%s': the header's page size %u is not a power of two from 512 bytes to 256 KiB",
                  t->path, hd->page_size);
        goto bad;
    }
    t->info.path = t->path;
    t->info.file_size = t->size;
    rc = index_chunks(t, err, errlen);
    if (rc)
        goto bad;
    if (t->nproblems_total > MAX_PROBLEMS)
        problem(t, t->size, "%zu more problems not listed", t->nproblems_total - MAX_PROBLEMS);
    t->info.problems = t->problems;
    t->info.nmeta = t->nmeta;
    t->info.meta = (const char *const *)t->meta;
    *out = t;
    return 0;
bad:
    ml_trace_close(t);
    return rc;
}

int ml_trace_open(const char *path, struct ml_trace **out, char *err, size_t errlen)
{
    struct ml_trace *t = calloc(1, sizeof(*t));
    struct stat st;

    if (!t || !(t->path = strdup(path))) {
        free(t);
        return fail(err, errlen, -ENOMEM, "out of memory");
    }
    t->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (t->fd < 0 || fstat(t->fd, &st)) {
        int e = errno;
        ml_trace_close(t);
        return fail(err, errlen, -e, "cannot open trace '%s': %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        ml_trace_close(t);
        return fail(err, errlen, -EINVAL, "'%s' is not a regular file", path);
    }
    t->size = (uint64_t)st.st_size;
    return open_common(t, out, err, errlen);
}

int ml_trace_open_mem(const void *buf, size_t len, struct ml_trace **out, char *err, size_t errlen)
{
    struct ml_trace *t = calloc(1, sizeof(*t));

    if (!t || !(t->path = strdup("(memory)"))) {
        free(t);
        return fail(err, errlen, -ENOMEM, "out of memory");
    }
    t->fd = -1;
    t->mem = buf;
    t->size = len;
    return open_common(t, out, err, errlen);
}

void ml_trace_close(struct ml_trace *t)
{
    if (!t)
        return;
    if (t->fd >= 0 && !t->mem)
        close(t->fd);
    for (size_t i = 0; i < t->nstrings; i++)
        free(t->strings[i]);
    free(t->strings);
    free(t->chunks);
    free(t->tids);
    free(t->sites);
    free(t->tsites);
    free(t->markers);
    free(t->meta);
    free(t->path);
    free(t);
}

const struct ml_trace_info *ml_trace_info(const struct ml_trace *t)
{
    return &t->info;
}

size_t ml_trace_nchunks(const struct ml_trace *t)
{
    return t->nchunks;
}

const struct ml_trace_chunk *ml_trace_chunk(const struct ml_trace *t, size_t i)
{
    return i < t->nchunks ? &t->chunks[i] : NULL;
}

uint32_t ml_trace_nsites(const struct ml_trace *t)
{
    return t->nsites;
}

const struct ml_trace_site *ml_trace_site(const struct ml_trace *t, uint32_t id)
{
    return id < t->nsites ? &t->sites[id] : NULL;
}

uint32_t ml_trace_nmarkers(const struct ml_trace *t)
{
    return t->nmarkers;
}

const struct ml_trace_marker *ml_trace_marker(const struct ml_trace *t, uint32_t id)
{
    return id < t->nmarkers ? &t->markers[id] : NULL;
}

uint32_t ml_trace_thread_tid(const struct ml_trace *t, uint32_t thread)
{
    return thread < t->info.nthreads ? t->tids[thread] : 0;
}

double ml_trace_ns(const struct ml_trace *t, uint64_t tick)
{
    return ((double)tick - (double)t->fit_tick) * t->fit_rate + t->fit_ns;
}

/* ---- decoding ---- */

/*
 * Gives every record of [from, to) without a measured time one interpolated
 * linearly between its time points (records j sit at 2j + 1, gaps before
 * record j at 2j): tick_a + (tick_b - tick_a) x (p - pos_a) / (pos_b -
 * pos_a), stepped by quotient and remainder instead of a 128-bit division
 * per record. *k is the segment [pts[*k], pts[*k + 1]] to start from (0 at
 * first); ranges come in order, so the decoder can fill each block of
 * records while it is still in cache.
 */
static void fill_times(struct ml_trace_rec *out, const struct ml_tpoint *pts, size_t npts,
                       size_t *k, uint64_t from, uint64_t to)
{
    for (; *k + 1 < npts; ++*k) {
        const struct ml_tpoint *a = &pts[*k], *b = &pts[*k + 1];
        uint64_t j = a->pos / 2, e = b->pos / 2, stop, dt, dp, q, r, sq, sr;
        while (2 * j + 1 <= a->pos)
            j++;
        /* Records j with 2j + 1 < b.pos are inside the segment: j < e. */
        if (j < from)
            j = from;
        stop = e < to ? e : to;
        if (j < stop) {
            if (b->tick <= a->tick || b->pos <= a->pos) {
                for (; j < stop; j++)
                    out[j].time = a->tick;
            } else {
                dt = b->tick - a->tick;
                dp = b->pos - a->pos;
                /* (dt x (p - a.pos)) / dp at p = 2j + 1, then + 2 dt per record. */
                {
                    unsigned __int128 n = (unsigned __int128)dt * (2 * j + 1 - a->pos);
                    q = (uint64_t)(n / dp);
                    r = (uint64_t)(n % dp);
                    n = (unsigned __int128)dt * 2;
                    sq = (uint64_t)(n / dp);
                    sr = (uint64_t)(n % dp);
                }
                for (; j < stop; j++) {
                    out[j].time = a->tick + q;
                    q += sq;
                    r += sr;
                    if (r >= dp) {
                        r -= dp;
                        q++;
                    }
                }
            }
        }
        if (e > to) /* the segment goes on past this range */
            return;
    }
}

/*
 * The time points of a token stream, found without decoding its records
 * (the same points, in the same order, as the decoder's); -1 when the
 * stream is malformed (the decoder then finds where).
 */
static int scan_times(const uint8_t *p, const uint8_t *end, uint32_t count, uint64_t t_first,
                      uint64_t t_last, struct ml_tpoint *pts, size_t *npts_out)
{
    uint64_t n = 0, t_cur = t_first;
    size_t npts = 0;

    pts[npts++] = (struct ml_tpoint){0, t_first};
    while (p < end) {
        uint8_t b = *p;
        struct rd r = {p + 1, end, 0};
        if (!(b & 0x80)) {
            uint64_t nrun = b ? b : rd_varint(&r);
            if (r.bad || nrun > count - n)
                return -1;
            n += nrun;
        } else if (!(b & 0x40)) {
            if (n >= count)
                return -1;
            if (b & 0x01) { /* ADDR: no time */
                if (b & 0x02)
                    rd_varint(&r);
                n++;
                if (r.bad)
                    return -1;
                p = r.p;
                continue;
            }
            for (unsigned bit = 0x20; bit > 0x02; bit >>= 1)
                if (b & bit)
                    rd_varint(&r);
            if (b & 0x02) {
                uint64_t dt = rd_varint(&r);
                if (t_cur + dt < t_cur)
                    return -1;
                t_cur += dt;
                pts[npts++] = (struct ml_tpoint){2 * n + 1, t_cur};
            }
            n++;
        } else {
            uint64_t dt = rd_varint(&r), nf;
            if (r.bad || t_cur + dt < t_cur)
                return -1;
            t_cur += dt;
            if (!(b & 0x3f)) {
                if (pts[npts - 1].pos == 2 * n && npts > 1)
                    pts[npts - 1].tick = t_cur;
                else
                    pts[npts++] = (struct ml_tpoint){2 * n, t_cur};
            } else {
                nf = rd_varint(&r);
                if (nf > ML_TOK_MAX_FIELDS || n >= count)
                    return -1;
                for (uint64_t i = 0; i < nf; i++)
                    rd_varint(&r);
                pts[npts++] = (struct ml_tpoint){2 * n + 1, t_cur};
                n++;
            }
        }
        if (r.bad)
            return -1;
        p = r.p;
    }
    if (n != count)
        return -1;
    pts[npts++] = (struct ml_tpoint){2 * n, t_cur > t_last ? t_cur : t_last};
    *npts_out = npts;
    return 0;
}

#define ML_RUN_CYCLE 16   /* longest cycle of sites a run is read from */
#define FILL_BLOCK   1024 /* records decoded between two fills of their times */

static int tok_fail(char *err, size_t errlen, size_t at, const char *what)
{
    return fail(err, errlen, -EINVAL, "%s at token byte %zu", what, at);
}

int ml_trace_decode_tokens(const uint8_t *p, size_t len, const struct ml_tsite *sites,
                           uint32_t nsites, uint32_t thread, uint64_t t_first, uint64_t t_last,
                           struct ml_trace_rec *out, uint32_t count, struct ml_tstate *st,
                           struct ml_trace_rec *tmpl, uint32_t *gen, struct ml_tpoint *pts,
                           uint32_t *others, char *err, size_t errlen)
{
    const uint8_t *const start = p, *const end = p + len;
    uint32_t prev = ML_EV_NOID, n = 0, nother = 0;
    uint64_t prev_addr = 0, t_cur = t_first;
    size_t npts = 0, seg = 0, filled = 0;
    uint32_t cyc[ML_RUN_CYCLE], cycle;
    /*
     * Time points found first, so that each block of records gets its times
     * while in cache: worth it where runs dominate (under half a token byte
     * per record), not where the scan would read every record's fields twice.
     */
    int early = len < count / 2 && !scan_times(p, p + len, count, t_first, t_last, pts, &npts);
    struct rd r;

    if (++*gen == 0) {
        memset(st, 0, (size_t)nsites * sizeof(*st));
        *gen = 1;
    }
    if (!early)
        pts[npts++] = (struct ml_tpoint){0, t_first};
#define FILL()                                                                                     \
    do {                                                                                           \
        if (early && n - filled >= FILL_BLOCK) {                                                   \
            fill_times(out, pts, npts, &seg, filled, n);                                           \
            filled = n;                                                                            \
        }                                                                                          \
    } while (0)
#define NEED(c)                                                                                    \
    do {                                                                                           \
        if (r.bad)                                                                                 \
            return tok_fail(err, errlen, (size_t)(p - start), "truncated token");                  \
        if (!(c))                                                                                  \
            return tok_fail(err, errlen, (size_t)(p - start), why);                                \
    } while (0)
    while (p < end) {
        const char *why = "bad token";
        uint8_t b = *p;
        r = (struct rd){p + 1, end, 0};
        if (!(b & 0x80)) {
            uint64_t nrun = b ? b : rd_varint(&r);
            why = "run longer than the chunk";
            NEED(nrun <= count - n);
            why = "run without a predicted site";
            /*
             * Runs do not change successors, so when prev's successors lead back
             * to it the run cycles through them: reading the sites from that
             * cycle spares each record a load that depends on the one before.
             */
            cycle = 0;
            if (nrun >= 32 && prev != ML_EV_NOID)
                for (uint32_t k = 0, x = prev; k < ML_RUN_CYCLE; k++) {
                    if ((x = st[x].succ) == ML_EV_NOID)
                        break;
                    cyc[k] = x;
                    if (x == prev) {
                        cycle = k + 1;
                        break;
                    }
                }
            for (uint64_t i = 0, j = 0; i < nrun; i++) {
                uint32_t s;
                struct ml_tstate *S;
                struct ml_trace_rec *o = &out[n++];
                if (cycle) {
                    s = cyc[j];
                    if (++j == cycle)
                        j = 0;
                } else {
                    NEED(prev != ML_EV_NOID && (s = st[prev].succ) != ML_EV_NOID);
                }
                S = &st[s];
                if (S->fast) {
                    /* A steady stride: d = stride = cand, so only the address moves. */
                    uint64_t a = S->last + (uint64_t)S->stride;
                    *o = tmpl[s];
                    o->addr = a;
                    S->last = a;
                    prev_addr = a;
                    prev = s;
                    FILL();
                    continue;
                }
                o->time = 0;
                o->aux = 0;
                o->site = s;
                o->size = S->size;
                o->weight = S->weight;
                o->thread = thread;
                o->kind = sites[s].kind;
                o->flags = 0;
                if (ml_ev_is_access(sites[s].kind)) {
                    uint64_t a = S->seen ? S->last + (uint64_t)S->stride : prev_addr;
                    int64_t d = (int64_t)(a - S->last);
                    if (S->seen) {
                        if (d == S->cand)
                            S->stride = d;
                        S->cand = d;
                    }
                    S->seen = 1;
                    S->last = a;
                    prev_addr = a;
                    o->addr = a;
                    o->aux2 = 0;
                    if (S->stride == S->cand) {
                        tmpl[s] = *o;
                        S->fast = 1;
                    }
                } else {
                    o->addr = 0;
                    o->aux2 = sites[s].marker;
                    nother++;
                }
                prev = s;
                FILL();
            }
        } else if (!(b & 0x40)) {
            uint32_t s;
            struct ml_tstate *S;
            struct ml_trace_rec *o;
            uint64_t pred, a;
            why = "more records than the chunk header says";
            NEED(n < count);
            if ((b & 0x21) == 0x20) {
                int64_t d = ml_unzigzag(rd_varint(&r));
                int64_t v = (int64_t)(uint32_t)(prev + 1) + d;
                why = "site out of range";
                NEED(v >= 0 && v < (int64_t)nsites);
                s = (uint32_t)v;
            } else { /* REC without S, or ADDR */
                why = "record without a predicted site";
                NEED(prev != ML_EV_NOID && st[prev].succ != ML_EV_NOID);
                s = st[prev].succ;
            }
            why = "record of an undefined site";
            NEED(ml_ev_is_access(sites[s].kind) || ml_ev_is_marker(sites[s].kind));
            S = &st[s];
            S->fast = 0; /* its size, weight or stride may change here */
            if (S->gen != *gen) {
                S->gen = *gen;
                S->seen = 0;
                S->stride = S->cand = 0;
                S->size = sites[s].size;
                S->weight = sites[s].weight;
                S->succ = ML_EV_NOID;
            }
            pred = !ml_ev_is_access(sites[s].kind) ? 0
                   : S->seen                       ? S->last + (uint64_t)S->stride
                                                   : prev_addr;
            a = pred;
            o = &out[n];
            o->flags = 0;
            o->time = 0;
            if (b & 0x01) { /* ADDR: the difference, scaled by the size, in the token */
                uint64_t v = (uint64_t)(b >> 2 & 15);
                if (b & 0x02) {
                    uint64_t hi = rd_varint(&r);
                    why = "address difference out of range";
                    NEED(hi >> 60 == 0);
                    v |= hi << 4;
                }
                a = pred + ((uint64_t)ml_unzigzag(v) << ml_tshift(S->size));
            } else {
                if (b & 0x10)
                    a = pred + (uint64_t)ml_unzigzag(rd_varint(&r));
                if (b & 0x08)
                    S->size = rd_u32(&r);
                if (b & 0x04)
                    S->weight = rd_u32(&r);
            }
            if (!(b & 0x01) && (b & 0x02)) {
                uint64_t dt = rd_varint(&r);
                why = "time overflow";
                NEED(t_cur + dt >= t_cur);
                t_cur += dt;
                o->time = t_cur;
                o->flags = ML_RF_EXACT_TIME;
                if (!early)
                    pts[npts++] = (struct ml_tpoint){2ull * n + 1, t_cur};
            }
            NEED(!r.bad);
            if (ml_ev_is_access(sites[s].kind)) {
                if (S->seen) {
                    int64_t d = (int64_t)(a - S->last);
                    if (d == S->cand)
                        S->stride = d;
                    S->cand = d;
                }
                S->seen = 1;
                S->last = a;
                prev_addr = a;
                o->aux2 = 0;
            } else {
                why = "marker record with an address";
                NEED(a == 0);
                o->aux2 = sites[s].marker;
                nother++;
            }
            o->addr = a;
            o->aux = 0;
            o->site = s;
            o->size = S->size;
            o->weight = S->weight;
            o->thread = thread;
            o->kind = sites[s].kind;
            if (prev != ML_EV_NOID)
                st[prev].succ = s;
            prev = s;
            n++;
        } else {
            unsigned k = b & 0x3f;
            uint64_t dt = rd_varint(&r);
            why = "time overflow";
            NEED(t_cur + dt >= t_cur);
            t_cur += dt;
            if (!k) {
                /* Consecutive time points at one gap: the last one holds. */
                if (!early && pts[npts - 1].pos == 2ull * n && npts > 1)
                    pts[npts - 1].tick = t_cur;
                else if (!early)
                    pts[npts++] = (struct ml_tpoint){2ull * n, t_cur};
            } else {
                uint64_t f[ML_TOK_MAX_FIELDS] = {0}, nf = rd_varint(&r);
                struct ml_trace_rec *o;
                why = "event with too many fields";
                NEED(nf <= ML_TOK_MAX_FIELDS);
                for (uint64_t i = 0; i < nf; i++)
                    f[i] = rd_varint(&r);
                why = "more records than the chunk header says";
                NEED(n < count);
                why = "event field out of range";
                NEED(f[2] <= UINT32_MAX && f[3] <= UINT32_MAX && f[4] <= nsites);
                o = &out[n];
                o->time = t_cur;
                o->addr = f[0];
                o->aux = f[1];
                o->size = (uint32_t)f[2];
                o->aux2 = (uint32_t)f[3];
                o->site = f[4] ? (uint32_t)f[4] - 1 : ML_EV_NOID;
                o->weight = 1;
                o->thread = thread;
                o->kind = (uint16_t)k;
                o->flags = ML_RF_EXACT_TIME;
                if (!early)
                    pts[npts++] = (struct ml_tpoint){2ull * n + 1, t_cur};
                n++;
                nother++;
            }
        }
        p = r.p;
        FILL();
    }
#undef NEED
#undef FILL
    if (n != count)
        return fail(err, errlen, -EINVAL, "chunk holds %u records, its header says %u", n, count);
    if (t_cur > t_last)
        t_last = t_cur;
    if (!early)
        pts[npts++] = (struct ml_tpoint){2ull * n, t_last};
    fill_times(out, pts, npts, &seg, filled, n);
    *others = nother;
    return 0;
}

struct ml_trace_dec {
    const struct ml_trace *t;
    void *dctx;
    uint8_t *stored, *raw;
    size_t scap, rcap;
    struct ml_trace_rec *recs;
    size_t caprecs;
    struct ml_tpoint *pts;
    struct ml_tstate *st;
    struct ml_trace_rec *tmpl;
    uint32_t gen, others;
};

uint32_t ml_trace_dec_others(const struct ml_trace_dec *d)
{
    return d->others;
}

struct ml_trace_dec *ml_trace_dec_new(const struct ml_trace *t)
{
    struct ml_trace_dec *d = calloc(1, sizeof(*d));

    if (!d)
        return NULL;
    d->t = t;
    d->dctx = ZSTD_createDCtx();
    d->st = calloc((size_t)t->nsites + 1, sizeof(*d->st));
    d->tmpl = malloc(((size_t)t->nsites + 1) * sizeof(*d->tmpl));
    if (!d->dctx || !d->st || !d->tmpl) {
        ml_trace_dec_free(d);
        return NULL;
    }
    return d;
}

void ml_trace_dec_free(struct ml_trace_dec *d)
{
    if (!d)
        return;
    ZSTD_freeDCtx(d->dctx);
    free(d->raw);
    free(d->stored);
    free(d->recs);
    free(d->pts);
    free(d->st);
    free(d->tmpl);
    free(d);
}

int ml_trace_decode(struct ml_trace_dec *d, size_t i, const struct ml_trace_rec **recs, size_t *n,
                    char *err, size_t errlen)
{
    const struct ml_trace *t = d->t;
    const struct ml_trace_chunk *c = ml_trace_chunk(t, i);
    struct ml_chunk_header h;
    const uint8_t *data;
    char why[200];
    int rc;

    *recs = NULL;
    *n = 0;
    if (!c)
        return fail(err, errlen, -EINVAL, "no data chunk %zu", i);
    if (src_read(t, c->offset, &h, sizeof(h)) != (ssize_t)sizeof(h) || !header_ok(&h))
        return fail(err, errlen, -EIO, "chunk at offset %llu: cannot read its header",
                    (unsigned long long)c->offset);
    if (d->caprecs < (size_t)h.count + 1) {
        struct ml_trace_rec *r = realloc(d->recs, ((size_t)h.count + 1) * sizeof(*r));
        struct ml_tpoint *p = realloc(d->pts, (2 * (size_t)h.count + 3) * sizeof(*p));
        if (r)
            d->recs = r;
        if (p)
            d->pts = p;
        if (!r || !p)
            return fail(err, errlen, -ENOMEM, "out of memory");
        d->caprecs = (size_t)h.count + 1;
    }
    rc = load_payload(t, c->offset, &h, &d->stored, &d->scap, &d->raw, &d->rcap, &data, d->dctx,
                      err, errlen);
    if (rc)
        return rc;
    rc = ml_trace_decode_tokens(data, h.raw_size, t->tsites, t->nsites, h.thread, h.t_first,
                                h.t_last, d->recs, h.count, d->st, d->tmpl, &d->gen, d->pts,
                                &d->others, why, sizeof(why));
    if (rc)
        return fail(err, errlen, rc, "chunk at offset %llu: %s", (unsigned long long)c->offset,
                    why);
    *recs = d->recs;
    *n = h.count;
    return 0;
}
