/* Event profiling backend: the queue (consumer side), worker threads, dispatch to modules. */
#include "backend/backend.h"
#include "format/queue.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_MODS       16
#define MAX_WORKERS    256
#define MAX_THREADS    (1u << 22) /* program thread numbers the backend keeps state for */
#define MAX_BLOB_BYTES (1ull << 30)

struct disp_ent {
    uint8_t part, mod;
    ml_bev_fn fn;
};

struct disp {
    uint32_t n;
    struct disp_ent e[MAX_MODS];
};

struct partial_blob {
    uint8_t *buf;
    uint64_t len, cap;
    uint64_t tag;
};

struct ready {
    uint64_t t1; /* cycle clock at publication */
    uint32_t slot, k;
};

struct wstate {
    struct ml_bworker w;
    pthread_t th;
    int started;
    uint64_t *next_seq;  /* [max_slots]: the next chunk this worker reads, per slot */
    struct ready *ready; /* [2 * max_slots]: the chunks one pass reads, in publication order */
    void *st[MAX_MODS];
    uint64_t events, bytes, chunks, corrupt, blob_lost;
    uint64_t busy_ns;        /* time spent reading chunks */
    int blob_next;           /* deal: a chunk of worker 0's (blob) is next in some slot */
    struct partial_blob *pb; /* worker 0: blobs being joined, per thread */
    uint32_t npb;
};

struct ml_backend {
    struct ml_backend_opts o;
    const struct ml_module *mods[MAX_MODS];
    int fd;
    struct ml_q_header *h;
    uint64_t size;
    char env[64];
    struct disp disp[256];
    uint32_t chunk_mods[MAX_MODS]; /* modules that read whole chunks */
    uint32_t nchunk_mods;
    int deal;                 /* each chunk to one worker (every module is chunk_any) */
    _Atomic uint64_t *claims; /* deal: per slot, the next chunk to hand out */
    uint32_t cap;             /* deal: workers reading at once at most (0: all of them) */
    _Atomic uint32_t active;  /* deal with a cap: workers holding a turn to read */
    _Atomic uint32_t await;   /* workers asleep until a turn is free */
    _Atomic int want0;        /* the next free turn is worker 0's (a blob chunk waits) */
    struct wstate *ws;
    _Atomic int dead, abandon;
    struct ml_bblob *blobs, **blobs_tail;
    uint64_t blob_bytes;
    struct timespec t0;
    double seconds;
};

static double since(const struct timespec *t0)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

/* ---- modules ---- */

int ml_module_check(const struct ml_module *m, char *err, size_t errlen)
{
    int events = (m->handlers && m->handlers[0].kind) || m->chunk;
    const char *missing = !m->name     ? "name"
                          : !events    ? "handlers"
                          : !m->init   ? "init"
                          : !m->merge  ? "merge"
                          : !m->report ? "report"
                                       : NULL;

    if (missing) {
        snprintf(err, errlen, "module '%s' has no '%s' callback", m->name ? m->name : "?", missing);
        return -EINVAL;
    }
    for (const struct ml_bhandler *hd = m->handlers; hd && hd->kind; hd++) {
        if (!hd->fn || (hd->kind > 0xef && hd->kind != ML_BKIND_ANY) || hd->part > ML_BPART_ID) {
            snprintf(err, errlen, "module '%s' has a bad handler for kind %u%s", m->name, hd->kind,
                     hd->fn ? "" : " (no callback)");
            return -EINVAL;
        }
    }
    return 0;
}

static const struct ml_bhandler *handler_of(const struct ml_module *m, unsigned kind)
{
    const struct ml_bhandler *any = NULL;

    for (const struct ml_bhandler *hd = m->handlers; hd && hd->kind; hd++) {
        if (hd->kind == kind)
            return hd;
        if (hd->kind == ML_BKIND_ANY)
            any = hd;
    }
    return any;
}

/* ---- workers ---- */

void ml_bw_owned_ranges(const struct ml_bworker *w, uint64_t lo, uint64_t hi,
                        void (*fn)(void *arg, uint64_t lo, uint64_t hi), void *arg)
{
    uint64_t start = lo;
    int in = 0;

    if (w->n == 1) {
        if (lo < hi)
            fn(arg, lo, hi);
        return;
    }
    while (lo < hi) {
        uint64_t next = (lo | ((1ull << ML_BPART_BLOCK_BITS) - 1)) + 1;
        int own = ml_bpart_addr(lo, w->n) == w->index;
        if (next > hi || next == 0)
            next = hi;
        if (own && !in)
            start = lo;
        else if (!own && in)
            fn(arg, start, lo);
        in = own;
        lo = next;
    }
    if (in)
        fn(arg, start, hi);
}

struct ml_cstack *ml_bw_stack(struct ml_bworker *w, uint32_t thread)
{
    if (thread >= MAX_THREADS)
        return NULL;
    if (thread >= w->nstacks) {
        uint32_t n = thread * 2 + 8;
        struct ml_cstack **s = realloc(w->stacks, (size_t)n * sizeof(*s));
        if (!s)
            return NULL;
        memset(s + w->nstacks, 0, (size_t)(n - w->nstacks) * sizeof(*s));
        w->stacks = s;
        w->nstacks = n;
    }
    if (!w->stacks[thread])
        w->stacks[thread] = ml_cstack_new(w->ctx);
    return w->stacks[thread];
}

/* Worker 0 joins blob fragments per thread; a complete blob joins the backend's list. */
static void blob_add(struct wstate *ws, uint32_t thread, const uint64_t *rec)
{
    struct ml_backend *b = ws->w.b;
    uint64_t n = ML_Q_ID(rec[0]);
    struct partial_blob *p;

    if (thread >= MAX_THREADS) {
        ws->blob_lost++;
        return;
    }
    if (thread >= ws->npb) {
        uint32_t cnt = thread * 2 + 8;
        struct partial_blob *pb = realloc(ws->pb, (size_t)cnt * sizeof(*pb));
        if (!pb) {
            ws->blob_lost++;
            return;
        }
        memset(pb + ws->npb, 0, (size_t)(cnt - ws->npb) * sizeof(*pb));
        ws->pb = pb;
        ws->npb = cnt;
    }
    p = &ws->pb[thread];
    if (p->len && p->tag != rec[1]) { /* fragments of two blobs interleaved: drop the first */
        ws->blob_lost++;
        p->len = 0;
    }
    p->tag = rec[1];
    if (b->blob_bytes + p->len + n > MAX_BLOB_BYTES) {
        ws->blob_lost++;
        p->len = 0;
        return;
    }
    if (p->len + n > p->cap) {
        uint64_t cap = (p->len + n) * 2;
        uint8_t *buf = realloc(p->buf, cap);
        if (!buf) {
            ws->blob_lost++;
            p->len = 0;
            return;
        }
        p->buf = buf;
        p->cap = cap;
    }
    memcpy(p->buf + p->len, rec + 2, n);
    p->len += n;
    if (ML_Q_AUX(rec[0]) & ML_Q_BLOB_LAST) {
        struct ml_bblob *bl = malloc(sizeof(*bl) + p->len);
        if (!bl) {
            ws->blob_lost++;
        } else {
            bl->next = NULL;
            bl->tag = p->tag;
            bl->thread = thread;
            bl->len = p->len;
            memcpy(bl->data, p->buf, p->len);
            *b->blobs_tail = bl;
            b->blobs_tail = &bl->next;
            b->blob_bytes += p->len;
        }
        p->len = 0;
    }
}

/* Whether this worker handles an event of handler e. */
static inline int owns(const struct disp_ent *e, const uint64_t *rec, uint32_t me, uint32_t n)
{
    switch (e->part) {
    case ML_BPART_ONE:
        return me == 0;
    case ML_BPART_ADDR:
        return ml_bpart_addr(rec[1], n) == me;
    case ML_BPART_ID:
        return ml_bpart_id(ML_Q_ID(rec[0]), n) == me;
    }
    return 1;
}

__attribute__((noinline)) uint32_t ml_bchunk_rec_slow(const uint8_t *data, uint32_t off,
                                                      uint32_t len)
{
    return ml_q_record_len(data, off, len);
}

/* Records are handed to chunk modules in blocks small enough to be still in L1. */
#define BLOCK 8192u

/* Hands records to the chunk modules; returns what the first found well-formed. */
static uint32_t to_chunk_mods(struct wstate *ws, uint32_t thread, const uint8_t *data, uint32_t len,
                              uint64_t *records)
{
    struct ml_backend *b = ws->w.b;
    uint32_t good = len;

    for (uint32_t i = 0; i < b->nchunk_mods; i++) {
        uint32_t m = b->chunk_mods[i];
        uint64_t n = 0;
        uint32_t g = b->mods[m]->chunk(ws->st[m], &ws->w, thread, data, len, &n);
        if (i == 0) {
            good = g;
            *records = n;
        }
    }
    return good;
}

/*
 * Reads one chunk's records and hands each to the handlers this worker owns.
 * The common path is a one-unit record and one handler per kind; anything
 * else (extra units, blobs, malformed records) takes the slow branch. On the
 * common path the next record's offset is offset + 16 whatever the record
 * holds, so that the loads of consecutive records do not wait on one another
 * (a control dependence the branch predictor resolves, instead of a data
 * dependence through every record: keep it a branch, not a conditional move).
 */
static void consume(struct wstate *ws, const struct ml_q_chunk *ch, const uint8_t *data,
                    uint32_t len)
{
    struct ml_backend *b = ws->w.b;
    const uint32_t me = ws->w.index, n = ws->w.n;
    const uint32_t thread = ch->thread;
    uint64_t events = 0;
    uint32_t off = 0, done = 0;

    if (len > b->h->chunk_size || len % ML_Q_UNIT || thread >= atomic_load(&b->h->threads) ||
        thread >= MAX_THREADS) {
        ws->corrupt++;
        return;
    }
    /* every module reads whole chunks and no blob is to be joined: one walk, theirs */
    if (b->nchunk_mods == b->o.nmods && !(me == 0 && (ch->flags & ML_Q_CHUNK_BLOB))) {
        off = to_chunk_mods(ws, thread, data, len, &events);
        ws->corrupt += off < len;
        len = 0;
    }
    while (off < len) {
        const uint64_t *rec = (const uint64_t *)(const void *)(data + off);
        const uint64_t w0 = rec[0];
        const unsigned kind = ML_Q_KIND(w0);
        const struct disp *d = &b->disp[kind];
        if (__builtin_expect(kind == 0 || kind == ML_Q_KIND_BLOB || ML_Q_EXTRA(w0), 0)) {
            uint32_t rl = ml_q_record_len(data, off, len);
            if (!rl) {
                ws->corrupt++;
                break;
            }
            off += rl;
            if (kind == ML_Q_KIND_BLOB) {
                if (me == 0)
                    blob_add(ws, thread, rec);
                continue;
            }
        } else {
            off += ML_Q_UNIT;
        }
        events++;
        if (off - done >= BLOCK && b->nchunk_mods) {
            uint64_t ignored;
            to_chunk_mods(ws, thread, data + done, off - done, &ignored);
            done = off;
        }
        if (!d->n)
            continue;
        if (__builtin_expect(d->n == 1, 1)) {
            if (n == 1 || owns(&d->e[0], rec, me, n))
                d->e[0].fn(ws->st[d->e[0].mod], &ws->w, thread, rec);
            continue;
        }
        for (uint32_t i = 0; i < d->n; i++)
            if (n == 1 || owns(&d->e[i], rec, me, n))
                d->e[i].fn(ws->st[d->e[i].mod], &ws->w, thread, rec);
    }
    if (off > done && b->nchunk_mods && len) {
        uint64_t ignored;
        to_chunk_mods(ws, thread, data + done, off - done, &ignored);
    }
    ws->events += events;
    ws->bytes += off;
    ws->chunks++;
}

/* The last reader frees the chunk, and the slot after its thread's last chunk. */
static void release(struct ml_q_slot *sl, struct ml_q_chunk *ch)
{
    if (atomic_fetch_sub(&ch->readers, 1) != 1)
        return;
    if (ch->flags & ML_Q_CHUNK_LAST) {
        atomic_store(&ch->state, ML_Q_FREE);
        atomic_store(&sl->state, ML_Q_SLOT_FREE);
    } else {
        atomic_store(&ch->state, ML_Q_FREE);
    }
    if (atomic_load(&sl->pwait))
        ml_q_futex(&ch->state, FUTEX_WAKE, INT_MAX, NULL);
}

/* Adds to r the chunks of slot s that are full and next in its sequence after *seq (both at most).
 */
static uint32_t gather(struct ml_q_header *h, uint32_t s, uint64_t *seq, struct ready *r)
{
    struct ml_q_slot *sl = ml_q_slot(h, s);
    uint32_t got = 0;

    for (; got < 2; got++, ++*seq) {
        struct ml_q_chunk *ch = &sl->chunk[*seq & 1];
        if (atomic_load_explicit(&ch->state, memory_order_acquire) != ML_Q_FULL || ch->seq != *seq)
            break;
        r[got] = (struct ready){ch->t1, s, (uint32_t)(*seq & 1)};
    }
    return got;
}

/*
 * Dealing: takes the chunks of slot s that are full and next to hand out
 * (both at most); the compare-and-swap on the slot's claim makes each chunk
 * one worker's. Chunks holding blob fragments are left to worker 0, which
 * joins blobs, in order (*blob_next is then set).
 */
static uint32_t claim(struct ml_q_header *h, _Atomic uint64_t *next, uint32_t s, uint32_t me,
                      struct ready *r, int *blob_next)
{
    struct ml_q_slot *sl = ml_q_slot(h, s);
    uint32_t got = 0;

    while (got < 2) {
        uint64_t seq = atomic_load(next);
        struct ml_q_chunk *ch = &sl->chunk[seq & 1];
        if (atomic_load_explicit(&ch->state, memory_order_acquire) != ML_Q_FULL || ch->seq != seq)
            break;
        if (me && (ch->flags & ML_Q_CHUNK_BLOB)) {
            *blob_next = 1;
            break;
        }
        if (atomic_compare_exchange_weak(next, &seq, seq + 1))
            r[got++] = (struct ready){ch->t1, s, (uint32_t)(seq & 1)};
    }
    return got;
}

static int by_t1(const void *a, const void *b)
{
    uint64_t x = ((const struct ready *)a)->t1, y = ((const struct ready *)b)->t1;

    return x < y ? -1 : x > y;
}

/*
 * One round over the slots: reads the chunks that are next in their slots'
 * sequences, in the order they were published, so that data one thread hands
 * to another (a join, a lock) is seen written before it is read. A second
 * scan picks up what was published while the first ran: a chunk published
 * before one the first scan saw is then in the same round, never a later one.
 */
static uint32_t pass(struct wstate *ws)
{
    struct ml_q_header *h = ws->w.b->h;
    uint32_t n = atomic_load(&h->nslots), got = 0;
    uint64_t t0;

    if (n > h->max_slots)
        n = h->max_slots;
    ws->blob_next = 0;
    for (int scan = 0; scan < 2; scan++)
        for (uint32_t s = 0; s < n; s++) {
            uint64_t seq = ws->next_seq[s];
            if (ws->w.whole) {
                got +=
                    claim(h, &ws->w.b->claims[s], s, ws->w.index, ws->ready + got, &ws->blob_next);
                continue;
            }
            got += gather(h, s, &seq, ws->ready + got);
            ws->next_seq[s] = seq;
        }
    if (got > 1)
        qsort(ws->ready, got, sizeof(*ws->ready), by_t1);
    for (uint32_t i = 0; i < got; i++) {
        struct ml_q_slot *sl = ml_q_slot(h, ws->ready[i].slot);
        struct ml_q_chunk *ch = &sl->chunk[ws->ready[i].k];
        t0 = ml_q_now_ns();
        consume(ws, ch, ml_q_chunk_data(h, ws->ready[i].slot, ws->ready[i].k), ch->len);
        ws->busy_ns += ml_q_now_ns() - t0;
        release(sl, ch);
    }
    return got;
}

/*
 * After the program died: each thread's partly filled chunk, up to the
 * cursor its last append left in shared memory. A thread caught between two
 * chunks has its cursor outside the one marked FILLING and sent everything.
 */
static void tail(struct wstate *ws)
{
    struct ml_q_header *h = ws->w.b->h;
    uint32_t n = atomic_load(&h->nslots);

    if (n > h->max_slots)
        n = h->max_slots;
    if (ws->w.whole) { /* dealing: worker 0 reads the rest, once nothing more can be claimed */
        if (ws->w.index)
            return;
        for (uint32_t s = 0; s < n; s++)
            ws->next_seq[s] = atomic_load(&ws->w.b->claims[s]);
    }
    for (uint32_t s = 0; s < n; s++) {
        struct ml_q_slot *sl = ml_q_slot(h, s);
        uint32_t k = atomic_load(&sl->fill) & 1;
        struct ml_q_chunk *ch = &sl->chunk[k];
        uint64_t base = h->prog_base + h->data_off + (2ull * s + k) * h->chunk_size;
        uint64_t pos = (uint64_t)(uintptr_t)sl->cur.pos;
        for (uint32_t j = 0; j < 2; j++) /* a full chunk this worker could not read in order */
            if (atomic_load(&sl->chunk[j].state) == ML_Q_FULL &&
                sl->chunk[j].seq >= ws->next_seq[s])
                ws->corrupt++;
        if (atomic_load(&ch->state) != ML_Q_FILLING || ch->seq != ws->next_seq[s] || pos < base ||
            pos > base + h->chunk_size)
            continue;
        consume(ws, ch, ml_q_chunk_data(h, s, k), (uint32_t)(pos - base));
    }
}

/*
 * Dealt chunks on a machine with fewer cores than workers plus the program:
 * a worker reads, and waits for chunks, only while it holds one of cap turns;
 * the others sleep until a turn is free. Each chunk is read once whoever
 * reads it, so readers beyond the spare cores only take the program's core:
 * on two cores, a producer and two workers that each woke for chunks took
 * 39% longer than with one worker (bench/queue.sh), woken workers landing on
 * the producer's core while the other core idled. A worker gives its turn
 * back when it ends, and to worker 0 as soon as a chunk next in some slot is
 * worker 0's (blob fragments: that thread waits for it, however busy the
 * other slots keep the turn's holder). After the program died every worker
 * reads, turn or not.
 */
static int turn_take(struct ml_backend *b, uint32_t me)
{
    uint32_t n = atomic_load(&b->active);

    if (me && atomic_load(&b->want0))
        return 0;
    while (n < b->cap)
        if (atomic_compare_exchange_weak(&b->active, &n, n + 1)) {
            if (!me)
                atomic_store(&b->want0, 0);
            return 1;
        }
    return 0;
}

static void turn_give(struct ml_backend *b)
{
    atomic_fetch_sub(&b->active, 1);
    if (atomic_load(&b->await))
        ml_q_futex(&b->active, FUTEX_WAKE, INT_MAX, NULL);
}

static void *worker_main(void *arg)
{
    struct wstate *ws = arg;
    struct ml_backend *b = ws->w.b;
    struct ml_q_header *h = b->h;
    const struct timespec ts = {0, 20000000};
    uint64_t idle = 0, spin0 = 0;
    int turn = !b->cap; /* holds a turn to read */
    uint32_t got;

    for (;;) {
        int dead = atomic_load(&b->dead);
        uint32_t v = atomic_load(&h->pub);
        if (atomic_load(&b->abandon))
            break;
        if (!turn && !dead && !(turn = turn_take(b, ws->w.index))) {
            uint32_t a = atomic_load(&b->active);
            atomic_fetch_add(&b->await, 1);
            if ((a >= b->cap || atomic_load(&b->want0)) && !atomic_load(&b->dead))
                ml_q_futex(&b->active, FUTEX_WAIT, a, &ts);
            atomic_fetch_sub(&b->await, 1);
            continue;
        }
        got = pass(ws);
        if (b->cap && turn && ws->blob_next) { /* this worker could not read on: worker 0's turn */
            atomic_store(&b->want0, 1);
            turn_give(b);
            turn = 0;
            got = 1;
        }
        if (got) {
            idle = 0;
            continue;
        }
        if (dead)
            break;
        if (!idle++)
            spin0 = ml_q_now_ns();
        if (idle % 16 || ml_q_now_ns() - spin0 < h->spin_ns) {
            ml_q_relax();
            continue;
        }
        atomic_fetch_add(&h->cwait, 1);
        if (atomic_load(&h->pub) == v && !atomic_load(&b->dead))
            ml_q_futex(&h->pub, FUTEX_WAIT, v, &ts);
        atomic_fetch_sub(&h->cwait, 1);
    }
    if (turn && b->cap)
        turn_give(b);
    if (!atomic_load(&b->abandon))
        tail(ws);
    return NULL;
}

/* Cores this process may run on. */
static uint32_t cores(void)
{
    cpu_set_t set;
    long n;

    if (!sched_getaffinity(0, sizeof(set), &set) && CPU_COUNT(&set) > 0)
        return (uint32_t)CPU_COUNT(&set);
    n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (uint32_t)n : 1;
}

/* ---- the backend ---- */

static int build_dispatch(struct ml_backend *b)
{
    for (unsigned kind = 1; kind <= 0xef; kind++)
        for (uint32_t m = 0; m < b->o.nmods; m++) {
            const struct ml_bhandler *hd = handler_of(b->mods[m], kind);
            struct disp *d = &b->disp[kind];
            if (!hd)
                continue;
            d->e[d->n++] = (struct disp_ent){.part = hd->part, .mod = (uint8_t)m, .fn = hd->fn};
        }
    b->deal = 1;
    for (uint32_t m = 0; m < b->o.nmods; m++) {
        if (b->mods[m]->chunk)
            b->chunk_mods[b->nchunk_mods++] = m;
        b->deal &= b->mods[m]->chunk && b->mods[m]->chunk_any;
    }
    return 0;
}

static int queue_create(struct ml_backend *b, char *err, size_t errlen)
{
    uint32_t chunk = b->o.chunk_size ? b->o.chunk_size : ML_Q_DEFAULT_CHUNK;
    uint32_t slots = b->o.max_threads ? b->o.max_threads : ML_Q_DEFAULT_SLOTS;
    struct ml_q_header *h;
    uint64_t token;
    int rc;

    if (chunk < ML_Q_MIN_CHUNK || chunk > ML_Q_MAX_CHUNK || chunk % 4096) {
        snprintf(err, errlen, "bad chunk size %u: expected 1 MiB to 1 GiB, a multiple of 4 KiB",
                 chunk);
        return -EINVAL;
    }
    if (slots > ML_Q_MAX_SLOTS) {
        snprintf(err, errlen, "bad thread limit %u: at most %u", slots, ML_Q_MAX_SLOTS);
        return -EINVAL;
    }
    b->size = ml_q_file_size(slots, chunk);
    b->fd = memfd_create("memlens-queue", MFD_CLOEXEC);
    if (b->fd < 0) {
        rc = -errno;
        snprintf(err, errlen, "cannot create the event queue: %s", strerror(errno));
        return rc;
    }
    if (ftruncate(b->fd, (off_t)b->size)) {
        rc = -errno;
        snprintf(err, errlen, "cannot size the event queue (%llu bytes): %s",
                 (unsigned long long)b->size, strerror(errno));
        return rc;
    }
    h = mmap(NULL, b->size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, b->fd, 0);
    if (h == MAP_FAILED) {
        rc = -errno;
        snprintf(err, errlen, "cannot map the event queue (%llu bytes): %s",
                 (unsigned long long)b->size, strerror(errno));
        return rc;
    }
    b->h = h;
    if (getrandom(&token, sizeof(token), 0) != (ssize_t)sizeof(token)) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        token = (uint64_t)t.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
    }
    h->magic = ML_Q_MAGIC;
    h->version = ML_Q_VERSION;
    h->chunk_size = chunk;
    h->token = token;
    h->size = b->size;
    h->data_off = ml_q_data_off(slots);
    h->max_slots = slots;
    h->consumers = b->deal ? 1 : b->o.workers;
    /* workers reading at once, and the program, each with a core: spin longer */
    h->spin_ns = (b->cap ? b->cap : b->o.workers) < cores() ? ML_Q_SPIN_NS : ML_Q_SPIN_FEW_NS;
    h->backend_pid = (int32_t)getpid();
    snprintf(b->env, sizeof(b->env), "%d:%llx", b->fd, (unsigned long long)token);
    return 0;
}

int ml_backend_new(struct ml_backend **out, const struct ml_backend_opts *o, char *err,
                   size_t errlen)
{
    struct ml_backend *b;
    int rc;

    *out = NULL;
    if (!o->nmods || o->nmods > MAX_MODS) {
        snprintf(err, errlen, "between 1 and %d modules, please", MAX_MODS);
        return -EINVAL;
    }
    if (!o->workers || o->workers > MAX_WORKERS) {
        snprintf(err, errlen, "bad number of workers %u: expected 1 to %d", o->workers,
                 MAX_WORKERS);
        return -EINVAL;
    }
    for (uint32_t i = 0; i < o->nmods; i++)
        if ((rc = ml_module_check(o->mods[i], err, errlen)))
            return rc;
    if (!(b = calloc(1, sizeof(*b))))
        goto nomem;
    b->o = *o;
    b->fd = -1;
    b->blobs_tail = &b->blobs;
    for (uint32_t i = 0; i < o->nmods; i++)
        b->mods[i] = o->mods[i];
    build_dispatch(b);
    if (!b->deal && !o->force_workers) { /* see ml_backend_opts.force_workers */
        uint32_t c = cores(), spare = c > 1 ? c - 1 : 1;
        if (b->o.workers > spare)
            b->o.workers = spare;
    }
    if (b->deal) { /* one core for the program, the others for readers (see turn_take) */
        uint32_t c = cores();
        b->cap = c > 1 ? c - 1 : 1;
        if (b->cap >= b->o.workers)
            b->cap = 0;
    }
    if ((rc = queue_create(b, err, errlen))) {
        ml_backend_free(b);
        return rc;
    }
    if (!(b->ws = calloc(b->o.workers, sizeof(*b->ws))) ||
        (b->deal && !(b->claims = calloc(b->h->max_slots, sizeof(*b->claims)))))
        goto nomem;
    for (uint32_t w = 0; w < b->o.workers; w++) {
        struct wstate *ws = &b->ws[w];
        ws->w.index = w;
        ws->w.n = b->o.workers;
        ws->w.whole = b->deal;
        ws->w.b = b;
        ws->next_seq = calloc(b->h->max_slots, sizeof(*ws->next_seq));
        ws->ready = calloc(2 * (size_t)b->h->max_slots, sizeof(*ws->ready));
        ws->w.ctx = ml_ctx_new();
        if (!ws->next_seq || !ws->ready || !ws->w.ctx)
            goto nomem;
        for (uint32_t m = 0; m < o->nmods; m++)
            if (!(ws->st[m] = b->mods[m]->init(&ws->w))) {
                snprintf(err, errlen, "cannot create the state of module '%s': %s",
                         b->mods[m]->name, strerror(ENOMEM));
                ml_backend_free(b);
                return -ENOMEM;
            }
    }
    *out = b;
    return 0;
nomem:
    snprintf(err, errlen, "cannot set up the backend: %s", strerror(ENOMEM));
    ml_backend_free(b);
    return -ENOMEM;
}

uint32_t ml_backend_workers(const struct ml_backend *b)
{
    return b->o.workers;
}

int ml_backend_fd(const struct ml_backend *b)
{
    return b->fd;
}

const char *ml_backend_env(const struct ml_backend *b)
{
    return b->env;
}

int ml_backend_start(struct ml_backend *b)
{
    clock_gettime(CLOCK_MONOTONIC, &b->t0);
    for (uint32_t w = 0; w < b->o.workers; w++) {
        int rc = pthread_create(&b->ws[w].th, NULL, worker_main, &b->ws[w]);
        if (rc) {
            ml_backend_abandon(b);
            return -rc;
        }
        b->ws[w].started = 1;
    }
    return 0;
}

int ml_backend_attached(const struct ml_backend *b)
{
    return atomic_load(&b->h->attached_pid);
}

int ml_backend_exited(const struct ml_backend *b)
{
    return (int)atomic_load(&b->h->exited);
}

void ml_backend_beat(struct ml_backend *b)
{
    atomic_fetch_add(&b->h->heartbeat, 1);
}

static void join_all(struct ml_backend *b)
{
    ml_q_futex(&b->h->pub, FUTEX_WAKE, INT_MAX, NULL);
    ml_q_futex(&b->active, FUTEX_WAKE, INT_MAX, NULL);
    for (uint32_t w = 0; w < b->o.workers; w++)
        if (b->ws[w].started) {
            pthread_join(b->ws[w].th, NULL);
            b->ws[w].started = 0;
        }
}

void ml_backend_stop(struct ml_backend *b, struct ml_brun *run)
{
    struct ml_q_header *h = b->h;

    atomic_store(&b->dead, 1);
    join_all(b);
    b->seconds = since(&b->t0);
    run->events = run->bytes = run->chunks = run->corrupt_chunks = 0;
    /* every worker reads every chunk (worker 0's figures are the run's), or each one some */
    for (uint32_t w = 0; w < (b->deal ? b->o.workers : 1); w++) {
        run->events += b->ws[w].events;
        run->bytes += b->ws[w].bytes;
        run->chunks += b->ws[w].chunks;
    }
    for (uint32_t w = 0; w < b->o.workers; w++)
        if (b->deal)
            run->corrupt_chunks += b->ws[w].corrupt;
        else if (b->ws[w].corrupt > run->corrupt_chunks)
            run->corrupt_chunks = b->ws[w].corrupt;
    run->lost_events = atomic_load(&h->lost_events) + b->ws[0].blob_lost;
    run->lost_threads = atomic_load(&h->lost_threads);
    run->threads = atomic_load(&h->threads);
    run->forks = atomic_load(&h->forks);
    run->workers = b->o.workers;
    run->seconds = b->seconds;
    run->wait_seconds = (double)atomic_load(&h->wait_ns) / 1e9;
    for (uint32_t w = 0; w < b->o.workers; w++)
        if ((double)b->ws[w].busy_ns / 1e9 > run->busy_seconds)
            run->busy_seconds = (double)b->ws[w].busy_ns / 1e9;
    if (atomic_load(&h->detached) && !run->why[0])
        snprintf(run->why, sizeof(run->why), "the program stopped sending events");
}

void ml_backend_abandon(struct ml_backend *b)
{
    atomic_store(&b->h->closing, 1);
    atomic_store(&b->abandon, 1);
    join_all(b);
}

void *ml_backend_merged(struct ml_backend *b, uint32_t i, int *err)
{
    *err = 0;
    for (uint32_t w = 1; w < b->o.workers; w++) {
        if (!b->ws[w].st[i])
            continue;
        *err = b->mods[i]->merge(b->ws[0].st[i], b->ws[w].st[i]);
        b->ws[w].st[i] = NULL;
        if (*err)
            return NULL;
    }
    return b->ws[0].st[i];
}

const struct ml_bblob *ml_backend_blobs(const struct ml_backend *b)
{
    return b->blobs;
}

void ml_backend_free(struct ml_backend *b)
{
    if (!b)
        return;
    if (b->ws) {
        if (b->h)
            ml_backend_abandon(b);
        for (uint32_t w = 0; w < b->o.workers; w++) {
            struct wstate *ws = &b->ws[w];
            for (uint32_t m = 0; m < b->o.nmods; m++)
                if (ws->st[m]) {
                    if (b->mods[m]->fini)
                        b->mods[m]->fini(ws->st[m]);
                    else
                        free(ws->st[m]);
                }
            for (uint32_t t = 0; t < ws->w.nstacks; t++)
                ml_cstack_free(ws->w.stacks[t]);
            free(ws->w.stacks);
            ml_ctx_free(ws->w.ctx);
            for (uint32_t t = 0; t < ws->npb; t++)
                free(ws->pb[t].buf);
            free(ws->pb);
            free(ws->next_seq);
            free(ws->ready);
        }
        free(b->ws);
    }
    free(b->claims);
    while (b->blobs) {
        struct ml_bblob *n = b->blobs->next;
        free(b->blobs);
        b->blobs = n;
    }
    if (b->h)
        munmap(b->h, b->size);
    if (b->fd >= 0)
        close(b->fd);
    free(b);
}
