/* Unit tests of the sampling policy (src/runtime/sample.h): count rule, random phase, time rule. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "runtime/sample.h"

#define NEVER UINT64_MAX /* t0 that keeps the time rule from firing */

/* n = 1 measures everything, whatever the clock says. */
static void test_all(void **state)
{
    struct ml_sample s;

    (void)state;
    ml_sample_start(&s, 1, 12345, 0);
    for (int i = 0; i < 100; i++)
        assert_true(ml_sample_decide(&s, 1, NEVER, 0));
}

/* Count rule: exactly one in n, the first at the drawn phase, whatever the phase. */
static void test_count_rule(void **state)
{
    const uint64_t n = 10;

    (void)state;
    for (uint64_t rnd = 0; rnd < 3 * n; rnd++) {
        struct ml_sample s;
        int first = -1, measured = 0;
        ml_sample_start(&s, n, rnd, 0);
        for (int i = 0; i < 1000; i++)
            if (ml_sample_decide(&s, n, NEVER, 0)) {
                if (first < 0)
                    first = i;
                else
                    assert_int_equal((i - first) % (int)n, 0);
                measured++;
            }
        assert_int_equal(first, (int)(rnd % n));
        assert_int_equal(measured, 1000 / (int)n);
    }
}

/*
 * Random phase: with phases drawn from the runtime's generator, a region run
 * k < n times is measured in about k/n of the runs (not always, as a
 * "first execution" rule would do), and the measured execution's position is
 * spread over the first n.
 */
static void test_random_phase(void **state)
{
    const uint64_t n = 100, runs = 20000;
    uint64_t rng = 0x9e3779b97f4a7c15ull, measured = 0, first[4] = {0};

    (void)state;
    for (uint64_t r = 0; r < runs; r++) {
        struct ml_sample s;
        ml_sample_start(&s, n, ml_sample_rand(&rng), 0);
        for (int i = 0; i < 3; i++)
            if (ml_sample_decide(&s, n, NEVER, 0)) {
                measured++;
                first[i]++;
            }
    }
    /* Expected 3/100 of 20000 = 600; the bounds are > 8 standard deviations wide. */
    assert_in_range(measured, 400, 800);
    for (int i = 0; i < 3; i++)
        assert_in_range(first[i], 100, 300);
    assert_int_not_equal(rng, 0);
}

/* Time rule: before any measurement, t0 after the first entry; then (n-1) x duration. */
static void test_time_rule(void **state)
{
    const uint64_t n = 1000, t0 = 100;
    struct ml_sample s;

    (void)state;
    ml_sample_start(&s, n, 500, 1000); /* phase 500: the count rule is far off */
    assert_false(ml_sample_decide(&s, n, t0, 1000));
    assert_false(ml_sample_decide(&s, n, t0, 1099));
    assert_true(ml_sample_decide(&s, n, t0, 1100));
    ml_sample_done(&s, 1100, 1150); /* a 50-tick execution: next gap 999 x 50 */
    assert_false(ml_sample_decide(&s, n, t0, 1150 + 999 * 50 - 1));
    assert_true(ml_sample_decide(&s, n, t0, 1150 + 999 * 50));
    /* A short execution: the gap is at least t0. */
    ml_sample_done(&s, 60000, 60000);
    assert_false(ml_sample_decide(&s, n, t0, 60099));
    assert_true(ml_sample_decide(&s, n, t0, 60100));
    /* A stale clock (the thread's last reading, older than the last measurement) never fires. */
    ml_sample_done(&s, 70000, 70010);
    assert_false(ml_sample_decide(&s, n, t0, 69000));
}

/*
 * Durations of unmeasured (young) executions count too: back-to-back long
 * executions never trigger the rule, sparse ones do.
 */
static void test_time_rule_seen(void **state)
{
    const uint64_t n = 20, t0 = 10;
    struct ml_sample s;

    (void)state;
    ml_sample_start(&s, n, 7, 0); /* the count rule measures the 8th execution */
    /* Back to back, 100 ticks each: the rule needs 19 x 100 ticks since the first entry. */
    assert_false(ml_sample_decide(&s, n, t0, 0));
    ml_sample_seen(&s, 0, 100);
    assert_false(ml_sample_decide(&s, n, t0, 100));
    ml_sample_seen(&s, 100, 200);
    assert_false(ml_sample_decide(&s, n, t0, 200));
    ml_sample_seen(&s, 200, 300);
    /* Then idle: the next execution 1900 ticks after the first entry is measured. */
    assert_false(ml_sample_decide(&s, n, t0, 1899));
    assert_true(ml_sample_decide(&s, n, t0, 1900));
}

/* A huge duration times n overflows: the time rule must not wrap around and fire. */
static void test_time_overflow(void **state)
{
    struct ml_sample s;

    (void)state;
    ml_sample_start(&s, 1000000, 999, 0);
    ml_sample_done(&s, 0, UINT64_MAX / 100);
    assert_false(ml_sample_decide(&s, 1000000, 10, UINT64_MAX / 100 + UINT64_MAX / 200));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all),           cmocka_unit_test(test_count_rule),
        cmocka_unit_test(test_random_phase),  cmocka_unit_test(test_time_rule),
        cmocka_unit_test(test_time_overflow), cmocka_unit_test(test_time_rule_seen),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
