/* Unit tests of shadow memory (src/backend/shadow.c): ratios, laziness, policy, clearing, limit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend/shadow.h"

#define N 5000

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Metadata written at scattered addresses reads back, for every ratio; nothing aliases. */
static void test_ratios(void **state)
{
    static uint64_t addr[N];

    (void)state;
    for (uint32_t ratio = 1; ratio <= 64; ratio *= 2) {
        struct ml_shadow *s = ml_shadow_new(ratio, 0);
        assert_non_null(s);
        for (int i = 0; i < N; i++) {
            /* clustered (same pages) and spread over the 47-bit space, distinct per i */
            uint64_t base = i % 2 ? 0x7ffd00000000ull : (next() & 0x7fffffff0000ull);
            addr[i] = base + (uint64_t)i * 64 * 2;
            uint8_t *m = ml_shadow_at(s, addr[i]);
            assert_non_null(m);
            for (uint32_t k = 0; k < ratio; k++)
                m[k] = (uint8_t)(i * 7 + k + 1);
        }
        for (int i = 0; i < N; i++) {
            const uint8_t *m = ml_shadow_peek(s, addr[i]);
            for (uint32_t k = 0; k < ratio; k++)
                assert_int_equal(m[k], (uint8_t)(i * 7 + k + 1));
            /* the byte after it was never written: zero, whatever page holds it */
            m = ml_shadow_peek(s, addr[i] + 1);
            for (uint32_t k = 0; k < ratio; k++)
                assert_int_equal(m[k], 0);
        }
        ml_shadow_free(s);
    }
}

/* Pages that share a slot of the page cache (numbers 64 apart), used in turn, keep their own
 * metadata; so do pages in different slots used in turn. */
static void test_page_cache(void **state)
{
    struct ml_shadow *s = ml_shadow_new(2, 0);
    const uint64_t page = 1ull << ML_SHADOW_PAGE_BITS;

    (void)state;
    assert_non_null(s);
    for (int round = 0; round < 3; round++)
        for (uint64_t i = 0; i < 4 * ML_SHADOW_TLB; i++) {
            uint64_t a = 0x10000000ull + (i % 4) * ML_SHADOW_TLB * page + (i / 4) * page + 8 * i;
            uint8_t *m = ml_shadow_at(s, a);
            assert_non_null(m);
            if (round == 0) {
                assert_int_equal(m[0], 0);
                m[0] = (uint8_t)(i + 1);
                m[1] = (uint8_t)(i * 3);
            }
            assert_int_equal(m[0], (uint8_t)(i + 1));
            assert_int_equal(ml_shadow_peek(s, a)[1], (uint8_t)(i * 3));
        }
    ml_shadow_free(s);
}

/* Never-announced addresses read as zero without costing memory; kernel addresses are refused. */
static void test_policy(void **state)
{
    struct ml_shadow *s = ml_shadow_new(4, 0);
    const uint8_t *z;

    (void)state;
    z = ml_shadow_peek(s, 0x123456789ull);
    for (int k = 0; k < 4 * 64; k++)
        assert_int_equal(z[k], 0);
    assert_int_equal(s->mapped, 0);
    assert_null(ml_shadow_at(s, 0xffff800000001000ull));
    assert_null(ml_shadow_at(s, 1ull << 48));
    assert_int_equal(s->unshadowed, 2);
    assert_int_equal(ml_shadow_peek(s, 1ull << 48)[0], 0);
    assert_non_null(ml_shadow_at(s, 0)); /* address 0 is a user address like any other */
    assert_non_null(ml_shadow_at(s, (1ull << 48) - 1));
    assert_int_equal(s->mapped, 2 * 4 * 65536);
    ml_shadow_free(s);
}

/* Clearing a range zeroes exactly it, whole pages and parts, and keeps its neighbours. */
static void test_clear(void **state)
{
    struct ml_shadow *s = ml_shadow_new(2, 0);
    const uint64_t lo = 0x10000ull * 5 + 100, hi = 0x10000ull * 8 + 300;

    (void)state;
    for (uint64_t a = lo - 50; a < hi + 50; a++) {
        uint8_t *m = ml_shadow_at(s, a);
        m[0] = 1;
        m[1] = 2;
    }
    ml_shadow_clear(s, lo, hi);
    for (uint64_t a = lo - 50; a < hi + 50; a++) {
        const uint8_t *m = ml_shadow_peek(s, a);
        int in = a >= lo && a < hi;
        assert_int_equal(m[0], in ? 0 : 1);
        assert_int_equal(m[1], in ? 0 : 2);
    }
    /* cleared pages work again */
    *ml_shadow_at(s, 0x10000ull * 6) = 9;
    assert_int_equal(*ml_shadow_peek(s, 0x10000ull * 6), 9);
    ml_shadow_clear(s, UINT64_MAX - 10, UINT64_MAX); /* beyond the space: nothing, no hang */
    ml_shadow_free(s);
}

/* With a limit, pages beyond it are not mapped: NULL and counted, older pages still work. */
static void test_limit(void **state)
{
    struct ml_shadow *s = ml_shadow_new(1, 3 * 65536);

    (void)state;
    for (uint64_t p = 0; p < 3; p++)
        assert_non_null(ml_shadow_at(s, p << 16));
    assert_null(ml_shadow_at(s, 3ull << 16));
    assert_int_equal(s->unshadowed, 1);
    assert_non_null(ml_shadow_at(s, (1ull << 16) + 5));
    ml_shadow_free(s);
}

static void test_bad_ratio(void **state)
{
    (void)state;
    assert_null(ml_shadow_new(0, 0));
    assert_null(ml_shadow_new(3, 0));
    assert_null(ml_shadow_new(128, 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ratios),    cmocka_unit_test(test_policy),
        cmocka_unit_test(test_clear),     cmocka_unit_test(test_limit),
        cmocka_unit_test(test_bad_ratio), cmocka_unit_test(test_page_cache),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
