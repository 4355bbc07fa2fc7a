/* Trace sink: per-thread buffers filled inline, a writer thread that encodes and compresses chunks.
 */
#include "format/trace-abi.h"
#include "format/trace.h"
#include "runtime/clock.h"
#include "runtime/rt.h"
#include "format/safefile.h"
#include "runtime/trace-rt.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#define ML_EXPORT __attribute__((visibility("default")))

#ifndef ML_VERSION
#define ML_VERSION "0.1.0"
#endif

/* Segments a thread's writer state remembers as checked for seg_fast. */
#define NHCACHE 1024
/* Prepared descriptor flag: all sites are one-word accesses. */
#define SEG_SIMPLE 0x8000u
/* A buffer holds BUF_WORDS words of records (plus the ABI's slack); NBUFS per thread. */
#define BUF_WORDS 32768
#define NBUFS     8
/*
 * A thread that finds no free buffer encodes its full one itself (self_encode). Its chunks wait
 * in the writer's queue behind the buffers queued before them: up to NPRE at once, their
 * payloads in a ring of SELF_RING bytes, each given SELF_OUT (a buffer's worst case) to fill;
 * its prediction state covers at most SELF_SITES sites. All in the thread's own mapping, since
 * it may run in a signal handler and must not call malloc.
 */
#define SELF_OUT   (((size_t)(BUF_WORDS + 4096) * ML_TENC_MAX_REC + 65536 + 4095) & ~(size_t)4095)
#define SELF_RING  (2 * SELF_OUT)
#define SELF_SITES 65536u
#define NPRE       64
/* ... and only once the writer has had work queued for this long without a break: a writer
   that keeps up but lags for a moment (a wake-up) is waited for, as encoding costs more. */
#define SELF_BUSY_NS 2000000ull
/* A chunk is cut before it exceeds the reader's bound, or after a second without one. */
#define CHUNK_RECORDS (ML_CHUNK_MAX_RECORDS - 4 * ML_TB_MAX_SEG)
#define CHUNK_NS      1000000000ull
_Static_assert(BUF_WORDS < CHUNK_RECORDS, "a self-encoded buffer is one chunk");
/* How often the writer notes where each thread is in its buffer (time points, see sample()). */
#define SAMPLE_NS 200000
/* How long exit and fatal signals wait for the writer to put everything on disk. */
#define FINISH_WAIT_NS 30000000000ull
/* How long the end waits for a thread that is encoding its own buffer (it takes < 1 ms). */
#define FINISH_ENCODE_NS 100000000ull

ML_EXPORT __thread uint64_t *__memlens_tb_ptr __attribute__((tls_model("initial-exec")));
ML_EXPORT __thread uint64_t *__memlens_tb_end __attribute__((tls_model("initial-exec")));
/* Bit 0: off (MEMLENS_TRACE_ON/OFF, start=off); bit 1: no region open (regions-only). */
ML_EXPORT volatile uint32_t __memlens_trace_gate;

/* MEMLENS_TRACE=self=off|always; the default encodes only when no buffer is free. */
enum { SELF_WHEN_BEHIND, SELF_OFF, SELF_ALWAYS };

enum { JOB_BUF = 1, JOB_MODULE, JOB_SYNC, JOB_UNMODULE, JOB_PRE };

struct tjob {
    struct tjob *next;
    int type;
};

struct tthread;

/* Positions of a thread in its buffer that the writer saw, with the time (see sample()). */
#define NSAMPLES 32

struct tbuf {
    struct tjob job;
    struct tthread *t;
    struct tbuf *free_next;
    uint64_t *words;
    uint32_t used;  /* words of records */
    uint32_t final; /* the thread's last buffer */
    uint64_t t_start, t_end;
    /* Writer only: time points inside the buffer, in order. */
    uint32_t nsamp, samp_skip;
    uint32_t samp_pos[NSAMPLES];
    uint64_t samp_tick[NSAMPLES];
};

struct pending { /* --collapse: the record being merged */
    uint32_t site, weight;
    uint64_t lo, hi;
    int kind;
};

/*
 * Segment headers seen in the current chunk (gen) whose descriptor is valid, simple and
 * whose sites are all seen and chained: seg_fast may encode them without looking again.
 */
struct hcache {
    uint64_t h;
    const uint32_t *d;
    uint32_t gen, n;
    /* Where the header last started a segment in fast loop `loop` (cycle detection), and
       from where a span ending at it is worth checking again (back: words after a failed
       check, doubling); per header, so that one that never closes a cycle (the first
       segment of a row's inner loop) does not delay the one that does. */
    const uint64_t *pos, *next;
    uint64_t loop;
    uint32_t back;
};

/*
 * Cycle replay (cyc_verify, cyc_replay): a span of CYC_MAXL words at most
 * whose segments repeat, every address of a regular site moving by a fixed
 * delta per site from one repetition to the next, encodes to the same bytes
 * each time once the prediction state is steady, except for the records of
 * its holes (sites whose addresses do not move so: x[col[j]] in a sparse
 * row), which are encoded in place. The replay compares the regular words,
 * copies their bytes and encodes the holes with their live state.
 */
#define CYC_MAXL 256
#define CYC_MAXM 2048
#define CYC_TAB  512
#define CYC_NONE 0xffffu
/* One step of a replayed repetition: predicted records, then fixed tokens, a hole or nothing. */
enum { HOP_END, HOP_BYTES, HOP_HOLE };
struct hop {
    uint32_t pre; /* predicted records before it */
    uint8_t type;
    uint8_t slen;  /* HOP_HOLE: bytes of its site field (0: the site is predicted) */
    uint16_t off;  /* HOP_BYTES: the tokens in m; HOP_HOLE: its site field in m */
    uint16_t len;  /* HOP_BYTES */
    uint16_t word; /* HOP_HOLE: its word in the span */
    uint16_t hi;   /* HOP_HOLE: its site in hs[] */
};
/* A hole site's prediction state while a replay runs (side by side, not in the site table). */
struct hst {
    uint64_t last;
    int64_t stride, cand;
    unsigned sh; /* ml_tshift of its size */
};
struct cycle {
    uint64_t delta[CYC_MAXL]; /* per word: headers and holes 0, addresses their site's delta */
    uint64_t mask[CYC_MAXL];  /* per word: 0 for a hole's address, else all ones */
    uint16_t wsite[CYC_MAXL]; /* per word: its site in site[] (CYC_NONE: a header) */
    uint32_t site[CYC_MAXL];  /* the span's distinct sites */
    uint64_t sdelta[CYC_MAXL];
    uint16_t lastw[CYC_MAXL]; /* and the word of each one's last occurrence */
    uint8_t hole[CYC_MAXL];
    uint32_t nsites, tag;
    struct {
        uint32_t site, tag, first;
    } tab[CYC_TAB];
    uint16_t tlen[CYC_MAXL], toff[CYC_MAXL], tslen[CYC_MAXL]; /* per record of the capture */
    struct hop op[CYC_MAXL + 1];
    uint32_t nop, L, R, nh;
    uint16_t hslot[CYC_MAXL]; /* per site in site[]: its place in hs[] (holes) */
    uint32_t hsite[CYC_MAXL];
    struct hst hs[CYC_MAXL];
    /* A replay that stopped at a repetition's end (time point, fault, end of the buffer or
       of the output room) resumes in the next pass when the chunk (gen) has no record more
       (count): prev holds the last repetition's words, the next one is compared with. */
    uint32_t gen, count;
    uint64_t prev[CYC_MAXL];
    uint8_t m[CYC_MAXM + 16]; /* the fixed bytes of one repetition (copied 16 at a time) */
};

/* One encoder of a thread's records: the writer's, or the thread's own (self_encode). */
struct wst {
    struct ml_tenc enc;
    int open;  /* a chunk is being encoded */
    int fixed; /* out and st are the thread's fixed memory: never grown */
    uint64_t open_ns;
    struct pending pend;
    struct hcache *hc; /* [NHCACHE] */
    struct cycle *cy;
    uint64_t loops; /* fast loops entered (hcache.loop) */
    /* The last segment encoded, when fast_run may take the next ones (else fast_h is 0). */
    uint64_t fast_h;
    const uint32_t *fast_d;
    uint32_t fast_n;
};

struct tthread {
    struct tthread *next; /* every thread ever set up */
    uint32_t index, tid;
    struct tbuf *volatile cur;
    struct tbuf *free;       /* pushed by the writer, popped by the thread */
    volatile uint32_t freed; /* futex word: buffers the writer gave back */
    volatile int waiting;    /* the thread sleeps on freed until it reaches want */
    uint32_t want;
    struct tbuf bufs[NBUFS];
    void *mem;
    size_t memlen;
    uint64_t **ptr_slot; /* the thread's __memlens_tb_ptr, for exit from another thread */
    uint64_t t_last;     /* tick of its last hand-over */
    struct ml_tr_pf *pf;
    /* Writer side. */
    struct wst w;
    uint32_t seq;
    int retired; /* final buffer processed, memory released */
    /* Self-encoding (see self_encode): the thread's own encoder, its chunks, their ring. */
    struct wst pw;
    uint8_t *ring;
    size_t ring_head;
    uint32_t pre_next;
    struct pjob {
        struct tjob job;
        struct tthread *t;
        uint8_t *out;
        size_t len;
        uint32_t count;
        uint64_t t_first, t_last, raw, lost;
        volatile uint32_t busy; /* queued to the writer, not yet written */
    } pre[NPRE];
    volatile int encoding; /* the thread is encoding a buffer itself */
};

struct tmodule {
    struct tjob job;
    struct ml_ev_module *m;
    volatile uint32_t done; /* JOB_UNMODULE: the writer has forgotten the module */
};

struct sync {
    struct tjob job;
    uint32_t reason, signal;
    volatile uint32_t done;
};

/* Writer-side view of a module's segment descriptors: global ids and word counts. */
struct segmap {
    uintptr_t lo, hi; /* address range of the module's segs */
    uint32_t *prep;   /* per descriptor: n | words << 16, then gid | words << 30 per site */
    uint8_t *starts;  /* bit per 8-byte slot: a descriptor starts here */
};

static struct {
    pthread_mutex_t lock;
    pthread_mutex_t enc_lock; /* the writer changes sites and maps; self_encode reads them */
    int init;
    volatile int disabled; /* no file or writer: records go to scratch */
    volatile int finishing;
    uint32_t options; /* ML_TF_* */
    int self_mode;    /* SELF_*: when threads encode their own buffers */
    int slow;         /* fast=off: the general encoder only, for comparison */
    uint64_t tick0, mono0, real0;
    uint32_t pid, ppid;
    /* registration */
    uint32_t nsites, nmarkers;
    /* threads */
    struct tthread *threads;
    uint32_t nthreads;
    /* queue to the writer */
    struct tjob *volatile queue;
    volatile uint32_t wake; /* futex word */
    volatile int writer_sleeping;
    pthread_t writer;
    int writer_started;
    int backlog;               /* the writer has more jobs waiting than the one it runs */
    volatile uint64_t idle_ns; /* when the writer last found its queue empty */
    pid_t writer_tid;
    /* totals (writer) */
    uint64_t records, waits, wait_ticks, lost, raw_words;
    volatile uint64_t p_dropped, p_waits, p_wait_ticks; /* producers */
    volatile uint64_t p_self;                           /* buffers threads encoded themselves */
    /* writer state */
    int fd;
    char path[4096];
    struct ml_tsite *sites;
    uint32_t cap_sites, wsites;
    uint32_t wmarkers;
    struct segmap *maps;
    uint32_t nmaps;
    struct ml_tbuf out;
    void *zctx;
    size_t (*z_compress)(void *, void *, size_t, const void *, size_t, int);
    size_t (*z_bound)(size_t);
    unsigned (*z_iserror)(size_t);
    char faults_why[200], pfn_why[200], zstd_why[200];
    int open_regions;
} tr = {.lock = PTHREAD_MUTEX_INITIALIZER, .enc_lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1};

static __thread struct tthread *self __attribute__((tls_model("initial-exec")));
/* Set once a thread's record is gone (it exited): later records go to scratch. */
static __thread int self_gone __attribute__((tls_model("initial-exec")));
static uint64_t scratch[BUF_WORDS];
static pthread_key_t exit_key;

static void say(const char *a, const char *b, const char *c)
{
    char msg[600];
    size_t n = 0;
    const char *parts[] = {"memlens: ", a, b, c, "\n"};

    for (size_t i = 0; i < 5; i++)
        for (const char *s = parts[i]; s && *s && n < sizeof(msg) - 1; s++)
            msg[n++] = *s;
    if (write(2, msg, n) < 0)
        return;
}

static void futex_wake(volatile uint32_t *w)
{
    syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void pause_ns(long ns)
{
    struct timespec ts = {0, ns};

    nanosleep(&ts, NULL);
}

/* ---- the queue to the writer (lock-free, async-signal-safe push) ---- */

static void push_job(struct tjob *j)
{
    struct tjob *head = tr.queue;

    do
        j->next = head;
    while (
        !__atomic_compare_exchange_n(&tr.queue, &head, j, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
    __atomic_add_fetch(&tr.wake, 1, __ATOMIC_RELEASE);
    if (__atomic_load_n(&tr.writer_sleeping, __ATOMIC_ACQUIRE))
        futex_wake(&tr.wake);
}

static void push_free(struct tthread *t, struct tbuf *b)
{
    struct tbuf *head = __atomic_load_n(&t->free, __ATOMIC_RELAXED);

    do
        b->free_next = head;
    while (!__atomic_compare_exchange_n(&t->free, &head, b, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
    uint32_t freed = __atomic_add_fetch(&t->freed, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&t->waiting, __ATOMIC_SEQ_CST) &&
        (int32_t)(freed - __atomic_load_n(&t->want, __ATOMIC_RELAXED)) >= 0)
        futex_wake(&t->freed);
}

/* Only the owning thread pops, so the stack cannot see ABA. */
static struct tbuf *pop_free(struct tthread *t)
{
    struct tbuf *head = __atomic_load_n(&t->free, __ATOMIC_ACQUIRE);

    while (head && !__atomic_compare_exchange_n(&t->free, &head, head->free_next, 1,
                                                __ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE))
        ;
    return head;
}

static void writer_ensure(void);

/* ---- producer side ---- */

/* Records appended now go where nobody reads them. */
static void use_scratch(void)
{
    __memlens_tb_ptr = scratch;
    __memlens_tb_end = scratch + BUF_WORDS;
}

static struct tthread *thread_setup(void);

static void chunk_begin(struct wst *s, uint64_t t_first);
static void process_buffer(struct wst *s, struct tbuf *b, uint64_t *lost);

/*
 * No free buffer: rather than sleep until the writer gives one back, the
 * thread encodes its full buffer b itself into a chunk that the writer only
 * writes out (JOB_PRE, write_pre), and goes on in b. A program that records
 * faster than the writer encodes then keeps both the writer and itself
 * encoding instead of one of them waiting. The chunk starts its prediction
 * afresh, like every chunk; it holds no page faults or time samples (the
 * writer puts the faults in its next chunk). Returns 0 when the thread cannot
 * (every slot or the ring still queued, the tables changing, too many sites, --collapse
 * whose runs would be cut), and it waits as before.
 */
static int self_encode(struct tthread *t, struct tbuf *b)
{
    struct pjob *p;
    struct wst *s = &t->pw;
    uint64_t lost = 0;
    size_t tail = SIZE_MAX, at = SIZE_MAX;

    if ((tr.options & ML_TF_COLLAPSE) ||
        (tr.self_mode != SELF_ALWAYS &&
         ml_rt_mono_ns() - __atomic_load_n(&tr.idle_ns, __ATOMIC_RELAXED) < SELF_BUSY_NS))
        return 0;
    /* The next slot, and SELF_OUT bytes of the ring after the oldest chunk still queued:
       slots are taken in turn and written in order, so the busy ones follow the next. */
    p = &t->pre[t->pre_next % NPRE];
    if (__atomic_load_n(&p->busy, __ATOMIC_ACQUIRE))
        return 0;
    for (uint32_t i = 1; i < NPRE; i++) {
        const struct pjob *q = &t->pre[(t->pre_next + i) % NPRE];
        if (__atomic_load_n(&q->busy, __ATOMIC_ACQUIRE)) {
            tail = (size_t)(q->out - t->ring);
            break;
        }
    }
    if (tail == SIZE_MAX)
        at = 0;
    else if (t->ring_head > tail)
        at = SELF_RING - t->ring_head >= SELF_OUT ? t->ring_head : tail >= SELF_OUT ? 0 : SIZE_MAX;
    else if (t->ring_head < tail && tail - t->ring_head >= SELF_OUT)
        at = t->ring_head;
    if (at == SIZE_MAX || pthread_mutex_trylock(&tr.enc_lock))
        return 0;
    /* Every module registered so far must be known to the writer: b may hold its records. */
    __atomic_store_n(&t->encoding, 1, __ATOMIC_SEQ_CST); /* before finishing is read */
    if (tr.wsites > SELF_SITES || tr.wsites < __atomic_load_n(&tr.nsites, __ATOMIC_ACQUIRE) ||
        tr.disabled || __atomic_load_n(&tr.finishing, __ATOMIC_SEQ_CST)) {
        __atomic_store_n(&t->encoding, 0, __ATOMIC_RELEASE);
        pthread_mutex_unlock(&tr.enc_lock);
        return 0;
    }
    p->out = t->ring + at;
    s->enc.out = p->out;
    chunk_begin(s, b->t_start);
    process_buffer(s, b, &lost);
    pthread_mutex_unlock(&tr.enc_lock);
    s->open = 0;
    p->count = s->enc.count;
    if (s->enc.len + 16 <= s->enc.cap) {
        s->enc.len = (size_t)(ml_tenc_flush_run(&s->enc, s->enc.out + s->enc.len) - s->enc.out);
    } else { /* cannot happen with SELF_OUT's bound; lose the chunk rather than break it */
        lost = b->used;
        p->count = 0;
    }
    p->len = s->enc.len;
    t->ring_head = at + p->len;
    t->pre_next++;
    p->t_first = b->t_start;
    p->t_last = b->t_end > s->enc.t_cur ? b->t_end : s->enc.t_cur;
    p->raw = b->used;
    p->lost = lost;
    b->nsamp = b->samp_skip = 0;
    __atomic_store_n(&p->busy, 1, __ATOMIC_RELEASE);
    __atomic_add_fetch(&tr.p_self, 1, __ATOMIC_RELAXED);
    push_job(&p->job);
    __atomic_store_n(&t->encoding, 0, __ATOMIC_RELEASE); /* finish() waits for the push */
    return 1;
}

enum { HAND_NEXT, HAND_EXIT, HAND_DETACH };

/*
 * Hands t's current buffer (records up to used_end) to the writer. HAND_NEXT
 * makes a free buffer current, waiting for the writer (or, with --drop,
 * discarding the records of one); HAND_EXIT: the thread is exiting, the
 * writer releases its buffers; HAND_DETACH: the process is ending, the thread
 * (maybe running elsewhere) keeps writing into memory nobody reads. Whoever
 * takes t->cur first hands it over, so a buffer is never queued twice.
 */
static void hand_over(struct tthread *t, uint64_t *used_end, int mode)
{
    struct tbuf *b = __atomic_exchange_n(&t->cur, NULL, __ATOMIC_ACQ_REL), *nb = NULL;
    uint64_t now = ml_rt_ticks();

    if (b) {
        b->used = used_end > b->words ? (uint32_t)(used_end - b->words) : 0;
        if (b->used > BUF_WORDS)
            b->used = 0; /* a torn pointer; nothing trustworthy here */
        b->t_start = t->t_last;
        b->t_end = now;
        b->final = mode == HAND_EXIT;
        t->t_last = now;
        int drop = (tr.options & ML_TF_DROP) != 0;
        if (mode == HAND_NEXT && ((tr.self_mode == SELF_ALWAYS && !drop) || !(nb = pop_free(t)))) {
            /*
             * No free buffer (or self=always). With --drop, b's records are
             * lost and b stays current. It is never queued: the writer would
             * read it while it is refilled, and queueing it again would
             * corrupt the queue. Otherwise the thread encodes b itself when
             * it can.
             */
            uint64_t lost = b->used;
            if (!drop && (tr.self_mode == SELF_OFF || !self_encode(t, b)))
                goto queue;
            t->cur = b;
            __memlens_tb_ptr = b->words;
            __memlens_tb_end = b->words + BUF_WORDS;
            if (drop) {
                __atomic_add_fetch(&tr.p_dropped, lost, __ATOMIC_RELAXED);
                ml_tr_event(ML_EV_DROP, 0, lost, 0, 0, ML_EV_NOID);
            }
            return;
        }
    queue:
        push_job(&b->job);
    }
    if (mode != HAND_NEXT)
        return;
    if (!nb)
        nb = pop_free(t);
    if (!nb) {
        uint64_t w0 = ml_rt_ticks();
        int stale = 0;
        /*
         * Every buffer is with the writer: sleep until half of them are back,
         * not just one, so that a writer slower than the program wakes the
         * thread once per NBUFS / 2 buffers instead of once per buffer. The
         * writer may have returned some between pop_free and reading freed, so
         * fewer than that may still be out: after a timeout with none freed,
         * any free buffer will do (else the thread would wait forever).
         */
        __atomic_store_n(&t->want, __atomic_load_n(&t->freed, __ATOMIC_ACQUIRE) + NBUFS / 2,
                         __ATOMIC_RELAXED);
        for (;;) {
            uint32_t seen = __atomic_load_n(&t->freed, __ATOMIC_ACQUIRE);
            struct timespec ts = {0, 10000000};
            if ((((int32_t)(seen - t->want) >= 0 || stale) && (nb = pop_free(t))) || tr.disabled)
                break;
            __atomic_store_n(&t->waiting, 1, __ATOMIC_SEQ_CST);
            if ((int32_t)(__atomic_load_n(&t->freed, __ATOMIC_SEQ_CST) - t->want) < 0 &&
                syscall(SYS_futex, &t->freed, FUTEX_WAIT_PRIVATE, seen, &ts, NULL, 0) &&
                errno == ETIMEDOUT)
                stale = 1;
            __atomic_store_n(&t->waiting, 0, __ATOMIC_RELEASE);
        }
        __atomic_add_fetch(&tr.p_waits, 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&tr.p_wait_ticks, ml_rt_ticks() - w0, __ATOMIC_RELAXED);
        if (!nb)
            return;
        t->cur = nb;
        __memlens_tb_ptr = nb->words;
        __memlens_tb_end = nb->words + BUF_WORDS;
        ml_tr_event(ML_EV_WAIT, 0, ml_rt_ticks() - w0, 0, 0, ML_EV_NOID);
        return;
    }
    t->cur = nb;
    __memlens_tb_ptr = nb->words;
    __memlens_tb_end = nb->words + BUF_WORDS;
}

/*
 * The slow path of an append (format/trace-abi.h): the current buffer, up to
 * the committed __memlens_tb_ptr, goes to the writer; returns a buffer with
 * room for `words` words, __memlens_tb_ptr pointing at it, for the caller to
 * fill and then commit.
 */
ML_EXPORT uint64_t *__memlens_trace_flush(uint64_t words)
{
    struct tthread *t = self;
    /* The program's errno, wherever it was interrupted: set-up, waits and wake-ups make calls. */
    int saved_errno = errno;

    (void)words; /* every buffer has room for the largest segment */
    if (!t) {
        if (self_gone || tr.disabled || tr.finishing || !(t = thread_setup()))
            t = NULL;
    } else if (tr.disabled || tr.finishing || t->encoding) {
        /* (encoding: a signal handler's records while the thread encodes are lost) */
        t = NULL;
    } else {
        hand_over(t, __memlens_tb_ptr, HAND_NEXT);
    }
    if (!t || !t->cur)
        use_scratch();
    errno = saved_errno;
    return __memlens_tb_ptr;
}

/*
 * Room for words in the calling thread's buffer, as generated code appends:
 * fill it, then commit (the records count from then on, so a snapshot of the
 * buffer never holds a half-written entry).
 */
static uint64_t *reserve(unsigned words)
{
    uint64_t *p = __memlens_tb_ptr;

    if (!p || p + words > __memlens_tb_end)
        p = __memlens_trace_flush(words);
    return p;
}

static void commit(uint64_t *end)
{
    __atomic_store_n(&__memlens_tb_ptr, end, __ATOMIC_RELEASE);
}

void ml_tr_event(unsigned kind, uint64_t addr, uint64_t aux, uint64_t size, uint64_t aux2,
                 uint32_t gsite)
{
    uint64_t *p;

    if (tr.disabled)
        return;
    p = reserve(6);
    p[1] = ml_rt_ticks();
    p[2] = addr;
    p[3] = aux;
    p[4] = size;
    p[5] = aux2;
    p[0] = ml_tb_event_word(kind, 5, gsite == ML_EV_NOID ? 0 : (uint64_t)gsite + 1);
    commit(p + 6);
}

void ml_tr_access(uint32_t gsite, uint64_t addr, uint64_t len)
{
    uint64_t *p;

    if (!len || !ml_tr_recording())
        return;
    p = reserve(3);
    p[1] = addr;
    p[2] = len;
    p[0] = ml_tb_access_word(gsite, 2);
    commit(p + 3);
}

int ml_tr_recording(void)
{
    return !tr.disabled && !__memlens_trace_gate && !(tr.options & ML_TF_MARKERS_ONLY);
}

static void update_gate(uint32_t off)
{
    uint32_t g = off ? 1 : 0;

    if ((tr.options & ML_TF_REGIONS_ONLY) &&
        __atomic_load_n(&tr.open_regions, __ATOMIC_RELAXED) <= 0)
        g |= 2;
    __atomic_store_n(&__memlens_trace_gate, g, __ATOMIC_RELEASE);
}

ML_EXPORT uint32_t __memlens_trace_marker(struct ml_ev_module *m, uint32_t site)
{
    uint32_t gsite, kind;
    uint64_t *p;

    if (!tr.init)
        ml_tr_init();
    if (site >= m->nsites)
        return __memlens_trace_gate == 0;
    gsite = ml_tr_gsite(m, site);
    kind = m->sites[site].kind;
    switch (kind) {
    case ML_EV_REGION_BEGIN:
        __atomic_add_fetch(&tr.open_regions, 1, __ATOMIC_RELAXED);
        update_gate(__memlens_trace_gate & 1);
        break;
    case ML_EV_REGION_END:
        if (__atomic_sub_fetch(&tr.open_regions, 1, __ATOMIC_RELAXED) < 0)
            __atomic_store_n(&tr.open_regions, 0, __ATOMIC_RELAXED);
        update_gate(__memlens_trace_gate & 1);
        break;
    case ML_EV_TRACE_ON:
        update_gate(0);
        break;
    case ML_EV_TRACE_OFF:
        update_gate(1);
        break;
    default:
        break;
    }
    if (!tr.disabled) {
        p = reserve(2);
        p[1] = ml_rt_ticks();
        p[0] = ml_tb_event_word(0, 1, gsite);
        commit(p + 2);
    }
    return __memlens_trace_gate == 0;
}

/* ---- threads ---- */

static void thread_exit(void *arg);

static struct tthread *thread_setup(void)
{
    struct tthread *t;
    size_t words = (size_t)NBUFS * BUF_WORDS, st_len = SELF_SITES * sizeof(struct ml_tstate);
    size_t hc_len = NHCACHE * sizeof(struct hcache);
    size_t len = words * 8 + SELF_RING + st_len + hc_len + sizeof(struct cycle);
    uint64_t *mem;
    uint8_t *self_mem;

    if (!tr.init)
        ml_tr_init();
    if (tr.disabled)
        return NULL;
    t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    t->w.hc = calloc(NHCACHE, sizeof(*t->w.hc));
    t->w.cy = calloc(1, sizeof(*t->w.cy));
    if (!t->w.hc || !t->w.cy) {
        free(t->w.hc);
        free(t->w.cy);
        free(t);
        return NULL;
    }
    mem =
        mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED) {
        free(t->w.hc);
        free(t->w.cy);
        free(t);
        return NULL;
    }
    t->mem = mem;
    t->memlen = len;
    self_mem = (uint8_t *)(mem + words);
    for (int i = 0; i < NPRE; i++) {
        t->pre[i].job.type = JOB_PRE;
        t->pre[i].t = t;
    }
    t->ring = self_mem;
    t->pw.fixed = 1;
    t->pw.enc.st = (struct ml_tstate *)(self_mem + SELF_RING);
    t->pw.enc.cap_st = SELF_SITES;
    t->pw.enc.cap = SELF_OUT;
    t->pw.hc = (struct hcache *)(self_mem + SELF_RING + st_len);
    t->pw.cy = (struct cycle *)(self_mem + SELF_RING + st_len + hc_len);
    for (int i = 0; i < NBUFS; i++) {
        t->bufs[i].job.type = JOB_BUF;
        t->bufs[i].t = t;
        t->bufs[i].words = mem + (size_t)i * BUF_WORDS;
        if (i)
            push_free(t, &t->bufs[i]);
    }
    t->cur = &t->bufs[0];
    t->tid = ml_rt_gettid();
    t->ptr_slot = &__memlens_tb_ptr;
    t->t_last = ml_rt_ticks();
    t->pf = ml_tr_pf_open();
    pthread_mutex_lock(&tr.lock);
    t->index = tr.nthreads++;
    t->next = tr.threads;
    tr.threads = t;
    pthread_mutex_unlock(&tr.lock);
    writer_ensure();
    self = t;
    pthread_setspecific(exit_key, t);
    __memlens_tb_ptr = t->cur->words;
    __memlens_tb_end = t->cur->words + BUF_WORDS;
    {
        /* The stack, so that analyses can tell stack from heap by address. */
        pthread_attr_t attr;
        void *lo = NULL;
        size_t size = 0;
        if (!pthread_getattr_np(pthread_self(), &attr)) {
            if (pthread_attr_getstack(&attr, &lo, &size))
                lo = NULL, size = 0;
            pthread_attr_destroy(&attr);
        }
        ml_tr_event(ML_EV_THREAD_START, (uint64_t)(uintptr_t)lo, t->tid,
                    size / 1024 > UINT32_MAX ? UINT32_MAX : size / 1024, 0, ML_EV_NOID);
    }
    return t;
}

/* The thread's last records go to the writer; anything it records later is discarded. */
static void thread_exit(void *arg)
{
    struct tthread *t = arg;

    if (self != t || tr.finishing)
        return;
    ml_tr_event(ML_EV_THREAD_EXIT, 0, 0, 0, 0, ML_EV_NOID);
    hand_over(t, __memlens_tb_ptr, HAND_EXIT);
    self = NULL;
    self_gone = 1;
    use_scratch();
}

/* ---- the writer ---- */

static size_t zstd_compress(void *ctx, void *dst, size_t cap, const void *src, size_t n)
{
    size_t r = tr.z_compress(ctx, dst, cap, src, n, 1);

    return tr.z_iserror(r) ? 0 : r;
}

/*
 * libzstd is loaded at run time, so traced programs do not link it; without it chunks are
 * raw. dlopen is referenced weakly: a static program does not get the C library's static
 * dlopen (and the linker's warning about it) for this.
 */
#pragma weak dlopen

static void load_zstd(void)
{
    void *h = dlopen ? dlopen("libzstd.so.1", RTLD_NOW | RTLD_LOCAL) : NULL;
    void *(*create)(void);

    if (!dlopen) {
        strcpy(tr.zstd_why, "none: a static program loads no libzstd (chunks stored uncompressed)");
        return;
    }
    if (!h) {
        strcpy(tr.zstd_why, "none: libzstd.so.1 not found (chunks stored uncompressed)");
        return;
    }
    create = (void *(*)(void))dlsym(h, "ZSTD_createCCtx");
    tr.z_compress =
        (size_t(*)(void *, void *, size_t, const void *, size_t, int))dlsym(h, "ZSTD_compressCCtx");
    tr.z_bound = (size_t(*)(size_t))dlsym(h, "ZSTD_compressBound");
    tr.z_iserror = (unsigned (*)(size_t))dlsym(h, "ZSTD_isError");
    if (create && tr.z_compress && tr.z_bound && tr.z_iserror)
        tr.zctx = create();
    if (!tr.zctx)
        strcpy(tr.zstd_why, "none: libzstd.so.1 unusable (chunks stored uncompressed)");
    else
        strcpy(tr.zstd_why, "zstd level 1");
}

static int write_all(const void *p, size_t n)
{
    const char *c = p;

    while (n) {
        ssize_t w = write(tr.fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

/*
 * Data chunks are compressed while the writer keeps up; when a program had
 * to wait for it since the last data chunk, the next ones are stored raw
 * (zstd costs the writer more per record than encoding on irregular streams)
 * until the waits stop. Tables are always compressed.
 */
static int compress_now(const struct ml_chunk_header *h)
{
    static uint64_t waits_seen;
    uint64_t w = __atomic_load_n(&tr.p_waits, __ATOMIC_RELAXED) +
                 __atomic_load_n(&tr.p_self, __ATOMIC_RELAXED);
    int behind = w != waits_seen || tr.backlog;

    if (h->type != ML_CK_DATA)
        return 1;
    waits_seen = w;
    return !behind;
}

/* The header, then the payload, by one writev(2) (more after a short write). */
static int write_two(const void *a, size_t na, const void *b, size_t nb)
{
    struct iovec v[2] = {{(void *)a, na}, {(void *)b, nb}};
    int i = 0;

    while (i < 2) {
        ssize_t w = writev(tr.fd, v + i, 2 - i);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        while (i < 2 && (size_t)w >= v[i].iov_len)
            w -= (ssize_t)v[i++].iov_len;
        if (i < 2) {
            v[i].iov_base = (char *)v[i].iov_base + w;
            v[i].iov_len -= (size_t)w;
        }
    }
    return 0;
}

/*
 * raw: stored uncompressed whatever compress_now says (a chunk a thread encoded itself). A
 * chunk stored raw is written from the payload where it is, not copied behind its header.
 */
static void write_chunk(struct ml_chunk_header *h, const void *payload, size_t n, int raw)
{
    struct ml_tzstd z = {zstd_compress, tr.z_bound, tr.zctx};
    int zip;

    if (tr.fd < 0)
        return;
    h->clk_tick = ml_rt_ticks();
    h->clk_ns = ml_rt_mono_ns();
    tr.out.len = 0;
    zip = tr.zctx && !raw && compress_now(h);
    if (!zip)
        ml_chunk_seal(h, payload, n, n, 0);
    if (zip ? ml_chunk_build(&tr.out, &z, h, payload, n) || write_all(tr.out.p, tr.out.len)
            : write_two(h, sizeof(*h), payload, n)) {
        say("cannot write trace '", tr.path, "': tracing stops here");
        close(tr.fd);
        tr.fd = -1;
        tr.disabled = 1;
    }
}

static char *append(char *p, char *end, const char *s)
{
    while (*s && p < end - 1)
        *p++ = *s++;
    *p = 0;
    return p;
}

/*
 * Creates <dir>/<prog>.<pid>.<token>.mlt the way every runtime file is made
 * (docs/files.md): in the output directory resolved at start, no link
 * followed, O_EXCL, mode 0600, another token when the name is taken. Chunks
 * are appended to it as they are made, so that a killed process leaves them.
 */
static int create_file(void)
{
    char name[512] = "";
    uint64_t token = ml_rt_id.token;
    int dfd = ml_rt_out_dir("trace"), fd = -EEXIST;
    char *p, *end = tr.path + sizeof(tr.path);

    if (dfd < 0)
        return -1;
    for (int i = 0; i < 8 && fd == -EEXIST; i++, token = ml_rt_random()) {
        fd = ml_rt_file_name(name, sizeof(name), token, ".mlt");
        if (!fd)
            fd = ml_sf_create(dfd, name);
    }
    if (fd < 0) {
        ml_rt_say_file("trace", name, fd);
        return -1;
    }
    tr.fd = fd;
    p = append(tr.path, end, ml_rt_out_path());
    p = append(p, end, "/");
    append(p, end, name);
    return 0;
}

static void write_meta(void)
{
    struct ml_tbuf b = {0};
    struct ml_chunk_header h = {.type = ML_CK_META};
    char opts[256], *p = opts, *end = opts + sizeof(opts);
    struct utsname un;
    static const struct {
        uint32_t flag;
        const char *name;
    } names[] = {{ML_TF_START_OFF, "start=off"},
                 {ML_TF_REGIONS_ONLY, "regions-only"},
                 {ML_TF_MARKERS_ONLY, "markers-only"},
                 {ML_TF_COLLAPSE, "collapse"},
                 {ML_TF_DROP, "drop"}};

    opts[0] = 0;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (tr.options & names[i].flag) {
            if (p != opts)
                p = append(p, end, ",");
            p = append(p, end, names[i].name);
        }
    if (uname(&un))
        un.nodename[0] = 0;
    if (ml_tbuf_meta(&b, "program", ml_rt_id.exe) ||
        ml_tbuf_meta(&b, "cmdline", ml_rt_id.cmdline) ||
        ml_tbuf_meta(&b, "hostname", un.nodename) || ml_tbuf_meta(&b, "memlens", ML_VERSION) ||
        ml_tbuf_meta(&b, "options", opts) || ml_tbuf_meta(&b, "faults", tr.faults_why) ||
        ml_tbuf_meta(&b, "pfn", tr.pfn_why) || ml_tbuf_meta(&b, "compression", tr.zstd_why)) {
        free(b.p);
        return;
    }
    h.count = 8;
    write_chunk(&h, b.p, b.len, 0);
    free(b.p);
}

static void open_file(void)
{
    struct ml_trace_header h;

    if (create_file()) {
        tr.disabled = 1;
        return;
    }
    memset(&h, 0, sizeof(h));
    h.flags = tr.options | (ml_tr_pf_faults_on() ? ML_TF_FAULTS : 0) |
              (ml_tr_pf_pfn_on() ? ML_TF_PFN : 0);
    h.pid = tr.pid;
    h.ppid = tr.ppid;
    h.clock = ML_RT_CLOCK;
    h.tick0 = tr.tick0;
    h.mono0 = tr.mono0;
    h.real0 = tr.real0;
    h.page_size = (uint32_t)sysconf(_SC_PAGESIZE);
    ml_trace_header_fill(&h);
    if (write_all(&h, sizeof(h))) {
        say("cannot write trace '", tr.path, "'");
        close(tr.fd);
        tr.fd = -1;
        tr.disabled = 1;
        return;
    }
    write_meta();
}

/* Sites and markers of a module: tables to the file, descriptors prepared for parsing. */
static void add_module(struct ml_ev_module *m)
{
    struct ml_tbuf b = {0};
    struct ml_chunk_header h;
    uint32_t need = m->site_base + m->nsites;
    struct segmap *maps, *sm;

    if (need > tr.cap_sites) {
        uint32_t cap = tr.cap_sites ? tr.cap_sites : 1024;
        struct ml_tsite *s;
        while (cap < need)
            cap *= 2;
        s = realloc(tr.sites, (size_t)cap * sizeof(*s));
        if (!s)
            return;
        tr.sites = s;
        tr.cap_sites = cap;
    }
    for (uint32_t i = 0; i < m->nsites; i++) {
        const struct ml_ev_site *es = &m->sites[i];
        struct ml_tsite *ts = &tr.sites[m->site_base + i];
        ts->kind = (uint8_t)es->kind;
        ts->size = ml_ev_is_access(es->kind) ? es->size : 0;
        ts->weight = es->weight ? es->weight : 1;
        ts->marker = es->marker == ML_EV_NOID ? ML_EV_NOID : m->marker_base + es->marker;
        if (ml_tbuf_site(&b, es, m->marker_base))
            goto out;
    }
    if (need > tr.wsites)
        tr.wsites = need;
    for (struct tthread *t = tr.threads; t; t = t->next) {
        t->w.enc.sites = tr.sites;
        t->w.enc.nsites = tr.wsites;
    }
    h = (struct ml_chunk_header){.type = ML_CK_SITES, .seq = m->site_base, .count = m->nsites};
    write_chunk(&h, b.p, b.len, 0);
    b.len = 0;
    for (uint32_t i = 0; i < m->nmarkers; i++)
        if (ml_tbuf_marker(&b, &m->markers[i]))
            goto out;
    h = (struct ml_chunk_header){
        .type = ML_CK_MARKERS, .seq = m->marker_base, .count = m->nmarkers};
    if (m->nmarkers)
        write_chunk(&h, b.p, b.len, 0);
    if (!m->nsegwords || !m->segs)
        goto out;
    maps = realloc(tr.maps, (tr.nmaps + 1) * sizeof(*maps));
    if (!maps)
        goto out;
    tr.maps = maps;
    sm = &maps[tr.nmaps];
    sm->lo = (uintptr_t)m->segs;
    sm->hi = sm->lo + (uintptr_t)m->nsegwords * 4;
    sm->prep = malloc((size_t)m->nsegwords * 4);
    sm->starts = calloc((m->nsegwords + 15) / 16, 1);
    if (!sm->prep || !sm->starts) {
        free(sm->prep);
        free(sm->starts);
        goto out;
    }
    /* Descriptors: n, n module-local site ids, padding to 8 bytes. Bad ones are left out. */
    for (uint32_t at = 0; at < m->nsegwords;) {
        uint32_t n = m->segs[at], words = 0, ok = n > 0 && n < 256 && at + 1 + n <= m->nsegwords;
        for (uint32_t k = 0; ok && k < n; k++) {
            uint32_t s = m->segs[at + 1 + k], w;
            if (s >= m->nsites) {
                ok = 0;
                break;
            }
            w = ml_tb_site_words(&m->sites[s]);
            words += w;
            sm->prep[at + 1 + k] = (m->site_base + s) | (w << 30);
        }
        if (!ok || words + 1 > ML_TB_MAX_SEG)
            break;
        /* Bit 15: every site is a fixed-size access (one word each), for seg_fast. */
        sm->prep[at] = n | (words << 16) | (words == n ? SEG_SIMPLE : 0);
        sm->starts[at / 16] |= (uint8_t)(1u << ((at / 2) % 8));
        at += (1 + n + 1) & ~1u;
    }
    /* Keep the maps sorted by address for the lookup. */
    tr.nmaps++;
    for (uint32_t i = tr.nmaps - 1; i > 0 && tr.maps[i - 1].lo > tr.maps[i].lo; i--) {
        struct segmap x = tr.maps[i];
        tr.maps[i] = tr.maps[i - 1];
        tr.maps[i - 1] = x;
    }
out:
    free(b.p);
}

static inline const struct segmap *find_map(uintptr_t h, const struct segmap *hint)
{
    uint32_t lo = 0, hi = tr.nmaps;

    if (hint && h >= hint->lo && h < hint->hi)
        return hint;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (h < tr.maps[mid].lo)
            hi = mid;
        else if (h >= tr.maps[mid].hi)
            lo = mid + 1;
        else
            return &tr.maps[mid];
    }
    return NULL;
}

static void chunk_begin(struct wst *s, uint64_t t_first)
{
    s->fast_h = 0; /* the prediction state starts again */
    s->enc.sites = tr.sites;
    s->enc.nsites = tr.wsites;
    ml_tenc_begin(&s->enc, t_first);
    s->open = 1;
    s->open_ns = ml_rt_mono_ns();
}

/* The next DATA chunk of thread t, its records encoded in out. */
static void write_data(struct tthread *t, uint32_t count, uint64_t t_first, uint64_t t_last,
                       const void *out, size_t len, int raw)
{
    struct ml_chunk_header h = {.type = ML_CK_DATA,
                                .thread = t->index,
                                .seq = t->seq++,
                                .count = count,
                                .t_first = t_first,
                                .t_last = t_last,
                                .tid = t->tid};

    tr.records += count;
    write_chunk(&h, out, len, raw);
}

static void chunk_end(struct tthread *t, uint64_t t_last)
{
    struct wst *s = &t->w;

    if (!s->open)
        return;
    if (ml_tenc_reserve(&s->enc, 16) == 0)
        s->enc.len = (size_t)(ml_tenc_flush_run(&s->enc, s->enc.out + s->enc.len) - s->enc.out);
    s->open = 0;
    if (!s->enc.count)
        return;
    if (t_last < s->enc.t_cur)
        t_last = s->enc.t_cur;
    write_data(t, s->enc.count, s->enc.t_first, t_last, s->enc.out, s->enc.len, 0);
}

/* Room for n more records (or fewer when out of memory: then they are lost). */
static int room(struct wst *s, size_t n)
{
    if (s->enc.len + n * ML_TENC_MAX_REC <= s->enc.cap && s->enc.nsites <= s->enc.cap_st)
        return 0;
    if (s->fixed) /* a thread encoding itself must not call malloc (signal handlers) */
        return -ENOMEM;
    return ml_tenc_reserve(&s->enc, n * ML_TENC_MAX_REC);
}

static void put_pending(struct wst *s)
{
    struct pending *p = &s->pend;

    if (!p->weight)
        return;
    ml_tenc_put(&s->enc, p->site, p->lo, (uint32_t)(p->hi - p->lo), p->weight, 0, 0);
    p->weight = 0;
}

/* One access record; --collapse merges it into the pending one when both touch one line. */
static void put_access(struct wst *s, uint32_t site, uint64_t addr, uint64_t len, uint32_t w)
{
    const struct ml_tsite *si = &tr.sites[site];

    if (tr.options & ML_TF_MARKERS_ONLY)
        return;
    while (len > 0x80000000ull) { /* sizes are 32-bit: split huge ranges */
        ml_tenc_put(&s->enc, site, addr, 0x80000000u, w, 0, 0);
        addr += 0x80000000ull;
        len -= 0x80000000ull;
        if (room(s, 2))
            return;
    }
    if (tr.options & ML_TF_COLLAPSE) {
        struct pending *p = &s->pend;
        uint64_t end = addr + (len ? len : 1);
        if (p->weight && p->kind == si->kind && addr >> 6 == p->lo >> 6 &&
            (end - 1) >> 6 == p->lo >> 6) {
            p->lo = addr < p->lo ? addr : p->lo;
            p->hi = end > p->hi ? end : p->hi;
            p->weight += w;
            return;
        }
        put_pending(s);
        *p = (struct pending){site, w, addr, end, si->kind};
        return;
    }
    ml_tenc_put(&s->enc, site, addr, (uint32_t)len, w, 0, 0);
}

struct fault_ctx {
    struct tthread *t;
};

static void put_fault(void *ctx, uint64_t tick, uint64_t addr)
{
    struct tthread *t = ((struct fault_ctx *)ctx)->t;
    struct wst *s = &t->w;
    uint64_t f[5] = {addr, 0, 0, 0, 0};

    /* First touches of the thread's own trace buffers are memlens', not the program's: how
       many there are depends on how fast the writer recycles buffers. */
    if (addr - (uint64_t)(uintptr_t)t->mem < t->memlen)
        return;
    if (s->enc.count >= CHUNK_RECORDS) {
        put_pending(s);
        chunk_end(t, tick);
        chunk_begin(s, tick);
    }
    if (room(s, 3))
        return;
    put_pending(s);
    ml_tenc_event(&s->enc, ML_EV_PAGE_FAULT, tick, f, 5);
    if (ml_tr_pf_pfn_on()) {
        uint32_t flags = 0;
        uint64_t page = addr & ~(uint64_t)(sysconf(_SC_PAGESIZE) - 1);
        f[0] = page;
        f[1] = ml_tr_pfn(addr, &flags);
        f[2] = (uint64_t)sysconf(_SC_PAGESIZE);
        f[3] = flags;
        ml_tenc_event(&s->enc, ML_EV_PFN, tick, f, 5);
    }
}

/* Page faults of t that happened up to tick upto, in time order with its records. */
static void faults_upto(struct tthread *t, uint64_t upto)
{
    struct fault_ctx c = {t};
    struct wst *s = &t->w;
    uint64_t lost = 0;

    if (!t->pf)
        return;
    ml_tr_pf_read(t->pf, upto, put_fault, &c, &lost);
    if (lost && !room(s, 1)) {
        uint64_t f[5] = {0, lost, 0, 0, 0};
        ml_tenc_event(&s->enc, ML_EV_FAULTS_LOST, upto, f, 5);
    }
}

/* Linear time of word position pos in a buffer: for cutting a chunk inside one. */
static uint64_t time_at(const struct tbuf *b, uint64_t pos)
{
    if (!b->used || b->t_end <= b->t_start)
        return b->t_end;
    return b->t_start + (uint64_t)((double)(b->t_end - b->t_start) * (double)pos / b->used);
}

static void lost_words(struct wst *s, uint64_t *lost, const uint64_t *w, const uint64_t *end,
                       uint64_t tick)
{
    uint64_t f[5] = {0, (uint64_t)(end - w), 0, 0, 0};

    if (end <= w || room(s, 1))
        return;
    *lost += (uint64_t)(end - w);
    ml_tenc_event(&s->enc, ML_EV_LOST, tick, f, 5);
}

/* Where in b a fault at tick f most likely happened: its records are spread evenly in time. */
static const uint64_t *fault_word(const struct tbuf *b, uint64_t f)
{
    if (f == UINT64_MAX)
        return b->words + b->used + 1;
    if (f <= b->t_start || b->t_end <= b->t_start)
        return b->words;
    if (f >= b->t_end)
        return b->words + b->used + 1;
    return b->words +
           (uint64_t)((double)b->used * (double)(f - b->t_start) / (double)(b->t_end - b->t_start));
}

typedef uint64_t v2u64 __attribute__((vector_size(16)));

static inline v2u64 ld2(const uint64_t *p)
{
    v2u64 v;
    memcpy(&v, p, sizeof(v));
    return v;
}

/*
 * Fast path: segments equal to the one just encoded (h) whose every site has
 * one address word that follows its site's stride, as a loop walking arrays
 * produces. Such a segment's records are all predicted (site successors
 * included: prev is the segment's last site, whose successor must be its
 * first), so they only lengthen the pending run. Returns where it stopped.
 * After the first, each segment is compared with the one before it moved by
 * the strides, two words at a time: no chain of predictions from one segment
 * to the next, so the loop runs at the speed of the loads.
 */
static const uint64_t *fast_run(struct wst *s, const uint64_t *w, const uint64_t *stop)
{
    const uint32_t *d = s->fast_d;
    uint32_t n = s->fast_n, S = n + 1, budget, k;
    struct ml_tenc *e = &s->enc;
    struct ml_tstate *st = e->st;
    const uint64_t h = s->fast_h, *w0 = w;
    uint64_t dl[ML_TB_MAX_SEG + 1], diff = 0;

    if (st[d[n] & 0x3fffffffu].succ != (d[1] & 0x3fffffffu) || e->count >= CHUNK_RECORDS)
        return w;
    budget = (CHUNK_RECORDS - e->count) / n;
    if (!budget || w + S > stop || w[0] != h)
        return w;
    /* Per word of a segment, what it moves by: 0 for the header, its site's stride. */
    dl[0] = 0;
    for (k = 0; k < n; k++) {
        const struct ml_tstate *x = &st[d[k + 1] & 0x3fffffffu];
        dl[k + 1] = (uint64_t)x->stride;
        diff |= w[1 + k] ^ (x->last + dl[k + 1]);
    }
    if (diff)
        return w;
    for (w += S, budget--; budget && w + S <= stop; w += S, budget--) {
        v2u64 acc = {0, 0};
        for (k = 0; k + 2 <= S; k += 2)
            acc |= ld2(w + k) ^ (ld2(w + k - S) + ld2(dl + k));
        diff = acc[0] | acc[1];
        if (S & 1)
            diff |= w[S - 1] ^ (w[-1] + dl[S - 1]);
        if (diff)
            break;
    }
    for (k = 0; k < n; k++) {
        struct ml_tstate *x = &st[d[k + 1] & 0x3fffffffu];
        x->last = w[(int64_t)k + 1 - (int64_t)S];
        x->cand = x->stride;
    }
    e->run += (uint64_t)n * (uint64_t)((w - w0) / S);
    e->count += (uint32_t)((uint64_t)n * (uint64_t)((w - w0) / S));
    e->prev_addr = w[-1];
    return w;
}

/*
 * Whether segment d (n simple sites) may take seg_fast in this chunk: every
 * site seen, each followed by the next. Remembered in the thread's cache.
 */
static int seg_check(struct wst *s, uint64_t h, const uint32_t *d, uint32_t n)
{
    struct ml_tenc *e = &s->enc;
    struct hcache *c = &s->hc[(h >> 3) % NHCACHE];

    for (uint32_t k = 0; k < n; k++) {
        const struct ml_tstate *x = &e->st[d[k + 1] & 0x3fffffffu];
        if (x->gen != e->gen || !x->seen || (k + 1 < n && x->succ != (d[k + 2] & 0x3fffffffu)))
            return 0;
    }
    *c = (struct hcache){.h = h, .d = d, .gen = e->gen, .n = n};
    return 1;
}

/*
 * A checked segment (seg_check): every site after the first follows its
 * predecessor and every size is as before, so each record is part of the
 * run or a REC token with its address (and, for the first site, its site
 * when the previous record's successor was another). The arithmetic of
 * ml_tenc_put without its general cases.
 */
/* Writes a pending run of n records (n > 0): what ml_tenc_flush_run does, from locals. */
static inline uint8_t *put_run(uint8_t *p, uint64_t n)
{
    if (n < 128) {
        *p++ = (uint8_t)n;
        return p;
    }
    *p++ = 0;
    return ml_put_varint(p, n);
}

/*
 * The encoder state seg_fast changes, held in locals across a buffer's fast
 * loop: through ml_tenc each segment stored and reloaded it, a chain of
 * store-to-load latencies per segment that weighed most on short segments.
 */
struct fenc {
    uint8_t *p;
    uint64_t run, prev_addr;
    uint32_t count, prev;
};

static inline void fenc_load(struct fenc *f, const struct ml_tenc *e)
{
    *f = (struct fenc){e->out + e->len, e->run, e->prev_addr, e->count, e->prev};
}

static inline void fenc_store(const struct fenc *f, struct ml_tenc *e)
{
    e->len = (size_t)(f->p - e->out);
    e->run = f->run;
    e->prev_addr = f->prev_addr;
    e->count = f->count;
    e->prev = f->prev;
}

static inline int seg_fast(struct ml_tstate *st, struct fenc *f, const uint64_t *a,
                           const uint32_t *d, uint32_t n)
{
    uint32_t g0 = d[1] & 0x3fffffffu, prev = f->prev;
    uint8_t *p = f->p, *p0 = p;
    uint64_t run = f->run;
    uint32_t k = 0;

    if (prev == ML_EV_NOID || st[prev].succ != g0) {
        /* The first record names its site (and its address when that is not predicted). */
        struct ml_tstate *x = &st[g0];
        uint64_t last = x->last, pred = last + (uint64_t)x->stride;
        int64_t dd = (int64_t)(a[0] - last);
        if (run)
            p = put_run(p, run);
        run = 0;
        *p = a[0] != pred ? 0xb0 : 0xa0;
        p = ml_put_varint(p + 1, ml_zigzag((int64_t)g0 - (int64_t)(uint32_t)(prev + 1)));
        if (a[0] != pred)
            p = ml_put_varint(p, ml_zigzag((int64_t)(a[0] - pred)));
        x->stride = dd == x->cand ? dd : x->stride;
        x->cand = dd;
        x->last = a[0];
        if (prev != ML_EV_NOID)
            st[prev].succ = g0;
        k = 1;
    }
    for (; k < n; k++) {
        struct ml_tstate *x = &st[d[k + 1] & 0x3fffffffu];
        uint64_t ak = a[k], last = x->last, pred = last + (uint64_t)x->stride;
        int64_t dd = (int64_t)(ak - last);
        if (ak == pred) {
            run++;
        } else {
            if (run)
                p = put_run(p, run);
            run = 0;
            p = ml_put_addr(p, ak - pred, ml_tshift(x->size));
        }
        x->stride = dd == x->cand ? dd : x->stride;
        x->cand = dd;
        x->last = ak;
    }
    f->run = run;
    f->p = p;
    f->count += n;
    f->prev = d[n] & 0x3fffffffu;
    f->prev_addr = a[n - 1];
    return p == p0; /* all predicted: the next one may well be too (fast_run) */
}

/*
 * Whether the L words at a, segments the current fast loop encoded with
 * seg_fast or fast_run, repeat three times after themselves with the same
 * headers. A site whose every address in the span moves by the same delta
 * at each repetition is regular, any other a hole, however many there are
 * (a selective trace of a sparse row may be mostly gathers: a bound on the
 * share of holes sent spmv at omega 0.5 to seg_fast, costlier than ns).
 * The prediction state of the regular sites is then
 * steady after the second repetition: the differences each of their records
 * sees (to the site's last address, and from stride and cand) are the same
 * from then on, so are all successors (the headers repeat); the fourth's
 * bytes are those of every later repetition that keeps the deltas, but for
 * the holes' addresses.
 */
static int cyc_verify(struct wst *s, const uint64_t *a, uint32_t L)
{
    struct cycle *cy = s->cy;
    uint32_t gen = s->enc.gen, tag = ++cy->tag, j = 0;

    cy->nsites = 0;
    while (j < L) {
        uint64_t h = a[j];
        const struct hcache *c = &s->hc[(h >> 3) % NHCACHE];
        if (c->h != h || c->gen != gen || j + 1 + c->n > L || a[j + L] != h || a[j + 2 * L] != h ||
            a[j + 3 * L] != h)
            return 0;
        cy->delta[j] = 0;
        cy->mask[j] = ~(uint64_t)0;
        cy->wsite[j] = CYC_NONE;
        for (uint32_t k = 0; k < c->n; k++) {
            uint32_t i = j + 1 + k, g = c->d[k + 1] & 0x3fffffffu, x = (g * 2654435761u) >> 23;
            uint64_t dd = a[i + L] - a[i];
            int irregular = a[i + 2 * L] - a[i + L] != dd || a[i + 3 * L] - a[i + 2 * L] != dd;
            for (;; x = (x + 1) % CYC_TAB) {
                if (cy->tab[x].tag != tag) { /* the site's first occurrence */
                    uint32_t f = cy->nsites++;
                    cy->tab[x].site = g;
                    cy->tab[x].tag = tag;
                    cy->tab[x].first = f;
                    cy->site[f] = g;
                    cy->sdelta[f] = dd;
                    cy->hole[f] = (uint8_t)irregular;
                    cy->lastw[f] = (uint16_t)i;
                    cy->wsite[i] = (uint16_t)f;
                    break;
                }
                if (cy->tab[x].site == g) {
                    uint32_t f = cy->tab[x].first;
                    if (irregular || cy->sdelta[f] != dd)
                        cy->hole[f] = 1;
                    cy->lastw[f] = (uint16_t)i;
                    cy->wsite[i] = (uint16_t)f;
                    break;
                }
            }
            cy->delta[i] = dd;
        }
        j += 1 + c->n;
    }
    if (j != L)
        return 0;
    for (j = 0; j < L; j++) {
        if (cy->wsite[j] != CYC_NONE && cy->hole[cy->wsite[j]]) {
            cy->delta[j] = 0;
            cy->mask[j] = 0;
        } else {
            cy->mask[j] = ~(uint64_t)0;
        }
    }
    return 1;
}

/* A varint of the encoder's own output at *q (before e); -1 when it runs past e. */
static int get_varint(const uint8_t **q, const uint8_t *e, uint64_t *v)
{
    *v = 0;
    for (int sh = 0; sh < 64 && *q < e; sh += 7) {
        uint8_t b = *(*q)++;
        *v |= (uint64_t)(b & 0x7f) << sh;
        if (!(b & 0x80))
            return 0;
    }
    return -1;
}

/*
 * The steps of one repetition (op[], m[]) from its bytes [p0, pe) encoded
 * normally after a run of r0 records, ending with a run of `tail`: per
 * record, predicted (part of a run), a token or a hole. Regular records'
 * tokens and the runs between two of them are fixed bytes; a run next to a
 * hole or at either end is counted as the encoder counts it. The number of
 * steps, or 0 when the bytes are not what seg_fast writes for R records.
 */
static uint32_t cyc_steps(struct cycle *cy, uint32_t L, uint32_t R, const uint8_t *p0,
                          const uint8_t *pe, uint64_t r0, uint64_t tail)
{
    const uint8_t *q = p0;
    uint64_t skip = r0, v, pr = 0;
    uint32_t rec = 0, nop = 0, ml = 0, j;
    int bytes = 0; /* the last step is HOP_BYTES: a run after it is fixed */

    if (pe - p0 > CYC_MAXM)
        return 0;
    while (q < pe) {
        const uint8_t *t0 = q;
        if (*q < 0x80) {
            if (*q++) {
                v = q[-1];
            } else if (get_varint(&q, pe, &v)) {
                return 0;
            }
            if (v < skip || v - skip > R - rec)
                return 0;
            for (v -= skip; v; v--)
                cy->tlen[rec++] = 0;
        } else if ((*q & 0xcf) == 0x80 && rec < R && !skip) {
            uint8_t b = *q++;
            const uint8_t *s0 = q;
            if ((b & 0x20) && get_varint(&q, pe, &v))
                return 0;
            cy->tslen[rec] = (uint16_t)(q - s0);
            if ((b & 0x10) && get_varint(&q, pe, &v))
                return 0;
            cy->toff[rec] = (uint16_t)(t0 - p0);
            cy->tlen[rec++] = (uint16_t)(q - t0);
        } else if ((*q & 0xc1) == 0x81 && rec < R && !skip) { /* ADDR */
            if ((*q++ & 0x02) && get_varint(&q, pe, &v))
                return 0;
            cy->tslen[rec] = 0;
            cy->toff[rec] = (uint16_t)(t0 - p0);
            cy->tlen[rec++] = (uint16_t)(q - t0);
        } else {
            return 0;
        }
        skip = 0;
    }
    if (tail < skip || tail - skip != R - rec)
        return 0;
    while (rec < R)
        cy->tlen[rec++] = 0;
    rec = 0;
    cy->nh = 0;
    for (j = 0; j < cy->nsites; j++)
        cy->hslot[j] = CYC_NONE;
    for (j = 0; j < L; j++) {
        uint16_t f = cy->wsite[j];
        if (f == CYC_NONE)
            continue;
        if (cy->hole[f]) {
            uint32_t slen = cy->tlen[rec] ? cy->tslen[rec] : 0;
            if (cy->hslot[f] == CYC_NONE) {
                cy->hslot[f] = (uint16_t)cy->nh;
                cy->hsite[cy->nh++] = cy->site[f];
            }
            memcpy(cy->m + ml, p0 + cy->toff[rec] + 1, slen);
            cy->op[nop++] = (struct hop){.pre = (uint32_t)pr,
                                         .type = HOP_HOLE,
                                         .slen = (uint8_t)slen,
                                         .off = (uint16_t)ml,
                                         .word = (uint16_t)j,
                                         .hi = cy->hslot[f]};
            ml += slen;
            pr = 0;
            bytes = 0;
        } else if (!cy->tlen[rec]) {
            pr++;
        } else {
            if (!bytes) {
                cy->op[nop++] =
                    (struct hop){.pre = (uint32_t)pr, .type = HOP_BYTES, .off = (uint16_t)ml};
                bytes = 1;
            } else if (pr) {
                ml = (uint32_t)(put_run(cy->m + ml, pr) - cy->m);
            }
            pr = 0;
            memcpy(cy->m + ml, p0 + cy->toff[rec], cy->tlen[rec]);
            ml += cy->tlen[rec];
            cy->op[nop - 1].len = (uint16_t)(ml - cy->op[nop - 1].off);
        }
        rec++;
    }
    if (pr)
        cy->op[nop++] = (struct hop){.pre = (uint32_t)pr, .type = HOP_END};
    return nop; /* R > 0: at least one step */
}

/* Copies n bytes from m (16 readable) to the output (room for 16): no libc call when short. */
static inline uint8_t *put_bytes(uint8_t *p, const uint8_t *m, size_t n)
{
    if (n <= 16)
        memcpy(p, m, 16);
    else
        memcpy(p, m, n);
    return p + n;
}

/*
 * A varint without a branch on its length, for a hole whose record names its
 * site. Stores 8 bytes (little-endian, as every target of the runtime); the
 * output has room for them.
 */
static inline uint8_t *put_varint_nb(uint8_t *p, uint64_t v)
{
    /* Bytes by the highest bit set: no division in the chain (it cost a quarter of the replay). */
    static const uint8_t len[56] = {1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3,
                                    3, 3, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 6, 6, 6,
                                    6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 8, 8, 8, 8, 8, 8, 8};
    uint64_t x;
    unsigned n;

    if (v >> 56)
        return ml_put_varint(p, v);
    n = len[63 - __builtin_clzll(v | 1)];
    x = (v & 0x7f) | (v << 1 & 0x7f00) | (v << 2 & 0x7f0000) | (v << 3 & 0x7f000000) |
        (v << 4 & 0x7f00000000ull) | (v << 5 & 0x7f0000000000ull) | (v << 6 & 0x7f000000000000ull) |
        (v << 7 & 0x7f00000000000000ull);
    x |= 0x8080808080808080ull & ((1ull << (8 * (n - 1))) - 1);
    memcpy(p, &x, sizeof(x));
    return p + n;
}

/*
 * Replays the span whose steps cyc_steps made, from w: while the regular
 * words of the next L are those of the repetition before (pw, then each
 * replayed one) moved by the deltas, their bytes are those of the captured
 * repetition and the holes are encoded as seg_fast would. Returns where it
 * stopped; its budget 0 when the output room stopped it.
 */
static const uint64_t *cyc_run(struct wst *s, struct fenc *f, const uint64_t *w,
                               const uint64_t *stop, size_t *budget, const uint64_t *pw)
{
    struct cycle *cy = s->cy;
    struct ml_tstate *st = s->enc.st;
    struct hst *hs = cy->hs;
    const uint64_t *w0 = w;
    uint32_t L = cy->L, R = cy->R, nop = cy->nop, k;

    for (k = 0; k < cy->nh; k++) {
        const struct ml_tstate *x = &st[cy->hsite[k]];
        hs[k] = (struct hst){x->last, x->stride, x->cand, ml_tshift(x->size)};
    }
    while (w + L <= stop) {
        const uint64_t *dl = cy->delta, *mk = cy->mask;
        uint64_t diff = 0, run = f->run;
        uint8_t *p = f->p;
        if (*budget < R) {
            *budget = 0;
            break;
        }
        v2u64 acc = {0, 0}, acc2 = {0, 0};
        /* Each regular word is the one a repetition before, moved: two words at a time. */
        for (k = 0; k + 4 <= L; k += 4) {
            acc |= (ld2(w + k) ^ (ld2(pw + k) + ld2(dl + k))) & ld2(mk + k);
            acc2 |= (ld2(w + k + 2) ^ (ld2(pw + k + 2) + ld2(dl + k + 2))) & ld2(mk + k + 2);
        }
        acc |= acc2;
        diff = acc[0] | acc[1];
        for (; k < L; k++)
            diff |= (w[k] ^ (pw[k] + dl[k])) & mk[k];
        if (diff)
            break;
        for (k = 0; k < nop; k++) {
            const struct hop *o = &cy->op[k];
            run += o->pre;
            if (o->type == HOP_HOLE) {
                struct hst *x = &hs[o->hi];
                uint64_t a = w[o->word], last = x->last, pred = last + (uint64_t)x->stride;
                int64_t dd = (int64_t)(a - last);
                if (o->slen || a != pred) {
                    if (run)
                        p = put_run(p, run);
                    run = 0;
                    if (!o->slen) {
                        p = ml_put_addr(p, a - pred, x->sh);
                    } else {
                        *p = a != pred ? 0xb0 : 0xa0;
                        p = put_bytes(p + 1, cy->m + o->off, o->slen);
                        if (a != pred)
                            p = put_varint_nb(p, ml_zigzag((int64_t)(a - pred)));
                    }
                } else {
                    run++;
                }
                x->stride = dd == x->cand ? dd : x->stride;
                x->cand = dd;
                x->last = a;
            } else if (o->type == HOP_BYTES) {
                if (run)
                    p = put_run(p, run);
                run = 0;
                p = put_bytes(p, cy->m + o->off, o->len);
            }
        }
        f->p = p;
        f->run = run;
        f->count += R;
        *budget -= R;
        pw = w;
        w += L;
    }
    if (w == w0)
        return w;
    for (k = 0; k < cy->nh; k++) {
        struct ml_tstate *x = &st[cy->hsite[k]];
        x->last = hs[k].last;
        x->stride = hs[k].stride;
        x->cand = hs[k].cand;
    }
    /* Only the regular sites' last addresses differ from the state the last repetition left. */
    for (k = 0; k < cy->nsites; k++)
        if (!cy->hole[k])
            st[cy->site[k]].last = w[(int64_t)cy->lastw[k] - (int64_t)L];
    f->prev_addr = w[-1];
    memcpy(cy->prev, w - L, L * sizeof(*w));
    cy->gen = s->enc.gen;
    cy->count = f->count;
    return w;
}

/*
 * Replays the verified span of L words (cyc_verify) from w, its last check
 * repetition [w - L, w) encoded normally from p0 (run r0, count c0) to the
 * encoder's present state f. Returns where it stopped.
 */
static const uint64_t *cyc_replay(struct wst *s, struct fenc *f, const uint64_t *w,
                                  const uint64_t *stop, size_t *budget, uint32_t L,
                                  const uint8_t *p0, uint64_t r0, uint32_t c0)
{
    struct cycle *cy = s->cy;

    cy->gen = 0; /* no resumable replay while the steps change */
    cy->L = L;
    cy->R = f->count - c0;
    if (!cy->R || !(cy->nop = cyc_steps(cy, L, cy->R, p0, f->p, r0, f->run)))
        return w;
    return cyc_run(s, f, w, stop, budget, w - L);
}

/*
 * Encodes one buffer of raw words: the writer (s is the thread's writer
 * state) into the thread's open chunk, with its page faults and time points;
 * a thread encoding itself (self_encode: s is its own state, the chunk begun)
 * only the buffer's records, counting what it cannot encode in *lost.
 */
static void process_buffer(struct wst *s, struct tbuf *b, uint64_t *lost)
{
    struct tthread *t = b->t;
    const uint64_t *w = b->words, *end = b->words + b->used;
    const struct segmap *hint = NULL;
    int writer = s == &t->w;
    const uint64_t *fw = writer ? fault_word(b, ml_tr_pf_peek(t->pf)) : end + 1;
    uint32_t si = 0, nsamp = writer ? b->nsamp : 0;
    int fast_ok = !(tr.options & (ML_TF_COLLAPSE | ML_TF_MARKERS_ONLY)) && !tr.slow;

    if (!s->open) { /* faults the thread took while it encoded a buffer itself come first */
        uint64_t pf = ml_tr_pf_peek(t->pf);
        chunk_begin(s, pf < b->t_start ? pf : b->t_start);
    }
    while (w < end) {
        uint64_t h;
        unsigned tag;
        const uint64_t *stop = end;

        while (si < nsamp && (uint64_t)(w - b->words) >= b->samp_pos[si]) {
            /* A collapsed run keeps the time of its first access: a time point taken
               while it is pending would cut it at a moment that depends on the writer.
               A sample older than the buffer was left by the sampler racing a thread that
               encoded its buffer itself. */
            if (b->samp_tick[si] <= b->t_end && b->samp_tick[si] >= s->enc.t_cur &&
                !s->pend.weight && !room(s, 1))
                ml_tenc_time(&s->enc, b->samp_tick[si]);
            si++;
        }
        if (w >= fw) { /* put_fault ends a pending run only for a fault it records */
            faults_upto(t, time_at(b, (uint64_t)(w - b->words)));
            fw = fault_word(b, ml_tr_pf_peek(t->pf));
            if (fw <= w)
                fw = w + 1;
        }
        if (s->enc.count >= CHUNK_RECORDS) {
            uint64_t cut = time_at(b, (uint64_t)(w - b->words));
            put_pending(s);
            chunk_end(t, cut);
            chunk_begin(s, cut);
        }
        /* Segments the fast paths take, up to the next time point or fault. */
        if (si < nsamp && b->words + b->samp_pos[si] < stop)
            stop = b->words + b->samp_pos[si];
        if (fw < stop)
            stop = fw;
        if (fast_ok && !room(s, 4096)) {
            /* Within the room just made and the chunk's record bound, no check per segment. */
            size_t budget = (s->enc.cap - s->enc.len) / ML_TENC_MAX_REC;
            if (budget > CHUNK_RECORDS - s->enc.count)
                budget = CHUNK_RECORDS - s->enc.count;
            struct fenc f;
            struct ml_tstate *st = s->enc.st;
            struct hcache *hc = s->hc;
            uint32_t gen = s->enc.gen, cy_c0 = 0;
            uint64_t fast_h = s->fast_h, loop = ++s->loops, cy_r0 = 0;
            /* Cycle replay: a verified span of cy_L words, its last check repetition
               [cy_d0, cy_d1) encoded normally from cy_p0, then replayed. */
            const uint64_t *cy_d0 = NULL, *cy_d1 = NULL, *cy_next = w;
            const uint8_t *cy_p0 = NULL;
            uint32_t cy_L = 0;
            fenc_load(&f, &s->enc);
            if (s->cy->gen == gen && s->cy->count == f.count) {
                /* Nothing encoded since a replay stopped: it goes on. */
                w = cyc_run(s, &f, w, stop, &budget, s->cy->prev);
                cy_next = w;
            }
            while (w < stop) {
                struct hcache *c;
                h = *w;
                if (cy_d1) {
                    if (w == cy_d0) {
                        cy_p0 = f.p;
                        cy_r0 = f.run;
                        cy_c0 = f.count;
                    } else if (w == cy_d1 && cy_p0) {
                        const uint64_t *nw =
                            cyc_replay(s, &f, w, stop, &budget, cy_L, cy_p0, cy_r0, cy_c0);
                        cy_d1 = NULL;
                        cy_next = nw;
                        if (nw != w) {
                            fast_h = 0;
                            w = nw;
                            continue;
                        }
                    } else if (w > cy_d1 || (w > cy_d0 && !cy_p0)) {
                        cy_d1 = NULL; /* a fast run went past a repetition's start */
                    }
                }
                if (h == fast_h) {
                    const uint64_t *nw;
                    fenc_store(&f, &s->enc);
                    s->fast_h = fast_h;
                    nw = fast_run(s, w, stop);
                    fenc_load(&f, &s->enc);
                    if (nw != w) {
                        budget = f.count >= CHUNK_RECORDS ? 0 : budget;
                        if (budget > CHUNK_RECORDS - f.count)
                            budget = CHUNK_RECORDS - f.count;
                        w = nw;
                        continue;
                    }
                }
                c = &hc[(h >> 3) % NHCACHE];
                if (c->h != h || c->gen != gen || c->n > budget || w + 1 + c->n > end)
                    break;
                if (c->loop != loop) {
                    c->next = w;
                    c->back = 16;
                } else if (!cy_d1 && w >= cy_next && w >= c->next) {
                    /* The span since this header's last segment may be a cycle. */
                    uint32_t L = (uint32_t)(w - c->pos);
                    if (w - c->pos <= CYC_MAXL && w + 3 * L <= stop && cyc_verify(s, c->pos, L)) {
                        cy_L = L;
                        cy_d0 = w + 2 * L;
                        cy_d1 = w + 3 * L;
                        cy_p0 = NULL;
                        c->back = 16;
                    } else {
                        c->next = w + c->back;
                        c->back = c->back < 4096 ? 2 * c->back : c->back;
                    }
                }
                c->pos = w;
                c->loop = loop;
                budget -= c->n;
                fast_h = seg_fast(st, &f, w + 1, c->d, c->n) ? h : 0;
                s->fast_d = c->d;
                s->fast_n = c->n;
                w += 1 + c->n;
            }
            fenc_store(&f, &s->enc);
            s->fast_h = fast_h;
        }
        if (w >= end)
            break;
        if (w >= stop || s->enc.count >= CHUNK_RECORDS)
            continue; /* a time point, a fault or a chunk boundary first */
        h = *w;
        tag = (unsigned)(h & ML_TB_TAG_MASK);
        s->fast_h = 0;
        if (!h)
            break; /* no entry starts with 0: the rest is damaged */
        if (tag == 0) {
            const struct segmap *sm = find_map((uintptr_t)h, hint);
            uint32_t off, n, words, simple = fast_ok;
            const uint32_t *d;
            if (!sm || (h - sm->lo) & 7)
                break;
            off = (uint32_t)((h - sm->lo) / 4);
            if (!(sm->starts[off / 16] & (1u << ((off / 2) % 8))))
                break;
            hint = sm;
            d = sm->prep + off;
            n = d[0] & 0x7fff;
            words = d[0] >> 16;
            if (w + 1 + words > end)
                break;
            if (room(s, n))
                break;
            w++;
            for (uint32_t k = 1; k <= n; k++) {
                uint32_t gs = d[k] & 0x3fffffffu, nw = d[k] >> 30;
                if (nw == 1) {
                    put_access(s, gs, w[0], tr.sites[gs].size, tr.sites[gs].weight);
                } else if (nw == 2) {
                    simple = 0;
                    put_access(s, gs, w[0], w[1], tr.sites[gs].weight);
                } else {
                    simple = 0;
                    put_pending(s);
                    ml_tenc_put(&s->enc, gs, 0, 0, 1, 0, 0);
                }
                w += nw;
            }
            if (simple && (d[0] & SEG_SIMPLE) && seg_check(s, h, d, n)) {
                s->fast_h = h;
                s->fast_d = d;
                s->fast_n = n;
            }
            continue;
        }
        if (tag == ML_TB_TAG_EVENT) {
            unsigned nw = (unsigned)(h >> 3) & 31, kind = (unsigned)(h >> 8) & 0xff;
            uint64_t arg = h >> 16, tick;
            if (w + 1 + nw > end || nw < 1 || room(s, 3))
                break;
            tick = w[1];
            if (writer)
                faults_upto(t, tick);
            put_pending(s);
            if (kind == 0) { /* a marker reached through a call, exactly timed */
                if (arg < tr.wsites && ml_ev_is_marker(tr.sites[arg].kind))
                    ml_tenc_put(&s->enc, (uint32_t)arg, 0, 0, 1, 1, tick);
            } else {
                uint64_t f[5] = {0, 0, 0, 0, arg <= tr.wsites ? arg : 0};
                for (unsigned i = 0; i < 4 && i + 2 <= nw; i++)
                    f[i] = w[2 + i];
                ml_tenc_event(&s->enc, kind, tick, f, 5);
            }
            w += 1 + nw;
            continue;
        }
        if (tag == ML_TB_TAG_ACCESS) {
            unsigned nw = (unsigned)(h >> 3) & 31;
            uint64_t gs = h >> 8;
            if (w + 1 + nw > end || nw < 1 || gs >= tr.wsites ||
                !ml_ev_is_access(tr.sites[gs].kind) || room(s, 2))
                break;
            put_access(s, (uint32_t)gs, w[1], nw >= 2 ? w[2] : tr.sites[gs].size,
                       nw >= 3 ? (uint32_t)w[3] : tr.sites[gs].weight);
            w += 1 + nw;
            continue;
        }
        break;
    }
    lost_words(s, lost, w, end, b->t_end);
    if (!writer)
        return;
    /* A pending collapsed run goes on in the next buffer, so buffer ends and chunks cut by
       time (which depend on the writer) never split it; the thread's last buffer ends it. */
    if (b->final)
        put_pending(s);
    if (!room(s, 2)) {
        faults_upto(t, b->t_end);
        if (!s->pend.weight)
            ml_tenc_time(&s->enc, b->t_end);
    }
    if (b->final || ml_rt_mono_ns() - s->open_ns > CHUNK_NS)
        chunk_end(t, b->t_end);
}

static void retire(struct tthread *t)
{
    t->retired = 1;
    ml_tr_pf_close(t->pf);
    t->pf = NULL;
    ml_tenc_free(&t->w.enc);
    free(t->w.hc);
    t->w.hc = NULL;
    free(t->w.cy);
    t->w.cy = NULL;
    munmap(t->mem, t->memlen);
}

static void do_sync(struct sync *s)
{
    struct ml_chunk_header h = {.type = ML_CK_END, .count = 1};
    struct ml_trace_end e;

    for (struct tthread *t = tr.threads; t; t = t->next)
        if (t->w.open) {
            put_pending(&t->w);
            faults_upto(t, ml_rt_ticks());
            chunk_end(t, ml_rt_ticks());
        }
    memset(&e, 0, sizeof(e));
    e.reason = s->reason;
    e.signal = s->signal;
    e.nthreads = tr.nthreads;
    e.self_encoded = tr.p_self > UINT32_MAX ? UINT32_MAX : (uint32_t)tr.p_self;
    e.records = tr.records;
    e.dropped = tr.p_dropped; /* the stream's drop records say the same, and may be lost */
    e.waits = tr.p_waits;
    e.wait_ticks = tr.p_wait_ticks;
    e.lost = tr.lost;
    e.raw_words = tr.raw_words;
    {
        struct timespec ts;
        if (!clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts))
            e.writer_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    }
    write_chunk(&h, &e, sizeof(e), 0);
    __atomic_store_n(&s->done, 1, __ATOMIC_RELEASE);
    futex_wake(&s->done);
}

/*
 * A buffer a thread encoded itself (self_encode): the writer's open chunk of
 * that thread ends first, with the thread's page faults up to then, so that
 * its chunks keep the order of its records.
 */
static void write_pre(struct pjob *p)
{
    struct tthread *t = p->t;
    uint64_t pf = ml_tr_pf_peek(t->pf);

    tr.raw_words += p->raw;
    tr.lost += p->lost;
    if (!tr.disabled && p->count) {
        if (!t->w.open && pf <= p->t_first)
            chunk_begin(&t->w, pf);
        if (t->w.open) {
            put_pending(&t->w);
            faults_upto(t, p->t_first);
            chunk_end(t, p->t_first);
        }
        write_data(t, p->count, p->t_first, p->t_last, p->out, p->len, 1);
    }
    __atomic_store_n(&p->busy, 0, __ATOMIC_RELEASE);
}

static void run_job(struct tjob *j)
{
    if (j->type == JOB_BUF) {
        struct tbuf *b = (struct tbuf *)j;
        struct tthread *t = b->t;
        tr.raw_words += b->used;
        if (!tr.disabled)
            process_buffer(&t->w, b, &tr.lost);
        b->nsamp = b->samp_skip = 0;
        if (b->final)
            retire(t);
        else
            push_free(t, b);
    } else if (j->type == JOB_PRE) {
        write_pre((struct pjob *)j);
    } else if (j->type == JOB_MODULE) {
        /* Threads encoding themselves read the tables: not while they change. */
        pthread_mutex_lock(&tr.enc_lock);
        add_module(((struct tmodule *)j)->m);
        pthread_mutex_unlock(&tr.enc_lock);
        free(j);
    } else if (j->type == JOB_UNMODULE) {
        struct tmodule *u = (struct tmodule *)j;
        uintptr_t lo = (uintptr_t)u->m->segs;
        pthread_mutex_lock(&tr.enc_lock);
        for (uint32_t i = 0; i < tr.nmaps; i++)
            if (tr.maps[i].lo == lo) {
                free(tr.maps[i].prep);
                free(tr.maps[i].starts);
                memmove(&tr.maps[i], &tr.maps[i + 1], (tr.nmaps - i - 1) * sizeof(*tr.maps));
                tr.nmaps--;
                break;
            }
        /* The threads' caches may point into the descriptors just freed. */
        for (struct tthread *t = tr.threads; t; t = t->next) {
            if (t->w.hc)
                memset(t->w.hc, 0, NHCACHE * sizeof(*t->w.hc));
            if (t->w.cy)
                t->w.cy->gen = 0; /* nor may a replay resume with their headers */
            t->w.fast_h = 0;
        }
        pthread_mutex_unlock(&tr.enc_lock);
        __atomic_store_n(&u->done, 1, __ATOMIC_RELEASE);
    } else if (j->type == JOB_SYNC) {
        do_sync((struct sync *)j);
    }
}

/*
 * Time points for records between hand-overs: every so often the writer
 * reads where each thread is in its buffer (its __memlens_tb_ptr) and the
 * clock. Records before that position were appended before that time, so a
 * thread that stops recording (an OpenMP worker at a barrier) gets its
 * records placed in time within a sampling period, at no cost to it.
 * Returns whether any thread moved.
 */
static int sample(void)
{
    int moved = 0;

    for (struct tthread *t = tr.threads; t; t = t->next) {
        struct tbuf *b = __atomic_load_n(&t->cur, __ATOMIC_ACQUIRE);
        uint64_t *p, tick, pos;
        if (t->retired || !b)
            continue;
        p = __atomic_load_n(t->ptr_slot, __ATOMIC_ACQUIRE);
        tick = ml_rt_ticks();
        if (p < b->words || p > b->words + BUF_WORDS)
            continue; /* the thread is changing buffers */
        pos = (uint64_t)(p - b->words);
        if (b->nsamp && b->samp_pos[b->nsamp - 1] >= pos)
            continue;
        moved = 1;
        if (b->samp_skip && (b->samp_skip++ & 1))
            continue;
        if (b->nsamp == NSAMPLES) { /* full: keep every other one, sample half as often */
            for (uint32_t i = 0; i < NSAMPLES / 2; i++) {
                b->samp_pos[i] = b->samp_pos[2 * i + 1];
                b->samp_tick[i] = b->samp_tick[2 * i + 1];
            }
            b->nsamp = NSAMPLES / 2;
            b->samp_skip = 1;
        }
        b->samp_pos[b->nsamp] = (uint32_t)pos;
        b->samp_tick[b->nsamp++] = tick;
    }
    return moved;
}

static void *writer_main(void *arg)
{
    sigset_t all;
    uint64_t last_sample = 0;
    int active = 1;

    (void)arg;
    /* Signals are the program's business, never the writer's. */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    tr.writer_tid = (pid_t)ml_rt_gettid();
    load_zstd();
    open_file();
    for (;;) {
        uint32_t seen = __atomic_load_n(&tr.wake, __ATOMIC_ACQUIRE);
        struct tjob *list = __atomic_exchange_n(&tr.queue, NULL, __ATOMIC_ACQUIRE), *rev = NULL;
        uint64_t now = ml_rt_mono_ns();

        if (now - last_sample >= SAMPLE_NS) {
            active = sample();
            last_sample = now;
        }
        if (!list) {
            __atomic_store_n(&tr.idle_ns, now, __ATOMIC_RELAXED);
            /* While threads record, wake for the next sample; otherwise rarely. */
            struct timespec ts = {0, active ? SAMPLE_NS : 20000000};
            __atomic_store_n(&tr.writer_sleeping, 1, __ATOMIC_RELEASE);
            if (!__atomic_load_n(&tr.queue, __ATOMIC_ACQUIRE))
                syscall(SYS_futex, &tr.wake, FUTEX_WAIT_PRIVATE, seen, &ts, NULL, 0);
            __atomic_store_n(&tr.writer_sleeping, 0, __ATOMIC_RELEASE);
            continue;
        }
        while (list) { /* the stack holds the newest first: restore the order of pushes */
            struct tjob *n = list->next;
            list->next = rev;
            rev = list;
            list = n;
        }
        while (rev) {
            struct tjob *n = rev->next;
            tr.backlog = n != NULL;
            run_job(rev);
            rev = n;
        }
    }
    return NULL;
}

/* Starts the writer thread once per process (again in a fork child). */
static void writer_ensure(void)
{
    ml_pthread_create_fn create;
    pthread_attr_t attr;

    if (__atomic_load_n(&tr.writer_started, __ATOMIC_ACQUIRE))
        return;
    pthread_mutex_lock(&tr.lock);
    if (!tr.writer_started) {
        /* The C library's, not memlens' own wrapper: the writer is not a traced thread. */
        create = ml_rt_real_pthread_create();
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (!create || create(&tr.writer, &attr, writer_main, NULL)) {
            say("cannot start the trace writer thread", "", ": tracing is off");
            tr.disabled = 1;
        }
        pthread_attr_destroy(&attr);
        __atomic_store_n(&tr.writer_started, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&tr.lock);
}

/* Waits (bounded) until the writer has run s. */
static void wait_sync(struct sync *s)
{
    uint64_t t0 = ml_rt_mono_ns();

    /* do_sync wakes the waiter; the timeout only bounds a lost wake or a stuck writer. */
    while (!__atomic_load_n(&s->done, __ATOMIC_ACQUIRE) && !tr.disabled &&
           ml_rt_mono_ns() - t0 < FINISH_WAIT_NS) {
        struct timespec ts = {0, 2000000};
        syscall(SYS_futex, &s->done, FUTEX_WAIT_PRIVATE, 0, &ts, NULL, 0);
    }
}

/*
 * The end of the process (exit from any thread, or a fatal signal): every
 * thread's records so far go to the writer, which writes them and the END
 * chunk. Threads still running lose what they record afterwards.
 */
static void finish(uint32_t reason, uint32_t sig)
{
    static struct sync s = {.job = {.type = JOB_SYNC}};

    if (!tr.init || tr.disabled || !tr.writer_started ||
        __atomic_exchange_n(&tr.finishing, 1, __ATOMIC_ACQ_REL))
        return;
    if ((pid_t)ml_rt_gettid() == tr.writer_tid)
        return; /* the writer itself is dying: nothing can be saved */
    /* A thread encoding a buffer itself queues it before the END (no new one starts now). */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    for (struct tthread *t = tr.threads; t; t = t->next) {
        uint64_t t0 = ml_rt_mono_ns();
        while (t != self && __atomic_load_n(&t->encoding, __ATOMIC_SEQ_CST) &&
               ml_rt_mono_ns() - t0 < FINISH_ENCODE_NS)
            pause_ns(20000);
    }
    for (struct tthread *t = tr.threads; t; t = t->next) {
        uint64_t *used;
        if (t->retired || !t->cur)
            continue;
        used = t == self ? __memlens_tb_ptr : __atomic_load_n(t->ptr_slot, __ATOMIC_ACQUIRE);
        hand_over(t, used, HAND_DETACH);
    }
    use_scratch();
    s.reason = reason;
    s.signal = sig;
    push_job(&s.job);
    wait_sync(&s);
}

static void on_exit_finish(void)
{
    finish(ML_END_EXIT, 0);
}

void ml_tr_before_exit(void)
{
    finish(ML_END_EXIT, 0);
}

void ml_tr_before_exec(uint32_t gsite)
{
    static struct sync s = {.job = {.type = JOB_SYNC}};
    struct tthread *t = self;

    if (!tr.init || tr.disabled || !t || tr.finishing)
        return;
    ml_tr_event(ML_EV_EXEC, 0, 0, 0, 0, gsite);
    if (!self)
        return;
    hand_over(t, __memlens_tb_ptr, HAND_NEXT);
    s.done = 0;
    s.reason = ML_END_EXEC;
    push_job(&s.job);
    wait_sync(&s);
}

/* ---- signals, fork ---- */

static const int fatal_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGSEGV,
                                    SIGBUS, SIGFPE,  SIGILL, SIGABRT};

static void on_signal(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    if (self && !tr.finishing && !tr.disabled)
        ml_tr_event(ML_EV_SIGNAL, (uint64_t)(uintptr_t)(si ? si->si_addr : 0), 0, 0, (uint64_t)sig,
                    ML_EV_NOID);
    finish(ML_END_SIGNAL, (uint32_t)sig);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void install_signal_handlers(void)
{
    for (size_t i = 0; i < sizeof(fatal_signals) / sizeof(fatal_signals[0]); i++) {
        struct sigaction old, sa;
        if (sigaction(fatal_signals[i], NULL, &old) || old.sa_handler != SIG_DFL ||
            (old.sa_flags & SA_SIGINFO))
            continue;
        memset(&sa, 0, sizeof(sa));
        sa.sa_sigaction = on_signal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_NODEFER;
        sigaction(fatal_signals[i], &sa, NULL);
    }
}

/*
 * A fork child traces what it does after the fork into its own file: the
 * parent's queue, threads and file are not its own. The forking thread keeps
 * a fresh set of buffers; the writer starts again on first use.
 */
static void modules_again(void);

static void after_fork_child(void)
{
    for (struct tthread *t = tr.threads; t; t = t->next)
        if (!t->retired)
            munmap(t->mem, t->memlen);
    pthread_mutex_init(&tr.lock, NULL);
    pthread_mutex_init(&tr.enc_lock, NULL);
    tr.ppid = tr.pid;
    tr.pid = (uint32_t)getpid();
    tr.tick0 = ml_rt_ticks();
    tr.mono0 = ml_rt_mono_ns();
    tr.real0 = ml_rt_real_ns();
    ml_rt_files_fork();
    ml_tr_pf_clock(tr.tick0, tr.mono0);
    tr.queue = NULL;
    tr.writer_started = 0;
    tr.writer_sleeping = 0;
    tr.finishing = 0;
    tr.fd = -1;
    tr.threads = NULL;
    tr.nthreads = 0;
    tr.records = tr.waits = tr.wait_ticks = tr.lost = 0;
    tr.p_dropped = tr.p_waits = tr.p_wait_ticks = tr.p_self = 0;
    tr.wsites = 0; /* tables are written again for the new file */
    tr.nmaps = 0;
    free(tr.maps);
    tr.maps = NULL;
    self = NULL;
    use_scratch();
    __memlens_tb_ptr = __memlens_tb_end = NULL;
    /* Every registered module again, so that the child's file names its sites. */
    if (!tr.disabled)
        modules_again();
}

static void parse_options(void)
{
    const char *env = getenv("MEMLENS_TRACE");
    char buf[256], *save, *w;
    int faults = 1, pfn = 1;

    if (env) {
        size_t n = strlen(env);
        if (n >= sizeof(buf))
            n = sizeof(buf) - 1;
        memcpy(buf, env, n);
        buf[n] = 0;
        for (w = strtok_r(buf, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
            if (!strcmp(w, "start=off"))
                tr.options |= ML_TF_START_OFF;
            else if (!strcmp(w, "start=on"))
                tr.options &= ~ML_TF_START_OFF;
            else if (!strcmp(w, "regions-only"))
                tr.options |= ML_TF_REGIONS_ONLY;
            else if (!strcmp(w, "markers-only"))
                tr.options |= ML_TF_MARKERS_ONLY;
            else if (!strcmp(w, "collapse"))
                tr.options |= ML_TF_COLLAPSE;
            else if (!strcmp(w, "drop"))
                tr.options |= ML_TF_DROP;
            else if (!strcmp(w, "no-faults"))
                faults = 0;
            else if (!strcmp(w, "no-pfn"))
                pfn = 0;
            else if (!strcmp(w, "self=off"))
                tr.self_mode = SELF_OFF;
            else if (!strcmp(w, "self=always"))
                tr.self_mode = SELF_ALWAYS;
            else if (!strcmp(w, "fast=off"))
                tr.slow = 1;
            else if (!strcmp(w, "fast=on"))
                tr.slow = 0;
            else
                say("ignoring unknown MEMLENS_TRACE option '", w,
                    "' (known: start=off, regions-only, markers-only, collapse, drop, "
                    "no-faults, no-pfn, self=off, self=always, fast=off)");
        }
    }
    ml_tr_pf_probe(faults, pfn, tr.faults_why, sizeof(tr.faults_why), tr.pfn_why,
                   sizeof(tr.pfn_why));
}

void ml_tr_init(void)
{
    pthread_mutex_lock(&tr.lock);
    if (!tr.init) {
        tr.tick0 = ml_rt_ticks();
        tr.mono0 = ml_rt_mono_ns();
        tr.real0 = ml_rt_real_ns();
        tr.pid = (uint32_t)getpid();
        ml_rt_files_start();
        ml_tr_pf_clock(tr.tick0, tr.mono0);
        parse_options();
        update_gate((tr.options & ML_TF_START_OFF) != 0);
        pthread_key_create(&exit_key, thread_exit);
        pthread_atfork(NULL, NULL, after_fork_child);
        atexit(on_exit_finish);
        install_signal_handlers();
        __atomic_store_n(&tr.init, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&tr.lock);
}

/* ---- modules ---- */

static struct ml_ev_module *modules, **modules_tail = &modules;

static void modules_again(void)
{
    for (struct ml_ev_module *m = modules; m; m = m->next) {
        struct tmodule *j = calloc(1, sizeof(*j));
        if (!j)
            return;
        j->job.type = JOB_MODULE;
        j->m = m;
        push_job(&j->job);
    }
}

ML_EXPORT void __memlens_trace_register(struct ml_ev_module *m)
{
    struct tmodule *j;

    if (m->abi != ML_EV_ABI)
        return; /* built by another memlens: its tables cannot be read safely */
    ml_tr_init();
    j = calloc(1, sizeof(*j));
    pthread_mutex_lock(&tr.lock);
    m->site_base = tr.nsites;
    m->marker_base = tr.nmarkers;
    tr.nsites += m->nsites;
    tr.nmarkers += m->nmarkers;
    m->next = NULL;
    *modules_tail = m;
    modules_tail = &m->next;
    pthread_mutex_unlock(&tr.lock);
    if (!j)
        return;
    j->job.type = JOB_MODULE;
    j->m = m;
    writer_ensure();
    push_job(&j->job);
}

/*
 * From the module's destructor, before dlclose unmaps it: the calling
 * thread's records go to the writer, which reads every job queued so far
 * (the module's tables among them), then forgets where the module's segment
 * descriptors were, so that a library loaded there later is not mistaken for
 * it. Records of the module still in other threads' buffers are lost.
 */
ML_EXPORT void __memlens_trace_unregister(struct ml_ev_module *m)
{
    struct tmodule u = {.job = {.type = JOB_UNMODULE}, .m = m};
    struct ml_ev_module **pp;
    uint64_t t0;

    if (m->abi != ML_EV_ABI || !tr.init)
        return;
    pthread_mutex_lock(&tr.lock);
    for (pp = &modules; *pp && *pp != m; pp = &(*pp)->next)
        ;
    if (*pp) {
        *pp = m->next;
        if (modules_tail == &m->next)
            modules_tail = pp;
    }
    pthread_mutex_unlock(&tr.lock);
    if (tr.disabled || tr.finishing || !tr.writer_started)
        return;
    if (self && self->cur)
        hand_over(self, __memlens_tb_ptr, HAND_NEXT);
    push_job(&u.job);
    t0 = ml_rt_mono_ns();
    while (!__atomic_load_n(&u.done, __ATOMIC_ACQUIRE) && !tr.disabled &&
           ml_rt_mono_ns() - t0 < FINISH_WAIT_NS)
        pause_ns(100000);
}
