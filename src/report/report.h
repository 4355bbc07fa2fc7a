/* Region profile post-processing: per region and thread aggregation, and the report renderers. */
#ifndef ML_REPORT_REPORT_H
#define ML_REPORT_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include "format/profile.h"

/*
 * Figures of one region on one thread, or of one region over all threads.
 *
 * v[f] = sum over units u whose region set holds the region of
 * counts[u] * facts[u][f]; per thread for a cell, summed over threads for a
 * total. Nested regions are therefore inclusive: a unit inside B inside A
 * counts towards both.
 *
 * Time: a thread that entered the region (entries > 0) owns its ticks. A
 * thread that counted region code without entering it (an OpenMP worker
 * running the body of a parallel region its master entered) borrows the
 * region's longest time on any entering thread: borrowed = 1. A total's ticks
 * are the longest per-thread ticks, since a region's threads run concurrently.
 * timed = 0 when no thread entered the region: the time is unknown.
 */
struct ml_rstats {
    uint64_t entries;
    uint64_t ticks;
    uint64_t v[ML_NFACTS];
    int active;   /* entered, or some unit of the region counted */
    int timed;    /* ticks are meaningful */
    int borrowed; /* ticks come from the threads that entered the region */
    /* Static: counting units whose region set holds the region (the same in every cell of a
       region). The dynamic count, increments executed, is v[ML_F_INCR]. */
    uint64_t counters;
};

/* Calls from a region into one function memlens did not see, by thread. */
struct ml_report_callee {
    uint32_t region;
    const char *name; /* in the profile's string table */
    uint64_t total;   /* sum of calls[] */
    uint64_t *calls;  /* [nthreads]: sum of counts[unit] * per_exec */
};

/* One profile and its aggregation; owns neither the profile nor its path. */
struct ml_report {
    const struct ml_profile *prof;
    const char *name;                 /* shown as the profile's name (normally its path) */
    uint64_t nregions;                /* == prof->nregions */
    uint64_t nthreads;                /* == prof->nthreads */
    struct ml_rstats *cells;          /* [nregions * nthreads], region-major */
    struct ml_rstats *totals;         /* [nregions] */
    struct ml_report_callee *callees; /* by region, then most calls first, then name */
    uint64_t ncallees;
    uint64_t *callee_store; /* backing array of every callees[].calls */
    uint64_t *unit_counts;  /* [nunits]: counter summed over threads */
};

/* Aggregates p; name labels it in output. Returns 0, or -ENOMEM. */
int ml_report_build(const struct ml_profile *p, const char *name, struct ml_report **out);
void ml_report_free(struct ml_report *r);

static inline const struct ml_rstats *ml_report_cell(const struct ml_report *r, uint64_t region,
                                                     uint64_t thread)
{
    return &r->cells[region * r->nthreads + thread];
}

/* Short lowercase names of enum ml_fact, as used in CSV and JSON keys. */
extern const char *const ml_fact_names[ML_NFACTS];

uint64_t ml_rstats_read(const struct ml_rstats *s);    /* RD_HEAP + RD_GLOBAL + RD_STACK */
uint64_t ml_rstats_written(const struct ml_rstats *s); /* WR_HEAP + WR_GLOBAL + WR_STACK */
/* Seconds of s under a clock of tsc_hz ticks per second, or -1 when unknown. */
double ml_rstats_seconds(const struct ml_rstats *s, uint64_t tsc_hz);
/* bytes / seconds in GB/s (1e9 bytes), or -1 when seconds is unknown or 0. */
double ml_report_gbs(uint64_t bytes, double seconds);

/* Demangled C++ name into buf (or name unchanged if not mangled or not demanglable). */
const char *ml_report_demangle(const char *name, char *buf, size_t len);

enum ml_report_rows {
    ML_REPORT_THREADS_AND_TOTALS, /* each thread, then a total when several threads ran */
    ML_REPORT_TOTALS,             /* totals only */
};

struct ml_report_opts {
    enum ml_report_rows rows;
    const char *const *regions; /* names to show; all when nregion_names == 0 */
    size_t nregion_names;
};

/* Whether region id of r passes the filter in o. */
int ml_report_region_shown(const struct ml_report *r, uint64_t region,
                           const struct ml_report_opts *o);

/*
 * Renderers: write reps[0..n-1] to f, in the given order. Each returns 0, or
 * -EIO if writing to f failed. The layouts are documented in docs/report.md.
 */
int ml_report_table(FILE *f, struct ml_report *const *reps, size_t n,
                    const struct ml_report_opts *o);
int ml_report_csv(FILE *f, struct ml_report *const *reps, size_t n, const struct ml_report_opts *o);
int ml_report_blocks_csv(FILE *f, struct ml_report *const *reps, size_t n,
                         const struct ml_report_opts *o);
int ml_report_json(FILE *f, struct ml_report *const *reps, size_t n,
                   const struct ml_report_opts *o);

#endif
