/* Sampling policy of region executions (MEMLENS_SAMPLE=N): which executions are measured. */
#ifndef ML_RUNTIME_SAMPLE_H
#define ML_RUNTIME_SAMPLE_H

#include <stdint.h>

/*
 * Pure functions on one (thread, region) state, shared by the runtime and its
 * unit test. They decide only for an execution that no other region's
 * execution encloses on the thread; nested executions inherit the decision of
 * the enclosing one (see region.c).
 *
 * Two rules, either of which measures an execution:
 *
 *  - count rule: exactly one in N executions, starting at a random phase
 *    (the first measured execution is uniform among the first N). A region
 *    that runs k < N times is then measured with probability k/N: no bias
 *    towards the first, cold execution (first-touch page faults, cold caches),
 *    and the expected extrapolation is right.
 *
 *  - time rule: an execution starting at least max(T0, (N - 1) x d) ticks
 *    after the end of the region's last measured execution is measured (before
 *    any measurement, the gap counts from the region's first entry on the
 *    thread), d being the duration of the region's latest timed execution:
 *    measured, or unmeasured but timed while the region is young. A region
 *    whose executions are sparse in time (a checkpoint every minute) is thus
 *    measured about once per N times its duration, i.e. about 1/N of its own
 *    time, instead of once per N executions; back-to-back long executions
 *    never trigger it, so the rule cannot raise the cost above about 1/N.
 *    The first execution is never forced: a region that runs once is measured
 *    with probability 1/N (use MEMLENS_SAMPLE=1 for such programs).
 *
 * `now` is the caller's notion of the current tick; the runtime reads the
 * clock at entry and exit only during the first ML_SAMPLE_YOUNG executions of
 * a region on a thread, and otherwise passes the thread's last clock reading
 * (taken by measured executions), so that an unmeasured execution of a
 * frequent region reads no clock.
 */
struct ml_sample {
    uint64_t left; /* executions to skip before the count rule measures one */
    uint64_t last; /* tick: end of the last measured execution, or the first entry */
    uint64_t span; /* ticks of the latest timed execution, 0 before the first */
};

/* Executions of a region on a thread during which entry reads the clock for the time rule. */
#define ML_SAMPLE_YOUNG 1024

/* xorshift64: the per-thread random source for phases; state must be non-zero. */
static inline uint64_t ml_sample_rand(uint64_t *state)
{
    uint64_t x = *state;

    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    return x;
}

/* Starts the state at the region's first entry on a thread, with a phase drawn from rnd. */
static inline void ml_sample_start(struct ml_sample *s, uint64_t n, uint64_t rnd, uint64_t now)
{
    s->left = n > 1 ? rnd % n : 0;
    s->last = now;
    s->span = 0;
}

/* Whether the execution starting now is measured (n >= 1 executions, t0 in ticks). */
static inline int ml_sample_decide(struct ml_sample *s, uint64_t n, uint64_t t0, uint64_t now)
{
    uint64_t gap;

    if (s->left == 0) {
        s->left = n - 1;
        return 1;
    }
    s->left--;
    gap = (n - 1) * s->span;
    if (s->span && gap / s->span != n - 1)
        gap = UINT64_MAX; /* overflow: the time rule cannot fire */
    if (gap < t0)
        gap = t0;
    return now >= s->last && now - s->last >= gap;
}

/* Records the duration of an unmeasured execution that was timed (young region). */
static inline void ml_sample_seen(struct ml_sample *s, uint64_t start, uint64_t end)
{
    s->span = end - start;
}

/* Records a measured execution from tick start to tick end. */
static inline void ml_sample_done(struct ml_sample *s, uint64_t start, uint64_t end)
{
    s->last = end;
    s->span = end - start;
}

#endif
