/* Analysis 'io': memory traffic of I/O calls versus the CPU's, per fd kind, with request-size
 * distributions. */
#include "analyze/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/*
 * An I/O call moves `transferred` bytes between a user buffer and the
 * kernel: reads (read, pread, readv, recv*) write that much memory, writes
 * (write, pwrite, writev, send*) read it. The CPU's traffic is that of the
 * access records (size x weight). readv/writev and recvmsg/sendmsg count one
 * request per buffer (iovec element), as the trace records them.
 */
enum { CPU_RD, CPU_WR, IO_IN, IO_OUT, IO_CALLS, RW };

#define NKIND  7  /* enum ml_fd_kind */
#define NSBINS 34 /* request sizes: 0, then [2^(b-1), 2^b - 1] */

struct kstat {
    uint64_t calls, requested, transferred, errors;
    uint64_t bins[NSBINS];
};

struct ttr {
    uint32_t pid;
    struct kstat k[NKIND][2]; /* [kind][0 in: memory written, 1 out: memory read] */
};

struct io {
    const struct ml_an_run *run;
    struct ml_rows rows;
    struct ttr *tr;
    int ntr;
};

static void *start(const struct ml_an_run *run)
{
    struct io *s = calloc(1, sizeof(*s));

    if (!s)
        return NULL;
    s->run = run;
    ml_rows_init(&s->rows, RW);
    return s;
}

static int begin(void *st, const struct ml_an_input *in)
{
    struct io *s = st;
    struct ttr *t = realloc(s->tr, (size_t)(s->ntr + 1) * sizeof(*t));

    if (!t)
        return -ENOMEM;
    s->tr = t;
    memset(&t[s->ntr], 0, sizeof(*t));
    t[s->ntr++].pid = in->info->hdr.pid;
    return 0;
}

static int is_in(unsigned call)
{
    return call == ML_IO_READ || call == ML_IO_PREAD || call == ML_IO_READV || call == ML_IO_RECV ||
           call == ML_IO_RECVFROM || call == ML_IO_RECVMSG;
}

static unsigned sbin(uint64_t n)
{
    unsigned b = n ? 64 - (unsigned)__builtin_clzll(n) : 0;

    return b < NSBINS ? b : NSBINS - 1;
}

static int record(void *st, const struct ml_an_input *in, const struct ml_trace_rec *r, size_t n)
{
    struct io *s = st;
    struct ttr *t = &s->tr[s->ntr - 1];
    uint32_t thr = UINT32_MAX;
    uint64_t *c = NULL;

    for (size_t i = 0; i < n; i++) {
        const struct ml_trace_rec *x = &r[i];
        uint64_t bytes;
        if (!ml_ev_is_access(x->kind) && x->kind != ML_EV_IO)
            continue;
        if (x->thread != thr || x->kind == ML_EV_IO) {
            thr = x->thread;
            if (!(c = ml_rows_at(&s->rows, in->thread_base + thr, ml_an_key(in, x))))
                return -ENOMEM;
        }
        if (x->kind == ML_EV_IO) {
            unsigned call = x->aux2 & 0xff, kind = (x->aux2 >> 8) & 0xff, dir = !is_in(call);
            struct kstat *k = &t->k[kind < NKIND ? kind : ML_FD_OTHER][dir];
            k->calls++;
            k->requested += x->size;
            k->transferred += x->aux;
            k->errors += x->size && !x->aux;
            k->bins[sbin(x->size)]++;
            c[dir ? IO_OUT : IO_IN] += x->aux;
            c[IO_CALLS]++;
            thr = UINT32_MAX; /* its row may differ (--by io) */
            continue;
        }
        bytes = (uint64_t)x->size * x->weight;
        if (x->kind != ML_EV_STORE)
            c[CPU_RD] += bytes;
        if (x->kind != ML_EV_LOAD)
            c[CPU_WR] += bytes;
    }
    return 0;
}

struct rep {
    struct io *s;
    struct ml_tab *t;
};

static int visit(void *arg, int tr, uint32_t g, uint32_t k, const uint64_t *c)
{
    struct rep *p = arg;
    uint64_t cpu = c[CPU_RD] + c[CPU_WR], io = c[IO_IN] + c[IO_OUT];
    int rc = ml_tab_who(p->t, p->s->run, tr, g, k);

    rc |= ml_tab_u64(p->t, c[CPU_RD]);
    rc |= ml_tab_u64(p->t, c[CPU_WR]);
    rc |= ml_tab_u64(p->t, c[IO_CALLS]);
    rc |= ml_tab_u64(p->t, c[IO_IN]);
    rc |= ml_tab_u64(p->t, c[IO_OUT]);
    rc |= ml_tab_f64(p->t, cpu + io ? (double)io / (double)(cpu + io) : 0);
    return rc ? -ENOMEM : 0;
}

static int build(struct io *s, struct ml_tab **tabs)
{
    struct rep p = {s, NULL};
    int rc;

    tabs[1] = ml_tab_new("kinds",
                         "I/O calls per fd kind: in = reads (the kernel writes memory), out = "
                         "writes (it reads memory); request sizes as the calls asked",
                         "pid:u fd_kind direction calls:u bytes_requested:u bytes_transferred:u "
                         "avg_request:f avg_transferred:f failed:u");
    tabs[2] = ml_tab_new("sizes", "request-size distribution per fd kind and direction",
                         "pid:u fd_kind direction size_lo:u size_hi:u count:u cdf:p");
    tabs[0] = p.t = ml_tab_new("traffic",
                               "memory traffic of the CPU (access records) and of I/O calls, per "
                               "thread and marker",
                               "pid:u thread tid:u marker cpu_bytes_read:u cpu_bytes_written:u "
                               "io_calls:u io_bytes_in:u io_bytes_out:u io_share:p");
    if (!tabs[0] || !tabs[1] || !tabs[2])
        return -ENOMEM;
    rc = 0;
    for (int i = 0; i < s->ntr && !rc; i++)
        for (unsigned kind = 0; kind < NKIND; kind++)
            for (int dir = 0; dir < 2; dir++) {
                const struct kstat *k = &s->tr[i].k[kind][dir];
                uint64_t cum = 0;
                if (!k->calls)
                    continue;
                rc |= ml_tab_u64(tabs[1], s->tr[i].pid);
                rc |= ml_tab_str(tabs[1], ml_fd_kind_name(kind));
                rc |= ml_tab_str(tabs[1], dir ? "out" : "in");
                rc |= ml_tab_u64(tabs[1], k->calls);
                rc |= ml_tab_u64(tabs[1], k->requested);
                rc |= ml_tab_u64(tabs[1], k->transferred);
                rc |= ml_tab_f64(tabs[1], (double)k->requested / (double)k->calls);
                rc |= ml_tab_f64(tabs[1], (double)k->transferred / (double)k->calls);
                rc |= ml_tab_u64(tabs[1], k->errors);
                for (unsigned b = 0; b < NSBINS; b++) {
                    if (!k->bins[b])
                        continue;
                    cum += k->bins[b];
                    rc |= ml_tab_u64(tabs[2], s->tr[i].pid);
                    rc |= ml_tab_str(tabs[2], ml_fd_kind_name(kind));
                    rc |= ml_tab_str(tabs[2], dir ? "out" : "in");
                    rc |= ml_tab_u64(tabs[2], b ? 1ull << (b - 1) : 0);
                    rc |= ml_tab_u64(tabs[2], b ? (1ull << b) - 1 : 0);
                    rc |= ml_tab_u64(tabs[2], k->bins[b]);
                    rc |= ml_tab_f64(tabs[2], (double)cum / (double)k->calls);
                }
            }
    if (rc)
        return -ENOMEM;
    return ml_rows_visit(&s->rows, s->run, visit, &p);
}

static int report(void *st, FILE *out, enum ml_an_format fmt)
{
    struct ml_tab *tabs[3] = {0};
    int rc = build(st, tabs);

    if (rc) {
        for (int i = 0; i < 3; i++)
            ml_tab_free(tabs[i]);
        return rc;
    }
    return ml_tab_print(out, fmt, tabs, 3, NULL);
}

static int html(void *st, FILE *out)
{
    struct ml_tab *tabs[3] = {0};
    int rc = build(st, tabs);

    if (!rc) {
        fprintf(out, "<h2>I/O versus CPU memory traffic</h2>\n");
        for (int i = 0; i < 3 && !rc; i++)
            rc = ml_tab_html(out, tabs[i]);
    }
    for (int i = 0; i < 3; i++)
        ml_tab_free(tabs[i]);
    return rc;
}

static void io_free(void *st)
{
    struct io *s = st;

    if (!s)
        return;
    ml_rows_free(&s->rows);
    free(s->tr);
    free(s);
}

const struct ml_analysis ml_an_io = {
    .name = "io",
    .summary = "memory traffic of I/O calls versus the CPU's per fd kind, request-size "
               "distributions",
    .start = start,
    .begin = begin,
    .record = record,
    .report = report,
    .html = html,
    .free = io_free,
};
