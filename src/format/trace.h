/* Memory trace file format (.mlt): chunk layout, record encoder, validating chunk reader. */
#ifndef ML_FORMAT_TRACE_H
#define ML_FORMAT_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "format/events.h"
#include "format/profile.h" /* enum ml_clock */

/*
 * Layout (docs/trace-format.md; little-endian, fixed-size headers):
 *
 *   file header   struct ml_trace_header (64 bytes)
 *   chunk*        struct ml_chunk_header (72 bytes), payload[size]
 *
 * Chunks are self-contained and written whole with one write(2) each, so a
 * killed writer leaves every complete chunk; a reader that meets damage
 * reports it with its offset and resynchronises on the next chunk magic
 * whose header checksum holds. Tables (sites, markers, threads, meta) are
 * chunks too and may appear anywhere (modules register while the program
 * runs); ml_trace_open reads all of them before any data is decoded.
 *
 * Version rule: bump ML_TRACE_VERSION when the meaning or layout of an
 * existing header, table entry or token changes. New chunk types, new event
 * kinds and new meta keys do not bump it: readers skip unknown chunk types
 * and reject only unknown tokens inside a data chunk (that chunk only).
 */
#define ML_TRACE_MAGIC   "MLTRACE\n"
#define ML_TRACE_VERSION 2
/* Oldest version readers still accept: version 2 only added the ADDR token. */
#define ML_TRACE_VERSION_MIN 1
#define ML_CHUNK_MAGIC       0x4b434c4du /* "MLCK" */

/* Bounds every reader enforces (and the writer keeps). */
#define ML_CHUNK_MAX_RECORDS (1u << 18)
#define ML_CHUNK_MAX_RAW     (64u << 20)

struct ml_trace_header {
    char magic[8];
    uint32_t version;
    uint32_t header_size; /* sizeof(struct ml_trace_header) */
    uint32_t flags;       /* ML_TF_* */
    uint32_t pid;
    uint32_t ppid;  /* the parent when this process was forked from a traced one, else 0 */
    uint32_t clock; /* enum ml_clock of every tick in the file */
    uint64_t tick0; /* clock at runtime start (or at the fork) */
    uint64_t mono0; /* CLOCK_MONOTONIC ns at tick0 */
    uint64_t real0; /* CLOCK_REALTIME ns at tick0 */
    uint32_t page_size;
    uint32_t header_crc; /* crc32c of the bytes before this field */
};

/* Recording options in effect (ml_trace_header.flags). */
#define ML_TF_COLLAPSE     1u  /* consecutive same-line accesses of a thread were merged */
#define ML_TF_DROP         2u  /* full buffers were dropped instead of waited for */
#define ML_TF_START_OFF    4u  /* recording started off (MEMLENS_TRACE_ON starts it) */
#define ML_TF_REGIONS_ONLY 8u  /* accesses recorded only while a region is open */
#define ML_TF_MARKERS_ONLY 16u /* no access records, markers and events only */
#define ML_TF_FAULTS       32u /* page faults recorded (the kernel allowed the event) */
#define ML_TF_PFN          64u /* physical frame numbers readable from /proc/self/pagemap */

struct ml_chunk_header {
    uint32_t magic;       /* ML_CHUNK_MAGIC */
    uint16_t type;        /* enum ml_chunk_type */
    uint16_t flags;       /* ML_CF_* */
    uint32_t thread;      /* data: trace thread index (0 = first thread); tables: 0 */
    uint32_t seq;         /* data: per-thread chunk number from 0; tables: first id */
    uint32_t count;       /* data: records; tables: entries */
    uint32_t raw_size;    /* payload bytes before compression */
    uint32_t size;        /* payload bytes stored */
    uint32_t payload_crc; /* crc32c of the stored payload */
    uint64_t t_first;     /* data: ticks at the first and after the last record */
    uint64_t t_last;
    uint64_t clk_tick;   /* a pair of readings taken together by the writer: */
    uint64_t clk_ns;     /* ticks and CLOCK_MONOTONIC ns (converts ticks to time) */
    uint32_t tid;        /* data: the thread's OS id; tables: 0 */
    uint32_t header_crc; /* crc32c of the bytes before this field */
};

enum ml_chunk_type {
    ML_CK_DATA = 1,    /* one thread's records: token stream (below) */
    ML_CK_SITES = 2,   /* site table entries seq .. seq+count-1 */
    ML_CK_MARKERS = 3, /* marker table entries seq .. seq+count-1 */
    ML_CK_META = 4,    /* count key/value string pairs */
    ML_CK_END = 5,     /* the process ended: struct ml_trace_end */
};

#define ML_CF_ZSTD 1u /* payload is one zstd frame */

/* ML_CK_END payload (uncompressed). Several END chunks may exist (exec, then more). */
struct ml_trace_end {
    uint32_t reason; /* enum ml_end_reason */
    uint32_t signal; /* for ML_END_SIGNAL */
    uint32_t nthreads;
    uint32_t self_encoded; /* buffers the threads encoded themselves (0 in traces before it) */
    uint64_t records;      /* records written */
    uint64_t dropped;      /* records dropped (--drop) */
    uint64_t waits;        /* times a producer waited for a free buffer */
    uint64_t wait_ticks;
    uint64_t lost;      /* raw records found damaged */
    uint64_t writer_ns; /* CPU time the writer thread spent (encoding, compressing, writing) */
    uint64_t raw_words; /* words of records the threads appended */
};

enum ml_end_reason { ML_END_EXIT = 1, ML_END_SIGNAL = 2, ML_END_EXEC = 3 };

/*
 * ---- Data chunk tokens ----
 *
 * A data chunk holds one thread's records in order. Decoding state starts
 * empty at every chunk, so chunks decode independently:
 *   prev       the site of the previous record (none)
 *   prev_addr  the address of the previous access record (0)
 *   per site   last address, stride, candidate stride, size, weight and
 *              successor (the site that followed it last time)
 * Tokens (first byte):
 *   0nnnnnnn   RUN: n records (n = 1..127; n = 0: a varint count follows),
 *              each fully predicted: site = succ(prev), address =
 *              last + stride (0 for non-access sites), size and weight as
 *              last time.
 *   10SAZWT0   REC: one record; the set bits say which fields follow, in
 *              this order: S site (zigzag varint of site - (prev + 1)),
 *              A address (zigzag varint of address - predicted), Z size
 *              (varint), W weight (varint), T time (varint ticks since the
 *              current time point). Absent fields are predicted as for RUN;
 *              a site never seen in the chunk predicts prev_addr.
 *   10qqqqc1   ADDR (version 2): one access record whose site, size and
 *              weight are predicted and whose address is not: v = qqqq,
 *              plus (when c) a varint whose value is v's bits from 4 up;
 *              address = predicted + (unzigzag(v) << log2 size), the
 *              shift 0 when the site's size is not a power of two.
 *              A random gather of doubles across 1 MiB: 3 bytes (REC: 4).
 *   11kkkkkk   k = 0: TIME, a time point: varint ticks since the current one.
 *              k > 0: runtime event of kind k (enum ml_ev_kind): varint
 *              ticks since the current time point (the event's time, a new
 *              time point), varint n, then n varint fields.
 * After every record of an access site: d = address - last; if d equals
 * the candidate, stride = d; candidate = d; last = address (on a site's
 * first record in the chunk stride = candidate = 0). Then succ(prev) = site
 * and prev = site. Varints are LEB128; zigzag maps signed to unsigned.
 *
 * Time: the chunk header's t_first and t_last, every TIME token, every
 * record with T and every event are time points. A record between two time
 * points gets the time interpolated linearly by its position.
 */
#define ML_TOK_MAX_FIELDS 8

/* A decoded record (48 bytes). Which fields an event fills: docs/trace-format.md. */
struct ml_trace_rec {
    uint64_t time; /* ticks (ml_trace_ns converts) */
    uint64_t addr;
    uint64_t aux;    /* event-specific */
    uint32_t site;   /* global site id, ML_EV_NOID for runtime events */
    uint32_t size;   /* bytes (accesses), length (events) */
    uint32_t weight; /* accesses this record stands for */
    uint32_t thread; /* trace thread index */
    uint16_t kind;   /* enum ml_ev_kind */
    uint16_t flags;  /* ML_RF_* */
    uint32_t aux2;   /* event-specific; marker id for marker records */
};

#define ML_RF_EXACT_TIME 1u /* time measured for this record, not interpolated */

/* ---- Encoding primitives (shared by the runtime's writer and the reader) ---- */

uint32_t ml_crc32c(uint32_t crc, const void *buf, size_t len);

static inline uint8_t *ml_put_varint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

static inline uint64_t ml_zigzag(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline int64_t ml_unzigzag(uint64_t v)
{
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* ADDR scales an address difference by the access size when a power of two. */
static inline unsigned ml_tshift(uint32_t size)
{
    return size && !(size & (size - 1)) ? (unsigned)__builtin_ctz(size) : 0;
}

/*
 * An access record whose address differs from its prediction by d, all else
 * predicted: ADDR when d is a multiple of 1 << sh (the site's ml_tshift),
 * else REC with the address. The varint's loop, not a branch-free one: the
 * lengths of random differences within a range are nearly all the same, and
 * in the writer's replay of spmv the loop cost a third less.
 */
static inline uint8_t *ml_put_addr(uint8_t *p, uint64_t d, unsigned sh)
{
    uint64_t v;

    if (d & ((1ull << sh) - 1)) {
        *p = 0x90;
        v = ml_zigzag((int64_t)d);
    } else {
        v = ml_zigzag((int64_t)d >> sh);
        *p = (uint8_t)(0x81 | (v & 15) << 2 | (v > 15) << 1);
        if (v <= 15)
            return p + 1;
        v >>= 4;
    }
    return ml_put_varint(p + 1, v);
}

/* Static facts of a site the encoder and decoder need. */
struct ml_tsite {
    uint8_t kind; /* enum ml_ev_kind */
    uint8_t pad[3];
    uint32_t size;
    uint32_t weight;
    uint32_t marker; /* global marker id or ML_EV_NOID */
};

/* Per-site prediction state; valid for the chunk whose generation it carries. */
struct ml_tstate {
    uint64_t last;
    int64_t stride, cand;
    uint32_t size, weight;
    uint32_t succ;
    uint32_t gen;
    uint32_t seen; /* an access of this site was recorded in the chunk */
    /* decoder: a steady access site (stride == cand) whose next RUN record is tmpl[site] */
    uint32_t fast;
};

/*
 * One thread's encoder. The caller owns sites/nsites (the site table so far)
 * and out (grown with ml_tenc_reserve). ml_tenc_begin starts a chunk;
 * ml_tenc_put appends one record; ml_tenc_end flushes the pending run and
 * leaves the chunk's token stream in out[0..len).
 */
struct ml_tenc {
    const struct ml_tsite *sites;
    uint32_t nsites;
    struct ml_tstate *st; /* [cap_st] */
    uint32_t cap_st;
    uint32_t gen;
    uint32_t prev;
    uint64_t prev_addr;
    uint64_t run;
    uint64_t t_cur;   /* current time point */
    uint64_t t_first; /* of the chunk */
    uint32_t count;   /* records in the chunk */
    uint8_t *out;
    size_t len, cap;
};

/* Bytes one record or event can take, at most. */
#define ML_TENC_MAX_REC 48

/* Grows the per-site state to the site table and out to room more bytes; 0 or -ENOMEM. */
int ml_tenc_reserve(struct ml_tenc *e, size_t room);
void ml_tenc_begin(struct ml_tenc *e, uint64_t t_first);
void ml_tenc_free(struct ml_tenc *e);

static inline uint8_t *ml_tenc_flush_run(struct ml_tenc *e, uint8_t *p)
{
    uint64_t n = e->run;

    if (!n)
        return p;
    if (n < 128) {
        *p++ = (uint8_t)n;
    } else {
        *p++ = 0;
        p = ml_put_varint(p, n);
    }
    e->run = 0;
    return p;
}

/*
 * Appends one record of site s (< nsites). has_time: t is this record's exact
 * time (>= the current time point). Caller has reserved ML_TENC_MAX_REC bytes.
 */
static inline void ml_tenc_put(struct ml_tenc *e, uint32_t s, uint64_t addr, uint32_t size,
                               uint32_t weight, int has_time, uint64_t t)
{
    struct ml_tstate *st = &e->st[s];
    const struct ml_tsite *si = &e->sites[s];
    int access = ml_ev_is_access(si->kind);
    uint64_t pred;
    int site_ok;

    if (st->gen != e->gen) {
        st->gen = e->gen;
        st->seen = 0;
        st->stride = st->cand = 0;
        st->size = si->size;
        st->weight = si->weight;
        st->succ = ML_EV_NOID;
    }
    pred = st->seen ? st->last + (uint64_t)st->stride : e->prev_addr;
    if (!access)
        pred = 0;
    site_ok = e->prev != ML_EV_NOID && e->st[e->prev].succ == s;
    if (site_ok && size == st->size && weight == st->weight && !has_time) {
        if (addr == pred) {
            e->run++;
        } else {
            uint8_t *p = ml_tenc_flush_run(e, e->out + e->len);
            e->len = (size_t)(ml_put_addr(p, addr - pred, ml_tshift(size)) - e->out);
        }
    } else {
        uint8_t *p = ml_tenc_flush_run(e, e->out + e->len);
        uint8_t *tok = p++;
        unsigned bits = 0x80;
        if (!site_ok) {
            bits |= 0x20;
            p = ml_put_varint(p, ml_zigzag((int64_t)s - (int64_t)(e->prev + 1)));
        }
        if (addr != pred) {
            bits |= 0x10;
            p = ml_put_varint(p, ml_zigzag((int64_t)(addr - pred)));
        }
        if (size != st->size) {
            bits |= 0x08;
            p = ml_put_varint(p, size);
        }
        if (weight != st->weight) {
            bits |= 0x04;
            p = ml_put_varint(p, weight);
        }
        if (has_time) {
            bits |= 0x02;
            if (t < e->t_cur)
                t = e->t_cur;
            p = ml_put_varint(p, t - e->t_cur);
            e->t_cur = t;
        }
        *tok = (uint8_t)bits;
        e->len = (size_t)(p - e->out);
    }
    if (access) {
        if (st->seen) {
            int64_t d = (int64_t)(addr - st->last);
            if (d == st->cand)
                st->stride = d;
            st->cand = d;
        }
        st->seen = 1;
        st->last = addr;
        e->prev_addr = addr;
    }
    st->size = size;
    st->weight = weight;
    if (e->prev != ML_EV_NOID)
        e->st[e->prev].succ = s;
    e->prev = s;
    e->count++;
}

/* A time point between records (t >= the current one). */
void ml_tenc_time(struct ml_tenc *e, uint64_t t);
/* A runtime event with up to ML_TOK_MAX_FIELDS fields; t >= the current time point. */
void ml_tenc_event(struct ml_tenc *e, unsigned kind, uint64_t t, const uint64_t *fields,
                   unsigned nfields);

/* Sets magic, version, size and checksum of a file header whose other fields are filled. */
void ml_trace_header_fill(struct ml_trace_header *h);

/* A growable byte buffer. */
struct ml_tbuf {
    uint8_t *p;
    size_t len, cap;
};
int ml_tbuf_room(struct ml_tbuf *b, size_t n);

/*
 * zstd as the caller reaches it (the runtime loads libzstd at run time, the
 * tools link it): compress returns the compressed size, or 0 when it failed
 * or would not shrink the payload.
 */
struct ml_tzstd {
    size_t (*compress)(void *ctx, void *dst, size_t cap, const void *src, size_t n);
    size_t (*bound)(size_t n);
    void *ctx;
};

/*
 * Appends one framed chunk to out: h's type, thread, seq, count, times, clock
 * pair and tid as given; flags, sizes and checksums set here. The payload is
 * compressed when z is given and compression shrinks it. 0 or -ENOMEM.
 */
int ml_chunk_build(struct ml_tbuf *out, const struct ml_tzstd *z, struct ml_chunk_header *h,
                   const void *payload, size_t n);
/* Sets h's magic, flags, sizes and checksums for a stored payload of n bytes (raw: raw_n). */
void ml_chunk_seal(struct ml_chunk_header *h, const void *stored, size_t n, size_t raw_n,
                   uint32_t flags);

/* Table payloads: append one entry; 0 or -ENOMEM. */
int ml_tbuf_site(struct ml_tbuf *b, const struct ml_ev_site *s, uint32_t marker_base);
int ml_tbuf_marker(struct ml_tbuf *b, const struct ml_ev_marker *m);
int ml_tbuf_meta(struct ml_tbuf *b, const char *key, const char *value);

/*
 * ---- Whole-file writer for tools (src/format/trace-write.c; links zstd) ----
 *
 * Writes a trace the reader accepts, on a descriptor the caller created:
 * filtered traces (membus), tests and benchmarks. ml_tw_open writes the file
 * header (hdr's pid, ppid, flags, clock, tick0, mono0, real0 and page_size;
 * the rest is filled) and the tables: sites with global marker ids (site
 * ids are their indexes), markers, meta (nmeta key/value pairs). level is the
 * zstd level of the payloads, 0 for none. Records go to per-thread chunks of
 * at most ml_tw_chunk_records records (default ML_CHUNK_MAX_RECORDS), times
 * non-decreasing per thread: ml_tw_put with exact set gives the record its
 * own time, otherwise records between time points (ml_tw_time, events, exact
 * records) are interpolated as in any trace. Errors are sticky: every call
 * returns 0 or the first negative errno. ml_tw_finish ends every chunk,
 * writes an END chunk when end is given (nthreads and records filled when
 * 0) and frees the writer; it does not close fd.
 */
struct ml_trace_writer;
int ml_tw_open(struct ml_trace_writer **w, int fd, const struct ml_trace_header *hdr,
               const struct ml_ev_site *sites, uint32_t nsites, const struct ml_ev_marker *markers,
               uint32_t nmarkers, const char *const *meta, size_t nmeta, int level);
void ml_tw_chunk_records(struct ml_trace_writer *w, uint32_t n);
/* A (tick, CLOCK_MONOTONIC ns) pair for the headers of the chunks ended from now on. */
void ml_tw_clock(struct ml_trace_writer *w, uint64_t tick, uint64_t ns);
int ml_tw_put(struct ml_trace_writer *w, uint32_t thread, uint32_t tid, uint32_t site,
              uint64_t addr, uint32_t size, uint32_t weight, uint64_t t, int exact);
int ml_tw_time(struct ml_trace_writer *w, uint32_t thread, uint64_t t);
int ml_tw_event(struct ml_trace_writer *w, uint32_t thread, uint32_t tid, unsigned kind, uint64_t t,
                const uint64_t *fields, unsigned nfields);
int ml_tw_finish(struct ml_trace_writer *w, const struct ml_trace_end *end);
void ml_tw_free(struct ml_trace_writer *w);

/* ---- Reader (src/format/trace-read.c; links zstd) ---- */

struct ml_trace; /* opaque */

/* One chunk of the file as the index found it. */
struct ml_trace_chunk {
    uint64_t offset; /* of its header */
    uint32_t type, flags, thread, seq, count, raw_size, size;
    uint64_t t_first, t_last;
};

/* A site (instruction table entry), with global ids. */
struct ml_trace_site {
    uint32_t kind, size, weight;
    uint32_t marker; /* global marker id or ML_EV_NOID */
    uint32_t line, column;
    const char *func, *file, *text;
};

struct ml_trace_marker {
    uint32_t kind, line;
    const char *name, *file, *func;
};

/* What the reader found wrong while indexing (the file is still usable). */
struct ml_trace_problem {
    uint64_t offset;
    char what[160];
};

struct ml_trace_info {
    const char *path;
    struct ml_trace_header hdr;
    uint64_t file_size;
    int ended;               /* an END chunk was found */
    struct ml_trace_end end; /* the last END chunk */
    size_t nproblems;        /* damage found while indexing */
    const struct ml_trace_problem *problems;
    uint32_t nthreads;              /* 1 + highest data chunk thread index */
    uint64_t data_raw, data_stored; /* payload bytes of data chunks */
    uint64_t records;               /* sum of data chunk counts */
    size_t nmeta;
    const char *const *meta; /* key, value, key, value, ... */
};

/*
 * Opens and indexes a trace: validates the file header, walks every chunk
 * header, loads the tables. Damaged or truncated chunks are skipped and
 * listed in info->problems (with offsets); a file whose header is unusable
 * fails with a one-line reason in err. Returns 0 or -errno/-EINVAL.
 */
int ml_trace_open(const char *path, struct ml_trace **out, char *err, size_t errlen);
/* The same on a buffer the caller keeps alive until ml_trace_close (fuzzing, tests). */
int ml_trace_open_mem(const void *buf, size_t len, struct ml_trace **out, char *err, size_t errlen);
void ml_trace_close(struct ml_trace *t);

const struct ml_trace_info *ml_trace_info(const struct ml_trace *t);
size_t ml_trace_nchunks(const struct ml_trace *t);
/* Data chunks only, in file order. */
const struct ml_trace_chunk *ml_trace_chunk(const struct ml_trace *t, size_t i);
uint32_t ml_trace_nsites(const struct ml_trace *t);
const struct ml_trace_site *ml_trace_site(const struct ml_trace *t, uint32_t id);
uint32_t ml_trace_nmarkers(const struct ml_trace *t);
const struct ml_trace_marker *ml_trace_marker(const struct ml_trace *t, uint32_t id);
/* The OS id of trace thread `thread` (from its data chunks), 0 when unknown. */
uint32_t ml_trace_thread_tid(const struct ml_trace *t, uint32_t thread);
/* Nanoseconds since the trace began (fit from the chunks' clock pairs). */
double ml_trace_ns(const struct ml_trace *t, uint64_t tick);

/*
 * A decoder: one per worker; decoders of one trace may run in parallel.
 * ml_trace_decode decodes data chunk i (index as for ml_trace_chunk) into
 * an array owned by the decoder, valid until its next call: absolute
 * address, time, thread, site, kind, size and weight per record. Returns 0,
 * or -EINVAL with "chunk at offset N: reason" in err (the chunk is damaged;
 * others are unaffected).
 */
struct ml_trace_dec;
struct ml_trace_dec *ml_trace_dec_new(const struct ml_trace *t);
void ml_trace_dec_free(struct ml_trace_dec *d);
int ml_trace_decode(struct ml_trace_dec *d, size_t i, const struct ml_trace_rec **recs, size_t *n,
                    char *err, size_t errlen);
/* Records of the chunk last decoded that are not accesses (markers, events): 0 spares readers a
 * scan for them. */
uint32_t ml_trace_dec_others(const struct ml_trace_dec *d);

/*
 * Decodes a token stream (exposed for tests): count records into out, st a
 * state per site (nsites, zeroed once; *gen, 0 at first, tells chunks apart),
 * tmpl scratch room for nsites records (the next RUN record of each steady
 * site: a run then costs a copy and an add per record), pts scratch room for
 * 2 * count + 3 time points, *others the records that are not accesses.
 */
struct ml_tpoint {
    uint64_t pos, tick;
};
int ml_trace_decode_tokens(const uint8_t *p, size_t len, const struct ml_tsite *sites,
                           uint32_t nsites, uint32_t thread, uint64_t t_first, uint64_t t_last,
                           struct ml_trace_rec *out, uint32_t count, struct ml_tstate *st,
                           struct ml_trace_rec *tmpl, uint32_t *gen, struct ml_tpoint *pts,
                           uint32_t *others, char *err, size_t errlen);

#endif
