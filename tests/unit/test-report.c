/* Unit tests of report aggregation and rendering on a synthetic profile with known answers. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "mlp-build.h"
#include "report/report.h"

/*
 * Regions: outer (0) holds inner (1); omp (2) is a parallel region entered by
 * thread 0 whose body thread 1 runs as a worker; idle (3) never runs.
 * Clock: 1000 ticks per second, so seconds = ticks / 1000.
 *
 *   unit  kind   regions     facts per execution (or per byte)
 *   u0    block  outer       loads 2, stores 1, rd_heap 16, wr_stack 8, int 3, mem 3, branch 1,
 *                            instr 7; calls memcpy x1
 *   u1    block  outer,inner loads 1, rd_global 8, fp 2, vec 1, mem 1, call 1, instr 4
 *                            (vec counted within fp); calls sqrt x2, memcpy x1
 *   u2    bytes  outer,inner rd_heap 1, wr_heap 1 (a memcpy of variable size)
 *   u3    block  omp         loads 1, stores 1, rd_heap 4, wr_global 4, instr 3
 *   u4    block  (none)      instr 100
 *
 *   thread 0 (tid 100): u0 10, u1 5, u2 1000 bytes, u3 50, u4 7
 *                       outer {1 entry, 2000 ticks}, inner {5, 500}, omp {1, 1000}
 *   thread 1 (tid 101): u3 30, nothing entered (OpenMP worker)
 *   thread 2 (tid 102): u0 4, outer {2, 3000}
 */
static struct mlb *synthetic(void)
{
    struct mlb *b = mlb_new(1000);
    uint32_t outer, inner, omp, u0, u1, u2, u3, u4, t0, t1, t2;

    mlb_meta(b, "program", "./app");
    mlb_meta(b, "cmdline", "./app \"quoted\", arg");
    mlb_meta(b, "hostname", "node1");
    outer = mlb_region(b, "outer");
    inner = mlb_region(b, "inner");
    omp = mlb_region(b, "omp");
    mlb_region(b, "idle");
    u0 = mlb_unit(b, ML_UNIT_BLOCK, "_ZN2ns3fooEi", "a.cc", 10, mlb_regset(b, 1, outer),
                  MLB_F(ML_F_LOADS, 2), MLB_F(ML_F_STORES, 1), MLB_F(ML_F_RD_HEAP, 16),
                  MLB_F(ML_F_WR_STACK, 8), MLB_F(ML_F_I_INT, 3), MLB_F(ML_F_I_MEM, 3),
                  MLB_F(ML_F_I_BRANCH, 1), MLB_F(ML_F_INSTR, 7), MLB_F(ML_F_INCR, 1), -1);
    u1 = mlb_unit(b, ML_UNIT_BLOCK, "main", "a.cc", 20, mlb_regset(b, 2, outer, inner),
                  MLB_F(ML_F_LOADS, 1), MLB_F(ML_F_RD_GLOBAL, 8), MLB_F(ML_F_I_FP, 2),
                  MLB_F(ML_F_I_VEC, 1), MLB_F(ML_F_I_MEM, 1), MLB_F(ML_F_I_CALL, 1),
                  MLB_F(ML_F_INSTR, 4), -1);
    u2 = mlb_unit(b, ML_UNIT_BYTES, "main", "a.cc", 21, b->units[u1].regset, MLB_F(ML_F_RD_HEAP, 1),
                  MLB_F(ML_F_WR_HEAP, 1), -1);
    u3 = mlb_unit(b, ML_UNIT_BLOCK, "main.omp_outlined", "a.cc", 30, mlb_regset(b, 1, omp),
                  MLB_F(ML_F_LOADS, 1), MLB_F(ML_F_STORES, 1), MLB_F(ML_F_RD_HEAP, 4),
                  MLB_F(ML_F_WR_GLOBAL, 4), MLB_F(ML_F_INSTR, 3), -1);
    u4 = mlb_unit(b, ML_UNIT_BLOCK, "init", "b,c.c", 5, mlb_regset(b, 0), MLB_F(ML_F_INSTR, 100),
                  -1);
    mlb_call(b, u0, "memcpy", 1);
    mlb_call(b, u1, "sqrt", 2);
    mlb_call(b, u1, "memcpy", 1); /* a second string table entry for the same name */
    mlb_call(b, u3, "never", 1);  /* u3 runs but never in outer: only omp lists it */
    t0 = mlb_thread(b, 100);
    t1 = mlb_thread(b, 101);
    t2 = mlb_thread(b, 102);
    b->threads[t0].counts[u0] = 10;
    b->threads[t0].counts[u1] = 5;
    b->threads[t0].counts[u2] = 1000;
    b->threads[t0].counts[u3] = 50;
    b->threads[t0].counts[u4] = 7;
    b->threads[t0].rs[outer] = (struct ml_prof_rstat){1, 2000, 1};
    b->threads[t0].rs[inner] = (struct ml_prof_rstat){5, 500, 5};
    b->threads[t0].rs[omp] = (struct ml_prof_rstat){1, 1000, 1};
    b->threads[t1].counts[u3] = 30;
    b->threads[t2].counts[u0] = 4;
    b->threads[t2].rs[outer] = (struct ml_prof_rstat){2, 3000, 2};
    return b;
}

struct fixture {
    struct mlb *b;
    struct ml_profile *p;
    struct ml_report *r;
};

static int setup(void **state)
{
    struct fixture *fx = calloc(1, sizeof(*fx));
    unsigned char *buf;
    size_t len;
    char err[256];

    fx->b = synthetic();
    buf = mlb_write(fx->b, &len);
    assert_int_equal(ml_profile_parse(buf, len, &fx->p, err, sizeof(err)), 0);
    free(buf);
    assert_int_equal(ml_report_build(fx->p, "t/app.mlp", &fx->r), 0);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *fx = *state;

    ml_report_free(fx->r);
    ml_profile_free(fx->p);
    free(fx->b);
    free(fx);
    return 0;
}

static void test_nested_and_threads(void **state)
{
    struct fixture *fx = *state;
    const struct ml_report *r = fx->r;
    const struct ml_rstats *c;

    /* outer on thread 0: u0 x10 + u1 x5 + u2 1000 bytes. */
    c = ml_report_cell(r, 0, 0);
    assert_true(c->active && c->timed && !c->borrowed);
    assert_int_equal(c->entries, 1);
    assert_int_equal(c->v[ML_F_LOADS], 25);
    assert_int_equal(c->v[ML_F_STORES], 10);
    assert_int_equal(c->v[ML_F_RD_HEAP], 160 + 1000);
    assert_int_equal(c->v[ML_F_RD_GLOBAL], 40);
    assert_int_equal(c->v[ML_F_RD_STACK], 0);
    assert_int_equal(c->v[ML_F_WR_HEAP], 1000);
    assert_int_equal(c->v[ML_F_WR_STACK], 80);
    assert_int_equal(c->v[ML_F_I_INT], 30);
    assert_int_equal(c->v[ML_F_I_FP], 10);
    assert_int_equal(c->v[ML_F_I_VEC], 5);
    assert_int_equal(c->v[ML_F_I_MEM], 35);
    assert_int_equal(c->v[ML_F_I_BRANCH], 10);
    assert_int_equal(c->v[ML_F_I_CALL], 5);
    assert_int_equal(c->v[ML_F_INSTR], 90);
    assert_int_equal(ml_rstats_read(c), 1200);
    assert_int_equal(ml_rstats_written(c), 1080);
    assert_true(ml_rstats_seconds(c, 1000) == 2.0);
    assert_true(ml_report_gbs(1200, 2.0) == 600e-9);

    /* inner is nested: only u1 and u2 count, inclusively also in outer. */
    c = ml_report_cell(r, 1, 0);
    assert_int_equal(c->entries, 5);
    assert_int_equal(c->v[ML_F_LOADS], 5);
    assert_int_equal(ml_rstats_read(c), 1040);
    assert_int_equal(ml_rstats_written(c), 1000);
    assert_int_equal(c->v[ML_F_INSTR], 20);
    assert_true(ml_rstats_seconds(c, 1000) == 0.5);

    /* Thread 1 never touched outer; thread 2 did, with its own time. */
    assert_false(ml_report_cell(r, 0, 1)->active);
    c = ml_report_cell(r, 0, 2);
    assert_int_equal(c->entries, 2);
    assert_int_equal(c->v[ML_F_LOADS], 8);
    assert_int_equal(c->v[ML_F_INSTR], 28);
    assert_true(ml_rstats_seconds(c, 1000) == 3.0);

    /* Totals: sums, but time is the longest thread's. */
    c = &r->totals[0];
    assert_int_equal(c->entries, 3);
    assert_int_equal(c->v[ML_F_LOADS], 33);
    assert_int_equal(c->v[ML_F_INSTR], 118);
    assert_int_equal(ml_rstats_read(c), 1200 + 64);
    assert_int_equal(ml_rstats_written(c), 1080 + 32);
    assert_true(ml_rstats_seconds(c, 1000) == 3.0);

    /* Units outside every region count nowhere, but do count per unit. */
    assert_int_equal(r->unit_counts[4], 7);
    assert_int_equal(r->unit_counts[0], 14);
    assert_int_equal(r->unit_counts[2], 1000);

    /* idle never ran. */
    assert_false(r->totals[3].active);
    assert_false(r->totals[3].timed);
    assert_true(ml_rstats_seconds(&r->totals[3], 1000) < 0);
}

static void test_openmp_worker(void **state)
{
    struct fixture *fx = *state;
    const struct ml_report *r = fx->r;
    const struct ml_rstats *c = ml_report_cell(r, 2, 1);

    /* The worker did the work without entering: it borrows the master's time. */
    assert_true(c->active && c->timed && c->borrowed);
    assert_int_equal(c->entries, 0);
    assert_int_equal(c->v[ML_F_LOADS], 30);
    assert_int_equal(ml_rstats_read(c), 120);
    assert_int_equal(ml_rstats_written(c), 120);
    assert_true(ml_rstats_seconds(c, 1000) == 1.0);
    c = ml_report_cell(r, 2, 0);
    assert_false(c->borrowed);
    assert_int_equal(ml_rstats_read(c), 200);
    c = &r->totals[2];
    assert_int_equal(c->entries, 1);
    assert_int_equal(ml_rstats_read(c), 320);
    assert_true(ml_rstats_seconds(c, 1000) == 1.0);
    assert_false(c->borrowed);
    /* No clock rate: time unknown rather than a division by zero. */
    assert_true(ml_rstats_seconds(c, 0) < 0);
    assert_true(ml_report_gbs(320, -1) < 0);
}

static void test_not_seen(void **state)
{
    struct fixture *fx = *state;
    const struct ml_report *r = fx->r;
    const struct ml_report_callee *c = r->callees;

    /* outer: memcpy from u0 (10 + 4) and u1 (5) merged by name; sqrt 5 x 2. */
    assert_int_equal(r->ncallees, 5);
    assert_int_equal(c[0].region, 0);
    assert_string_equal(c[0].name, "memcpy");
    assert_int_equal(c[0].total, 19);
    assert_int_equal(c[0].calls[0], 15);
    assert_int_equal(c[0].calls[1], 0);
    assert_int_equal(c[0].calls[2], 4);
    assert_int_equal(c[1].region, 0);
    assert_string_equal(c[1].name, "sqrt");
    assert_int_equal(c[1].total, 10);
    /* inner: sqrt first (more calls). */
    assert_int_equal(c[2].region, 1);
    assert_string_equal(c[2].name, "sqrt");
    assert_int_equal(c[2].total, 10);
    assert_int_equal(c[3].region, 1);
    assert_string_equal(c[3].name, "memcpy");
    assert_int_equal(c[3].total, 5);
    /* omp: the worker's calls count too. */
    assert_int_equal(c[4].region, 2);
    assert_string_equal(c[4].name, "never");
    assert_int_equal(c[4].total, 80);
    assert_int_equal(c[4].calls[1], 30);
}

/* Renders with rd into a string (caller frees). */
static char *render(const struct ml_renderer *rd, struct ml_report *r,
                    const struct ml_report_opts *o)
{
    char *s = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&s, &n);

    assert_int_equal(ml_report_render(f, rd, &r, NULL, 1, o), 0);
    fclose(f);
    return s;
}

static int starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static void test_csv(void **state)
{
    struct fixture *fx = *state;
    struct ml_report_opts o = {.rows = ML_REPORT_THREADS_AND_TOTALS};
    char *s = render(&ml_render_csv, fx->r, &o);

    assert_true(starts_with(s, "profile,pid,region,thread,tid,executions,seconds,instr_int,"
                               "instr_fp,instr_vec,instr_mem,instr_branch,instr_call,instr_other,"
                               "instructions,loads,stores,rd_heap,rd_global,rd_stack,wr_heap,"
                               "wr_global,wr_stack,read_gbs,write_gbs,time_borrowed,counters,"
                               "increments,measured,scale,est_seconds,est_instructions,est_loads,"
                               "est_stores,est_bytes_read,est_bytes_written,cf,cf_seconds,"
                               "cal_seconds,read_gbs_cf,write_gbs_cf,read_gbs_cal,write_gbs_cal,"
                               "events,rank,profiles,exact_rd_heap,exact_rd_global,exact_rd_stack,"
                               "exact_wr_heap,exact_wr_global,exact_wr_stack,note,notseen_share,"
                               "alloc_bytes,frees,computed_goto\n"));
    /* outer: units u0, u1 and u2 (3 counters); u0 increments once per execution. Not sampled:
       scale 1; 10 increments over 35 memory operations: CF = 1 + 20/35. */
    assert_non_null(strstr(s, "\nt/app.mlp,4242,outer,0,100,1,2.000000000,30,10,5,35,10,5,0,90,"
                              "25,10,1160,40,0,1000,0,80,0.000001,0.000001,0,3,10,1,1.000000,"
                              "2.000000000,90,25,10,1200,1080,1.571429,1.272727273,,"
                              "0.000001,0.000001,,,,,1,,,,,,,,0.000000,0,0,0\n"));
    assert_non_null(strstr(s, "\nt/app.mlp,4242,outer,total,,3,3.000000000,"));
    assert_non_null(strstr(s, "\nt/app.mlp,4242,omp,1,101,0,1.000000000,0,0,0,0,0,0,0,90,30,30,"
                              "120,0,0,0,120,0,0.000000,0.000000,1,1,0,0,1.000000,"));
    assert_non_null(strstr(s, ",0,3,14,")); /* outer total: u0 ran 14 times */
    assert_null(strstr(s, "idle"));
    assert_null(strstr(s, "outer,1,101"));
    free(s);

    /* Totals only, one region. */
    {
        const char *names[] = {"inner"};
        o.rows = ML_REPORT_TOTALS;
        o.regions = names;
        o.nregion_names = 1;
        s = render(&ml_render_csv, fx->r, &o);
        assert_string_equal(
            strchr(s, '\n') + 1,
            "t/app.mlp,4242,inner,total,,5,0.500000000,0,10,5,5,0,5,0,20,5,0,"
            "1000,40,0,1000,0,0,0.000002,0.000002,0,2,0,5,1.000000,0.500000000,"
            "20,5,0,1040,1000,1.000000,0.500000000,,0.000002,0.000002,,,,,1,,,,,,,,0.000000,0,"
            "0,0\n");
        free(s);
    }
}

static void test_blocks(void **state)
{
    struct fixture *fx = *state;
    struct ml_report_opts o = {.rows = ML_REPORT_THREADS_AND_TOTALS};
    char *s = render(&ml_render_blocks, fx->r, &o);

    assert_true(starts_with(s, "profile,pid,unit,kind,regions,module,function,file,line,"
                               "executions,instructions,loads,stores,bytes_read,bytes_written,"
                               "rank,profiles\n"));
    /* Demangled name; bytes unit has no execution count; comma in a file name is quoted. */
    assert_non_null(strstr(s, "\nt/app.mlp,4242,0,block,outer,,ns::foo(int),a.cc,10,14,98,28,"
                              "14,224,112,,1\n"));
    assert_non_null(strstr(s, "\nt/app.mlp,4242,2,bytes,outer;inner,,main,a.cc,21,,0,0,0,1000,"
                              "1000,,1\n"));
    assert_non_null(strstr(s, "\nt/app.mlp,4242,4,block,,,init,\"b,c.c\",5,7,700,0,0,0,0,,1\n"));
    free(s);
}

static void test_table(void **state)
{
    struct fixture *fx = *state;
    struct ml_report_opts o = {.rows = ML_REPORT_THREADS_AND_TOTALS};
    char *s = render(&ml_render_table, fx->r, &o);

    assert_non_null(strstr(s, "profile t/app.mlp\n  pid 4242, ppid 1, host node1, 3 threads, "
                              "1.50 s wall\n  program ./app\n"));
    assert_non_null(strstr(s, "  not executed: idle\n"));
    /* Borrowed time and bandwidth in parentheses, with the footnote. */
    assert_non_null(strstr(s, "(1.00 s)"));
    assert_non_null(strstr(s, "(...) the thread ran region code without entering the region"));
    assert_non_null(strstr(s, "  outer  not seen: memcpy \xc3\x97"
                              "19, sqrt \xc3\x97"
                              "10\n"));
    assert_non_null(strstr(s, "1.17 KiB"));
    assert_non_null(strstr(s,
                           "\n  counters: static (counting units) and dynamic (increments "
                           "executed)\n  region  thread  tid  counters  increments  incr/exec\n"));
    /* outer total: 3 counters, u0's 14 increments over 3 executions. */
    assert_non_null(strstr(s, "  outer   total               3          14       4.67\n"));
    assert_null(strstr(s, "note: sampled"));
    assert_null(strstr(s, "est. time"));
    assert_non_null(strstr(s, "time/CF"));
    free(s);

    fx->p->hdr.sample = 8;
    s = render(&ml_render_table, fx->r, &o);
    assert_non_null(strstr(s, "note: sampled, 1 in 8 region executions measured"));
    assert_non_null(strstr(s, "est. time"));
    fx->p->hdr.sample = 1;
    free(s);
}

/* python3 -m json.tool is the independent judge of validity when it is installed. */
static void test_json(void **state)
{
    struct fixture *fx = *state;
    struct ml_report_opts o = {.rows = ML_REPORT_THREADS_AND_TOTALS};
    char *s = render(&ml_render_json, fx->r, &o);
    FILE *py;

    assert_non_null(strstr(s, "\"cmdline\": \"./app \\\"quoted\\\", arg\""));
    assert_non_null(strstr(s, "\"callee\": \"memcpy\", \"symbol\": \"memcpy\", \"calls\": 19, "
                              "\"per_thread\": [15, 0, 4]"));
    assert_non_null(strstr(s, "\"function\": \"ns::foo(int)\", \"symbol\": \"_ZN2ns3fooEi\""));
    if (system("python3 -c '' 2>/dev/null") != 0) {
        free(s);
        skip();
    }
    py = popen("python3 -c 'import json,sys; d=json.load(sys.stdin); "
               "r=d[\"profiles\"][0][\"regions\"]; "
               "assert r[0][\"total\"][\"bytes_read\"][\"total\"]==1264; "
               "assert r[2][\"threads\"][1][\"time_borrowed\"] is True; "
               "assert r[3][\"total\"][\"seconds\"] is None'",
               "w");
    assert_non_null(py);
    fputs(s, py);
    assert_int_equal(pclose(py), 0);
    free(s);
}

/* A process of an MPI job: its rank in the table heading, the CSV's last column and JSON. */
static void test_rank(void **state)
{
    struct fixture *fx = *state;
    struct ml_report_opts o = {.rows = ML_REPORT_THREADS_AND_TOTALS};
    struct ml_prof_header saved = fx->p->hdr;
    char *s;

    s = render(&ml_render_json, fx->r, &o);
    assert_non_null(strstr(s, "\"token\": null, \"rank\": null, \"nranks\": null,"));
    free(s);
    fx->p->hdr.flags |= ML_PROF_F_RANK;
    fx->p->hdr.rank = 3;
    fx->p->hdr.nranks = 4;
    fx->p->hdr.token = 0xfedcba9876543210ull;
    s = render(&ml_render_table, fx->r, &o);
    assert_non_null(strstr(s, "  pid 4242, ppid 1, rank 3 of 4, host node1, 3 threads"));
    free(s);
    s = render(&ml_render_csv, fx->r, &o);
    assert_non_null(strstr(s, "\nt/app.mlp,4242,outer,total,,3,"));
    assert_non_null(strstr(s, ",,,3,1,,,,,,,,"));
    assert_non_null(strstr(s, ",0,0,0\nt/app.mlp,4242,"));
    free(s);
    s = render(&ml_render_blocks, fx->r, &o);
    assert_non_null(strstr(s, "14,224,112,3,1\n"));
    free(s);
    s = render(&ml_render_json, fx->r, &o);
    assert_non_null(strstr(s, "\"token\": \"fedcba9876543210\", \"rank\": 3, \"nranks\": 4,"));
    free(s);
    fx->p->hdr.nranks = 0;
    s = render(&ml_render_table, fx->r, &o);
    assert_non_null(strstr(s, "  pid 4242, ppid 1, rank 3, host node1"));
    free(s);
    fx->p->hdr = saved;
}

/* Names are arbitrary bytes: JSON output escapes control characters and bad UTF-8. */
static void test_json_escapes(void **state)
{
    struct mlb *b = mlb_new(0);
    struct ml_report_opts o = {.rows = ML_REPORT_THREADS_AND_TOTALS};
    struct ml_profile *p;
    struct ml_report *r;
    unsigned char *buf;
    size_t len;
    char err[256], *s;
    uint32_t t, reg;

    (void)state;
    reg = mlb_region(b, "a\"b\\c\n\x01\xff\xc3\xa9");
    mlb_unit(b, ML_UNIT_BLOCK, "_Z", "", 0, mlb_regset(b, 1, reg), MLB_F(ML_F_LOADS, 1), -1);
    t = mlb_thread(b, 7);
    b->threads[t].counts[0] = 3;
    b->threads[t].rs[0] = (struct ml_prof_rstat){1, 5, 1};
    buf = mlb_write(b, &len);
    assert_int_equal(ml_profile_parse(buf, len, &p, err, sizeof(err)), 0);
    assert_int_equal(ml_report_build(p, "x", &r), 0);
    s = render(&ml_render_json, r, &o);
    assert_non_null(strstr(s, "\"name\": \"a\\\"b\\\\c\\u000a\\u0001\\ufffd\xc3\xa9\""));
    /* tsc_hz 0: times unknown, shown as null, never NaN. */
    assert_non_null(strstr(s, "\"seconds\": null"));
    assert_null(strstr(s, "nan"));
    free(s);
    s = render(&ml_render_table, r, &o);
    assert_non_null(strstr(s, "note: the profile has no clock rate"));
    free(s);
    ml_report_free(r);
    ml_profile_free(p);
    free(buf);
    free(b);
}

/*
 * Sampling and corrections with known answers: 10 executions, 4 measured in
 * 400 ticks (1000 ticks per second); one unit with a load, 8 heap bytes and
 * one increment, run 40 times; calibration 2 ticks per increment, 10 per
 * timer pair.
 */
static void test_sampled(void **state)
{
    struct mlb *b = mlb_new(1000);
    struct ml_report_opts o = {.rows = ML_REPORT_THREADS_AND_TOTALS};
    const struct ml_rstats *c;
    struct ml_profile *p;
    struct ml_report *r;
    unsigned char *buf;
    uint32_t t, reg;
    char err[256], *s;
    size_t len;

    (void)state;
    reg = mlb_region(b, "k");
    mlb_unit(b, ML_UNIT_BLOCK, "f", "k.c", 1, mlb_regset(b, 1, reg), MLB_F(ML_F_LOADS, 1),
             MLB_F(ML_F_RD_HEAP, 8), MLB_F(ML_F_INSTR, 5), MLB_F(ML_F_INCR, 1), -1);
    t = mlb_thread(b, 9);
    b->hdr.sample = 3;
    b->threads[t].counts[0] = 40;
    b->threads[t].rs[0] = (struct ml_prof_rstat){10, 400, 4};
    b->calib = (struct ml_prof_calib){2000, 10000};
    b->has_calib = 1;
    buf = mlb_write(b, &len);
    assert_int_equal(ml_profile_parse(buf, len, &p, err, sizeof(err)), 0);
    assert_int_equal(ml_report_build(p, "s", &r), 0);
    c = ml_report_cell(r, 0, 0);
    assert_int_equal(c->measured, 4);
    assert_true(c->scale == 2.5);
    assert_true(c->est_ticks == 1000);
    assert_int_equal(ml_rstats_est(c, c->v[ML_F_LOADS]), 100);
    assert_int_equal(ml_rstats_est(c, ml_rstats_read(c)), 800);
    /* CF = 1 + 2 x 40 increments / 40 memory operations = 3. */
    assert_true(c->cf == 3);
    assert_true(c->cf_ticks > 133.33 && c->cf_ticks < 133.34);
    /* 400 - 40 x 2 - 4 x 10 = 280 ticks. */
    assert_true(c->cal_ticks == 280);
    assert_true(r->totals[0].cal_ticks == 280);
    assert_true(ml_report_sampled(r));
    s = render(&ml_render_csv, r, &o);
    assert_non_null(strstr(s, "\ns,4242,k,0,9,10,0.400000000,0,0,0,0,0,0,0,200,40,0,320,0,0,0,0,0,"
                              "0.000001,0.000000,0,1,40,4,2.500000,1.000000000,500,100,0,800,0,"
                              "3.000000,0.133333333,0.280000000,0.000002,0.000000,0.000001,"
                              "0.000000,,,1,,,,,,,,0.000000,0,0,0\n"));
    free(s);
    s = render(&ml_render_table, r, &o);
    assert_non_null(strstr(s, "note: sampled, 1 in 3 region executions measured"));
    assert_non_null(strstr(s, "est. time"));
    free(s);
    s = render(&ml_render_json, r, &o);
    assert_non_null(strstr(s, "\"measured\": 4, \"scale\": 2.5, \"estimated\": {\"seconds\": 1, "
                              "\"instructions\": 500, \"loads\": 100"));
    assert_non_null(strstr(s, "\"calibration\": {\"increment_ticks\": 2.000, \"timer_ticks\": "
                              "10.000}"));
    free(s);
    ml_report_free(r);
    ml_profile_free(p);
    free(buf);

    /* Nothing measured: scale, time and estimates unknown. */
    b->threads[t].rs[0] = (struct ml_prof_rstat){10, 0, 0};
    buf = mlb_write(b, &len);
    assert_int_equal(ml_profile_parse(buf, len, &p, err, sizeof(err)), 0);
    assert_int_equal(ml_report_build(p, "s", &r), 0);
    c = ml_report_cell(r, 0, 0);
    assert_true(c->scale < 0 && c->est_ticks < 0 && c->cal_ticks < 0);
    assert_true(ml_rstats_seconds(c, 1000) < 0);
    s = render(&ml_render_csv, r, &o);
    assert_non_null(strstr(s, ",0,1,40,0,,,,,,,,3.000000,,,,,,,,,1,,,,,,,"
                              "0 of 10 measured: rerun with MEMLENS_SAMPLE=1,,0,0,0\n"));
    free(s);
    /* The empty row says why, in every format. */
    s = render(&ml_render_table, r, &o);
    assert_non_null(strstr(s, "  -  0 of 10 measured: rerun with MEMLENS_SAMPLE=1\n"));
    free(s);
    s = render(&ml_render_json, r, &o);
    assert_non_null(strstr(s, "\"exact\": null, \"note\": \"0 of 10 measured: rerun with "
                              "MEMLENS_SAMPLE=1\"}"));
    free(s);
    ml_report_free(r);
    ml_profile_free(p);
    free(buf);
    free(b);
}

/* Exact mode: EXACT bytes summed over each region's units per thread; every renderer shows them. */
static void test_exact(void **state)
{
    struct fixture *fx = *state;
    struct ml_report_opts o = {.rows = ML_REPORT_THREADS_AND_TOTALS};
    struct mlb *b = synthetic();
    struct ml_profile *p;
    struct ml_report *r;
    unsigned char *buf;
    char err[256], *s;
    size_t len;

    /* Without EXACT records: no block, empty columns, null. */
    s = render(&ml_render_table, fx->r, &o);
    assert_null(strstr(s, "exact mode"));
    free(s);
    /* Thread 0: u0 (outer) 100 bytes read from the stack, u1 (outer, inner) 40 global, u2
       (bytes, outer and inner) 1000 heap written; thread 2: u0 24 bytes read from the heap. */
    b->threads[0].has_exact = b->threads[2].has_exact = 1;
    b->threads[0].exact[0][ML_C_RD_STACK] = 100;
    b->threads[0].exact[1][ML_C_RD_GLOBAL] = 40;
    b->threads[0].exact[2][ML_C_WR_HEAP] = 1000;
    b->threads[2].exact[0][ML_C_RD_HEAP] = 24;
    buf = mlb_write(b, &len);
    assert_int_equal(ml_profile_parse(buf, len, &p, err, sizeof(err)), 0);
    assert_int_equal(ml_report_build(p, "x", &r), 0);
    assert_int_equal(ml_report_cell(r, 0, 0)->x[ML_C_RD_STACK], 100);
    assert_int_equal(ml_report_cell(r, 0, 0)->x[ML_C_RD_GLOBAL], 40);
    assert_int_equal(ml_report_cell(r, 1, 0)->x[ML_C_RD_STACK], 0);
    assert_int_equal(ml_report_cell(r, 1, 0)->x[ML_C_WR_HEAP], 1000);
    assert_int_equal(r->totals[0].x[ML_C_RD_HEAP], 24);
    assert_int_equal(ml_rstats_xread(&r->totals[0]), 164);
    assert_int_equal(ml_rstats_xwritten(&r->totals[0]), 1000);
    s = render(&ml_render_csv, r, &o);
    /* outer total: static heap+global 1064 + 64 read, 1000 written; exact 64 + 1000. */
    assert_non_null(strstr(s, ",,,1,24,40,100,1000,0,0,,"));
    assert_non_null(strstr(s, ",0,0,0\nx,4242,inner,0,100,"));
    free(s);
    s = render(&ml_render_table, r, &o);
    assert_non_null(strstr(s, "\n  bytes by address class (exact mode: every access classified "
                              "by its address at run time)\n  region  thread  tid  rd heap  "
                              "rd global  rd stack  wr heap  wr global  wr stack  h+g "
                              "static/exact\n"));
    /* static heap + global (1224 + 40 read, 1000 written) over exact (24 + 40, 1000) */
    assert_non_null(strstr(s, "  outer   total           24 B       40 B     100 B   1000 B        "
                              "0 B       0 B             2.128\n"));
    free(s);
    s = render(&ml_render_json, r, &o);
    assert_non_null(strstr(s, "\"exact\": {\"bytes_read\": {\"heap\": 24, \"global\": 40, "
                              "\"stack\": 100, \"total\": 164}, \"bytes_written\": {\"heap\": "
                              "1000, \"global\": 0, \"stack\": 0, \"total\": 1000}}"));
    free(s);
    ml_report_free(r);
    ml_profile_free(p);
    free(buf);
    free(b);
}

#define FMT_WRITE                                                                                  \
    "_ZN3fmt2v96detail5writeIcSt20back_insert_iteratorINSt7__cxx1112basic_stringIcSt11char_"       \
    "traitsIcESaIcEEEEmEET0_SB_RKT1_RKSt3mapIS9_NS5_IT_S6_ISG_ESaISG_EEESt4lessIS9_"               \
    "ESaISt4pairIKS9_"                                                                             \
    "SJ_EEE"

/* Long names: cut for the table (parameters, return type, templates, middle scopes), whole
   in JSON; not-seen callees demangled everywhere. */
static void test_names(void **state)
{
    struct ml_report_opts o = {.rows = ML_REPORT_THREADS_AND_TOTALS, .top = 5};
    char buf[ML_REPORT_NAME], d[4096], aaa[101], scopes[400] = "", utf[200] = "", *s;
    struct mlb *b = mlb_new(1000);
    struct ml_profile *p;
    struct ml_report *r;
    unsigned char *out;
    uint32_t reg, u, t;
    size_t len;

    (void)state;
    assert_string_equal(ml_report_cut(buf, sizeof(buf), "main", 60), "main");
    assert_string_equal(
        ml_report_cut(buf, sizeof(buf), ml_report_demangle(FMT_WRITE, d, sizeof(d)), 60),
        "fmt::v9::detail::write<\xe2\x80\xa6>");
    /* Inner template arguments go first; short lists and operators stay. */
    assert_string_equal(
        ml_report_cut(buf, sizeof(buf),
                      "ns::table<std::pair<int, long>, std::allocator<std::pair<int, "
                      "long> > >::operator<<(int) const",
                      60),
        "ns::table<std::pair<\xe2\x80\xa6>, std::allocator<\xe2\x80\xa6> "
        ">::operator<<");
    memset(aaa, 'a', 100);
    aaa[100] = 0;
    ml_report_cut(buf, sizeof(buf), aaa, 60);
    assert_int_equal(strlen(buf), 59 + 3); /* 29 + 30 characters and "…" */
    assert_true(!strncmp(buf + 29, "\xe2\x80\xa6", 3));
    for (int i = 0; i < 30; i++)
        sprintf(scopes + strlen(scopes), "n%02d::", i);
    strcat(scopes, "kernel_body");
    assert_string_equal(ml_report_cut(buf, sizeof(buf), scopes, 40),
                        "n00::n01::n02::n03::n04::\xe2\x80\xa6::kernel_body");
    for (int i = 0; i < 70; i++)
        strcat(utf, "\xc3\xa9");
    ml_report_cut(buf, sizeof(buf), utf, 60);
    assert_int_equal(strlen(buf), 59 * 2 + 3); /* cut on character boundaries */

    reg = mlb_region(b, "r");
    u = mlb_unit(b, ML_UNIT_BLOCK, FMT_WRITE, "fmt.h", 3, mlb_regset(b, 1, reg),
                 MLB_F(ML_F_LOADS, 1), MLB_F(ML_F_RD_HEAP, 8), MLB_F(ML_F_INSTR, 2), -1);
    mlb_call(b, u, "_Znwm", 1);
    mlb_call(b, u, FMT_WRITE, 1);
    t = mlb_thread(b, 5);
    b->threads[t].counts[u] = 3;
    b->threads[t].rs[reg] = (struct ml_prof_rstat){1, 5, 1};
    out = mlb_write(b, &len);
    assert_int_equal(ml_profile_parse(out, len, &p, d, sizeof(d)), 0);
    assert_int_equal(ml_report_build(p, "n", &r), 0);
    s = render(&ml_render_table, r, &o);
    assert_non_null(strstr(s, "  r  not seen: fmt::v9::detail::write<\xe2\x80\xa6> \xc3\x97"
                              "3, operator new(unsigned long) \xc3\x97"
                              "3\n"));
    free(s);
    s = render(&ml_render_top, r, &o);
    assert_non_null(strstr(s, "\n  fmt::v9::detail::write<\xe2\x80\xa6>  -           6  24 B"));
    assert_null(strstr(s, "back_insert_iterator"));
    free(s);
    s = render(&ml_render_json, r, &o);
    assert_non_null(
        strstr(s, "{\"callee\": \"operator new(unsigned long)\", \"symbol\": \"_Znwm\""));
    assert_non_null(
        strstr(s, "\"callee\": \"std::back_insert_iterator<std::__cxx11::basic_string<"));
    free(s);
    s = render(&ml_render_top_csv, r, &o);
    assert_non_null(strstr(s, ",\"std::back_insert_iterator<std::__cxx11::basic_string<char, "));
    free(s);
    ml_report_free(r);
    ml_profile_free(p);
    free(out);
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nested_and_threads),
        cmocka_unit_test(test_openmp_worker),
        cmocka_unit_test(test_not_seen),
        cmocka_unit_test(test_csv),
        cmocka_unit_test(test_blocks),
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_json_escapes),
        cmocka_unit_test(test_rank),
        cmocka_unit_test(test_sampled),
        cmocka_unit_test(test_exact),
        cmocka_unit_test(test_names),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
