/* Trace format: checksums, the record encoder's slow parts, headers and table entries. */
#include "format/trace.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

static const uint32_t crc_table[256] = {
    0x00000000, 0xf26b8303, 0xe13b70f7, 0x1350f3f4, 0xc79a971f, 0x35f1141c, 0x26a1e7e8, 0xd4ca64eb,
    0x8ad958cf, 0x78b2dbcc, 0x6be22838, 0x9989ab3b, 0x4d43cfd0, 0xbf284cd3, 0xac78bf27, 0x5e133c24,
    0x105ec76f, 0xe235446c, 0xf165b798, 0x030e349b, 0xd7c45070, 0x25afd373, 0x36ff2087, 0xc494a384,
    0x9a879fa0, 0x68ec1ca3, 0x7bbcef57, 0x89d76c54, 0x5d1d08bf, 0xaf768bbc, 0xbc267848, 0x4e4dfb4b,
    0x20bd8ede, 0xd2d60ddd, 0xc186fe29, 0x33ed7d2a, 0xe72719c1, 0x154c9ac2, 0x061c6936, 0xf477ea35,
    0xaa64d611, 0x580f5512, 0x4b5fa6e6, 0xb93425e5, 0x6dfe410e, 0x9f95c20d, 0x8cc531f9, 0x7eaeb2fa,
    0x30e349b1, 0xc288cab2, 0xd1d83946, 0x23b3ba45, 0xf779deae, 0x05125dad, 0x1642ae59, 0xe4292d5a,
    0xba3a117e, 0x4851927d, 0x5b016189, 0xa96ae28a, 0x7da08661, 0x8fcb0562, 0x9c9bf696, 0x6ef07595,
    0x417b1dbc, 0xb3109ebf, 0xa0406d4b, 0x522bee48, 0x86e18aa3, 0x748a09a0, 0x67dafa54, 0x95b17957,
    0xcba24573, 0x39c9c670, 0x2a993584, 0xd8f2b687, 0x0c38d26c, 0xfe53516f, 0xed03a29b, 0x1f682198,
    0x5125dad3, 0xa34e59d0, 0xb01eaa24, 0x42752927, 0x96bf4dcc, 0x64d4cecf, 0x77843d3b, 0x85efbe38,
    0xdbfc821c, 0x2997011f, 0x3ac7f2eb, 0xc8ac71e8, 0x1c661503, 0xee0d9600, 0xfd5d65f4, 0x0f36e6f7,
    0x61c69362, 0x93ad1061, 0x80fde395, 0x72966096, 0xa65c047d, 0x5437877e, 0x4767748a, 0xb50cf789,
    0xeb1fcbad, 0x197448ae, 0x0a24bb5a, 0xf84f3859, 0x2c855cb2, 0xdeeedfb1, 0xcdbe2c45, 0x3fd5af46,
    0x7198540d, 0x83f3d70e, 0x90a324fa, 0x62c8a7f9, 0xb602c312, 0x44694011, 0x5739b3e5, 0xa55230e6,
    0xfb410cc2, 0x092a8fc1, 0x1a7a7c35, 0xe811ff36, 0x3cdb9bdd, 0xceb018de, 0xdde0eb2a, 0x2f8b6829,
    0x82f63b78, 0x709db87b, 0x63cd4b8f, 0x91a6c88c, 0x456cac67, 0xb7072f64, 0xa457dc90, 0x563c5f93,
    0x082f63b7, 0xfa44e0b4, 0xe9141340, 0x1b7f9043, 0xcfb5f4a8, 0x3dde77ab, 0x2e8e845f, 0xdce5075c,
    0x92a8fc17, 0x60c37f14, 0x73938ce0, 0x81f80fe3, 0x55326b08, 0xa759e80b, 0xb4091bff, 0x466298fc,
    0x1871a4d8, 0xea1a27db, 0xf94ad42f, 0x0b21572c, 0xdfeb33c7, 0x2d80b0c4, 0x3ed04330, 0xccbbc033,
    0xa24bb5a6, 0x502036a5, 0x4370c551, 0xb11b4652, 0x65d122b9, 0x97baa1ba, 0x84ea524e, 0x7681d14d,
    0x2892ed69, 0xdaf96e6a, 0xc9a99d9e, 0x3bc21e9d, 0xef087a76, 0x1d63f975, 0x0e330a81, 0xfc588982,
    0xb21572c9, 0x407ef1ca, 0x532e023e, 0xa145813d, 0x758fe5d6, 0x87e466d5, 0x94b49521, 0x66df1622,
    0x38cc2a06, 0xcaa7a905, 0xd9f75af1, 0x2b9cd9f2, 0xff56bd19, 0x0d3d3e1a, 0x1e6dcdee, 0xec064eed,
    0xc38d26c4, 0x31e6a5c7, 0x22b65633, 0xd0ddd530, 0x0417b1db, 0xf67c32d8, 0xe52cc12c, 0x1747422f,
    0x49547e0b, 0xbb3ffd08, 0xa86f0efc, 0x5a048dff, 0x8ecee914, 0x7ca56a17, 0x6ff599e3, 0x9d9e1ae0,
    0xd3d3e1ab, 0x21b862a8, 0x32e8915c, 0xc083125f, 0x144976b4, 0xe622f5b7, 0xf5720643, 0x07198540,
    0x590ab964, 0xab613a67, 0xb831c993, 0x4a5a4a90, 0x9e902e7b, 0x6cfbad78, 0x7fab5e8c, 0x8dc0dd8f,
    0xe330a81a, 0x115b2b19, 0x020bd8ed, 0xf0605bee, 0x24aa3f05, 0xd6c1bc06, 0xc5914ff2, 0x37faccf1,
    0x69e9f0d5, 0x9b8273d6, 0x88d28022, 0x7ab90321, 0xae7367ca, 0x5c18e4c9, 0x4f48173d, 0xbd23943e,
    0xf36e6f75, 0x0105ec76, 0x12551f82, 0xe03e9c81, 0x34f4f86a, 0xc69f7b69, 0xd5cf889d, 0x27a40b9e,
    0x79b737ba, 0x8bdcb4b9, 0x988c474d, 0x6ae7c44e, 0xbe2da0a5, 0x4c4623a6, 0x5f16d052, 0xad7d5351,
};

static uint32_t crc_bytes(uint32_t c, const uint8_t *p, size_t n)
{
    while (n--)
        c = crc_table[(c ^ *p++) & 0xff] ^ (c >> 8);
    return c;
}

#if defined(__x86_64__)
/* SSE4.2 has a CRC32C instruction: 8 bytes per step instead of 1. */
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t c, const uint8_t *p, size_t n)
{
    uint64_t c64 = c;

    for (; n >= 8; n -= 8, p += 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c64 = __builtin_ia32_crc32di(c64, w);
    }
    c = (uint32_t)c64;
    for (; n; n--)
        c = __builtin_ia32_crc32qi(c, *p++);
    return c;
}

static int has_sse42(void)
{
    static int known = -1;
    unsigned a, b, c, d;

    if (known < 0)
        known = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_SSE4_2);
    return known;
}
#endif

uint32_t ml_crc32c(uint32_t crc, const void *buf, size_t len)
{
    uint32_t c = ~crc;

#if defined(__x86_64__)
    if (has_sse42())
        return ~crc_hw(c, buf, len);
#endif
    return ~crc_bytes(c, buf, len);
}

/* ---- names ---- */

const char *ml_ev_kind_name(unsigned kind)
{
    switch (kind) {
    case ML_EV_LOAD:
        return "load";
    case ML_EV_STORE:
        return "store";
    case ML_EV_RMW:
        return "rmw";
    case ML_EV_REGION_BEGIN:
        return "region-begin";
    case ML_EV_REGION_END:
        return "region-end";
    case ML_EV_MARK:
        return "mark";
    case ML_EV_FUNC_ENTRY:
        return "function-entry";
    case ML_EV_FUNC_EXIT:
        return "function-exit";
    case ML_EV_LOOP_ENTRY:
        return "loop-entry";
    case ML_EV_LOOP_ITER:
        return "loop-iteration";
    case ML_EV_LOOP_EXIT:
        return "loop-exit";
    case ML_EV_TRACE_ON:
        return "trace-on";
    case ML_EV_TRACE_OFF:
        return "trace-off";
    case ML_EV_PAGES:
        return "pages";
    case ML_EV_CALL:
        return "call";
    case ML_EV_THREAD_START:
        return "thread-start";
    case ML_EV_THREAD_EXIT:
        return "thread-exit";
    case ML_EV_FORK:
        return "fork";
    case ML_EV_EXEC:
        return "exec";
    case ML_EV_MMAP:
        return "mmap";
    case ML_EV_MUNMAP:
        return "munmap";
    case ML_EV_MREMAP:
        return "mremap";
    case ML_EV_BRK:
        return "brk";
    case ML_EV_IO:
        return "io";
    case ML_EV_PAGE_FAULT:
        return "page-fault";
    case ML_EV_PFN:
        return "pfn";
    case ML_EV_WAIT:
        return "wait";
    case ML_EV_DROP:
        return "drop";
    case ML_EV_SIGNAL:
        return "signal";
    case ML_EV_LOST:
        return "lost";
    case ML_EV_FAULTS_LOST:
        return "faults-lost";
    case ML_EV_ALLOC:
        return "alloc";
    case ML_EV_FREE:
        return "free";
    case ML_EV_REALLOC:
        return "realloc";
    case ML_EV_STACK_ALLOC:
        return "stack-alloc";
    case ML_EV_STACK_FREE:
        return "stack-free";
    case ML_EV_PTR_DEF:
        return "pointer";
    case ML_EV_ALLOC_SITE:
        return "alloc-site";
    case ML_EV_GLOBAL:
        return "global";
    case ML_EV_LOAD_VALUE:
        return "load-value";
    default:
        return "?";
    }
}

const char *ml_marker_kind_name(unsigned kind)
{
    static const char *const names[] = {"?",     "region", "mark",  "function", "loop",
                                        "trace", "pages",  "block", "object"};

    return kind < sizeof(names) / sizeof(names[0]) ? names[kind] : "?";
}

const char *ml_fd_kind_name(unsigned kind)
{
    static const char *const names[] = {"unknown", "file", "block", "socket",
                                        "pipe",    "char", "other"};

    return kind < sizeof(names) / sizeof(names[0]) ? names[kind] : "?";
}

const char *ml_io_call_name(unsigned call)
{
    static const char *const names[] = {"?",     "read",   "write",  "pread",    "pwrite",
                                        "readv", "writev", "recv",   "recvfrom", "recvmsg",
                                        "send",  "sendto", "sendmsg"};

    return call < sizeof(names) / sizeof(names[0]) ? names[call] : "?";
}

/* ---- encoder ---- */

int ml_tenc_reserve(struct ml_tenc *e, size_t room)
{
    if (e->nsites > e->cap_st) {
        uint32_t cap = e->cap_st ? e->cap_st : 256;
        struct ml_tstate *st;
        while (cap < e->nsites)
            cap *= 2;
        st = realloc(e->st, (size_t)cap * sizeof(*st));
        if (!st)
            return -ENOMEM;
        /* Generation 0 is never current: new entries read as unseen. */
        memset(st + e->cap_st, 0, (size_t)(cap - e->cap_st) * sizeof(*st));
        e->st = st;
        e->cap_st = cap;
    }
    if (e->len + room > e->cap) {
        size_t cap = e->cap ? e->cap : 65536;
        uint8_t *p;
        while (cap < e->len + room)
            cap *= 2;
        p = realloc(e->out, cap);
        if (!p)
            return -ENOMEM;
        e->out = p;
        e->cap = cap;
    }
    return 0;
}

void ml_tenc_begin(struct ml_tenc *e, uint64_t t_first)
{
    if (++e->gen == 0) { /* wrapped: every state must read as unseen again */
        memset(e->st, 0, (size_t)e->cap_st * sizeof(*e->st));
        e->gen = 1;
    }
    e->prev = ML_EV_NOID;
    e->prev_addr = 0;
    e->run = 0;
    e->t_cur = e->t_first = t_first;
    e->count = 0;
    e->len = 0;
}

void ml_tenc_free(struct ml_tenc *e)
{
    free(e->st);
    free(e->out);
    e->st = NULL;
    e->out = NULL;
    e->cap_st = 0;
    e->cap = e->len = 0;
}

void ml_tenc_time(struct ml_tenc *e, uint64_t t)
{
    uint8_t *p = ml_tenc_flush_run(e, e->out + e->len);

    if (t < e->t_cur)
        t = e->t_cur;
    *p++ = 0xc0;
    p = ml_put_varint(p, t - e->t_cur);
    e->t_cur = t;
    e->len = (size_t)(p - e->out);
}

void ml_tenc_event(struct ml_tenc *e, unsigned kind, uint64_t t, const uint64_t *fields,
                   unsigned nfields)
{
    uint8_t *p = ml_tenc_flush_run(e, e->out + e->len);

    if (t < e->t_cur)
        t = e->t_cur;
    if (nfields > ML_TOK_MAX_FIELDS)
        nfields = ML_TOK_MAX_FIELDS;
    while (nfields && !fields[nfields - 1])
        nfields--;
    *p++ = (uint8_t)(0xc0 | (kind & 0x3f));
    p = ml_put_varint(p, t - e->t_cur);
    e->t_cur = t;
    p = ml_put_varint(p, nfields);
    for (unsigned i = 0; i < nfields; i++)
        p = ml_put_varint(p, fields[i]);
    e->len = (size_t)(p - e->out);
    e->count++;
}

/* ---- headers ---- */

void ml_trace_header_fill(struct ml_trace_header *h)
{
    memcpy(h->magic, ML_TRACE_MAGIC, 8);
    h->version = ML_TRACE_VERSION;
    h->header_size = sizeof(*h);
    h->header_crc = ml_crc32c(0, h, offsetof(struct ml_trace_header, header_crc));
}

/* ---- table entries ---- */

int ml_tbuf_room(struct ml_tbuf *b, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        uint8_t *p;
        while (cap < b->len + n)
            cap *= 2;
        p = realloc(b->p, cap);
        if (!p)
            return -ENOMEM;
        b->p = p;
        b->cap = cap;
    }
    return 0;
}

static void tbuf_varint(struct ml_tbuf *b, uint64_t v)
{
    b->len = (size_t)(ml_put_varint(b->p + b->len, v) - b->p);
}

static void tbuf_str(struct ml_tbuf *b, const char *s)
{
    size_t n = s ? strlen(s) : 0;

    tbuf_varint(b, n);
    memcpy(b->p + b->len, s ? s : "", n);
    b->len += n;
}

static size_t slen(const char *s)
{
    return s ? strlen(s) : 0;
}

int ml_tbuf_site(struct ml_tbuf *b, const struct ml_ev_site *s, uint32_t marker_base)
{
    if (ml_tbuf_room(b, 1 + 6 * 10 + 3 * 10 + slen(s->func) + slen(s->file) + slen(s->text)))
        return -ENOMEM;
    b->p[b->len++] = (uint8_t)s->kind;
    tbuf_varint(b, s->size);
    tbuf_varint(b, s->weight);
    tbuf_varint(b, s->marker == ML_EV_NOID ? 0 : (uint64_t)marker_base + s->marker + 1);
    tbuf_varint(b, s->line);
    tbuf_varint(b, s->column);
    tbuf_str(b, s->func);
    tbuf_str(b, s->file);
    tbuf_str(b, s->text);
    return 0;
}

int ml_tbuf_marker(struct ml_tbuf *b, const struct ml_ev_marker *m)
{
    if (ml_tbuf_room(b, 1 + 10 + 3 * 10 + slen(m->name) + slen(m->file) + slen(m->func)))
        return -ENOMEM;
    b->p[b->len++] = (uint8_t)m->kind;
    tbuf_varint(b, m->line);
    tbuf_str(b, m->name);
    tbuf_str(b, m->file);
    tbuf_str(b, m->func);
    return 0;
}

int ml_tbuf_meta(struct ml_tbuf *b, const char *key, const char *value)
{
    if (ml_tbuf_room(b, 2 * 10 + slen(key) + slen(value)))
        return -ENOMEM;
    tbuf_str(b, key);
    tbuf_str(b, value);
    return 0;
}

void ml_chunk_seal(struct ml_chunk_header *h, const void *stored, size_t n, size_t raw_n,
                   uint32_t flags)
{
    h->magic = ML_CHUNK_MAGIC;
    h->flags = flags;
    h->raw_size = (uint32_t)raw_n;
    h->size = (uint32_t)n;
    h->payload_crc = ml_crc32c(0, stored, n);
    h->header_crc = ml_crc32c(0, h, offsetof(struct ml_chunk_header, header_crc));
}

int ml_chunk_build(struct ml_tbuf *out, const struct ml_tzstd *z, struct ml_chunk_header *h,
                   const void *payload, size_t n)
{
    size_t cap = z ? z->bound(n) : 0, at = out->len, stored = n;
    uint8_t *dst;

    if (ml_tbuf_room(out, sizeof(*h) + (cap > n ? cap : n)))
        return -ENOMEM;
    dst = out->p + at + sizeof(*h);
    h->flags = 0;
    if (z && n) {
        size_t c = z->compress(z->ctx, dst, cap, payload, n);
        if (c && c < n) {
            stored = c;
            h->flags = ML_CF_ZSTD;
        }
    }
    if (!(h->flags & ML_CF_ZSTD))
        memcpy(dst, payload, n);
    ml_chunk_seal(h, dst, stored, n, h->flags);
    memcpy(out->p + at, h, sizeof(*h));
    out->len = at + sizeof(*h) + stored;
    return 0;
}
