/* Unit tests of the trace format: encoder/decoder round trips, sizes, files, damage, hostile
 * tokens. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <zstd.h>

#include "format/trace.h"

/* ---- a site table and a generator of plausible record streams ---- */

#define NSITES 24

static struct ml_tsite tsites[NSITES];
static struct ml_ev_site esites[NSITES];
static struct ml_ev_marker emarkers[3] = {
    {ML_MK_REGION, 10, "phase", "k.c", "main"},
    {ML_MK_FUNCTION, 20, "kernel", "k.c", "kernel"},
    {ML_MK_MARK, 30, "step", "k.c", "main"},
};

static void make_sites(void)
{
    static const uint32_t sizes[] = {1, 2, 4, 8, 16, 32, 8, 8};

    for (int i = 0; i < NSITES; i++) {
        struct ml_ev_site *s = &esites[i];
        memset(s, 0, sizeof(*s));
        s->kind = i % 3 == 2 ? ML_EV_STORE : ML_EV_LOAD;
        s->size = sizes[i % 8];
        s->weight = 1;
        s->marker = ML_EV_NOID;
        s->line = 100 + (uint32_t)i;
        s->func = "kernel";
        s->file = "k.c";
        s->text = "";
    }
    esites[5].kind = ML_EV_RMW;
    esites[6].size = 0; /* memcpy read */
    esites[7].size = 0;
    esites[7].kind = ML_EV_STORE;
    esites[20].kind = ML_EV_REGION_BEGIN;
    esites[20].marker = 0;
    esites[21].kind = ML_EV_REGION_END;
    esites[21].marker = 0;
    esites[22].kind = ML_EV_FUNC_ENTRY;
    esites[22].marker = 1;
    esites[23].kind = ML_EV_MARK;
    esites[23].marker = 2;
    for (int i = 0; i < NSITES; i++) {
        esites[i].size = ml_ev_is_access(esites[i].kind) ? esites[i].size : 0;
        tsites[i].kind = (uint8_t)esites[i].kind;
        tsites[i].size = esites[i].size;
        tsites[i].weight = 1;
        tsites[i].marker = esites[i].marker;
    }
}

struct item {
    int event; /* 0 record, 1 event, 2 time point */
    struct ml_trace_rec r;
    uint64_t fields[5];
};

static uint64_t rng = 88172645463325252ull;

static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/*
 * A stream of n items: loops over segments of sites with strides, random
 * (chasing) addresses, variable sizes, weights, timed markers, events and
 * time points, with times that never go backwards.
 */
static struct item *gen_stream(size_t n, int regular)
{
    struct item *v = calloc(n, sizeof(*v));
    uint64_t t = 1000, base[NSITES];

    assert_non_null(v);
    for (int i = 0; i < NSITES; i++)
        base[i] = 0x7f0000000000ull + (uint64_t)i * 0x100000;
    for (size_t i = 0; i < n;) {
        uint32_t seg = (uint32_t)(rnd() % 4) * 4, len = 3 + (uint32_t)(rnd() % 60);
        uint32_t what = regular ? 0 : (uint32_t)(rnd() % 10);
        if (what == 9 && i < n) { /* an event */
            struct item *it = &v[i++];
            t += rnd() % 50;
            it->event = 1;
            it->r.kind = (uint16_t)(ML_EV_THREAD_START + rnd() % 16);
            it->r.time = t;
            it->fields[0] = rnd() & 0xffffffffffff;
            it->fields[1] = rnd() % 3 ? rnd() % 100000 : 0;
            it->fields[2] = rnd() % 4096;
            it->fields[3] = rnd() % 7;
            it->fields[4] = rnd() % 2 ? 1 + rnd() % NSITES : 0;
            continue;
        }
        if (what == 8 && i < n) { /* a time point */
            t += rnd() % 1000;
            v[i].event = 2;
            v[i++].r.time = t;
            continue;
        }
        if (what == 7 && i < n) { /* a timed marker */
            struct item *it = &v[i++];
            t += 1 + rnd() % 20;
            it->r.site = 20 + (uint32_t)(rnd() % 4);
            it->r.kind = tsites[it->r.site].kind;
            it->r.time = t;
            it->r.flags = ML_RF_EXACT_TIME;
            it->r.size = 0;
            it->r.weight = 1;
            it->r.aux2 = tsites[it->r.site].marker;
            continue;
        }
        for (uint32_t k = 0; k < len && i < n; k++) {
            for (uint32_t s = seg; s < seg + 4 && i < n; s++) {
                struct item *it = &v[i++];
                it->r.site = s;
                it->r.kind = tsites[s].kind;
                it->r.size = tsites[s].size ? tsites[s].size : (uint32_t)(16 + rnd() % 3);
                it->r.weight = what == 6 && s == seg ? 1 + (uint32_t)(rnd() % 9) : 1;
                if (what == 5 && s == seg + 1)
                    it->r.addr = rnd() & 0xffffffffff8ull; /* chasing */
                else
                    it->r.addr = base[s] += tsites[s].size ? tsites[s].size : 64;
            }
        }
    }
    return v;
}

/* Encodes items [from, to) as one chunk; returns the token stream length. */
static size_t encode(struct ml_tenc *e, const struct item *v, size_t from, size_t to,
                     uint64_t t_first)
{
    ml_tenc_begin(e, t_first);
    for (size_t i = from; i < to; i++) {
        const struct item *it = &v[i];
        assert_int_equal(ml_tenc_reserve(e, ML_TENC_MAX_REC), 0);
        if (it->event == 1)
            ml_tenc_event(e, it->r.kind, it->r.time, it->fields, 5);
        else if (it->event == 2)
            ml_tenc_time(e, it->r.time);
        else
            ml_tenc_put(e, it->r.site, it->r.addr, it->r.size, it->r.weight,
                        !!(it->r.flags & ML_RF_EXACT_TIME), it->r.time);
    }
    assert_int_equal(ml_tenc_reserve(e, ML_TENC_MAX_REC), 0);
    e->len = (size_t)(ml_tenc_flush_run(e, e->out + e->len) - e->out);
    return e->len;
}

/* Decodes what encode wrote and checks every record against the items. */
static void check_decode(const struct ml_tenc *e, const struct item *v, size_t from, size_t to,
                         uint64_t t_first, uint64_t t_last)
{
    struct ml_trace_rec *out = calloc(e->count + 1, sizeof(*out));
    struct ml_tpoint *pts = calloc(2 * (size_t)e->count + 3, sizeof(*pts));
    static struct ml_tstate st[NSITES];
    static struct ml_trace_rec tmpl[NSITES];
    static uint32_t gen;
    char err[200] = "";
    uint64_t last_time = t_first;
    size_t j = 0;
    uint32_t others = UINT32_MAX, nother = 0;

    assert_non_null(out);
    assert_non_null(pts);
    if (ml_trace_decode_tokens(e->out, e->len, tsites, NSITES, 7, t_first, t_last, out, e->count,
                               st, tmpl, &gen, pts, &others, err, sizeof(err)))
        fail_msg("decode: %s", err);
    for (size_t i = from; i < to; i++) {
        const struct item *it = &v[i];
        const struct ml_trace_rec *o;
        if (it->event == 2)
            continue;
        nother += !ml_ev_is_access(it->r.kind);
        o = &out[j++];
        assert_int_equal(o->thread, 7);
        assert_int_equal(o->kind, it->r.kind);
        assert_true(o->time >= last_time);
        last_time = o->time;
        if (it->event == 1) {
            assert_int_equal(o->time, it->r.time);
            assert_int_equal(o->addr, it->fields[0]);
            assert_int_equal(o->aux, it->fields[1]);
            assert_int_equal(o->size, it->fields[2]);
            assert_int_equal(o->aux2, it->fields[3]);
            assert_int_equal(o->site, it->fields[4] ? it->fields[4] - 1 : ML_EV_NOID);
            continue;
        }
        assert_int_equal(o->site, it->r.site);
        assert_int_equal(o->addr, it->r.addr);
        assert_int_equal(o->size, it->r.size);
        assert_int_equal(o->weight, it->r.weight);
        assert_int_equal(o->aux2, ml_ev_is_access(it->r.kind) ? 0 : tsites[it->r.site].marker);
        if (it->r.flags & ML_RF_EXACT_TIME) {
            assert_int_equal(o->time, it->r.time);
            assert_true(o->flags & ML_RF_EXACT_TIME);
        }
    }
    assert_int_equal(j, e->count);
    assert_int_equal(others, nother);
    assert_true(last_time <= t_last);
    free(out);
    free(pts);
}

static void test_roundtrip(void **state)
{
    struct ml_tenc e = {.sites = tsites, .nsites = NSITES};
    size_t n = 200000;
    struct item *v;

    (void)state;
    make_sites();
    for (int regular = 0; regular < 2; regular++) {
        v = gen_stream(n, regular);
        for (size_t from = 0; from < n;) {
            size_t to = from + 1 + rnd() % 30000;
            uint64_t t0, t1;
            if (to > n)
                to = n;
            t0 = v[from].r.time ? v[from].r.time : 500;
            for (size_t i = from; i < to; i++) /* the chunk's first tick precedes its records */
                if (v[i].r.time && v[i].r.time < t0)
                    t0 = v[i].r.time;
            t1 = 1ull << 40;
            encode(&e, v, from, to, t0 > 10 ? t0 - 10 : 0);
            check_decode(&e, v, from, to, t0 > 10 ? t0 - 10 : 0, t1);
            from = to;
        }
        free(v);
    }
    ml_tenc_free(&e);
}

/* Constant-stride loops cost almost nothing: the runs are the whole stream. */
static void test_regular_is_tiny(void **state)
{
    struct ml_tenc e = {.sites = tsites, .nsites = NSITES};
    struct item *v;
    size_t n = 100000, len;

    (void)state;
    make_sites();
    v = calloc(n, sizeof(*v));
    for (size_t i = 0; i < n; i++) {
        uint32_t s = (uint32_t)(i % 3);
        v[i].r.site = s;
        v[i].r.kind = tsites[s].kind;
        v[i].r.size = tsites[s].size;
        v[i].r.weight = 1;
        v[i].r.addr = 0x10000000ull * (s + 1) + (i / 3) * tsites[s].size;
    }
    len = encode(&e, v, 0, n, 0);
    assert_true(len * 8 < n / 10); /* below 0.1 bit per record */
    check_decode(&e, v, 0, n, 0, 1000);
    free(v);
    ml_tenc_free(&e);
}

/*
 * Long runs take the decoder's fast paths (template records of steady sites,
 * sites read from the run's cycle, times found before the records and filled
 * block by block): every field and every interpolated time must be what the
 * slow path gives, through size and stride changes in the middle of runs
 * and time points anywhere.
 */
static void test_runs_fast(void **state)
{
    struct ml_tenc e = {.sites = tsites, .nsites = NSITES};
    size_t n = 60000, m = 0;
    struct item *v = calloc(n + 64, sizeof(*v));
    struct ml_trace_rec *out;
    struct ml_tpoint *pts, tp[64];
    static struct ml_tstate st[NSITES];
    static struct ml_trace_rec tmpl[NSITES];
    static uint32_t gen, others;
    uint64_t addr[3] = {0x10000000, 0x20000000, 0x30000000}, t = 1000, t_last;
    size_t ntp = 0, len;
    char err[200] = "";

    (void)state;
    make_sites();
    assert_non_null(v);
    tp[ntp++] = (struct ml_tpoint){0, 1000};
    for (size_t i = 0; i < n; i++) {
        uint32_t s = (uint32_t)(i % 3);
        if (i && i % 9001 == 0) { /* a time point between records */
            t += 5000 + i % 777;
            v[m].event = 2;
            v[m++].r.time = t;
            tp[ntp++] = (struct ml_tpoint){2 * i, t};
        }
        v[m].r.site = s;
        v[m].r.kind = tsites[s].kind;
        /* Site 1 changes size for a while; site 2 jumps once: both leave and rejoin runs. */
        v[m].r.size = s == 1 && i > 20000 && i < 20300 ? 2 : tsites[s].size;
        v[m].r.weight = 1;
        if (s == 2 && i == 40001)
            addr[2] += 1 << 20;
        v[m++].r.addr = addr[s] += tsites[s].size;
    }
    t_last = t + 100000;
    tp[ntp++] = (struct ml_tpoint){2 * n, t_last};
    len = encode(&e, v, 0, m, 1000);
    assert_true(len < n / 2); /* run-heavy: times are scanned first */
    check_decode(&e, v, 0, m, 1000, t_last);
    out = calloc(n, sizeof(*out));
    pts = calloc(2 * n + 3, sizeof(*pts));
    assert_non_null(out);
    assert_non_null(pts);
    if (ml_trace_decode_tokens(e.out, e.len, tsites, NSITES, 0, 1000, t_last, out, (uint32_t)n, st,
                               tmpl, &gen, pts, &others, err, sizeof(err)))
        fail_msg("decode: %s", err);
    /* Record j sits at 2j + 1 between the time points around it. */
    for (size_t j = 0, k = 0; j < n; j++) {
        uint64_t p = 2 * j + 1, want;
        while (tp[k + 1].pos < p)
            k++;
        want = tp[k].tick + (uint64_t)((unsigned __int128)(tp[k + 1].tick - tp[k].tick) *
                                       (p - tp[k].pos) / (tp[k + 1].pos - tp[k].pos));
        if (out[j].time != want)
            fail_msg("record %zu: time %llu, want %llu", j, (unsigned long long)out[j].time,
                     (unsigned long long)want);
    }
    free(out);
    free(pts);
    free(v);
    ml_tenc_free(&e);
}

/* Times between time points are interpolated by position and never go backwards. */
static void test_interpolation(void **state)
{
    struct ml_tenc e = {.sites = tsites, .nsites = NSITES};
    struct ml_trace_rec out[8];
    struct ml_tpoint pts[19];
    struct ml_tstate st[NSITES];
    struct ml_trace_rec tmpl[NSITES];
    uint32_t gen = 0, others;
    char err[100];

    (void)state;
    make_sites();
    memset(st, 0, sizeof(st));
    ml_tenc_begin(&e, 1000);
    assert_int_equal(ml_tenc_reserve(&e, 8 * ML_TENC_MAX_REC), 0);
    for (int i = 0; i < 4; i++)
        ml_tenc_put(&e, 0, 4096 + 8 * (uint64_t)i, 1, 1, 0, 0);
    ml_tenc_time(&e, 2000);
    for (int i = 0; i < 4; i++)
        ml_tenc_put(&e, 0, 4128 + 8 * (uint64_t)i, 1, 1, 0, 0);
    e.len = (size_t)(ml_tenc_flush_run(&e, e.out + e.len) - e.out);
    assert_int_equal(ml_trace_decode_tokens(e.out, e.len, tsites, NSITES, 0, 1000, 3000, out, 8, st,
                                            tmpl, &gen, pts, &others, err, sizeof(err)),
                     0);
    /* Records 0..3 sit at 1, 3, 5, 7 of 8 half-steps between 1000 and 2000. */
    assert_int_equal(out[0].time, 1125);
    assert_int_equal(out[3].time, 1875);
    assert_int_equal(out[4].time, 2125);
    assert_int_equal(out[7].time, 2875);
    ml_tenc_free(&e);
}

/* Encodes n records of site s at addr[] as one chunk, decodes it back; returns its length. */
static size_t addr_chunk(uint32_t s, const uint64_t *addr, size_t n)
{
    struct ml_tenc e = {.sites = tsites, .nsites = NSITES};
    struct item *v = calloc(n, sizeof(*v));
    size_t len;

    assert_non_null(v);
    for (size_t i = 0; i < n; i++) {
        v[i].r.site = s;
        v[i].r.kind = tsites[s].kind;
        v[i].r.size = tsites[s].size;
        v[i].r.weight = 1;
        v[i].r.addr = addr[i];
    }
    len = encode(&e, v, 0, n, 0);
    check_decode(&e, v, 0, n, 0, 1000);
    free(v);
    ml_tenc_free(&e);
    return len;
}

/*
 * ADDR (version 2): an access whose address alone is not predicted carries
 * its difference scaled by the access size, four bits of it in the token.
 */
static void test_addr_token(void **state)
{
    enum { N = 4096 };
    static uint64_t a[N];
    size_t len;

    (void)state;
    make_sites();
    /* Random gathers of doubles across 1 MiB: token and a 2-byte varint (REC took 4 bytes). */
    for (size_t i = 0; i < N; i++)
        a[i] = 0x7f0000000000ull + 8 * (rnd() % 131072);
    len = addr_chunk(3, a, N);
    assert_true(len <= 3 * N + 8);
    assert_true(len >= 2 * N);
    /* Small differences: the token alone (site 1, 2 bytes: shifted by one). */
    a[0] = 0x10000;
    for (size_t i = 1; i < N; i++)
        a[i] = a[i - 1] + (i % 2 ? 2 : 14) * (i % 3 ? 1 : -1);
    len = addr_chunk(1, a, N);
    assert_true(len <= N + 8);
    /* Differences that are no multiple of the size take REC, and still read back. */
    for (size_t i = 1; i < N; i++)
        a[i] = a[i - 1] + (i % 2 ? 12 : 20);
    len = addr_chunk(3, a, N);
    assert_true(len >= 2 * N);
    /* Full 64-bit differences both ways, 16-byte and variable-size (0: no scale) sites. */
    for (size_t i = 0; i < N; i++)
        a[i] = i % 2 ? 0xfffffffffffffff0ull - 16 * (rnd() % 1000) : 16 * (rnd() % 1000);
    addr_chunk(4, a, N);
    addr_chunk(6, a, N);
    for (size_t i = 0; i < N; i++)
        a[i] = rnd();
    addr_chunk(6, a, N);
    assert_int_equal(ml_tshift(8), 3);
    assert_int_equal(ml_tshift(12), 0);
    assert_int_equal(ml_tshift(0), 0);
}

/* Hostile token streams fail with a reason, never crash or overrun. */
static void test_hostile_tokens(void **state)
{
    static const struct {
        uint8_t tok[16];
        size_t len;
        uint32_t count;
    } cases[] = {
        {{0x05}, 1, 5},                   /* run without a predicted site */
        {{0xa0, 0x7f}, 2, 1},             /* site out of range */
        {{0xa0, 0x80}, 2, 1},             /* truncated varint */
        {{0xa0, 0x00}, 2, 2},             /* fewer records than the header says */
        {{0xa0, 0x00, 0xa0, 0x00}, 4, 1}, /* more */
        {{0xc1, 0x00, 0x09}, 3, 1},       /* event with too many fields */
        {{0xa1, 0x00}, 2, 1},             /* reserved bit */
        {{0xa0, 0x28}, 2, 1},             /* a marker site, address predicted (0): fine */
        {{0xb0, 0x28, 0x02}, 3, 1},       /* a marker record with an address */
        {{0xc0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, 8, 0}, /* truncated time */
        {{0x81}, 1, 1},                                           /* ADDR without a site */
        {{0xa0, 0x06, 0x83, 0x80}, 4, 2},                         /* ADDR, truncated varint */
        {{0xa0, 0x06, 0x83, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x10}, 12, 2},
        {{0xa0, 0x28, 0xa0, 0x01, 0x85}, 5, 3},             /* ADDR of a marker */
        {{0xa0, 0x06, 0xa0, 0x01, 0x89, 0x83, 0x01}, 7, 4}, /* fine: ADDR, 1 and 2 bytes */
    };
    struct ml_trace_rec out[4];
    struct ml_tpoint pts[11];
    const struct ml_trace_rec *o = out;
    struct ml_tstate st[NSITES];
    struct ml_trace_rec tmpl[NSITES];
    uint32_t gen = 0, others;
    char err[100];

    (void)state;
    make_sites();
    memset(st, 0, sizeof(st));
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int rc =
            ml_trace_decode_tokens(cases[i].tok, cases[i].len, tsites, NSITES, 0, 0, 10, out,
                                   cases[i].count, st, tmpl, &gen, pts, &others, err, sizeof(err));
        if (i == 7 || i == 14) {
            if (rc)
                fail_msg("case %zu: %s", i, err);
            /* case 7 holds a marker; ADDR records are accesses */
            assert_int_equal(others, i == 7 ? 1 : 0);
        } else
            assert_int_not_equal(rc, 0);
    }
    /* The last case: site 3 (8 bytes) at prev_addr 0, again, then 0 + 8 * 1 (v 2), then
       8 + 8 * 8 (v 16: 0 in the token, 1 in the varint). */
    assert_int_equal(o[1].addr, 0);
    assert_int_equal(o[2].addr, 8);
    assert_int_equal(o[3].addr, 72);
}

/* ---- whole files ---- */

static size_t zcompress(void *ctx, void *dst, size_t cap, const void *src, size_t n)
{
    size_t r = ZSTD_compressCCtx(ctx, dst, cap, src, n, 1);

    return ZSTD_isError(r) ? 0 : r;
}

struct built {
    uint8_t *p;
    size_t len;
    size_t data_off[8]; /* offsets of the data chunks */
    int ndata;
    struct item *v;
    size_t cut[9];
};

/* A file of 3 threads, tables first, then data chunks, then END. */
static void build_file(struct built *b)
{
    ZSTD_CCtx *cctx = ZSTD_createCCtx();
    struct ml_tzstd z = {zcompress, ZSTD_compressBound, cctx};
    struct ml_tbuf out = {0}, tab = {0};
    struct ml_trace_header hdr = {
        .pid = 42, .clock = ML_CLOCK_TSC, .tick0 = 0, .mono0 = 100, .page_size = 4096};
    struct ml_tenc e = {.sites = tsites, .nsites = NSITES};
    struct ml_chunk_header h;
    struct ml_trace_end end = {.reason = ML_END_EXIT, .nthreads = 3};
    size_t n = 60000;

    make_sites();
    memset(b, 0, sizeof(*b));
    b->v = gen_stream(n, 0);
    ml_trace_header_fill(&hdr);
    assert_int_equal(ml_tbuf_room(&out, sizeof(hdr)), 0);
    memcpy(out.p, &hdr, sizeof(hdr));
    out.len = sizeof(hdr);
    for (int i = 0; i < NSITES; i++)
        assert_int_equal(ml_tbuf_site(&tab, &esites[i], 0), 0);
    h = (struct ml_chunk_header){.type = ML_CK_SITES, .count = NSITES};
    assert_int_equal(ml_chunk_build(&out, &z, &h, tab.p, tab.len), 0);
    tab.len = 0;
    for (int i = 0; i < 3; i++)
        assert_int_equal(ml_tbuf_marker(&tab, &emarkers[i]), 0);
    h = (struct ml_chunk_header){.type = ML_CK_MARKERS, .count = 3};
    assert_int_equal(ml_chunk_build(&out, &z, &h, tab.p, tab.len), 0);
    tab.len = 0;
    assert_int_equal(ml_tbuf_meta(&tab, "program", "/bin/k"), 0);
    h = (struct ml_chunk_header){.type = ML_CK_META, .count = 1};
    assert_int_equal(ml_chunk_build(&out, &z, &h, tab.p, tab.len), 0);
    for (int c = 0; c < 6; c++) {
        size_t from = n / 6 * (size_t)c, to = n / 6 * (size_t)(c + 1);
        b->cut[c] = from;
        encode(&e, b->v, from, to, 0);
        h = (struct ml_chunk_header){.type = ML_CK_DATA,
                                     .thread = (uint32_t)c % 3,
                                     .seq = (uint32_t)c / 3,
                                     .count = e.count,
                                     .t_first = 0,
                                     .t_last = 1ull << 40,
                                     .clk_tick = 1000 * (uint64_t)c,
                                     .clk_ns = 100 + 500 * (uint64_t)c,
                                     .tid = 4242};
        b->data_off[b->ndata++] = out.len;
        assert_int_equal(ml_chunk_build(&out, &z, &h, e.out, e.len), 0);
    }
    b->cut[6] = n;
    h = (struct ml_chunk_header){.type = ML_CK_END, .count = 1};
    assert_int_equal(ml_chunk_build(&out, NULL, &h, &end, sizeof(end)), 0);
    b->p = out.p;
    b->len = out.len;
    free(tab.p);
    ml_tenc_free(&e);
    ZSTD_freeCCtx(cctx);
}

static void check_chunk(struct ml_trace_dec *d, size_t i, const struct built *b, int c)
{
    const struct ml_trace_rec *r;
    size_t n, j = 0;
    char err[200];

    if (ml_trace_decode(d, i, &r, &n, err, sizeof(err)))
        fail_msg("%s", err);
    for (size_t k = b->cut[c]; k < b->cut[c + 1]; k++) {
        if (b->v[k].event == 2)
            continue;
        assert_int_equal(r[j].thread, (uint32_t)c % 3);
        if (!b->v[k].event)
            assert_int_equal(r[j].addr, b->v[k].r.addr);
        j++;
    }
    assert_int_equal(j, n);
}

static void test_file(void **state)
{
    struct built b;
    struct ml_trace *t;
    struct ml_trace_dec *d;
    const struct ml_trace_info *info;
    char err[200];

    (void)state;
    build_file(&b);
    if (ml_trace_open_mem(b.p, b.len, &t, err, sizeof(err)))
        fail_msg("%s", err);
    info = ml_trace_info(t);
    assert_int_equal(info->nproblems, 0);
    assert_true(info->ended);
    assert_int_equal(info->end.nthreads, 3);
    assert_int_equal(info->hdr.pid, 42);
    assert_int_equal(info->nthreads, 3);
    assert_int_equal(ml_trace_nchunks(t), 6);
    assert_int_equal(ml_trace_nsites(t), NSITES);
    assert_int_equal(ml_trace_nmarkers(t), 3);
    assert_string_equal(ml_trace_marker(t, 1)->name, "kernel");
    assert_string_equal(ml_trace_site(t, 3)->file, "k.c");
    assert_int_equal(ml_trace_site(t, 3)->line, 103);
    assert_int_equal(ml_trace_site(t, 22)->marker, 1);
    assert_int_equal(info->nmeta, 2);
    assert_string_equal(info->meta[1], "/bin/k");
    /* Two clock pairs 5000 ticks apart span 2500 ns. */
    assert_true(ml_trace_ns(t, 5000) - ml_trace_ns(t, 0) > 2499.0);
    assert_true(ml_trace_ns(t, 5000) - ml_trace_ns(t, 0) < 2501.0);
    d = ml_trace_dec_new(t);
    assert_non_null(d);
    for (int c = 0; c < 6; c++)
        check_chunk(d, (size_t)c, &b, c);
    ml_trace_dec_free(d);
    ml_trace_close(t);
    free(b.p);
    free(b.v);
}

/* A file cut anywhere reads up to its last complete chunk and says it was cut. */
static void test_truncated(void **state)
{
    struct built b;
    char err[200];

    (void)state;
    build_file(&b);
    for (size_t len = b.data_off[3] + 1; len < b.data_off[4] + 80; len += 7) {
        struct ml_trace *t;
        struct ml_trace_dec *d;
        if (ml_trace_open_mem(b.p, len, &t, err, sizeof(err)))
            fail_msg("%s", err);
        assert_int_equal(ml_trace_nchunks(t), len >= b.data_off[4] ? 4 : 3);
        assert_true(ml_trace_info(t)->nproblems >= 1 || len == b.data_off[4]);
        if (len != b.data_off[4])
            assert_non_null(strstr(ml_trace_info(t)->problems[0].what, "cut short"));
        assert_false(ml_trace_info(t)->ended);
        d = ml_trace_dec_new(t);
        for (int c = 0; c < 3; c++)
            check_chunk(d, (size_t)c, &b, c);
        ml_trace_dec_free(d);
        ml_trace_close(t);
    }
    free(b.p);
    free(b.v);
}

/* Damage is reported with its offset; other chunks still decode. */
static void test_damage(void **state)
{
    struct built b;
    struct ml_trace *t;
    struct ml_trace_dec *d;
    const struct ml_trace_rec *r;
    size_t n;
    char err[200], want[64];

    (void)state;
    build_file(&b);
    /* A flipped payload byte: that chunk fails with its offset. */
    b.p[b.data_off[2] + sizeof(struct ml_chunk_header) + 5] ^= 0x40;
    assert_int_equal(ml_trace_open_mem(b.p, b.len, &t, err, sizeof(err)), 0);
    d = ml_trace_dec_new(t);
    assert_int_not_equal(ml_trace_decode(d, 2, &r, &n, err, sizeof(err)), 0);
    snprintf(want, sizeof(want), "offset %zu", b.data_off[2]);
    assert_non_null(strstr(err, want));
    check_chunk(d, 1, &b, 1);
    check_chunk(d, 3, &b, 3);
    ml_trace_dec_free(d);
    ml_trace_close(t);
    b.p[b.data_off[2] + sizeof(struct ml_chunk_header) + 5] ^= 0x40;

    /* A damaged header: skipped, reported, the rest found again. */
    b.p[b.data_off[1] + 9] ^= 1;
    assert_int_equal(ml_trace_open_mem(b.p, b.len, &t, err, sizeof(err)), 0);
    assert_int_equal(ml_trace_nchunks(t), 5);
    assert_int_equal(ml_trace_info(t)->nproblems, 1);
    assert_int_equal(ml_trace_info(t)->problems[0].offset, b.data_off[1]);
    assert_true(ml_trace_info(t)->ended);
    ml_trace_close(t);
    b.p[b.data_off[1] + 9] ^= 1;

    /* Not a trace, another version, a damaged file header: one clear error. */
    b.p[0] = 'X';
    assert_int_not_equal(ml_trace_open_mem(b.p, b.len, &t, err, sizeof(err)), 0);
    assert_non_null(strstr(err, "is not a memlens trace"));
    b.p[0] = 'M';
    b.p[8] = 9;
    assert_int_not_equal(ml_trace_open_mem(b.p, b.len, &t, err, sizeof(err)), 0);
    assert_non_null(strstr(err, "version 9"));
    b.p[8] = ML_TRACE_VERSION;
    /* Version 1 (no ADDR token) still reads; version 0 is refused. */
    {
        struct ml_trace_header *h = (struct ml_trace_header *)b.p, keep = *h;
        h->version = 1;
        h->header_crc = ml_crc32c(0, h, offsetof(struct ml_trace_header, header_crc));
        assert_int_equal(ml_trace_open_mem(b.p, b.len, &t, err, sizeof(err)), 0);
        ml_trace_close(t);
        h->version = 0;
        h->header_crc = ml_crc32c(0, h, offsetof(struct ml_trace_header, header_crc));
        assert_int_not_equal(ml_trace_open_mem(b.p, b.len, &t, err, sizeof(err)), 0);
        assert_non_null(strstr(err, "version 0 trace; this memlens reads versions 1 to 2"));
        *h = keep;
    }
    b.p[20] ^= 1;
    assert_int_not_equal(ml_trace_open_mem(b.p, b.len, &t, err, sizeof(err)), 0);
    assert_non_null(strstr(err, "damaged trace header"));
    b.p[20] ^= 1;
    /* A header with a valid checksum and a page size no machine has (analyses shift by it). */
    {
        static const uint32_t bad_sizes[] = {1, 3, 256, 4097, 1u << 19, 1u << 31, UINT32_MAX};
        struct ml_trace_header *h = (struct ml_trace_header *)b.p, keep = *h;
        for (size_t i = 0; i < sizeof(bad_sizes) / sizeof(bad_sizes[0]); i++) {
            h->page_size = bad_sizes[i];
            h->header_crc = ml_crc32c(0, h, offsetof(struct ml_trace_header, header_crc));
            assert_int_not_equal(ml_trace_open_mem(b.p, b.len, &t, err, sizeof(err)), 0);
            assert_non_null(strstr(err, "page size"));
        }
        h->page_size = 65536;
        h->header_crc = ml_crc32c(0, h, offsetof(struct ml_trace_header, header_crc));
        assert_int_equal(ml_trace_open_mem(b.p, b.len, &t, err, sizeof(err)), 0);
        ml_trace_close(t);
        *h = keep;
    }
    free(b.p);
    free(b.v);
}

static void test_crc(void **state)
{
    (void)state;
    /* The standard CRC-32C check value. */
    assert_int_equal(ml_crc32c(0, "123456789", 9), 0xe3069283);
    assert_int_equal(ml_crc32c(ml_crc32c(0, "1234", 4), "56789", 5), 0xe3069283);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc),
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_regular_is_tiny),
        cmocka_unit_test(test_interpolation),
        cmocka_unit_test(test_runs_fast),
        cmocka_unit_test(test_hostile_tokens),
        cmocka_unit_test(test_addr_token),
        cmocka_unit_test(test_file),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_damage),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
