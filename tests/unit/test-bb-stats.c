/* Unit tests of the bb harness's pure parts: lower envelope of timings, hex codec, address flags.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "bb/bb.h"

static void test_envelope_takes_quietest_pairs(void **state)
{
    /* pairs (a, b) with b = 2a + 10: slow phases scale both; a negative value is unclean */
    double a[] = {100, 130, 100.5, 101, 160, -99, 100.2, 140, 100.4, 100.1};
    double b[] = {210, 270, 211, 212, 330, 208, 210.4, 290, 210.8, 210.2};
    double ma, mb;
    unsigned n = ml_bb_envelope(a, b, 10, 4, 0.01, &ma, &mb);

    (void)state;
    assert_int_equal(n, 6); /* the unclean pair is dropped even though it is the smallest */
    assert_true(ma > 100.17 && ma < 100.18); /* mean of 100, 100.1, 100.2, 100.4 */
    assert_true(mb > 210.34 && mb < 210.36);
}

static void test_envelope_unreproduced_minimum(void **state)
{
    /* one lucky pair far below the rest: the minimum is not reproduced */
    double a[] = {80, 100, 105, 110};
    double b[] = {160, 200, 210, 220};
    double ma, mb;

    (void)state;
    assert_int_equal(ml_bb_envelope(a, b, 4, 2, 0.02, &ma, &mb), 1);
    assert_true(ma > 89.9 && ma < 90.1);
    assert_int_equal(ml_bb_envelope(a, b, 0, 2, 0.02, &ma, &mb), 0);
    assert_true(ma == 0 && mb == 0);
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
        cmocka_unit_test(test_envelope_takes_quietest_pairs),
        cmocka_unit_test(test_envelope_unreproduced_minimum),
        cmocka_unit_test(test_hex_roundtrip),
        cmocka_unit_test(test_flags),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
