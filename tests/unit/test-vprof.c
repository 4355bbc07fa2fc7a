/* Unit tests of the value classifier (src/backend/vprof.c): cases and a brute-force comparison. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend/vprof.h"
#include "format/queue.h"

static enum ml_vkind cls(const struct ml_vprof *p, uint64_t *v, uint64_t *s)
{
    uint64_t v0, s0;

    return ml_vprof_class(p, v ? v : &v0, s ? s : &s0);
}

static uint64_t dbits(double d)
{
    uint64_t b;

    memcpy(&b, &d, sizeof(b));
    return b;
}

static uint64_t fbits(float f)
{
    uint32_t b;

    memcpy(&b, &f, sizeof(b));
    return b;
}

static void constant(void **state)
{
    struct ml_vprof p = {0};
    uint64_t v, s;
    char buf[64];

    (void)state;
    for (int i = 0; i < 100; i++)
        ml_vprof_add(&p, (uint32_t)(i % 2), 7, ML_Q_VAL_INT, 4);
    assert_int_equal(cls(&p, &v, &s), ML_VK_CONSTANT);
    assert_int_equal(v, 7);
    assert_int_equal(p.n, 100);
    assert_int_equal(p.nseq, 2);
    assert_string_equal(ml_vkind_name(ML_VK_CONSTANT), "constant");
    /* one value is constant too */
    ml_vprof_fini(&p);
    memset(&p, 0, sizeof(p));
    ml_vprof_add(&p, 0, 0xfffe, ML_Q_VAL_INT, 2);
    assert_int_equal(cls(&p, &v, NULL), ML_VK_CONSTANT);
    assert_string_equal(ml_vprof_fmt(&p, v, 0, buf, sizeof(buf)), "-2");
    ml_vprof_fini(&p);
    memset(&p, 0, sizeof(p));
    assert_int_equal(cls(&p, &v, NULL), ML_VK_NONE);
}

/* Each thread steps by 3 from 5; the threads' chunks interleave. */
static void strided_per_thread(void **state)
{
    struct ml_vprof p = {0}, one = {0};
    uint64_t v, s;
    char buf[64];

    (void)state;
    for (int chunk = 0; chunk < 4; chunk++)
        for (uint32_t t = 0; t < 3; t++)
            for (int i = 0; i < 10; i++) {
                uint64_t x = 5 + 3 * (uint64_t)(chunk * 10 + i);
                ml_vprof_add(&p, 2 - t, x, ML_Q_VAL_INT, 8);
                ml_vprof_add(&one, 0, x, ML_Q_VAL_INT, 8);
            }
    assert_int_equal(cls(&p, &v, &s), ML_VK_STRIDED);
    assert_int_equal(v, 5);
    assert_int_equal(s, 3);
    assert_string_equal(ml_vprof_fmt(&p, s, 1, buf, sizeof(buf)), "3");
    /* the same values as one thread's sequence restart: no progression, too many for a set */
    assert_int_equal(cls(&one, &v, &s), ML_VK_VARIED);
    assert_int_equal(one.overflow, 1);
    ml_vprof_fini(&p);
    ml_vprof_fini(&one);
}

static void strides_disagree(void **state)
{
    struct ml_vprof p = {0};

    (void)state;
    for (uint64_t i = 0; i < 20; i++) {
        ml_vprof_add(&p, 0, i, ML_Q_VAL_INT, 4);
        ml_vprof_add(&p, 1, 2 * i, ML_Q_VAL_INT, 4);
    }
    assert_int_equal(cls(&p, NULL, NULL), ML_VK_VARIED);
    ml_vprof_fini(&p);
    /* a repeat (step 0) breaks a progression: 3, 3, 4 is a set */
    memset(&p, 0, sizeof(p));
    ml_vprof_add(&p, 0, 3, ML_Q_VAL_INT, 4);
    ml_vprof_add(&p, 0, 3, ML_Q_VAL_INT, 4);
    ml_vprof_add(&p, 0, 4, ML_Q_VAL_INT, 4);
    assert_int_equal(cls(&p, NULL, NULL), ML_VK_SET);
    ml_vprof_fini(&p);
    /* threads with one value each have no step: a set */
    memset(&p, 0, sizeof(p));
    ml_vprof_add(&p, 0, 5, ML_Q_VAL_INT, 4);
    ml_vprof_add(&p, 1, 9, ML_Q_VAL_INT, 4);
    assert_int_equal(cls(&p, NULL, NULL), ML_VK_SET);
    ml_vprof_fini(&p);
}

static void three_value_set(void **state)
{
    static const uint64_t three[3] = {10, 20, 40};
    struct ml_vprof p = {0};
    uint64_t v, s;

    (void)state;
    for (int i = 0; i < 1000; i++)
        ml_vprof_add(&p, 0, three[i % 3], ML_Q_VAL_INT, 4);
    assert_int_equal(cls(&p, &v, &s), ML_VK_SET);
    assert_int_equal(v, 10); /* 334 times, the others 333 */
    assert_int_equal(s, 0);
    assert_int_equal(p.nvals, 3);
    ml_vprof_fini(&p);
    /* ties: the smallest value */
    memset(&p, 0, sizeof(p));
    for (int i = 0; i < 10; i++)
        ml_vprof_add(&p, 0, i % 2 ? 4 : 9, ML_Q_VAL_INT, 4);
    assert_int_equal(cls(&p, &v, NULL), ML_VK_SET);
    assert_int_equal(v, 4);
    ml_vprof_fini(&p);
}

/* 8 distinct values are a set, 9 are not. */
static void set_bound(void **state)
{
    struct ml_vprof p = {0};

    (void)state;
    for (int i = 0; i < 80; i++)
        ml_vprof_add(&p, 0, (uint64_t)((i * 5) % ML_VPROF_SET_MAX), ML_Q_VAL_INT, 4);
    assert_int_equal(cls(&p, NULL, NULL), ML_VK_SET);
    assert_int_equal(p.nvals, ML_VPROF_SET_MAX);
    ml_vprof_add(&p, 0, 100, ML_Q_VAL_INT, 4);
    assert_int_equal(cls(&p, NULL, NULL), ML_VK_VARIED);
    ml_vprof_fini(&p);
}

/* Integer steps are modulo the load's width: bytes wrap, negative steps cross zero. */
static void wrapping(void **state)
{
    struct ml_vprof p = {0};
    uint64_t v, s;
    char buf[64];

    (void)state;
    for (int i = 0; i < 600; i++)
        ml_vprof_add(&p, 0, (uint64_t)(250 + i) & 0xff, ML_Q_VAL_INT, 1);
    assert_int_equal(cls(&p, &v, &s), ML_VK_STRIDED);
    assert_int_equal(v, 250);
    assert_int_equal(s, 1);
    ml_vprof_fini(&p);
    memset(&p, 0, sizeof(p));
    for (int i = 0; i < 20; i++)
        ml_vprof_add(&p, 0, (uint64_t)(uint32_t)(3 - i), ML_Q_VAL_INT, 4);
    assert_int_equal(cls(&p, &v, &s), ML_VK_STRIDED);
    assert_string_equal(ml_vprof_fmt(&p, s, 1, buf, sizeof(buf)), "-1");
    assert_string_equal(ml_vprof_fmt(&p, (uint32_t)-7, 0, buf, sizeof(buf)), "-7");
    ml_vprof_fini(&p);
}

static void floats_and_pointers(void **state)
{
    struct ml_vprof p = {0};
    uint64_t v, s;
    char buf[64];

    (void)state;
    for (int i = 0; i < 20; i++)
        ml_vprof_add(&p, 0, dbits(0.5 * i), ML_Q_VAL_DOUBLE, 8);
    assert_int_equal(cls(&p, &v, &s), ML_VK_STRIDED);
    assert_string_equal(ml_vprof_fmt(&p, v, 0, buf, sizeof(buf)), "0");
    assert_string_equal(ml_vprof_fmt(&p, s, 1, buf, sizeof(buf)), "0.5");
    ml_vprof_fini(&p);
    /* 0.1 steps round differently each time: not a progression */
    memset(&p, 0, sizeof(p));
    for (double x = 0; x < 3; x += 0.1)
        ml_vprof_add(&p, 0, dbits(x), ML_Q_VAL_DOUBLE, 8);
    assert_int_equal(cls(&p, NULL, NULL), ML_VK_VARIED);
    ml_vprof_fini(&p);
    memset(&p, 0, sizeof(p));
    for (int i = 0; i < 10; i++)
        ml_vprof_add(&p, 0, fbits(i % 2 ? -2.25f : 1.5f), ML_Q_VAL_FLOAT, 4);
    assert_int_equal(cls(&p, &v, NULL), ML_VK_SET);
    assert_string_equal(ml_vprof_fmt(&p, v, 0, buf, sizeof(buf)), "1.5");
    ml_vprof_fini(&p);
    memset(&p, 0, sizeof(p));
    for (uint64_t i = 0; i < 10; i++)
        ml_vprof_add(&p, 0, 0x1000 + 16 * i, ML_Q_VAL_PTR, 8);
    assert_int_equal(cls(&p, &v, &s), ML_VK_STRIDED);
    assert_string_equal(ml_vprof_fmt(&p, v, 0, buf, sizeof(buf)), "0x1000");
    assert_string_equal(ml_vprof_fmt(&p, s, 1, buf, sizeof(buf)), "16");
    ml_vprof_fini(&p);
}

/* Merging: counts add; one thread's halves with one stride stay a progression. */
static void merge(void **state)
{
    struct ml_vprof a = {0}, b = {0}, c = {0}, into = {0};
    uint64_t v, s;

    (void)state;
    for (uint64_t i = 0; i < 10; i++) {
        ml_vprof_add(&a, 0, 2 * i, ML_Q_VAL_INT, 4);
        ml_vprof_add(&b, 0, 100 + 2 * i, ML_Q_VAL_INT, 4);
        ml_vprof_add(&c, 1, 3 * i, ML_Q_VAL_INT, 4);
    }
    ml_vprof_merge(&into, &a);
    assert_int_equal(cls(&into, &v, &s), ML_VK_STRIDED);
    ml_vprof_merge(&into, &b);
    assert_int_equal(cls(&into, &v, &s), ML_VK_STRIDED);
    assert_int_equal(s, 2);
    assert_int_equal(into.n, 20);
    ml_vprof_merge(&into, &c); /* another thread with another stride */
    assert_int_equal(cls(&into, NULL, NULL), ML_VK_VARIED);
    assert_int_equal(into.nseq, 2);
    ml_vprof_fini(&a);
    ml_vprof_fini(&b);
    ml_vprof_fini(&c);
    ml_vprof_fini(&into);
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* The classification of docs/profile-modules.md, recomputed from the whole sequences. */
static enum ml_vkind brute(const uint32_t *thr, const uint64_t *val, int n, uint64_t *stride)
{
    uint64_t distinct[64];
    int nd = 0, have = 0, ok = 1;

    for (int i = 0; i < n; i++) {
        int k = 0;
        while (k < nd && distinct[k] != val[i])
            k++;
        if (k == nd && nd < 64)
            distinct[nd++] = val[i];
    }
    if (nd == 1)
        return ML_VK_CONSTANT;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (thr[j] == thr[i]) { /* the next value of the same thread */
                uint64_t d = val[j] - val[i];
                if (!d || (have && d != *stride))
                    ok = 0;
                *stride = d;
                have = 1;
                break;
            }
    if (have && ok)
        return ML_VK_STRIDED;
    return nd <= (int)ML_VPROF_SET_MAX ? ML_VK_SET : ML_VK_VARIED;
}

static void brute_force(void **state)
{
    int seen[ML_VK_VARIED + 1] = {0};

    (void)state;
    for (int round = 0; round < 3000; round++) {
        struct ml_vprof p = {0};
        uint32_t thr[40];
        uint64_t val[40], cur[3], step[3], v, s, bs = 0;
        int n = 1 + (int)(next() % 40), shape = (int)(next() % 4);
        for (int t = 0; t < 3; t++) {
            cur[t] = next() % 4;
            step[t] = shape == 0 ? 2 : next() % 3;
        }
        for (int i = 0; i < n; i++) {
            uint32_t t = (uint32_t)(next() % (shape == 3 ? 1 : 3));
            thr[i] = t;
            val[i] = shape == 1 ? next() % 6 : cur[t];
            cur[t] += next() % 17 ? step[t] : 1;
            ml_vprof_add(&p, t, val[i], ML_Q_VAL_INT, 8);
        }
        enum ml_vkind want = brute(thr, val, n, &bs), got = cls(&p, &v, &s);
        assert_int_equal(got, want);
        seen[got]++;
        if (want == ML_VK_STRIDED)
            assert_int_equal(s, bs);
        ml_vprof_fini(&p);
    }
    for (int k = ML_VK_CONSTANT; k <= ML_VK_VARIED; k++)
        assert_true(seen[k] > 100); /* every class was exercised */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(constant),
        cmocka_unit_test(strided_per_thread),
        cmocka_unit_test(strides_disagree),
        cmocka_unit_test(three_value_set),
        cmocka_unit_test(set_bound),
        cmocka_unit_test(wrapping),
        cmocka_unit_test(floats_and_pointers),
        cmocka_unit_test(merge),
        cmocka_unit_test(brute_force),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
