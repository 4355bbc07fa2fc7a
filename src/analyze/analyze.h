/* Trace analyses: a driver that streams traces chunk by chunk, and analyses as structs of
 * callbacks. */
#ifndef ML_ANALYZE_H
#define ML_ANALYZE_H

#include <stdio.h>

#include "format/trace.h"

enum ml_an_format { ML_AN_TABLE, ML_AN_CSV, ML_AN_JSON };

/* What the driver tells an analysis about the trace being read. */
struct ml_an_input {
    const struct ml_trace *trace;
    const struct ml_trace_info *info;
    int index; /* of this trace among the inputs */
};

struct ml_an_opts {
    FILE *out;             /* where reports (and streaming analyses) write */
    enum ml_an_format fmt; /* table, CSV or JSON */
    int progress;          /* chunks read so far on stderr */
    /* Damage (chunks that do not decode) is reported on this stream and skipped; NULL: silent. */
    FILE *warn;
};

/*
 * An analysis (like a perf tool or a Valgrind tool): the driver calls start
 * once; for each input trace begin, record for every batch of records in
 * time order (threads merged), marker for every marker record (also
 * delivered to record, at its place) and end (the trace is still open: its
 * tables may be read); after the last trace report, then free. start,
 * record, report and free are required, the others may be NULL. Callbacks
 * return 0 or a negative errno (the driver stops and says so).
 */
struct ml_analysis {
    const char *name;
    const char *summary; /* one line for 'memlens analyze --help' */
    void *(*start)(const struct ml_an_opts *o);
    int (*begin)(void *st, const struct ml_an_input *in);
    int (*record)(void *st, const struct ml_an_input *in, const struct ml_trace_rec *r, size_t n);
    int (*marker)(void *st, const struct ml_an_input *in, const struct ml_trace_rec *r);
    int (*end)(void *st, const struct ml_an_input *in);
    int (*report)(void *st, FILE *out, enum ml_an_format fmt);
    void (*free)(void *st);
};

/* The registry: every analysis, NULL-terminated. */
extern const struct ml_analysis *const ml_analyses[];
const struct ml_analysis *ml_analysis_find(const char *name);

/*
 * Runs analyses over traces: each trace's threads merged by time, chunks
 * decoded one per thread at a time (memory bounded by threads x chunk).
 * Traces are read one after the other (each is a process of its own).
 * Returns 0, or -errno with a one-line reason in err.
 */
int ml_an_run(const char *const *paths, int npaths, const struct ml_analysis *const *an, void **st,
              int nan, const struct ml_an_opts *o, char *err, size_t errlen);

/* Registered analyses. */
extern const struct ml_analysis ml_an_summary;
extern const struct ml_analysis ml_an_dump;
extern const struct ml_analysis ml_an_select;

#endif
