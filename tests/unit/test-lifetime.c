/* Unit tests of the 'lifetime' module (src/backend/modules/lifetime.c) against brute force. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend/backend.h"
#include "format/events.h"
#include "format/qtables.h"
#include "format/queue.h"

#define NSITES 7

static uint64_t rng = 88172645463325252ull;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static uint8_t *put32(uint8_t *p, uint32_t v)
{
    memcpy(p, &v, 4);
    return p + 4;
}

static uint8_t *putstr(uint8_t *p, const char *s)
{
    memcpy(p, s, strlen(s));
    return p + strlen(s);
}

/*
 * A table blob: sites 0..NSITES-1 at t.c:1..NSITES in function f (site 5 a stack object 'buf',
 * site 6 a global 'tab', the others allocation sites), marker 0 = function 'main', markers 1
 * and 2 = the objects.
 */
static struct ml_bblob *tables(void)
{
    struct ml_bblob *b = calloc(1, sizeof(*b) + 1024);
    uint8_t *p = b->data;

    p = put32(p, ML_QT_MAGIC);
    p = put32(p, ML_QT_VERSION);
    p = put32(p, 0);
    p = put32(p, NSITES);
    p = put32(p, 0);
    p = put32(p, 3);
    p = put32(p, 1);
    p = putstr(p, "t");
    for (uint32_t i = 0; i < NSITES; i++) {
        p = put32(p, i == 5 ? ML_EV_STACK_ALLOC : i == 6 ? ML_EV_GLOBAL : ML_EV_ALLOC_SITE);
        p = put32(p, 0);
        p = put32(p, i == 5 ? 1 : i == 6 ? 2 : ML_EV_NOID);
        p = put32(p, i + 1);
        p = put32(p, 0);
        p = put32(p, 1);
        p = put32(p, 3);
        p = putstr(p, "f");
        p = putstr(p, "t.c");
    }
    p = put32(p, ML_MK_FUNCTION);
    p = put32(p, 1);
    p = put32(p, 4);
    p = put32(p, 3);
    p = put32(p, 4);
    p = putstr(p, "main");
    p = putstr(p, "t.c");
    p = putstr(p, "main");
    for (int k = 0; k < 2; k++) {
        p = put32(p, ML_MK_OBJECT);
        p = put32(p, 6 + (uint32_t)k);
        p = put32(p, 3);
        p = put32(p, 3);
        p = put32(p, 1);
        p = putstr(p, k ? "tab" : "buf");
        p = putstr(p, "t.c");
        p = putstr(p, "f");
    }
    b->tag = ML_QT_TAG;
    b->len = (uint64_t)(p - b->data);
    return b;
}

struct lt {
    const struct ml_module *m;
    struct ml_bworker w[2];
    void *st[2];
    uint32_t n;
};

static void lt_new(struct lt *l, uint32_t n)
{
    memset(l, 0, sizeof(*l));
    l->m = ml_module_find("lifetime");
    assert_non_null(l->m);
    l->n = n;
    for (uint32_t i = 0; i < n; i++) {
        l->w[i].index = i;
        l->w[i].n = n;
        l->st[i] = l->m->init(&l->w[i]);
        assert_non_null(l->st[i]);
    }
}

/* Delivers one record (w2: the extra unit's first word) as the driver does: by partition. */
static void feed3(struct lt *l, uint32_t thread, uint64_t w0, uint64_t w1, uint64_t w2)
{
    uint64_t rec[4] = {w0, w1, w2, 0};

    for (const struct ml_bhandler *h = l->m->handlers; h->fn; h++) {
        if (h->kind != ML_Q_KIND(w0))
            continue;
        for (uint32_t i = 0; i < l->n; i++)
            if (h->part == ML_BPART_ALL || ml_bpart_addr(w1, l->n) == i)
                h->fn(l->st[i], &l->w[i], thread, rec);
    }
}

static void feed(struct lt *l, uint32_t thread, uint64_t w0, uint64_t w1)
{
    feed3(l, thread, w0, w1, 0);
}

/* The merged report's CSV, malloc'd. */
static char *report(struct lt *l)
{
    struct ml_bblob *b = tables();
    char *csv = NULL, *json = NULL;
    size_t nc, nj;
    struct ml_bout o = {.blobs = b};

    o.csv = open_memstream(&csv, &nc);
    o.json = open_memstream(&json, &nj);
    for (uint32_t i = 1; i < l->n; i++)
        assert_int_equal(l->m->merge(l->st[0], l->st[i]), 0);
    assert_int_equal(l->m->report(l->st[0], &o), 0);
    fclose(o.csv);
    fclose(o.json);
    l->m->fini(l->st[0]);
    free(json);
    free(b);
    return csv;
}

/* Column c of the row of site (0 is the site), or -1 when there is no such row. */
static long col(const char *csv, const char *site, int c)
{
    char key[64];
    const char *p;

    snprintf(key, sizeof(key), "\n%s,", site);
    if (!(p = strstr(csv, key)))
        return -1;
    p += strlen(key);
    for (int i = 1; i < c; i++)
        p = strchr(p, ',') + 1;
    return strtol(p, NULL, 10);
}

enum { OBJECTS, BYTES, ITER, CALL, NEVER, FREED, REALLOCED };

/*
 * Random allocations, frees and reallocs over few addresses (so the block
 * map's probe runs collide and its deletions shift entries), named by random
 * sites: per-site figures equal a brute-force count, with 1 and 2 workers.
 */
static void test_random_against_brute_force(void **state)
{
    enum { ADDRS = 3000, OPS = 200000 };
    static uint64_t size[ADDRS];
    static int live[ADDRS], site[ADDRS];
    uint64_t want[NSITES][7];
    char *csv[2];

    (void)state;
    for (uint32_t n = 1; n <= 2; n++) {
        struct lt l;
        uint64_t seed = rng;
        lt_new(&l, n);
        memset(want, 0, sizeof(want));
        memset(live, 0, sizeof(live));
        for (int k = 0; k < OPS; k++) {
            uint32_t a = (uint32_t)(next() % ADDRS);
            uint64_t addr = 0x10000 + (uint64_t)a * 48;
            int s = (int)(next() % NSITES);
            if (!live[a]) {
                size[a] = next() % 1000;
                site[a] = s;
                live[a] = 1;
                feed(&l, 0, ML_Q_W0(ML_EV_ALLOC, 0, 0, size[a]), addr);
                feed(&l, 0, ML_Q_W0(ML_EV_ALLOC_SITE, 0, 0, s), addr);
                feed(&l, 0, ML_Q_W0(ML_EV_ALLOC_SITE, 0, 0, (s + 1) % NSITES), addr);
                continue;
            }
            want[site[a]][OBJECTS]++;
            want[site[a]][BYTES] += size[a];
            live[a] = 0;
            if (next() % 4) {
                want[site[a]][FREED]++;
                feed(&l, 0, ML_Q_W0(ML_EV_FREE, 0, 0, 0), addr);
            } else {
                want[site[a]][REALLOCED]++;
                feed(&l, 0, ML_Q_W0(ML_EV_REALLOC, 0, 0, 0), addr);
            }
        }
        for (int a = 0; a < ADDRS; a++)
            if (live[a]) {
                want[site[a]][OBJECTS]++;
                want[site[a]][BYTES] += size[a];
                want[site[a]][NEVER]++;
            }
        csv[n - 1] = report(&l);
        for (int s = 0; s < NSITES; s++) {
            char where[16];
            snprintf(where, sizeof(where), "t.c:%d", s + 1);
            assert_int_equal(col(csv[n - 1], where, 1), want[s][OBJECTS]);
            assert_int_equal(col(csv[n - 1], where, 2), want[s][BYTES]);
            assert_int_equal(col(csv[n - 1], where, 5), want[s][NEVER]);
            assert_int_equal(col(csv[n - 1], where, 6), want[s][FREED]);
            assert_int_equal(col(csv[n - 1], where, 7), want[s][REALLOCED]);
        }
        rng = seed; /* the same operations for 2 workers */
    }
    assert_string_equal(csv[0], csv[1]);
    free(csv[0]);
    free(csv[1]);
}

/*
 * Iteration and call: in main's loop, block 1 lives one iteration, block 2
 * dies in the next one, block 3 (made by a callee, site 3) dies in the
 * caller's iteration but after its call returned; block 4 is freed by
 * another thread; block 5 made outside any loop is a library block of main.
 */
static void test_iteration_and_call(void **state)
{
    struct lt l;
    char *csv;

    (void)state;
    lt_new(&l, 2);
    feed(&l, 0, ML_Q_W0(ML_EV_FUNC_ENTRY, 0, 0, 0), 0);
    feed(&l, 0, ML_Q_W0(ML_EV_ALLOC, 0, 0, 10), 0x5000);
    feed(&l, 0, ML_Q_W0(ML_EV_LOOP_ENTRY, 0, 0, 0), 1);
    feed(&l, 0, ML_Q_W0(ML_EV_ALLOC, 0, 0, 8), 0x1000);
    feed(&l, 0, ML_Q_W0(ML_EV_ALLOC_SITE, 0, 0, 0), 0x1000);
    feed(&l, 0, ML_Q_W0(ML_EV_ALLOC, 0, 0, 16), 0x2000);
    feed(&l, 0, ML_Q_W0(ML_EV_ALLOC_SITE, 0, 0, 1), 0x2000);
    feed(&l, 0, ML_Q_W0(ML_EV_FUNC_ENTRY, 0, 0, 5), 0);
    feed(&l, 0, ML_Q_W0(ML_EV_ALLOC, 0, 0, 32), 0x3000);
    feed(&l, 0, ML_Q_W0(ML_EV_ALLOC_SITE, 0, 0, 2), 0x3000);
    feed(&l, 0, ML_Q_W0(ML_EV_ALLOC, 0, 0, 64), 0x4000);
    feed(&l, 0, ML_Q_W0(ML_EV_ALLOC_SITE, 0, 0, 3), 0x4000);
    feed(&l, 1, ML_Q_W0(ML_EV_ALLOC_SITE, 0, 0, 4), 0x4000); /* another thread: no claim */
    feed(&l, 0, ML_Q_W0(ML_EV_FUNC_EXIT, 0, 0, 5), 0);
    feed(&l, 0, ML_Q_W0(ML_EV_FREE, 0, 0, 0), 0x1000);
    feed(&l, 0, ML_Q_W0(ML_EV_FREE, 0, 0, 0), 0x3000);
    feed(&l, 0, ML_Q_W0(ML_EV_LOOP_ITER, 0, 0, 0), 1);
    feed(&l, 0, ML_Q_W0(ML_EV_FREE, 0, 0, 0), 0x2000);
    feed(&l, 0, ML_Q_W0(ML_EV_LOOP_EXIT, 0, 0, 0), 1);
    feed(&l, 1, ML_Q_W0(ML_EV_FREE, 0, 0, 0), 0x4000);
    feed(&l, 0, ML_Q_W0(ML_EV_FUNC_EXIT, 0, 0, 0), 0);
    feed(&l, 0, ML_Q_W0(ML_EV_FREE, 0, 0, 0), 0x9000); /* never made */
    csv = report(&l);
    assert_int_equal(col(csv, "t.c:1", ITER + 1), 1);
    assert_int_equal(col(csv, "t.c:1", CALL + 1), 1);
    assert_int_equal(col(csv, "t.c:2", ITER + 1), 0);
    assert_int_equal(col(csv, "t.c:2", CALL + 1), 1);
    assert_int_equal(col(csv, "t.c:3", ITER + 1), 1);
    assert_int_equal(col(csv, "t.c:3", CALL + 1), 0);
    assert_int_equal(col(csv, "t.c:4", ITER + 1), 0);
    assert_int_equal(col(csv, "t.c:4", FREED + 1), 1);
    assert_int_equal(col(csv, "t.c:4", 9), 1); /* freed_by_other_thread */
    assert_int_equal(col(csv, "t.c:5", OBJECTS + 1), -1);
    assert_int_equal(col(csv, "library in main", OBJECTS + 1), 1);
    assert_int_equal(col(csv, "library in main", NEVER + 1), 1);
    assert_int_equal(col(csv, "library in main", 8), 0); /* in_loop */
    free(csv);
}

/*
 * Stack objects made and released in each iteration, one left by unwinding
 * (ended when its address is made again), releases of objects already ended;
 * a global announced twice (one object) and a bogus free of it.
 */
static void test_stack_and_global(void **state)
{
    struct lt l;
    char *csv;

    (void)state;
    lt_new(&l, 2);
    feed3(&l, 0, ML_Q_W0(ML_EV_GLOBAL, 1, 0, 6), 0x8000, 256);
    feed3(&l, 0, ML_Q_W0(ML_EV_GLOBAL, 1, 0, 6), 0x8000, 256);
    feed(&l, 0, ML_Q_W0(ML_EV_FUNC_ENTRY, 0, 0, 0), 0);
    feed(&l, 0, ML_Q_W0(ML_EV_LOOP_ENTRY, 0, 0, 0), 1);
    for (int it = 0; it < 3; it++) {
        feed3(&l, 0, ML_Q_W0(ML_EV_STACK_ALLOC, 1, 0, 5), 0x7000, 64);
        feed(&l, 0, ML_Q_W0(ML_EV_STACK_FREE, 0, 0, 0), 0x7000);
        feed(&l, 0, ML_Q_W0(ML_EV_LOOP_ITER, 0, 0, 0), 1);
    }
    feed3(&l, 0, ML_Q_W0(ML_EV_STACK_ALLOC, 1, 0, 5), 0x7000, 64); /* its frame unwinds */
    feed(&l, 0, ML_Q_W0(ML_EV_LOOP_EXIT, 0, 0, 0), 1);
    feed(&l, 0, ML_Q_W0(ML_EV_FUNC_EXIT, 0, 0, 0), 0);
    feed3(&l, 0, ML_Q_W0(ML_EV_STACK_ALLOC, 1, 0, 5), 0x7000, 64);
    feed(&l, 0, ML_Q_W0(ML_EV_STACK_FREE, 0, 0, 0), 0x7000);
    feed(&l, 0, ML_Q_W0(ML_EV_STACK_FREE, 0, 0, 0), 0x7000); /* already ended: ignored */
    feed(&l, 0, ML_Q_W0(ML_EV_FREE, 0, 0, 0), 0x8000);       /* not a heap block */
    csv = report(&l);
    assert_int_equal(col(csv, "t.c:6", OBJECTS + 1), 5);
    assert_int_equal(col(csv, "t.c:6", BYTES + 1), 320);
    assert_int_equal(col(csv, "t.c:6", ITER + 1), 3);
    assert_int_equal(col(csv, "t.c:6", CALL + 1), 3);
    assert_int_equal(col(csv, "t.c:6", NEVER + 1), 0);
    assert_int_equal(col(csv, "t.c:6", FREED + 1), 5);
    assert_int_equal(col(csv, "t.c:7", OBJECTS + 1), 1);
    assert_int_equal(col(csv, "t.c:7", BYTES + 1), 256);
    assert_int_equal(col(csv, "t.c:7", NEVER + 1), 1);
    assert_int_equal(col(csv, "t.c:7", FREED + 1), 0);
    assert_non_null(strstr(csv, ",f,stack,buf\n"));
    assert_non_null(strstr(csv, ",f,global,tab\n"));
    free(csv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_against_brute_force),
        cmocka_unit_test(test_iteration_and_call),
        cmocka_unit_test(test_stack_and_global),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
