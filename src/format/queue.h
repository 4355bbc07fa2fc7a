/* Event queue between a profiled program and `memlens profile`: shared-memory layout, record
 * framing and the producer ABI that instrumented code appends through inline. */
#ifndef ML_FORMAT_QUEUE_H
#define ML_FORMAT_QUEUE_H

#include <linux/futex.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

/*
 * The backend (`memlens profile`, src/backend) creates one memfd, sizes it once
 * (pages are only allocated when touched), writes the header and runs the
 * program with ML_Q_ENV="<fd>:<token>" in its environment and the fd open.
 * The first instrumented process that finds the header with the same token
 * attaches (CAS of attached_pid), maps the whole file and closes the fd.
 *
 * Layout of the file: [header, ML_Q_HDR_SIZE][slot table, max_slots x
 * struct ml_q_slot][data: max_slots x 2 chunks of chunk_size bytes], data
 * page-aligned. Chunk k (0 or 1) of slot s starts at
 * data_off + (2 * s + k) * chunk_size.
 *
 * One producer per program thread: a thread takes a free slot at its first
 * event and gives it back when it exits. A slot is double-buffered: the
 * thread fills one chunk with non-temporal stores while the consumers read
 * the other; a full chunk is published whole (store fence, then its state
 * becomes FULL with a release store) and the thread moves to the other chunk,
 * waiting (never dropping) until every consumer has released it. Chunks of a
 * slot carry consecutive sequence numbers; chunk index = seq & 1. Every
 * consumer reads every chunk (workers partition the events, not the chunks);
 * the last one to release a chunk frees it.
 *
 * The producer's cursor lives in the slot, in shared memory, so that when the
 * program dies in any way (even SIGKILL) the backend, once the process is
 * gone, reads each thread's partly filled chunk up to its cursor: nothing the
 * program appended is lost.
 *
 * Version rule: bump ML_Q_VERSION when any layout, state or framing below
 * changes; a runtime never attaches to a queue of another version.
 */
#define ML_Q_MAGIC   0x31455551534c4d4dull /* "MMLSQUE1" little-endian */
#define ML_Q_VERSION 1
#define ML_Q_ENV     "MEMLENS_QUEUE"

#define ML_Q_UNIT          16u        /* bytes of one record unit */
#define ML_Q_MAX_EVENT     64u        /* bytes of the longest inline event (4 units) */
#define ML_Q_MIN_CHUNK     (1u << 20) /* chunks are at least 1 MiB ... */
#define ML_Q_MAX_CHUNK     (1u << 30) /* ... at most 1 GiB, multiples of 4 KiB */
#define ML_Q_DEFAULT_CHUNK (1u << 20)
#define ML_Q_DEFAULT_SLOTS 1024u /* threads alive at once */
#define ML_Q_MAX_SLOTS     65536u
#define ML_Q_HDR_SIZE      4096u
#define ML_Q_SLOT_SIZE     256u
#define ML_Q_BLOB_FRAGMENT (64u << 10) /* payload bytes of one blob record at most */

/*
 * Record framing. A record is 1 to 4 units of 16 bytes (blobs: see below),
 * 16-byte aligned in its chunk. Word 0 of every record:
 *   bits 0..7    kind: 1..0xef from the event vocabulary (format/events.h);
 *                0 never (a zeroed unit is corruption), 0xf0..0xff reserved here
 *   bits 8..9    extra units after the first (0..3)
 *   bits 10..15  aux: 6 bits the vocabulary gives a meaning per kind (size class, flags)
 *   bits 16..63  id: 48 bits (instruction, function, loop or site id)
 * Word 1 is the kind's main payload (an address for memory events). Extra
 * units carry wider fields: a loaded or stored scalar value of at most 8
 * bytes takes one extra unit (the value, then its type: enum ml_q_val;
 * vectors and wider values are sent without one), a range (memcpy) one more
 * address and a length. The framing does not depend on the vocabulary, so
 * the consumer skips kinds it does not know and checks every record against
 * its chunk.
 */
/*
 * Type of a loaded or stored value (word 3 of a value unit; word 2 holds the
 * value zero-extended to 64 bits: an integer's or a float's bits, a pointer).
 */
enum ml_q_val {
    ML_Q_VAL_INT = 1,
    ML_Q_VAL_FLOAT = 2,
    ML_Q_VAL_DOUBLE = 3,
    ML_Q_VAL_PTR = 4,
};

/* aux of an ML_EV_LOAD_VALUE record: size 1..8 bytes and enum ml_q_val type 1..4. */
#define ML_Q_VAL_AUX(size, type) ((unsigned)(((size)-1) | ((type)-1) << 3))
#define ML_Q_VAL_SIZE(aux)       (((aux)&7u) + 1)
#define ML_Q_VAL_TYPE(aux)       ((((aux) >> 3) & 3u) + 1)

#define ML_Q_KIND_BLOB 0xffu /* id: payload bytes; word 1: blob tag; payload follows */

#define ML_Q_W0(kind, extra, aux, id)                                                              \
    ((uint64_t)(kind) | ((uint64_t)(extra) << 8) | ((uint64_t)(aux) << 10) | ((uint64_t)(id) << 16))
#define ML_Q_KIND(w0)  ((unsigned)((w0)&0xff))
#define ML_Q_EXTRA(w0) ((unsigned)(((w0) >> 8) & 3))
#define ML_Q_AUX(w0)   ((unsigned)(((w0) >> 10) & 63))
#define ML_Q_ID(w0)    ((w0) >> 16)
#define ML_Q_ID_MAX    ((1ull << 48) - 1)

/*
 * Blobs carry variable-length data (the tables of a module: instruction,
 * function and loop ids with their names and file:line) in the same stream,
 * so that they arrive in order with the events that use them. A blob is cut
 * into fragments of at most ML_Q_BLOB_FRAGMENT bytes; each fragment is one
 * record: word 0 = ML_Q_W0(ML_Q_KIND_BLOB, 0, flags, payload bytes), word 1 =
 * the blob's tag (the producer's choice: type and number), then the payload
 * padded to a unit. A fragment never crosses a chunk. The consumer joins the
 * fragments of one thread's stream until one with ML_Q_BLOB_LAST.
 */
#define ML_Q_BLOB_LAST 1u /* aux flag: the blob's last fragment */

/*
 * The producer's cursor: a thread appends at pos while pos <= end, so an
 * event of up to ML_Q_MAX_EVENT bytes always fits; end + ML_Q_MAX_EVENT is
 * the chunk's end. Addresses are the program's (prog_base maps them).
 */
struct ml_q_cursor {
    uint8_t *pos;
    uint8_t *end;
    uint8_t pad[48];
};

enum ml_q_chunk_state { ML_Q_FREE = 0, ML_Q_FILLING = 1, ML_Q_FULL = 2 };
#define ML_Q_CHUNK_LAST 1u /* flags: the thread ended after this chunk */
#define ML_Q_CHUNK_BLOB 2u /* flags: the chunk holds a blob fragment */

struct ml_q_chunk {
    _Atomic uint32_t state;   /* enum ml_q_chunk_state */
    _Atomic uint32_t readers; /* consumers yet to release it (set before FULL) */
    uint32_t len;             /* bytes of records, valid once FULL */
    uint32_t flags;           /* ML_Q_CHUNK_* */
    uint64_t seq;             /* per slot, consecutive across the threads that use it */
    uint32_t thread;          /* process-wide thread number, from 0 in attach order */
    uint32_t tid;             /* kernel thread id */
    uint64_t t0, t1;          /* cycle clock at first use and at publication */
    uint8_t pad[16];
};

enum ml_q_slot_state { ML_Q_SLOT_FREE = 0, ML_Q_SLOT_LIVE = 1, ML_Q_SLOT_ENDED = 2 };

struct ml_q_slot {
    struct ml_q_cursor cur; /* producer only, until the program has died */
    _Atomic uint32_t state; /* enum ml_q_slot_state */
    _Atomic uint32_t pwait; /* the producer sleeps on a chunk's state */
    _Atomic uint32_t fill;  /* index of the chunk being filled */
    uint32_t thread, tid;   /* owner, while LIVE */
    uint32_t pad0;
    uint64_t seq; /* sequence number of the chunk being filled */
    uint8_t pad1[32];
    struct ml_q_chunk chunk[2];
};

/* Lines written by one side only are kept apart from those the other side polls. */
struct ml_q_header {
    /* written by the backend before the program starts; read-only after */
    uint64_t magic;
    uint32_t version;
    uint32_t chunk_size;
    uint64_t token; /* random; the runtime attaches only to the token in ML_Q_ENV */
    uint64_t size;  /* bytes of the whole file */
    uint64_t data_off;
    uint32_t max_slots;
    uint32_t consumers; /* readers of every chunk */
    int32_t backend_pid;
    uint32_t spin_ns; /* how long either side spins before it sleeps (see ML_Q_SPIN_NS) */
    uint8_t pad1[16];
    /* written by the program's runtime */
    _Atomic int32_t attached_pid;  /* 0 until a process attaches */
    _Atomic uint32_t nslots;       /* slots ever used (high-water mark) */
    _Atomic uint32_t threads;      /* threads attached so far */
    _Atomic uint32_t forks;        /* fork() calls of the attached process */
    uint64_t prog_base;            /* the file's address in the program */
    _Atomic uint64_t lost_events;  /* appended where they could not go (see queue.c) */
    _Atomic uint32_t lost_threads; /* threads that found no free slot */
    _Atomic uint32_t detached;     /* the runtime stopped sending (backend gone) */
    _Atomic uint32_t exited;       /* the process ran its exit handlers (exit, return from main) */
    uint32_t pad2;
    _Atomic uint64_t wait_ns; /* producers' time waiting for a free chunk or slot */
    /* producers bump pub after each publication; consumers sleep on it */
    _Atomic uint32_t pub;
    uint8_t pad3[60];
    _Atomic uint32_t cwait; /* consumers asleep on pub */
    uint8_t pad4[60];
    /* written by the backend while it runs */
    _Atomic uint64_t heartbeat; /* bumped every few ms while the backend lives */
    _Atomic uint32_t closing;   /* the backend is going away: stop waiting, discard */
};

_Static_assert(sizeof(struct ml_q_cursor) == 64, "cursor is one line");
_Static_assert(sizeof(struct ml_q_chunk) == 64, "chunk header is one line");
_Static_assert(sizeof(struct ml_q_slot) == ML_Q_SLOT_SIZE, "slot size");
_Static_assert(sizeof(struct ml_q_header) <= ML_Q_HDR_SIZE, "header size");

static inline uint64_t ml_q_data_off(uint32_t max_slots)
{
    return ((uint64_t)ML_Q_HDR_SIZE + (uint64_t)max_slots * ML_Q_SLOT_SIZE + 4095) & ~4095ull;
}

static inline uint64_t ml_q_file_size(uint32_t max_slots, uint32_t chunk_size)
{
    return ml_q_data_off(max_slots) + 2ull * max_slots * chunk_size;
}

static inline struct ml_q_slot *ml_q_slot(struct ml_q_header *h, uint32_t s)
{
    return (struct ml_q_slot *)((uint8_t *)h + ML_Q_HDR_SIZE) + s;
}

static inline uint8_t *ml_q_chunk_data(struct ml_q_header *h, uint32_t s, uint32_t k)
{
    return (uint8_t *)h + h->data_off + (2ull * s + k) * h->chunk_size;
}

/*
 * Producer ABI, the part instrumented code inlines (the instrumenter emits the
 * same sequence in IR; ml_q_put* below are its C form, used by the runtime and
 * by tests):
 *
 *   c = __memlens_q_cur                    ; initial-exec TLS pointer
 *   p = c->pos
 *   if (p > c->end)  c = __memlens_q_next(), p = c->pos   ; cold call
 *   non-temporal stores of the record's words at p, p+8, ...
 *   c->pos = p + record bytes
 *
 * A new thread's __memlens_q_cur points at a read-only cursor whose pos is
 * past its end, so its first event takes the call, which attaches the thread
 * (or, without a backend, points it at a private scratch area that is reused
 * and never read). __memlens_q_next never returns NULL and always returns a
 * cursor with room for ML_Q_MAX_EVENT bytes. The stores need no ordering of
 * their own: __memlens_q_next fences before it publishes a chunk.
 *
 * Events appended by a signal handler that interrupts an append of the same
 * thread between its load of pos and its store may overwrite that event (the
 * cost of a lock-free, fence-free common path); docs/profile.md says so.
 */
extern __thread struct ml_q_cursor *__memlens_q_cur __attribute__((tls_model("initial-exec")));
struct ml_q_cursor *__memlens_q_next(void);
/*
 * Appends one blob (ML_Q_BLOB_FRAGMENT-sized fragments, see above) to the
 * calling thread's stream; for tables, not for the common path.
 */
void __memlens_q_blob(uint64_t tag, const void *data, uint64_t len);
/*
 * Publishes the calling thread's partly filled chunk and waits until the
 * backend has read everything this thread sent (nothing when not attached).
 * For benchmarks and tests that need to know their events arrived.
 */
void __memlens_q_sync(void);

static inline void ml_q_store(uint8_t *p, uint64_t w)
{
#if defined(__x86_64__)
    _mm_stream_si64((long long *)(void *)p, (long long)w);
#else
    *(uint64_t *)(void *)p = w;
#endif
}

static inline uint8_t *ml_q_reserve(struct ml_q_cursor **cp)
{
    struct ml_q_cursor *c = __memlens_q_cur;
    uint8_t *p = c->pos;

    if (__builtin_expect(p > c->end, 0)) {
        c = __memlens_q_next();
        p = c->pos;
    }
    *cp = c;
    return p;
}

/* One-unit event: word 0 and its payload. */
static inline void ml_q_put(uint64_t w0, uint64_t w1)
{
    struct ml_q_cursor *c;
    uint8_t *p = ml_q_reserve(&c);

    ml_q_store(p, w0);
    ml_q_store(p + 8, w1);
    c->pos = p + 16;
}

/* Two-unit event (w0 must say 1 extra unit). */
static inline void ml_q_put2(uint64_t w0, uint64_t w1, uint64_t w2, uint64_t w3)
{
    struct ml_q_cursor *c;
    uint8_t *p = ml_q_reserve(&c);

    ml_q_store(p, w0);
    ml_q_store(p + 8, w1);
    ml_q_store(p + 16, w2);
    ml_q_store(p + 24, w3);
    c->pos = p + 32;
}

/* Waiting, on both sides: futexes on shared memory (never FUTEX_PRIVATE), a pause hint. */
static inline long ml_q_futex(_Atomic uint32_t *addr, int op, uint32_t val,
                              const struct timespec *ts)
{
    return syscall(SYS_futex, (uint32_t *)addr, op, val, ts, NULL, 0);
}

static inline void ml_q_relax(void)
{
#if defined(__x86_64__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

/*
 * A side that waits for the other spins up to spin_ns before it sleeps on a
 * futex. With a core for each worker and one for the program, ML_Q_SPIN_NS:
 * about a quarter of what one chunk takes to fill or read, so that a short
 * wait does not pay the scheduler's wake-up latency. With fewer cores,
 * ML_Q_SPIN_FEW_NS: a spinning worker would hold the core the program or
 * another worker needs. Longer spins (200 us) made hand-overs twice as slow on
 * a loaded machine, and yielding gives the core away for a whole time slice
 * whenever another process is runnable (bench/README.md, "Event queue").
 */
#define ML_Q_SPIN_NS     20000
#define ML_Q_SPIN_FEW_NS 2000

static inline uint64_t ml_q_now_ns(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/*
 * Consumer side: the records of one chunk. Returns the record's length in
 * bytes, or 0 when the record at off is malformed or does not fit in len
 * (the rest of the chunk is then unusable and counted as corrupt).
 */
static inline uint32_t ml_q_record_len(const uint8_t *data, uint32_t off, uint32_t len)
{
    uint64_t w0, n;

    if (off > len || len - off < ML_Q_UNIT)
        return 0;
    w0 = *(const uint64_t *)(const void *)(data + off);
    if (ML_Q_KIND(w0) == 0)
        return 0;
    if (ML_Q_KIND(w0) == ML_Q_KIND_BLOB) {
        if (ML_Q_EXTRA(w0) || ML_Q_ID(w0) > ML_Q_BLOB_FRAGMENT)
            return 0;
        n = ML_Q_UNIT + ((ML_Q_ID(w0) + ML_Q_UNIT - 1) & ~(uint64_t)(ML_Q_UNIT - 1));
    } else {
        n = ML_Q_UNIT * (1u + ML_Q_EXTRA(w0));
    }
    return n <= len - off ? (uint32_t)n : 0;
}

#endif
