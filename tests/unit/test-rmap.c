/* Unit tests of the reducible maps (src/backend/rmap.c) against a brute-force recomputation. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend/amap.h"
#include "backend/rmap.h"

#define KEYS 300 /* keys 0 .. KEYS-1, times a spread factor so they are not dense */

struct truth {
    uint64_t n, sum, min, max, first;
    int varies;
    uint64_t vals[512];
    uint32_t nvals;
};

static uint64_t rng = 88172645463325252ull;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void truth_add(struct truth *t, uint64_t v)
{
    uint32_t i;

    if (!t->n) {
        t->min = t->max = t->first = v;
    } else {
        t->min = v < t->min ? v : t->min;
        t->max = v > t->max ? v : t->max;
        t->varies |= v != t->first;
    }
    t->n++;
    t->sum += v;
    for (i = 0; i < t->nvals && t->vals[i] != v; i++)
        ;
    if (i == t->nvals && t->nvals < 512)
        t->vals[t->nvals++] = v;
}

/* Inserts runs of one key (as a loop would) with values from a small or a wide range. */
static void feed(struct ml_rmap **maps, int nmaps, struct truth *t, int inserts)
{
    while (inserts > 0) {
        uint64_t k = next() % KEYS, run = 1 + next() % 9, wide = k % 4 == 0;
        for (uint64_t i = 0; i < run; i++) {
            uint64_t v = k % 7 == 0 ? 42 : wide ? next() : next() % 5;
            for (int m = 0; m < nmaps; m++)
                ml_rmap_add(maps[m], k * 0x10001 + 3, v);
            truth_add(&t[k], v);
        }
        inserts -= (int)run;
    }
}

static void check(struct ml_rmap *m, enum ml_rop op, uint32_t set_max, const struct truth *t)
{
    uint32_t n, nkeys = 0;
    struct ml_rval *all = ml_rmap_sorted(m, &n), v;

    for (uint32_t k = 0; k < KEYS; k++) {
        uint64_t want;
        if (!t[k].n) {
            assert_int_equal(ml_rmap_get(m, k * 0x10001 + 3, &v), -1);
            continue;
        }
        assert_int_equal(ml_rmap_get(m, k * 0x10001 + 3, &v), 0);
        assert_true(all[nkeys].key == k * 0x10001 + 3); /* sorted by key */
        nkeys++;
        assert_int_equal(v.n, t[k].n);
        want = op == ML_ROP_COUNT ? t[k].n
               : op == ML_ROP_SUM ? t[k].sum
               : op == ML_ROP_MIN ? t[k].min
               : op == ML_ROP_MAX ? t[k].max
                                  : t[k].first;
        if (op != ML_ROP_SET)
            assert_int_equal(v.v, want);
        if (op == ML_ROP_CONST)
            assert_int_equal(!!(v.flags & ML_RVAL_VARIES), t[k].varies);
        if (op == ML_ROP_SET) {
            assert_int_equal(!!(v.flags & ML_RVAL_OVERFLOW), t[k].nvals > set_max);
            assert_int_equal(v.nset, t[k].nvals > set_max ? set_max : t[k].nvals);
            for (uint32_t i = 0; i < v.nset; i++) {
                uint32_t j;
                if (i)
                    assert_true(v.set[i - 1] < v.set[i]);
                for (j = 0; j < t[k].nvals && t[k].vals[j] != v.set[i]; j++)
                    ;
                assert_true(j < t[k].nvals);
            }
        }
    }
    assert_int_equal(n, nkeys);
    assert_int_equal(ml_rmap_size(m), nkeys);
    free(all);
}

/* Every op: one map fed directly; two maps (two workers) fed halves and merged. */
static void test_ops(void **state)
{
    (void)state;
    for (int op = ML_ROP_COUNT; op <= ML_ROP_SET; op++) {
        struct truth *t = calloc(KEYS, sizeof(*t));
        struct ml_rmap *one = ml_rmap_new(op, 4), *a = ml_rmap_new(op, 4), *b = ml_rmap_new(op, 4);
        struct ml_rmap *pa[2] = {one, a}, *pb[2] = {one, b};
        assert_non_null(one);
        feed(pa, 2, t, 20000);
        feed(pb, 2, t, 30000);
        check(one, op, 4, t);
        assert_int_equal(ml_rmap_merge(a, b), 0);
        assert_int_equal(ml_rmap_size(b), 0);
        check(a, op, 4, t);
        ml_rmap_free(one);
        ml_rmap_free(a);
        ml_rmap_free(b);
        free(t);
    }
}

/* Growth past the initial table, and the buffer reduced on read, not only when full. */
static void test_growth(void **state)
{
    struct ml_rmap *m = ml_rmap_new(ML_ROP_SUM, 0);
    struct ml_rval v;

    (void)state;
    for (uint64_t k = 0; k < 100000; k++)
        ml_rmap_add(m, k << 12, k);
    ml_rmap_add(m, 5 << 12, 1000);
    assert_int_equal(ml_rmap_size(m), 100000);
    assert_int_equal(ml_rmap_get(m, 5 << 12, &v), 0);
    assert_int_equal(v.v, 1005);
    assert_int_equal(v.n, 2);
    assert_int_equal(ml_rmap_get(m, 99999ull << 12, &v), 0);
    assert_int_equal(v.v, 99999);
    ml_rmap_free(m);
}

static void test_bad(void **state)
{
    struct ml_rmap *a = ml_rmap_new(ML_ROP_MIN, 0), *b = ml_rmap_new(ML_ROP_MAX, 0);

    (void)state;
    assert_null(ml_rmap_new(ML_ROP_SET, 0));
    assert_null(ml_rmap_new(ML_ROP_SET, ML_RMAP_SET_MAX + 1));
    assert_null(ml_rmap_new(7, 1));
    assert_int_equal(ml_rmap_merge(a, b), -EINVAL);
    ml_rmap_free(a);
    ml_rmap_free(b);
}

/*
 * The live-object table (amap.h) against a plain array: random inserts and
 * erases of clustered addresses (long probe runs, wrap-around, growth), every
 * address looked up after each step.
 */
static void test_amap(void **state)
{
    enum { N = 600 };
    struct ent {
        uint64_t addr, val;
    };
    static uint64_t live[N]; /* val + 1 of address (i + 1) * 64, 0: absent */
    struct ml_amap m;
    uint64_t rng = 7;

    (void)state;
    memset(live, 0, sizeof(live));
    assert_int_equal(ml_amap_init(&m, sizeof(struct ent), 4), 0);
    for (int step = 0; step < 20000; step++) {
        uint64_t i, a;
        struct ent *e;
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        i = (rng >> 33) % (step < 10000 ? N : N / 4);
        a = (i + 1) * 64;
        e = ml_amap_find(&m, a);
        assert_int_equal(e != NULL, live[i] != 0);
        if (e) {
            assert_int_equal(e->val + 1, live[i]);
            ml_amap_erase(&m, e);
            live[i] = 0;
        } else {
            assert_non_null(e = ml_amap_insert(&m, a));
            assert_int_equal(e->addr, a);
            e->val = rng >> 40;
            live[i] = e->val + 1;
        }
        if (step % 97 == 0) {
            uint64_t n = 0;
            for (uint64_t k = 0; k < N; k++) {
                struct ent *f = ml_amap_find(&m, (k + 1) * 64);
                assert_int_equal(f != NULL, live[k] != 0);
                if (f)
                    assert_int_equal(f->val + 1, live[k]), n++;
            }
            assert_int_equal(m.used, n);
            assert_true(m.cap >= 2 * m.used);
        }
    }
    ml_amap_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ops),
        cmocka_unit_test(test_growth),
        cmocka_unit_test(test_bad),
        cmocka_unit_test(test_amap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
