/* Analysis 'summary': records, loads, stores and bytes per thread and per marker interval. */
#include "analyze/analyze.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/*
 * Intervals, per thread: a region's from its BEGIN to the matching END on
 * that thread (nested and recursive entries counted once, inclusively); a
 * mark's phase from MEMLENS_MARK("x") to the thread's next mark. A record
 * counts once for its thread, once for every region open on it and once for
 * its phase. Loads and stores count accesses (a record's weight); bytes are
 * size x weight; an atomic read-modify-write is a load and a store.
 */

struct counts {
    uint64_t records, loads, stores, bytes_read, bytes_written;
};

struct thr {
    uint32_t index, tid;
    int seen;
    struct counts all;
    struct counts *by_marker; /* [nmarkers] */
    unsigned char *entered;   /* [nmarkers] the region was open on this thread */
    uint32_t *depth;          /* [nmarkers] open depth of each region */
    uint32_t *open;           /* open regions */
    uint32_t nopen;
    uint32_t phase; /* marker of the current mark phase, or ML_EV_NOID */
    uint64_t waits, wait_ticks, dropped, faults;
};

struct row {
    uint32_t thread; /* UINT32_MAX: all threads */
    uint32_t tid;
    char *marker; /* "all", "region:<name>", "mark:<name>" */
    struct counts c;
};

struct tsum { /* one trace */
    char *path;
    uint32_t pid, ppid;
    uint64_t records, markers, events, faults, dropped, waits, wait_ticks, lost;
    uint64_t raw, stored, file;
    double seconds, wait_ms, writer_s;
    uint64_t raw_words, end_dropped, self_encoded;
    int ended;
    uint32_t end_reason, end_signal;
    size_t problems;
    int pfn;
    struct row *rows;
    size_t nrows;
};

struct summary {
    struct tsum *traces;
    size_t ntraces;
    /* the trace being read */
    const struct ml_trace *t;
    struct thr *thr;
    uint32_t nthr, nmarkers;
    uint64_t t_first, t_last;
    int have_time;
};

static void *start(const struct ml_an_run *run)
{
    (void)run;
    return calloc(1, sizeof(struct summary));
}

static struct thr *thread_of(struct summary *s, uint32_t index)
{
    if (index >= s->nthr) {
        uint32_t n = index + 1;
        struct thr *v = realloc(s->thr, n * sizeof(*v));
        if (!v)
            return NULL;
        memset(v + s->nthr, 0, (n - s->nthr) * sizeof(*v));
        s->thr = v;
        s->nthr = n;
    }
    if (!s->thr[index].seen) {
        struct thr *t = &s->thr[index];
        t->by_marker = calloc(s->nmarkers + 1, sizeof(*t->by_marker));
        t->entered = calloc(s->nmarkers + 1, 1);
        t->depth = calloc(s->nmarkers + 1, sizeof(*t->depth));
        t->open = calloc(s->nmarkers + 1, sizeof(*t->open));
        if (!t->by_marker || !t->entered || !t->depth || !t->open)
            return NULL;
        t->seen = 1;
        t->index = index;
        t->tid = ml_trace_thread_tid(s->t, index);
        t->phase = ML_EV_NOID;
    }
    return &s->thr[index];
}

static int begin(void *st, const struct ml_an_input *in)
{
    struct summary *s = st;

    s->t = in->trace;
    s->nmarkers = ml_trace_nmarkers(in->trace);
    s->nthr = 0;
    s->thr = NULL;
    s->have_time = 0;
    return 0;
}

static void add(struct counts *c, const struct counts *d)
{
    c->records += d->records;
    c->loads += d->loads;
    c->stores += d->stores;
    c->bytes_read += d->bytes_read;
    c->bytes_written += d->bytes_written;
}

/* Adds a thread's counts of a batch to its total and to every interval open on it. */
static void flush(struct thr *t, const struct counts *d)
{
    if (!t || !d->records)
        return;
    add(&t->all, d);
    for (uint32_t k = 0; k < t->nopen; k++)
        add(&t->by_marker[t->open[k]], d);
    if (t->phase != ML_EV_NOID)
        add(&t->by_marker[t->phase], d);
}

static int record(void *st, const struct ml_an_input *in, const struct ml_trace_rec *r, size_t n)
{
    struct summary *s = st;
    struct thr *t = NULL;
    struct counts d = {0};

    (void)in;
    if (!n)
        return 0;
    /* Batches are in time order. */
    if (!s->have_time || r[0].time < s->t_first)
        s->t_first = r[0].time;
    if (!s->have_time || r[n - 1].time > s->t_last)
        s->t_last = r[n - 1].time;
    s->have_time = 1;
    /*
     * The driver delivers markers alone, so the intervals open on a thread
     * do not change within a batch of accesses: counts are added up per run
     * of one thread and then to each of its intervals.
     */
    for (size_t i = 0; i < n; i++) {
        const struct ml_trace_rec *x = &r[i];
        if (!t || t->index != x->thread) {
            flush(t, &d);
            memset(&d, 0, sizeof(d));
            t = thread_of(s, x->thread);
            if (!t)
                return -ENOMEM;
        }
        if (ml_ev_is_access(x->kind)) {
            uint64_t bytes = (uint64_t)x->size * x->weight;
            d.records++;
            if (x->kind != ML_EV_STORE) {
                d.loads += x->weight;
                d.bytes_read += bytes;
            }
            if (x->kind != ML_EV_LOAD) {
                d.stores += x->weight;
                d.bytes_written += bytes;
            }
            continue;
        }
        flush(t, &d);
        memset(&d, 0, sizeof(d));
        if (ml_ev_is_marker(x->kind)) {
            uint32_t m = x->aux2;
            s->traces[s->ntraces - 1].markers++;
            if (m >= s->nmarkers)
                continue;
            if (x->kind == ML_EV_REGION_BEGIN && t->depth[m]++ == 0) {
                t->open[t->nopen++] = m;
                t->entered[m] = 1;
            } else if (x->kind == ML_EV_REGION_END && t->depth[m] && --t->depth[m] == 0) {
                for (uint32_t k = 0; k < t->nopen; k++)
                    if (t->open[k] == m)
                        t->open[k] = t->open[--t->nopen];
            } else if (x->kind == ML_EV_MARK)
                t->phase = m;
            continue;
        }
        s->traces[s->ntraces - 1].events++;
        switch (x->kind) {
        case ML_EV_THREAD_START:
            t->tid = (uint32_t)x->aux;
            break;
        case ML_EV_WAIT:
            t->waits++;
            t->wait_ticks += x->aux;
            break;
        case ML_EV_DROP:
            t->dropped += x->aux;
            break;
        case ML_EV_PAGE_FAULT:
            t->faults++;
            break;
        default:
            break;
        }
    }
    flush(t, &d);
    return 0;
}

static int add_row(struct tsum *ts, uint32_t thread, uint32_t tid, const char *kind,
                   const char *name, const struct counts *c)
{
    size_t len = strlen(kind) + strlen(name) + 2;
    struct row *v;

    /* One row per name: regions of one name in several modules add up. */
    for (size_t i = 0; i < ts->nrows; i++) {
        struct row *r = &ts->rows[i];
        if (r->thread == thread && !strncmp(r->marker, kind, strlen(kind)) &&
            r->marker[strlen(kind)] == ':' && !strcmp(r->marker + strlen(kind) + 1, name)) {
            add(&r->c, c);
            return 0;
        }
    }
    v = realloc(ts->rows, (ts->nrows + 1) * sizeof(*v));
    if (!v)
        return -ENOMEM;
    ts->rows = v;
    v[ts->nrows].thread = thread;
    v[ts->nrows].tid = tid;
    v[ts->nrows].c = *c;
    v[ts->nrows].marker = malloc(len);
    if (!v[ts->nrows].marker)
        return -ENOMEM;
    if (*kind)
        snprintf(v[ts->nrows].marker, len, "%s:%s", kind, name);
    else
        snprintf(v[ts->nrows].marker, len, "%s", name);
    ts->nrows++;
    return 0;
}

static void free_threads(struct summary *s)
{
    for (uint32_t i = 0; i < s->nthr; i++) {
        free(s->thr[i].by_marker);
        free(s->thr[i].entered);
        free(s->thr[i].depth);
        free(s->thr[i].open);
    }
    free(s->thr);
    s->thr = NULL;
    s->nthr = 0;
}

/* Closes the trace being read: its rows, then its per-thread state is freed. */
static int finish_trace(struct summary *s)
{
    struct tsum *ts = &s->traces[s->ntraces - 1];
    struct counts total = {0};
    int rc = 0;

    for (uint32_t i = 0; i < s->nthr && !rc; i++) {
        struct thr *t = &s->thr[i];
        if (!t->seen)
            continue;
        rc = add_row(ts, i, t->tid, "", "all", &t->all);
        add(&total, &t->all);
        for (uint32_t m = 0; m < s->nmarkers && !rc; m++) {
            const struct ml_trace_marker *mk = ml_trace_marker(s->t, m);
            const char *kind = mk->kind == ML_MK_REGION ? "region"
                               : mk->kind == ML_MK_MARK ? "mark"
                                                        : NULL;
            if (kind && (t->by_marker[m].records || t->entered[m] || t->phase == m))
                rc = add_row(ts, i, t->tid, kind, mk->name, &t->by_marker[m]);
        }
        ts->waits += t->waits;
        ts->wait_ticks += t->wait_ticks;
        ts->dropped += t->dropped;
        ts->faults += t->faults;
    }
    /* The END count is exact; a drop record may itself have been in a dropped buffer. */
    if (ts->ended && ts->end_dropped > ts->dropped)
        ts->dropped = ts->end_dropped;
    if (!rc)
        rc = add_row(ts, UINT32_MAX, 0, "", "all", &total);
    free_threads(s);
    if (s->have_time)
        ts->seconds = (ml_trace_ns(s->t, s->t_last) - ml_trace_ns(s->t, s->t_first)) / 1e9;
    ts->wait_ms = (ml_trace_ns(s->t, ts->wait_ticks) - ml_trace_ns(s->t, 0)) / 1e6;
    return rc;
}

static int begin_trace(void *st, const struct ml_an_input *in)
{
    struct summary *s = st;
    struct tsum *v, *ts;

    v = realloc(s->traces, (s->ntraces + 1) * sizeof(*v));
    if (!v)
        return -ENOMEM;
    s->traces = v;
    ts = &v[s->ntraces++];
    memset(ts, 0, sizeof(*ts));
    ts->path = strdup(in->info->path);
    if (!ts->path)
        return -ENOMEM;
    ts->pid = in->info->hdr.pid;
    ts->ppid = in->info->hdr.ppid;
    ts->raw = in->info->data_raw;
    ts->stored = in->info->data_stored;
    ts->file = in->info->file_size;
    ts->records = in->info->records;
    ts->ended = in->info->ended;
    ts->end_reason = in->info->end.reason;
    ts->end_signal = in->info->end.signal;
    ts->lost = in->info->end.lost;
    ts->writer_s = in->info->end.writer_ns / 1e9;
    ts->raw_words = in->info->end.raw_words;
    ts->self_encoded = in->info->end.self_encoded;
    ts->end_dropped = in->info->end.dropped;
    ts->problems = in->info->nproblems;
    ts->pfn = !!(in->info->hdr.flags & ML_TF_PFN);
    return begin(st, in);
}

static int end(void *st, const struct ml_an_input *in)
{
    (void)in;
    return finish_trace(st);
}

static double per_record(uint64_t bytes, uint64_t records)
{
    return records ? (double)bytes / (double)records : 0;
}

static void json_str(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(out, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(out, "\\u%04x", *s);
        else
            fputc(*s, out);
    }
    fputc('"', out);
}

static const char *reason(const struct tsum *ts)
{
    static char buf[32];

    if (!ts->ended)
        return "incomplete (no end record: the process was killed or is still running)";
    if (ts->end_reason == ML_END_SIGNAL) {
        snprintf(buf, sizeof(buf), "signal %u", ts->end_signal);
        return buf;
    }
    return ts->end_reason == ML_END_EXEC ? "exec" : "exit";
}

static void thread_name(char *buf, size_t n, uint32_t thread)
{
    if (thread == UINT32_MAX)
        snprintf(buf, n, "all");
    else
        snprintf(buf, n, "%u", thread);
}

static int report(void *st, FILE *out, enum ml_an_format fmt)
{
    struct summary *s = st;

    if (fmt == ML_AN_CSV)
        fprintf(out, "pid,thread,tid,marker,records,loads,stores,bytes_read,bytes_written\n");
    if (fmt == ML_AN_JSON)
        fprintf(out, "{\"traces\": [");
    for (size_t i = 0; i < s->ntraces; i++) {
        const struct tsum *ts = &s->traces[i];
        char th[16];
        if (fmt == ML_AN_TABLE) {
            fprintf(out, "trace %s: pid %u", ts->path, ts->pid);
            if (ts->ppid)
                fprintf(out, " (forked from %u)", ts->ppid);
            fprintf(out, ", %.3f s, %s\n", ts->seconds, reason(ts));
            fprintf(out,
                    "  %llu records (%llu markers, %llu events), %.3f B/record raw, %.3f "
                    "B/record compressed (file %llu bytes)\n",
                    (unsigned long long)ts->records, (unsigned long long)ts->markers,
                    (unsigned long long)ts->events, per_record(ts->raw, ts->records),
                    per_record(ts->file, ts->records), (unsigned long long)ts->file);
            fprintf(
                out,
                "  dropped %llu words of records, %llu waits for the writer (%.3f ms), %llu page "
                "faults%s, %llu damaged raw records, %zu problems\n",
                (unsigned long long)ts->dropped, (unsigned long long)ts->waits, ts->wait_ms,
                (unsigned long long)ts->faults, ts->pfn ? " (with frames)" : "",
                (unsigned long long)ts->lost, ts->problems);
            fprintf(out, "%-6s %-8s %-24s %14s %14s %14s %16s %16s\n", "thread", "tid", "marker",
                    "records", "loads", "stores", "bytes_read", "bytes_written");
        } else if (fmt == ML_AN_JSON) {
            fprintf(out, "%s\n {\"path\": ", i ? "," : "");
            json_str(out, ts->path);
            fprintf(out, ", \"pid\": %u, \"ppid\": %u, \"seconds\": %.6f, \"end\": ", ts->pid,
                    ts->ppid, ts->seconds);
            json_str(out, reason(ts));
            fprintf(
                out,
                ", \"records\": %llu, \"markers\": %llu, \"events\": %llu, "
                "\"raw_bytes\": %llu, \"file_bytes\": %llu, \"raw_bytes_per_record\": %.4f, "
                "\"compressed_bytes_per_record\": %.4f, \"dropped\": %llu, \"waits\": %llu, "
                "\"wait_ms\": %.3f, \"page_faults\": %llu, \"damaged\": %llu, \"problems\": %zu, "
                "\"writer_seconds\": %.6f, \"buffer_words\": %llu, \"self_encoded\": %llu, "
                "\"rows\": [",
                (unsigned long long)ts->records, (unsigned long long)ts->markers,
                (unsigned long long)ts->events, (unsigned long long)ts->raw,
                (unsigned long long)ts->file, per_record(ts->raw, ts->records),
                per_record(ts->file, ts->records), (unsigned long long)ts->dropped,
                (unsigned long long)ts->waits, ts->wait_ms, (unsigned long long)ts->faults,
                (unsigned long long)ts->lost, ts->problems, ts->writer_s,
                (unsigned long long)ts->raw_words, (unsigned long long)ts->self_encoded);
        }
        for (size_t k = 0; k < ts->nrows; k++) {
            const struct row *r = &ts->rows[k];
            thread_name(th, sizeof(th), r->thread);
            if (fmt == ML_AN_TABLE) {
                char tid[16] = "-";
                if (r->thread != UINT32_MAX)
                    snprintf(tid, sizeof(tid), "%u", r->tid);
                fprintf(out, "%-6s %-8s %-24s %14llu %14llu %14llu %16llu %16llu\n", th, tid,
                        r->marker, (unsigned long long)r->c.records, (unsigned long long)r->c.loads,
                        (unsigned long long)r->c.stores, (unsigned long long)r->c.bytes_read,
                        (unsigned long long)r->c.bytes_written);
            } else if (fmt == ML_AN_CSV) {
                fprintf(out, "%u,%s,", ts->pid, th);
                if (r->thread != UINT32_MAX)
                    fprintf(out, "%u", r->tid);
                fputc(',', out);
                /* Names are quoted when CSV needs it. */
                if (strpbrk(r->marker, ",\"\n")) {
                    fputc('"', out);
                    for (const char *p = r->marker; *p; p++)
                        fprintf(out, *p == '"' ? "\"\"" : "%c", *p);
                    fputc('"', out);
                } else
                    fputs(r->marker, out);
                fprintf(out, ",%llu,%llu,%llu,%llu,%llu\n", (unsigned long long)r->c.records,
                        (unsigned long long)r->c.loads, (unsigned long long)r->c.stores,
                        (unsigned long long)r->c.bytes_read,
                        (unsigned long long)r->c.bytes_written);
            } else {
                fprintf(out, "%s\n  {\"thread\": ", k ? "," : "");
                if (r->thread == UINT32_MAX)
                    fprintf(out, "\"all\", \"tid\": null");
                else
                    fprintf(out, "%u, \"tid\": %u", r->thread, r->tid);
                fprintf(out, ", \"marker\": ");
                json_str(out, r->marker);
                fprintf(out,
                        ", \"records\": %llu, \"loads\": %llu, \"stores\": %llu, \"bytes_read\": "
                        "%llu, \"bytes_written\": %llu}",
                        (unsigned long long)r->c.records, (unsigned long long)r->c.loads,
                        (unsigned long long)r->c.stores, (unsigned long long)r->c.bytes_read,
                        (unsigned long long)r->c.bytes_written);
            }
        }
        if (fmt == ML_AN_JSON)
            fprintf(out, "]}");
        else if (fmt == ML_AN_TABLE && i + 1 < s->ntraces)
            fputc('\n', out);
    }
    if (fmt == ML_AN_JSON)
        fprintf(out, "\n]}\n");
    return ferror(out) ? -EIO : 0;
}

static void sum_free(void *st)
{
    struct summary *s = st;

    if (!s)
        return;
    free_threads(s);
    for (size_t i = 0; i < s->ntraces; i++) {
        for (size_t k = 0; k < s->traces[i].nrows; k++)
            free(s->traces[i].rows[k].marker);
        free(s->traces[i].rows);
        free(s->traces[i].path);
    }
    free(s->traces);
    free(s);
}

const struct ml_analysis ml_an_summary = {
    .name = "summary",
    .summary = "records, loads, stores and bytes per thread, region and mark phase",
    .start = start,
    .begin = begin_trace,
    .record = record,
    .end = end,
    .report = report,
    .free = sum_free,
};
