/* Hardware counters around measured region executions (MEMLENS_EVENTS): parsing, arithmetic,
 * runtime. */
#ifndef ML_RUNTIME_PMU_H
#define ML_RUNTIME_PMU_H

#include <stddef.h>
#include <stdint.h>

#include "format/profile.h"

/* One event of MEMLENS_EVENTS: perf_event_attr type and config, and its name as given. */
struct ml_pmu_event {
    uint32_t type; /* PERF_TYPE_HARDWARE, _SOFTWARE, _HW_CACHE or _RAW */
    uint64_t config;
    char name[ML_EVENT_NAME];
};

/* ---- pure functions (pmu-calc.c), also compiled by tests/unit/test-pmu.c ---- */

/*
 * Parses a comma-separated list of perf's generic event names (cycles,
 * instructions, cache-references, cache-misses, branches, branch-misses,
 * bus-cycles, ref-cycles, stalled-cycles-frontend/backend; cpu-clock,
 * task-clock, page-faults, context-switches, cpu-migrations, minor-faults,
 * major-faults, alignment-faults, emulation-faults; cache events
 * <cache>-<op>s and <cache>-<op>-misses with cache L1-dcache, L1-icache, LLC,
 * dTLB, iTLB, branch, node and op load, store, prefetch; raw rHEX) into
 * out[0..max-1]. Returns the number of events, or -1 for an empty or unknown
 * name and -2 for more than max events, with the offending token copied into
 * bad.
 */
int ml_pmu_parse(const char *list, struct ml_pmu_event *out, int max, char *bad, size_t badlen);

/* A counter value of `width` bits read with rdpmc, sign-extended to 64 bits (width 1..64). */
int64_t ml_pmu_sext(uint64_t raw, uint32_t width);

/*
 * Nanoseconds since the mmap page was last updated, from a TSC reading cyc and
 * the page's time_shift, time_mult and time_offset (perf_event_mmap_page's
 * cap_user_time formula, without overflow in the multiplication).
 */
uint64_t ml_pmu_time_delta(uint64_t cyc, uint16_t shift, uint32_t mult, uint64_t offset);

/*
 * A counter delta dv over an interval in which the event was enabled de ns
 * and running (scheduled on the PMU) dr ns: dv * de / dr, the estimate perf
 * stat prints when counters are multiplexed. dr = 0 with de > 0 means the
 * counter never ran in the interval: 0 (nothing measured). de = dr = 0 (no
 * time information): dv unscaled.
 */
uint64_t ml_pmu_scale(uint64_t dv, uint64_t de, uint64_t dr);

/* ---- runtime (pmu.c) ---- */

struct ml_thread_rec;

/*
 * Reads MEMLENS_EVENTS and opens the events once on the calling thread to see
 * that they work; on failure prints one line on stderr and disables events.
 * Called once, at runtime initialisation.
 */
void ml_pmu_init(void);
/* Events in use (0: none), and their names. */
uint32_t ml_pmu_nevents(void);
const char *ml_pmu_name(uint32_t i);
/* Counter readings around a measured execution of region g, outside its timed interval. */
void ml_pmu_begin(struct ml_thread_rec *t, uint32_t g);
void ml_pmu_end(struct ml_thread_rec *t, uint32_t g);
/* Sums [ML_RT_MAX_REGIONS][ML_MAX_EVENTS] of a thread, or NULL if it measured nothing. */
const uint64_t *ml_pmu_sums(const struct ml_thread_rec *t);
/* The thread exits: its counters are closed, its sums kept. */
void ml_pmu_thread_exit(struct ml_thread_rec *t);
/* Adds src's sums to dst's (the exited-threads record); -ENOMEM leaves dst unchanged. */
int ml_pmu_fold(struct ml_thread_rec *dst, const struct ml_thread_rec *src);
/* The record of an exited thread is reused: no sums, events opened again on first use. */
void ml_pmu_reuse(struct ml_thread_rec *t);
/* In a forked child: the inherited descriptors count the parent; forget them and the sums. */
void ml_pmu_after_fork(struct ml_thread_rec *t);

#endif
