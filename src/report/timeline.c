/* Timelines: per interval growth of each region's figures per thread, as a table and as CSV. */
#include "report/timeline.h"
#include "format/csv.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Adds the growth from *last to cur into d and carries the larger value on (see the header). */
static void grow(uint64_t cur, uint64_t *last, uint64_t *d)
{
    if (cur > *last) {
        *d += cur - *last;
        *last = cur;
    }
}

int ml_timeline_build(const struct ml_report *r, struct ml_timeline **out)
{
    const struct ml_profile *p = r->prof;
    uint64_t nr = p->nregions, nt = p->nthreads, ns, k = 0;
    struct ml_timeline *t = NULL;
    struct ml_tl_delta *last = NULL;
    int64_t *idx = NULL;
    int rc = -ENOMEM;

    *out = NULL;
    if (!p->timeline)
        return 0;
    ns = p->timeline->nsnaps;
    t = calloc(1, sizeof(*t));
    /* The parser bounds nr * nt by the file size (each thread record holds nr rstats). */
    idx = malloc((nr * nt + 1) * sizeof(*idx));
    if (!t || !idx)
        goto out;
    t->rep = r;
    t->nsnaps = ns;
    t->snaps = p->snaps;
    for (uint64_t i = 0; i < nr * nt; i++)
        idx[i] = -1;
    for (uint64_t i = 0; i < ns; i++)
        for (uint64_t j = 0; j < p->snaps[i].npoints; j++) {
            const struct ml_prof_tl_point *pt = &p->snaps[i].points[j];
            idx[pt->region * nt + (uint64_t)ml_profile_thread_pos(p, pt->thread)] = 0;
        }
    /* Series order: by region, its threads in order, then its total. */
    for (uint64_t reg = 0; reg < nr; reg++) {
        uint64_t first = t->nseries;
        for (uint64_t th = 0; th < nt; th++)
            if (idx[reg * nt + th] == 0)
                idx[reg * nt + th] = (int64_t)t->nseries++;
        if (t->nseries > first)
            t->nseries++;
    }
    if (ns && t->nseries > SIZE_MAX / sizeof(*t->store) / ns)
        goto out;
    t->series = calloc(t->nseries + 1, sizeof(*t->series));
    t->store = calloc(t->nseries * ns + 1, sizeof(*t->store));
    last = calloc(t->nseries + 1, sizeof(*last));
    if (!t->series || !t->store || !last)
        goto out;
    for (uint64_t reg = 0; reg < nr; reg++) {
        uint64_t first = k;
        for (uint64_t th = 0; th < nt; th++)
            if (idx[reg * nt + th] >= 0) {
                t->series[k].region = (uint32_t)reg;
                t->series[k].thread = (int64_t)th;
                t->series[k].d = t->store + k * ns;
                k++;
            }
        if (k > first) {
            t->series[k].region = (uint32_t)reg;
            t->series[k].thread = -1;
            t->series[k].d = t->store + k * ns;
            k++;
        }
    }
    for (uint64_t i = 0; i < ns; i++)
        for (uint64_t j = 0; j < p->snaps[i].npoints; j++) {
            const struct ml_prof_tl_point *pt = &p->snaps[i].points[j];
            int64_t s = idx[pt->region * nt + (uint64_t)ml_profile_thread_pos(p, pt->thread)];
            struct ml_tl_delta *d = &t->series[s].d[i], *l = &last[s];
            grow(pt->entries, &l->entries, &d->entries);
            grow(pt->ticks, &l->ticks, &d->ticks);
            grow(pt->bytes_read, &l->bytes_read, &d->bytes_read);
            grow(pt->bytes_written, &l->bytes_written, &d->bytes_written);
            grow(pt->instructions, &l->instructions, &d->instructions);
        }
    /* A total follows its region's thread series. */
    for (uint64_t s = 0; s < t->nseries; s++) {
        struct ml_tl_series *tot = &t->series[s];
        if (tot->thread >= 0)
            continue;
        for (uint64_t q = s;
             q-- > 0 && t->series[q].region == tot->region && t->series[q].thread >= 0;)
            for (uint64_t i = 0; i < ns; i++) {
                const struct ml_tl_delta *a = &t->series[q].d[i];
                tot->d[i].entries += a->entries;
                tot->d[i].ticks += a->ticks;
                tot->d[i].bytes_read += a->bytes_read;
                tot->d[i].bytes_written += a->bytes_written;
                tot->d[i].instructions += a->instructions;
            }
    }
    rc = 0;
out:
    free(idx);
    free(last);
    if (rc) {
        ml_timeline_free(t);
        return rc;
    }
    *out = t;
    return 0;
}

void ml_timeline_free(struct ml_timeline *t)
{
    if (!t)
        return;
    free(t->series);
    free(t->store);
    free(t);
}

double ml_timeline_start(const struct ml_timeline *t, uint64_t i)
{
    uint64_t hz = t->rep->prof->hdr.tsc_hz;

    if (!hz)
        return -1;
    return i ? (double)t->snaps[i - 1].tick / (double)hz : 0;
}

double ml_timeline_end(const struct ml_timeline *t, uint64_t i)
{
    uint64_t hz = t->rep->prof->hdr.tsc_hz;

    return hz ? (double)t->snaps[i].tick / (double)hz : -1;
}

/* Whether series s is shown under o: its region passes the filter, and its kind of row. */
static int series_shown(const struct ml_timeline *t, const struct ml_tl_series *s,
                        const struct ml_report_opts *o)
{
    if (!ml_report_region_shown(t->rep, s->region, o))
        return 0;
    return o->rows == ML_REPORT_TOTALS ? s->thread < 0 : 1;
}

/* Threads of the region of total series s: a lone thread's total repeats it. */
static uint64_t region_threads(const struct ml_timeline *t, uint64_t s)
{
    uint32_t reg = t->series[s].region;
    uint64_t n = 0;

    while (s-- > 0 && t->series[s].region == reg && t->series[s].thread >= 0)
        n++;
    return n;
}

static int delta_zero(const struct ml_tl_delta *d)
{
    return !d->entries && !d->ticks && !d->bytes_read && !d->bytes_written && !d->instructions;
}

static double rate(uint64_t bytes, double from, double to)
{
    return from >= 0 && to > from ? (double)bytes / (to - from) / 1e9 : -1;
}

static void table_one(FILE *f, const struct ml_timeline *t, const struct ml_report_opts *o)
{
    const struct ml_profile *p = t->rep->prof;
    const struct ml_prof_timeline *h = p->timeline;
    char b[10][ML_REPORT_CELL], e[ML_REPORT_NAME];
    int w = 6;

    for (uint64_t s = 0; s < t->nseries; s++) {
        int n = (int)strlen(
            ml_report_esc(e, sizeof(e), ml_profile_str(p, p->regions[t->series[s].region])));
        if (n > w)
            w = n;
    }
    fprintf(f, "  timeline: %" PRIu64 " snapshots, every %s", t->nsnaps,
            ml_report_fmt_time(b[0], (double)h->interval_ns / 1e9));
    if (h->interval_ns != h->requested_ns)
        fprintf(f, " (MEMLENS_INTERVAL %s, halved to fit)",
                ml_report_fmt_time(b[0], (double)h->requested_ns / 1e9));
    fputc('\n', f);
    if (h->flags & ML_TL_F_STOPPED)
        fputs("  note: sampling stopped early: one snapshot outgrew the timeline buffer\n", f);
    fprintf(f, "  %-*s  %-6s  %7s  %9s  %9s  %6s  %9s  %9s  %9s  %8s  %8s\n", w, "region", "thread",
            "tid", "from", "to", "execs", "time", "read", "written", "rd GB/s", "wr GB/s");
    for (uint64_t s = 0; s < t->nseries; s++) {
        const struct ml_tl_series *se = &t->series[s];
        uint64_t lo = 0, hi = 0;
        char th[16] = "total", tid[32] = "";

        if (!series_shown(t, se, o) ||
            (se->thread < 0 && o->rows != ML_REPORT_TOTALS && region_threads(t, s) < 2))
            continue;
        /* Only the span in which the series changed: idle threads do not fill the screen. */
        while (lo < t->nsnaps && delta_zero(&se->d[lo]))
            lo++;
        for (uint64_t i = lo; i < t->nsnaps; i++)
            if (!delta_zero(&se->d[i]))
                hi = i + 1;
        if (se->thread >= 0) {
            snprintf(th, sizeof(th), "%u", p->threads[se->thread].index);
            ml_report_tid(p, (uint64_t)se->thread, tid, sizeof(tid));
        }
        for (uint64_t i = lo; i < hi; i++) {
            const struct ml_tl_delta *d = &se->d[i];
            double from = ml_timeline_start(t, i), to = ml_timeline_end(t, i);
            double sec = p->hdr.tsc_hz ? (double)d->ticks / (double)p->hdr.tsc_hz : -1;
            fprintf(f, "  %-*s  %-6s  %7s  %9s  %9s  %6s  %9s  %9s  %9s  %8s  %8s\n", w,
                    ml_report_esc(e, sizeof(e), ml_profile_str(p, p->regions[se->region])), th, tid,
                    ml_report_fmt_time(b[0], from), ml_report_fmt_time(b[1], to),
                    ml_report_fmt_count(b[2], d->entries), ml_report_fmt_time(b[3], sec),
                    ml_report_fmt_bytes(b[4], d->bytes_read),
                    ml_report_fmt_bytes(b[5], d->bytes_written),
                    ml_report_fmt_gbs(b[6], rate(d->bytes_read, from, to)),
                    ml_report_fmt_gbs(b[7], rate(d->bytes_written, from, to)));
        }
    }
}

static int timeline_profile(FILE *f, const struct ml_report *r, const struct ml_timeline *t,
                            size_t i, const struct ml_report_opts *o)
{
    char e[ML_REPORT_NAME];

    fprintf(f, "%sprofile %s\n", i ? "\n" : "", ml_report_esc(e, sizeof(e), r->name));
    if (!t)
        fputs("  no timeline: run the program with MEMLENS_INTERVAL=100ms\n", f);
    else
        table_one(f, t, o);
    return 0;
}

const struct ml_renderer ml_render_timeline = {.profile = timeline_profile};

static void csv_num(FILE *f, double x, const char *fmt)
{
    fputc(',', f);
    if (x >= 0)
        fprintf(f, fmt, x);
}

static void timeline_csv_begin(FILE *f, const struct ml_report_opts *o)
{
    (void)o;
    fputs("profile,pid,region,thread,tid,interval,start_s,end_s,executions,region_seconds,"
          "instructions,bytes_read,bytes_written,read_gbs,write_gbs\n",
          f);
}

static int timeline_csv_profile(FILE *f, const struct ml_report *r, const struct ml_timeline *t,
                                size_t k, const struct ml_report_opts *o)
{
    const struct ml_profile *p = r->prof;

    (void)k;
    for (uint64_t s = 0; t && s < t->nseries; s++) {
        const struct ml_tl_series *se = &t->series[s];
        if (!series_shown(t, se, o))
            continue;
        for (uint64_t i = 0; i < t->nsnaps; i++) {
            const struct ml_tl_delta *d = &se->d[i];
            double from = ml_timeline_start(t, i), to = ml_timeline_end(t, i);

            ml_csv_str(f, r->name);
            fprintf(f, ",%u,", p->hdr.pid);
            ml_csv_str(f, ml_profile_str(p, p->regions[se->region]));
            if (se->thread >= 0) {
                char tid[32];
                fprintf(f, ",%u,%s", p->threads[se->thread].index,
                        ml_report_tid(p, (uint64_t)se->thread, tid, sizeof(tid)));
            } else {
                fputs(",total,", f);
            }
            fprintf(f, ",%" PRIu64, i);
            csv_num(f, from, "%.9f");
            csv_num(f, to, "%.9f");
            fprintf(f, ",%" PRIu64, d->entries);
            csv_num(f, p->hdr.tsc_hz ? (double)d->ticks / (double)p->hdr.tsc_hz : -1, "%.9f");
            fprintf(f, ",%" PRIu64 ",%" PRIu64 ",%" PRIu64, d->instructions, d->bytes_read,
                    d->bytes_written);
            csv_num(f, rate(d->bytes_read, from, to), "%.6f");
            csv_num(f, rate(d->bytes_written, from, to), "%.6f");
            fputc('\n', f);
        }
    }
    return 0;
}

const struct ml_renderer ml_render_timeline_csv = {.begin = timeline_csv_begin,
                                                   .profile = timeline_csv_profile};
