/* Region clock for the runtime: cycle-resolution, monotonic, cheap to read. */
#ifndef ML_RUNTIME_CLOCK_H
#define ML_RUNTIME_CLOCK_H

#include <stdint.h>
#include <time.h>

#include "format/profile.h"

/*
 * x86-64: the TSC (invariant on every CPU this targets; calibrated against
 * CLOCK_MONOTONIC over the whole run, so start-up pays nothing). AArch64: the
 * virtual counter, whose frequency the kernel publishes. Elsewhere:
 * CLOCK_MONOTONIC in nanoseconds.
 */
#if defined(__x86_64__)
#define ML_RT_CLOCK ML_CLOCK_TSC
static inline uint64_t ml_rt_ticks(void)
{
    uint32_t lo, hi;

    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
    return ((uint64_t)hi << 32) | lo;
}
#elif defined(__aarch64__)
#define ML_RT_CLOCK ML_CLOCK_CNTVCT
static inline uint64_t ml_rt_ticks(void)
{
    uint64_t v;

    __asm__ volatile("isb; mrs %0, cntvct_el0" : "=r"(v));
    return v;
}
#else
#define ML_RT_CLOCK ML_CLOCK_MONOTONIC
static inline uint64_t ml_rt_ticks(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
#endif

static inline uint64_t ml_rt_real_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t ml_rt_mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
