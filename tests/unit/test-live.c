/* Unit tests of the live reader against the real publisher, with a runtime state built in this
 * process. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "report/live.h"
#include "runtime/rt.h"

/*
 * The publisher is compiled into the test, so that the reader is checked
 * against the offsets the runtime really publishes; the test plays the
 * profiled process, whose state it builds by hand below, and reads itself
 * through process_vm_readv.
 */
#include "../../src/runtime/files.c"
#include "../../src/runtime/publish.c"
#include "../../src/format/safefile.c"

struct ml_rt ml_rt;

void ml_rt_say(const char *const *parts, size_t n)
{
    for (size_t i = 0; i < n; i++)
        fputs(parts[i], stderr);
    fputc('\n', stderr);
}

/*
 * Regions: a (0), b (1). Module m: units u0 {a}, u1 {a, b}, u2 {} (outside
 * regions). The module's local region ids are reversed (local 0 = b) to check
 * the mapping to global ids.
 *   thread 0 (tid 500): live, counts in tls0; a: 3 entries, 300 ticks.
 *   thread 1 (tid 501): exited, counts in snap1; b: 1 entry, 50 ticks.
 */
static const char *const local_names[] = {"b", "a"};
static const uint32_t regsets[] = {1, 1, 2, 1, 0, 0}; /* {a} at 0, {a, b} at 2, {} at 5 */
static uint32_t region_ids[2];
static struct ml_rt_unit units[3];
static uint64_t tls0[3], snap1[3];
static uint64_t *tls_ptrs0[1] = {tls0};
static struct ml_rstate rs0[ML_RT_MAX_REGIONS], rs1[ML_RT_MAX_REGIONS];
static struct ml_rt_module mod;
static struct ml_thread_rec th0, th1;
static char err[256];

static void build_state(void)
{
    memset(&ml_rt, 0, sizeof(ml_rt));
    ml_rt.region_names[0] = "a";
    ml_rt.region_names[1] = "b";
    ml_rt.nregions = 2;
    region_ids[0] = 1;
    region_ids[1] = 0;
    for (int u = 0; u < 3; u++) {
        units[u].kind = ML_UNIT_BLOCK;
        units[u].facts[ML_F_RD_HEAP] = 8u * (u + 1);
        units[u].facts[ML_F_WR_GLOBAL] = 4;
    }
    units[0].regset = 0;
    units[1].regset = 2;
    units[2].regset = 5;
    mod = (struct ml_rt_module){.abi = ML_RT_ABI,
                                .nunits = 3,
                                .nregions = 2,
                                .nregset_words = 6,
                                .name = "m",
                                .region_names = local_names,
                                .regsets = regsets,
                                .units = units,
                                .region_ids = region_ids};
    ml_rt.mods = &mod;
    ml_rt.nmods = 1;
    ml_rt.nunits = 3;
    ml_rt.nregset_words = 6;
    tls0[0] = 10;
    tls0[1] = 20;
    tls0[2] = 30;
    snap1[1] = 7;
    memset(rs0, 0, sizeof(rs0));
    memset(rs1, 0, sizeof(rs1));
    rs0[0] = (struct ml_rstate){.entries = 3, .ticks = 300};
    rs1[1] = (struct ml_rstate){.entries = 1, .ticks = 50};
    th0 = (struct ml_thread_rec){
        .next = &th1, .tid = 500, .index = 0, .nmods = 1, .cap = 1, .tls = tls_ptrs0, .rs = rs0};
    th1 = (struct ml_thread_rec){
        .tid = 501, .index = 1, .done = 1, .snap = snap1, .snap_units = 3, .rs = rs1};
    ml_rt.threads = &th0;
    ml_rt.nthreads = 2;
    ml_rt.tick0 = ml_rt_ticks() - 1000000;
    ml_rt.mono0 = ml_rt_mono_ns() - 1000000;
    ml_rt.sample = 100;
}

static int setup(void **state)
{
    (void)state;
    build_state();
    ml_rt_files_fork(); /* token and start time, without an output directory */
    ml_rt_publish();
    return pub_path[0] ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    ml_rt_unpublish();
    return 0;
}

static struct ml_live *attach(void)
{
    struct ml_live *l = NULL;

    assert_int_equal(ml_live_open(getpid(), &l, err, sizeof(err)), 0);
    return l;
}

static void test_read(void **state)
{
    struct ml_live *l = attach();
    struct ml_profile *p;
    uint32_t n;
    const uint32_t *ids;

    (void)state;
    assert_int_equal(ml_live_read(l, &p, err, sizeof(err)), 0);
    assert_int_equal(p->nregions, 2);
    assert_string_equal(ml_profile_str(p, p->regions[0]), "a");
    assert_string_equal(ml_profile_str(p, p->regions[1]), "b");
    assert_int_equal(p->nunits, 3);
    ids = ml_profile_regset(p, p->units[1].regset, &n); /* local {1, 0} = global {a, b} */
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], 0);
    assert_int_equal(ids[1], 1);
    ids = ml_profile_regset(p, p->units[0].regset, &n);
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], 0);
    assert_int_equal(p->units[2].facts[ML_F_RD_HEAP], 24);
    assert_int_equal(p->nthreads, 2);
    assert_int_equal(p->threads[0].tid, 500);
    assert_int_equal(p->threads[0].counts[1], 20);
    assert_int_equal(p->threads[0].rstats[0].entries, 3);
    assert_int_equal(p->threads[0].rstats[0].ticks, 300);
    assert_int_equal(p->threads[1].tid, 501);
    assert_int_equal(p->threads[1].counts[0], 0);
    assert_int_equal(p->threads[1].counts[1], 7);
    assert_int_equal(p->threads[1].rstats[1].entries, 1);
    assert_true(p->hdr.tsc_hz > 0);
    assert_int_equal(p->hdr.sample, 100);
    ml_profile_free(p);
    ml_live_close(l);
}

/* An open region counts up to now; intervals are differences; a racy low read is repaired. */
static void test_diff(void **state)
{
    struct ml_live *l = attach();
    struct ml_profile *a, *b, *d;

    (void)state;
    assert_int_equal(ml_live_read(l, &a, err, sizeof(err)), 0);
    tls0[0] += 5;
    tls0[1] = 15; /* below the previous read's 20 */
    rs0[0].entries += 2;
    rs0[0].ticks += 200;
    rs0[1].depth = 1;
    rs0[1].start = ml_rt_ticks() - 1000;
    assert_int_equal(ml_live_read(l, &b, err, sizeof(err)), 0);
    assert_int_equal(b->threads[0].rstats[1].entries, 1);
    assert_true(b->threads[0].rstats[1].ticks >= 1000);
    assert_int_equal(ml_live_diff(a, b, &d), 0);
    assert_int_equal(d->nthreads, 2);
    assert_int_equal(d->threads[0].counts[0], 5);
    assert_int_equal(d->threads[0].counts[1], 0);
    assert_int_equal(b->threads[0].counts[1], 20); /* raised to the previous read */
    assert_int_equal(d->threads[0].counts[2], 0);
    assert_int_equal(d->threads[0].rstats[0].entries, 2);
    assert_int_equal(d->threads[0].rstats[0].ticks, 200);
    assert_int_equal(d->threads[0].rstats[1].entries, 1);
    assert_int_equal(d->threads[1].counts[1], 0);
    assert_int_equal(d->threads[1].rstats[1].entries, 0);
    ml_profile_free(a);
    ml_profile_free(b);
    ml_profile_free(d);
    ml_live_close(l);
    build_state();
}

/* Corrupt tables are refused with a reason, never followed. */
static void test_corrupt(void **state)
{
    static const uint32_t bad_words[] = {6, 1, 2, 1, 0, 0};
    static const uint32_t bad_id[] = {1, 7, 2, 1, 0, 0};
    struct ml_live *l;
    struct ml_profile *p = NULL;

    (void)state;
    mod.regsets = bad_words;
    l = attach();
    assert_int_equal(ml_live_read(l, &p, err, sizeof(err)), -EPROTO);
    assert_non_null(strstr(err, "overruns"));
    ml_live_close(l);
    mod.regsets = bad_id;
    l = attach();
    assert_int_equal(ml_live_read(l, &p, err, sizeof(err)), -EPROTO);
    assert_non_null(strstr(err, "bad region id"));
    ml_live_close(l);
    mod.regsets = regsets;
    units[1].regset = 6; /* past the module's words */
    l = attach();
    assert_int_equal(ml_live_read(l, &p, err, sizeof(err)), -EPROTO);
    assert_non_null(strstr(err, "has no region set"));
    ml_live_close(l);
    units[1].regset = 2;
    ml_rt.nmods = 2; /* the list holds one */
    l = attach();
    assert_int_equal(ml_live_read(l, &p, err, sizeof(err)), -EPROTO);
    ml_live_close(l);
    assert_null(p);
    build_state();
}

/* Writes the (changed) header to the published file: the file and the memory copy agree. */
static void republish(void)
{
    int fd = open(pub_path, O_WRONLY | O_TRUNC);

    assert_true(fd >= 0);
    assert_int_equal(write(fd, &pub, sizeof(pub)), sizeof(pub));
    close(fd);
}

/*
 * Hostile layouts: a process may publish any offsets. Each field the reader
 * copies out of a unit or region state must lie inside the record (else the
 * reader would read past its copy: ASan found 6 of 6 such layouts), records
 * and offsets must be of sane size; each is refused at attach, naming the
 * field.
 */
static void test_hostile_layouts(void **state)
{
    const struct ml_live_header good = pub;
    const uint32_t usize = pub.off[ML_LF_UNIT_SIZE], rsz = pub.off[ML_LF_RS_SIZE];
    struct {
        enum ml_live_field f;
        uint32_t off;
        const char *want;
    } cases[] = {
        {ML_LF_UNIT_KIND, usize, "unit.kind"},
        {ML_LF_UNIT_REGSET, usize - 2, "unit.regset"},
        {ML_LF_UNIT_FACTS, usize - 8, "unit.facts"},
        {ML_LF_RS_ENTRIES, rsz, "region_state.entries"},
        {ML_LF_RS_TICKS, rsz - 4, "region_state.ticks"},
        {ML_LF_RS_START, 0xfffffff0u, "region_state.start"},
        {ML_LF_RS_DEPTH, rsz - 3, "region_state.depth"},
        {ML_LF_UNIT_SIZE, 0x80000000u, "records of"},
        {ML_LF_RS_SIZE, 0, "records of"},
        {ML_LF_RT_NAMES, 0x40000000u, "rt.names"},
    };
    struct ml_live *l = NULL;
    struct ml_profile *p = NULL;

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        pub.off[cases[i].f] = cases[i].off;
        republish();
        if (ml_live_open(getpid(), &l, err, sizeof(err)) == 0) {
            /* Before the check, reading went past the copied records. */
            ml_live_read(l, &p, err, sizeof(err));
            ml_profile_free(p);
            ml_live_close(l);
            fail_msg("layout %zu (%s) accepted", i, cases[i].want);
        }
        assert_null(l);
        assert_non_null(strstr(err, "impossible struct layout"));
        if (!strstr(err, cases[i].want))
            fail_msg("layout %zu: '%s' does not name '%s'", i, err, cases[i].want);
        pub = good;
    }
    pub.nfacts = 1000;
    republish();
    assert_int_equal(ml_live_open(getpid(), &l, err, sizeof(err)), -EPROTO);
    pub = good;
    pub.max_regions = 0xffffffffu;
    republish();
    assert_int_equal(ml_live_open(getpid(), &l, err, sizeof(err)), -EPROTO);
    assert_non_null(strstr(err, "regions at most"));
    pub = good;
    republish();
    l = attach();
    assert_int_equal(ml_live_read(l, &p, err, sizeof(err)), 0);
    ml_profile_free(p);
    ml_live_close(l);
}

/* A file whose copy in memory differs: stale at attach, gone (exec'd) once attached. */
static void test_stale(void **state)
{
    struct ml_live *l = attach(), *l2 = NULL;
    struct ml_profile *p = NULL;

    (void)state;
    pub.cookie ^= 1;
    assert_int_equal(ml_live_read(l, &p, err, sizeof(err)), -ESRCH);
    assert_non_null(strstr(err, "exited"));
    assert_int_equal(ml_live_open(getpid(), &l2, err, sizeof(err)), -ESTALE);
    assert_non_null(strstr(err, "is stale"));
    assert_null(l2);
    pub.cookie ^= 1;
    ml_live_close(l);
}

static void test_refusals(void **state)
{
    struct ml_live *l = NULL;
    char path[sizeof(pub_path)];
    struct ml_live_header h = pub;
    int fd;

    (void)state;
    assert_int_equal(ml_live_open(getppid(), &l, err, sizeof(err)), -ENOENT);
    assert_non_null(strstr(err, "is not profiled by memlens"));
    assert_int_equal(ml_live_open(0, &l, err, sizeof(err)), -ESRCH);
    /* A header from a future memlens. */
    h.version = ML_LIVE_VERSION + 1;
    snprintf(path, sizeof(path), "%s", pub_path);
    fd = open(path, O_WRONLY | O_TRUNC);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, &h, sizeof(h)), sizeof(h));
    close(fd);
    assert_int_equal(ml_live_open(getpid(), &l, err, sizeof(err)), -EPROTO);
    assert_non_null(strstr(err, "incompatible memlens"));
    /* Cut short. */
    assert_int_equal(truncate(path, 20), 0);
    assert_int_equal(ml_live_open(getpid(), &l, err, sizeof(err)), -EPROTO);
    assert_null(l);
    /* Unpublished: removed, and not profiled any more. */
    ml_rt_unpublish();
    assert_int_equal(access(path, F_OK), -1);
    assert_int_equal(ml_live_open(getpid(), &l, err, sizeof(err)), -ENOENT);
    ml_rt_publish();
}

/* Writes h to ML_LIVE_DIR/memlens.<pid>.<token>[suffix]; returns the path in path. */
static void plant(char *path, size_t len, uint64_t token, const char *suffix,
                  const struct ml_live_header *h)
{
    int fd;

    snprintf(path, len, "%s/memlens.%d.%016llx%s", ML_LIVE_DIR, (int)getpid(),
             (unsigned long long)token, suffix);
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, h, sizeof(*h)), sizeof(*h));
    close(fd);
}

/* What another user can leave in /dev/shm under the process's pid is refused, never followed. */
static void test_find(void **state)
{
    struct ml_live_header h = pub;
    struct ml_live *l = NULL;
    char path[96], link[96];
    uint64_t tok = pub.token;

    (void)state;
    ml_rt_unpublish();
    /* A FIFO: opened without blocking, refused as not a regular file. */
    snprintf(path, sizeof(path), "%s/memlens.%d.%016llx", ML_LIVE_DIR, (int)getpid(),
             (unsigned long long)tok);
    assert_int_equal(mkfifo(path, 0600), 0);
    assert_int_equal(ml_live_open(getpid(), &l, err, sizeof(err)), -ESTALE);
    assert_non_null(strstr(err, "is not a regular file"));
    unlink(path);
    /* A link to the real header: not followed. */
    plant(link, sizeof(link), tok, ".x", &h);
    assert_int_equal(symlink(link, path), 0);
    assert_int_equal(ml_live_open(getpid(), &l, err, sizeof(err)), -ESTALE);
    assert_non_null(strstr(err, "cannot be opened"));
    unlink(path);
    unlink(link);
    /* Another process's start time, or a name whose token is not the header's: stale. */
    h.start_time++;
    plant(path, sizeof(path), tok, "", &h);
    assert_int_equal(ml_live_open(getpid(), &l, err, sizeof(err)), -ESTALE);
    assert_non_null(strstr(err, "is stale"));
    unlink(path);
    h = pub;
    plant(path, sizeof(path), tok ^ 1, "", &h);
    assert_int_equal(ml_live_open(getpid(), &l, err, sizeof(err)), -ESTALE);
    unlink(path);
    /* Another user's file (needs root to make one). */
    if (geteuid() == 0) {
        plant(path, sizeof(path), tok, "", &h);
        assert_int_equal(chown(path, 65534, 65534), 0);
        assert_int_equal(ml_live_open(getpid(), &l, err, sizeof(err)), -ESTALE);
        assert_non_null(strstr(err, "belongs to uid 65534"));
        unlink(path);
    }
    /* Temporary names are not candidates. */
    plant(path, sizeof(path), tok, ".tmp", &h);
    assert_int_equal(ml_live_open(getpid(), &l, err, sizeof(err)), -ENOENT);
    unlink(path);
    /* Among refused candidates, the real one is found. */
    plant(path, sizeof(path), tok ^ 2, "", &h);
    ml_rt_publish();
    assert_int_equal(ml_live_open(getpid(), &l, err, sizeof(err)), 0);
    ml_live_close(l);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read),    cmocka_unit_test(test_diff),
        cmocka_unit_test(test_corrupt), cmocka_unit_test(test_hostile_layouts),
        cmocka_unit_test(test_stale),   cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_find),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
