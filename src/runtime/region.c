/* Runtime linked into profiled programs: module registry, region timing, threads, exit paths. */
#include "runtime/rt.h"
#include "runtime/clock.h"
#include "runtime/pmu.h"

#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define ML_EXPORT __attribute__((visibility("default")))

struct ml_rt ml_rt = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* The thread's dynamic context (abi.h): set by instrumented code around calls. */
ML_EXPORT __thread uint32_t __memlens_dctx __attribute__((tls_model("initial-exec")));
/* Open timed executions on the thread (abi.h): not-seen calls read the clock meanwhile. */
ML_EXPORT __thread uint32_t __memlens_timed __attribute__((tls_model("initial-exec")));

static __thread struct ml_thread_rec *self __attribute__((tls_model("initial-exec")));
static pthread_key_t exit_key;

static const int fatal_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGSEGV,
                                    SIGBUS, SIGFPE,  SIGILL, SIGABRT};

static void drain_all(struct ml_thread_rec *t);

/* The region slots of module m in a thread's block (abi.h): u32 words. */
static uint32_t *slots_of(const struct ml_rt_module *m, uint64_t *block)
{
    return (uint32_t *)(block + m->nunits);
}

/*
 * Opens or closes the gates of m's inline BEGINs for thread t (its block
 * tls): closed while a sampled execution is measured, so that a region
 * entered in it from code the static sets miss is measured too (abi.h's
 * rules); closed for good when the inline path may not run executions alone.
 */
static void set_gates(const struct ml_thread_rec *t, const struct ml_rt_module *m, uint64_t *tls)
{
    uint32_t *g = slots_of(m, tls) + 2 * (size_t)m->nregions;

    if (!ml_rt.fast) {
        g[0] = g[1] = ML_RT_GATE_OFF;
        return;
    }
    g[0] = (uint32_t)ml_rt.fastres | (ml_rt.sample > 1 && t->measured_open ? ML_RT_GATE_OFF : 0);
    /* Sampling: a BEGIN that is always measured must be timed, so it calls the runtime. */
    g[1] = ml_rt.sample > 1 ? ML_RT_GATE_OFF : (uint32_t)ml_rt.fastres;
}

/* set_gates for every module of the calling thread t (its measured_open changed). */
static void set_all_gates(struct ml_thread_rec *t)
{
    struct ml_rt_module *m = ml_rt.mods;

    for (uint32_t i = 0; m && i < t->nmods; m = m->next, i++)
        if (m->tls && t->tls[i])
            set_gates(t, m, t->tls[i]);
}

/*
 * Records this thread's counter arrays of every registered module; caller
 * holds the lock. An unloaded module has none left: its entry stays NULL.
 */
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
        if (i >= t->nmods) {
            t->tls[i] = m->tls ? m->tls() : NULL;
            if (t->tls[i]) {
                uint64_t *stk = t->tls[i] + m->nunits + ML_RT_SLOTS(m->nregions);
                set_gates(t, m, t->tls[i]);
                stk[0] = t->stack_lo;
                stk[1] = t->stack_hi - t->stack_lo;
                stk[2] = 0; /* dynamic context cache: no set cached */
                stk[3] = 0;
            }
        }
    t->nmods = ml_rt.nmods;
}

/* A slot of u64 at least n long, zeroed up to n; -ENOMEM leaves *p as it was. */
static int grow_zeroed(uint64_t **p, uint32_t *cap, uint32_t n)
{
    if (*cap < n) {
        uint64_t *q = realloc(*p, (size_t)n * sizeof(*q));
        if (!q)
            return -ENOMEM;
        *p = q;
        *cap = n;
    }
    memset(*p, 0, (size_t)n * sizeof(**p));
    return 0;
}

/* Units of the module at position i of the list (0 past its end). */
static uint32_t module_units(uint32_t i)
{
    struct ml_rt_module *m = ml_rt.mods;

    while (m && i--)
        m = m->next;
    return m ? m->nunits : 0;
}

struct ml_rt_module *ml_rt_module_at(uint32_t i)
{
    struct ml_rt_module *m = ml_rt.mods;

    while (m && i--)
        m = m->next;
    return m;
}

/* Counters in a block of dynamic pair p: one per unit of its module. */
static uint32_t pair_units(uint32_t p)
{
    return p < ml_rt.npairs ? module_units(ml_rt.pairs[p].mod) : 0;
}

const uint64_t *ml_rt_dyn_counts(const struct ml_thread_rec *t, uint32_t p)
{
    for (const struct ml_dynblock *b = __atomic_load_n(&t->dyn, __ATOMIC_ACQUIRE); b; b = b->next)
        if (b->pair == p)
            return b->counts;
    return NULL;
}

/* A new block of pair p for t, published at the head of its list (readers walk it unlocked). */
static struct ml_dynblock *dyn_add(struct ml_thread_rec *t, uint32_t p)
{
    struct ml_dynblock *b = malloc(sizeof(*b));
    uint32_t n = pair_units(p);

    if (!b)
        return NULL;
    b->counts = calloc(n ? n : 1, sizeof(uint64_t));
    if (!b->counts) {
        free(b);
        return NULL;
    }
    b->pair = p;
    b->next = t->dyn;
    __atomic_store_n(&t->dyn, b, __ATOMIC_RELEASE);
    return b;
}

/* The exited-threads record gets a block for every pair r has, before anything is added. */
static int dyn_prepare_fold(struct ml_thread_rec *a, const struct ml_thread_rec *r)
{
    for (const struct ml_dynblock *b = r->dyn; b; b = b->next)
        if (!ml_rt_dyn_counts(a, b->pair) && !dyn_add(a, b->pair))
            return -ENOMEM;
    return 0;
}

/* The exited-threads record, created on first use; caller holds the lock. */
static struct ml_thread_rec *acc_record(void)
{
    struct ml_thread_rec *a = ml_rt.acc;

    if (a)
        return a;
    a = calloc(1, sizeof(*a));
    if (!a)
        return NULL;
    a->index = ml_rt.nthreads++;
    a->done = 1;
    *ml_rt.threads_tail = a;
    ml_rt.threads_tail = &a->next;
    ml_rt.acc = a;
    return a;
}

/*
 * Adds the figures of exited thread r to the exited-threads record. Every
 * allocation comes first: on -ENOMEM nothing was added and r keeps its own.
 */
static int fold_exited(struct ml_thread_rec *r)
{
    struct ml_thread_rec *a = acc_record();
    uint32_t n = r->snap_units;

    if (!a)
        return -ENOMEM;
    if (a->snap_units < n) {
        uint64_t *q = realloc(a->snap, (size_t)n * sizeof(*q));
        if (!q)
            return -ENOMEM;
        memset(q + a->snap_units, 0, (size_t)(n - a->snap_units) * sizeof(*q));
        a->snap = q;
        a->snap_cap = a->snap_units = n;
    }
    if (r->rs && !a->rs && !(a->rs = calloc(ML_RT_MAX_REGIONS, sizeof(*a->rs))))
        return -ENOMEM;
    if (r->exact_cap > a->exact_cap) {
        uint64_t **q = realloc(a->exact, r->exact_cap * sizeof(*q));
        if (!q)
            return -ENOMEM;
        memset(q + a->exact_cap, 0, (r->exact_cap - a->exact_cap) * sizeof(*q));
        a->exact = q;
        a->exact_cap = r->exact_cap;
    }
    for (uint32_t i = 0; i < r->exact_cap; i++)
        if (r->exact[i] && !a->exact[i] &&
            !(a->exact[i] = calloc((size_t)module_units(i) * ML_NCLASS, sizeof(uint64_t))))
            return -ENOMEM;
    if (dyn_prepare_fold(a, r) || ml_pmu_fold(a, r))
        return -ENOMEM;
    for (uint32_t u = 0; u < n; u++)
        a->snap[u] += r->snap[u];
    for (uint32_t g = 0; r->rs && g < ml_rt.nregions; g++) {
        a->rs[g].entries += r->rs[g].entries;
        a->rs[g].ticks += r->rs[g].ticks;
        a->rs[g].measured += r->rs[g].measured;
        a->rs[g].timed += r->rs[g].timed;
    }
    for (uint32_t i = 0; i < r->exact_cap; i++)
        for (size_t k = 0; r->exact[i] && k < (size_t)module_units(i) * ML_NCLASS; k++)
            a->exact[i][k] += r->exact[i][k];
    for (struct ml_dynblock *b = r->dyn; b; b = b->next) {
        uint64_t *dst = (uint64_t *)ml_rt_dyn_counts(a, b->pair);
        for (uint32_t u = 0; dst && u < pair_units(b->pair); u++)
            dst[u] += b->counts[u];
    }
    ml_rt.nfolded++;
    return 0;
}

/*
 * The oldest exited record, folded into the exited-threads record and made
 * ready for a new thread at the end of the list; NULL while at most
 * ML_RT_KEEP_EXITED exited threads keep their own (or out of memory).
 */
static struct ml_thread_rec *reuse_exited(void)
{
    struct ml_thread_rec *r = ml_rt.exited_head, **pp;

    if (ml_rt.nexited <= ML_RT_KEEP_EXITED || fold_exited(r))
        return NULL;
    ml_rt.exited_head = r->exited_next;
    if (!ml_rt.exited_head)
        ml_rt.exited_tail = &ml_rt.exited_head;
    ml_rt.nexited--;
    /* Readers walk the list without the lock: unlink, end r's own link, then append. */
    for (pp = &ml_rt.threads; *pp != r; pp = &(*pp)->next)
        ;
    if (r->next) {
        *pp = r->next;
        r->next = NULL;
        *ml_rt.threads_tail = r;
        ml_rt.threads_tail = &r->next;
    }
    r->exited_next = NULL;
    r->nmods = 0;
    r->snap_units = 0;
    if (r->rs)
        memset(r->rs, 0, ml_rt.nregions * sizeof(*r->rs));
    for (uint32_t i = 0; i < r->exact_cap; i++)
        if (r->exact[i])
            memset(r->exact[i], 0, (size_t)module_units(i) * ML_NCLASS * sizeof(uint64_t));
    ml_pmu_reuse(r);
    for (struct ml_dynblock *b = r->dyn; b; b = b->next)
        memset(b->counts, 0, pair_units(b->pair) * sizeof(uint64_t));
    r->stack_lo = r->stack_hi = 0;
    r->measured_open = r->plain_open = 0;
    return r;
}

/* The calling thread's stack, for the instrumented code's heap/stack test and exact mode. */
static void stack_bounds(struct ml_thread_rec *t)
{
    pthread_attr_t attr;
    void *addr;
    size_t size;

    t->stack_lo = t->stack_hi = 0;
    if (pthread_getattr_np(pthread_self(), &attr))
        return;
    if (pthread_attr_getstack(&attr, &addr, &size) == 0) {
        t->stack_lo = (uintptr_t)addr;
        t->stack_hi = (uintptr_t)addr + size;
    }
    pthread_attr_destroy(&attr);
}

/* Creates the calling thread's record, or reuses an exited thread's; caller holds the lock. */
static struct ml_thread_rec *thread_new_locked(void)
{
    struct ml_thread_rec *t;

    /* ml_rt.recseq odd until the record has its new index (a seqlock for the live reader). */
    __atomic_store_n(&ml_rt.recseq, ml_rt.recseq + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    t = reuse_exited();
    if (!t) {
        t = calloc(1, sizeof(*t));
        if (!t) {
            __atomic_store_n(&ml_rt.recseq, ml_rt.recseq + 1, __ATOMIC_RELEASE);
            return NULL;
        }
        *ml_rt.threads_tail = t;
        ml_rt.threads_tail = &t->next;
    }
    t->tid = ml_rt_gettid();
    t->index = ml_rt.nthreads++;
    __atomic_store_n(&ml_rt.recseq, ml_rt.recseq + 1, __ATOMIC_RELEASE);
    t->rng = (ml_rt_ticks() ^ ((uint64_t)t->tid * 0x9e3779b97f4a7c15ull)) | 1;
    t->hint = ml_rt_ticks();
    stack_bounds(t);
    capture_tls(t);
    __atomic_store_n(&t->done, 0, __ATOMIC_RELEASE);
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

/*
 * Closes open regions at tick `now` and snapshots the counters; runs on the
 * exiting thread. The record then waits in the exited queue for reuse.
 */
static void thread_exit(void *arg)
{
    struct ml_thread_rec *t = arg;
    uint64_t now = ml_rt_ticks();
    struct ml_rt_module *m;
    uint32_t off = 0, i = 0;

    pthread_mutex_lock(&ml_rt.lock);
    capture_tls(t);
    drain_all(t);
    if (grow_zeroed(&t->snap, &t->snap_cap, ml_rt.nunits) == 0) {
        for (m = ml_rt.mods; m; m = m->next, i++) {
            if (i < t->nmods && t->tls[i])
                memcpy(t->snap + off, t->tls[i], m->nunits * sizeof(*t->snap));
            off += m->nunits;
        }
        t->snap_units = off;
    }
    if (t->rs)
        for (i = 0; i < ML_RT_MAX_REGIONS; i++)
            if (t->rs[i].depth) {
                struct ml_rstate *s = &t->rs[i];
                if (s->on && !s->fastopen) {
                    if (!s->untimed) {
                        s->ticks += now - s->start;
                        s->timed++;
                    }
                    s->measured++;
                }
                s->entries += !s->fastopen;
                s->depth = 0;
                s->fastopen = s->untimed = 0;
            }
    t->measured_open = t->plain_open = 0;
    ml_pmu_thread_exit(t);
    __atomic_store_n(&t->done, 1, __ATOMIC_RELEASE);
    /* The copies of unloaded modules' counts are in snap now. */
    for (m = ml_rt.mods, i = 0; m && i < t->nmods; m = m->next, i++)
        if (!m->tls) {
            free(t->tls[i]);
            t->tls[i] = NULL;
        }
    *ml_rt.exited_tail = t;
    ml_rt.exited_tail = &t->exited_next;
    ml_rt.nexited++;
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
    ml_rt_unpublish();
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
    ml_rt.exited_head = NULL;
    ml_rt.exited_tail = &ml_rt.exited_head;
    ml_rt.nexited = 0;
    ml_rt.acc = NULL;
    ml_rt.nfolded = 0;
    ml_rt.written = 0;
    ml_rt.tick0 = now;
    ml_rt.mono0 = ml_rt_mono_ns();
    ml_rt.real0 = ml_rt_real_ns();
    ml_rt_files_fork();
    if (!t)
        return;
    for (uint32_t i = 0; m && i < t->nmods; m = m->next, i++)
        if (t->tls[i]) {
            uint32_t *sl = slots_of(m, t->tls[i]);
            memset(t->tls[i], 0, m->nunits * sizeof(uint64_t));
            /* Inline executions before the fork are the parent's; one open stays open. */
            for (uint32_t r = 0; r < m->nregions; r++)
                sl[2 * r + 1] = sl[2 * r] & ~ML_RT_SLOT_OPEN;
        }
    if (t->rs)
        for (uint32_t i = 0; i < ML_RT_MAX_REGIONS; i++) {
            t->rs[i].entries = t->rs[i].ticks = t->rs[i].measured = t->rs[i].timed = 0;
            t->rs[i].start = now;
        }
    ml_pmu_after_fork(t);
    for (struct ml_dynblock *b = t->dyn; b; b = b->next)
        memset(b->counts, 0, pair_units(b->pair) * sizeof(uint64_t));
    t->tid = ml_rt_gettid();
    t->rng = (now ^ ((uint64_t)t->tid * 0x9e3779b97f4a7c15ull)) | 1; /* not the parent's phases */
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

void ml_rt_say(const char *const *parts, size_t n)
{
    char msg[512];
    size_t len = 0;

    for (size_t i = 0; i < n; i++)
        for (const char *s = parts[i]; *s && len < sizeof(msg) - 1; s++)
            msg[len++] = *s;
    msg[len++] = '\n';
    if (write(2, msg, len) < 0)
        return;
}

/*
 * An unsigned integer from the environment, at least min; def when unset, and
 * also (after one line on stderr) when it is not such a number.
 */
static uint64_t uint_from_env(const char *name, uint64_t min, uint64_t def, const char *expect)
{
    const char *env = getenv(name);
    uint64_t n = 0;
    const char *p;

    if (!env)
        return def;
    for (p = env; *p >= '0' && *p <= '9' && n <= UINT64_MAX / 10 - 1; p++)
        n = n * 10 + (uint64_t)(*p - '0');
    if (!*env || *p || n < min) {
        const char *msg[] = {"memlens: ignoring ", name, "='", env, "': expected ", expect};
        ml_rt_say(msg, sizeof(msg) / sizeof(msg[0]));
        return def;
    }
    return n;
}

/* Minimum gap of the sampling time rule (sample.h). */
#define SAMPLE_T0_MS 10

static void init_locked(void)
{
    uint64_t ticks_per_ms;

    ml_rt.initialised = 1;
    ml_rt.mods_tail = &ml_rt.mods;
    ml_rt.threads_tail = &ml_rt.threads;
    ml_rt.exited_tail = &ml_rt.exited_head;
    ml_rt.tick0 = ml_rt_ticks();
    ml_rt.mono0 = ml_rt_mono_ns();
    ml_rt.real0 = ml_rt_real_ns();
    ml_rt_files_start();
    pthread_key_create(&exit_key, thread_exit);
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
    atexit(on_exit_write);
    install_signal_handlers();
    ml_rt.sample = uint_from_env("MEMLENS_SAMPLE", 1, 1, "a positive integer");
    ml_rt.sample_phase =
        uint_from_env("MEMLENS_SAMPLE_PHASE", 0, UINT64_MAX, "a non-negative integer");
    ticks_per_ms = ml_rt_calibrate();
    /* A fixed phase makes sampling reproducible: the count rule alone. */
    ml_rt.sample_t0 = ml_rt.sample_phase == UINT64_MAX ? ticks_per_ms * SAMPLE_T0_MS : UINT64_MAX;
    ml_rt.ticks_per_ms = ticks_per_ms ? ticks_per_ms : 1;
    ml_pmu_init();
    /* With events at 1 in 1, every measured execution must read them: no inline executions. */
    ml_rt.fastres = ml_rt.sample <= 1;
    ml_rt.fast = !(ml_rt.sample <= 1 && ml_pmu_nevents()) &&
                 uint_from_env("MEMLENS_TIME_ALL", 0, 0, "0 or 1") == 0;
    ml_rt.leaf_short = ml_rt.fast && ml_rt.sample > 1;
    ml_rt_timeline_start();
    ml_rt_publish();
}

/* Names are copied: the module or caller that brought one may be unloaded. */
static uint32_t region_id_locked(const char *name)
{
    char *copy;

    for (uint32_t i = 0; i < ml_rt.nregions; i++)
        if (strcmp(ml_rt.region_names[i], name) == 0)
            return i;
    if (ml_rt.nregions == ML_RT_MAX_REGIONS || !(copy = strdup(name)))
        return ML_RT_MAX_REGIONS;
    ml_rt.region_names[ml_rt.nregions] = copy;
    return ml_rt.nregions++;
}

/*
 * Global id of the set of n global region ids (sorted, distinct); 0 for the
 * empty set or when the table is full. Caller holds the lock.
 */
static uint32_t set_intern_locked(const uint32_t *ids, uint32_t n)
{
    for (uint32_t s = 0; n && s < ml_rt.nsets; s++) {
        const uint32_t *w = ml_rt.set_words + ml_rt.set_off[s];
        if (w[0] == n && !memcmp(w + 1, ids, n * sizeof(*ids)))
            return s + 1;
    }
    if (!n || ml_rt.nsets == ML_RT_MAX_SETS || ml_rt.nset_words + n + 1 > ML_RT_SET_WORDS)
        return 0;
    ml_rt.set_off[ml_rt.nsets] = ml_rt.nset_words;
    ml_rt.set_words[ml_rt.nset_words] = n;
    memcpy(ml_rt.set_words + ml_rt.nset_words + 1, ids, n * sizeof(*ids));
    ml_rt.nset_words += n + 1;
    return ++ml_rt.nsets;
}

/* Fills m->setids: the global id of each of its region sets, by word offset. */
static void intern_module_sets(struct ml_rt_module *m)
{
    for (uint32_t i = 0; m->setids && m->regsets && i < m->nregset_words;) {
        uint32_t n = m->regsets[i], ids[n + 1], k = 0;
        for (uint32_t j = 1; j <= n && i + j < m->nregset_words; j++) {
            uint32_t g = m->region_ids[m->regsets[i + j]], at = k;
            if (g >= ML_RT_MAX_REGIONS)
                continue;
            while (at > 0 && ids[at - 1] > g) { /* insertion sort: sets are small */
                ids[at] = ids[at - 1];
                at--;
            }
            ids[at] = g;
            k++;
        }
        m->setids[i] = set_intern_locked(ids, k);
        i += n + 1;
    }
}

/*
 * The runtime keeps its own copy of each descriptor (ml_rt.mods): the module's
 * descriptor may be unmapped by dlclose, and a module loaded again at the same
 * address must not find itself in the list.
 */
ML_EXPORT void __memlens_register(struct ml_rt_module *m)
{
    struct ml_rt_module *s;
    struct ml_thread_rec *t;

    if (m->abi != ML_RT_ABI)
        return; /* built by another memlens: its counters cannot be read safely */
    pthread_mutex_lock(&ml_rt.lock);
    if (!ml_rt.initialised)
        init_locked();
    s = malloc(sizeof(*s));
    if (!s) { /* unprofiled, like a module of another ABI: enter and exit still work */
        for (uint32_t i = 0; i < m->nregions; i++)
            m->region_ids[i] = ML_RT_MAX_REGIONS;
        m->index = UINT32_MAX;
        pthread_mutex_unlock(&ml_rt.lock);
        return;
    }
    for (uint32_t i = 0; i < m->nregions; i++)
        m->region_ids[i] = region_id_locked(m->region_names[i]);
    intern_module_sets(m);
    m->index = ml_rt.nmods;
    *s = *m;
    s->next = NULL;
    *ml_rt.mods_tail = s;
    ml_rt.mods_tail = &s->next;
    ml_rt.nmods++;
    ml_rt.nunits += m->nunits;
    ml_rt.nregset_words += m->nregset_words;
    ml_rt.ncalls += m->ncalls;
    t = self ? self : thread_new_locked();
    if (t)
        capture_tls(t);
    pthread_mutex_unlock(&ml_rt.lock);
}

/* Bytes of s and its NUL, or 0 when s repeats last (copied once: units share names). */
static size_t str_need(const char *s, const char **last)
{
    if (!s || s == *last)
        return 0;
    *last = s;
    return strlen(s) + 1;
}

/* Copies s into *pool, or reuses the previous copy when s repeats last. */
static const char *str_copy(const char *s, const char **last, const char **last_copy, char **pool)
{
    size_t n;

    if (!s)
        return NULL;
    if (s == *last)
        return *last_copy;
    n = strlen(s) + 1;
    memcpy(*pool, s, n);
    *last = s;
    *last_copy = *pool;
    *pool += n;
    return *last_copy;
}

/*
 * Points slot s at a runtime-owned copy of its module's static facts: units,
 * calls, region sets, region ids and names, in one block. Out of memory, s
 * keeps counts but no facts (its arrays are NULL; the writer writes zeros).
 */
static void detach_facts(struct ml_rt_module *s)
{
    const char *lf = NULL, *lfile = NULL, *lc = NULL, *lfc = NULL, *lfilec = NULL, *lcc = NULL;
    const char *lu = NULL, *luc = NULL;
    size_t nu = s->nunits * sizeof(*s->units), nc = s->ncalls * sizeof(*s->calls);
    size_t nw = s->nregset_words * sizeof(uint32_t), ni = s->nregions * sizeof(uint32_t);
    size_t nui = s->nuinfo * sizeof(*s->uinfo), nfl = s->rflags ? ni : 0;
    struct ml_rt_uinfo *uinfo;
    size_t str = s->name ? strlen(s->name) + 1 : 0;
    struct ml_rt_unit *units;
    struct ml_rt_call *calls;
    char *blk, *pool;

    for (uint32_t i = 0; s->units && i < s->nunits; i++)
        str += str_need(s->units[i].func, &lf) + str_need(s->units[i].file, &lfile);
    for (uint32_t i = 0; s->calls && i < s->ncalls; i++)
        str += str_need(s->calls[i].callee, &lc);
    for (uint32_t i = 0; s->uinfo && i < s->nuinfo; i++)
        str += str_need(s->uinfo[i].name, &lu);
    /* Unit infos first: their pointers want 8-byte alignment. */
    blk = malloc(nui + nu + nc + nw + ni + nfl + str + 1);
    if (!blk) {
        s->name = NULL;
        s->units = NULL;
        s->calls = NULL;
        s->regsets = NULL;
        s->region_ids = NULL;
        s->region_names = NULL;
        s->uinfo = NULL;
        s->nuinfo = 0;
        s->rflags = NULL;
        return;
    }
    uinfo = (struct ml_rt_uinfo *)blk;
    if (s->uinfo)
        memcpy(uinfo, s->uinfo, nui);
    blk += nui;
    units = (struct ml_rt_unit *)blk;
    calls = (struct ml_rt_call *)(blk + nu);
    if (s->units)
        memcpy(units, s->units, nu);
    if (s->calls)
        memcpy(calls, s->calls, nc);
    if (s->regsets)
        memcpy(blk + nu + nc, s->regsets, nw);
    memcpy(blk + nu + nc + nw, s->region_ids, ni);
    if (nfl)
        memcpy(blk + nu + nc + nw + ni, s->rflags, nfl);
    pool = blk + nu + nc + nw + ni + nfl;
    lf = lfile = lc = NULL;
    for (uint32_t i = 0; s->units && i < s->nunits; i++) {
        units[i].func = str_copy(s->units[i].func, &lf, &lfc, &pool);
        units[i].file = str_copy(s->units[i].file, &lfile, &lfilec, &pool);
    }
    for (uint32_t i = 0; s->calls && i < s->ncalls; i++)
        calls[i].callee = str_copy(s->calls[i].callee, &lc, &lcc, &pool);
    lu = NULL;
    for (uint32_t i = 0; s->uinfo && i < s->nuinfo; i++)
        uinfo[i].name = str_copy(s->uinfo[i].name, &lu, &luc, &pool);
    if (s->name) {
        memcpy(pool, s->name, strlen(s->name) + 1);
        s->name = pool;
    }
    /* Readers may walk the slot meanwhile (signal-time writer, memlens top): both copies are
       valid until the destructor returns. */
    s->units = s->units ? units : NULL;
    s->calls = s->calls ? calls : NULL;
    s->regsets = s->regsets ? (const uint32_t *)(blk + nu + nc) : NULL;
    s->region_ids = (uint32_t *)(blk + nu + nc + nw);
    s->region_names = NULL; /* the runtime has its own copies of the names */
    s->uinfo = s->uinfo ? uinfo : NULL;
    s->rflags = nfl ? (const uint32_t *)(blk + nu + nc + nw + ni) : NULL;
}

ML_EXPORT void __memlens_unregister(struct ml_rt_module *m)
{
    struct ml_rt_module *s;
    struct ml_thread_rec *t;
    uint32_t i = 0;

    /* At exit the profile is written before destructors run: nothing reads the module after. */
    if (m->abi != ML_RT_ABI || __atomic_load_n(&ml_rt.written, __ATOMIC_ACQUIRE))
        return;
    pthread_mutex_lock(&ml_rt.lock);
    for (s = ml_rt.mods; s && i < m->index; s = s->next)
        i++;
    if (!s || s->tls != m->tls) { /* never registered (out of memory) */
        pthread_mutex_unlock(&ml_rt.lock);
        return;
    }
    /* Live threads' counters of the module go away with it: keep copies in their records. */
    for (t = ml_rt.threads; t; t = t->next) {
        uint64_t *c;
        size_t n;

        if (t->done || m->index >= t->nmods || !t->tls[m->index])
            continue;
        /* The slots too: executions run inline stay countable (ml_rt_fast_pending). */
        n = m->nunits + ML_RT_SLOTS(m->nregions);
        c = malloc(n * sizeof(*c));
        if (c)
            memcpy(c, t->tls[m->index], n * sizeof(*c));
        t->tls[m->index] = c;
    }
    s->tls = NULL;
    detach_facts(s);
    pthread_mutex_unlock(&ml_rt.lock);
}

static struct ml_rstate *region_state(struct ml_thread_rec *t, uint32_t g)
{
    if (!t || g >= ML_RT_MAX_REGIONS)
        return NULL;
    if (!t->rs) {
        t->rs = calloc(ML_RT_MAX_REGIONS, sizeof(*t->rs));
        if (!t->rs)
            return NULL;
    }
    return &t->rs[g];
}

__attribute__((noinline)) void ml_rt_measured_begin(struct ml_thread_rec *t, struct ml_rstate *s,
                                                    uint32_t g)
{
    s->on = 1;
    t->measured_open++;
    __memlens_timed++;
    ml_pmu_begin(t, g);
    s->start = ml_rt_ticks();
}

__attribute__((noinline)) void ml_rt_measured_end(struct ml_thread_rec *t, struct ml_rstate *s,
                                                  uint32_t g)
{
    uint64_t now = ml_rt_ticks(), d = now - s->start;

    s->ticks += d;
    s->measured++;
    s->timed++;
    s->avg = s->avg ? s->avg - s->avg / 8 + d / 8 : d;
    t->measured_open--;
    __memlens_timed--;
    t->hint = now;
    ml_sample_done(&s->smp, s->start, now);
    ml_pmu_end(t, g);
}

/*
 * Whether the outermost execution of s that starts now is measured. Nested
 * executions inherit: inside a measured execution everything is measured (its
 * instrumented code counts for the enclosing region too), inside an unmeasured
 * one nothing is (its plain code has no counters). Only a young region reads
 * the clock here; see sample.h.
 */
static int sample_decide(struct ml_thread_rec *t, struct ml_rstate *s)
{
    uint64_t now;

    s->clocked = 0;
    if (t->plain_open)
        return 0;
    if (t->measured_open || ml_rt.sample <= 1)
        return 1;
    s->clocked = s->entries < ML_SAMPLE_YOUNG || !s->started;
    if (s->clocked)
        t->hint = ml_rt_ticks();
    now = t->hint;
    if (!s->started) {
        ml_sample_start(
            &s->smp, ml_rt.sample,
            ml_rt.sample_phase == UINT64_MAX ? ml_sample_rand(&t->rng) : ml_rt.sample_phase, now);
        s->started = 1;
    }
    return ml_sample_decide(&s->smp, ml_rt.sample, ml_rt.sample_t0, now);
}

/* Timed executions of a region before its inline path may run executions alone. */
#define FAST_YOUNG 64
/* At most one timed execution in this many (a longer gap would starve the estimate). */
#define FAST_MAX_PERIOD 1024
/* Timed executions' runtime calls may cost about 1/FAST_SHARE of the region's time. */
#define FAST_SHARE 100
/* Sampling: an inline budget may last about this long, so the time rule is checked that often. */
#define FAST_BUDGET_MS 1
/*
 * Sampling: a region whose timed executions take under FAST_SHORT times the
 * cost of timing one reads the clock on at most one measured execution in
 * about FAST_SHORT_PERIOD: every measured execution of it calls the runtime,
 * which in a cache-hungry loop costs several times slow_ticks, so the share
 * rule alone would time nearly all of them.
 */
#define FAST_SHORT        4
#define FAST_SHORT_PERIOD 64

/*
 * Adds to s the executions that the inline path ran since slot's budget was
 * given (slot: the region's w and base words of one module, abi.h).
 */
static void drain(struct ml_rstate *s, uint32_t *slot)
{
    uint32_t w = slot[0] & ~ML_RT_SLOT_OPEN;
    /* w above base: a carried loop wrote back a budget that a signal handler's region
       renewed meanwhile (docs/regions.md, "Limits"); count nothing rather than wrap */
    uint64_t k = slot[1] >= w ? slot[1] - w : 0;

    s->entries += k;
    if (ml_rt.fastres)
        s->measured += k;
    else /* sampling: they were the count rule's skips */
        s->smp.left = s->smp.left > k ? s->smp.left - k : 0;
    slot[1] = slot[0] & ~ML_RT_SLOT_OPEN;
}

/* Drains every region slot of the calling thread t into its records (it is exiting). */
static void drain_all(struct ml_thread_rec *t)
{
    struct ml_rt_module *m = ml_rt.mods;

    for (uint32_t i = 0; m && i < t->nmods; m = m->next, i++) {
        uint32_t *sl = t->tls[i] ? slots_of(m, t->tls[i]) : NULL;
        for (uint32_t r = 0; sl && m->region_ids && r < m->nregions; r++) {
            struct ml_rstate *s;
            if (sl[2 * r + 1] == (sl[2 * r] & ~ML_RT_SLOT_OPEN))
                continue;
            s = region_state(t, m->region_ids[r]);
            if (s)
                drain(s, sl + 2 * r);
        }
    }
}

void ml_rt_fast_pending(const struct ml_thread_rec *t, uint64_t *pending)
{
    const struct ml_rt_module *m = ml_rt.mods;

    memset(pending, 0, ML_RT_MAX_REGIONS * sizeof(*pending));
    if (t->done) /* drained at its exit */
        return;
    for (uint32_t i = 0; m && i < t->nmods; m = m->next, i++) {
        const uint32_t *sl = t->tls[i] ? slots_of(m, t->tls[i]) : NULL;
        for (uint32_t r = 0; sl && m->region_ids && r < m->nregions; r++) {
            uint32_t w = __atomic_load_n(&sl[2 * r], __ATOMIC_RELAXED);
            uint32_t base = __atomic_load_n(&sl[2 * r + 1], __ATOMIC_RELAXED);
            uint32_t g = m->region_ids[r];
            if (g < ML_RT_MAX_REGIONS && base >= (w & ~ML_RT_SLOT_OPEN))
                pending[g] += base - (w & ~ML_RT_SLOT_OPEN);
        }
    }
}

void ml_rt_region_stat(const struct ml_thread_rec *t, uint32_t g, const uint64_t *pending,
                       uint64_t now, struct ml_prof_rstat *out)
{
    uint64_t timed = 0, p = pending && g < ML_RT_MAX_REGIONS ? pending[g] : 0;

    memset(out, 0, sizeof(*out));
    if (t->rs && g < ML_RT_MAX_REGIONS) {
        const struct ml_rstate *s = &t->rs[g];
        out->entries = s->entries;
        out->ticks = s->ticks;
        out->measured = s->measured;
        timed = s->timed;
        if (s->depth && !t->done && !s->fastopen) { /* still open: count it up to now */
            out->entries++;
            out->measured += s->on;
            if (s->on && !s->untimed) {
                timed++;
                out->ticks += now - s->start;
            }
        }
    }
    out->entries += p;
    if (ml_rt.fastres)
        out->measured += p;
    out->ticks = ml_rt_scale_ticks(out->ticks, out->measured, timed);
}

uint64_t ml_rt_scale_ticks(uint64_t ticks, uint64_t measured, uint64_t timed)
{
    if (!timed || measured <= timed)
        return ticks;
    return (uint64_t)((unsigned __int128)ticks * measured / timed);
}

/*
 * Clock sampling (docs/regions.md, "Inline enter and exit"): once a region has
 * FAST_YOUNG timed executions, one measured execution in about p reads the
 * clock, p chosen so that the timed ones' runtime calls cost about
 * 1/FAST_SHARE of the time the region's executions (measured or not) take
 * (their own time: without the clock reads a timed execution counts); the
 * gaps are random with mean p - 1, so that no periodic pattern of the program
 * lines up with them. Returns the measured executions to leave untimed before
 * the next timed one.
 */
static uint64_t clock_gap(struct ml_thread_rec *t, const struct ml_rstate *s)
{
    uint64_t p, timer = ml_rt.calib.timer_mticks / 1000, own;

    if (!ml_rt.fast || s->timed < FAST_YOUNG || !s->avg)
        return 0;
    /* The region's own time: a timed execution's ticks include its clock reads. */
    own = s->avg > timer ? s->avg - timer : 1;
    p = ml_rt.slow_ticks * FAST_SHARE / own / ml_rt.sample;
    if (ml_rt.sample > 1 && s->avg < FAST_SHORT * ml_rt.slow_ticks && p < FAST_SHORT_PERIOD)
        p = FAST_SHORT_PERIOD;
    if (p < 2)
        return 0;
    if (p > FAST_MAX_PERIOD)
        p = FAST_MAX_PERIOD;
    return ml_sample_rand(&t->rng) % (2 * p - 1);
}

/* fast_budget below when sampling, for a grown-up region. */
static inline uint64_t skip_budget(struct ml_thread_rec *t, struct ml_rstate *s)
{
    uint64_t n = s->smp.left, now = t->hint, span = ml_rt.ticks_per_ms * FAST_BUDGET_MS;

    if (ml_rt.sample_t0 != UINT64_MAX) { /* a random phase: the time rule is on */
        if (!s->cap)
            s->cap = 16;
        else if (now - s->budget_t < span / 2 && s->budget_n >= s->cap && s->cap < (1u << 20))
            s->cap *= 2;
        else if (now - s->budget_t > span && s->cap > 1)
            s->cap /= 2;
        if (n > s->cap)
            n = s->cap;
        s->budget_t = now;
        s->budget_n = n;
    }
    return n < ML_RT_SLOT_LIMIT ? n : ML_RT_SLOT_LIMIT - 1;
}

/*
 * Executions that the inline path may run alone after the one that just
 * ended. Every execution measured: the untimed ones between two timed ones.
 * Sampling: the count rule's skips, at most about FAST_BUDGET_MS worth (so
 * that the time rule is checked that often), judged on the thread's last
 * clock reading: this reads no clock.
 */
static uint64_t fast_budget(struct ml_thread_rec *t, struct ml_rstate *s)
{
    if (!ml_rt.fast)
        return 0;
    if (ml_rt.sample <= 1)
        return clock_gap(t, s);
    if (!s->started || s->entries < ML_SAMPLE_YOUNG)
        return 0;
    return skip_budget(t, s);
}

/* Starts a measured execution of s: timed, or (clock sampling) only counted. */
static void measured_begin(struct ml_thread_rec *t, struct ml_rstate *s, uint32_t g)
{
    if (ml_rt.sample > 1 && s->tleft) {
        s->tleft--;
        s->on = 1;
        s->untimed = 1;
        t->measured_open++;
        return;
    }
    s->untimed = 0;
    if (ml_rt.sample > 1)
        s->tleft = clock_gap(t, s);
    ml_rt_measured_begin(t, s, g);
}

static void measured_end(struct ml_thread_rec *t, struct ml_rstate *s, uint32_t g)
{
    if (s->untimed) { /* for the time rule it ended at the thread's last clock reading */
        s->untimed = 0;
        s->measured++;
        t->measured_open--;
        s->smp.last = t->hint;
        return;
    }
    ml_rt_measured_end(t, s, g);
}

/*
 * The rules of abi.h. always: the BEGIN site's code is always instrumented (a
 * function that could not be versioned, or code without counters timed by
 * name), so a new execution is measured whatever the policy says. slot: the
 * region's words in the calling module's block (NULL by name): the runtime
 * takes over the region from the inline path until its exit.
 */
enum { ENTER_SAMPLED, ENTER_ALWAYS, ENTER_NEVER, ENTER_LEAF };

/*
 * A sampled, measured, untimed execution of s begun at a leaf site (abi.h,
 * __memlens_enter_leaf): nothing but the site's own inline END can run while
 * it is open, so it is counted now, as its END would count it, and handed to
 * the inline path open: no gates to close and reopen, no runtime END.
 */
static inline __attribute__((always_inline)) uint32_t
leaf_lean(struct ml_thread_rec *t, struct ml_rstate *s, uint32_t *slot, int grown)
{
    uint32_t b;

    s->tleft--;
    s->entries++;
    s->measured++;
    s->smp.last = t->hint; /* for the time rule it ended at the thread's last clock reading */
    b = (uint32_t)(grown ? skip_budget(t, s) : fast_budget(t, s));
    slot[1] = b;
    slot[0] = b | ML_RT_SLOT_OPEN;
    return 1 | (b + 1) << 1;
}

/*
 * An unmeasured execution of s begun at a leaf site: its END, in the plain
 * copy, does nothing, so it is counted now and ended. A young region's
 * duration is not seen (the time rule keeps the measured ones' durations).
 * The inline path takes over as after its END, with the execution open.
 */
static uint32_t leaf_plain(struct ml_thread_rec *t, struct ml_rstate *s, uint32_t *slot)
{
    uint32_t b;

    s->depth = 0;
    s->entries++;
    if (!slot)
        return 0;
    b = (uint32_t)fast_budget(t, s);
    slot[1] = b;
    slot[0] = b | ML_RT_SLOT_OPEN;
    return (b + 1) << 1;
}

static uint32_t region_enter(uint32_t g, int mode, uint32_t *slot)
{
    struct ml_thread_rec *t = self ? self : ml_rt_self();
    struct ml_rstate *s = region_state(t, g);

    if (!s) /* no state to time it: count it unless an unmeasured execution encloses it */
        return mode == ENTER_ALWAYS || (mode != ENTER_NEVER && (!t || !t->plain_open));
    if (slot) {
        uint32_t w = slot[0];
        drain(s, slot);
        slot[0] = slot[1] = 0;
        if ((w & ML_RT_SLOT_OPEN) && !s->depth) {
            /* Entered again inside an execution the inline path started: keep its decision. */
            s->depth = 1;
            s->on = (uint32_t)ml_rt.fastres;
            s->fastopen = 1;
            if (s->on)
                t->measured_open++;
            else
                t->plain_open++;
        }
    }
    if (s->depth++) { /* recursion: part of the open execution */
        if (mode == ENTER_LEAF && !s->on)
            s->depth--; /* its END in the plain copy does nothing */
        return s->on;
    }
    if (mode == ENTER_ALWAYS || (mode != ENTER_NEVER && sample_decide(t, s))) {
        if (mode == ENTER_LEAF && slot && s->tleft && !t->measured_open && ml_rt.sample > 1 &&
            ml_rt.fast) {
            s->depth = 0;
            return leaf_lean(t, s, slot, 0);
        }
        measured_begin(t, s, g);
        if (ml_rt.sample > 1 && t->measured_open == 1)
            set_all_gates(t);
        return 1;
    }
    if (mode == ENTER_LEAF)
        return leaf_plain(t, s, slot);
    if (mode == ENTER_NEVER)
        s->clocked = 0;
    s->on = 0;
    t->plain_open++;
    s->start = t->hint; /* a clock reading when clocked (sample_decide), else unused */
    return 0;
}

static void region_exit(uint32_t g, uint32_t *slot)
{
    struct ml_thread_rec *t = self;
    struct ml_rstate *s;

    if (slot && (slot[0] & ML_RT_SLOT_OPEN)) { /* the inline path started it: just end it */
        slot[0] &= ~ML_RT_SLOT_OPEN;
        return;
    }
    if (!t || !t->rs || g >= ML_RT_MAX_REGIONS)
        return;
    s = &t->rs[g];
    if (!s->depth || --s->depth)
        return;
    if (s->fastopen) { /* its entry was counted when the inline path started it */
        s->fastopen = 0;
        if (s->on)
            t->measured_open--;
        else
            t->plain_open--;
    } else if (s->on) {
        s->entries++;
        measured_end(t, s, g);
        if (ml_rt.sample > 1 && !t->measured_open)
            set_all_gates(t);
    } else {
        s->entries++;
        t->plain_open--;
        if (s->clocked) { /* a young region: its duration feeds the time rule */
            uint64_t now = ml_rt_ticks();
            ml_sample_seen(&s->smp, s->start, now);
            t->hint = now;
        }
    }
    if (slot)
        slot[0] = slot[1] = fast_budget(t, s);
}

/*
 * A thread that started before module m was loaded has not recorded its
 * counters of m: it does so on its first entry into one of m's regions.
 */
static void capture_module(const struct ml_rt_module *m)
{
    struct ml_thread_rec *t = self;

    if (t && m->index >= t->nmods && m->index != UINT32_MAX) {
        pthread_mutex_lock(&ml_rt.lock);
        capture_tls(t);
        pthread_mutex_unlock(&ml_rt.lock);
    }
}

/* The words of local region r in the calling thread's block of m, or NULL before it has one. */
static uint32_t *region_slot(const struct ml_rt_module *m, uint32_t r)
{
    struct ml_thread_rec *t = self;

    if (!t || m->index >= t->nmods || !t->tls[m->index])
        return NULL;
    return slots_of(m, t->tls[m->index]) + 2 * (size_t)r;
}

ML_EXPORT uint32_t __memlens_enter(struct ml_rt_module *m, uint32_t local_region)
{
    capture_module(m);
    return region_enter(m->region_ids[local_region], ENTER_SAMPLED, region_slot(m, local_region));
}

/* __memlens_enter_leaf's general way, out of line: its short path then saves no registers. */
static __attribute__((noinline)) uint32_t enter_leaf_general(struct ml_rt_module *m,
                                                             uint32_t local_region)
{
    capture_module(m);
    return region_enter(m->region_ids[local_region], ENTER_LEAF, region_slot(m, local_region));
}

/*
 * The common call at a leaf site when sampling: the count rule's measured
 * execution of a grown-up region with no other execution open on the thread,
 * untimed. It touches the thread record, the module and the region's state
 * and slot only, in scratch registers; anything else goes the general way.
 */
ML_EXPORT uint32_t __memlens_enter_leaf(struct ml_rt_module *m, uint32_t local_region)
{
    struct ml_thread_rec *t = self;
    uint32_t g = m->region_ids[local_region], *slot;
    struct ml_rstate *s;

    if (!t || !t->rs || g >= ML_RT_MAX_REGIONS || m->index >= t->nmods || !t->tls[m->index] ||
        (t->measured_open | t->plain_open) || !ml_rt.leaf_short)
        return enter_leaf_general(m, local_region);
    s = &t->rs[g];
    slot = slots_of(m, t->tls[m->index]) + 2 * (size_t)local_region;
    if (!s->tleft || s->depth || (slot[0] & ML_RT_SLOT_OPEN) || !s->started ||
        s->entries < ML_SAMPLE_YOUNG)
        return enter_leaf_general(m, local_region);
    drain(s, slot);
    if (s->smp.left) /* the count rule skips it: the time rule may not (the general way) */
        return enter_leaf_general(m, local_region);
    s->smp.left = ml_rt.sample - 1;
    return leaf_lean(t, s, slot, 1);
}

ML_EXPORT uint32_t __memlens_enter_always(struct ml_rt_module *m, uint32_t local_region)
{
    capture_module(m);
    return region_enter(m->region_ids[local_region], ENTER_ALWAYS, region_slot(m, local_region));
}

ML_EXPORT uint32_t __memlens_enter_never(struct ml_rt_module *m, uint32_t local_region)
{
    capture_module(m);
    return region_enter(m->region_ids[local_region], ENTER_NEVER, region_slot(m, local_region));
}

ML_EXPORT void __memlens_exit(struct ml_rt_module *m, uint32_t local_region)
{
    region_exit(m->region_ids[local_region], region_slot(m, local_region));
}

/*
 * The counter block of m's code counted under the dynamic context `set` on the
 * calling thread, made on first use and cached in the thread's words of m.
 * Without a usable set (0, unknown, out of memory) the module's own counters
 * take the counts: those units belong to no region there.
 */
ML_EXPORT uint64_t *__memlens_dyn_block(struct ml_rt_module *m, uint32_t set)
{
    struct ml_thread_rec *t;
    uint64_t *tls, *cache;
    const uint64_t *counts;
    uint32_t p;

    capture_module(m);
    t = self ? self : ml_rt_self();
    tls = t && m->index < t->nmods ? t->tls[m->index] : NULL;
    if (!tls)
        return m->tls();
    if (!set)
        return tls;
    pthread_mutex_lock(&ml_rt.lock);
    for (p = 0; p < ml_rt.npairs; p++)
        if (ml_rt.pairs[p].mod == m->index && ml_rt.pairs[p].set == set)
            break;
    if (p == ml_rt.npairs && p < ML_RT_MAX_DYNPAIRS && set <= ml_rt.nsets) {
        ml_rt.pairs[p] = (struct ml_dynpair){m->index, set};
        __atomic_store_n(&ml_rt.npairs, p + 1, __ATOMIC_RELEASE);
    }
    counts = p < ml_rt.npairs ? ml_rt_dyn_counts(t, p) : NULL;
    if (!counts && p < ml_rt.npairs) {
        struct ml_dynblock *b = dyn_add(t, p);
        counts = b ? b->counts : NULL;
    }
    pthread_mutex_unlock(&ml_rt.lock);
    if (!counts)
        return tls;
    cache = tls + m->nunits + ML_RT_SLOTS(m->nregions) + ML_RT_STACK_WORDS;
    cache[0] = set;
    cache[1] = (uintptr_t)counts;
    return (uint64_t *)counts;
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

/* Such code has no plain copy to run: every execution is timed, sampling or not. */
ML_EXPORT void __memlens_roi_begin(const char *name)
{
    region_enter(region_by_name(name), ENTER_ALWAYS, NULL);
}

ML_EXPORT void __memlens_roi_end(const char *name)
{
    region_exit(region_by_name(name), NULL);
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

/* glibc's own name of pthread_create: the way to it in a static link, where dlsym cannot be. */
extern int __pthread_create_2_1(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *)
    __attribute__((weak));

static int interpose_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *),
                            void *arg);

ml_pthread_create_fn ml_rt_real_pthread_create(void)
{
    static ml_pthread_create_fn real;
    ml_pthread_create_fn f = __atomic_load_n(&real, __ATOMIC_RELAXED);

    if (f)
        return f;
    /* Defined in a static link only: memlens cc then pulls it in with -u. */
    f = __pthread_create_2_1;
    if (!f)
        f = (ml_pthread_create_fn)dlsym(RTLD_NEXT, "pthread_create");
    /* libmemlens-rt.so may come after the C library in the search order. */
    if (!f)
        f = (ml_pthread_create_fn)dlsym(RTLD_DEFAULT, "pthread_create");
    if (f == interpose_create) /* the name may resolve to this very runtime's */
        f = NULL;
    __atomic_store_n(&real, f, __ATOMIC_RELAXED);
    return f;
}

static int interpose_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *),
                            void *arg)
{
    ml_pthread_create_fn real = ml_rt_real_pthread_create();
    struct trampoline *tr;
    int rc;

    if (!real)
        return EAGAIN;
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

ML_EXPORT int pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *),
                             void *arg) __attribute__((alias("interpose_create")));
