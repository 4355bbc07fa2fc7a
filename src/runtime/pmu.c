/* Hardware counters per thread (perf_event_open), read around measured region executions. */
#include "runtime/pmu.h"
#include "runtime/rt.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

/*
 * Events are opened per thread (pid 0, any CPU), each on its own so that the
 * kernel multiplexes them independently, with enabled and running times in
 * every reading for scaling. A reading uses the mmap page's rdpmc fast path
 * when the kernel offers it (cap_user_rdpmc and a hardware counter index),
 * else read(2). Software events never have an index: they always use read(2).
 */
static struct ml_pmu_event events[ML_MAX_EVENTS];
static uint32_t nevents;

struct reading {
    uint64_t value, enabled, running;
};

struct ml_pmu_thread {
    int fd[ML_MAX_EVENTS];
    struct perf_event_mmap_page *page[ML_MAX_EVENTS];
    int ok;    /* every event open */
    int fresh; /* a reused record: open the events on the next measured execution */
    struct reading begin[ML_RT_MAX_REGIONS][ML_MAX_EVENTS];
    uint64_t sum[ML_RT_MAX_REGIONS * ML_MAX_EVENTS];
};

static int open_event(const struct ml_pmu_event *ev)
{
    struct perf_event_attr a;
    int fd;

    memset(&a, 0, sizeof(a));
    a.size = sizeof(a);
    a.type = ev->type;
    a.config = ev->config;
    a.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
    a.exclude_hv = 1;
    fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0 && (errno == EACCES || errno == EPERM)) {
        /* perf_event_paranoid forbids kernel counting: count user space only, like perf's :u. */
        a.exclude_kernel = 1;
        fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
    }
    return fd;
}

/* Opens every event for the calling thread; on failure closes them and returns -errno. */
static int open_all(struct ml_pmu_thread *p, uint32_t *failed)
{
    long pg = sysconf(_SC_PAGESIZE);

    for (uint32_t i = 0; i < nevents; i++) {
        p->fd[i] = open_event(&events[i]);
        if (p->fd[i] < 0) {
            int err = -errno;
            *failed = i;
            while (i--) {
                if (p->page[i])
                    munmap(p->page[i], (size_t)pg);
                close(p->fd[i]);
                p->page[i] = NULL;
            }
            return err;
        }
        p->page[i] = mmap(NULL, (size_t)pg, PROT_READ, MAP_SHARED, p->fd[i], 0);
        if (p->page[i] == MAP_FAILED)
            p->page[i] = NULL; /* read(2) still works */
    }
    p->ok = 1;
    return 0;
}

void ml_pmu_init(void)
{
    const char *env = getenv("MEMLENS_EVENTS");
    struct ml_pmu_thread *probe;
    char bad[ML_EVENT_NAME + 8];
    uint32_t failed = 0;
    int n, rc;

    if (!env || !*env)
        return;
    n = ml_pmu_parse(env, events, ML_MAX_EVENTS, bad, sizeof(bad));
    if (n < 0) {
        const char *msg[] = {"memlens: ignoring MEMLENS_EVENTS='",
                             env,
                             "': ",
                             n == -2 ? "more than 8 events, from '" : "unknown event '",
                             bad,
                             "' (use perf names such as cycles,instructions,L1-dcache-load-misses "
                             "or rNNNN)"};
        ml_rt_say(msg, sizeof(msg) / sizeof(msg[0]));
        return;
    }
    nevents = (uint32_t)n;
    probe = calloc(1, sizeof(*probe));
    if (!probe) {
        nevents = 0;
        return;
    }
    rc = open_all(probe, &failed);
    if (rc) {
        const char *msg[] = {"memlens: hardware counters unavailable (perf_event_open '",
                             events[failed].name, "': ", strerror(-rc),
                             "): profiling without MEMLENS_EVENTS"};
        ml_rt_say(msg, sizeof(msg) / sizeof(msg[0]));
        nevents = 0;
    } else {
        for (uint32_t i = 0; i < nevents; i++) {
            if (probe->page[i])
                munmap(probe->page[i], (size_t)sysconf(_SC_PAGESIZE));
            close(probe->fd[i]);
        }
    }
    free(probe);
}

uint32_t ml_pmu_nevents(void)
{
    return nevents;
}

const char *ml_pmu_name(uint32_t i)
{
    return i < nevents ? events[i].name : "";
}

#if defined(__x86_64__)
static inline uint64_t rdpmc(uint32_t counter)
{
    uint32_t lo, hi;

    __asm__ volatile("rdpmc" : "=a"(lo), "=d"(hi) : "c"(counter));
    return (uint64_t)hi << 32 | lo;
}

static inline uint64_t rdtsc(void)
{
    uint32_t lo, hi;

    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
    return (uint64_t)hi << 32 | lo;
}
#endif

/*
 * The mmap page's seqlock protocol: read index, offset and times, then the
 * counter, and retry if the kernel updated the page meanwhile. Returns 0 when
 * the counter cannot be read from user space (not scheduled, no rdpmc).
 */
static int read_mmap(const volatile struct perf_event_mmap_page *pg, struct reading *r)
{
#if defined(__x86_64__)
    uint32_t seq, idx;

    do {
        seq = pg->lock;
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        idx = pg->index;
        if (!pg->cap_user_rdpmc || !idx)
            return 0;
        r->enabled = pg->time_enabled;
        r->running = pg->time_running;
        if (pg->cap_user_time) {
            uint64_t d = ml_pmu_time_delta(rdtsc(), pg->time_shift, pg->time_mult, pg->time_offset);
            r->enabled += d;
            r->running += d; /* idx != 0: the counter is running now */
        }
        r->value = (uint64_t)((int64_t)pg->offset + ml_pmu_sext(rdpmc(idx - 1), pg->pmc_width));
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
    } while (pg->lock != seq);
    return 1;
#else
    (void)pg;
    (void)r;
    return 0;
#endif
}

static void read_all(struct ml_pmu_thread *p, struct reading *out)
{
    for (uint32_t i = 0; i < nevents; i++) {
        uint64_t v[3];
        if (p->page[i] && read_mmap(p->page[i], &out[i]))
            continue;
        if (read(p->fd[i], v, sizeof(v)) == (ssize_t)sizeof(v)) {
            out[i].value = v[0];
            out[i].enabled = v[1];
            out[i].running = v[2];
        } else {
            memset(&out[i], 0, sizeof(out[i]));
        }
    }
}

/* The thread's counters, opened on its first measured execution; NULL if they cannot be. */
static struct ml_pmu_thread *thread_pmu(struct ml_thread_rec *t)
{
    uint32_t failed;

    if (t->pmu && !t->pmu->fresh)
        return t->pmu->ok ? t->pmu : NULL;
    if (!t->pmu && !(t->pmu = calloc(1, sizeof(*t->pmu))))
        return NULL;
    t->pmu->fresh = 0;
    /* A thread that cannot open them (descriptor limit) contributes no sums. */
    return open_all(t->pmu, &failed) ? NULL : t->pmu;
}

void ml_pmu_begin(struct ml_thread_rec *t, uint32_t g)
{
    struct ml_pmu_thread *p;

    if (!nevents || g >= ML_RT_MAX_REGIONS || !(p = thread_pmu(t)))
        return;
    read_all(p, p->begin[g]);
}

void ml_pmu_end(struct ml_thread_rec *t, uint32_t g)
{
    struct ml_pmu_thread *p = t->pmu;
    struct reading now[ML_MAX_EVENTS];

    if (!nevents || g >= ML_RT_MAX_REGIONS || !p || !p->ok)
        return;
    read_all(p, now);
    for (uint32_t i = 0; i < nevents; i++) {
        const struct reading *b = &p->begin[g][i];
        if (now[i].value < b->value || now[i].enabled < b->enabled || now[i].running < b->running)
            continue; /* a failed read: drop this execution's delta rather than wrap */
        p->sum[g * ML_MAX_EVENTS + i] += ml_pmu_scale(
            now[i].value - b->value, now[i].enabled - b->enabled, now[i].running - b->running);
    }
}

const uint64_t *ml_pmu_sums(const struct ml_thread_rec *t)
{
    return t->pmu ? t->pmu->sum : NULL;
}

static void close_all(struct ml_pmu_thread *p)
{
    long pg = sysconf(_SC_PAGESIZE);

    if (!p->ok)
        return;
    for (uint32_t i = 0; i < nevents; i++) {
        if (p->page[i])
            munmap(p->page[i], (size_t)pg);
        close(p->fd[i]);
        p->page[i] = NULL;
    }
    p->ok = 0;
}

void ml_pmu_thread_exit(struct ml_thread_rec *t)
{
    if (t->pmu)
        close_all(t->pmu);
}

int ml_pmu_fold(struct ml_thread_rec *dst, const struct ml_thread_rec *src)
{
    if (!src->pmu)
        return 0;
    if (!dst->pmu && !(dst->pmu = calloc(1, sizeof(*dst->pmu))))
        return -ENOMEM;
    for (size_t i = 0; i < (size_t)ml_rt.nregions * ML_MAX_EVENTS; i++)
        dst->pmu->sum[i] += src->pmu->sum[i];
    return 0;
}

void ml_pmu_reuse(struct ml_thread_rec *t)
{
    if (!t->pmu)
        return;
    close_all(t->pmu);
    memset(t->pmu->sum, 0, (size_t)ml_rt.nregions * ML_MAX_EVENTS * sizeof(uint64_t));
    t->pmu->fresh = 1;
}

void ml_pmu_after_fork(struct ml_thread_rec *t)
{
    if (!t->pmu)
        return;
    close_all(t->pmu);
    /* Reopened for the child's own thread on its next measured execution, with fresh sums. */
    free(t->pmu);
    t->pmu = NULL;
}
