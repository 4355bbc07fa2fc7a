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
    /*
     * Sampling and overhead corrections (docs/report.md); -1 = unknown.
     * Counts and ticks cover the measured executions; est_ticks and
     * ml_rstats_est() scale them by scale = entries / measured (a borrowed
     * row and a total use the region's overall ratio). cf = 1 + 2 n / (loads
     * + stores) with n = v[ML_F_INCR] (the published correction factor, each
     * increment two memory operations); cf_ticks = ticks / cf. cal_ticks =
     * ticks - n x increment cost - measured x timer cost (calibrated at
     * start-up); a total or borrowed row takes the longest cal_ticks of the
     * threads that entered.
     */
    uint64_t measured;
    double scale;
    double est_ticks;
    double cf;
    double cf_ticks;
    double cal_ticks;
    uint64_t ev[ML_MAX_EVENTS]; /* event sums over measured executions (prof->nevents) */
    /* Exact mode (prof->exact): bytes classified by address at run time, Σ over the region's
       units of the EXACT records (enum ml_class). */
    uint64_t x[ML_NCLASS];
    /*
     * Library work (docs/report.md): clock ticks in not-seen calls and the raw
     * ticks of the timed executions they were measured in (the time share is
     * their ratio; TIMED section, else ticks), bytes asked of allocators and
     * deallocator calls, and ML_RFLAG_* of the region.
     */
    uint64_t notseen_ticks;
    uint64_t timed_ticks;
    uint64_t alloc_bytes;
    uint64_t frees;
    uint32_t rflags;
};

/* Share of the timed executions' time spent in not-seen calls, or -1 when unknown. */
double ml_rstats_notseen_share(const struct ml_rstats *s);

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
    unsigned char *share;   /* [nunits]: 1 for an inlined function's share (INLINED), not a
                               counting unit: left out of unit lists and counts */
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
/* The same over the exact-mode bytes x[]. */
uint64_t ml_rstats_xread(const struct ml_rstats *s);
uint64_t ml_rstats_xwritten(const struct ml_rstats *s);
/* Seconds of s under a clock of tsc_hz ticks per second, or -1 when unknown. */
double ml_rstats_seconds(const struct ml_rstats *s, uint64_t tsc_hz);
/* ticks / tsc_hz, or -1 when ticks is unknown (< 0), the row untimed or tsc_hz 0. */
double ml_rstats_ticks_seconds(const struct ml_rstats *s, double ticks, uint64_t tsc_hz);
/* A count scaled to all executions (v x scale, rounded), or v itself when scale is unknown. */
uint64_t ml_rstats_est(const struct ml_rstats *s, uint64_t v);
/* Whether the profile is sampled: header sample > 1 or some execution was not measured. */
int ml_report_sampled(const struct ml_report *r);
/* bytes / seconds in GB/s (1e9 bytes), or -1 when seconds is unknown or 0. */
double ml_report_gbs(uint64_t bytes, double seconds);

/*
 * The tid cell of thread row t of p: its tid, "exited:N" for the record that
 * sums N threads which exited long ago (docs/report.md, "Threads"), or "-"
 * in a merged profile, whose rows sum threads of one index from several
 * processes (docs/report.md, "Merging profiles").
 */
const char *ml_report_tid(const struct ml_profile *p, uint64_t t, char *buf, size_t len);

/*
 * What a row of region `region` must warn about, for the table's note, CSV's
 * `note` and JSON's "note": a row with executions of which none was measured
 * ("0 of 5 measured: rerun with MEMLENS_SAMPLE=1"). NULL when there is
 * nothing to say; else the text, in buf.
 */
const char *ml_report_note(const struct ml_report *r, uint64_t region, const struct ml_rstats *s,
                           char *buf, size_t len);

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
    size_t top; /* --top N: rank functions and units instead (0 = off) */
};

/* Whether region id of r passes the filter in o. */
int ml_report_region_shown(const struct ml_report *r, uint64_t region,
                           const struct ml_report_opts *o);

/*
 * A renderer writes profiles one at a time, so that `memlens report` holds
 * one profile in memory however many it reads: begin once before the first
 * profile, profile for each (i counts from 0; t is the report's timeline, or
 * NULL), end once after the last. begin and end may be NULL. profile returns
 * 0 or -ENOMEM; write errors stay on the stream for the caller to check
 * (ml_report_flush). The layouts are documented in docs/report.md.
 */
struct ml_timeline;
struct ml_renderer {
    void (*begin)(FILE *f, const struct ml_report_opts *o);
    int (*profile)(FILE *f, const struct ml_report *r, const struct ml_timeline *t, size_t i,
                   const struct ml_report_opts *o);
    void (*end)(FILE *f, const struct ml_report_opts *o);
};

extern const struct ml_renderer ml_render_table;        /* table.c */
extern const struct ml_renderer ml_render_top;          /* --top, table.c */
extern const struct ml_renderer ml_render_csv;          /* csv.c */
extern const struct ml_renderer ml_render_blocks;       /* --blocks, csv.c */
extern const struct ml_renderer ml_render_top_csv;      /* csv.c */
extern const struct ml_renderer ml_render_json;         /* json.c */
extern const struct ml_renderer ml_render_top_json;     /* json.c */
extern const struct ml_renderer ml_render_timeline;     /* --timeline, timeline.c */
extern const struct ml_renderer ml_render_timeline_csv; /* timeline.c */
extern const struct ml_renderer ml_render_html;         /* html.c: every profile's timeline */

/*
 * Renders reps[0..n-1] (with their timelines tls[], or tls NULL) in that
 * order, then flushes f: 0, -ENOMEM, or the write error (ml_report_flush).
 */
int ml_report_render(FILE *f, const struct ml_renderer *rd, struct ml_report *const *reps,
                     struct ml_timeline *const *tls, size_t n, const struct ml_report_opts *o);

/*
 * Flushes f and says whether everything written to it so far reached the
 * file: 0, or the negative errno of the failed write (-EIO when the stream
 * kept no errno). stdio retries the buffer on every flush, so the error of
 * a disk that stays full or a pipe that stays closed is seen again here.
 */
int ml_report_flush(FILE *f);

/*
 * A name from a profile for a terminal: bytes that could move the cursor or
 * change the terminal's state (C0 and C1 controls, DEL) and bytes that are
 * not UTF-8 become \xHH; other text is kept. Anyone can put any bytes into a
 * region name. Writes into buf (len bytes), cutting long names with "...".
 */
#define ML_REPORT_NAME 512
const char *ml_report_esc(char *buf, size_t len, const char *s);
/*
 * A long name for a table column of at most cols characters (a name from
 * ml_report_esc into ML_REPORT_LONG bytes; whole in CSV and JSON). C++ names lose their parameter
 * list, then template arguments from the innermost out ("vector<…>"), then middle scopes
 * ("fmt::v9::detail::…::write"); anything else keeps its start and end with "…" between. Names that
 * fit are unchanged. Writes into buf.
 */
#define ML_REPORT_COLS 60
#define ML_REPORT_LONG 8192 /* longest name ml_report_cut reads whole: escape into this many */
const char *ml_report_cut(char *buf, size_t len, const char *name, size_t cols);

/*
 * Hottest code (--top N, src/report/top.c): units and functions ranked over
 * all threads, within the regions o selects (every unit without a filter,
 * including code outside regions from `memlens cc --all`). A function is a
 * (module, symbol) pair; its figures add up all its units, in regions or not,
 * and clones made for regions. Its executions are the counts of its entry
 * units (ML_SEC_ENTRIES); known = 0 when none was counted (a function whose
 * first block lies outside every region, built without --all).
 */
struct ml_top_fn {
    uint32_t module;
    uint32_t func; /* string offset: mangled symbol */
    uint32_t file; /* string offset of the first unit with a line */
    uint32_t line; /* lowest line in that file, 0 if unknown */
    int known;     /* executions are known */
    uint64_t executions;
    uint64_t v[ML_NFACTS]; /* counts x facts */
    /*
     * An OpenMP body (clang's ".omp_outlined." functions): the string offset
     * of the function it was outlined from, found by its lines (the body's
     * line lies within that function's lines in the same file and module,
     * the tightest such range wins), or ML_TOP_NO_PARENT.
     */
    uint32_t parent;
    uint32_t entry_line; /* line of its entry block (an OpenMP body's is its parent's at -O0) */
    uint32_t body_line;  /* lowest line of its units other than the entry's line, in file */
    /*
     * A function's code that the compiler inlined into another (INLINED
     * records, -g): string offset of that caller, else ML_TOP_NO_PARENT. Such
     * a row is a part of the caller's row, not in addition to it.
     */
    uint32_t into;
};
#define ML_TOP_NO_PARENT UINT32_MAX

struct ml_top {
    struct ml_top_fn *fns; /* functions with a non-zero count */
    size_t nfns;
    uint32_t *units; /* shown units with a non-zero count */
    size_t nunits;
    /* Rankings, best first: indexes into fns and units. */
    size_t *fns_by_bytes, *fns_by_execs;
    uint32_t *units_by_bytes, *units_by_execs; /* by executions: block units only */
    size_t nunits_by_execs;
    uint64_t bytes; /* read + written over all shown units */
};

/* Whether unit u passes the region filter of o (every unit when there is none). */
int ml_report_unit_shown(const struct ml_report *r, const struct ml_prof_unit *u,
                         const struct ml_report_opts *o);
int ml_top_build(const struct ml_report *r, const struct ml_report_opts *o, struct ml_top **out);
void ml_top_free(struct ml_top *t);
/* Whether a symbol names an OpenMP body outlined by clang. */
int ml_top_is_omp(const char *sym);
/*
 * The name --top shows for f, demangled: "parent › omp parallel @file:line"
 * for an OpenMP body ("omp parallel @file:line" without a known parent,
 * "omp parallel (.omp_outlined..3)" without a line), else the function's.
 */
const char *ml_top_fn_name(const struct ml_report *r, const struct ml_top_fn *f, char *buf,
                           size_t len);
/* The function of unit u in t (u must be one of t's units). */
const struct ml_top_fn *ml_top_fn_of(const struct ml_top *t, const struct ml_report *r, uint32_t u);
/* Bytes read + written by unit u over all threads. */
uint64_t ml_top_unit_bytes(const struct ml_report *r, uint32_t u);
/* Whether unit u holds its function's entry. */
int ml_top_is_entry(const struct ml_profile *p, uint32_t u);

/*
 * The table's number formats, for other human-readable renderers: buf holds
 * ML_REPORT_CELL bytes. Counts K/M/G (10^3), bytes B/KiB/MiB (2^10), times
 * ns..s, GB/s; three significant digits; a negative time or rate is "-".
 */
#define ML_REPORT_CELL 24
const char *ml_report_fmt_count(char *buf, uint64_t v);
const char *ml_report_fmt_bytes(char *buf, uint64_t v);
const char *ml_report_fmt_time(char *buf, double seconds);
const char *ml_report_fmt_gbs(char *buf, double gbs);

#endif
