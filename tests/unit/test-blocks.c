/* Unit tests of the ordered heap-block map (src/backend/blocks.c) against a brute-force array. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend/blocks.h"

#define SLOTS 2000 /* block i may live at [i * 64, i * 64 + size), size <= 64 */

static uint64_t rng = 88172645463325252ull;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Adds, replaces and removes at random; every lookup agrees with the array. */
static void test_random_against_brute_force(void **state)
{
    static uint64_t size[SLOTS];
    static int live[SLOTS];
    struct ml_blocks *b = ml_blocks_new();
    uint64_t n = 0;

    (void)state;
    assert_non_null(b);
    for (int k = 0; k < 300000; k++) {
        uint64_t i = next() % SLOTS, base = 0x100000 + i * 64, op = next() % 3;
        if (op == 0) {
            struct ml_block *x = ml_blocks_add(b, base, next() % 65);
            assert_non_null(x);
            n += !live[i];
            live[i] = 1;
            size[i] = x->size;
            x->key = i;
        } else if (op == 1) {
            assert_int_equal(ml_blocks_remove(b, base), live[i] ? 0 : -ENOENT);
            n -= live[i];
            live[i] = 0;
        } else {
            uint64_t off = next() % 64;
            struct ml_block *h = ml_blocks_holding(b, base + off), *at = ml_blocks_at(b, base);
            int want = live[i] && off < (size[i] ? size[i] : 1);
            assert_int_equal(h != NULL, want);
            if (h)
                assert_int_equal(h->key, i);
            assert_int_equal(at != NULL, live[i]);
        }
        assert_int_equal(ml_blocks_count(b), n);
    }
    assert_null(ml_blocks_holding(b, 0x100000 - 1));
    assert_null(ml_blocks_holding(b, 0x100000 + SLOTS * 64));
    ml_blocks_free(b);
}

/* Large blocks hold every byte to their end and nothing after; a zero-size block its start. */
static void test_bounds(void **state)
{
    struct ml_blocks *b = ml_blocks_new();

    (void)state;
    ml_blocks_add(b, 1000, 1u << 20)->key = 1;
    ml_blocks_add(b, 1000 + (1u << 20), 0)->key = 2;
    assert_int_equal(ml_blocks_holding(b, 1000)->key, 1);
    assert_int_equal(ml_blocks_holding(b, 1000 + (1u << 20) - 1)->key, 1);
    assert_int_equal(ml_blocks_holding(b, 1000 + (1u << 20))->key, 2);
    assert_null(ml_blocks_holding(b, 1001 + (1u << 20)));
    assert_null(ml_blocks_holding(b, 999));
    assert_null(ml_blocks_holding(b, UINT64_MAX));
    ml_blocks_free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_against_brute_force),
        cmocka_unit_test(test_bounds),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
