/* Event profiling backend: queue consumer, data-parallel workers and the module interface. */
#ifndef ML_BACKEND_H
#define ML_BACKEND_H

#include <stdint.h>
#include <stdio.h>

#include "backend/context.h"
#include "format/queue.h"

/*
 * A module is one file in src/backend/modules/ holding one struct ml_module,
 * listed in the registry table (modules.c). Each worker thread of the backend
 * reads every event of the program and calls, for each event, the handlers
 * registered for its kind that this worker owns (by partition); each worker
 * has its own module state, so handlers never lock. At the end the driver
 * merges the workers' states into worker 0's and calls report.
 */
struct ml_bworker;

/*
 * Handler of one event kind: rec points at the record (word 0 first, as in
 * format/queue.h; valid only during the call), thread is the program thread
 * number (0 = the first thread that sent an event).
 */
typedef void (*ml_bev_fn)(void *state, struct ml_bworker *w, uint32_t thread, const uint64_t *rec);

/* Which worker receives an event of a handler. */
enum ml_bpart {
    ML_BPART_ONE = 0, /* worker 0 only (modules that are not data-parallel) */
    ML_BPART_ALL,     /* every worker (context events; ranges a handler splits itself) */
    ML_BPART_ADDR,    /* the owner of word 1 (an address), by 4 KiB block */
    ML_BPART_ID,      /* the owner of word 0's id (an instruction, site or loop) */
};

/* Bit of event kind k in struct ml_module.ev_kinds. */
#define ML_BEV(k) (1ull << (k))

#define ML_BKIND_ANY 0x100u /* a handler for every kind without one of its own */

struct ml_bhandler {
    uint16_t kind; /* 1..0xef, or ML_BKIND_ANY; 0 ends the table */
    uint8_t part;  /* enum ml_bpart */
    ml_bev_fn fn;
};

/* What a report knows of the run; see docs/profile.md for the completeness rule. */
struct ml_brun {
    const char *prog;       /* program name (basename) */
    int pid;                /* the process that sent the events */
    int complete;           /* every event of a normally ended run arrived */
    char ended[64];         /* "exit 0", "signal 11 (SIGSEGV)", "unknown" */
    char why[256];          /* when incomplete: why, in words; else "" */
    uint64_t events, bytes; /* records and bytes received */
    uint64_t chunks, threads;
    uint64_t lost_events, lost_threads, corrupt_chunks;
    uint32_t forks;
    uint32_t workers;
    double seconds;      /* from the program's start until the last event was read */
    double wait_seconds; /* the program's threads waited this long for the backend, in all */
    double busy_seconds; /* the busiest worker read chunks this long */
};

/* Blob (format/queue.h) received from the program, complete, in arrival order. */
struct ml_bblob {
    struct ml_bblob *next;
    uint64_t tag;
    uint32_t thread;
    uint64_t len;
    uint8_t data[];
};

struct ml_bout {
    FILE *table; /* the readable table (stdout) */
    FILE *csv;   /* <prog>.<pid>.<module>.csv */
    FILE *json;  /* the module's "data" value inside <prog>.<pid>.<module>.json */
    const struct ml_brun *run;
    const struct ml_bblob *blobs; /* blobs the program sent, in order */
};

struct ml_module {
    const char *name;
    const char *summary;
    const struct ml_bhandler *handlers; /* one per kind the module wants (or chunk, below) */
    /*
     * What `memlens cc --events=<name>` instruments for the module: event
     * kinds (bit k: kind k of format/events.h) and fields (ML_EVF_*). The
     * instrumenter emits nothing else and computes no other field.
     */
    uint64_t ev_kinds;
    unsigned ev_fields;
    /*
     * Of ev_kinds, the function and loop kinds the module needs only in
     * functions that can make an object (a heap block through a call, or a
     * stack object): its frames name where objects are made, so that frames
     * of other functions change nothing it reports. The instrumenter leaves
     * them out elsewhere unless another chosen module needs them.
     */
    uint64_t ev_objs_only;
    /* The module needs no loads of variables no pointer names (ML_EVF_SHARED_LOADS). */
    int ev_shared_loads;
    /* A fresh state for worker w (NULL: out of memory). */
    void *(*init)(struct ml_bworker *w);
    /* Folds state from into into and frees from; returns 0 or -errno. */
    int (*merge)(void *into, void *from);
    /* Writes the merged state's table, CSV and JSON value; 0 or -errno. */
    int (*report)(void *state, struct ml_bout *out);
    /* Frees a state (optional: NULL when free() of the state suffices). */
    void (*fini)(void *state);
    /*
     * Optional, for modules whose work per event is so small that a call per
     * event would cost more: records of one thread (len a multiple of a unit),
     * blobs included (skip them). The module partitions the records itself and
     * checks their framing as it goes (ml_q_record_len's rules): it returns
     * the bytes of well-formed records it read, stopping at the first
     * malformed one, and adds the records other than blobs to *records. When
     * every module of a run reads chunks, the driver does not walk them too.
     */
    uint32_t (*chunk)(void *state, struct ml_bworker *w, uint32_t thread, const uint8_t *data,
                      uint32_t len, uint64_t *records);
    /*
     * With chunk: the merged result does not depend on which worker read
     * which chunk, nor in what order (counts, sums). When every module of a
     * run says so, the driver deals each chunk to one worker instead of
     * having every worker read every chunk (w->whole is then set: the worker
     * owns every record it is given), so that N workers share the reading.
     */
    int chunk_any;
};

/* Length of a record with extra units or a blob, 0 if malformed (the slow path of ml_bchunk_rec).
 */
uint32_t ml_bchunk_rec_slow(const uint8_t *data, uint32_t off, uint32_t len);

/*
 * For chunk callbacks: the length of the record at off of data[len] (0:
 * malformed, stop), and in *blob whether it is a blob (skip it). The common
 * one-unit record takes no call, and its length is a constant on a predicted
 * branch, so that the next record's load does not wait on this one (see
 * consume() in backend.c).
 */
static inline uint32_t ml_bchunk_rec(const uint8_t *data, uint32_t off, uint32_t len, int *blob)
{
    const uint64_t w0 = *(const uint64_t *)(const void *)(data + off);
    const unsigned kind = ML_Q_KIND(w0);

    *blob = 0;
    if (__builtin_expect(kind == 0 || kind == ML_Q_KIND_BLOB || ML_Q_EXTRA(w0), 0)) {
        *blob = kind == ML_Q_KIND_BLOB;
        return ml_bchunk_rec_slow(data, off, len);
    }
    return ML_Q_UNIT;
}

/* Registry (modules.c): the modules memlens knows, in the order --help lists them. */
extern const struct ml_module *const ml_modules[];
const struct ml_module *ml_module_find(const char *name);
/*
 * Checks that m has every required callback. Returns 0, or -EINVAL with a
 * message naming the missing one in err ("module 'x' has no 'merge' callback").
 */
int ml_module_check(const struct ml_module *m, char *err, size_t errlen);

/* ---- what a handler may ask of its worker ---- */

struct ml_bworker {
    uint32_t index, n; /* this worker's number and the number of workers */
    int whole;         /* chunks are dealt whole to one worker (ml_module.chunk_any) */
    /* per program thread: its context stack in this worker (context.h) */
    struct ml_ctx *ctx;
    struct ml_cstack **stacks;
    uint32_t nstacks;
    struct ml_backend *b;
};

/*
 * Address partitioning is by 4 KiB block: a cache line (what 'sharing' needs)
 * never spans two workers, consecutive accesses mostly stay with one worker
 * (its branch predicts), and each worker's shadow memory covers only its own
 * blocks, so that N workers do not hold N copies of it.
 */
#define ML_BPART_BLOCK_BITS 12

/* The worker that owns the block holding addr (of n workers). */
static inline uint32_t ml_bpart_addr(uint64_t addr, uint32_t n)
{
    uint64_t h = (addr >> ML_BPART_BLOCK_BITS) * 0x9e3779b97f4a7c15ull;

    return (uint32_t)(((h >> 32) * n) >> 32);
}

/* The worker that owns id (of n workers). */
static inline uint32_t ml_bpart_id(uint64_t id, uint32_t n)
{
    uint64_t h = (id + 1) * 0xbf58476d1ce4e5b9ull;

    return (uint32_t)(((h >> 32) * n) >> 32);
}

static inline int ml_bw_owns_addr(const struct ml_bworker *w, uint64_t addr)
{
    return ml_bpart_addr(addr, w->n) == w->index;
}

/*
 * Calls fn on each maximal part of [lo, hi) whose blocks this worker owns: how a handler registered
 * ML_BPART_ALL splits a range (memcpy, an unaligned access) so that every byte is handled by
 * exactly one worker.
 */
void ml_bw_owned_ranges(const struct ml_bworker *w, uint64_t lo, uint64_t hi,
                        void (*fn)(void *arg, uint64_t lo, uint64_t hi), void *arg);

/*
 * The calling worker's context stack of a program thread (created on first
 * use; NULL when out of memory). Context ids are this worker's (context.h).
 */
struct ml_cstack *ml_bw_stack(struct ml_bworker *w, uint32_t thread);

/* ---- the driver ---- */

struct ml_backend_opts {
    const struct ml_module **mods;
    uint32_t nmods;
    uint32_t workers; /* >= 1 */
    /*
     * Unless set, workers that would not each have a CPU beside the
     * program's are not started (ml_backend_workers tells how many run),
     * except when chunks are dealt (ml_module.chunk_any). Each worker reads
     * every event and does its share: on two CPUs, two workers cost 1.8
     * times the CPU time of one even when they never run at once (pinned to
     * one CPU), so they can only be slower (docs/profile.md, "Workers").
     */
    int force_workers;
    uint32_t chunk_size;  /* bytes, 0: default */
    uint32_t max_threads; /* slots, 0: default */
};

struct ml_backend;

/*
 * Creates the queue (memfd, header) and the workers' states. The caller then
 * starts the program with ml_backend_env() in its environment and the fd
 * ml_backend_fd() open (not close-on-exec), and calls ml_backend_run.
 * Returns 0 or -errno; err says what failed.
 */
int ml_backend_new(struct ml_backend **out, const struct ml_backend_opts *o, char *err,
                   size_t errlen);
/* The workers the backend runs (fewer than asked: see ml_backend_opts.force_workers). */
uint32_t ml_backend_workers(const struct ml_backend *b);
int ml_backend_fd(const struct ml_backend *b);
/* "<fd>:<token>" for ML_Q_ENV. */
const char *ml_backend_env(const struct ml_backend *b);
/* Starts the worker threads; 0 or -errno. */
int ml_backend_start(struct ml_backend *b);
/* The attached process (0 before it attaches); called while the program runs. */
int ml_backend_attached(const struct ml_backend *b);
/* Whether the attached process ran its exit handlers (it ended by exit or return from main). */
int ml_backend_exited(const struct ml_backend *b);
/* Bumps the heartbeat that tells producers the backend lives; call every few ms. */
void ml_backend_beat(struct ml_backend *b);
/*
 * The program has died (its process is gone: every store it made is
 * visible). Workers read what is left, including each thread's partly filled
 * chunk, and stop. Fills run (except prog, pid, ended and complete, which
 * the caller sets from the wait status and then passes to ml_backend_finish).
 */
void ml_backend_stop(struct ml_backend *b, struct ml_brun *run);
/* Stops workers without reading more (the backend gives up): producers discard. */
void ml_backend_abandon(struct ml_backend *b);
/* Merges the workers' states of module i into one; returns it (NULL on error). */
void *ml_backend_merged(struct ml_backend *b, uint32_t i, int *err);
/* Blobs received, in order (owned by the backend). */
const struct ml_bblob *ml_backend_blobs(const struct ml_backend *b);
void ml_backend_free(struct ml_backend *b);

/* Output files (out.c): see docs/profile.md, "Output files". */
struct ml_bfiles;
/*
 * Opens the output directory dir (relative: to the current directory now),
 * creating missing components (mode 0700), by the rules of docs/files.md: a
 * symbolic link owned by another user is never followed (-EPERM). 0 or
 * -errno; where gets the path walked up to a failing component.
 */
int ml_bfiles_open(struct ml_bfiles **out, const char *dir, char *where, size_t wlen);
/*
 * Picks the stem "<prog>.<pid>", or "<prog>.<pid>.<n>" with the smallest n >= 2
 * when a file of another run already starts with the former (pid reuse), so
 * that this run never replaces another's files. prog is reduced to safe
 * characters. 0 or -errno.
 */
int ml_bfiles_name(struct ml_bfiles *f, const char *prog, int pid);
/*
 * A new file "<stem>.<module>.<ext>" being written: a temporary created by
 * ml_sf_create (O_EXCL|O_NOFOLLOW, mode 0600), renamed into place by
 * ml_sf_commit (never over another file) in ml_bfiles_commit. NULL and errno
 * on failure.
 */
FILE *ml_bfiles_create(struct ml_bfiles *f, const char *module, const char *ext);
/*
 * Flushes and closes fp and renames its temporary into place; path receives
 * the final path. On failure the temporary is removed. 0 or -errno.
 */
int ml_bfiles_commit(struct ml_bfiles *f, FILE *fp, char *path, size_t pathlen);
/* Removes fp's temporary (a file that will not be committed). */
void ml_bfiles_discard(struct ml_bfiles *f, FILE *fp);
void ml_bfiles_close(struct ml_bfiles *f);

#endif
