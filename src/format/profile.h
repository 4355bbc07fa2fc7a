/* Region profile file format (.mlp): record definitions, writer and validating reader. */
#ifndef ML_FORMAT_PROFILE_H
#define ML_FORMAT_PROFILE_H

#include <stddef.h>
#include <stdint.h>

/*
 * Layout (all integers little-endian, no padding between records):
 *
 *   header   struct ml_prof_header (80 bytes; 64 in version 2)
 *   section* { struct ml_prof_section; payload[length] }
 *   END      a section of type ML_SEC_END with length 0
 *
 * A file without the END section was cut short (the writer died); the reader
 * rejects it. Files are written to a temporary name and renamed, so a reader
 * only ever sees complete files.
 *
 * Version rule: bump ML_PROF_VERSION when the meaning or size of an existing
 * record changes; adding a new section type does not bump it (readers skip
 * unknown sections).
 */
#define ML_PROF_MAGIC   "MLPROF\0\n"
#define ML_PROF_VERSION 3

/* Version 2 profiles (no token, no rank: a 64-byte header) are still read. */
#define ML_PROF_VERSION_MIN 2
#define ML_PROF_HEADER_V2   64

struct ml_prof_header {
    char magic[8];
    uint32_t version;
    uint32_t header_size; /* sizeof(struct ml_prof_header) */
    uint64_t tsc_hz;      /* ticks of the region clock per second */
    uint64_t start_ns;    /* CLOCK_REALTIME at process start (or fork) */
    uint64_t wall_ns;     /* CLOCK_MONOTONIC duration covered by the profile */
    uint32_t pid;
    uint32_t ppid;
    uint32_t clock;  /* enum ml_clock */
    uint32_t flags;  /* ML_PROF_F_* */
    uint64_t sample; /* 1 in N region executions measured (1 = all) */
    /* version 3 */
    uint64_t token;  /* random per process start, also in the file name; 0 in version 2 */
    uint32_t rank;   /* MPI rank when flags has ML_PROF_F_RANK */
    uint32_t nranks; /* processes in that job, 0 unknown */
};

enum ml_clock { ML_CLOCK_TSC = 1, ML_CLOCK_CNTVCT = 2, ML_CLOCK_MONOTONIC = 3 };

#define ML_PROF_F_SIGNAL 1u /* written from a fatal or terminating signal */
#define ML_PROF_F_RANK   2u /* a process of an MPI (or Slurm) job: rank is set */

struct ml_prof_section {
    uint32_t type;
    uint32_t reserved;
    uint64_t length; /* payload bytes after this header */
};

enum ml_sec_type {
    ML_SEC_END = 0,
    ML_SEC_STRTAB = 1,    /* NUL-terminated strings; other records hold offsets */
    ML_SEC_META = 2,      /* u32 pairs: key string, value string */
    ML_SEC_REGIONS = 3,   /* u32 name string per region; index = region id */
    ML_SEC_REGSETS = 4,   /* u32 words: n, id[0..n-1], n, ... */
    ML_SEC_UNITS = 5,     /* struct ml_prof_unit[] */
    ML_SEC_CALLS = 6,     /* struct ml_prof_call[] */
    ML_SEC_THREAD = 7,    /* struct ml_prof_thread, u64 counts[nunits], ml_prof_rstat[nregions] */
    ML_SEC_MODULES = 8,   /* struct ml_prof_module[] */
    ML_SEC_EXACT = 9,     /* exact mode: struct ml_prof_thread, then u64[nunits][ML_NCLASS] */
    ML_SEC_TIMELINE = 10, /* struct ml_prof_timeline, then snapshots (see below) */
    ML_SEC_EVENTS = 11,   /* hardware counters: struct ml_prof_events, names, per-thread sums */
    ML_SEC_CALIB = 12,    /* struct ml_prof_calib: measured cost of an increment and a timer pair */
    ML_SEC_ENTRIES = 13,  /* u32 unit ids, ascending: units holding their function's entry */
    ML_SEC_EXITED = 14,   /* struct ml_prof_exited: the THREAD record summing exited threads */
    ML_SEC_UNITINFO = 15, /* struct ml_prof_unitinfo[]: units whose count is not executions */
    ML_SEC_TIMED = 16,    /* per thread: struct ml_prof_timed, u64 timed[n], u64 ticks[n] */
    ML_SEC_RFLAGS = 17,   /* u32 ML_RFLAG_* per region */
    ML_SEC_INLINED = 18, /* struct ml_prof_inlined[]: shares of code inlined from other functions */
};

/*
 * ML_SEC_INLINED, at most once: the part of a unit's facts that belongs to code
 * the compiler inlined from another function (with -g). `unit` is a BYTES unit
 * that is never counted (its count reads 0, so sums ignore it) holding that
 * part: func = the inlined function's symbol, file:line = its own lowest line
 * there, facts = its share per count of `host`, the unit that counts it
 * (docs/report.md, "Inlined functions").
 */
struct ml_prof_inlined {
    uint32_t unit;
    uint32_t host;
};

/*
 * ML_SEC_UNITINFO, at most once: units (of kind ML_UNIT_BYTES, all facts 0, so
 * byte and instruction sums ignore them) whose count means something else.
 * name: a string (the callee, allocator or deallocator).
 */
struct ml_prof_unitinfo {
    uint32_t unit;
    uint32_t kind; /* ML_UI_*; readers skip kinds they do not know */
    uint32_t name;
    uint32_t reserved;
};

enum ml_unitinfo_kind {
    ML_UI_NOTSEEN_TICKS = 1, /* clock ticks in calls of `name` (not seen) during timed executions */
    ML_UI_ALLOC_BYTES = 2,   /* bytes asked of allocator `name` */
    ML_UI_FREE_CALLS = 3,    /* calls of deallocator `name` */
    /*
     * Only between the instrumenter and the runtime, never in UNITINFO: a unit
     * holding inlined code's share (INLINED), then the unit that counts it
     * (INLINED_HOST); the writer turns each such pair into an INLINED record.
     */
    ML_UI_INLINED = 4,
    ML_UI_INLINED_HOST = 5,
};

/*
 * ML_SEC_TIMED, per thread (at most one per THREAD record): the executions that
 * read the clock and their raw ticks, per region. THREAD's rstat ticks are
 * these ticks scaled to all measured executions (docs/regions.md, clock
 * sampling); a time share of not-seen calls divides ML_UI_NOTSEEN_TICKS
 * counts by these ticks.
 */
struct ml_prof_timed {
    uint32_t index;    /* THREAD index */
    uint32_t nregions; /* == entries of REGIONS */
};

/* ML_SEC_RFLAGS, at most once: a word per region. */
#define ML_RFLAG_NO_PLAIN                                                                          \
    1u /* computed goto: every execution runs instrumented code (sampling                          \
          drops the counts of unmeasured ones but saves no time) */

/* Byte classes of exact mode, decided by address at run time (RD then WR). */
enum ml_class {
    ML_C_RD_HEAP,
    ML_C_RD_GLOBAL,
    ML_C_RD_STACK,
    ML_C_WR_HEAP,
    ML_C_WR_GLOBAL,
    ML_C_WR_STACK,
    ML_NCLASS
};

/* Static facts of one counting unit, per execution (or per byte for ML_UNIT_BYTES). */
enum ml_fact {
    ML_F_LOADS,
    ML_F_STORES,
    ML_F_RD_HEAP,
    ML_F_RD_GLOBAL,
    ML_F_RD_STACK,
    ML_F_WR_HEAP,
    ML_F_WR_GLOBAL,
    ML_F_WR_STACK,
    ML_F_I_INT,    /* integer arithmetic, logic, compares, casts */
    ML_F_I_FP,     /* floating-point arithmetic, compares and conversions */
    ML_F_I_VEC,    /* of all instructions, those on vector types */
    ML_F_I_MEM,    /* loads, stores, atomics, memory intrinsics */
    ML_F_I_BRANCH, /* terminators */
    ML_F_I_CALL,
    ML_F_I_OTHER, /* address arithmetic, phi, select, ... */
    ML_F_INSTR,   /* all instructions */
    ML_F_INCR,    /* counter increments this unit stands for (1 per execution) */
    ML_NFACTS
};

enum ml_unit_kind {
    ML_UNIT_BLOCK = 1, /* counter = executions of a set of instructions */
    ML_UNIT_BYTES = 2, /* counter = bytes moved by a variable-size memory intrinsic */
};

struct ml_prof_unit {
    uint32_t kind;   /* enum ml_unit_kind */
    uint32_t module; /* index into modules */
    uint32_t func;   /* string: source function name (mangled for C++) */
    uint32_t file;   /* string: source file, "" if unknown */
    uint32_t line;   /* 0 if unknown */
    uint32_t regset; /* word offset into REGSETS: regions this unit counts towards */
    uint64_t facts[ML_NFACTS];
};

struct ml_prof_call {
    uint32_t unit;   /* calling unit */
    uint32_t callee; /* string: function whose body memlens did not see */
    uint64_t per_exec;
};

struct ml_prof_module {
    uint32_t name; /* string: source module identifier */
    uint32_t first_unit;
    uint32_t nunits;
    uint32_t reserved;
};

struct ml_prof_thread {
    uint32_t tid;
    uint32_t index; /* 0 = first thread seen (normally main) */
    uint64_t nunits;
    uint64_t nregions;
};

/*
 * ML_SEC_EXITED, at most once, before the THREAD records: the THREAD record
 * whose index is `index` (its tid is 0) holds the sums of `nthreads` threads
 * that exited and whose own records the runtime reused; it keeps the most
 * recently exited threads apart. Timeline points of those threads are counted
 * under `index` too, so every snapshot still names existing records only.
 */
struct ml_prof_exited {
    uint32_t index;
    uint32_t reserved;
    uint64_t nthreads;
};

/*
 * Version 2 added `measured`. With sampling (header `sample` > 1) only measured
 * executions are timed and counted: ticks and the unit counters cover
 * `measured` of the `entries` executions; measured <= entries.
 */
struct ml_prof_rstat {
    uint64_t entries;  /* outermost entries (recursion counts once), measured or not */
    uint64_t ticks;    /* inclusive clock ticks of the measured entries */
    uint64_t measured; /* entries that were timed and counted */
};

/*
 * ML_SEC_EVENTS, at most once: struct ml_prof_events, then char
 * name[nevents][ML_EVENT_NAME] (perf event names as given in MEMLENS_EVENTS,
 * NUL-terminated), then per thread struct ml_prof_evthread followed by u64
 * sum[nregions][nevents]: each event's count summed over the thread's measured
 * executions of the region, scaled by enabled/running time when the kernel
 * multiplexed the counter. Threads are named by their THREAD record's index.
 */
#define ML_EVENT_NAME 32
#define ML_MAX_EVENTS 8

struct ml_prof_events {
    uint32_t nevents; /* 1..ML_MAX_EVENTS */
    uint32_t nthreads;
    uint64_t nregions; /* == entries of REGIONS */
};

struct ml_prof_evthread {
    uint32_t index; /* struct ml_prof_thread.index */
    uint32_t tid;
};

/*
 * ML_SEC_CALIB, at most once: costs measured by the runtime at start-up, in
 * thousandths of a clock tick (the header's tsc_hz converts ticks to seconds).
 * incr: one counter increment (a thread-local add to memory) inside a loop;
 * timer: the ticks one empty measured region execution records (the part of
 * enter and exit between their two clock reads).
 */
struct ml_prof_calib {
    uint64_t incr_mticks;
    uint64_t timer_mticks;
};

/*
 * Timeline (MEMLENS_INTERVAL): cumulative figures per thread and region,
 * sampled every interval. Payload: struct ml_prof_timeline, then nsnaps times
 * { struct ml_prof_tl_snap; struct ml_prof_tl_point[npoints] }.
 *
 * Invariants the reader checks: the lengths add up exactly; snapshot ticks do
 * not decrease; within a snapshot, points are sorted by (thread, region) with
 * no duplicates; each point names a thread index of a THREAD record and an
 * existing region. Every snapshot holds every (thread, region) pair that was
 * active (entered or counted anything) by then, so one snapshot alone gives
 * the state at its time. Values are read racily from running threads: bytes
 * and instructions never decrease, executions and ticks may step back by one
 * execution at most (readers clamp).
 */
struct ml_prof_timeline {
    uint64_t interval_ns;  /* spacing of the snapshots kept (requested_ns << halvings) */
    uint64_t requested_ns; /* MEMLENS_INTERVAL */
    uint64_t nsnaps;
    uint32_t flags; /* ML_TL_F_* */
    uint32_t reserved;
};

#define ML_TL_F_STOPPED 1u /* sampling stopped early: one snapshot outgrew the buffer */

struct ml_prof_tl_snap {
    uint64_t tick;    /* region-clock ticks since the profile's start */
    uint64_t npoints; /* struct ml_prof_tl_point records that follow */
};

struct ml_prof_tl_point {
    uint32_t thread;        /* index of a THREAD record */
    uint32_t region;        /* region id */
    uint64_t entries;       /* executions so far, an open one included */
    uint64_t ticks;         /* ticks so far, the elapsed part of an open execution included */
    uint64_t bytes_read;    /* sum over the region's units of counts x rd facts */
    uint64_t bytes_written; /* same with wr facts */
    uint64_t instructions;  /* same with ML_F_INSTR */
};

/*
 * Halves the resolution of a timeline held in memory as the payload after
 * struct ml_prof_timeline: keeps snapshots 0, 2, 4, ... and the last one,
 * moving them to the front. buf holds *nsnaps well-formed snapshots in len
 * bytes; returns the new length and updates *nsnaps. No malloc: the runtime
 * calls it from its sampler and its signal-safe writer.
 */
size_t ml_tl_halve(void *buf, size_t len, uint64_t *nsnaps);

/* ---- writer (used by the runtime: no malloc, no stdio, signal-tolerant) ---- */

/* Streams records to a file descriptor through a caller-provided buffer. */
struct ml_pw {
    int fd;
    int err; /* first negative errno, sticky */
    unsigned char *buf;
    size_t cap, len;
};

void ml_pw_init(struct ml_pw *w, int fd, void *buf, size_t cap);
void ml_pw_bytes(struct ml_pw *w, const void *p, size_t n);
void ml_pw_section(struct ml_pw *w, uint32_t type, uint64_t length);
/* Flushes; returns 0 or the first negative errno seen. */
int ml_pw_finish(struct ml_pw *w);

/* ---- reader ---- */

struct ml_profile_thread {
    uint32_t tid, index;
    const uint64_t *counts;             /* [nunits] */
    const struct ml_prof_rstat *rstats; /* [nregions] */
    const uint64_t *events;             /* [nregions][nevents] event sums, or NULL */
    const uint64_t *timed;              /* [nregions] timed executions, or NULL (TIMED) */
    const uint64_t *timed_ticks;        /* [nregions] their raw ticks, or NULL */
    uint64_t exited;       /* 0, or the record sums that many exited threads (EXITED section) */
    const uint64_t *exact; /* [nunits][ML_NCLASS] exact-mode bytes by address class, or NULL */
};

/* One snapshot of a timeline, pointing into the profile's data. */
struct ml_profile_snap {
    uint64_t tick;
    uint64_t npoints;
    const struct ml_prof_tl_point *points;
};

struct ml_profile {
    char *path;
    struct ml_prof_header hdr;
    const char *strtab;
    uint64_t strtab_len;
    const uint32_t *meta; /* key, value string pairs */
    uint64_t nmeta;
    const uint32_t *regions;
    uint64_t nregions;
    const uint32_t *regsets;
    uint64_t nregset_words;
    const struct ml_prof_unit *units;
    uint64_t nunits;
    const struct ml_prof_call *calls;
    uint64_t ncalls;
    const struct ml_prof_module *modules;
    uint64_t nmodules;
    struct ml_profile_thread *threads;
    uint64_t nthreads;
    uint32_t nevents;                         /* 0 without an EVENTS section */
    const char (*event_names)[ML_EVENT_NAME]; /* [nevents], NUL-terminated */
    const struct ml_prof_calib *calib;        /* NULL without a CALIB section */
    const unsigned char *ev_raw;              /* parser internal: EVENTS thread blocks */
    uint32_t ev_nthreads;
    /* Units whose count is their function's calls (ascending; may be empty). */
    const uint32_t *entries;
    uint64_t nentries;
    const struct ml_prof_exited *exited;  /* NULL without an EXITED section */
    const struct ml_prof_unitinfo *uinfo; /* UNITINFO records (may be empty) */
    uint64_t nuinfo;
    const struct ml_prof_inlined *inl; /* INLINED records (may be empty) */
    uint64_t ninl;
    const uint32_t *rflags; /* [nregions] ML_RFLAG_*, or NULL */
    int exact; /* some thread has an EXACT record (exact mode); the others made no access */
    const struct ml_prof_timeline *timeline; /* NULL without a TIMELINE section */
    struct ml_profile_snap *snaps;           /* [timeline->nsnaps] */
    void *data;  /* owned copy: header, then each payload at an 8-byte aligned offset */
    size_t size; /* bytes in the file */
    /*
     * `memlens report --merge` (src/report/merge.c) builds profiles that sum
     * others: merged counts them (0 for a profile read from a file), and per
     * region merged_ticks and merged_cal hold the sum over them of each one's
     * total time and calibrated total time (-1: unknown), in this profile's
     * ticks; merged_fingerprint identifies their common tables.
     */
    uint64_t merged;
    uint64_t merged_fingerprint;
    const uint64_t *merged_ticks;
    const double *merged_cal;
};

/*
 * Parses and validates a profile held in memory (copied, so buf needs no
 * alignment). Every offset, length and index is checked; on failure returns
 * -EINVAL and writes a one-line reason naming the byte offset or record into
 * err (-ENOMEM: "out of memory"). Each table section may appear once, and
 * REGIONS and UNITS must come before the first THREAD.
 */
int ml_profile_parse(const void *buf, size_t len, struct ml_profile **out, char *err,
                     size_t errlen);
/*
 * Reads and parses a file; -errno on I/O failure (err says which). Anyone
 * may have written it: it is opened without blocking (a FIFO or a device is
 * refused as "not a regular file", never waited on), its header is checked
 * before anything else is read, and every section length is checked against
 * the file size before its payload is read. ML_PROF_NOFOLLOW refuses a
 * symbolic link (for files found by listing a directory).
 */
#define ML_PROF_NOFOLLOW 1
int ml_profile_read(const char *path, int flags, struct ml_profile **out, char *err, size_t errlen);
void ml_profile_free(struct ml_profile *p);

/* Position in threads[] of the thread with the given index, or -1. */
int64_t ml_profile_thread_pos(const struct ml_profile *p, uint32_t index);
/* String at offset off, or "?" if out of range (the parser already checked). */
const char *ml_profile_str(const struct ml_profile *p, uint32_t off);
/* Regions of a unit: *n ids starting at the returned pointer. */
const uint32_t *ml_profile_regset(const struct ml_profile *p, uint32_t off, uint32_t *n);
/* Value of a META key, or NULL. */
const char *ml_profile_meta(const struct ml_profile *p, const char *key);

#endif
