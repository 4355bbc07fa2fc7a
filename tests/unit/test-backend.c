/*
 * Unit tests of the backend (src/backend/backend.c, out.c): a fake producer
 * writes chunks into the queue exactly as the runtime does, and the workers
 * must deliver every event once to the worker that owns it.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "backend/backend.h"
#include "format/queue.h"

/* ---- a test module: per worker, what it received, by kind ---- */

#define KINDS 8

struct seen {
    uint32_t worker, nworkers;
    uint64_t n[KINDS], sum[KINDS];
    uint64_t wrong; /* events handed to a worker that does not own them */
    uint64_t chunk_records;
};

static void *t_init(struct ml_bworker *w)
{
    struct seen *s = calloc(1, sizeof(*s));

    if (s) {
        s->worker = w->index;
        s->nworkers = w->n;
    }
    return s;
}

static void t_event(void *st, struct ml_bworker *w, uint32_t thread, const uint64_t *rec)
{
    struct seen *s = st;
    unsigned kind = ML_Q_KIND(rec[0]);

    (void)thread;
    if (kind >= KINDS)
        kind = 0;
    if ((kind == 1 && ml_bpart_addr(rec[1], w->n) != w->index) ||
        (kind == 2 && ml_bpart_id(ML_Q_ID(rec[0]), w->n) != w->index) ||
        (kind == 3 && w->index != 0))
        s->wrong++;
    s->n[kind]++;
    s->sum[kind] += rec[1];
}

static int t_merge(void *into, void *from)
{
    struct seen *a = into, *b = from;

    for (int k = 0; k < KINDS; k++) {
        a->n[k] += b->n[k];
        a->sum[k] += b->sum[k];
    }
    a->wrong += b->wrong;
    a->chunk_records += b->chunk_records;
    free(b);
    return 0;
}

static int t_report(void *st, struct ml_bout *o)
{
    (void)st;
    fprintf(o->csv, "x\n");
    return 0;
}

static const struct ml_bhandler t_handlers[] = {
    {1, ML_BPART_ADDR, t_event},
    {2, ML_BPART_ID, t_event},
    {3, ML_BPART_ONE, t_event},
    {4, ML_BPART_ALL, t_event},
    {ML_BKIND_ANY, ML_BPART_ADDR, t_event},
    {0},
};

static const struct ml_module t_mod = {
    .name = "t", .handlers = t_handlers, .init = t_init, .merge = t_merge, .report = t_report};

/* ---- a fake producer ---- */

struct fake {
    struct ml_backend *b;
    struct ml_q_header *h;
    uint64_t size;
};

static void fake_attach_mods(struct fake *f, uint32_t workers, uint32_t slots,
                             const struct ml_module **mods, uint32_t nmods)
{
    struct ml_backend_opts o = {
        .mods = mods, .nmods = nmods, .workers = workers, .max_threads = slots, .force_workers = 1};
    char err[256];
    struct stat st;

    assert_int_equal(ml_backend_new(&f->b, &o, err, sizeof(err)), 0);
    assert_int_equal(fstat(ml_backend_fd(f->b), &st), 0);
    f->size = (uint64_t)st.st_size;
    f->h = mmap(NULL, f->size, PROT_READ | PROT_WRITE, MAP_SHARED, ml_backend_fd(f->b), 0);
    assert_true(f->h != MAP_FAILED);
    assert_int_equal(f->h->magic, ML_Q_MAGIC);
    {
        int deal = 1; /* chunks are dealt out when every module is chunk_any */
        for (uint32_t i = 0; i < nmods; i++)
            deal &= mods[i]->chunk && mods[i]->chunk_any;
        assert_int_equal(f->h->consumers, deal ? 1 : workers);
    }
    /* what the runtime does when it attaches */
    f->h->attached_pid = getpid();
    f->h->prog_base = (uint64_t)(uintptr_t)f->h;
    assert_int_equal(ml_backend_attached(f->b), getpid());
    assert_int_equal(ml_backend_start(f->b), 0);
}

static void fake_attach(struct fake *f, uint32_t workers, uint32_t slots)
{
    const struct ml_module *mods[] = {&t_mod};

    fake_attach_mods(f, workers, slots, mods, 1);
}

static struct ml_q_slot *fake_slot(struct fake *f, uint32_t s)
{
    struct ml_q_slot *sl = ml_q_slot(f->h, s);

    sl->state = ML_Q_SLOT_LIVE;
    sl->thread = f->h->threads++;
    if (f->h->nslots < s + 1)
        f->h->nslots = s + 1;
    return sl;
}

/* Fills the slot's next chunk with recs (len bytes) and, unless partial, publishes it. */
static void fake_chunk(struct fake *f, uint32_t s, const void *recs, uint32_t len, uint32_t flags,
                       int partial)
{
    struct ml_q_slot *sl = ml_q_slot(f->h, s);
    uint32_t k = (uint32_t)(sl->seq & 1);
    struct ml_q_chunk *ch = &sl->chunk[k];
    uint8_t *d = ml_q_chunk_data(f->h, s, k);
    struct timespec nap = {0, 1000000};

    for (int i = 0; atomic_load(&ch->state) != ML_Q_FREE; i++) { /* the producer waits */
        assert_true(i < 10000);
        nanosleep(&nap, NULL);
    }
    memcpy(d, recs, len);
    ch->seq = sl->seq;
    ch->thread = sl->thread;
    ch->flags = 0;
    atomic_store(&ch->state, ML_Q_FILLING);
    sl->fill = k;
    sl->cur.pos = d + len;
    if (partial)
        return;
    ch->len = len;
    ch->flags = flags;
    ch->readers = f->h->consumers;
    atomic_store(&ch->state, ML_Q_FULL);
    sl->seq++;
    atomic_fetch_add(&f->h->pub, 1);
}

static void fake_end(struct fake *f, struct ml_brun *run, struct seen **merged)
{
    int err;

    memset(run, 0, sizeof(*run));
    ml_backend_stop(f->b, run);
    *merged = ml_backend_merged(f->b, 0, &err);
    assert_int_equal(err, 0);
    assert_non_null(*merged);
}

static uint64_t rng = 0x2545f4914f6cdd1dull;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/*
 * Two producer threads, many chunks each (more than the two per slot, so the
 * workers must free them), events of every partition kind, a two-unit kind:
 * every event is delivered once, to its owner (ALL: to every worker).
 */
static void check_delivery(uint32_t workers)
{
    enum { PER = 4000, CHUNKS = 9 };
    uint64_t *buf = malloc(PER * 32), want_n[KINDS] = {0}, want_sum[KINDS] = {0};
    struct fake f;
    struct ml_brun run;
    struct seen *m;

    fake_attach(&f, workers, 4);
    fake_slot(&f, 0);
    fake_slot(&f, 2); /* slots need not be contiguous */
    for (int c = 0; c < CHUNKS; c++)
        for (uint32_t s = 0; s <= 2; s += 2) {
            uint32_t len = 0;
            for (int i = 0; i < PER; i++) {
                unsigned kind = 1 + (unsigned)(next() % 6); /* 5, 6: the ANY handler */
                uint64_t addr = next() & 0x7fffffffffffull, *r = buf + len / 8;
                unsigned extra = kind == 6;
                r[0] = ML_Q_W0(kind, extra, 0, next() & 0xffffff);
                r[1] = addr;
                if (extra)
                    r[2] = r[3] = ~0ull;
                len += 16 * (1 + extra);
                want_n[kind] += kind == 4 ? workers : 1;
                want_sum[kind] += kind == 4 ? addr * workers : addr;
            }
            fake_chunk(&f, s, buf, len, 0, 0);
        }
    fake_end(&f, &run, &m);
    for (int k = 1; k <= 6; k++) {
        assert_int_equal(m->n[k], want_n[k]);
        assert_int_equal(m->sum[k], want_sum[k]);
    }
    assert_int_equal(m->wrong, 0);
    assert_int_equal(run.events, 2ull * CHUNKS * PER);
    assert_int_equal(run.chunks, 2 * CHUNKS);
    assert_int_equal(run.corrupt_chunks, 0);
    assert_int_equal(run.threads, 2);
    ml_backend_free(f.b);
    munmap(f.h, f.size);
    free(buf);
}

static void test_delivery_1(void **state)
{
    (void)state;
    check_delivery(1);
}

static void test_delivery_3(void **state)
{
    (void)state;
    check_delivery(3);
}

/*
 * After the program died: the partly filled chunk is read up to the cursor;
 * a slot whose thread ended is freed for reuse once its last chunk is read.
 */
static void test_tail_and_reuse(void **state)
{
    uint64_t recs[6] = {ML_Q_W0(1, 0, 0, 1), 100, ML_Q_W0(1, 0, 0, 2), 200,
                        ML_Q_W0(1, 0, 0, 3), 300};
    struct fake f;
    struct ml_brun run;
    struct seen *m;
    struct ml_q_slot *sl;

    (void)state;
    fake_attach(&f, 2, 2);
    sl = fake_slot(&f, 0);
    fake_chunk(&f, 0, recs, 16, ML_Q_CHUNK_LAST, 0); /* thread 0 ends */
    for (int i = 0; atomic_load(&sl->state) != ML_Q_SLOT_FREE; i++) {
        struct timespec nap = {0, 1000000};
        assert_true(i < 10000);
        nanosleep(&nap, NULL);
    }
    fake_slot(&f, 0); /* thread 1 takes the slot, sequence numbers go on */
    fake_chunk(&f, 0, recs + 2, 16, 0, 0);
    fake_chunk(&f, 0, recs + 4, 16, 0, 1); /* not published: the program dies */
    fake_end(&f, &run, &m);
    assert_int_equal(m->n[1], 3);
    assert_int_equal(m->sum[1], 600);
    assert_int_equal(run.events, 3);
    assert_int_equal(run.threads, 2);
    ml_backend_free(f.b);
    munmap(f.h, f.size);
}

/* Malformed chunks are counted and skipped, never read out of bounds; blobs are joined. */
static void test_corrupt_and_blobs(void **state)
{
    uint64_t good[2] = {ML_Q_W0(2, 0, 0, 5), 7};
    uint64_t zero[4] = {0, 0, 0, 0};
    uint64_t trunc[2] = {ML_Q_W0(2, 3, 0, 5), 7}; /* says 4 units, has 1 */
    uint64_t blob[2 + 4 + 2 + 2];
    struct fake f;
    struct ml_brun run;
    struct seen *m;
    const struct ml_bblob *bl;

    (void)state;
    fake_attach(&f, 1, 1);
    fake_slot(&f, 0);
    fake_chunk(&f, 0, good, 16, 0, 0);
    fake_chunk(&f, 0, zero, 32, 0, 0);
    fake_chunk(&f, 0, trunc, 16, 0, 0);
    /* a blob of 40 bytes in two fragments (24 + 16), the second in the next chunk */
    blob[0] = ML_Q_W0(ML_Q_KIND_BLOB, 0, 0, 24);
    blob[1] = 9;
    memcpy(blob + 2, "0123456789abcdefghijklmn", 24);
    blob[5] = 0;
    fake_chunk(&f, 0, blob, 16 + 32, ML_Q_CHUNK_BLOB, 0);
    blob[0] = ML_Q_W0(ML_Q_KIND_BLOB, 0, ML_Q_BLOB_LAST, 16);
    memcpy(blob + 2, "opqrstuvwxyzABCD", 16);
    fake_chunk(&f, 0, blob, 32, ML_Q_CHUNK_BLOB, 0);
    fake_chunk(&f, 0, good, 16, 0, 0);
    /* a chunk whose length is not a multiple of a unit */
    fake_chunk(&f, 0, good, 8, 0, 0);
    fake_end(&f, &run, &m);
    assert_int_equal(m->n[2], 2);
    assert_int_equal(run.corrupt_chunks, 3);
    bl = ml_backend_blobs(f.b);
    assert_non_null(bl);
    assert_int_equal(bl->tag, 9);
    assert_int_equal(bl->len, 40);
    assert_memory_equal(bl->data, "0123456789abcdefghijklmnopqrstuvwxyzABCD", 40);
    assert_null(bl->next);
    ml_backend_free(f.b);
    munmap(f.h, f.size);
}

/* Each worker keeps one context stack per program thread, on the worker's own interner. */
static void test_stacks(void **state)
{
    struct ml_bworker w = {.index = 0, .n = 1, .ctx = ml_ctx_new()};
    struct ml_cstack *a, *b;

    (void)state;
    a = ml_bw_stack(&w, 0);
    b = ml_bw_stack(&w, 70); /* thread numbers need not be dense */
    assert_non_null(a);
    assert_non_null(b);
    assert_ptr_not_equal(a, b);
    assert_ptr_equal(ml_bw_stack(&w, 0), a);
    assert_ptr_equal(a->c, w.ctx);
    ml_cstack_push(a, ML_CTX_FUNC, 1);
    ml_cstack_push(b, ML_CTX_FUNC, 1);
    assert_int_equal(ml_cstack_ctx(a), ml_cstack_ctx(b)); /* same chain, same id */
    assert_null(ml_bw_stack(&w, 1u << 30));
    for (uint32_t t = 0; t < w.nstacks; t++)
        ml_cstack_free(w.stacks[t]);
    free(w.stacks);
    ml_ctx_free(w.ctx);
}

/* Events and the sum of word 1 over the rows of a 'stats' report of state st. */
static void stats_totals(void *st, const struct ml_brun *run, uint64_t *events, uint64_t *sum)
{
    struct ml_bout o = {0};
    char *text = NULL, *line, *save;
    size_t size = 0;

    *events = *sum = 0;
    o.csv = open_memstream(&text, &size);
    o.json = fopen("/dev/null", "w");
    o.run = run;
    assert_int_equal(ml_module_find("stats")->report(st, &o), 0);
    fclose(o.csv);
    fclose(o.json);
    for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        unsigned t, k;
        unsigned long long ev, sm;
        if (sscanf(line, "%u,%u,%llu,%llu", &t, &k, &ev, &sm) == 4) {
            *events += ev;
            *sum += sm;
        }
    }
    free(text);
}

/*
 * A module with handlers and one that reads chunks ('stats') in one run: the
 * driver walks the records and hands blocks to the chunk module; both see
 * every event once.
 */
static void test_mixed_modules(void **state)
{
    const struct ml_module *mods[] = {&t_mod, ml_module_find("stats")};
    enum { PER = 5000 };
    uint64_t *buf = malloc(PER * 16), total, sum = 0, got_sum;
    struct fake f;
    struct ml_brun run;
    struct seen *m;
    void *st;
    int err;

    (void)state;
    fake_attach_mods(&f, 2, 1, mods, 2);
    fake_slot(&f, 0);
    for (int c = 0; c < 3; c++) {
        for (int i = 0; i < PER; i++) {
            buf[2 * i] = ML_Q_W0(1, 0, 0, i);
            buf[2 * i + 1] = next() & 0x7fffffffffffull;
            sum += buf[2 * i + 1];
        }
        fake_chunk(&f, 0, buf, PER * 16, 0, 0);
    }
    fake_end(&f, &run, &m);
    assert_int_equal(m->n[1], 3 * PER);
    assert_int_equal(m->sum[1], sum);
    st = ml_backend_merged(f.b, 1, &err);
    assert_int_equal(err, 0);
    stats_totals(st, &run, &total, &got_sum);
    assert_int_equal(total, 3 * PER);
    assert_int_equal(got_sum, sum);
    ml_backend_free(f.b);
    munmap(f.h, f.size);
    free(buf);
}

/*
 * 'stats' alone is chunk_any: each chunk goes to one of the three workers
 * (one reader per chunk), blob chunks to worker 0, the partly filled chunk
 * of a dead program once; every event is counted once.
 */
static void dealt_chunks(void)
{
    const struct ml_module *mods[] = {ml_module_find("stats")};
    enum { PER = 3000, CHUNKS = 12 };
    uint64_t *buf = malloc(PER * 16), sum = 0, events, got_sum;
    uint64_t blob[2 + 2] = {ML_Q_W0(ML_Q_KIND_BLOB, 0, ML_Q_BLOB_LAST, 5), 3};
    struct fake f;
    struct ml_brun run;
    const struct ml_bblob *bl;
    void *st;
    int err;

    fake_attach_mods(&f, 3, 2, mods, 1);
    fake_slot(&f, 0);
    fake_slot(&f, 1);
    memcpy(blob + 2, "hello", 5);
    fake_chunk(&f, 1, blob, 32, ML_Q_CHUNK_BLOB, 0);
    for (int c = 0; c <= CHUNKS; c++)
        for (uint32_t s = 0; s < 2; s++) {
            for (int i = 0; i < PER; i++) {
                buf[2 * i] = ML_Q_W0(1, 0, 0, i);
                buf[2 * i + 1] = next() & 0x7fffffffffffull;
                sum += buf[2 * i + 1];
            }
            fake_chunk(&f, s, buf, PER * 16, 0, c == CHUNKS); /* the last ones: partly filled */
        }
    memset(&run, 0, sizeof(run));
    ml_backend_stop(f.b, &run);
    assert_int_equal(run.events, 2ull * (CHUNKS + 1) * PER);
    assert_int_equal(run.chunks, 2 * CHUNKS + 1 + 2);
    assert_int_equal(run.corrupt_chunks, 0);
    st = ml_backend_merged(f.b, 0, &err);
    assert_int_equal(err, 0);
    stats_totals(st, &run, &events, &got_sum);
    assert_int_equal(events, 2ull * (CHUNKS + 1) * PER);
    assert_int_equal(got_sum, sum);
    bl = ml_backend_blobs(f.b);
    assert_non_null(bl);
    assert_int_equal(bl->len, 5);
    assert_memory_equal(bl->data, "hello", 5);
    ml_backend_free(f.b);
    munmap(f.h, f.size);
    free(buf);
}

static void test_dealt_chunks(void **state)
{
    (void)state;
    dealt_chunks();
}

/*
 * The same on one core: the three workers take turns (one reads at a time),
 * the turn passing to worker 0 for the blob chunk.
 */
static void test_dealt_turns(void **state)
{
    cpu_set_t all, one;

    (void)state;
    assert_int_equal(sched_getaffinity(0, sizeof(all), &all), 0);
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    assert_int_equal(sched_setaffinity(0, sizeof(one), &one), 0);
    dealt_chunks();
    assert_int_equal(sched_setaffinity(0, sizeof(all), &all), 0);
}

/* The driver names a missing callback. */
static void test_module_check(void **state)
{
    struct ml_module m = t_mod;
    char err[256];

    (void)state;
    assert_int_equal(ml_module_check(&m, err, sizeof(err)), 0);
    m.merge = NULL;
    assert_int_equal(ml_module_check(&m, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "module 't' has no 'merge' callback");
    m = t_mod;
    m.handlers = NULL;
    assert_int_equal(ml_module_check(&m, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "module 't' has no 'handlers' callback");
    for (size_t i = 0; ml_modules[i]; i++)
        assert_int_equal(ml_module_check(ml_modules[i], err, sizeof(err)), 0);
    for (size_t i = 0; ml_modules[i]; i++)
        assert_ptr_equal(ml_module_find(ml_modules[i]->name), ml_modules[i]);
    assert_string_equal(ml_module_find("dep")->name, "dep");
    assert_null(ml_module_find("nope"));
}

struct ranges {
    const struct ml_bworker *w;
    uint64_t bytes, last;
};

static void add_range(void *arg, uint64_t lo, uint64_t hi)
{
    struct ranges *r = arg;

    assert_true(lo < hi);
    assert_true(lo > r->last || !r->last); /* ascending, maximal: never adjacent */
    for (uint64_t a = lo; a < hi; a += 61)
        assert_true(ml_bw_owns_addr(r->w, a));
    assert_true(ml_bw_owns_addr(r->w, hi - 1));
    r->bytes += hi - lo;
    r->last = hi;
}

/* Split between workers, a range's every byte belongs to exactly one worker. */
static void test_owned_ranges(void **state)
{
    (void)state;
    for (uint32_t n = 1; n <= 4; n++) {
        uint64_t lo = 0x7f0000000123ull, hi = lo + 100000, total = 0;
        for (uint32_t w = 0; w < n; w++) {
            struct ml_bworker bw = {.index = w, .n = n};
            struct ranges r = {.w = &bw};
            ml_bw_owned_ranges(&bw, lo, hi, add_range, &r);
            total += r.bytes;
        }
        assert_int_equal(total, hi - lo);
    }
}

/* Output files: 0600, never replacing another run's, no link followed. */
static void test_files(void **state)
{
    char dir[] = "/tmp/memlens-bfiles-XXXXXX", path[4096], link[4200], other[4200];
    struct ml_bfiles *f;
    struct stat st;
    FILE *fp;

    (void)state;
    assert_non_null(mkdtemp(dir));
    assert_int_equal(ml_bfiles_open(&f, dir, NULL, 0), 0);
    /* an earlier run's file with the same pid: the stem moves on */
    snprintf(other, sizeof(other), "%s/prog.42.stats.csv", dir);
    fclose(fopen(other, "w"));
    assert_int_equal(ml_bfiles_name(f, "pr/og", 42), 0); /* '/' is not kept */
    fp = ml_bfiles_create(f, "stats", "csv");
    assert_non_null(fp);
    fputs("a,b\n", fp);
    assert_int_equal(ml_bfiles_commit(f, fp, path, sizeof(path)), 0);
    snprintf(other, sizeof(other), "%s/pr_og.42.stats.csv", dir);
    assert_string_equal(path, other);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    ml_bfiles_close(f);
    assert_int_equal(ml_bfiles_open(&f, dir, NULL, 0), 0);
    assert_int_equal(ml_bfiles_name(f, "prog", 42), 0);
    fp = ml_bfiles_create(f, "stats", "csv");
    assert_int_equal(ml_bfiles_commit(f, fp, path, sizeof(path)), 0);
    snprintf(other, sizeof(other), "%s/prog.42.2.stats.csv", dir);
    assert_string_equal(path, other);
    ml_bfiles_close(f);
    /* the user's own link is followed; another user's is not (docs/files.md) */
    snprintf(link, sizeof(link), "%s/link", dir);
    assert_int_equal(symlink(dir, link), 0);
    assert_int_equal(ml_bfiles_open(&f, link, NULL, 0), 0);
    ml_bfiles_close(f);
    if (geteuid() == 0) {
        char where[4096] = "";
        assert_int_equal(lchown(link, 65534, 65534), 0);
        assert_int_equal(ml_bfiles_open(&f, link, where, sizeof(where)), -EPERM);
        assert_string_equal(where, link);
    }
    unlink(link);
    snprintf(other, sizeof(other), "rm -rf '%s'", dir);
    assert_int_equal(system(other), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_delivery_1),     cmocka_unit_test(test_delivery_3),
        cmocka_unit_test(test_tail_and_reuse), cmocka_unit_test(test_corrupt_and_blobs),
        cmocka_unit_test(test_module_check),   cmocka_unit_test(test_owned_ranges),
        cmocka_unit_test(test_files),          cmocka_unit_test(test_stacks),
        cmocka_unit_test(test_mixed_modules),  cmocka_unit_test(test_dealt_chunks),
        cmocka_unit_test(test_dealt_turns),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
