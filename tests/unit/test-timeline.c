/* Unit tests of timelines in reports (src/report/timeline.c, html.c) on a synthetic profile. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "mlp-build.h"
#include "report/timeline.h"

/*
 * Two regions, three threads; clock 1000 ticks/s so times are exact. Snapshots
 * at 100, 200, 300, 400 ticks. Thread 0 runs "a" and steps back once in
 * executions and ticks (a racy read); thread 1 appears in snapshot 1 only and
 * is then missing (its last value carries on); thread 2 runs "b" only.
 */
static struct mlb *profile(void)
{
    struct mlb *b = mlb_new(1000);
    uint32_t ra, rb, sa, sb;

    mlb_meta(b, "program", "/bin/<tl>");
    mlb_meta(b, "hostname", "h");
    ra = mlb_region(b, "a");
    rb = mlb_region(b, "b&c");
    sa = mlb_regset(b, 1, ra);
    sb = mlb_regset(b, 1, rb);
    mlb_unit(b, ML_UNIT_BLOCK, "f", "t.c", 1, sa, MLB_F(ML_F_RD_HEAP, 8), MLB_F(ML_F_WR_HEAP, 4),
             MLB_F(ML_F_INSTR, 3), -1);
    mlb_unit(b, ML_UNIT_BLOCK, "g", "t.c", 2, sb, MLB_F(ML_F_RD_HEAP, 16), MLB_F(ML_F_INSTR, 1),
             -1);
    mlb_thread(b, 10);
    mlb_thread(b, 11);
    mlb_thread(b, 12);
    b->threads[0].counts[0] = 100;
    b->threads[0].rs[ra] = (struct ml_prof_rstat){2, 300, 2};
    b->threads[1].counts[0] = 10;
    b->threads[1].rs[ra] = (struct ml_prof_rstat){1, 50, 1};
    b->threads[2].counts[1] = 40;
    b->threads[2].rs[rb] = (struct ml_prof_rstat){1, 390, 1};

    mlb_tl_snap(b, 100);
    mlb_tl_point(b, 0, ra, 1, 90, 8 * 10, 4 * 10, 3 * 10);
    mlb_tl_point(b, 2, rb, 1, 80, 16 * 5, 0, 5);
    mlb_tl_snap(b, 200);
    mlb_tl_point(b, 0, ra, 2, 150, 8 * 50, 4 * 50, 3 * 50);
    mlb_tl_point(b, 1, ra, 1, 50, 8 * 10, 4 * 10, 3 * 10);
    mlb_tl_point(b, 2, rb, 1, 180, 16 * 20, 0, 20);
    mlb_tl_snap(b, 300);
    mlb_tl_point(b, 0, ra, 1, 140, 8 * 60, 4 * 60, 3 * 60); /* stepped back */
    mlb_tl_point(b, 2, rb, 1, 280, 16 * 30, 0, 30);
    mlb_tl_snap(b, 400);
    mlb_tl_point(b, 0, ra, 2, 300, 8 * 100, 4 * 100, 3 * 100);
    mlb_tl_point(b, 2, rb, 1, 390, 16 * 40, 0, 40);
    return b;
}

struct fixture {
    struct mlb *b;
    struct ml_profile *p;
    struct ml_report *r;
    struct ml_timeline *t;
};

static int setup(void **state)
{
    struct fixture *fx = calloc(1, sizeof(*fx));
    unsigned char *buf;
    size_t len;
    char err[256] = "";

    fx->b = profile();
    buf = mlb_write(fx->b, &len);
    if (ml_profile_parse(buf, len, &fx->p, err, sizeof(err)))
        fail_msg("parse: %s", err);
    free(buf);
    assert_int_equal(ml_report_build(fx->p, "t/app.mlp", &fx->r), 0);
    assert_int_equal(ml_timeline_build(fx->r, &fx->t), 0);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *fx = *state;

    ml_timeline_free(fx->t);
    ml_report_free(fx->r);
    ml_profile_free(fx->p);
    free(fx->b);
    free(fx);
    return 0;
}

static void test_build(void **state)
{
    struct fixture *fx = *state;
    const struct ml_timeline *t = fx->t;
    const struct ml_tl_series *s;
    uint64_t sum = 0;

    assert_non_null(t);
    assert_int_equal(t->nsnaps, 4);
    /* a: threads 0 and 1, then its total; b&c: thread 2, then its total. */
    assert_int_equal(t->nseries, 5);
    assert_int_equal(t->series[0].thread, 0);
    assert_int_equal(t->series[1].thread, 1);
    assert_int_equal(t->series[2].thread, -1);
    assert_int_equal(t->series[3].region, 1);
    assert_int_equal(t->series[4].thread, -1);

    s = &t->series[0];
    assert_int_equal(s->d[0].bytes_read, 80);
    assert_int_equal(s->d[1].bytes_read, 320);
    assert_int_equal(s->d[2].bytes_read, 80);
    assert_int_equal(s->d[3].bytes_read, 320);
    /* 1, 2, 1 (step back: 0, carry 2), 2 (no growth over the carried 2). */
    assert_int_equal(s->d[1].entries, 1);
    assert_int_equal(s->d[2].entries, 0);
    assert_int_equal(s->d[3].entries, 0);
    /* ticks 90, 150, 140 (0), 300 (150 over the carried 150). */
    assert_int_equal(s->d[2].ticks, 0);
    assert_int_equal(s->d[3].ticks, 150);
    for (int i = 0; i < 4; i++)
        sum += s->d[i].bytes_written;
    assert_int_equal(sum, 400); /* the deltas add up to the last value */

    /* Thread 1 is absent from snapshots 0, 2, 3: zero growth there. */
    s = &t->series[1];
    assert_int_equal(s->d[0].bytes_read, 0);
    assert_int_equal(s->d[1].bytes_read, 80);
    assert_int_equal(s->d[2].bytes_read, 0);
    assert_int_equal(s->d[3].bytes_read, 0);

    s = &t->series[2];
    assert_int_equal(s->d[1].bytes_read, 400);
    assert_int_equal(s->d[1].instructions, 150);

    assert_float_equal(ml_timeline_start(t, 0), 0, 1e-12);
    assert_float_equal(ml_timeline_start(t, 2), 0.2, 1e-12);
    assert_float_equal(ml_timeline_end(t, 2), 0.3, 1e-12);
}

static char *render(const struct ml_renderer *rd, struct fixture *fx,
                    const struct ml_report_opts *o)
{
    char *s = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&s, &n);

    assert_int_equal(ml_report_render(f, rd, &fx->r, &fx->t, 1, o), 0);
    fclose(f);
    return s;
}

static void test_csv(void **state)
{
    struct fixture *fx = *state;
    struct ml_report_opts all = {.rows = ML_REPORT_THREADS_AND_TOTALS};
    const char *names[] = {"b&c"};
    struct ml_report_opts one = {.rows = ML_REPORT_TOTALS, .regions = names, .nregion_names = 1};
    char *s = render(&ml_render_timeline_csv, fx, &all);

    assert_non_null(strstr(s, "profile,pid,region,thread,tid,interval,start_s,end_s,executions,"
                              "region_seconds,instructions,bytes_read,bytes_written,read_gbs,"
                              "write_gbs\n"));
    /* 320 bytes read in 0.1 s = 3.2e-6 GB/s. */
    assert_non_null(strstr(s, "t/app.mlp,4242,a,0,10,1,0.100000000,0.200000000,1,0.060000000,"
                              "120,320,160,0.000003,0.000002\n"));
    assert_non_null(strstr(s, "t/app.mlp,4242,a,total,,1,0.100000000,0.200000000,2,0.110000000,"
                              "150,400,200,0.000004,0.000002\n"));
    assert_non_null(strstr(s, "t/app.mlp,4242,b&c,2,12,3,0.300000000,0.400000000,0,0.110000000,"
                              "10,160,0,0.000002,0.000000\n"));
    /* 5 series x 4 intervals + header. */
    {
        int lines = 0;
        for (const char *c = s; *c; c++)
            lines += *c == '\n';
        assert_int_equal(lines, 21);
    }
    free(s);
    s = render(&ml_render_timeline_csv, fx, &one);
    assert_null(strstr(s, ",a,"));
    assert_null(strstr(s, "b&c,2,"));
    assert_non_null(strstr(s, "b&c,total,,0,"));
    free(s);
}

/* Whether some line of s, with runs of spaces squeezed to one and trimmed, equals cells. */
static int has_row(const char *s, const char *cells)
{
    char buf[512];

    for (const char *p = s; *p;) {
        size_t n = 0;
        for (; *p && *p != '\n'; p++)
            if (n < sizeof(buf) - 1 && (*p != ' ' || (n && buf[n - 1] != ' ')))
                buf[n++] = *p;
        while (n && buf[n - 1] == ' ')
            n--;
        buf[n] = 0;
        if (!strcmp(buf, cells))
            return 1;
        if (*p)
            p++;
    }
    return 0;
}

static void test_table(void **state)
{
    struct fixture *fx = *state;
    struct ml_report_opts all = {.rows = ML_REPORT_THREADS_AND_TOTALS};
    char *s = render(&ml_render_timeline, fx, &all);

    assert_non_null(strstr(s, "profile t/app.mlp\n  timeline: 4 snapshots, every 100 ms\n"));
    /* Thread 1 only changed in interval 1: one row. */
    assert_true(has_row(s, "a 1 11 100 ms 200 ms 1 50.0 ms 80 B 40 B 0.000 0.000"));
    assert_false(has_row(s, "a 1 11 0 s 100 ms 0 0 s 0 B 0 B 0.000 0.000"));
    /* Thread 0's step back shows as no growth. */
    assert_true(has_row(s, "a 0 10 200 ms 300 ms 0 0 s 80 B 40 B 0.000 0.000"));
    assert_true(has_row(s, "a total 300 ms 400 ms 0 150 ms 320 B 160 B 0.000 0.000"));
    /* A region run by one thread gets no total row in the table. */
    assert_null(strstr(s, "b&c     total"));
    free(s);
}

/* Number of points (M or L commands) in the d attribute following the given attributes. */
static int path_points(const char *s, const char *attrs)
{
    const char *p = strstr(s, attrs), *e;
    int n = 0;

    if (!p || !(p = strstr(p, " d=\"")))
        return -1;
    e = strchr(p + 4, '"');
    for (p += 4; p < e; p++)
        n += *p == 'M' || *p == 'L';
    return n;
}

static void test_html(void **state)
{
    struct fixture *fx = *state;
    struct ml_report_opts all = {.rows = ML_REPORT_THREADS_AND_TOTALS};
    char *s = render(&ml_render_html, fx, &all);

    assert_true(!strncmp(s, "<!DOCTYPE html>", 15));
    assert_non_null(strstr(s, "</html>\n"));
    /* Nothing is fetched: no script, no link, no url(). */
    assert_null(strstr(s, "<script"));
    assert_null(strstr(s, "<link"));
    assert_null(strstr(s, "url("));
    for (const char *h = strstr(s, "http"); h; h = strstr(h + 1, "http"))
        assert_true(!strncmp(h, "http://www.w3.org/2000/svg", 26)); /* the SVG namespace only */
    /* Names are escaped. */
    assert_non_null(strstr(s, "program /bin/&lt;tl&gt;"));
    assert_non_null(strstr(s, "data-region=\"b&amp;c\""));
    assert_null(strstr(s, "b&c"));
    /* Bars carry exact bytes; lines have one point per interval. */
    assert_non_null(strstr(s, "<rect class=\"rd\" data-region=\"a\" data-bytes=\"880\""));
    assert_non_null(strstr(s, "<rect class=\"wr\" data-region=\"a\" data-bytes=\"440\""));
    assert_int_equal(path_points(s, "class=\"tl rd\" stroke=\"#1f77b4\" data-thread=\"0\""), 4);
    assert_int_equal(path_points(s, "class=\"tl wr\" stroke=\"#1f77b4\" data-thread=\"2\""), 4);
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_build),
        cmocka_unit_test(test_csv),
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_html),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
