/* Start-up calibration: the cost of a counter increment and of a measured region's timer pair. */
#include "runtime/clock.h"
#include "runtime/rt.h"

#include <string.h>

/*
 * Everything here runs once, in the first module's constructor, and takes
 * well under a millisecond: each measurement is a few thousand operations,
 * repeated a few times, keeping the minimum (the run least disturbed by
 * interrupts and other processes on a shared machine).
 */
#define ROUNDS 512 /* loop iterations per measurement, 8 increments each */
#define TRIES  7
#define PAIRS  256 /* empty measured executions per try */

static __thread uint64_t slots[8] __attribute__((tls_model("initial-exec")));

/*
 * Ticks of ROUNDS iterations that increment eight thread-local counters each
 * (with = 1) or only run the loop (with = 0). The empty asm with a memory
 * clobber keeps every increment a load, add and store to memory, as in
 * instrumented code, and stops the compiler from merging iterations.
 */
static __attribute__((noinline)) uint64_t loop_ticks(int with)
{
    uint64_t t0 = ml_rt_ticks();

    for (int i = 0; i < ROUNDS; i++) {
        if (with) {
            slots[0]++;
            slots[1]++;
            slots[2]++;
            slots[3]++;
            slots[4]++;
            slots[5]++;
            slots[6]++;
            slots[7]++;
        }
        __asm__ volatile("" ::: "memory");
    }
    return ml_rt_ticks() - t0;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

uint64_t ml_rt_calibrate(void)
{
    struct ml_thread_rec scratch;
    struct ml_rstate s;
    uint64_t with = UINT64_MAX, without = UINT64_MAX, pair = UINT64_MAX, whole = UINT64_MAX;
    uint64_t t0 = ml_rt_ticks(), ns0 = ml_rt_mono_ns(), ns;

    for (int k = 0; k < TRIES; k++) {
        with = min_u64(with, loop_ticks(1));
        without = min_u64(without, loop_ticks(0));
    }
    ml_rt.calib.incr_mticks = with > without ? (with - without) * 1000 / (ROUNDS * 8) : 0;

    /*
     * An empty measured execution records exactly the ticks between its two
     * clock reads: what every measured execution adds to its own time. The
     * scratch region id is out of range, so no counters are read.
     */
    memset(&scratch, 0, sizeof(scratch));
    for (int k = 0; k < TRIES; k++) {
        uint64_t t1 = ml_rt_ticks();
        memset(&s, 0, sizeof(s));
        for (int i = 0; i < PAIRS; i++) {
            ml_rt_measured_begin(&scratch, &s, ML_RT_MAX_REGIONS);
            ml_rt_measured_end(&scratch, &s, ML_RT_MAX_REGIONS);
        }
        pair = min_u64(pair, s.ticks * 1000 / PAIRS);
        whole = min_u64(whole, (ml_rt_ticks() - t1) / PAIRS);
    }
    ml_rt.calib.timer_mticks = pair;
    /* A timed execution also pays the calls into the runtime and their bookkeeping: half again,
       by a measurement of enter and exit with and without the timer pair (about 1.4 here). */
    ml_rt.slow_ticks = whole + whole / 2;

    ns = ml_rt_mono_ns() - ns0;
    return ns ? (ml_rt_ticks() - t0) * 1000000 / ns : 1;
}
