/* Unit tests of the analysis driver (threads merged by time, markers) and of 'summary'. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "analyze/analyze.h"
#include "format/trace.h"

enum { LD, ST, RMW, RBEG, REND, MARK, NSITES };

static struct ml_ev_site esites[NSITES] = {
    {ML_EV_LOAD, 8, 1, ML_EV_NOID, 10, 1, "f", "t.c", ""},
    {ML_EV_STORE, 4, 1, ML_EV_NOID, 11, 1, "f", "t.c", ""},
    {ML_EV_RMW, 8, 1, ML_EV_NOID, 12, 1, "f", "t.c", ""},
    {ML_EV_REGION_BEGIN, 0, 1, 0, 13, 1, "f", "t.c", ""},
    {ML_EV_REGION_END, 0, 1, 0, 14, 1, "f", "t.c", ""},
    {ML_EV_MARK, 0, 1, 1, 15, 1, "f", "t.c", ""},
};
static const struct ml_ev_marker emarkers[2] = {
    {ML_MK_REGION, 13, "R", "t.c", "f"},
    {ML_MK_MARK, 15, "phase", "t.c", "f"},
};
static struct ml_tsite tsites[NSITES];

/* One thread's records: (site, address, weight, exact time or 0). */
struct item {
    uint32_t site;
    uint64_t addr;
    uint32_t weight;
    uint64_t t;
};

static void add_chunk(struct ml_tbuf *out, uint32_t thread, uint32_t seq, const struct item *v,
                      size_t n, uint64_t t0, uint64_t t1)
{
    struct ml_tenc e = {.sites = tsites, .nsites = NSITES};
    struct ml_chunk_header h;

    ml_tenc_begin(&e, t0);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(ml_tenc_reserve(&e, ML_TENC_MAX_REC), 0);
        ml_tenc_put(&e, v[i].site, v[i].addr, tsites[v[i].site].size, v[i].weight, v[i].t != 0,
                    v[i].t);
    }
    assert_int_equal(ml_tenc_reserve(&e, ML_TENC_MAX_REC), 0);
    e.len = (size_t)(ml_tenc_flush_run(&e, e.out + e.len) - e.out);
    h = (struct ml_chunk_header){.type = ML_CK_DATA,
                                 .thread = thread,
                                 .seq = seq,
                                 .count = e.count,
                                 .t_first = t0,
                                 .t_last = t1,
                                 .clk_tick = t1,
                                 .clk_ns = t1,
                                 .tid = 100 + thread};
    assert_int_equal(ml_chunk_build(out, NULL, &h, e.out, e.len), 0);
    ml_tenc_free(&e);
}

/*
 * Thread 0: 10 loads (8 B), region R begins, 5 stores (4 B) and an RMW of weight 3, a nested
 * R begin/end, R ends, mark "phase", 4 loads. Thread 1 (in two chunks): mark "phase", 7
 * loads of weight 2. Times interleave the threads.
 */
static char *write_trace(void)
{
    static char path[64];
    struct ml_tbuf out = {0}, tab = {0};
    struct ml_trace_header hdr = {.pid = 7, .clock = ML_CLOCK_MONOTONIC, .page_size = 4096};
    struct ml_chunk_header h;
    struct item t0[32], t1a[8], t1b[8];
    size_t n0 = 0, n1a = 0, n1b = 0;
    int fd;

    for (int i = 0; i < NSITES; i++) {
        tsites[i].kind = (uint8_t)esites[i].kind;
        tsites[i].size = esites[i].size;
        tsites[i].weight = 1;
        tsites[i].marker = esites[i].marker;
    }
    for (int i = 0; i < 10; i++)
        t0[n0++] = (struct item){LD, 0x1000 + 8 * (uint64_t)i, 1, 0};
    t0[n0++] = (struct item){RBEG, 0, 1, 1100};
    for (int i = 0; i < 5; i++)
        t0[n0++] = (struct item){ST, 0x2000 + 4 * (uint64_t)i, 1, 0};
    t0[n0++] = (struct item){RMW, 0x3000, 3, 0};
    t0[n0++] = (struct item){RBEG, 0, 1, 1200};
    t0[n0++] = (struct item){REND, 0, 1, 1300};
    t0[n0++] = (struct item){REND, 0, 1, 1400};
    t0[n0++] = (struct item){MARK, 0, 1, 1500};
    for (int i = 0; i < 4; i++)
        t0[n0++] = (struct item){LD, 0x4000 + 8 * (uint64_t)i, 1, 0};
    t1a[n1a++] = (struct item){MARK, 0, 1, 1050};
    for (int i = 0; i < 3; i++)
        t1a[n1a++] = (struct item){LD, 0x5000 + 8 * (uint64_t)i, 2, 0};
    for (int i = 0; i < 4; i++)
        t1b[n1b++] = (struct item){LD, 0x6000 + 8 * (uint64_t)i, 2, 0};

    ml_trace_header_fill(&hdr);
    assert_int_equal(ml_tbuf_room(&out, sizeof(hdr)), 0);
    memcpy(out.p, &hdr, sizeof(hdr));
    out.len = sizeof(hdr);
    for (int i = 0; i < NSITES; i++)
        assert_int_equal(ml_tbuf_site(&tab, &esites[i], 0), 0);
    h = (struct ml_chunk_header){.type = ML_CK_SITES, .count = NSITES};
    assert_int_equal(ml_chunk_build(&out, NULL, &h, tab.p, tab.len), 0);
    tab.len = 0;
    for (int i = 0; i < 2; i++)
        assert_int_equal(ml_tbuf_marker(&tab, &emarkers[i]), 0);
    h = (struct ml_chunk_header){.type = ML_CK_MARKERS, .count = 2};
    assert_int_equal(ml_chunk_build(&out, NULL, &h, tab.p, tab.len), 0);
    add_chunk(&out, 1, 1, t1b, n1b, 1700, 1800); /* out of order in the file: seq decides */
    add_chunk(&out, 0, 0, t0, n0, 1000, 2000);
    add_chunk(&out, 1, 0, t1a, n1a, 1050, 1600);
    snprintf(path, sizeof(path), "/tmp/memlens-test-analyze.XXXXXX");
    fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, out.p, out.len), (ssize_t)out.len);
    close(fd);
    free(out.p);
    free(tab.p);
    return path;
}

/* Options for a run of one thread with the report in fmt on out. */
static struct ml_an_opts opts(FILE *out, enum ml_an_format fmt)
{
    struct ml_an_opts o;

    ml_an_opts_init(&o);
    o.out = out;
    o.fmt = fmt;
    o.jobs = 1;
    return o;
}

static char *report_csv(const char *path)
{
    const struct ml_analysis *an[1] = {&ml_an_summary};
    char err[256], *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    struct ml_an_opts o = opts(f, ML_AN_CSV);
    struct ml_an_run *run = ml_an_new(&o, an, 1, err, sizeof(err));

    assert_non_null(run);
    if (ml_an_read(run, &path, 1, err, sizeof(err)))
        fail_msg("%s", err);
    assert_int_equal(ml_an_report(run, f, ML_AN_CSV), 0);
    ml_an_free(run);
    fclose(f);
    return buf;
}

static void test_summary_rows(void **state)
{
    char *path = write_trace(), *csv;

    (void)state;
    csv = report_csv(path);
    /* Thread 0: 10 + 4 loads of 8 B; 5 stores of 4 B; an RMW standing for 3 of 8 B each. */
    assert_non_null(strstr(csv, "7,0,100,all,20,17,8,136,44\n"));
    /* The region (nested entry counted once) holds the stores and the RMW. */
    assert_non_null(strstr(csv, "7,0,100,region:R,6,3,8,24,44\n"));
    assert_non_null(strstr(csv, "7,0,100,mark:phase,4,4,0,32,0\n"));
    /* Thread 1, across its two chunks: 7 loads of weight 2. */
    assert_non_null(strstr(csv, "7,1,101,all,7,14,0,112,0\n"));
    assert_non_null(strstr(csv, "7,1,101,mark:phase,7,14,0,112,0\n"));
    assert_null(strstr(csv, "7,1,101,region:R")); /* never open on thread 1 */
    assert_non_null(strstr(csv, "7,all,,all,27,31,8,248,44\n"));
    free(csv);
    unlink(path);
}

/* An analysis that checks the driver's order: times never go back, markers come at their place. */
struct order {
    uint64_t last;
    int bad, n, markers, marker_calls;
};

static struct order *last_order; /* the state of the last run, read before it is freed */

static void *o_start(const struct ml_an_run *run)
{
    (void)run;
    return last_order = calloc(1, sizeof(struct order));
}

static int o_record(void *st, const struct ml_an_input *in, const struct ml_trace_rec *r, size_t n)
{
    struct order *s = st;

    (void)in;
    for (size_t i = 0; i < n; i++) {
        if (r[i].time < s->last)
            s->bad++;
        s->last = r[i].time;
        s->markers += ml_ev_is_marker(r[i].kind);
        s->n++;
    }
    return 0;
}

static int o_marker(void *st, const struct ml_an_input *in, const struct ml_trace_rec *r)
{
    struct order *s = st;

    (void)in;
    s->marker_calls += ml_ev_is_marker(r->kind) && r->time == s->last;
    return 0;
}

static int o_report(void *st, FILE *out, enum ml_an_format fmt)
{
    (void)st;
    (void)out;
    (void)fmt;
    return 0;
}

static void test_driver_order(void **state)
{
    const struct ml_analysis order = {.name = "order",
                                      .summary = "",
                                      .start = o_start,
                                      .record = o_record,
                                      .marker = o_marker,
                                      .report = o_report,
                                      .free = free};
    const struct ml_analysis *an[1] = {&order};
    struct ml_an_opts o = opts(stdout, ML_AN_TABLE);
    char *path = write_trace(), err[256];
    const char *paths[1] = {path};
    struct ml_an_run *run = ml_an_new(&o, an, 1, err, sizeof(err));
    struct order *s;

    (void)state;
    assert_non_null(run);
    assert_int_equal(ml_an_read(run, paths, 1, err, sizeof(err)), 0);
    s = last_order;
    assert_int_equal(s->bad, 0);
    assert_int_equal(s->n, 25 + 8);
    assert_int_equal(s->markers, 6);
    assert_int_equal(s->marker_calls, 6);
    ml_an_free(run);
    unlink(path);
}

static void test_missing_file(void **state)
{
    const struct ml_analysis *an[1] = {&ml_an_summary};
    struct ml_an_opts o = opts(stdout, ML_AN_TABLE);
    const char *paths[1] = {"/nonexistent/x.mlt"};
    char err[256];
    struct ml_an_run *run = ml_an_new(&o, an, 1, err, sizeof(err));

    (void)state;
    assert_non_null(run);
    assert_int_not_equal(ml_an_read(run, paths, 1, err, sizeof(err)), 0);
    assert_non_null(strstr(err, "cannot open trace '/nonexistent/x.mlt'"));
    ml_an_free(run);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_summary_rows),
        cmocka_unit_test(test_driver_order),
        cmocka_unit_test(test_missing_file),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
