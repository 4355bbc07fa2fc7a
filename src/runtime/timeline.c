/* Timelines (MEMLENS_INTERVAL): a sampler thread snapshots per thread and region figures. */
#include "runtime/rt.h"
#include "runtime/clock.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/*
 * Snapshots live in one anonymous mapping of tl.cap bytes (TL_CAP, or
 * MEMLENS_TIMELINE_MAX) reserved at start (MAP_NORESERVE: only the pages
 * written cost memory), laid out exactly as
 * the TIMELINE payload after its header. When the next snapshot does not
 * fit, every other snapshot is dropped and the interval doubles, so a long
 * run keeps its whole span at a coarser resolution within a fixed budget.
 * Values are cumulative, so dropping a snapshot loses resolution, not bytes.
 */
#define TL_CAP     (32ull << 20)
#define TL_CAP_MIN 4096ull
#define TL_CAP_MAX (1ull << 40)
#define TL_MIN_NS  1000000ull       /* 1 ms */
#define TL_MAX_NS  3600000000000ull /* 1 h */

static struct {
    uint64_t requested_ns, interval_ns;
    unsigned char *buf; /* [cap] */
    size_t cap;
    size_t len;     /* published bytes: whole snapshots only (release/acquire) */
    uint32_t flags; /* ML_TL_F_* */
    int busy;       /* compacting: a writer that could not take the lock skips buf */
    int on;
} tl;

/* Per-region sums of one thread; used under ml_rt.lock (or by the exclusive writer) only. */
static uint64_t acc_rd[ML_RT_MAX_REGIONS], acc_wr[ML_RT_MAX_REGIONS], acc_instr[ML_RT_MAX_REGIONS];
static unsigned char acc_seen[ML_RT_MAX_REGIONS];

static void say(const char *a, const char *b, const char *c)
{
    char msg[512];
    size_t n = 0;
    const char *parts[] = {"memlens: ", a, b, c, "\n"};

    for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
        for (const char *s = parts[i]; *s && n < sizeof(msg); s++)
            msg[n++] = *s;
    if (write(2, msg, n) < 0)
        return;
}

/* "100ms", "250us", "2s", "5000000ns": 0 and *ns set, or -1 when malformed or out of range. */
static int parse_interval(const char *s, uint64_t *ns)
{
    static const struct {
        const char *suffix;
        uint64_t mult;
    } units[] = {{"ns", 1}, {"us", 1000}, {"ms", 1000000}, {"s", 1000000000}};
    uint64_t v = 0;
    const char *p = s;

    if (*p < '0' || *p > '9')
        return -1;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (v > (TL_MAX_NS - 9) / 10)
            return -1;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcmp(p, units[i].suffix))
            continue;
        if (v > TL_MAX_NS / units[i].mult)
            return -1;
        v *= units[i].mult;
        if (v < TL_MIN_NS)
            return -1;
        *ns = v;
        return 0;
    }
    return -1;
}

static uint64_t load64(const uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}

/* Executions run inline per region of the thread being sampled (ml_rt_fast_pending). */
static uint64_t tl_pending[ML_RT_MAX_REGIONS];

/* Sums counts x facts of thread t into acc_* per global region id. */
static void thread_sums(const struct ml_thread_rec *t)
{
    const struct ml_rt_module *m;
    uint32_t off = 0, mi = 0;
    int done = __atomic_load_n(&t->done, __ATOMIC_ACQUIRE);

    memset(acc_rd, 0, ml_rt.nregions * sizeof(acc_rd[0]));
    memset(acc_wr, 0, ml_rt.nregions * sizeof(acc_wr[0]));
    memset(acc_instr, 0, ml_rt.nregions * sizeof(acc_instr[0]));
    memset(acc_seen, 0, ml_rt.nregions);
    for (m = ml_rt.mods; m; m = m->next, mi++) {
        const uint64_t *cnt = NULL;

        if (done && t->snap && off + m->nunits <= t->snap_units)
            cnt = t->snap + off;
        else if (!done && mi < t->nmods)
            cnt = t->tls[mi];
        off += m->nunits;
        if (!cnt || !m->units || !m->regsets) /* no facts: an unloaded module out of memory */
            continue;
        for (uint32_t u = 0; u < m->nunits; u++) {
            uint64_t c = load64(&cnt[u]);
            const struct ml_rt_unit *un = &m->units[u];
            const uint64_t *f = un->facts;
            uint64_t rd, wr;
            uint32_t n;

            if (!c || un->regset >= m->nregset_words)
                continue;
            rd = c * (f[ML_F_RD_HEAP] + f[ML_F_RD_GLOBAL] + f[ML_F_RD_STACK]);
            wr = c * (f[ML_F_WR_HEAP] + f[ML_F_WR_GLOBAL] + f[ML_F_WR_STACK]);
            n = m->regsets[un->regset];
            for (uint32_t k = 1; k <= n && un->regset + k < m->nregset_words; k++) {
                uint32_t g = m->region_ids[m->regsets[un->regset + k]];
                if (g >= ml_rt.nregions)
                    continue;
                acc_rd[g] += rd;
                acc_wr[g] += wr;
                acc_instr[g] += c * f[ML_F_INSTR];
                acc_seen[g] = 1;
            }
        }
    }
}

/*
 * Executions and ticks of region g on t at tick now, an open execution
 * included. The owner thread updates them without a lock; reading the closed
 * figures on both sides of depth and start and retrying on a change keeps a
 * closing execution from being counted twice.
 */
static void region_figures(const struct ml_thread_rec *t, const struct ml_rstate *rs, uint32_t g,
                           uint64_t now, struct ml_prof_tl_point *pt)
{
    const struct ml_rstate *s = &rs[g];
    uint64_t e, k, start, meas, timed;
    uint32_t depth, on, fastopen, untimed;
    int tries = 0;

    do {
        e = load64(&s->entries);
        k = load64(&s->ticks);
        meas = load64(&s->measured);
        timed = load64(&s->timed);
        depth = __atomic_load_n(&s->depth, __ATOMIC_RELAXED);
        on = __atomic_load_n(&s->on, __ATOMIC_RELAXED);
        fastopen = __atomic_load_n(&s->fastopen, __ATOMIC_RELAXED);
        untimed = __atomic_load_n(&s->untimed, __ATOMIC_RELAXED);
        start = load64(&s->start);
    } while ((e != load64(&s->entries) || k != load64(&s->ticks)) && ++tries < 4);
    if (depth && !t->done && !fastopen) {
        e++;
        /* Ticks are those of timed executions; an unmeasured one never read the clock. */
        meas += on;
        if (on && !untimed && now > start) {
            k += now - start;
            timed++;
        }
    }
    /* Executions the inline path ran since the runtime last saw the region (docs/regions.md). */
    e += tl_pending[g];
    if (ml_rt.fastres)
        meas += tl_pending[g];
    pt->entries = e;
    pt->ticks = ml_rt_scale_ticks(k, meas, timed);
}

/* Appends one snapshot at tick now after the published bytes; publishes it, or -ENOSPC. */
static int snapshot(uint64_t now)
{
    struct ml_prof_tl_snap sh = {.tick = now - ml_rt.tick0, .npoints = 0};
    size_t base = tl.len, pos = base + sizeof(sh);
    const struct ml_thread_rec *t;

    if (pos > tl.cap)
        return -ENOSPC;
    for (t = ml_rt.threads; t; t = t->next) {
        const struct ml_rstate *rs = __atomic_load_n(&t->rs, __ATOMIC_ACQUIRE);

        thread_sums(t);
        ml_rt_fast_pending(t, tl_pending);
        for (uint32_t g = 0; g < ml_rt.nregions; g++) {
            struct ml_prof_tl_point pt = {.thread = t->index, .region = g};

            if (rs)
                region_figures(t, rs, g, now, &pt);
            if (!pt.entries && !acc_seen[g])
                continue;
            if (tl.cap - pos < sizeof(pt))
                return -ENOSPC;
            pt.bytes_read = acc_rd[g];
            pt.bytes_written = acc_wr[g];
            pt.instructions = acc_instr[g];
            memcpy(tl.buf + pos, &pt, sizeof(pt));
            pos += sizeof(pt);
            sh.npoints++;
        }
    }
    memcpy(tl.buf + base, &sh, sizeof(sh));
    __atomic_store_n(&tl.len, pos, __ATOMIC_RELEASE);
    return 0;
}

static uint64_t count_snaps(size_t len)
{
    uint64_t n = 0;

    for (size_t pos = 0; pos < len; n++) {
        struct ml_prof_tl_snap sh;
        memcpy(&sh, tl.buf + pos, sizeof(sh));
        pos += sizeof(sh) + sh.npoints * sizeof(struct ml_prof_tl_point);
    }
    return n;
}

/*
 * Drops every other snapshot. The sampler must not compact while a writer
 * that could not take the lock (a signal arrived during a snapshot) copies
 * buf: it announces busy, then checks written; the writer sets written, then
 * checks busy. With sequentially consistent accesses one of them sees the other.
 */
static int halve(int from_writer)
{
    uint64_t n;

    __atomic_store_n(&tl.busy, 1, __ATOMIC_SEQ_CST);
    if (!from_writer && __atomic_load_n(&ml_rt.written, __ATOMIC_SEQ_CST)) {
        __atomic_store_n(&tl.busy, 0, __ATOMIC_SEQ_CST);
        return -1;
    }
    n = count_snaps(tl.len);
    if (n < 2) {
        __atomic_store_n(&tl.busy, 0, __ATOMIC_SEQ_CST);
        return -1;
    }
    __atomic_store_n(&tl.len, ml_tl_halve(tl.buf, tl.len, &n), __ATOMIC_RELEASE);
    tl.interval_ns *= 2;
    __atomic_store_n(&tl.busy, 0, __ATOMIC_SEQ_CST);
    return 0;
}

/* Takes a snapshot, halving the resolution when full; 0 = sampling goes on. */
static int sample(uint64_t now, int from_writer)
{
    if (tl.flags & ML_TL_F_STOPPED)
        return -1;
    if (snapshot(now) == 0)
        return 0;
    if (halve(from_writer) == 0 && snapshot(now) == 0)
        return 0;
    tl.flags |= ML_TL_F_STOPPED;
    return -1;
}

static void *sampler(void *arg)
{
    struct timespec next;
    int go = 1;

    (void)arg;
    clock_gettime(CLOCK_MONOTONIC, &next);
    while (go) {
        struct timespec now;
        uint64_t ns = (uint64_t)next.tv_nsec + tl.interval_ns;

        next.tv_sec += (time_t)(ns / 1000000000ull);
        next.tv_nsec = (long)(ns % 1000000000ull);
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR)
            ;
        /* A sampler that fell behind (a loaded machine) resumes from now, not in a burst. */
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec > next.tv_sec || (now.tv_sec == next.tv_sec && now.tv_nsec > next.tv_nsec))
            next = now;
        pthread_mutex_lock(&ml_rt.lock);
        go = !ml_rt.written && sample(ml_rt_ticks(), 0) == 0;
        pthread_mutex_unlock(&ml_rt.lock);
    }
    return NULL;
}

/* Created with the C library's pthread_create, so it gets no thread record of its own. */
static void start_sampler(void)
{
    ml_pthread_create_fn create = ml_rt_real_pthread_create();
    pthread_attr_t attr;
    sigset_t all, old;
    pthread_t th;

    if (!create || pthread_attr_init(&attr)) {
        tl.on = 0;
        return;
    }
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 256 << 10);
    /* Signals stay with the program's threads: the sampler blocks them all from birth. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    if (create(&th, &attr, sampler, NULL)) {
        tl.on = 0;
        say("cannot start the timeline sampler thread", "", "; timelines are off");
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
}

/* The child of fork() starts an empty timeline of its own, like its profile. */
static void after_fork_child(void)
{
    tl.len = 0;
    tl.busy = 0;
    tl.flags = 0;
    tl.interval_ns = tl.requested_ns;
    start_sampler();
}

/* A byte count in [TL_CAP_MIN, TL_CAP_MAX]: 0 and *v set, or -1. */
static int parse_bytes(const char *s, uint64_t *v)
{
    uint64_t x = 0;

    if (*s < '0' || *s > '9')
        return -1;
    for (; *s >= '0' && *s <= '9'; s++) {
        if (x > TL_CAP_MAX)
            return -1;
        x = x * 10 + (uint64_t)(*s - '0');
    }
    if (*s || x < TL_CAP_MIN || x > TL_CAP_MAX)
        return -1;
    *v = x;
    return 0;
}

void ml_rt_timeline_start(void)
{
    const char *s = getenv("MEMLENS_INTERVAL"), *m = getenv("MEMLENS_TIMELINE_MAX");
    uint64_t cap = TL_CAP;
    void *buf;

    if (!s || !*s)
        return;
    if (parse_interval(s, &tl.requested_ns)) {
        say("ignoring MEMLENS_INTERVAL='", s,
            "': expected a duration from 1ms to 1h such as 100ms (units ns, us, ms, s)");
        return;
    }
    if (m && *m && parse_bytes(m, &cap)) {
        say("ignoring MEMLENS_TIMELINE_MAX='", m,
            "': expected a byte count from 4096 to 2^40; using 32 MiB");
        cap = TL_CAP;
    }
    buf =
        mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (buf == MAP_FAILED) {
        say("cannot reserve memory for timelines", "", "; timelines are off");
        return;
    }
    tl.buf = buf;
    tl.cap = cap;
    tl.interval_ns = tl.requested_ns;
    tl.on = 1;
    pthread_atfork(NULL, NULL, after_fork_child);
    start_sampler();
}

/* The exited-threads record's points of one snapshot, by region (see merge_snap). */
static struct ml_prof_tl_point ex_pts[ML_RT_MAX_REGIONS];
static unsigned char ex_seen[ML_RT_MAX_REGIONS];

/* Whether thread index th keeps a record of its own; *rec walks the list, sorted by index. */
static int has_record(const struct ml_thread_rec **rec, uint32_t th)
{
    while (*rec && (*rec)->index < th)
        *rec = (*rec)->next;
    return *rec && (*rec)->index == th && *rec != ml_rt.acc;
}

static void add_point(struct ml_prof_tl_point *d, const struct ml_prof_tl_point *s)
{
    d->entries += s->entries;
    d->ticks += s->ticks;
    d->bytes_read += s->bytes_read;
    d->bytes_written += s->bytes_written;
    d->instructions += s->instructions;
}

/*
 * Threads folded into the exited-threads record (index ex) have no record
 * any more: their points in a snapshot (np points at p, sorted by thread and
 * region) count towards that record's, which merge_count sums into ex_pts.
 * Returns the number of points of the snapshot then.
 */
static uint64_t merge_count(const unsigned char *p, uint64_t np, uint32_t ex)
{
    const struct ml_thread_rec *rec = ml_rt.threads;
    struct ml_prof_tl_point pt;
    uint64_t n = 0;

    memset(ex_seen, 0, sizeof(ex_seen));
    for (uint64_t k = 0; k < np; k++) {
        memcpy(&pt, p + k * sizeof(pt), sizeof(pt));
        if (has_record(&rec, pt.thread)) {
            n++;
        } else if (pt.region < ML_RT_MAX_REGIONS) {
            if (!ex_seen[pt.region]) {
                ex_seen[pt.region] = 1;
                memset(&ex_pts[pt.region], 0, sizeof(pt));
                ex_pts[pt.region].thread = ex;
                ex_pts[pt.region].region = pt.region;
                n++;
            }
            add_point(&ex_pts[pt.region], &pt);
        }
    }
    return n;
}

/* Writes the snapshot merge_count just summed, still sorted by thread and region. */
static void merge_emit(struct ml_pw *w, const unsigned char *p, uint64_t np, uint32_t ex)
{
    const struct ml_thread_rec *rec = ml_rt.threads;
    struct ml_prof_tl_point pt;
    int ex_done = 0;

    for (uint64_t k = 0; k <= np; k++) {
        if (k < np) {
            memcpy(&pt, p + k * sizeof(pt), sizeof(pt));
            if (!has_record(&rec, pt.thread))
                continue;
        }
        if (!ex_done && (k == np || pt.thread > ex)) {
            for (uint32_t g = 0; g < ML_RT_MAX_REGIONS; g++)
                if (ex_seen[g])
                    ml_pw_bytes(w, &ex_pts[g], sizeof(pt));
            ex_done = 1;
        }
        if (k < np)
            ml_pw_bytes(w, &pt, sizeof(pt));
    }
}

/* Writes the snapshots in tl.buf[0..len) merged (w NULL: only sizes them); returns their bytes. */
static uint64_t write_merged(struct ml_pw *w, size_t len, uint32_t ex)
{
    uint64_t bytes = 0;

    for (size_t pos = 0; pos < len;) {
        struct ml_prof_tl_snap sh;
        uint64_t np;

        memcpy(&sh, tl.buf + pos, sizeof(sh));
        pos += sizeof(sh);
        np = sh.npoints;
        sh.npoints = merge_count(tl.buf + pos, np, ex);
        bytes += sizeof(sh) + sh.npoints * sizeof(struct ml_prof_tl_point);
        if (w) {
            ml_pw_bytes(w, &sh, sizeof(sh));
            merge_emit(w, tl.buf + pos, np, ex);
        }
        pos += np * sizeof(struct ml_prof_tl_point);
    }
    return bytes;
}

void ml_rt_timeline_write(struct ml_pw *w, int exclusive, uint64_t now)
{
    struct ml_prof_timeline h;
    size_t len;

    if (!tl.on)
        return;
    if (exclusive)
        sample(now, 1); /* the state at exit: the last snapshot matches the THREAD records */
    else if (__atomic_load_n(&tl.busy, __ATOMIC_SEQ_CST))
        return;
    len = __atomic_load_n(&tl.len, __ATOMIC_ACQUIRE);
    memset(&h, 0, sizeof(h));
    h.interval_ns = tl.interval_ns;
    h.requested_ns = tl.requested_ns;
    h.nsnaps = count_snaps(len);
    h.flags = tl.flags;
    if (!ml_rt.acc) {
        ml_pw_section(w, ML_SEC_TIMELINE, sizeof(h) + len);
        ml_pw_bytes(w, &h, sizeof(h));
        ml_pw_bytes(w, tl.buf, len);
        return;
    }
    ml_pw_section(w, ML_SEC_TIMELINE, sizeof(h) + write_merged(NULL, len, ml_rt.acc->index));
    ml_pw_bytes(w, &h, sizeof(h));
    write_merged(w, len, ml_rt.acc->index);
}
