/* Unit tests of the bb harness's pure parts: timing agreement, hex codec, address flags. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "bb/bb.h"

static void test_agree_picks_largest_group(void **state)
{
    /* 9 values within 2% of 100, 5 outliers above, 2 below */
    double v[] = {100,   101, 100.5, 250, 101.5, 100.2, 300, 99.9,
                  101.8, 40,  100.1, 260, 30,    100.7, 270, 280};
    double value;
    unsigned n = ml_bb_agree(v, 16, 0.02, &value);

    (void)state;
    assert_int_equal(n, 9);
    assert_true(value >= 100.1 && value <= 100.7);
}

static void test_agree_median_even(void **state)
{
    double v[] = {10, 12, 11, 13};
    double value;

    (void)state;
    assert_int_equal(ml_bb_agree(v, 4, 0.5, &value), 4);
    assert_true(value > 11.49 && value < 11.51);
    assert_int_equal(ml_bb_agree(v, 0, 0.02, &value), 0);
}

static void test_agree_nothing_agrees(void **state)
{
    double v[] = {1, 2, 4, 8, 16};
    double value;

    (void)state;
    assert_int_equal(ml_bb_agree(v, 5, 0.01, &value), 1);
}

static void test_hex_roundtrip(void **state)
{
    uint8_t buf[8];
    char out[17];
    size_t len;

    (void)state;
    assert_int_equal(ml_bb_hex_parse("4801D8", buf, sizeof(buf), &len), 0);
    assert_int_equal(len, 3);
    assert_int_equal(buf[0], 0x48);
    assert_int_equal(buf[2], 0xd8);
    ml_bb_hex_format(buf, len, out);
    assert_string_equal(out, "4801d8");
    assert_int_equal(ml_bb_hex_parse("0x48 01 d8", buf, sizeof(buf), &len), 0);
    assert_int_equal(len, 3);
    assert_int_equal(ml_bb_hex_parse("480", buf, sizeof(buf), &len), -EINVAL);
    assert_int_equal(ml_bb_hex_parse("4 801", buf, sizeof(buf), &len), -EINVAL);
    assert_int_equal(ml_bb_hex_parse("add %rax", buf, sizeof(buf), &len), -EINVAL);
    assert_int_equal(ml_bb_hex_parse("", buf, sizeof(buf), &len), -EINVAL);
    assert_int_equal(ml_bb_hex_parse("000102030405060708", buf, sizeof(buf), &len), -E2BIG);
}

static void test_flags(void **state)
{
    struct ml_bb_access in_line[] = {{0x12345600, 8, 0, 0}, {0x12345638, 8, 1, 1}};
    struct ml_bb_access split[] = {{0x1234563c, 8, 0, 0}};
    struct ml_bb_access alias[] = {{0x12346600, 8, 1, 0}, {0x12345604, 4, 0, 1}};
    struct ml_bb_access reads[] = {{0x12346600, 8, 0, 0}, {0x12345604, 4, 0, 1}};
    struct ml_bb_access apart[] = {{0x12346600, 8, 1, 0}, {0x12345608, 4, 0, 1}};

    (void)state;
    assert_int_equal(ml_bb_flags_compute(in_line, 2), 0);
    assert_int_equal(ml_bb_flags_compute(split, 1), ML_BB_FLAG_CROSS_LINE);
    assert_int_equal(ml_bb_flags_compute(alias, 2), ML_BB_FLAG_ALIAS);
    assert_int_equal(ml_bb_flags_compute(reads, 2), 0); /* two loads never conflict */
    assert_int_equal(ml_bb_flags_compute(apart, 2), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_agree_picks_largest_group),
        cmocka_unit_test(test_agree_median_even),
        cmocka_unit_test(test_agree_nothing_agrees),
        cmocka_unit_test(test_hex_roundtrip),
        cmocka_unit_test(test_flags),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
