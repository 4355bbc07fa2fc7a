/* Timelines of a region profile: per interval figures, and their table, CSV and HTML renderers. */
#ifndef ML_REPORT_TIMELINE_H
#define ML_REPORT_TIMELINE_H

#include <stdint.h>
#include <stdio.h>

#include "report/report.h"

/* What one region did on one thread (or all threads) during one interval. */
struct ml_tl_delta {
    uint64_t entries, ticks, bytes_read, bytes_written, instructions;
};

/*
 * One series: a region on one thread, or the region's total over threads
 * (thread == -1: the sum of the thread series of each interval; ticks are then
 * thread-ticks). d[i] is the growth of the cumulative figures from snapshot
 * i - 1 (the profile's start for i = 0) to snapshot i. A series starts at 0
 * before its first point and keeps its last value where a snapshot lacks it;
 * a figure that steps back (a racy read of a closing execution) gives 0 and
 * the larger value is carried on, so the sum of d[] is the last value.
 */
struct ml_tl_series {
    uint32_t region;
    int64_t thread;        /* position in prof->threads, or -1 for the total */
    struct ml_tl_delta *d; /* [nsnaps] */
};

struct ml_timeline {
    const struct ml_report *rep;
    uint64_t nsnaps;
    const struct ml_profile_snap *snaps; /* the profile's; interval i ends at snaps[i].tick */
    struct ml_tl_series *series; /* by region id, each region's threads in order, then its total */
    uint64_t nseries;
    struct ml_tl_delta *store;
};

/* Builds the timeline of r's profile; *out = NULL when it has none. 0 or -ENOMEM. */
int ml_timeline_build(const struct ml_report *r, struct ml_timeline **out);
void ml_timeline_free(struct ml_timeline *t);

/* Start and end of interval i in seconds since the profile's start; -1 when tsc_hz is 0. */
double ml_timeline_start(const struct ml_timeline *t, uint64_t i);
double ml_timeline_end(const struct ml_timeline *t, uint64_t i);

/*
 * Renderers of timelines are struct ml_renderer (report.h): ml_render_timeline
 * and ml_render_timeline_csv in timeline.c, ml_render_html in html.c; a
 * profile without a timeline is rendered with t == NULL.
 */

#endif
