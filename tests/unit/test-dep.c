/*
 * Unit tests of the 'dep' module (src/backend/modules/dep.c): random loads,
 * stores and atomics of one thread (sizes 1 to 100, aligned and not, across
 * 4 KiB blocks and a 64 KiB page) inside a loop whose iterations advance the
 * clock must give exactly the rows of a brute-force model that keeps, per
 * byte, the last store and the last load since it, with one worker and with
 * the addresses split over two workers and merged. The module's fast path
 * (one cell, split halves, whole words) and its general path (words split in
 * bytes, joined again) both run here, and objects (heap blocks, stack
 * objects, realloc in place and moved) end now and then: the model forgets
 * their bytes, as the module must.
 */
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

#define NSITES  7
#define BASE    0x7f00000fe000ull /* the region crosses a 64 KiB page at BASE + 0x2000 */
#define SPAN    0x4000u
#define LOOP    5u   /* the loop's marker id (not in the table: its column is empty) */
#define ITER    128u /* accesses per iteration: fewer than 1024 iterations, distances exact */
#define MAXROWS (1u << 16)

/* ---- the brute-force model ---- */

struct row {
    uint32_t src, dst, kind, loop, carried;
    uint64_t count, mindist;
};

static struct {
    uint64_t w[SPAN], r[SPAN]; /* (site + 1) << 32 | clock; 0: none */
    uint64_t clock, start, iter[1024];
    uint32_t niter; /* iterations started; 0: before the loop */
    struct row rows[MAXROWS];
    uint32_t nrows;
} ref;

static void ref_pair(uint64_t from, uint32_t dst, uint32_t kind)
{
    uint64_t c = from & 0xffffffffu, dist = 0;
    uint32_t src = (uint32_t)(from >> 32) - 1, loop = 0, carried = 0, k, i;

    if (ref.niter && c >= ref.start) {
        loop = 1;
        for (k = ref.niter; ref.iter[k - 1] > c; k--)
            ;
        carried = k != ref.niter;
        dist = ref.niter - k;
    }
    i = (((src * 31 + dst) * 31 + kind) * 2 + loop) * 2 + carried;
    for (;; i = (i + 1) & (MAXROWS - 1)) {
        struct row *r = &ref.rows[i & (MAXROWS - 1)];
        if (!r->count) {
            assert_true(++ref.nrows < MAXROWS / 2);
            *r = (struct row){src, dst, kind, loop, carried, 1, dist};
            return;
        }
        if (r->src == src && r->dst == dst && r->kind == kind && r->loop == loop &&
            r->carried == carried) {
            r->count++;
            if (dist < r->mindist)
                r->mindist = dist;
            return;
        }
    }
}

/* The module's rules, byte by byte: one dependence per earlier access instance in a run. */
static void ref_access(unsigned kind, uint64_t a, uint64_t len, uint32_t site)
{
    uint64_t me = (uint64_t)(site + 1) << 32 | ref.clock, lw = 0, ww = 0, wr = 0;

    for (uint64_t p = a; p < a + len; p++) {
        uint32_t i = (uint32_t)(p - BASE);
        if (kind != ML_EV_STORE && ref.w[i] && ref.w[i] != lw)
            ref_pair(lw = ref.w[i], site, 0);
        if (kind == ML_EV_LOAD) {
            ref.r[i] = me;
            continue;
        }
        if (ref.w[i] && ref.w[i] != ww)
            ref_pair(ww = ref.w[i], site, 2);
        if (ref.r[i] && ref.r[i] != wr)
            ref_pair(wr = ref.r[i], site, 1);
        ref.w[i] = me;
        ref.r[i] = 0;
    }
}

/* An object ended: the module forgets its bytes' accesses. */
static void ref_clear(uint64_t a, uint64_t len)
{
    for (uint64_t p = a; p < a + len; p++)
        ref.w[p - BASE] = ref.r[p - BASE] = 0;
}

/* ---- the module ---- */

static const struct ml_module *mod(void)
{
    const struct ml_module *m = ml_module_find("dep");

    assert_non_null(m);
    return m;
}

#define ROWS_HEADER "src,dst"
#include "bmodule.h"

static uint64_t obj_lo, obj_len; /* the live object of check_random (obj_len 0: none) */
static unsigned obj_kind;

/*
 * Ends the live object (a stack object, or a heap block freed or moved or
 * shrunk in place by realloc) and makes a new one at any alignment, in
 * the first span bytes: cells of whole words, partial words, split words and pages.
 */
static void next_object(void **st, struct ml_bworker *w, uint32_t workers, uint32_t span)
{
    uint64_t rec[4] = {0}, lo = BASE + next() % span;
    uint64_t len = next() % 8 ? 1 + next() % 300 : 1 + next() % 9000;

    if (len > BASE + SPAN - lo)
        len = BASE + SPAN - lo;
    if (obj_len && obj_kind == ML_EV_STACK_ALLOC) {
        rec[0] = ML_Q_W0(ML_EV_STACK_FREE, 0, 0, 0);
        rec[1] = obj_lo;
        feed(st, w, workers, 0, rec);
        ref_clear(obj_lo, obj_len);
    } else if (obj_len && next() % 2) { /* realloc: in place (shrunk or not) or moved */
        rec[0] = ML_Q_W0(ML_EV_REALLOC, 0, 0, 0);
        rec[1] = obj_lo;
        feed(st, w, workers, 0, rec);
        if (next() % 2)
            lo = obj_lo;
        if (len > BASE + SPAN - lo)
            len = BASE + SPAN - lo;
        if (lo != obj_lo)
            ref_clear(obj_lo, obj_len);
        else if (len < obj_len)
            ref_clear(lo + len, obj_len - len);
        rec[0] = ML_Q_W0(ML_EV_ALLOC, 0, ML_EV_HEAP_REALLOC, len);
        rec[1] = lo;
        feed(st, w, workers, 0, rec);
        obj_lo = lo;
        obj_len = len;
        return;
    } else if (obj_len) {
        rec[0] = ML_Q_W0(ML_EV_FREE, 0, 0, 0);
        rec[1] = obj_lo;
        feed(st, w, workers, 0, rec);
        ref_clear(obj_lo, obj_len);
    }
    obj_kind = next() % 2 ? ML_EV_STACK_ALLOC : ML_EV_ALLOC;
    rec[0] = obj_kind == ML_EV_ALLOC ? ML_Q_W0(ML_EV_ALLOC, 0, 0, len)
                                     : ML_Q_W0(ML_EV_STACK_ALLOC, 1, 0, 1);
    rec[1] = lo;
    rec[2] = len;
    feed(st, w, workers, 0, rec);
    obj_lo = lo;
    obj_len = len;
}

/*
 * n random accesses over 'span' bytes: words of one size for a while (so
 * that cells split and join), some of any size and alignment; workers 1 or 2
 * (split by address as the driver does, then merged).
 */
static void check_random(uint32_t workers, uint32_t n, uint32_t span)
{
    static const char *const kinds[] = {"RAW", "WAR", "WAW"};
    static const unsigned sizes[] = {1, 2, 4, 4, 8, 8, 8, 8, 16, 16, 32, 100};
    struct ml_bworker w[2] = {{.index = 0, .n = workers}, {.index = 1, .n = workers}};
    void *st[2] = {NULL, NULL};
    struct ml_bblob *blob = sites_blob();
    char *text = NULL, **got, want[200];
    unsigned mode = 8;

    memset(&ref, 0, sizeof(ref));
    obj_len = 0;
    ref.clock = 1; /* the module's clock starts with the first thread's run */
    for (uint32_t i = 0; i < workers; i++)
        assert_non_null(st[i] = mod()->init(&w[i]));
    for (uint32_t i = 0; i < n; i++) {
        uint64_t rec[4];
        if (i == n / 50 || (i > n / 50 && i % ITER == 0)) { /* the loop's entry, then iterations */
            ref.clock++;
            if (!ref.niter)
                ref.start = ref.clock;
            ref.iter[ref.niter++] = ref.clock;
            rec[0] = ML_Q_W0(ref.niter == 1 ? ML_EV_LOOP_ENTRY : ML_EV_LOOP_ITER, 0, 0, 0);
            rec[1] = LOOP;
            feed(st, w, workers, 0, rec);
        }
        if (i % 512 == 0) /* each size in turn */
            mode = sizes[i / 512 % 12];
        if (i % 997 == 500) /* an object ends, another begins */
            next_object(st, w, workers, span);
        uint32_t site = (uint32_t)(next() % NSITES);
        unsigned kind = (unsigned)(next() % 8), len = next() % 32 ? mode : sizes[next() % 12];
        uint64_t a = BASE + next() % (span - 128);
        kind = kind < 4 ? ML_EV_LOAD : kind < 7 ? ML_EV_STORE : ML_EV_RMW;
        if (next() % 32)
            a &= ~(uint64_t)((len < 8 ? len : 8) - 1); /* mostly aligned */
        /* the model counts one run per access: keep the access in one worker's block */
        if (workers > 1 && ((a ^ (a + len - 1)) & ~4095ull))
            a = (a + len - 1) & ~4095ull;
        rec[0] = ML_Q_W0(kind, len < 64 ? 0 : 1, len < 64 ? len : 0, site);
        rec[1] = a;
        rec[2] = len;
        rec[3] = 0;
        ref_access(kind, a, len, site);
        feed(st, w, workers, 0, rec);
    }
    uint32_t ngot, ne = 0;
    got = report_rows(st, w, workers, blob, &text, &ngot);
    char **exp = calloc(MAXROWS, sizeof(*exp));
    for (uint32_t i = 0; i < MAXROWS; i++) {
        const struct row *r = &ref.rows[i];
        char dist[32] = "";
        if (!r->count)
            continue;
        if (r->carried)
            snprintf(dist, sizeof(dist), "%llu", (unsigned long long)r->mindist);
        snprintf(want, sizeof(want), "t.c:%u,t.c:%u,%s,,%u,%s,%llu,f,f", 100 + r->src, 100 + r->dst,
                 kinds[r->kind], r->carried, dist, (unsigned long long)r->count);
        exp[ne++] = strdup(want);
    }
    assert_true(ne > 50); /* every kind, carried or not, from before the loop or in it */
    same_rows(exp, ne, got, ngot);
    free(text);
    free(blob);
}

static void test_one_worker(void **state)
{
    (void)state;
    check_random(1, 100000, 512); /* few words: many dependences in the same iteration */
}

static void test_few_words(void **state)
{
    (void)state;
    check_random(1, 100000, 128 + 32); /* four words: cells split and join all the time */
}

static void test_wide(void **state)
{
    (void)state;
    check_random(1, 100000, SPAN); /* across 4 KiB blocks and a 64 KiB page */
}

static void test_two_workers(void **state)
{
    (void)state;
    check_random(2, 100000, SPAN);
}

/*
 * Distances beyond one iteration, exact: in iteration k a word is read and
 * written at k % 7, an int at k % 10 (words split in halves), so each flow
 * and output dependence is carried at distance 7 or 10 and each anti one is
 * within the iteration. Rings of iteration starts grow on the way (600
 * iterations), and every iteration is of the innermost loop.
 */
static void check_distance(uint32_t workers)
{
    struct ml_bworker w[2] = {{.index = 0, .n = workers}, {.index = 1, .n = workers}};
    void *st[2] = {NULL, NULL};
    struct ml_bblob *blob = sites_blob();
    char *text = NULL, **got, **exp = calloc(6, sizeof(*exp));
    static const char *const want[] = {
        "t.c:101,t.c:101,WAW,,1,7,593,f,f",  "t.c:101,t.c:102,RAW,,1,7,593,f,f",
        "t.c:102,t.c:101,WAR,,0,,600,f,f",   "t.c:104,t.c:103,RAW,,1,10,590,f,f",
        "t.c:104,t.c:104,WAW,,1,10,590,f,f", "t.c:103,t.c:104,WAR,,0,,600,f,f",
    };
    uint32_t ngot;

    for (uint32_t i = 0; i < workers; i++)
        assert_non_null(st[i] = mod()->init(&w[i]));
    for (uint64_t k = 0; k < 600; k++) {
        const uint64_t word = BASE + 8 * (k % 7), half = BASE + 0x1000 + 4 * (k % 10);
        const uint64_t recs[][2] = {
            {ML_Q_W0(k ? ML_EV_LOOP_ITER : ML_EV_LOOP_ENTRY, 0, 0, 0), LOOP},
            {ML_Q_W0(ML_EV_LOAD, 0, 8, 2), word},
            {ML_Q_W0(ML_EV_STORE, 0, 8, 1), word},
            {ML_Q_W0(ML_EV_LOAD, 0, 4, 3), half},
            {ML_Q_W0(ML_EV_STORE, 0, 4, 4), half},
        };
        for (unsigned i = 0; i < 5; i++)
            feed(st, w, workers, 0, recs[i]);
    }
    got = report_rows(st, w, workers, blob, &text, &ngot);
    for (unsigned i = 0; i < 6; i++)
        exp[i] = strdup(want[i]);
    same_rows(exp, 6, got, ngot);
    free(text);
    free(blob);
}

static void test_distance(void **state)
{
    (void)state;
    check_distance(1);
    check_distance(2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_worker), cmocka_unit_test(test_few_words),
        cmocka_unit_test(test_wide),       cmocka_unit_test(test_two_workers),
        cmocka_unit_test(test_distance),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
