/* Runtime internals shared by the region code and the profile writer. */
#ifndef ML_RUNTIME_RT_H
#define ML_RUNTIME_RT_H

#include <limits.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/abi.h"
#include "runtime/sample.h"

struct ml_pmu_thread;

/* Region ids are process-wide; one fixed array per thread keeps readers race-free. */
#define ML_RT_MAX_REGIONS 1024

struct ml_rstate {
    uint64_t entries; /* outermost executions, measured or not (inline ones once drained) */
    uint64_t ticks;   /* of the timed ones */
    uint64_t measured;
    uint64_t start;
    uint32_t depth;
    uint32_t on; /* the open execution is measured (valid while depth > 0) */
    struct ml_sample smp;
    uint32_t started;  /* smp is initialised */
    uint32_t clocked;  /* the open execution read the clock at entry (young region) */
    uint64_t timed;    /* measured executions that read the clock: ticks are theirs */
    uint64_t avg;      /* running mean of the timed executions' ticks */
    uint64_t cap;      /* sampling: most executions an inline budget may skip (about 1 ms) */
    uint64_t budget_t; /* sampling: tick at which the last budget was given, and its size */
    uint64_t budget_n;
    uint32_t fastopen; /* the open execution was started inline (entered again: recursion) */
    uint32_t untimed;  /* the open measured execution reads no clock (clock sampling) */
    uint64_t tleft;    /* sampling: measured executions to leave untimed before a timed one */
};

/*
 * One record per thread that ran instrumented code. While the thread lives,
 * tls[] points at its counter arrays (one per module; for a module that was
 * unloaded, at a runtime-owned copy of the counts it had then); when it
 * exits, the counts are copied to snap[] and done is set. Records are never
 * freed, so the writer can read them from any thread, and memory stays
 * bounded: once more than ML_RT_KEEP_EXITED exited threads keep a record, the
 * oldest one is folded into the exited-threads record (ml_rt.acc) and reused
 * by the next new thread, which moves it to the end of the list. The list is
 * thus sorted by index, and only ever changes by appending or by moving a
 * reused record to its end.
 */
struct ml_thread_rec {
    struct ml_thread_rec *next;
    uint32_t tid;   /* 0 for the exited-threads record */
    uint32_t index; /* distinct for every thread, ascending in the list */
    volatile int done;
    uint32_t nmods;      /* modules whose tls[] entry is captured */
    uint32_t cap;        /* capacity of tls[] */
    uint32_t snap_units; /* units covered by snap */
    uint64_t **tls;
    uint64_t *snap;
    struct ml_rstate *rs; /* [ML_RT_MAX_REGIONS] or NULL until the thread enters a region */
    /* Exact mode: per module, u64[nunits][ML_NCLASS] bytes classified by address. */
    uint64_t **exact;
    uint32_t exact_cap;
    uintptr_t stack_lo, stack_hi;
    /* Sampling: open outermost executions, measured and not; the last clock reading. */
    uint32_t measured_open, plain_open;
    uint64_t hint;
    uint64_t rng;                      /* xorshift state for sampling phases, non-zero */
    struct ml_pmu_thread *pmu;         /* MEMLENS_EVENTS counters, NULL until first used */
    struct ml_dynblock *dyn;           /* counts under dynamic contexts; never freed */
    struct ml_thread_rec *exited_next; /* next in the queue of exited records */
    uint32_t snap_cap;                 /* capacity of snap */
};

/*
 * Figures of region g on t as the profile states them, at tick now: executions
 * run inline and not yet drained from the module slots are added, an open
 * timed execution counts up to now, and at MEMLENS_SAMPLE=1 the ticks of the
 * timed executions are scaled to all measured ones (docs/regions.md). pending
 * is ml_rt_fast_pending's answer for t.
 */
void ml_rt_region_stat(const struct ml_thread_rec *t, uint32_t g, const uint64_t *pending,
                       uint64_t now, struct ml_prof_rstat *out);
/* ticks of `timed` executions scaled to `measured` ones (unchanged when timed >= measured). */
uint64_t ml_rt_scale_ticks(uint64_t ticks, uint64_t measured, uint64_t timed);
/* The module at position i of the runtime's list, or NULL. */
struct ml_rt_module *ml_rt_module_at(uint32_t i);
/* t's counts of dynamic pair p, or NULL (writer: any thread; no lock needed, lists only grow). */
const uint64_t *ml_rt_dyn_counts(const struct ml_thread_rec *t, uint32_t p);
/* Per region: executions t ran inline that are not in its records yet ([ML_RT_MAX_REGIONS]). */
void ml_rt_fast_pending(const struct ml_thread_rec *t, uint64_t *pending);

/* Exited threads that keep a record of their own, for per-thread rows of recent threads. */
#define ML_RT_KEEP_EXITED 32

/*
 * Dynamic attribution: region sets interned process-wide (id = index + 1; 0 is
 * no set), and the (module, set) pairs that some thread counted code under.
 */
#define ML_RT_MAX_SETS     4096
#define ML_RT_SET_WORDS    65536
#define ML_RT_MAX_DYNPAIRS 4096

struct ml_dynpair {
    uint32_t mod; /* module index */
    uint32_t set; /* global set id */
};

/* A thread's counts of one (module, set) pair: one per unit of the module (DYN units used). */
struct ml_dynblock {
    uint32_t pair;
    uint64_t *counts;
    struct ml_dynblock *next;
};

struct ml_rt {
    pthread_mutex_t lock;
    int initialised;
    /*
     * The runtime's own record of each module ever registered, in order: a
     * copy of its descriptor whose arrays point into the module until it is
     * unloaded, then into a runtime-owned copy (tls = NULL from then on).
     */
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
    volatile int written;
    uint64_t sample;       /* MEMLENS_SAMPLE: measure 1 in `sample` executions (1 = all) */
    uint64_t sample_t0;    /* time rule's minimum gap, in ticks (UINT64_MAX: no time rule) */
    uint64_t sample_phase; /* MEMLENS_SAMPLE_PHASE, or UINT64_MAX for a random phase */
    struct ml_prof_calib calib;
    uint64_t slow_ticks; /* cost of one timed execution's runtime calls, whole (calib.c) */
    int fast;            /* inline enter/exit may run executions alone (not with events at 1/1) */
    uint64_t fastres;    /* answer of an inline BEGIN: 1 when every execution is measured */
    int leaf_short;      /* sampling with fast: __memlens_enter_leaf's short path may run */
    uint64_t ticks_per_ms;
    /* Exited threads whose records are not folded yet, oldest first. */
    struct ml_thread_rec *exited_head, **exited_tail;
    uint32_t nexited;
    struct ml_thread_rec *acc; /* the sum of the folded threads (tid 0, done), or NULL */
    uint64_t nfolded;          /* threads folded into acc */
    /*
     * Odd while a thread record is being set up, folded into acc or reused:
     * the live reader (src/report/live.c) reads a record again when this
     * changed meanwhile, so that it never sees a thread both in its record
     * and in acc, a reused record with its old index, or acc half-summed.
     */
    uint64_t recseq;
    /* Dynamic attribution: interned global sets (words n, ids... at set_off[id - 1]). */
    uint32_t set_words[ML_RT_SET_WORDS];
    uint32_t set_off[ML_RT_MAX_SETS];
    uint32_t nsets, nset_words;
    struct ml_dynpair pairs[ML_RT_MAX_DYNPAIRS];
    uint32_t npairs;
};

extern struct ml_rt ml_rt;

/* The calling thread's OS id. */
static inline uint32_t ml_rt_gettid(void)
{
    return (uint32_t)syscall(SYS_gettid);
}

/*
 * Who this process is, taken when the runtime starts (files.c), so that
 * neither chdir, pthread_exit from main nor a chroot changes it. A fork child
 * gets a new token and start time. Naming and creation rules: docs/files.md.
 */
struct ml_rt_ident {
    uint64_t token;      /* random per process start; 16 hex digits in file names */
    uint64_t start_time; /* field 22 of /proc/self/stat (clock ticks after boot), 0 unknown */
    uint32_t rank;       /* MPI rank (OMPI_COMM_WORLD_RANK, PMIX_RANK, ...) when has_rank */
    uint32_t nranks;     /* processes in the job, 0 unknown */
    int has_rank;
    char exe[PATH_MAX]; /* /proc/self/exe, else argv[0] */
    char prog[128];     /* last component of exe, cut to 127 bytes; "program" when unknown */
    char cmdline[4096]; /* arguments, shell-quoted, control bytes as '?', "..." when cut */
};

extern struct ml_rt_ident ml_rt_id;

/*
 * files_start: takes the identity above and resolves MEMLENS_OUT (default
 * memlens-out, relative to the current directory at start) to an absolute
 * path, creating the directory and keeping a descriptor to it; called once
 * by init with ml_rt.lock held (and by the trace sink's init; the first call
 * counts). files_fork: the identity of a fork child.
 */
void ml_rt_files_start(void);
void ml_rt_files_fork(void);

/* 64 random bits (getrandom; time, pid and addresses when it has none). */
uint64_t ml_rt_random(void);

/*
 * The output directory's descriptor, checked to be the one opened at start
 * (re-opened by its path by the same rules when the program closed or
 * replaced it). On failure prints one line, "memlens: cannot write <what> to
 * '<dir>': <reason>", and returns a negative errno. Signal-safe.
 */
int ml_rt_out_dir(const char *what);

/* Absolute path of the output directory ("" when unknown). */
const char *ml_rt_out_path(void);

/*
 * name = <prog>.<pid>[.r<rank>].<token as 16 hex digits><suffix>. Returns 0
 * or -ENAMETOOLONG.
 */
int ml_rt_file_name(char *buf, size_t len, uint64_t token, const char *suffix);

/*
 * Creates the temporary file of a new output file in dirfd (ml_sf_create):
 * fills name (the process's token, or a fresh one when a name is taken) and
 * tmp (name ".tmp"), each of len bytes. Returns the descriptor or a negative
 * errno. ml_rt_out_commit then gives tmp its final name without replacing
 * anything, drawing a fresh token for name when it is taken; 0 or -errno.
 */
int ml_rt_out_create(int dirfd, const char *suffix, char *name, char *tmp, size_t len);
int ml_rt_out_commit(int dirfd, const char *suffix, const char *tmp, char *name, size_t len);

/* memlens: cannot write <what> '<dir>/<name>': <errno text of -err> */
void ml_rt_say_file(const char *what, const char *name, int err);

/*
 * Writes the profile of this process into the output directory (see
 * ml_rt_files_start) through a temporary file and rename. Safe to call from a
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

/*
 * The C library's pthread_create, behind the runtime's own (which records
 * every new thread): dlsym(RTLD_NEXT) in a dynamic link, glibc's internal
 * name in a static one. NULL when neither is found.
 */
typedef int (*ml_pthread_create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
ml_pthread_create_fn ml_rt_real_pthread_create(void);

/* Writes parts[0..n-1] and a newline to stderr as one line, without stdio. */
void ml_rt_say(const char *const *parts, size_t n);

/*
 * Start-up calibration (calib.c, < 1 ms): fills ml_rt.calib with the cost of
 * a counter increment and of an empty measured region execution, and returns
 * an estimate of clock ticks per millisecond.
 */
uint64_t ml_rt_calibrate(void);

/*
 * The measured halves of region enter and exit on state s of region g of
 * thread t (counter readings outside the timed interval, clock, bookkeeping).
 * Not inlined, so that calibration pays what a real execution pays.
 */
void ml_rt_measured_begin(struct ml_thread_rec *t, struct ml_rstate *s, uint32_t g);
void ml_rt_measured_end(struct ml_thread_rec *t, struct ml_rstate *s, uint32_t g);
/*
 * Live view (src/runtime/publish.c, src/format/live.h): publish writes
 * /dev/shm/memlens.<pid>.<token> once, at runtime start after
 * ml_rt_files_start, and arranges its removal at exit (one line on stderr
 * when it cannot, unless /dev/shm does not exist); unpublish removes it
 * (signal-safe, and a no-op in a fork child).
 */
void ml_rt_publish(void);
void ml_rt_unpublish(void);

#endif
