/* Unit tests of hardware counter event names and arithmetic (src/runtime/pmu-calc.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

/* The runtime is not in the tool library: compile its pure part here, as the runtime does. */
#include "runtime/pmu-calc.c"

static void expect_event(const char *name, uint32_t type, uint64_t config)
{
    struct ml_pmu_event ev[ML_MAX_EVENTS];
    char bad[64];

    assert_int_equal(ml_pmu_parse(name, ev, ML_MAX_EVENTS, bad, sizeof(bad)), 1);
    assert_int_equal(ev[0].type, type);
    assert_int_equal(ev[0].config, config);
    assert_string_equal(ev[0].name, name);
}

static void test_names(void **state)
{
    (void)state;
    expect_event("cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES);
    expect_event("instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS);
    expect_event("cache-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES);
    expect_event("branch-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_MISSES);
    expect_event("ref-cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_REF_CPU_CYCLES);
    expect_event("task-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK);
    expect_event("cs", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES);
    expect_event("page-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS);
    /* Cache events: id | op << 8 | result << 16, as perf encodes them. */
    expect_event("L1-dcache-loads", PERF_TYPE_HW_CACHE, 0x00000);
    expect_event("L1-dcache-load-misses", PERF_TYPE_HW_CACHE, 0x10000);
    expect_event("L1-dcache-stores", PERF_TYPE_HW_CACHE, 0x00100);
    expect_event("L1-icache-load-misses", PERF_TYPE_HW_CACHE, 0x10001);
    expect_event("LLC-load-misses", PERF_TYPE_HW_CACHE, 0x10002);
    expect_event("LLC-store-misses", PERF_TYPE_HW_CACHE, 0x10102);
    expect_event("dTLB-load-misses", PERF_TYPE_HW_CACHE, 0x10003);
    expect_event("iTLB-loads", PERF_TYPE_HW_CACHE, 0x00004);
    expect_event("branch-loads", PERF_TYPE_HW_CACHE, 0x00005);
    expect_event("node-prefetch-misses", PERF_TYPE_HW_CACHE, 0x10206);
    expect_event("L1-dcache-prefetches", PERF_TYPE_HW_CACHE, 0x00200);
    expect_event("r01c2", PERF_TYPE_RAW, 0x1c2);
    expect_event("rFFFFFFFFFFFFFFFF", PERF_TYPE_RAW, UINT64_MAX);
}

static void test_lists(void **state)
{
    struct ml_pmu_event ev[ML_MAX_EVENTS];
    char bad[64];

    (void)state;
    assert_int_equal(ml_pmu_parse("cycles,instructions,L1-dcache-load-misses", ev, ML_MAX_EVENTS,
                                  bad, sizeof(bad)),
                     3);
    assert_string_equal(ev[2].name, "L1-dcache-load-misses");
    assert_int_equal(ml_pmu_parse("cycles,bogus", ev, ML_MAX_EVENTS, bad, sizeof(bad)), -1);
    assert_string_equal(bad, "bogus");
    assert_int_equal(ml_pmu_parse("cycles,,instructions", ev, ML_MAX_EVENTS, bad, sizeof(bad)), -1);
    assert_string_equal(bad, "");
    assert_int_equal(ml_pmu_parse("", ev, ML_MAX_EVENTS, bad, sizeof(bad)), -1);
    assert_int_equal(ml_pmu_parse("cycles,", ev, ML_MAX_EVENTS, bad, sizeof(bad)), -1);
    assert_int_equal(ml_pmu_parse("L1-dcache-loadz", ev, ML_MAX_EVENTS, bad, sizeof(bad)), -1);
    assert_int_equal(ml_pmu_parse("L1-dcache", ev, ML_MAX_EVENTS, bad, sizeof(bad)), -1);
    assert_int_equal(ml_pmu_parse("r", ev, ML_MAX_EVENTS, bad, sizeof(bad)), -1);
    assert_int_equal(ml_pmu_parse("r12g", ev, ML_MAX_EVENTS, bad, sizeof(bad)), -1);
    assert_int_equal(ml_pmu_parse("r11111111111111111", ev, ML_MAX_EVENTS, bad, sizeof(bad)), -1);
    assert_int_equal(ml_pmu_parse("cycles:u", ev, ML_MAX_EVENTS, bad, sizeof(bad)), -1);
    assert_int_equal(
        ml_pmu_parse("an-event-name-much-longer-than-31-bytes", ev, ML_MAX_EVENTS, bad, 8), -1);
    assert_string_equal(bad, "an-even"); /* truncated to the buffer */
    assert_int_equal(ml_pmu_parse("cs,cs,cs,cs,cs,cs,cs,cs", ev, ML_MAX_EVENTS, bad, sizeof(bad)),
                     8);
    assert_int_equal(
        ml_pmu_parse("cs,cs,cs,cs,cs,cs,cs,cs,cycles", ev, ML_MAX_EVENTS, bad, sizeof(bad)), -2);
    assert_string_equal(bad, "cycles");
}

/* rdpmc returns pmc_width bits; the value is sign-extended, then added to the page's offset. */
static void test_sext(void **state)
{
    (void)state;
    assert_int_equal(ml_pmu_sext(0xffffffffffffull, 48), -1);
    assert_int_equal(ml_pmu_sext(0x7fffffffffffull, 48), 0x7fffffffffffll);
    assert_int_equal(ml_pmu_sext(0x800000000000ull, 48), -0x800000000000ll);
    assert_int_equal(ml_pmu_sext(0xff, 8), -1);
    assert_int_equal(ml_pmu_sext(0x80, 8), -128);
    assert_int_equal(ml_pmu_sext(0x7f, 8), 127);
    assert_int_equal(ml_pmu_sext(1, 1), -1);
    assert_int_equal(ml_pmu_sext(0, 1), 0);
    assert_int_equal(ml_pmu_sext(0x123456789abcdef0ull, 64), (int64_t)0x123456789abcdef0ull);
    /* Bits above the width (garbage from the instruction) are ignored. */
    assert_int_equal(ml_pmu_sext(0xabcd000000000005ull, 48), 5);
    /* A counter just past the kernel's last update: offset is negative, the sum is right. */
    {
        int64_t offset = -0xfffffffffff0ll;
        uint64_t raw = 0xfffffffffffaull; /* 48-bit counter reads -6 sign-extended */
        assert_int_equal(offset + ml_pmu_sext(raw, 48), -0xfffffffffff0ll - 6);
        raw = 0x000000000010ull;
        assert_int_equal(offset + ml_pmu_sext(raw, 48), -0xfffffffffff0ll + 16);
    }
}

/* cap_user_time: ns = offset + cyc * mult >> shift, computed without overflow. */
static void test_time_delta(void **state)
{
    (void)state;
    /* mult / 2^shift = 1: one ns per cycle. */
    assert_int_equal(ml_pmu_time_delta(123456, 10, 1024, 0), 123456);
    assert_int_equal(ml_pmu_time_delta(123456, 10, 1024, 1000), 124456);
    /* 2.5 GHz: 0.4 ns per cycle, mult = 0.4 x 2^31. */
    assert_int_equal(ml_pmu_time_delta(2500000000ull, 31, 858993459, 0), 999999999);
    /* A large counter: cyc * mult would overflow 64 bits, the split formula does not. */
    assert_int_equal(ml_pmu_time_delta(1ull << 62, 31, 1u << 31, 0), 1ull << 62);
    assert_int_equal(ml_pmu_time_delta((1ull << 62) + 3, 1, 1, 0), (1ull << 61) + 1);
    /* The offset may be negative in two's complement: unsigned wrap gives the right answer. */
    assert_int_equal(ml_pmu_time_delta(1000, 0, 1, (uint64_t)-400), 600);
}

/* Multiplexing: the delta is scaled by enabled / running time, as perf stat does. */
static void test_scale(void **state)
{
    (void)state;
    assert_int_equal(ml_pmu_scale(1000, 200, 100), 2000);
    assert_int_equal(ml_pmu_scale(1000, 100, 100), 1000);
    assert_int_equal(ml_pmu_scale(999, 3, 2), 1498);
    assert_int_equal(ml_pmu_scale(1000, 0, 0), 1000);
    assert_int_equal(ml_pmu_scale(1000, 100, 0), 0);
    assert_int_equal(ml_pmu_scale(0, 100, 50), 0);
    /* No overflow in the product. */
    assert_int_equal(ml_pmu_scale(1ull << 60, 1ull << 40, 1ull << 39), 1ull << 61);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names), cmocka_unit_test(test_lists),
        cmocka_unit_test(test_sext),  cmocka_unit_test(test_time_delta),
        cmocka_unit_test(test_scale),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
