/* Runtime internals shared by the region code and the profile writer. */
#ifndef ML_RUNTIME_RT_H
#define ML_RUNTIME_RT_H

#include <pthread.h>
#include <stdint.h>

#include "runtime/abi.h"

/* Region ids are process-wide; one fixed array per thread keeps readers race-free. */
#define ML_RT_MAX_REGIONS 1024

struct ml_rstate {
    uint64_t entries;
    uint64_t ticks;
    uint64_t start;
    uint32_t depth;
    uint32_t measured; /* the open execution is measured (valid while depth > 0) */
};

/*
 * One record per thread that ran instrumented code. While the thread lives,
 * tls[] points at its counter arrays (one per module); when it exits, the
 * counts are copied to snap[] and done is set. Records are never freed, so
 * the writer can read them from any thread.
 */
struct ml_thread_rec {
    struct ml_thread_rec *next;
    uint32_t tid;
    uint32_t index;
    volatile int done;
    uint32_t nmods;      /* modules whose tls[] entry is captured */
    uint32_t cap;        /* capacity of tls[] */
    uint32_t snap_units; /* units covered by snap */
    uint64_t **tls;
    uint64_t *snap;
    struct ml_rstate *rs; /* [ML_RT_MAX_REGIONS] or NULL until the thread enters a region */
    uint32_t open;          /* regions with depth > 0 */
    uint32_t measured_open; /* of those, measured ones */
    /* Exact mode: per module, u64[nunits][ML_NCLASS] bytes classified by address. */
    uint64_t **exact;
    uint32_t exact_cap;
    uintptr_t stack_lo, stack_hi;
};

struct ml_rt {
    pthread_mutex_t lock;
    int initialised;
    struct ml_rt_module *mods, **mods_tail;
    uint32_t nmods;
    uint32_t nunits;
    uint32_t nregset_words;
    uint32_t ncalls;
    const char *region_names[ML_RT_MAX_REGIONS];
    uint32_t nregions;
    struct ml_thread_rec *threads, **threads_tail;
    uint32_t nthreads;
    uint64_t tick0, mono0, real0;
    uint32_t sample; /* MEMLENS_SAMPLE: measure one in `sample` top-level executions */
    volatile int written;
};

extern struct ml_rt ml_rt;

/*
 * Writes the profile of this process into $MEMLENS_OUT (default
 * ./memlens-out) through a temporary file and rename. Safe to call from a
 * signal handler: no malloc, no stdio. Writes at most once per process.
 */
void ml_rt_write_profile(int from_signal);

/*
 * Timelines (timeline.c). start: reads MEMLENS_INTERVAL and starts the
 * sampler thread; called once by init with ml_rt.lock held. write: appends
 * the TIMELINE section; exclusive = the writer holds ml_rt.lock (a final
 * snapshot at tick now is then added), else it copies what is published.
 * Called before the THREAD records are written, so that the final snapshot
 * never exceeds them while other threads keep running.
 */
void ml_rt_timeline_start(void);
struct ml_pw;
void ml_rt_timeline_write(struct ml_pw *w, int exclusive, uint64_t now);

/* The calling thread's record, created on first use; NULL when out of memory. */
struct ml_thread_rec *ml_rt_self(void);

#endif
