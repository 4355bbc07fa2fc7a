/* Trace analyses: a driver that streams traces chunk by chunk, and analyses as structs of
 * callbacks. */
#ifndef ML_ANALYZE_H
#define ML_ANALYZE_H

#include <stdio.h>

#include "format/trace.h"

enum ml_an_format { ML_AN_TABLE, ML_AN_CSV, ML_AN_JSON };

/* What figures are broken down by (--by): each record belongs to one interval of its thread. */
enum ml_an_by {
    ML_BY_THREAD = 0, /* per thread only (the default) */
    ML_BY_REGION,     /* innermost open region */
    ML_BY_MARK,       /* MEMLENS_MARK phase */
    ML_BY_FUNCTION,   /* innermost function (--trace-functions) */
    ML_BY_LOOP,       /* innermost loop (--trace-loops) */
    ML_BY_IO,         /* the thread's last I/O call: "<call> <fd kind> fd <n>" */
};

/* One cache level: size 0 = absent. */
struct ml_an_level {
    uint64_t size;
    uint32_t ways;
};

struct ml_an_opts {
    FILE *out;             /* where streaming analyses (dump) write */
    enum ml_an_format fmt; /* table, CSV or JSON */
    int progress;          /* progress line on stderr */
    /* Damage (chunks that do not decode) is reported on this stream and skipped; NULL: silent. */
    FILE *warn;
    enum ml_an_by by;
    int jobs; /* decoding threads in all (1: everything on the calling thread) */
    /* Cache hierarchy (membus, bandwidth --memory, export): private l1, l2 per thread, shared llc.
     */
    struct ml_an_level l1, l2, llc;
    uint32_t line;        /* bytes, a power of two */
    const char *filter;   /* membus: write what memory sees to this trace file */
    int force;            /* output files may replace existing ones */
    uint64_t interval_ns; /* bandwidth, hotpages, export: 0 = automatic */
    int memory;           /* bandwidth: what memory sees too (through the cache filter) */
    uint32_t top;         /* hotpages: top N pages and lines */
    uint32_t lru_pages;   /* hotpages: entries of the hot-page LRU */
    double sample;        /* reuse: lowest sampling rate of SHARDS (0: exact) */
    uint64_t sample_keys; /* reuse: sampled keys before the rate halves (0: 8192) */
    const char *perfetto; /* export: Chrome JSON trace file */
    const char *din;      /* export: Dinero IV input file */
    const char *html;     /* the --html page (hotpages keeps its heat map for it) */
};

/* Defaults of every option (geometry read from sysfs where possible). */
void ml_an_opts_init(struct ml_an_opts *o);
/* Reads the cache geometry of CPU 0 from sysfs into o (levels it finds); 0 or -ENOENT. */
int ml_an_sysfs_caches(struct ml_an_opts *o);

/*
 * Keys of the breakdown: 0 is "-" (outside any interval); others name a
 * region, mark, function, loop or I/O call ("region:x", "io:read file fd 3").
 * Ids are global over all the traces of a run and stay valid until the run
 * is freed. Threads are global too: trace i's thread k is gthread
 * thread_base + k.
 */
#define ML_KEY_NONE 0u
#define ML_ALL      UINT32_MAX /* a row over all threads or all keys */

struct ml_an_run;

/* What the driver tells an analysis about the trace being read. */
struct ml_an_input {
    const struct ml_trace *trace;
    const struct ml_trace_info *info;
    int index;                /* of this trace among the inputs */
    uint32_t thread_base;     /* gthread of its thread 0 */
    uint64_t t_first, t_last; /* ticks of its first and last data (0, 0: no data) */
    const uint32_t *key;      /* the current key of each of its threads (valid during a callback) */
    int ninputs;              /* traces in the run */
    const struct ml_an_run *run;
};

/* The key of record r's interval. */
static inline uint32_t ml_an_key(const struct ml_an_input *in, const struct ml_trace_rec *r)
{
    return in->key[r->thread];
}

const char *ml_an_key_name(const struct ml_an_run *run, uint32_t key);
uint32_t ml_an_nkeys(const struct ml_an_run *run);
/* The process and OS thread of a gthread, the trace it came from. */
uint32_t ml_an_nthreads(const struct ml_an_run *run);
uint32_t ml_an_thread_pid(const struct ml_an_run *run, uint32_t gthread);
uint32_t ml_an_thread_index(const struct ml_an_run *run, uint32_t gthread);
uint32_t ml_an_thread_tid(const struct ml_an_run *run, uint32_t gthread);
int ml_an_thread_trace(const struct ml_an_run *run, uint32_t gthread);
const struct ml_an_opts *ml_an_options(const struct ml_an_run *run);
/* Nanoseconds of a tick of trace `index` since that trace began. */
double ml_an_ns(const struct ml_an_run *run, int index, uint64_t tick);
const char *ml_an_trace_path(const struct ml_an_run *run, int index);
uint32_t ml_an_trace_pid(const struct ml_an_run *run, int index);
int ml_an_ntraces(const struct ml_an_run *run);

/*
 * An analysis (like a perf tool or a Valgrind tool): start once; for each
 * input trace begin, record for every batch of records in time order
 * (threads merged), marker for every marker record (also delivered to
 * record, at its place; keys are already updated) and end (the trace is
 * still open: its tables may be read); after the last trace report, html (a
 * section of the --html page, optional), then free. start, record, report
 * (or lane) and free are required, the others may be NULL; the driver names a missing
 * one. Callbacks return 0 or a negative errno (the driver stops and says so).
 */
struct ml_analysis {
    const char *name;
    const char *summary; /* one line for 'memlens analyze --help' */
    void *(*start)(const struct ml_an_run *run);
    int (*begin)(void *st, const struct ml_an_input *in);
    int (*record)(void *st, const struct ml_an_input *in, const struct ml_trace_rec *r, size_t n);
    int (*marker)(void *st, const struct ml_an_input *in, const struct ml_trace_rec *r);
    int (*end)(void *st, const struct ml_an_input *in);
    int (*report)(void *st, FILE *out, enum ml_an_format fmt);
    int (*html)(void *st, FILE *out);
    void (*free)(void *st);
    /*
     * Optional: an analysis whose state splits into `lanes` independent
     * parts, each of which sees every record (reuse: lines and pages), gives
     * lane(st, l, ...) for part l. With -j > 1 the driver runs the lanes
     * of a long batch on several threads at once (a lane touches only its
     * own part of the state); otherwise record (the lanes fused), or when
     * there is none, the lanes in turn on pieces of the batch.
     */
    int lanes;
    int (*lane)(void *st, int l, const struct ml_an_input *in, const struct ml_trace_rec *r,
                size_t n);
};

/* The registry: every analysis, NULL-terminated. */
extern const struct ml_analysis *const ml_analyses[];
const struct ml_analysis *ml_analysis_find(const char *name);

/*
 * A run: analyses over traces. ml_an_new checks the analyses' callbacks and
 * starts them (NULL and a reason in err on failure); ml_an_read streams each
 * trace once (traces one after the other, each a process of its own; its
 * threads merged by time; chunks decoded by o->jobs threads, memory bounded
 * by (threads + 2 x jobs) chunks); ml_an_report writes every analysis's
 * report (with several analyses, JSON is one object keyed by analysis name
 * and CSV tables are separated by an empty line); ml_an_html the page.
 * Return 0, or -errno with a one-line reason in err.
 */
struct ml_an_run *ml_an_new(const struct ml_an_opts *o, const struct ml_analysis *const *an,
                            int nan, char *err, size_t errlen);
int ml_an_read(struct ml_an_run *run, const char *const *paths, int npaths, char *err,
               size_t errlen);
int ml_an_report(struct ml_an_run *run, FILE *out, enum ml_an_format fmt);
int ml_an_html(struct ml_an_run *run, FILE *out);
void ml_an_free(struct ml_an_run *run);

/* Registered analyses. */
extern const struct ml_analysis ml_an_summary;
extern const struct ml_analysis ml_an_dump;
extern const struct ml_analysis ml_an_membus;
extern const struct ml_analysis ml_an_reuse;
extern const struct ml_analysis ml_an_streams;
extern const struct ml_analysis ml_an_hotpages;
extern const struct ml_analysis ml_an_bandwidth;
extern const struct ml_analysis ml_an_io;
extern const struct ml_analysis ml_an_export;
extern const struct ml_analysis ml_an_select;

#endif
