/* Event queue producer (sink 2): per-thread double-buffered chunks in the backend's shared memory.
 */
#include "format/events.h"
#include "format/qtables.h"
#include "format/queue.h"
#include "runtime/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define ML_EXPORT __attribute__((visibility("default")))

/* pos past end: a thread's first event takes __memlens_q_next, which attaches it. */
/*
 * Set while this thread must send no heap events (runtime/heap.c): the
 * runtime's own allocations, and every allocation after the thread's exit.
 */
ML_EXPORT __thread int __memlens_q_quiet __attribute__((tls_model("initial-exec")));

static const struct ml_q_cursor boot = {.pos = (uint8_t *)1, .end = NULL};

ML_EXPORT __thread struct ml_q_cursor *__memlens_q_cur __attribute__((tls_model("initial-exec"))) =
    (struct ml_q_cursor *)&boot;

/*
 * A thread's queue state, one page mapped at its first event and unmapped at
 * its exit; thread-local storage holds only pointers, because the runtime may
 * be a shared object loaded by dlopen, where static TLS is scarce. The
 * scratch area is where a thread's events go when they cannot reach a backend
 * (no backend, no free slot, backend gone, a forked child): reused, never read.
 */
#define QPAGE   4096
#define SCRATCH (QPAGE - 128 - ML_Q_MAX_EVENT)

struct qthread {
    struct ml_q_cursor scratch_cur;
    uint32_t slot; /* slot + 1 while this thread owns one, else 0 */
    uint32_t busy; /* inside the slow path: a signal handler's events go to scratch */
    uint32_t noslot;
    uint32_t shared; /* the fallback state below, shared by threads: never takes a slot */
    uint8_t pad[48];
    uint8_t scratch[SCRATCH + ML_Q_MAX_EVENT];
};
_Static_assert(sizeof(struct qthread) == QPAGE, "one page per thread");

static __thread struct qthread *qtp __attribute__((tls_model("initial-exec")));
/* When a page cannot be mapped: nothing is sent, writes race harmlessly. */
static struct qthread fallback = {.shared = 1, .noslot = 1};
#define qt (*qtp)

static struct ml_q_header *hdr; /* NULL: not attached */
static uint64_t map_size;
static volatile int detached; /* this process stopped sending; set once, never cleared */
static pthread_key_t qkey;
static int qkey_ok;
static pthread_once_t init_once = PTHREAD_ONCE_INIT, key_once = PTHREAD_ONCE_INIT;

/* Waits that last longer than this check whether the backend still lives. */
#define WAIT_NS       100000000
#define BACKEND_STALE 10 /* waits without a heartbeat before asking the kernel */

static void store_fence(void)
{
#if defined(__x86_64__)
    _mm_sfence(); /* non-temporal stores are not ordered by a release store */
#endif
    atomic_thread_fence(memory_order_release);
}

/* An unsigned number in hex or decimal at *s, advancing *s; -1 when there is none. */
static int parse_u64(const char **s, int base, uint64_t *v)
{
    const char *p = *s;
    uint64_t n = 0;

    for (;; p++) {
        int d;
        if (*p >= '0' && *p <= '9')
            d = *p - '0';
        else if (base == 16 && *p >= 'a' && *p <= 'f')
            d = *p - 'a' + 10;
        else
            break;
        if (n > (UINT64_MAX - (uint64_t)d) / (uint64_t)base)
            return -1;
        n = n * (uint64_t)base + (uint64_t)d;
    }
    if (p == *s)
        return -1;
    *s = p;
    *v = n;
    return 0;
}

static int header_ok(const struct ml_q_header *h, uint64_t token, uint64_t fsize)
{
    return h->magic == ML_Q_MAGIC && h->version == ML_Q_VERSION && h->token == token &&
           h->size == fsize && h->chunk_size >= ML_Q_MIN_CHUNK && h->chunk_size <= ML_Q_MAX_CHUNK &&
           h->chunk_size % 4096 == 0 && h->max_slots && h->max_slots <= ML_Q_MAX_SLOTS &&
           h->data_off == ml_q_data_off(h->max_slots) &&
           h->size == ml_q_file_size(h->max_slots, h->chunk_size) && h->consumers &&
           h->spin_ns <= ML_Q_SPIN_NS;
}

static void thread_end(void *arg);
static void at_exit(void);
static void before_fork(void);
static void after_fork_child(void);

static void key_init(void)
{
    qkey_ok = !pthread_key_create(&qkey, thread_end);
}

/* The calling thread's state, mapped on first use (mmap: safe in a signal handler). */
static struct qthread *qself(void)
{
    struct qthread *q = qtp;

    if (q)
        return q;
    pthread_once(&key_once, key_init);
    q = mmap(NULL, QPAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (q == MAP_FAILED || !qkey_ok || pthread_setspecific(qkey, q)) {
        if (q != MAP_FAILED)
            munmap(q, QPAGE);
        q = &fallback;
    }
    qtp = q;
    return q;
}

/*
 * Attaches this process to the queue named by ML_Q_ENV ("<fd>:<hex token>"),
 * once. Another process of the run (a parent that attached first, a program
 * exec'd over an attached one) finds the queue taken or the fd gone and
 * stays detached: only one process feeds a profile.
 */
static void q_init(void)
{
    const char *env = getenv(ML_Q_ENV), *p = env;
    struct ml_q_header h;
    struct stat st;
    uint64_t fd, token;
    int32_t none = 0;
    void *m;

    if (!env || parse_u64(&p, 10, &fd) || *p++ != ':' || parse_u64(&p, 16, &token) || *p ||
        fd > INT_MAX)
        return;
    if (fstat((int)fd, &st) || !S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(h) ||
        pread((int)fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h) ||
        !header_ok(&h, token, (uint64_t)st.st_size))
        return;
    if (atomic_load(&h.attached_pid)) { /* our queue, but taken: not ours to keep open */
        close((int)fd);
        return;
    }
    m = mmap(NULL, h.size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, (int)fd, 0);
    if (m == MAP_FAILED)
        return;
    hdr = m;
    if (!header_ok(hdr, token, (uint64_t)st.st_size) ||
        !atomic_compare_exchange_strong(&hdr->attached_pid, &none, (int32_t)getpid())) {
        hdr = NULL;
        munmap(m, h.size);
        return;
    }
    map_size = h.size;
    hdr->prog_base = (uint64_t)(uintptr_t)m;
    close((int)fd);
    pthread_atfork(before_fork, NULL, after_fork_child);
    atexit(at_exit);
}

/* Attach before main, so that instrumented constructors of the program find the queue. */
__attribute__((constructor(101))) static void q_ctor(void)
{
    pthread_once(&init_once, q_init);
}

/* Registered first, so it runs after the program's own exit handlers: a normal end. */
static void at_exit(void)
{
    if (hdr && !detached)
        atomic_store(&hdr->exited, 1);
}

static void before_fork(void)
{
    if (hdr && !detached)
        atomic_fetch_add(&hdr->forks, 1);
}

/*
 * A forked child must never write into its parent's queue: its shared mapping
 * is replaced by private memory and its one thread starts over, detached.
 */
static void after_fork_child(void)
{
    detached = 1;
    if (hdr)
        mmap(hdr, map_size, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
    hdr = NULL;
    if (qtp && !qtp->shared) {
        qt.slot = 0;
        qt.busy = 0;
        qt.noslot = 0;
    }
    __memlens_q_cur = (struct ml_q_cursor *)&boot;
}

/* Counts the records a thread without a slot wrote to its scratch area, then reuses it. */
static struct ml_q_cursor *scratch(void)
{
    struct ml_q_cursor *c = &qt.scratch_cur;

    if (hdr && !detached && c->pos > qt.scratch) {
        uint32_t len = (uint32_t)(c->pos - qt.scratch), n = 0, r;
        for (uint32_t off = 0; off < len && (r = ml_q_record_len(qt.scratch, off, len)); off += r)
            n++;
        atomic_fetch_add(&hdr->lost_events, n);
    }
    c->pos = qt.scratch;
    c->end = qt.scratch + SCRATCH;
    return c;
}

static struct ml_q_slot *slot_of(struct ml_q_cursor *c)
{
    return (struct ml_q_slot *)c;
}

static uint8_t *chunk_data(struct ml_q_slot *sl, uint32_t k)
{
    return ml_q_chunk_data(hdr, (uint32_t)(sl - ml_q_slot(hdr, 0)), k);
}

static void start_chunk(struct ml_q_slot *sl)
{
    uint32_t k = (uint32_t)(sl->seq & 1);
    struct ml_q_chunk *ch = &sl->chunk[k];
    uint8_t *d = chunk_data(sl, k);

    ch->seq = sl->seq;
    ch->thread = sl->thread;
    ch->tid = sl->tid;
    ch->len = 0;
    ch->flags = 0;
    ch->t0 = ml_rt_ticks();
    atomic_store(&ch->state, ML_Q_FILLING);
    atomic_store(&sl->fill, k);
    sl->cur.end = d + hdr->chunk_size - ML_Q_MAX_EVENT;
    sl->cur.pos = d;
}

/* Hands the chunk being filled to the consumers, whole. */
static void publish(struct ml_q_slot *sl, uint32_t flags)
{
    uint32_t k = atomic_load(&sl->fill);
    struct ml_q_chunk *ch = &sl->chunk[k];

    ch->len = (uint32_t)(sl->cur.pos - chunk_data(sl, k));
    ch->flags |= flags;
    ch->t1 = ml_rt_ticks();
    store_fence();
    atomic_store(&ch->readers, hdr->consumers);
    atomic_store_explicit(&ch->state, ML_Q_FULL, memory_order_release);
    sl->seq++;
    atomic_fetch_add(&hdr->pub, 1);
    if (atomic_load(&hdr->cwait))
        ml_q_futex(&hdr->pub, FUTEX_WAKE, INT_MAX, NULL);
}

/* The backend has gone away without saying so: killed, or crashed. */
static int backend_gone(uint64_t *hb, uint32_t *stale)
{
    uint64_t now = atomic_load(&hdr->heartbeat);

    if (atomic_load(&hdr->closing))
        return 1;
    if (now != *hb) {
        *hb = now;
        *stale = 0;
        return 0;
    }
    return ++*stale >= BACKEND_STALE && kill(hdr->backend_pid, 0) && errno == ESRCH;
}

static void detach(void)
{
    detached = 1;
    if (hdr)
        atomic_store(&hdr->detached, 1);
}

/*
 * Waits until the consumers have released chunk k: bounded memory, nothing
 * dropped. Returns -1 when the backend is gone (this process then detaches).
 */
static int wait_free(struct ml_q_slot *sl, uint32_t k)
{
    struct ml_q_chunk *ch = &sl->chunk[k];
    const struct timespec ts = {0, WAIT_NS};
    uint64_t hb = atomic_load(&hdr->heartbeat), t0;
    uint32_t stale = 0, st;
    int rc = 0;

    if (atomic_load_explicit(&ch->state, memory_order_acquire) == ML_Q_FREE)
        return 0;
    t0 = ml_q_now_ns();
    for (uint64_t i = 1;; i++) {
        if (atomic_load_explicit(&ch->state, memory_order_acquire) == ML_Q_FREE) {
            atomic_fetch_add(&hdr->wait_ns, ml_q_now_ns() - t0);
            return 0;
        }
        ml_q_relax();
        if (i % 64 == 0 && ml_q_now_ns() - t0 > hdr->spin_ns)
            break;
    }
    atomic_store(&sl->pwait, 1);
    while ((st = atomic_load(&ch->state)) != ML_Q_FREE) {
        if (ml_q_futex(&ch->state, FUTEX_WAIT, st, &ts) && errno == ETIMEDOUT &&
            backend_gone(&hb, &stale)) {
            rc = -1;
            break;
        }
    }
    atomic_store(&sl->pwait, 0);
    atomic_fetch_add(&hdr->wait_ns, ml_q_now_ns() - t0);
    return rc;
}

/*
 * A free slot for the calling thread, or NULL when all max_slots belong to
 * live threads (or the backend is gone). Slots of threads that ended become
 * free once the backend has read their last chunk: wait for those.
 */
static struct ml_q_slot *take_slot(void)
{
    const struct timespec nap = {0, 200000};
    uint64_t hb = atomic_load(&hdr->heartbeat), t0 = 0;
    uint32_t stale = 0, naps = 0;

    for (;;) {
        uint32_t ended = 0;
        for (uint32_t i = 0; i < hdr->max_slots; i++) {
            struct ml_q_slot *sl = ml_q_slot(hdr, i);
            uint32_t st = atomic_load(&sl->state), fr = ML_Q_SLOT_FREE, n;
            ended += st == ML_Q_SLOT_ENDED;
            if (st != ML_Q_SLOT_FREE ||
                !atomic_compare_exchange_strong(&sl->state, &fr, ML_Q_SLOT_LIVE))
                continue;
            n = atomic_load(&hdr->nslots);
            while (n < i + 1 && !atomic_compare_exchange_weak(&hdr->nslots, &n, i + 1))
                ;
            sl->thread = atomic_fetch_add(&hdr->threads, 1);
            sl->tid = (uint32_t)syscall(SYS_gettid);
            qt.slot = i + 1;
            start_chunk(sl);
            if (t0)
                atomic_fetch_add(&hdr->wait_ns, ml_q_now_ns() - t0);
            return sl;
        }
        if (!ended)
            return NULL;
        if (!t0)
            t0 = ml_q_now_ns();
        nanosleep(&nap, NULL);
        if (++naps % 500 == 0 && backend_gone(&hb, &stale)) { /* every 100 ms */
            detach();
            return NULL;
        }
    }
}

static struct ml_q_cursor *attach_thread(void)
{
    struct ml_q_slot *sl;

    pthread_once(&init_once, q_init);
    if (!hdr || detached || qt.noslot)
        return scratch();
    if (!(sl = take_slot())) {
        qt.noslot = 1;
        if (!detached)
            atomic_fetch_add(&hdr->lost_threads, 1); /* thread_end counts its last events */
        return scratch();
    }
    return &sl->cur;
}

/* Gives the slot back (the consumers free it once they have read its last chunk). */
static void end_slot(struct ml_q_slot *sl)
{
    atomic_store(&sl->state, ML_Q_SLOT_ENDED);
    publish(sl, ML_Q_CHUNK_LAST);
    qt.slot = 0;
}

/* The calling thread's cursor has no room left: publish, move on, or re-attach. */
static struct ml_q_cursor *advance(struct ml_q_cursor *c)
{
    struct ml_q_slot *sl;

    if (c == &boot)
        return attach_thread();
    if (c == &qt.scratch_cur || !qt.slot)
        return scratch();
    sl = slot_of(c);
    if (detached) {
        end_slot(sl);
        return scratch();
    }
    publish(sl, 0);
    if (wait_free(sl, (uint32_t)(sl->seq & 1))) {
        detach();
        return scratch();
    }
    start_chunk(sl);
    return c;
}

ML_EXPORT struct ml_q_cursor *__memlens_q_next(void)
{
    struct ml_q_cursor *c = __memlens_q_cur;
    int saved_errno = errno; /* the program's: set-up, waits and wake-ups make calls */

    qself();
    if (qt.busy) { /* a signal handler interrupted the slow path */
        if (hdr && !detached)
            atomic_fetch_add(&hdr->lost_events, 1);
        qt.scratch_cur.pos = qt.scratch;
        qt.scratch_cur.end = qt.scratch + SCRATCH;
        c = &qt.scratch_cur;
    } else {
        qt.busy = 1;
        c = advance(c);
        __memlens_q_cur = c;
        qt.busy = 0;
    }
    errno = saved_errno;
    return c;
}

/*
 * Thread exit (pthread key destructor): the partly filled chunk goes out
 * marked last, and the thread's page is unmapped.
 */
static void thread_end(void *arg)
{
    struct qthread *q = arg;

    if (q != qtp || q->busy)
        return;
    __memlens_q_quiet = 1; /* later frees of the exiting thread would take a new slot */
    if (hdr && q->noslot)
        scratch();
    if (hdr && q->slot && !detached)
        end_slot(ml_q_slot(hdr, q->slot - 1));
    __memlens_q_cur = (struct ml_q_cursor *)&boot;
    qtp = NULL;
    munmap(q, QPAGE);
}

static void store_bytes(uint8_t *p, const uint8_t *src, uint64_t n)
{
    for (uint64_t i = 0; i < n; i += 8) {
        uint64_t w = 0;
        memcpy(&w, src + i, n - i < 8 ? n - i : 8);
        ml_q_store(p + i, w);
    }
}

ML_EXPORT void __memlens_q_blob(uint64_t tag, const void *data, uint64_t len)
{
    const uint8_t *src = data;

    qself();
    do {
        uint64_t n = len < ML_Q_BLOB_FRAGMENT ? len : ML_Q_BLOB_FRAGMENT;
        uint64_t need = ML_Q_UNIT + ((n + ML_Q_UNIT - 1) & ~(uint64_t)(ML_Q_UNIT - 1));
        struct ml_q_cursor *c = __memlens_q_cur;
        uint8_t *p;

        if (qt.busy)
            return;
        qt.busy = 1;
        /* A fragment is larger than ML_Q_MAX_EVENT: it may need a fresh chunk. */
        if (c->pos > c->end || (uint64_t)(c->end + ML_Q_MAX_EVENT - c->pos) < need)
            c = advance(c);
        if (c == &qt.scratch_cur) {
            __memlens_q_cur = c;
            qt.busy = 0;
            if (hdr && !detached)
                atomic_fetch_add(&hdr->lost_events, 1);
        } else {
            struct ml_q_slot *sl = slot_of(c);
            sl->chunk[atomic_load(&sl->fill)].flags |= ML_Q_CHUNK_BLOB;
            p = c->pos;
            ml_q_store(p, ML_Q_W0(ML_Q_KIND_BLOB, 0, n == len ? ML_Q_BLOB_LAST : 0, n));
            ml_q_store(p + 8, tag);
            store_bytes(p + ML_Q_UNIT, src, n);
            c->pos = p + need;
            __memlens_q_cur = c;
            qt.busy = 0;
        }
        src += n;
        len -= n;
    } while (len);
}

ML_EXPORT void __memlens_q_sync(void)
{
    struct ml_q_slot *sl;
    uint32_t k;

    if (!hdr || detached || !qself()->slot || qt.busy)
        return;
    qt.busy = 1;
    sl = ml_q_slot(hdr, qt.slot - 1);
    k = atomic_load(&sl->fill);
    publish(sl, 0);
    if (wait_free(sl, k ^ 1) || wait_free(sl, k)) {
        detach();
        __memlens_q_cur = scratch();
    } else {
        start_chunk(sl);
    }
    qt.busy = 0;
}

static uint8_t *put32(uint8_t *p, uint32_t v)
{
    memcpy(p, &v, 4);
    return p + 4;
}

static uint32_t slen(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    return n > 65535 ? 65535 : (uint32_t)n;
}

static uint8_t *putstr(uint8_t *p, const char *s, uint32_t n)
{
    if (n)
        memcpy(p, s, n);
    return p + n;
}

static _Atomic uint32_t q_sites, q_markers;

/*
 * From the constructor of a module built with --events: gives it global site
 * and marker ids and sends its tables (format/qtables.h). Without a backend
 * the blob goes to the scratch area like any event.
 */
ML_EXPORT void __memlens_q_register(struct ml_ev_module *m)
{
    uint64_t len = 7 * 4 + slen(m->name);
    uint8_t *buf, *p;

    if (m->abi != ML_EV_ABI)
        return; /* built by another memlens: its tables cannot be read safely */
    m->site_base = atomic_fetch_add(&q_sites, m->nsites);
    m->marker_base = atomic_fetch_add(&q_markers, m->nmarkers);
    for (uint32_t i = 0; i < m->nsites; i++)
        len += 7 * 4 + slen(m->sites[i].func) + slen(m->sites[i].file);
    for (uint32_t i = 0; i < m->nmarkers; i++)
        len +=
            5 * 4 + slen(m->markers[i].name) + slen(m->markers[i].file) + slen(m->markers[i].func);
    __memlens_q_quiet = 1;
    buf = malloc(len);
    __memlens_q_quiet = 0;
    if (!buf) {
        if (hdr && !detached)
            atomic_fetch_add(&hdr->lost_events, 1);
        return;
    }
    p = put32(buf, ML_QT_MAGIC);
    p = put32(p, ML_QT_VERSION);
    p = put32(p, m->site_base);
    p = put32(p, m->nsites);
    p = put32(p, m->marker_base);
    p = put32(p, m->nmarkers);
    p = put32(p, slen(m->name));
    p = putstr(p, m->name, slen(m->name));
    for (uint32_t i = 0; i < m->nsites; i++) {
        const struct ml_ev_site *x = &m->sites[i];
        p = put32(p, x->kind);
        p = put32(p, x->size);
        p = put32(p, x->marker);
        p = put32(p, x->line);
        p = put32(p, x->column);
        p = put32(p, slen(x->func));
        p = put32(p, slen(x->file));
        p = putstr(p, x->func, slen(x->func));
        p = putstr(p, x->file, slen(x->file));
    }
    for (uint32_t i = 0; i < m->nmarkers; i++) {
        const struct ml_ev_marker *x = &m->markers[i];
        p = put32(p, x->kind);
        p = put32(p, x->line);
        p = put32(p, slen(x->name));
        p = put32(p, slen(x->file));
        p = put32(p, slen(x->func));
        p = putstr(p, x->name, slen(x->name));
        p = putstr(p, x->file, slen(x->file));
        p = putstr(p, x->func, slen(x->func));
    }
    __memlens_q_blob(ML_QT_TAG, buf, len);
    __memlens_q_quiet = 1;
    free(buf);
    __memlens_q_quiet = 0;
}

/*
 * A unit built for heap events in a program linked without the interposers
 * (runtime/heap.c, whose registration replaces this one: the link lacked
 * --events): its tables, and a note that no heap event will come.
 */
ML_EXPORT __attribute__((weak)) void __memlens_q_register_heap(struct ml_ev_module *m)
{
    static int once;

    __memlens_q_register(m);
    if (hdr && !detached && !__atomic_exchange_n(&once, 1, __ATOMIC_RELAXED))
        __memlens_q_blob(ML_QT_TAG_NOHEAP, "", 0);
}

/* Whether this process feeds a backend (runtime/heap.c asks before sending heap events). */
ML_EXPORT int __memlens_q_attached(void)
{
    return hdr && !detached;
}
