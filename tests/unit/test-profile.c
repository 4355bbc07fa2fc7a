/* Unit tests of the region profile writer and validating reader (src/format/profile.c). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "mlp-build.h"

/* A profile using every section: two regions, nested units, a call, a module, two threads. */
static struct mlb *sample(void)
{
    struct mlb *b = mlb_new(2400000000ull);
    uint32_t r0, r1, s0, s01, u0, u1, t0, t1;

    mlb_meta(b, "program", "/usr/bin/app");
    mlb_meta(b, "cmdline", "app -n 3");
    mlb_meta(b, "hostname", "node1");
    /* An odd-length string table leaves later sections misaligned in the file. */
    mlb_str(b, "xy");
    r0 = mlb_region(b, "outer");
    r1 = mlb_region(b, "inner");
    s0 = mlb_regset(b, 1, r0);
    s01 = mlb_regset(b, 2, r0, r1);
    u0 = mlb_unit(b, ML_UNIT_BLOCK, "_Z3fooi", "a.c", 10, s0, MLB_F(ML_F_LOADS, 2),
                  MLB_F(ML_F_INSTR, 9), -1);
    u1 = mlb_unit(b, ML_UNIT_BYTES, "main", "a.c", 20, s01, MLB_F(ML_F_RD_HEAP, 1), -1);
    mlb_call(b, u0, "sqrt", 3);
    b->modules[0].name = mlb_str(b, "a.c");
    b->modules[0].first_unit = 0;
    b->modules[0].nunits = 2;
    b->nmodules = 1;
    t0 = mlb_thread(b, 100);
    t1 = mlb_thread(b, 101);
    b->threads[t0].counts[u0] = 5;
    b->threads[t0].counts[u1] = 4096;
    b->threads[t0].rs[r0] = (struct ml_prof_rstat){1, 777, 1};
    b->threads[t1].counts[u0] = 7;
    b->threads[t1].rs[r1] = (struct ml_prof_rstat){3, 99, 2};
    return b;
}

static void test_round_trip(void **state)
{
    struct mlb *b = sample();
    struct ml_profile *p;
    unsigned char *buf;
    size_t len;
    char err[256] = "";
    uint32_t n;
    const uint32_t *ids;

    (void)state;
    buf = mlb_write(b, &len);
    assert_int_equal(ml_profile_parse(buf, len, &p, err, sizeof(err)), 0);
    assert_int_equal(p->hdr.tsc_hz, 2400000000ull);
    assert_int_equal(p->hdr.pid, 4242);
    assert_int_equal(p->size, len);
    assert_string_equal(ml_profile_meta(p, "program"), "/usr/bin/app");
    assert_string_equal(ml_profile_meta(p, "cmdline"), "app -n 3");
    assert_string_equal(ml_profile_meta(p, "hostname"), "node1");
    assert_null(ml_profile_meta(p, "nothing"));
    assert_int_equal(p->nregions, 2);
    assert_string_equal(ml_profile_str(p, p->regions[0]), "outer");
    assert_string_equal(ml_profile_str(p, p->regions[1]), "inner");
    assert_string_equal(ml_profile_str(p, 0xffffffffu), "?");
    assert_int_equal(p->nunits, 2);
    assert_string_equal(ml_profile_str(p, p->units[0].func), "_Z3fooi");
    assert_int_equal(p->units[0].line, 10);
    assert_int_equal(p->units[0].facts[ML_F_INSTR], 9);
    assert_int_equal(p->units[1].kind, ML_UNIT_BYTES);
    ids = ml_profile_regset(p, p->units[1].regset, &n);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], 0);
    assert_int_equal(ids[1], 1);
    assert_int_equal(p->ncalls, 1);
    assert_string_equal(ml_profile_str(p, p->calls[0].callee), "sqrt");
    assert_int_equal(p->calls[0].per_exec, 3);
    assert_int_equal(p->nmodules, 1);
    assert_int_equal(p->modules[0].nunits, 2);
    assert_int_equal(p->nthreads, 2);
    assert_int_equal(p->threads[0].tid, 100);
    assert_int_equal(p->threads[1].index, 1);
    assert_int_equal(p->threads[0].counts[1], 4096);
    assert_int_equal(p->threads[1].counts[0], 7);
    assert_int_equal(p->threads[0].rstats[0].ticks, 777);
    assert_int_equal(p->threads[1].rstats[1].entries, 3);
    /* Records are read in place: they must be aligned whatever the file layout. */
    assert_int_equal((uintptr_t)p->threads[0].counts % 8, 0);
    assert_int_equal((uintptr_t)p->units % 8, 0);
    assert_int_equal((uintptr_t)p->calls % 8, 0);
    ml_profile_free(p);
    free(buf);
    free(b);
}

static void test_read_file(void **state)
{
    struct mlb *b = sample();
    char path[] = "/tmp/ml-test-profile-XXXXXX";
    struct ml_profile *p;
    unsigned char *buf;
    size_t len;
    char err[256] = "";
    int fd;

    (void)state;
    buf = mlb_write(b, &len);
    fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, buf, len), (ssize_t)len);
    close(fd);
    assert_int_equal(ml_profile_read(path, 0, &p, err, sizeof(err)), 0);
    assert_string_equal(p->path, path);
    assert_int_equal(p->nthreads, 2);
    ml_profile_free(p);
    /* A truncated file on disk gives the same clean error as in memory. */
    assert_int_equal(truncate(path, (off_t)len - 1), 0);
    assert_int_equal(ml_profile_read(path, 0, &p, err, sizeof(err)), -EINVAL);
    assert_null(p);
    assert_non_null(strstr(err, "truncated section header"));
    unlink(path);
    assert_int_equal(ml_profile_read(path, 0, &p, err, sizeof(err)), -ENOENT);
    assert_string_equal(err, "No such file or directory");
    assert_int_equal(ml_profile_read("/tmp", 0, &p, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "not a regular file");
    free(buf);
    free(b);
}

/* Peak resident memory of this process since the last reset_peak(), in MiB (VmHWM). */
static long peak_mib(void)
{
    char line[256];
    long kb = -1;
    FILE *f = fopen("/proc/self/status", "r");

    assert_non_null(f);
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "VmHWM: %ld kB", &kb) == 1)
            break;
    fclose(f);
    return kb / 1024;
}

static void reset_peak(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");

    assert_non_null(f);
    fputs("5", f);
    fclose(f);
}

static void on_alarm(int sig)
{
    (void)sig;
    fail_msg("ml_profile_read blocked");
}

/*
 * Files anyone could have planted in a profile directory: a FIFO is refused
 * at once (not waited on), a symbolic link is refused when asked, and a huge
 * file is judged by its header and section lengths before its body is read:
 * peak memory stays far below the file's size.
 */
static void test_read_hostile(void **state)
{
    struct mlb *b = sample();
    char dir[] = "/tmp/ml-test-hostile-XXXXXX", path[128], link[128];
    const off_t big = 256 << 20;
    struct ml_profile *p;
    unsigned char *buf;
    size_t len;
    char err[256] = "";
    int fd;

    (void)state;
    buf = mlb_write(b, &len);
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/fifo.mlp", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    signal(SIGALRM, on_alarm);
    alarm(10);
    assert_int_equal(ml_profile_read(path, 0, &p, err, sizeof(err)), -EINVAL);
    alarm(0);
    assert_string_equal(err, "not a regular file");
    unlink(path);

    /* A good profile, and a link to it. */
    snprintf(path, sizeof(path), "%s/good.mlp", dir);
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, buf, len), (ssize_t)len);
    close(fd);
    snprintf(link, sizeof(link), "%s/link.mlp", dir);
    assert_int_equal(symlink(path, link), 0);
    assert_int_equal(ml_profile_read(link, 0, &p, err, sizeof(err)), 0);
    ml_profile_free(p);
    assert_int_equal(ml_profile_read(link, ML_PROF_NOFOLLOW, &p, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "symbolic link"));
    unlink(link);

    /* 256 MiB after the END record are not read. */
    assert_int_equal(truncate(path, big), 0);
    reset_peak();
    assert_int_equal(ml_profile_read(path, 0, &p, err, sizeof(err)), 0);
    assert_int_equal(p->size, len);
    ml_profile_free(p);
    assert_true(peak_mib() < 64);

    /* A section claiming more than the file holds is refused before its payload is read. */
    fd = open(path, O_WRONLY);
    assert_true(fd >= 0);
    {
        struct ml_prof_section s = {.type = ML_SEC_STRTAB, .length = (uint64_t)big};
        assert_int_equal(pwrite(fd, &s, sizeof(s), sizeof(struct ml_prof_header)), sizeof(s));
    }
    close(fd);
    reset_peak();
    assert_int_equal(ml_profile_read(path, 0, &p, err, sizeof(err)), -EINVAL);
    {
        char want[96];
        snprintf(want, sizeof(want), "section 'strtab' at offset %zu claims 268435456 bytes",
                 sizeof(struct ml_prof_header));
        assert_non_null(strstr(err, want));
    }
    assert_true(peak_mib() < 64);

    /* Not a profile at all: 64 bytes read, whatever the size. */
    fd = open(path, O_WRONLY);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, "JUNK", 4, 0), 4);
    close(fd);
    reset_peak();
    assert_int_equal(ml_profile_read(path, 0, &p, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "not a memlens profile (bad magic)");
    assert_true(peak_mib() < 64);
    unlink(path);
    rmdir(dir);
    free(buf);
    free(b);
}

/* Every proper prefix of a valid profile is rejected with a reason, never a crash. */
static void test_truncation(void **state)
{
    struct mlb *b = sample();
    unsigned char *buf;
    size_t len;

    (void)state;
    buf = mlb_write(b, &len);
    for (size_t cut = 0; cut < len; cut++) {
        struct ml_profile *p = (void *)1;
        char err[256] = "";
        unsigned char *copy = malloc(cut + 1);
        memcpy(copy, buf, cut);
        /* An exact-size allocation lets ASan catch any read past the end. */
        assert_int_equal(ml_profile_parse(copy, cut, &p, err, sizeof(err)), -EINVAL);
        assert_null(p);
        assert_true(err[0] != 0);
        if (cut == len - sizeof(struct ml_prof_section))
            assert_non_null(strstr(err, "no end record: the file was cut short"));
        free(copy);
    }
    free(buf);
    free(b);
}

/* Parses buf (len bytes) expecting -EINVAL with a message containing want. */
static void expect_bad(const unsigned char *buf, size_t len, const char *want)
{
    struct ml_profile *p;
    char err[256] = "";
    int rc = ml_profile_parse(buf, len, &p, err, sizeof(err));

    if (rc != -EINVAL || !strstr(err, want))
        fail_msg("expected -EINVAL with \"%s\", got %d \"%s\"", want, rc, err);
    assert_null(p);
}

static void put32(unsigned char *buf, size_t off, uint32_t v)
{
    memcpy(buf + off, &v, 4);
}

static void put64(unsigned char *buf, size_t off, uint64_t v)
{
    memcpy(buf + off, &v, 8);
}

static void test_bad_header(void **state)
{
    struct mlb *b = sample();
    unsigned char *buf;
    size_t len;

    (void)state;
    buf = mlb_write(b, &len);
    buf[0] = 'X';
    expect_bad(buf, len, "bad magic");
    buf[0] = 'M';
    put32(buf, offsetof(struct ml_prof_header, version), 1);
    expect_bad(buf, len, "profile version 1, this memlens reads versions 2 to 3");
    put32(buf, offsetof(struct ml_prof_header, version), 4);
    expect_bad(buf, len, "profile version 4, this memlens reads versions 2 to 3");
    put32(buf, offsetof(struct ml_prof_header, version), 3);
    put32(buf, offsetof(struct ml_prof_header, header_size), 72);
    expect_bad(buf, len, "header size 72, expected 80 for version 3");
    put32(buf, offsetof(struct ml_prof_header, version), 2);
    expect_bad(buf, len, "header size 72, expected 64 for version 2");
    put32(buf, offsetof(struct ml_prof_header, version), 3);
    put32(buf, offsetof(struct ml_prof_header, header_size), 80);
    expect_bad(buf, 70, "file is 70 bytes, shorter than a profile header");
    free(buf);
    free(b);
}

/* A version 2 profile (64-byte header, no token or rank) reads the same, new fields 0. */
static void test_version2(void **state)
{
    struct mlb *b = sample();
    struct ml_profile *p, *q;
    unsigned char *buf, *old;
    size_t len;
    char err[256] = "";

    (void)state;
    b->hdr.token = 0x0123456789abcdefull;
    b->hdr.rank = 3;
    b->hdr.nranks = 4;
    b->hdr.flags = ML_PROF_F_RANK;
    buf = mlb_write(b, &len);
    assert_int_equal(ml_profile_parse(buf, len, &p, err, sizeof(err)), 0);
    assert_int_equal(p->hdr.version, 3);
    assert_int_equal(p->hdr.token, 0x0123456789abcdefull);
    assert_int_equal(p->hdr.rank, 3);
    assert_int_equal(p->hdr.nranks, 4);
    old = malloc(len);
    memcpy(old, buf, ML_PROF_HEADER_V2);
    memcpy(old + ML_PROF_HEADER_V2, buf + sizeof(struct ml_prof_header),
           len - sizeof(struct ml_prof_header));
    put32(old, offsetof(struct ml_prof_header, version), 2);
    put32(old, offsetof(struct ml_prof_header, header_size), ML_PROF_HEADER_V2);
    assert_int_equal(ml_profile_parse(old, len - 16, &q, err, sizeof(err)), 0);
    assert_int_equal(q->hdr.version, 2);
    assert_int_equal(q->hdr.token, 0);
    assert_int_equal(q->hdr.rank, 0);
    assert_int_equal(q->hdr.nranks, 0);
    assert_int_equal(q->nthreads, p->nthreads);
    assert_int_equal(q->nunits, p->nunits);
    assert_int_equal(q->threads[1].counts[0], 7);
    assert_string_equal(ml_profile_meta(q, "cmdline"), "app -n 3");
    ml_profile_free(p);
    ml_profile_free(q);
    free(old);
    free(buf);
    free(b);
}

static void test_bad_lengths(void **state)
{
    struct mlb *b = sample();
    unsigned char *buf;
    size_t len, units, sh;
    char want[128];

    (void)state;
    buf = mlb_write(b, &len);
    units = mlb_find(buf, len, ML_SEC_UNITS, 0);
    sh = units - sizeof(struct ml_prof_section);
    put64(buf, sh + 8, 1ull << 40);
    snprintf(want, sizeof(want), "section 'units' at offset %zu claims %llu bytes", sh, 1ull << 40);
    expect_bad(buf, len, want);
    put64(buf, sh + 8, 2 * sizeof(struct ml_prof_unit) - 8);
    snprintf(want, sizeof(want), "unit section at offset %zu has odd length", sh);
    expect_bad(buf, len, want);
    free(buf);

    /* A string table must end with NUL so that every string ends inside it. */
    buf = mlb_write(b, &len);
    buf[mlb_find(buf, len, ML_SEC_STRTAB, 0) + b->nstr - 1] = 'z';
    expect_bad(buf, len, "string table at offset 80 is not NUL-terminated");
    free(buf);
    free(b);
}

static void test_bad_strings(void **state)
{
    struct mlb *b = sample();
    unsigned char *buf;
    size_t len, off;

    (void)state;
    buf = mlb_write(b, &len);
    off = mlb_find(buf, len, ML_SEC_REGIONS, 0);
    put32(buf, off + 4, b->nstr);
    expect_bad(buf, len, "region 1 names string");
    put32(buf, off + 4, b->regions[1]);
    off = mlb_find(buf, len, ML_SEC_META, 0);
    put32(buf, off + 8 + 4, 0xffffffffu);
    expect_bad(buf, len, "meta entry 1 names string 4294967295 outside the string table");
    put32(buf, off + 8 + 4, b->meta[3]);
    off = mlb_find(buf, len, ML_SEC_UNITS, 0);
    put32(buf, off + sizeof(struct ml_prof_unit) + offsetof(struct ml_prof_unit, file), b->nstr);
    expect_bad(buf, len, "unit 1 names a string outside the string table");
    put32(buf, off + sizeof(struct ml_prof_unit) + offsetof(struct ml_prof_unit, file), 0);
    off = mlb_find(buf, len, ML_SEC_CALLS, 0);
    put32(buf, off + offsetof(struct ml_prof_call, callee), b->nstr + 100);
    expect_bad(buf, len, "call record 0 names a bad unit or string");
    put32(buf, off + offsetof(struct ml_prof_call, callee), 0);
    put32(buf, off + offsetof(struct ml_prof_call, unit), 2);
    expect_bad(buf, len, "call record 0 names a bad unit or string");
    free(buf);
    free(b);
}

static void test_bad_regsets(void **state)
{
    struct mlb *b = sample();
    unsigned char *buf;
    size_t len, units, sets, ro = offsetof(struct ml_prof_unit, regset);

    (void)state;
    buf = mlb_write(b, &len);
    units = mlb_find(buf, len, ML_SEC_UNITS, 0);
    sets = mlb_find(buf, len, ML_SEC_REGSETS, 0);
    /* Offset past the last word. */
    put32(buf, units + ro, b->nregset_words);
    expect_bad(buf, len, "unit 0 has a bad region set at word 5");
    put32(buf, units + ro, 0);
    /* Count running past the section. */
    put32(buf, sets + 4 * 2, 3);
    expect_bad(buf, len, "unit 1 has a bad region set at word 2");
    put32(buf, sets + 4 * 2, 2);
    /* Region id out of range. */
    put32(buf, sets + 4 * 4, 2);
    expect_bad(buf, len, "unit 1 has a bad region set at word 2");
    put32(buf, sets + 4 * 4, 1);
    /* Unknown kind and module. */
    put32(buf, units + offsetof(struct ml_prof_unit, kind), 9);
    expect_bad(buf, len, "unit 0 has unknown kind 9");
    put32(buf, units + offsetof(struct ml_prof_unit, kind), ML_UNIT_BLOCK);
    put32(buf, units + offsetof(struct ml_prof_unit, module), 1);
    expect_bad(buf, len, "unit 0 names module 1 of 1");
    put32(buf, units + offsetof(struct ml_prof_unit, module), 0);
    put32(buf, mlb_find(buf, len, ML_SEC_MODULES, 0) + 8, 3);
    expect_bad(buf, len, "module 0 has a bad name or unit range");
    free(buf);
    free(b);
}

static void test_bad_threads(void **state)
{
    struct mlb *b = sample();
    unsigned char *buf;
    size_t len, t1, sh;
    char want[160];

    (void)state;
    buf = mlb_write(b, &len);
    t1 = mlb_find(buf, len, ML_SEC_THREAD, 1);
    sh = t1 - sizeof(struct ml_prof_section);
    put64(buf, t1 + offsetof(struct ml_prof_thread, nunits), 3);
    snprintf(want, sizeof(want),
             "thread record at offset %zu has 3 counters and 2 regions, expected 2 and 2", sh);
    expect_bad(buf, len, want);
    put64(buf, t1 + offsetof(struct ml_prof_thread, nunits), 2);
    put64(buf, t1 + offsetof(struct ml_prof_thread, nregions), 1);
    snprintf(want, sizeof(want), "thread record at offset %zu has 2 counters and 1 regions", sh);
    expect_bad(buf, len, want);
    put64(buf, t1 + offsetof(struct ml_prof_thread, nregions), 2);
    /* Record counts right, section length wrong (eats the END record's header). */
    put64(buf, sh + 8, len - t1);
    snprintf(want, sizeof(want), "thread record at offset %zu has length %zu, expected %zu", sh,
             len - t1, sizeof(struct ml_prof_thread) + 2 * 8 + 2 * sizeof(struct ml_prof_rstat));
    expect_bad(buf, len, want);
    free(buf);

    /* A section too short for the thread record itself. */
    buf = mlb_write(b, &len);
    t1 = mlb_find(buf, len, ML_SEC_THREAD, 0);
    sh = t1 - sizeof(struct ml_prof_section);
    put64(buf, sh + 8, 16);
    snprintf(want, sizeof(want), "thread record at offset %zu is too short", sh);
    expect_bad(buf, len, want);
    free(buf);
    free(b);
}

/* Builds header + the given sections (type, payload, length triples; type -1 ends). */
static unsigned char *raw(size_t *len, ...)
{
    struct mlb *b = mlb_new(1);
    FILE *f = tmpfile();
    unsigned char wbuf[64], *out;
    struct ml_pw w;
    va_list ap;
    int type;

    ml_pw_init(&w, fileno(f), wbuf, sizeof(wbuf));
    ml_pw_bytes(&w, &b->hdr, sizeof(b->hdr));
    va_start(ap, len);
    while ((type = va_arg(ap, int)) >= 0) {
        const void *p = va_arg(ap, const void *);
        size_t n = va_arg(ap, size_t);
        mlb_sec(&w, (uint32_t)type, p, n);
    }
    va_end(ap);
    assert_int_equal(ml_pw_finish(&w), 0);
    *len = (size_t)ftell(f);
    out = malloc(*len);
    rewind(f);
    assert_int_equal(fread(out, 1, *len, f), *len);
    fclose(f);
    free(b);
    return out;
}

static void test_section_order(void **state)
{
    static const char strs[] = "\0r";
    static const uint32_t regions[] = {1};
    struct ml_prof_thread th = {.tid = 1, .nunits = 0, .nregions = 0};
    unsigned char *buf;
    size_t len;

    (void)state;
    buf = raw(&len, ML_SEC_STRTAB, strs, sizeof(strs), ML_SEC_STRTAB, strs, sizeof(strs),
              ML_SEC_END, NULL, (size_t)0, -1);
    expect_bad(buf, len, "section 'strtab' at offset 99 appears twice");
    free(buf);
    /* A thread sized before REGIONS arrives would index past its rstats. */
    buf = raw(&len, ML_SEC_STRTAB, strs, sizeof(strs), ML_SEC_THREAD, &th, sizeof(th),
              ML_SEC_REGIONS, regions, sizeof(regions), ML_SEC_END, NULL, (size_t)0, -1);
    expect_bad(buf, len, "section 'regions' at offset 139 comes after a thread record");
    free(buf);
    buf = raw(&len, ML_SEC_END, NULL, (size_t)0, -1);
    expect_bad(buf, len, "no string table");
    free(buf);
    /* Unknown sections are skipped (version rule), bytes after END are ignored. */
    {
        struct ml_profile *p;
        char err[256];
        static const char junk[5] = "abcd";
        buf =
            raw(&len, 99, junk, sizeof(junk), ML_SEC_STRTAB, strs, sizeof(strs), ML_SEC_REGIONS,
                regions, sizeof(regions), ML_SEC_END, NULL, (size_t)0, 77, junk, sizeof(junk), -1);
        assert_int_equal(ml_profile_parse(buf, len, &p, err, sizeof(err)), 0);
        assert_int_equal(p->nregions, 1);
        assert_string_equal(ml_profile_str(p, p->regions[0]), "r");
        ml_profile_free(p);
        free(buf);
    }
}

/* EVENTS and CALIB (version 2): parsed, linked to threads by index, and validated. */
static void test_events_calib(void **state)
{
    static const char strs[] = "\0r";
    static const uint32_t regions[] = {1};
    struct {
        struct ml_prof_thread t;
        struct ml_prof_rstat rs;
    } th = {{.tid = 7, .index = 0, .nunits = 0, .nregions = 1}, {10, 500, 4}};
    struct {
        struct ml_prof_events h;
        char names[2][ML_EVENT_NAME];
        struct ml_prof_evthread et;
        uint64_t sums[2];
    } ev = {{2, 1, 1}, {"task-clock", "page-faults"}, {0, 7}, {123, 45}};
    struct ml_prof_calib cal = {717, 25394};
    struct ml_profile *p;
    unsigned char *buf;
    char err[256];
    size_t len;

    (void)state;
    buf = raw(&len, ML_SEC_STRTAB, strs, sizeof(strs), ML_SEC_REGIONS, regions, sizeof(regions),
              ML_SEC_THREAD, &th, sizeof(th), ML_SEC_EVENTS, &ev, sizeof(ev), ML_SEC_CALIB, &cal,
              sizeof(cal), ML_SEC_END, NULL, (size_t)0, -1);
    assert_int_equal(ml_profile_parse(buf, len, &p, err, sizeof(err)), 0);
    assert_int_equal(p->threads[0].rstats[0].measured, 4);
    assert_int_equal(p->nevents, 2);
    assert_string_equal(p->event_names[1], "page-faults");
    assert_non_null(p->threads[0].events);
    assert_int_equal(p->threads[0].events[0], 123);
    assert_int_equal(p->threads[0].events[1], 45);
    assert_non_null(p->calib);
    assert_int_equal(p->calib->incr_mticks, 717);
    assert_int_equal(p->calib->timer_mticks, 25394);
    ml_profile_free(p);
    free(buf);

    th.rs.measured = 11;
    buf = raw(&len, ML_SEC_STRTAB, strs, sizeof(strs), ML_SEC_REGIONS, regions, sizeof(regions),
              ML_SEC_THREAD, &th, sizeof(th), ML_SEC_END, NULL, (size_t)0, -1);
    expect_bad(buf, len, "region 0 has 11 measured of 10 executions");
    free(buf);
    th.rs.measured = 4;

    ev.et.index = 3;
    buf = raw(&len, ML_SEC_STRTAB, strs, sizeof(strs), ML_SEC_REGIONS, regions, sizeof(regions),
              ML_SEC_THREAD, &th, sizeof(th), ML_SEC_EVENTS, &ev, sizeof(ev), ML_SEC_END, NULL,
              (size_t)0, -1);
    expect_bad(buf, len, "event sums 0 name thread index 3, which has no record");
    free(buf);
    ev.et.index = 0;

    ev.h.nregions = 2;
    buf = raw(&len, ML_SEC_STRTAB, strs, sizeof(strs), ML_SEC_REGIONS, regions, sizeof(regions),
              ML_SEC_EVENTS, &ev, sizeof(ev), ML_SEC_END, NULL, (size_t)0, -1);
    expect_bad(buf, len, "has 2 regions, expected 1");
    free(buf);
    ev.h.nregions = 1;

    buf = raw(&len, ML_SEC_STRTAB, strs, sizeof(strs), ML_SEC_REGIONS, regions, sizeof(regions),
              ML_SEC_EVENTS, &ev, sizeof(ev) - 8, ML_SEC_END, NULL, (size_t)0, -1);
    expect_bad(buf, len, "expected");
    free(buf);

    memset(ev.names[0], 'x', ML_EVENT_NAME);
    buf = raw(&len, ML_SEC_STRTAB, strs, sizeof(strs), ML_SEC_REGIONS, regions, sizeof(regions),
              ML_SEC_EVENTS, &ev, sizeof(ev), ML_SEC_END, NULL, (size_t)0, -1);
    expect_bad(buf, len, "event name 0 at offset");
    free(buf);

    buf = raw(&len, ML_SEC_STRTAB, strs, sizeof(strs), ML_SEC_CALIB, &cal, sizeof(cal) - 1,
              ML_SEC_END, NULL, (size_t)0, -1);
    expect_bad(buf, len, "calib section at offset");
    free(buf);
    buf = raw(&len, ML_SEC_STRTAB, strs, sizeof(strs), ML_SEC_CALIB, &cal, sizeof(cal),
              ML_SEC_CALIB, &cal, sizeof(cal), ML_SEC_END, NULL, (size_t)0, -1);
    expect_bad(buf, len, "section 'calib' at offset");
    free(buf);
}

/* ENTRIES (section 13) names existing block units in ascending order, once. */
static void test_entries(void **state)
{
    static const char strs[] = "\0f";
    static const uint32_t regsets[] = {0};
    struct ml_prof_unit units[3] = {{.kind = ML_UNIT_BLOCK, .func = 1},
                                    {.kind = ML_UNIT_BYTES, .func = 1},
                                    {.kind = ML_UNIT_BLOCK, .func = 1}};
    static const uint32_t good[] = {0, 2}, bytes[] = {1}, range[] = {3}, order[] = {2, 0};
    struct ml_profile *p;
    unsigned char *buf;
    size_t len;
    char err[256];

    (void)state;
#define ENTRIES(e, n)                                                                              \
    raw(&len, ML_SEC_STRTAB, strs, sizeof(strs), ML_SEC_REGSETS, regsets, sizeof(regsets),         \
        ML_SEC_UNITS, units, sizeof(units), ML_SEC_ENTRIES, e, (size_t)(n), ML_SEC_END, NULL,      \
        (size_t)0, -1)
    buf = ENTRIES(good, sizeof(good));
    assert_int_equal(ml_profile_parse(buf, len, &p, err, sizeof(err)), 0);
    assert_int_equal(p->nentries, 2);
    assert_int_equal(p->entries[1], 2);
    ml_profile_free(p);
    free(buf);
    buf = ENTRIES(bytes, sizeof(bytes));
    expect_bad(buf, len, "entry 0 names unit 1, which is not a block unit");
    free(buf);
    buf = ENTRIES(range, sizeof(range));
    expect_bad(buf, len, "entry 0 names unit 3, which is not a block unit");
    free(buf);
    buf = ENTRIES(order, sizeof(order));
    expect_bad(buf, len, "entry 1 (unit 0) is not above the previous one");
    free(buf);
    buf = ENTRIES(good, 6);
    expect_bad(buf, len, "has odd length 6");
    free(buf);
#undef ENTRIES
    buf = raw(&len, ML_SEC_STRTAB, strs, sizeof(strs), ML_SEC_ENTRIES, good, (size_t)0,
              ML_SEC_ENTRIES, good, (size_t)0, ML_SEC_END, NULL, (size_t)0, -1);
    expect_bad(buf, len, "section 'entries' at offset 115 appears twice");
    free(buf);
}

/* The exited-threads record: named by EXITED, which must name a THREAD record and sum threads. */
/* INLINED: pairs (share, host); a share must be a bytes unit, both must exist. */
static void test_inlined(void **state)
{
    static const char strs[] = "\0f";
    static const uint32_t regsets[] = {0};
    struct ml_prof_unit units[3] = {{.kind = ML_UNIT_BLOCK, .func = 1},
                                    {.kind = ML_UNIT_BYTES, .func = 1},
                                    {.kind = ML_UNIT_BLOCK, .func = 1}};
    static const struct ml_prof_inlined good[] = {{1, 0}, {1, 2}}, block[] = {{2, 0}},
                                        range[] = {{1, 3}};
    struct ml_profile *p;
    unsigned char *buf;
    size_t len;
    char err[256];

    (void)state;
#define INLINED(e, n)                                                                              \
    raw(&len, ML_SEC_STRTAB, strs, sizeof(strs), ML_SEC_REGSETS, regsets, sizeof(regsets),         \
        ML_SEC_UNITS, units, sizeof(units), ML_SEC_INLINED, e, (size_t)(n), ML_SEC_END, NULL,      \
        (size_t)0, -1)
    buf = INLINED(good, sizeof(good));
    assert_int_equal(ml_profile_parse(buf, len, &p, err, sizeof(err)), 0);
    assert_int_equal(p->ninl, 2);
    assert_int_equal(p->inl[1].unit, 1);
    assert_int_equal(p->inl[1].host, 2);
    ml_profile_free(p);
    free(buf);
    buf = INLINED(block, sizeof(block));
    expect_bad(buf, len, "inlined record 0 names a bad unit");
    free(buf);
    buf = INLINED(range, sizeof(range));
    expect_bad(buf, len, "inlined record 0 names a bad unit");
    free(buf);
    buf = INLINED(good, 12);
    expect_bad(buf, len, "inlined section at offset");
    free(buf);
    buf = raw(&len, ML_SEC_STRTAB, strs, sizeof(strs), ML_SEC_INLINED, good, (size_t)0,
              ML_SEC_INLINED, good, (size_t)0, ML_SEC_END, NULL, (size_t)0, -1);
    expect_bad(buf, len, "section 'inlined' at offset 115 appears twice");
    free(buf);
#undef INLINED
}

static void test_exited(void **state)
{
    struct mlb *b = sample();
    struct ml_profile *p;
    unsigned char *buf;
    size_t len, off;
    char err[256] = "";

    (void)state;
    b->threads[1].t.tid = 0;
    b->exited = (struct ml_prof_exited){.index = 1, .nthreads = 40};
    buf = mlb_write(b, &len);
    assert_int_equal(ml_profile_parse(buf, len, &p, err, sizeof(err)), 0);
    assert_non_null(p->exited);
    assert_int_equal(p->threads[0].exited, 0);
    assert_int_equal(p->threads[1].exited, 40);
    ml_profile_free(p);
    off = mlb_find(buf, len, ML_SEC_EXITED, 0);
    put32(buf, off, 9);
    expect_bad(buf, len, "exited section names thread index 9, which has no record");
    put32(buf, off, 1);
    put64(buf, off + 8, 0);
    expect_bad(buf, len, "exited section names thread index 1, which has no record");
    put64(buf, off - 8, 8);
    expect_bad(buf, len, "has length 8, expected 16");
    free(buf);
    free(b);
}

/* EXACT records: after their own THREAD record, once per thread, one class vector per unit. */
static void test_exact(void **state)
{
    struct mlb *b = sample();
    struct ml_profile *p;
    unsigned char *buf;
    size_t len, off;
    char err[256] = "";

    (void)state;
    b->threads[1].has_exact = 1;
    b->threads[1].exact[0][ML_C_RD_STACK] = 56;
    b->threads[1].exact[1][ML_C_WR_GLOBAL] = 7;
    buf = mlb_write(b, &len);
    assert_int_equal(ml_profile_parse(buf, len, &p, err, sizeof(err)), 0);
    assert_true(p->exact);
    assert_null(p->threads[0].exact);
    assert_int_equal(p->threads[1].exact[ML_C_RD_STACK], 56);
    assert_int_equal(p->threads[1].exact[ML_NCLASS + ML_C_WR_GLOBAL], 7);
    ml_profile_free(p);
    off = mlb_find(buf, len, ML_SEC_EXACT, 0);
    put32(buf, off + 4, 0); /* thread index 0: not the record just before */
    expect_bad(buf, len, "names thread index 0, not the thread record just before it");
    put32(buf, off + 4, 1);
    put64(buf, off + 8, 3);
    expect_bad(buf, len, "has 3 units in 120 bytes, expected 2 units");
    put64(buf, off + 8, 2);
    put64(buf, off - 8, 16);
    expect_bad(buf, len, "is too short");
    free(buf);
    free(b);
}

/* sample() with a timeline of three snapshots over its two threads and regions. */
static struct mlb *sample_tl(void)
{
    struct mlb *b = sample();

    mlb_tl_snap(b, 1000);
    mlb_tl_point(b, 0, 0, 1, 500, 4096, 0, 45);
    mlb_tl_snap(b, 2000);
    mlb_tl_point(b, 0, 0, 1, 777, 4096, 0, 45);
    mlb_tl_point(b, 1, 1, 2, 60, 0, 0, 63);
    mlb_tl_snap(b, 2000); /* equal ticks are allowed: the final snapshot may follow closely */
    mlb_tl_point(b, 0, 0, 1, 777, 4096, 0, 45);
    mlb_tl_point(b, 1, 0, 0, 0, 0, 0, 1);
    mlb_tl_point(b, 1, 1, 3, 99, 0, 0, 63);
    return b;
}

static void test_timeline(void **state)
{
    struct mlb *b = sample_tl();
    struct ml_profile *p;
    unsigned char *buf;
    size_t len;
    char err[256] = "";

    (void)state;
    buf = mlb_write(b, &len);
    assert_int_equal(ml_profile_parse(buf, len, &p, err, sizeof(err)), 0);
    assert_non_null(p->timeline);
    assert_int_equal(p->timeline->interval_ns, 100000000);
    assert_int_equal(p->timeline->nsnaps, 3);
    assert_int_equal(p->snaps[0].tick, 1000);
    assert_int_equal(p->snaps[0].npoints, 1);
    assert_int_equal(p->snaps[0].points[0].ticks, 500);
    assert_int_equal(p->snaps[2].npoints, 3);
    assert_int_equal(p->snaps[2].points[2].thread, 1);
    assert_int_equal(p->snaps[2].points[2].region, 1);
    assert_int_equal(p->snaps[2].points[2].entries, 3);
    assert_int_equal(ml_profile_thread_pos(p, 1), 1);
    assert_int_equal(ml_profile_thread_pos(p, 7), -1);
    ml_profile_free(p);

    /* Every proper prefix is rejected. */
    for (size_t cut = 0; cut < len; cut++) {
        unsigned char *copy = malloc(cut + 1);
        memcpy(copy, buf, cut);
        assert_int_equal(ml_profile_parse(copy, cut, &p, err, sizeof(err)), -EINVAL);
        free(copy);
    }
    free(buf);
    free(b);
}

static void test_bad_timeline(void **state)
{
    struct mlb *b = sample_tl();
    unsigned char *buf;
    size_t len, tl, sh, s1;
    char want[160];
    const size_t hs = sizeof(struct ml_prof_timeline), ss = sizeof(struct ml_prof_tl_snap),
                 ps = sizeof(struct ml_prof_tl_point);

    (void)state;
    buf = mlb_write(b, &len);
    tl = mlb_find(buf, len, ML_SEC_TIMELINE, 0);
    sh = tl - sizeof(struct ml_prof_section);
    s1 = tl + hs + ss + ps; /* second snapshot */

    put64(buf, tl + offsetof(struct ml_prof_timeline, nsnaps), 1000);
    snprintf(want, sizeof(want), "timeline at offset %zu claims 1000 snapshots", sh);
    expect_bad(buf, len, want);
    put64(buf, tl + offsetof(struct ml_prof_timeline, nsnaps), 2);
    snprintf(want, sizeof(want), "timeline at offset %zu has %zu bytes after its last snapshot", sh,
             ss + 3 * ps);
    expect_bad(buf, len, want);
    put64(buf, tl + offsetof(struct ml_prof_timeline, nsnaps), 4);
    snprintf(want, sizeof(want), "timeline at offset %zu: snapshot 3 is cut short", sh);
    expect_bad(buf, len, want);
    put64(buf, tl + offsetof(struct ml_prof_timeline, nsnaps), 3);

    put64(buf, s1 + 8, 50);
    snprintf(want, sizeof(want), "timeline at offset %zu: snapshot 1 claims 50 points", sh);
    expect_bad(buf, len, want);
    put64(buf, s1 + 8, 2);

    put64(buf, s1, 999);
    snprintf(want, sizeof(want), "timeline at offset %zu: snapshot 1 goes back in time", sh);
    expect_bad(buf, len, want);
    put64(buf, s1, 2000);

    /* Second point of snapshot 1 made equal to its first: a duplicate. */
    put32(buf, s1 + ss + ps, 0);
    put32(buf, s1 + ss + ps + 4, 0);
    snprintf(want, sizeof(want), "timeline at offset %zu: snapshot 1 point 1 is out of order", sh);
    expect_bad(buf, len, want);
    put32(buf, s1 + ss + ps, 7);
    put32(buf, s1 + ss + ps + 4, 1);
    expect_bad(buf, len, "timeline snapshot 1 point 1 names thread 7 and region 1");
    put32(buf, s1 + ss + ps, 1);
    put32(buf, s1 + ss + ps + 4, 2);
    expect_bad(buf, len, "timeline snapshot 1 point 1 names thread 1 and region 2");
    put32(buf, s1 + ss + ps + 4, 1);

    put64(buf, sh + 8, hs - 8);
    /* The section now ends inside the header; what follows is not a section. */
    expect_bad(buf, len, "timeline at offset");
    free(buf);

    /* Two timelines: the second would silently replace the first. */
    {
        size_t n2 = len + sizeof(struct ml_prof_section) + hs + b->ntl;
        unsigned char *two = malloc(n2);
        size_t end = len - sizeof(struct ml_prof_section);
        buf = mlb_write(b, &len);
        memcpy(two, buf, end);
        memcpy(two + end, buf + sh, sizeof(struct ml_prof_section) + hs + b->ntl);
        memcpy(two + end + sizeof(struct ml_prof_section) + hs + b->ntl, buf + end,
               sizeof(struct ml_prof_section));
        snprintf(want, sizeof(want), "section 'timeline' at offset %zu appears twice", end);
        expect_bad(two, n2, want);
        free(two);
        free(buf);
    }
    free(b);
}

/* Halving keeps snapshots 0, 2, 4, ... and the last, whatever their sizes. */
static void test_timeline_halve(void **state)
{
    for (int n = 1; n <= 6; n++) {
        struct mlb *b = calloc(1, sizeof(*b));
        uint64_t nsnaps;
        size_t len, pos = 0;
        int want[6], nwant = 0;

        (void)state;
        for (int i = 0; i < n; i++) {
            mlb_tl_snap(b, 100 * (uint64_t)i);
            for (int k = 0; k < i % 3; k++)
                mlb_tl_point(b, (uint32_t)k, (uint32_t)i, 0, 0, 0, 0, 0);
            if (i % 2 == 0 || i == n - 1)
                want[nwant++] = i;
        }
        nsnaps = b->tl.nsnaps;
        len = ml_tl_halve(b->tlbuf, b->ntl, &nsnaps);
        assert_int_equal(nsnaps, nwant);
        for (int j = 0; j < nwant; j++) {
            struct ml_prof_tl_snap sn;
            memcpy(&sn, b->tlbuf + pos, sizeof(sn));
            assert_int_equal(sn.tick, 100 * want[j]);
            assert_int_equal(sn.npoints, want[j] % 3);
            for (uint64_t k = 0; k < sn.npoints; k++) {
                struct ml_prof_tl_point pt;
                memcpy(&pt, b->tlbuf + pos + sizeof(sn) + k * sizeof(pt), sizeof(pt));
                assert_int_equal(pt.region, want[j]);
            }
            pos += sizeof(sn) + sn.npoints * sizeof(struct ml_prof_tl_point);
        }
        assert_int_equal(pos, len);
        free(b);
    }
}

/* The writer reports a write error (here EBADF) instead of losing data silently. */
static void test_writer_error(void **state)
{
    unsigned char wbuf[8];
    struct ml_pw w;

    (void)state;
    ml_pw_init(&w, -1, wbuf, sizeof(wbuf));
    ml_pw_bytes(&w, "0123456789abcdef", 16);
    assert_int_equal(ml_pw_finish(&w), -EBADF);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),     cmocka_unit_test(test_read_file),
        cmocka_unit_test(test_read_hostile),   cmocka_unit_test(test_truncation),
        cmocka_unit_test(test_bad_header),     cmocka_unit_test(test_version2),
        cmocka_unit_test(test_bad_lengths),    cmocka_unit_test(test_bad_strings),
        cmocka_unit_test(test_bad_regsets),    cmocka_unit_test(test_bad_threads),
        cmocka_unit_test(test_section_order),  cmocka_unit_test(test_writer_error),
        cmocka_unit_test(test_events_calib),   cmocka_unit_test(test_entries),
        cmocka_unit_test(test_timeline),       cmocka_unit_test(test_bad_timeline),
        cmocka_unit_test(test_timeline_halve), cmocka_unit_test(test_exited),
        cmocka_unit_test(test_exact),          cmocka_unit_test(test_inlined),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
