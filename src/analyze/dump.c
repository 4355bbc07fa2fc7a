/* Analysis 'dump': every record as one line of text (for reading, grep and tests). */
#include "analyze/analyze.h"

#include <errno.h>
#include <stdlib.h>

/*
 * Columns: pid, thread, time (ns since the trace began), kind, address
 * (hex), size, weight, site id and its file:line, then what the record
 * names: the marker for marker records, "fd=<n> <kind> <call> got=<bytes>"
 * for I/O, "aux=<n> aux2=<n>" for other events. A dash marks an empty field.
 * Dump writes as it reads (nothing is kept): its report prints nothing more.
 */
struct dump {
    FILE *out;
};

static void *start(const struct ml_an_run *run)
{
    struct dump *d = calloc(1, sizeof(*d));

    if (d)
        d->out = ml_an_options(run)->out ? ml_an_options(run)->out : stdout;
    return d;
}

static int record(void *st, const struct ml_an_input *in, const struct ml_trace_rec *r, size_t n)
{
    struct dump *d = st;

    for (size_t i = 0; i < n; i++) {
        const struct ml_trace_rec *x = &r[i];
        const struct ml_trace_site *s =
            x->site != ML_EV_NOID ? ml_trace_site(in->trace, x->site) : NULL;
        fprintf(d->out, "%u %u %.0f %s %#llx %u %u ", in->info->hdr.pid, x->thread,
                ml_trace_ns(in->trace, x->time), ml_ev_kind_name(x->kind),
                (unsigned long long)x->addr, x->size, x->weight);
        if (s)
            fprintf(d->out, "%u %s:%u ", x->site, *s->file ? s->file : "?", s->line);
        else
            fprintf(d->out, "- - ");
        if (ml_ev_is_marker(x->kind)) {
            const struct ml_trace_marker *m = ml_trace_marker(in->trace, x->aux2);
            fprintf(d->out, "%s:%s\n", m ? ml_marker_kind_name(m->kind) : "?", m ? m->name : "?");
        } else if (x->kind == ML_EV_IO) {
            fprintf(d->out, "fd=%u %s %s got=%llu\n", x->aux2 >> 16,
                    ml_fd_kind_name((x->aux2 >> 8) & 0xff), ml_io_call_name(x->aux2 & 0xff),
                    (unsigned long long)x->aux);
        } else if (!ml_ev_is_access(x->kind)) {
            fprintf(d->out, "aux=%llu aux2=%u\n", (unsigned long long)x->aux, x->aux2);
        } else {
            fprintf(d->out, "-\n");
        }
    }
    return ferror(d->out) ? -EIO : 0;
}

static int report(void *st, FILE *out, enum ml_an_format fmt)
{
    (void)st;
    (void)out;
    (void)fmt;
    return 0;
}

const struct ml_analysis ml_an_dump = {
    .name = "dump",
    .summary = "every record as a line of text: pid thread time_ns kind addr size weight site "
               "file:line what",
    .start = start,
    .record = record,
    .report = report,
    .free = free,
};
