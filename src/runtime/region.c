/* Runtime linked into profiled programs: module registry, region timing, threads, exit paths. */
#include "runtime/rt.h"
#include "runtime/clock.h"

#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define ML_EXPORT __attribute__((visibility("default")))

struct ml_rt ml_rt = {.lock = PTHREAD_MUTEX_INITIALIZER};

static __thread struct ml_thread_rec *self __attribute__((tls_model("initial-exec")));
static pthread_key_t exit_key;

static const int fatal_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGSEGV,
                                    SIGBUS, SIGFPE,  SIGILL, SIGABRT};

static uint32_t gettid_u32(void)
{
    return (uint32_t)syscall(SYS_gettid);
}

static uint64_t real_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Records this thread's counter arrays of every registered module; caller holds the lock. */
static void capture_tls(struct ml_thread_rec *t)
{
    struct ml_rt_module *m = ml_rt.mods;

    if (t->cap < ml_rt.nmods) {
        uint32_t cap = ml_rt.nmods * 2;
        uint64_t **tls = realloc(t->tls, cap * sizeof(*tls));
        if (!tls)
            return; /* keep what we have; the missing modules read as zero */
        t->tls = tls;
        t->cap = cap;
    }
    for (uint32_t i = 0; m; m = m->next, i++)
        if (i >= t->nmods)
            t->tls[i] = m->tls();
    t->nmods = ml_rt.nmods;
}

/* Creates the calling thread's record; caller holds the lock. */
static struct ml_thread_rec *thread_new_locked(void)
{
    struct ml_thread_rec *t = calloc(1, sizeof(*t));

    if (!t)
        return NULL;
    t->tid = gettid_u32();
    t->index = ml_rt.nthreads++;
    capture_tls(t);
    *ml_rt.threads_tail = t;
    ml_rt.threads_tail = &t->next;
    self = t;
    /* The key's destructor flushes the thread at exit; it needs a non-NULL value. */
    pthread_setspecific(exit_key, t);
    return t;
}

struct ml_thread_rec *ml_rt_self(void)
{
    struct ml_thread_rec *t = self;

    if (t)
        return t;
    pthread_mutex_lock(&ml_rt.lock);
    t = thread_new_locked();
    pthread_mutex_unlock(&ml_rt.lock);
    return t;
}

/* Closes open regions at tick `now` and snapshots the counters; runs on the exiting thread. */
static void thread_exit(void *arg)
{
    struct ml_thread_rec *t = arg;
    uint64_t now = ml_rt_ticks();
    uint64_t *snap;
    struct ml_rt_module *m;
    uint32_t off = 0, i = 0;

    pthread_mutex_lock(&ml_rt.lock);
    capture_tls(t);
    snap = calloc(ml_rt.nunits ? ml_rt.nunits : 1, sizeof(*snap));
    if (snap) {
        for (m = ml_rt.mods; m; m = m->next, i++) {
            if (i < t->nmods)
                memcpy(snap + off, t->tls[i], m->nunits * sizeof(*snap));
            off += m->nunits;
        }
        t->snap = snap;
        t->snap_units = off;
    }
    if (t->rs)
        for (i = 0; i < ML_RT_MAX_REGIONS; i++)
            if (t->rs[i].depth) {
                t->rs[i].ticks += now - t->rs[i].start;
                t->rs[i].entries++;
                t->rs[i].depth = 0;
            }
    t->open = t->measured_open = 0;
    t->done = 1;
    pthread_mutex_unlock(&ml_rt.lock);
    self = NULL;
}

static void on_exit_write(void)
{
    ml_rt_write_profile(0);
}

static void on_signal(int sig)
{
    ml_rt_write_profile(1);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void before_fork(void)
{
    pthread_mutex_lock(&ml_rt.lock);
}

static void after_fork_parent(void)
{
    pthread_mutex_unlock(&ml_rt.lock);
}

/* The child profiles only what it does after fork(): it keeps its open regions, not counts. */
static void after_fork_child(void)
{
    struct ml_thread_rec *t = self;
    struct ml_rt_module *m = ml_rt.mods;
    uint64_t now = ml_rt_ticks();

    pthread_mutex_init(&ml_rt.lock, NULL);
    ml_rt.threads = NULL;
    ml_rt.threads_tail = &ml_rt.threads;
    ml_rt.nthreads = 0;
    ml_rt.written = 0;
    ml_rt.tick0 = now;
    ml_rt.mono0 = ml_rt_mono_ns();
    ml_rt.real0 = real_ns();
    if (!t)
        return;
    for (uint32_t i = 0; m && i < t->nmods; m = m->next, i++)
        memset(t->tls[i], 0, m->nunits * sizeof(uint64_t));
    if (t->rs)
        for (uint32_t i = 0; i < ML_RT_MAX_REGIONS; i++) {
            t->rs[i].entries = t->rs[i].ticks = 0;
            t->rs[i].start = now;
        }
    t->tid = gettid_u32();
    t->index = ml_rt.nthreads++;
    t->next = NULL;
    *ml_rt.threads_tail = t;
    ml_rt.threads_tail = &t->next;
}

/* Only signals still at their default action get a handler: the program's own win. */
static void install_signal_handlers(void)
{
    for (size_t i = 0; i < sizeof(fatal_signals) / sizeof(fatal_signals[0]); i++) {
        struct sigaction old, sa;
        if (sigaction(fatal_signals[i], NULL, &old) || old.sa_handler != SIG_DFL)
            continue;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESETHAND | SA_NODEFER;
        sigaction(fatal_signals[i], &sa, NULL);
    }
}

/*
 * MEMLENS_SAMPLE=N measures one in N top-level executions of each region per
 * thread (the first, then every N-th). Minimal policy so that code versioning
 * can be tested; unparseable values print one line and keep measuring all.
 */
static uint32_t sample_from_env(void)
{
    const char *v = getenv("MEMLENS_SAMPLE");
    char *end, msg[160];
    unsigned long n;
    ssize_t w;
    int len;

    if (!v)
        return 1;
    errno = 0;
    n = strtoul(v, &end, 10);
    if (!errno && end != v && !*end && n > 0 && n <= UINT32_MAX && v[0] != '-')
        return (uint32_t)n;
    len = snprintf(msg, sizeof(msg),
                   "memlens: ignoring MEMLENS_SAMPLE='%.80s': expected a positive integer\n", v);
    if (len > 0) {
        w = write(2, msg, (size_t)len < sizeof(msg) ? (size_t)len : sizeof(msg) - 1);
        (void)w; /* nothing better to do when stderr is gone */
    }
    return 1;
}

static void init_locked(void)
{
    ml_rt.initialised = 1;
    ml_rt.mods_tail = &ml_rt.mods;
    ml_rt.threads_tail = &ml_rt.threads;
    ml_rt.tick0 = ml_rt_ticks();
    ml_rt.mono0 = ml_rt_mono_ns();
    ml_rt.real0 = real_ns();
    ml_rt.sample = sample_from_env();
    pthread_key_create(&exit_key, thread_exit);
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
    atexit(on_exit_write);
    install_signal_handlers();
    ml_rt_timeline_start();
}

static uint32_t region_id_locked(const char *name)
{
    for (uint32_t i = 0; i < ml_rt.nregions; i++)
        if (strcmp(ml_rt.region_names[i], name) == 0)
            return i;
    if (ml_rt.nregions == ML_RT_MAX_REGIONS)
        return ML_RT_MAX_REGIONS;
    ml_rt.region_names[ml_rt.nregions] = name;
    return ml_rt.nregions++;
}

ML_EXPORT void __memlens_register(struct ml_rt_module *m)
{
    struct ml_thread_rec *t;

    if (m->abi != ML_RT_ABI)
        return; /* built by another memlens: its counters cannot be read safely */
    pthread_mutex_lock(&ml_rt.lock);
    if (!ml_rt.initialised)
        init_locked();
    for (uint32_t i = 0; i < m->nregions; i++)
        m->region_ids[i] = region_id_locked(m->region_names[i]);
    m->next = NULL;
    m->index = ml_rt.nmods;
    *ml_rt.mods_tail = m;
    ml_rt.mods_tail = &m->next;
    ml_rt.nmods++;
    ml_rt.nunits += m->nunits;
    ml_rt.nregset_words += m->nregset_words;
    ml_rt.ncalls += m->ncalls;
    t = self ? self : thread_new_locked();
    if (t)
        capture_tls(t);
    pthread_mutex_unlock(&ml_rt.lock);
}

static struct ml_rstate *region_state(uint32_t g)
{
    struct ml_thread_rec *t = ml_rt_self();

    if (!t || g >= ML_RT_MAX_REGIONS)
        return NULL;
    if (!t->rs) {
        t->rs = calloc(ML_RT_MAX_REGIONS, sizeof(*t->rs));
        if (!t->rs)
            return NULL;
    }
    return &t->rs[g];
}

/* Applies the rules of abi.h; returns whether this execution is measured. */
static uint32_t region_enter(uint32_t g, int always)
{
    struct ml_rstate *s = region_state(g);
    struct ml_thread_rec *t = self;
    uint32_t measured;

    if (!s)
        return 1;
    if (s->depth++)
        return s->measured;
    if (t->measured_open || always)
        measured = 1;
    else if (t->open)
        measured = 0;
    else
        measured = ml_rt.sample <= 1 || s->entries % ml_rt.sample == 0;
    s->measured = measured;
    t->open++;
    t->measured_open += measured;
    s->start = ml_rt_ticks();
    return measured;
}

static void region_exit(uint32_t g)
{
    uint64_t now = ml_rt_ticks();
    struct ml_thread_rec *t = self;
    struct ml_rstate *s;

    if (!t || !t->rs || g >= ML_RT_MAX_REGIONS)
        return;
    s = &t->rs[g];
    if (s->depth && --s->depth == 0) {
        s->ticks += now - s->start;
        s->entries++;
        t->open--;
        t->measured_open -= s->measured;
    }
}

ML_EXPORT uint32_t __memlens_enter(struct ml_rt_module *m, uint32_t local_region)
{
    return region_enter(m->region_ids[local_region], 0);
}

ML_EXPORT uint32_t __memlens_enter_always(struct ml_rt_module *m, uint32_t local_region)
{
    return region_enter(m->region_ids[local_region], 1);
}

ML_EXPORT void __memlens_exit(struct ml_rt_module *m, uint32_t local_region)
{
    region_exit(m->region_ids[local_region]);
}

/* Code built with the header but not instrumented still gets region times, by name. */
static uint32_t region_by_name(const char *name)
{
    uint32_t g;

    pthread_mutex_lock(&ml_rt.lock);
    if (!ml_rt.initialised)
        init_locked();
    g = region_id_locked(name);
    pthread_mutex_unlock(&ml_rt.lock);
    return g;
}

ML_EXPORT void __memlens_roi_begin(const char *name)
{
    region_enter(region_by_name(name), 1);
}

ML_EXPORT void __memlens_roi_end(const char *name)
{
    region_exit(region_by_name(name));
}

/* ---- thread creation: every thread gets a record before it runs instrumented code ---- */

struct trampoline {
    void *(*fn)(void *);
    void *arg;
};

static void *thread_start(void *p)
{
    struct trampoline tr = *(struct trampoline *)p;

    free(p);
    if (ml_rt.initialised)
        ml_rt_self();
    return tr.fn(tr.arg);
}

ML_EXPORT int pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *),
                             void *arg)
{
    static int (*real)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
    struct trampoline *tr;
    int rc;

    if (!real) {
        real = (int (*)(pthread_t *, const pthread_attr_t *, void *(*)(void *),
                        void *))dlsym(RTLD_NEXT, "pthread_create");
        if (!real)
            return EAGAIN;
    }
    tr = malloc(sizeof(*tr));
    if (!tr)
        return real(th, attr, fn, arg);
    tr->fn = fn;
    tr->arg = arg;
    rc = real(th, attr, thread_start, tr);
    if (rc)
        free(tr);
    return rc;
}
