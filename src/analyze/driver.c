/* Analysis driver: decodes chunks on worker threads, merges each trace's threads by time, tracks
 * --by keys. */
#include "analyze/analyze.h"
#include "analyze/util.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const struct ml_analysis *const ml_analyses[] = {
    &ml_an_summary,  &ml_an_membus,    &ml_an_reuse, &ml_an_streams,
    &ml_an_hotpages, &ml_an_bandwidth, &ml_an_io,    &ml_an_export,
    &ml_an_dump,     &ml_an_select,    NULL};

const struct ml_analysis *ml_analysis_find(const char *name)
{
    for (size_t i = 0; ml_analyses[i]; i++)
        if (!strcmp(ml_analyses[i]->name, name))
            return ml_analyses[i];
    return NULL;
}

static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return code;
}

/* ---- the run: options, analyses, keys and threads of every trace ---- */

struct gthr {
    uint32_t pid, index, tid;
    int trace;
};

struct trace_meta {
    char *path;
    uint32_t pid;
    /* ticks -> ns since the trace began, linear (as the reader's fit) */
    double ns0, rate;
    uint64_t tick0;
};

/*
 * Lane threads: for a long batch of an analysis with lanes, the calling
 * thread runs lane 0 and these the others, then it waits for them all.
 */
struct lanes {
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    pthread_t *thr;
    int nthr, stop;
    /* the batch: lanes next..nlanes - 1 are still to be taken */
    const struct ml_analysis *an;
    void *st;
    const struct ml_an_input *in;
    const struct ml_trace_rec *r;
    size_t n;
    int next, nlanes, running, rc;
};

#define LANE_MIN  1024 /* shorter batches run their lanes on the calling thread */
#define LANE_STEP 2048 /* which runs them in turn on pieces this long (in cache) */

struct ml_an_run {
    struct ml_an_opts o;
    struct lanes *lanes; /* NULL: every lane on the calling thread */
    const struct ml_analysis *an[32];
    void *st[32];
    int nan;
    char **keys; /* key names, [0] = "-" */
    uint32_t nkeys, capkeys;
    struct ml_map keymap; /* name hash -> key id + 1 chain head (by name compare) */
    struct gthr *thr;
    uint32_t nthr, capthr;
    struct trace_meta *traces;
    int ntraces;
    int ninputs;
    /* progress */
    uint64_t delivered, total;
    double t_start, t_shown;
};

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t str_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;

    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* The key id of a name, interned on first use; ML_KEY_NONE when out of memory. */
static uint32_t intern(struct ml_an_run *r, const char *name)
{
    uint64_t h = str_hash(name);

    /* Linear probing on the hash itself: equal hashes compare names. */
    for (uint64_t probe = h;; probe++) {
        uint64_t *v = ml_map_slot(&r->keymap, probe);
        if (!v)
            return ML_KEY_NONE;
        if (*v && !strcmp(r->keys[*v - 1], name))
            return (uint32_t)(*v - 1);
        if (*v)
            continue;
        if (r->nkeys == r->capkeys) {
            uint32_t cap = r->capkeys ? 2 * r->capkeys : 64;
            char **k = realloc(r->keys, (size_t)cap * sizeof(*k));
            if (!k)
                return ML_KEY_NONE;
            r->keys = k;
            r->capkeys = cap;
        }
        if (!(r->keys[r->nkeys] = strdup(name)))
            return ML_KEY_NONE;
        *v = ++r->nkeys;
        return r->nkeys - 1;
    }
}

const char *ml_an_key_name(const struct ml_an_run *r, uint32_t key)
{
    return key < r->nkeys ? r->keys[key] : "?";
}

uint32_t ml_an_nkeys(const struct ml_an_run *r)
{
    return r->nkeys;
}

uint32_t ml_an_nthreads(const struct ml_an_run *r)
{
    return r->nthr;
}

uint32_t ml_an_thread_pid(const struct ml_an_run *r, uint32_t g)
{
    return g < r->nthr ? r->thr[g].pid : 0;
}

uint32_t ml_an_thread_index(const struct ml_an_run *r, uint32_t g)
{
    return g < r->nthr ? r->thr[g].index : 0;
}

uint32_t ml_an_thread_tid(const struct ml_an_run *r, uint32_t g)
{
    return g < r->nthr ? r->thr[g].tid : 0;
}

int ml_an_thread_trace(const struct ml_an_run *r, uint32_t g)
{
    return g < r->nthr ? r->thr[g].trace : -1;
}

const struct ml_an_opts *ml_an_options(const struct ml_an_run *r)
{
    return &r->o;
}

double ml_an_ns(const struct ml_an_run *r, int index, uint64_t tick)
{
    const struct trace_meta *m = &r->traces[index];

    return ((double)tick - (double)m->tick0) * m->rate + m->ns0;
}

const char *ml_an_trace_path(const struct ml_an_run *r, int index)
{
    return index >= 0 && index < r->ntraces ? r->traces[index].path : "?";
}

uint32_t ml_an_trace_pid(const struct ml_an_run *r, int index)
{
    return index >= 0 && index < r->ntraces ? r->traces[index].pid : 0;
}

int ml_an_ntraces(const struct ml_an_run *r)
{
    return r->ntraces;
}

static void *lane_worker(void *arg)
{
    struct lanes *L = arg;

    pthread_mutex_lock(&L->mu);
    for (;;) {
        int l, rc;
        while (!L->stop && L->next >= L->nlanes)
            pthread_cond_wait(&L->go, &L->mu);
        if (L->stop)
            break;
        l = L->next++;
        L->running++;
        pthread_mutex_unlock(&L->mu);
        rc = L->an->lane(L->st, l, L->in, L->r, L->n);
        pthread_mutex_lock(&L->mu);
        if (rc && !L->rc)
            L->rc = rc;
        if (!--L->running && L->next >= L->nlanes)
            pthread_cond_signal(&L->done);
    }
    pthread_mutex_unlock(&L->mu);
    return NULL;
}

static void lanes_stop(struct lanes *L)
{
    if (!L)
        return;
    pthread_mutex_lock(&L->mu);
    L->stop = 1;
    pthread_cond_broadcast(&L->go);
    pthread_mutex_unlock(&L->mu);
    for (int i = 0; i < L->nthr; i++)
        pthread_join(L->thr[i], NULL);
    pthread_mutex_destroy(&L->mu);
    pthread_cond_destroy(&L->go);
    pthread_cond_destroy(&L->done);
    free(L->thr);
    free(L);
}

/* Starts n lane threads; NULL when none could start (lanes then run on the calling thread). */
static struct lanes *lanes_start(int n)
{
    struct lanes *L = calloc(1, sizeof(*L));

    if (!L || !(L->thr = calloc((size_t)n, sizeof(*L->thr)))) {
        free(L);
        return NULL;
    }
    pthread_mutex_init(&L->mu, NULL);
    pthread_cond_init(&L->go, NULL);
    pthread_cond_init(&L->done, NULL);
    for (; L->nthr < n; L->nthr++)
        if (pthread_create(&L->thr[L->nthr], NULL, lane_worker, L))
            break;
    if (!L->nthr) {
        lanes_stop(L);
        return NULL;
    }
    return L;
}

/* Hands a batch to analysis a: its lanes on several threads when the batch is long. */
static int call_record(struct ml_an_run *run, int a, const struct ml_an_input *in,
                       const struct ml_trace_rec *r, size_t n)
{
    const struct ml_analysis *an = run->an[a];
    struct lanes *L = run->lanes;
    int rc, rc0;

    if (an->lanes < 2 || ((!L || n < LANE_MIN) && an->record))
        return an->record(run->st[a], in, r, n);
    if (!L || n < LANE_MIN) {
        for (size_t o = 0; o < n; o += LANE_STEP)
            for (int l = 0; l < an->lanes; l++)
                if ((rc =
                         an->lane(run->st[a], l, in, r + o, n - o < LANE_STEP ? n - o : LANE_STEP)))
                    return rc;
        return 0;
    }
    pthread_mutex_lock(&L->mu);
    L->an = an;
    L->st = run->st[a];
    L->in = in;
    L->r = r;
    L->n = n;
    L->rc = 0;
    L->next = 1;
    L->nlanes = an->lanes;
    pthread_cond_broadcast(&L->go);
    pthread_mutex_unlock(&L->mu);
    rc0 = an->lane(run->st[a], 0, in, r, n);
    pthread_mutex_lock(&L->mu);
    while (L->running || L->next < L->nlanes)
        pthread_cond_wait(&L->done, &L->mu);
    rc = L->rc;
    pthread_mutex_unlock(&L->mu);
    return rc0 ? rc0 : rc;
}

struct ml_an_run *ml_an_new(const struct ml_an_opts *o, const struct ml_analysis *const *an,
                            int nan, char *err, size_t errlen)
{
    int lanes = 1;

    struct ml_an_run *r = calloc(1, sizeof(*r));

    if (!r || ml_map_init(&r->keymap, 64)) {
        free(r);
        fail(err, errlen, -ENOMEM, "out of memory");
        return NULL;
    }
    r->o = *o;
    if (r->o.jobs < 1)
        r->o.jobs = 1;
    if (nan > (int)(sizeof(r->an) / sizeof(r->an[0]))) {
        fail(err, errlen, -EINVAL, "too many analyses");
        ml_an_free(r);
        return NULL;
    }
    if (intern(r, "-") != ML_KEY_NONE) {
        fail(err, errlen, -ENOMEM, "out of memory");
        ml_an_free(r);
        return NULL;
    }
    for (int i = 0; i < nan; i++) {
        const char *missing = !an[i]->start                        ? "start"
                              : !an[i]->record && an[i]->lanes < 2 ? "record"
                              : an[i]->lanes > 1 && !an[i]->lane   ? "lane"
                              : !an[i]->report                     ? "report"
                              : !an[i]->free                       ? "free"
                                                                   : NULL;
        if (missing) {
            fail(err, errlen, -EINVAL, "analysis '%s' has no '%s' callback", an[i]->name, missing);
            ml_an_free(r);
            return NULL;
        }
        if (an[i]->lanes > lanes)
            lanes = an[i]->lanes;
        r->an[r->nan] = an[i];
        if (!(r->st[r->nan] = an[i]->start(r))) {
            fail(err, errlen, -ENOMEM, "cannot start analysis '%s': %s", an[i]->name,
                 errno ? strerror(errno) : "out of memory");
            ml_an_free(r);
            return NULL;
        }
        r->nan++;
    }
    /* Lane threads beside the caller: as many as lanes need, within the jobs. */
    if (r->o.jobs > 1 && lanes > 1)
        r->lanes = lanes_start(lanes - 1 < r->o.jobs - 1 ? lanes - 1 : r->o.jobs - 1);
    return r;
}

void ml_an_free(struct ml_an_run *r)
{
    if (!r)
        return;
    lanes_stop(r->lanes);
    for (int i = 0; i < r->nan; i++)
        r->an[i]->free(r->st[i]);
    for (uint32_t i = 0; i < r->nkeys; i++)
        free(r->keys[i]);
    free(r->keys);
    ml_map_free(&r->keymap);
    free(r->thr);
    for (int i = 0; i < r->ntraces; i++)
        free(r->traces[i].path);
    free(r->traces);
    free(r);
}

/* ---- decoding pool: slots of decoded chunks, filled by workers ahead of the merge ---- */

enum { S_FREE, S_QUEUED, S_BUSY, S_READY };

struct slot {
    struct ml_trace_dec *dec;
    size_t chunk;
    int state, rc;
    char err[300];
    const struct ml_trace_rec *recs;
    size_t n;
    uint64_t qseq; /* order of submission, while queued */
};

#define QMAX 4 /* chunks a thread's cursor may have decoded ahead */

/* One thread of a trace: its data chunks in sequence, the decoded one and a position in it. */
struct cursor {
    uint32_t thread;
    size_t *chunks;        /* data chunk indexes in seq order */
    size_t nchunks, taken; /* chunks handed to a slot so far */
    struct slot *q[QMAX];  /* submitted ahead, in order */
    unsigned qn;
    struct slot *cur;
    size_t pos;
};

struct pool {
    struct ml_trace *t;
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    struct slot *slots;
    size_t nslots;
    uint64_t qseq;  /* submissions so far */
    size_t nqueued; /* slots in state S_QUEUED */
    pthread_t *workers;
    int nworkers, stop;
    size_t queued; /* slots queued or decoded ahead, not yet current */
    size_t ahead;  /* at most this many */
};

static void decode_slot(struct slot *s)
{
    s->rc = ml_trace_decode(s->dec, s->chunk, &s->recs, &s->n, s->err, sizeof(s->err));
}

/* The queued slot submitted first, or NULL. */
static struct slot *first_queued(struct pool *p)
{
    struct slot *best = NULL;

    for (size_t i = 0; i < p->nslots; i++)
        if (p->slots[i].state == S_QUEUED && (!best || p->slots[i].qseq < best->qseq))
            best = &p->slots[i];
    return best;
}

static void *worker(void *arg)
{
    struct pool *p = arg;

    pthread_mutex_lock(&p->mu);
    for (;;) {
        struct slot *s;
        while (!p->stop && !p->nqueued)
            pthread_cond_wait(&p->work, &p->mu);
        if (p->stop)
            break;
        s = first_queued(p);
        s->state = S_BUSY;
        p->nqueued--;
        pthread_mutex_unlock(&p->mu);
        decode_slot(s);
        pthread_mutex_lock(&p->mu);
        s->state = S_READY;
        pthread_cond_broadcast(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static struct slot *free_slot(struct pool *p)
{
    for (size_t i = 0; i < p->nslots; i++)
        if (p->slots[i].state == S_FREE)
            return &p->slots[i];
    return NULL;
}

/* Decodes s on the calling thread, which holds the pool's lock (released meanwhile). */
static void decode_here(struct pool *p, struct slot *s)
{
    s->state = S_BUSY;
    pthread_mutex_unlock(&p->mu);
    decode_slot(s);
    pthread_mutex_lock(&p->mu);
    s->state = S_READY;
}

/* Hands chunk c to slot s: queued for a worker, or decoded here when there is none. */
static void submit(struct pool *p, struct slot *s, size_t c, int here)
{
    s->chunk = c;
    if (here || !p->nworkers) {
        decode_here(p, s);
        return;
    }
    s->state = S_QUEUED;
    s->qseq = p->qseq++;
    p->nqueued++;
    pthread_cond_signal(&p->work);
}

/*
 * Waits for s to be decoded; a slot no worker has started yet is decoded here. While a
 * worker decodes s, this thread decodes the next queued slot instead of idling: otherwise,
 * when the analyses are quicker than decoding, it would only wait for the one worker of
 * -j2 and the second core would hardly help.
 */
static void wait_slot(struct pool *p, struct slot *s)
{
    if (s->state == S_QUEUED) {
        p->nqueued--;
        decode_here(p, s);
        return;
    }
    while (s->state != S_READY) {
        struct slot *o = p->nqueued ? first_queued(p) : NULL;
        if (!o) {
            pthread_cond_wait(&p->done, &p->mu);
            continue;
        }
        p->nqueued--;
        decode_here(p, o);
    }
}

/* Submits chunks ahead for the cursors whose next chunk starts earliest, within the bound. */
static void prefetch(struct pool *p, struct cursor *cur, size_t ncur)
{
    while (p->nworkers && p->queued < p->ahead) {
        struct cursor *best = NULL;
        uint64_t bt = 0;
        struct slot *s;
        for (size_t k = 0; k < ncur; k++) {
            struct cursor *c = &cur[k];
            uint64_t t;
            if (c->taken >= c->nchunks || c->qn == QMAX)
                continue;
            t = ml_trace_chunk(p->t, c->chunks[c->taken])->t_first;
            if (!best || t < bt) {
                best = c;
                bt = t;
            }
        }
        if (!best || !(s = free_slot(p)))
            return;
        best->q[best->qn++] = s;
        p->queued++;
        submit(p, s, best->chunks[best->taken++], 0);
    }
}

/*
 * Makes c's current chunk one with records left; 0 when the thread has none.
 * Damaged chunks are reported and skipped.
 */
static int refill(struct pool *p, struct cursor *c, struct cursor *all, size_t ncur,
                  const struct ml_an_run *run, const char *path)
{
    while (!c->cur || c->pos >= c->cur->n) {
        struct slot *s;
        if (c->cur) {
            c->cur->state = S_FREE;
            c->cur = NULL;
        }
        if (c->qn) {
            s = c->q[0];
            memmove(c->q, c->q + 1, (c->qn - 1) * sizeof(c->q[0]));
            c->qn--;
            p->queued--;
            wait_slot(p, s);
        } else if (c->taken < c->nchunks) {
            s = free_slot(p); /* there is always one: slots = cursors + ahead */
            submit(p, s, c->chunks[c->taken++], 1);
        } else {
            return 0;
        }
        prefetch(p, all, ncur);
        if (s->rc) {
            if (run->o.warn)
                fprintf(run->o.warn, "memlens: '%s': %s; skipped\n", path, s->err);
            s->state = S_FREE;
            continue;
        }
        c->cur = s;
        c->pos = 0;
    }
    return 1;
}

static int pool_start(struct pool *p, struct ml_trace *t, size_t ncur, int jobs)
{
    memset(p, 0, sizeof(*p));
    p->t = t;
    p->nworkers = jobs > 1 ? jobs - 1 : 0;
    p->ahead = p->nworkers ? 2 * (size_t)jobs : 0;
    p->nslots = ncur + p->ahead;
    p->slots = calloc(p->nslots, sizeof(*p->slots));
    p->workers = calloc((size_t)p->nworkers + 1, sizeof(*p->workers));
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done, NULL);
    if (!p->slots || !p->workers)
        return -ENOMEM;
    for (size_t i = 0; i < p->nslots; i++)
        if (!(p->slots[i].dec = ml_trace_dec_new(t)))
            return -ENOMEM;
    for (int i = 0; i < p->nworkers; i++)
        if (pthread_create(&p->workers[i], NULL, worker, p)) {
            p->nworkers = i;
            break;
        }
    if (!p->nworkers)
        p->ahead = 0;
    return 0;
}

static void pool_stop(struct pool *p)
{
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->nworkers; i++)
        pthread_join(p->workers[i], NULL);
    for (size_t i = 0; p->slots && i < p->nslots; i++)
        ml_trace_dec_free(p->slots[i].dec);
    free(p->slots);
    free(p->workers);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->done);
}

/* ---- keys: the current interval of each thread ---- */

struct kthr {
    uint32_t *stack; /* open markers (region, function, loop), innermost last */
    uint32_t n, cap;
};

struct reading {
    struct ml_an_run *run;
    struct ml_an_input in;
    const char *path;
    uint32_t *key;   /* per thread of the trace */
    struct kthr *kt; /* per thread */
    uint32_t nthr;
    uint32_t *mkey; /* marker id -> key id */
    uint32_t nmarkers;
    uint8_t split[ML_EV_NKINDS]; /* kinds delivered alone (they change keys or threads) */
    struct ml_trace_rec *merge;  /* merged runs of several threads */
    size_t nmerge;
};

#define MERGE_CAP    4096
#define MERGE_DIRECT 256 /* runs at least this long are delivered in place */

static int grow_threads(struct reading *rd, uint32_t thread)
{
    struct ml_an_run *r = rd->run;
    uint32_t n = thread + 1;

    if (thread < rd->nthr)
        return 0;
    {
        uint32_t *k = realloc(rd->key, (size_t)n * sizeof(*k));
        struct kthr *kt;
        if (!k)
            return -ENOMEM;
        rd->key = k;
        kt = realloc(rd->kt, (size_t)n * sizeof(*kt));
        if (!kt)
            return -ENOMEM;
        rd->kt = kt;
        memset(k + rd->nthr, 0, (size_t)(n - rd->nthr) * sizeof(*k));
        memset(kt + rd->nthr, 0, (size_t)(n - rd->nthr) * sizeof(*kt));
    }
    rd->nthr = n;
    rd->in.key = rd->key;
    /* Global thread table: this trace's threads are contiguous from thread_base. */
    if (rd->in.thread_base + n > r->capthr) {
        uint32_t cap = r->capthr ? r->capthr : 16;
        struct gthr *g;
        while (cap < rd->in.thread_base + n)
            cap *= 2;
        g = realloc(r->thr, (size_t)cap * sizeof(*g));
        if (!g)
            return -ENOMEM;
        r->thr = g;
        r->capthr = cap;
    }
    while (r->nthr < rd->in.thread_base + n) {
        struct gthr *g = &r->thr[r->nthr];
        g->index = r->nthr - rd->in.thread_base;
        g->pid = rd->in.info->hdr.pid;
        g->tid = g->index ? 0 : g->pid; /* thread 0 is the process's first thread */
        g->trace = rd->in.index;
        r->nthr++;
    }
    return 0;
}

static int push(struct kthr *k, uint32_t m)
{
    if (k->n == k->cap) {
        uint32_t cap = k->cap ? 2 * k->cap : 16;
        uint32_t *s = realloc(k->stack, (size_t)cap * sizeof(*s));
        if (!s)
            return -ENOMEM;
        k->stack = s;
        k->cap = cap;
    }
    k->stack[k->n++] = m;
    return 0;
}

/* Removes the innermost open m (non-nested ends and unwinding leave the others open). */
static void pop(struct kthr *k, uint32_t m, int unwind)
{
    for (uint32_t i = k->n; i-- > 0;)
        if (k->stack[i] == m) {
            if (unwind) /* a function exit closes what its frame left open (longjmp, throw) */
                k->n = i;
            else {
                memmove(k->stack + i, k->stack + i + 1, (k->n - i - 1) * sizeof(*k->stack));
                k->n--;
            }
            return;
        }
}

/* Only markers of the --by kind open intervals: others must not hide the innermost one. */
static int wanted(const struct reading *rd, const struct ml_trace_rec *x)
{
    return x->aux2 < rd->nmarkers && rd->mkey[x->aux2] != ML_KEY_NONE;
}

/* Updates keys and thread ids for a record that changes them. */
static int apply(struct reading *rd, const struct ml_trace_rec *x)
{
    struct ml_an_run *r = rd->run;
    struct kthr *k = &rd->kt[x->thread];
    char name[128];

    if (x->kind == ML_EV_THREAD_START) {
        r->thr[rd->in.thread_base + x->thread].tid = (uint32_t)x->aux;
        return 0;
    }
    if (x->kind == ML_EV_IO) {
        if (r->o.by != ML_BY_IO)
            return 0;
        snprintf(name, sizeof(name), "io:%s %s fd %u", ml_io_call_name(x->aux2 & 0xff),
                 ml_fd_kind_name((x->aux2 >> 8) & 0xff), x->aux2 >> 16);
        rd->key[x->thread] = intern(r, name);
        return 0;
    }
    if (!ml_ev_is_marker(x->kind) || !wanted(rd, x))
        return 0;
    switch (x->kind) {
    case ML_EV_MARK:
        rd->key[x->thread] = rd->mkey[x->aux2];
        return 0;
    case ML_EV_REGION_BEGIN:
    case ML_EV_FUNC_ENTRY:
    case ML_EV_LOOP_ENTRY:
        if (push(k, x->aux2))
            return -ENOMEM;
        break;
    case ML_EV_REGION_END:
    case ML_EV_FUNC_EXIT:
    case ML_EV_LOOP_EXIT:
        pop(k, x->aux2, x->kind != ML_EV_REGION_END);
        break;
    default:
        return 0;
    }
    rd->key[x->thread] = k->n ? rd->mkey[k->stack[k->n - 1]] : ML_KEY_NONE;
    return 0;
}

/* Hands records [r, r + n) of one trace to every analysis; splits at records that change keys. */
static int deliver(struct reading *rd, const struct ml_trace_rec *r, size_t n)
{
    struct ml_an_run *run = rd->run;
    size_t from = 0;
    int rc;

    for (size_t i = 0; i <= n; i++) {
        if (i < n && (r[i].kind <= ML_EV_RMW || r[i].kind >= ML_EV_NKINDS || !rd->split[r[i].kind]))
            continue;
        for (int a = 0; a < run->nan && i > from; a++)
            if ((rc = call_record(run, a, &rd->in, r + from, i - from)))
                return rc;
        if (i == n)
            break;
        if ((rc = apply(rd, &r[i])))
            return rc;
        for (int a = 0; a < run->nan; a++)
            if ((rc = call_record(run, a, &rd->in, r + i, 1)) ||
                (run->an[a]->marker && ml_ev_is_marker(r[i].kind) &&
                 (rc = run->an[a]->marker(run->st[a], &rd->in, r + i))))
                return rc;
        from = i + 1;
    }
    run->delivered += n;
    return 0;
}

static int flush_merge(struct reading *rd)
{
    int rc = rd->nmerge ? deliver(rd, rd->merge, rd->nmerge) : 0;

    rd->nmerge = 0;
    return rc;
}

static void progress(struct ml_an_run *r, int last)
{
    double t = now_s();

    if (!r->o.progress || (!last && t - r->t_shown < 0.5))
        return;
    r->t_shown = t;
    fprintf(stderr, "\rmemlens: analyze: %.1f%% (%.1fM of %.1fM records, %.1fM records/s)%s",
            r->total ? 100.0 * (double)r->delivered / (double)r->total : 100.0,
            (double)r->delivered / 1e6, (double)r->total / 1e6,
            t > r->t_start ? (double)r->delivered / 1e6 / (t - r->t_start) : 0.0, last ? "\n" : "");
}

static int by_thread_seq(const void *a, const void *b, void *arg)
{
    const struct ml_trace *t = arg;
    const struct ml_trace_chunk *x = ml_trace_chunk(t, *(const size_t *)a),
                                *y = ml_trace_chunk(t, *(const size_t *)b);

    if (x->thread != y->thread)
        return x->thread < y->thread ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int key_setup(struct reading *rd)
{
    struct ml_an_run *r = rd->run;
    const struct ml_trace *t = rd->in.trace;
    static const char *const kind_of[] = {"?",    "region", "mark", "function",
                                          "loop", "trace",  "pages"};
    unsigned want = r->o.by == ML_BY_REGION     ? ML_MK_REGION
                    : r->o.by == ML_BY_MARK     ? ML_MK_MARK
                    : r->o.by == ML_BY_FUNCTION ? ML_MK_FUNCTION
                    : r->o.by == ML_BY_LOOP     ? ML_MK_LOOP
                                                : 0;

    rd->nmarkers = ml_trace_nmarkers(t);
    rd->mkey = calloc((size_t)rd->nmarkers + 1, sizeof(*rd->mkey));
    if (!rd->mkey)
        return -ENOMEM;
    for (uint32_t i = 0; i < rd->nmarkers; i++) {
        const struct ml_trace_marker *m = ml_trace_marker(t, i);
        char *name;
        /* Markers of other kinds open no interval of their own (ML_KEY_NONE can't be pushed). */
        if (!want || m->kind != want)
            continue;
        if (asprintf(&name, "%s:%s", kind_of[m->kind < 7 ? m->kind : 0], m->name) < 0)
            return -ENOMEM;
        rd->mkey[i] = intern(r, name);
        free(name);
    }
    rd->split[ML_EV_THREAD_START] = 1;
    for (unsigned k = ML_EV_REGION_BEGIN; k <= ML_EV_PAGES; k++)
        rd->split[k] = 1; /* analyses see markers alone (their marker callback) */
    if (r->o.by == ML_BY_IO)
        rd->split[ML_EV_IO] = 1;
    return 0;
}

static int read_trace(struct ml_an_run *r, const char *path, int index, char *err, size_t errlen)
{
    struct ml_trace *t;
    struct cursor *cur = NULL;
    size_t *order = NULL, nc, ncur = 0;
    struct pool pool;
    struct reading rd;
    int rc = ml_trace_open(path, &t, err, errlen), pool_up = 0;

    if (rc)
        return rc;
    memset(&rd, 0, sizeof(rd));
    memset(&pool, 0, sizeof(pool));
    rd.run = r;
    rd.path = path;
    rd.in = (struct ml_an_input){t, ml_trace_info(t), index, r->nthr, 0, 0, NULL, r->ninputs, r};
    for (size_t i = 0; r->o.warn && i < rd.in.info->nproblems; i++)
        fprintf(r->o.warn, "memlens: '%s': %s\n", path, rd.in.info->problems[i].what);
    {
        struct trace_meta *m = realloc(r->traces, (size_t)(r->ntraces + 1) * sizeof(*m));
        if (!m) {
            rc = fail(err, errlen, -ENOMEM, "out of memory");
            goto out;
        }
        r->traces = m;
        m += r->ntraces;
        memset(m, 0, sizeof(*m));
        m->path = strdup(path);
        m->pid = rd.in.info->hdr.pid;
        m->tick0 = rd.in.info->hdr.tick0;
        m->ns0 = ml_trace_ns(t, m->tick0);
        m->rate = ml_trace_ns(t, m->tick0 + 1000000000ull) / 1e9 - m->ns0 / 1e9;
        r->ntraces++;
        if (!m->path) {
            rc = fail(err, errlen, -ENOMEM, "out of memory");
            goto out;
        }
    }
    nc = ml_trace_nchunks(t);
    order = calloc(nc + 1, sizeof(*order));
    cur = calloc(nc + 1, sizeof(*cur));
    rd.merge = malloc(MERGE_CAP * sizeof(*rd.merge));
    if (!order || !cur || !rd.merge || key_setup(&rd)) {
        rc = fail(err, errlen, -ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < nc; i++) {
        const struct ml_trace_chunk *c = ml_trace_chunk(t, i);
        order[i] = i;
        if (!i || c->t_first < rd.in.t_first)
            rd.in.t_first = c->t_first;
        if (!i || c->t_last > rd.in.t_last)
            rd.in.t_last = c->t_last;
    }
    if (rd.in.t_last < rd.in.t_first) /* a damaged header: never a negative span */
        rd.in.t_last = rd.in.t_first;
    qsort_r(order, nc, sizeof(*order), by_thread_seq, t);
    for (size_t i = 0; i < nc;) {
        size_t j = i;
        uint32_t th = ml_trace_chunk(t, order[i])->thread;
        while (j < nc && ml_trace_chunk(t, order[j])->thread == th)
            j++;
        cur[ncur++] = (struct cursor){.thread = th, .chunks = order + i, .nchunks = j - i};
        if (grow_threads(&rd, th)) {
            rc = fail(err, errlen, -ENOMEM, "out of memory");
            goto out;
        }
        i = j;
    }
    rc = pool_start(&pool, t, ncur, r->o.jobs);
    pool_up = 1;
    if (rc) {
        rc = fail(err, errlen, rc, "cannot start decoding: %s", strerror(-rc));
        goto out;
    }
    for (int a = 0; a < r->nan; a++)
        if (r->an[a]->begin && (rc = r->an[a]->begin(r->st[a], &rd.in))) {
            fail(err, errlen, rc, "analysis '%s' failed on '%s': %s", r->an[a]->name, path,
                 strerror(-rc));
            goto out;
        }
    pthread_mutex_lock(&pool.mu);
    prefetch(&pool, cur, ncur);
    for (;;) {
        struct cursor *best = NULL;
        uint64_t second = UINT64_MAX;
        size_t end, len;
        int others = 0;
        for (size_t k = 0; k < ncur; k++) {
            struct cursor *c = &cur[k];
            uint64_t tc;
            if (!refill(&pool, c, cur, ncur, r, path))
                continue;
            tc = c->cur->recs[c->pos].time;
            if (best) {
                uint64_t tb = best->cur->recs[best->pos].time;
                others = 1;
                if (tc < tb) {
                    second = tb < second ? tb : second;
                    best = c;
                } else if (tc < second) {
                    second = tc;
                }
            } else {
                best = c;
            }
        }
        if (!best)
            break;
        /* A run of the earliest thread up to the next thread's first record. */
        end = best->pos + 1;
        if (!others)
            end = best->cur->n;
        else
            while (end < best->cur->n && best->cur->recs[end].time <= second)
                end++;
        len = end - best->pos;
        pthread_mutex_unlock(&pool.mu);
        if (len >= MERGE_DIRECT || !others) {
            rc = flush_merge(&rd);
            if (!rc)
                rc = deliver(&rd, best->cur->recs + best->pos, len);
        } else {
            if (rd.nmerge + len > MERGE_CAP)
                rc = flush_merge(&rd);
            memcpy(rd.merge + rd.nmerge, best->cur->recs + best->pos, len * sizeof(*rd.merge));
            rd.nmerge += len;
        }
        best->pos = end;
        progress(r, 0);
        pthread_mutex_lock(&pool.mu);
        if (rc) {
            pthread_mutex_unlock(&pool.mu);
            fail(err, errlen, rc, "analysis failed on '%s': %s", path, strerror(-rc));
            goto out;
        }
    }
    pthread_mutex_unlock(&pool.mu);
    if ((rc = flush_merge(&rd))) {
        fail(err, errlen, rc, "analysis failed on '%s': %s", path, strerror(-rc));
        goto out;
    }
    for (int a = 0; a < r->nan && !rc; a++)
        if (r->an[a]->end && (rc = r->an[a]->end(r->st[a], &rd.in)))
            fail(err, errlen, rc, "analysis '%s' failed on '%s': %s", r->an[a]->name, path,
                 strerror(-rc));
out:
    if (pool_up)
        pool_stop(&pool);
    for (uint32_t i = 0; i < rd.nthr; i++)
        free(rd.kt[i].stack);
    free(rd.kt);
    free(rd.key);
    free(rd.mkey);
    free(rd.merge);
    free(cur);
    free(order);
    ml_trace_close(t);
    return rc;
}

int ml_an_read(struct ml_an_run *r, const char *const *paths, int npaths, char *err, size_t errlen)
{
    int rc = 0;

    r->t_start = r->t_shown = now_s();
    r->ninputs = npaths;
    for (int i = 0; i < npaths && !rc; i++) {
        struct ml_trace *t;
        /* Totals for the progress line (opening indexes the chunk headers only). */
        if (r->o.progress && !ml_trace_open(paths[i], &t, err, errlen)) {
            r->total += ml_trace_info(t)->records;
            ml_trace_close(t);
        }
    }
    for (int i = 0; i < npaths && !rc; i++)
        rc = read_trace(r, paths[i], r->ntraces, err, errlen);
    if (!rc)
        progress(r, 1);
    else if (r->o.progress)
        fputc('\n', stderr);
    return rc;
}

int ml_an_report(struct ml_an_run *r, FILE *out, enum ml_an_format fmt)
{
    int rc = 0;

    if (fmt == ML_AN_JSON && r->nan > 1)
        fputc('{', out);
    for (int a = 0; a < r->nan && !rc; a++) {
        if (fmt == ML_AN_JSON && r->nan > 1) {
            fputs(a ? ",\n" : "\n", out);
            ml_json_str(out, r->an[a]->name);
            fputs(": ", out);
        } else if (a && fmt != ML_AN_JSON) {
            fputc('\n', out);
        }
        rc = r->an[a]->report(r->st[a], out, fmt);
    }
    if (fmt == ML_AN_JSON && r->nan > 1)
        fputs("}\n", out);
    if (!rc && ferror(out))
        rc = -EIO;
    return rc;
}

int ml_an_html_sections(struct ml_an_run *r, FILE *out)
{
    int rc = 0;

    for (int a = 0; a < r->nan && !rc; a++)
        if (r->an[a]->html)
            rc = r->an[a]->html(r->st[a], out);
    return rc;
}

void ml_an_opts_init(struct ml_an_opts *o)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);

    memset(o, 0, sizeof(*o));
    o->out = stdout;
    o->warn = stderr;
    o->fmt = ML_AN_TABLE;
    o->jobs = n > 1 ? (n > 16 ? 16 : (int)n) : 1;
    o->l1 = (struct ml_an_level){32 << 10, 8};
    o->l2 = (struct ml_an_level){1 << 20, 16};
    o->llc = (struct ml_an_level){32 << 20, 16};
    o->line = 64;
    o->top = 10;
    o->lru_pages = 128;
    ml_an_sysfs_caches(o);
}
