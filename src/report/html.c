/* HTML report: one self-contained page (inline CSS and SVG, no script) with tables and charts. */
#include "report/timeline.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>

#define CHART_W 760
#define CHART_H 260
#define PAD_L   64
#define PAD_R   16
#define PAD_T   16
#define PAD_B   40

/* Thread colours, reused cyclically; distinguishable in print and for common colour blindness. */
static const char *const palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                      "#9467bd", "#8c564b", "#e377c2", "#17becf"};
#define NPAL (sizeof(palette) / sizeof(palette[0]))

static const char style[] =
    "body{font:14px/1.4 sans-serif;margin:24px;color:#222;max-width:1000px}"
    "h1{font-size:22px}h2{font-size:18px;border-bottom:1px solid #ccc;margin-top:32px}"
    "h3{font-size:15px;margin:20px 0 6px}"
    "table{border-collapse:collapse;font-variant-numeric:tabular-nums}"
    "th,td{padding:2px 10px;text-align:right;border-bottom:1px solid #e4e4e4}"
    "th:first-child,td:first-child{text-align:left}tr.total td{font-weight:bold}"
    "p.meta{color:#555;margin:4px 0}.note{color:#a33}"
    "svg{display:block;margin:4px 0 12px}svg text{font:11px sans-serif;fill:#333}"
    ".axis line,.axis path{stroke:#888;stroke-width:1}.grid{stroke:#eee}"
    "path.tl{fill:none;stroke-width:1.6}path.wr{stroke-dasharray:5 3}"
    "rect.rd{fill:#4878b0}rect.wr{fill:#e0904a}";

/* Writes s with the characters HTML gives a meaning to escaped. */
static void esc(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&':
            fputs("&amp;", f);
            break;
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        case '\'':
            fputs("&#39;", f);
            break;
        default:
            fputc(*s, f);
        }
    }
}

/* A round axis step (1, 2 or 5 times a power of ten) giving about five ticks up to max. */
static double nice_step(double max)
{
    double raw = max / 5, mag, m;

    if (!(raw > 0))
        return 1;
    mag = pow(10, floor(log10(raw)));
    m = raw / mag;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * mag;
}

static const char *region_name(const struct ml_report *r, uint64_t reg)
{
    return ml_profile_str(r->prof, r->prof->regions[reg]);
}

static void summary_row(FILE *f, const struct ml_report *r, uint64_t reg, const char *thread,
                        const char *tid, const struct ml_rstats *s, int total)
{
    char b[8][ML_REPORT_CELL];
    double sec = ml_rstats_seconds(s, r->prof->hdr.tsc_hz);
    const char *open = s->borrowed ? "(" : "", *close = s->borrowed ? ")" : "";

    fprintf(f, "<tr%s><td>", total ? " class=\"total\"" : "");
    esc(f, region_name(r, reg));
    fprintf(f,
            "</td><td>%s</td><td>%s</td><td>%s</td><td>%s%s%s</td><td>%s</td><td>%s</td>"
            "<td>%s</td><td>%s%s%s</td><td>%s%s%s</td></tr>\n",
            thread, tid, ml_report_fmt_count(b[0], s->entries), open, ml_report_fmt_time(b[1], sec),
            close, ml_report_fmt_count(b[2], s->v[ML_F_INSTR]),
            ml_report_fmt_bytes(b[3], ml_rstats_read(s)),
            ml_report_fmt_bytes(b[4], ml_rstats_written(s)), open,
            ml_report_fmt_gbs(b[5], ml_report_gbs(ml_rstats_read(s), sec)), close, open,
            ml_report_fmt_gbs(b[6], ml_report_gbs(ml_rstats_written(s), sec)), close);
}

static void summary(FILE *f, const struct ml_report *r, const struct ml_report_opts *o)
{
    fputs("<h3>Summary</h3>\n<table><tr><th>region</th><th>thread</th><th>tid</th>"
          "<th>execs</th><th>time</th><th>instrs</th><th>read</th><th>written</th>"
          "<th>rd GB/s</th><th>wr GB/s</th></tr>\n",
          f);
    for (uint64_t reg = 0; reg < r->nregions; reg++) {
        uint64_t nact = 0;
        if (!r->totals[reg].active || !ml_report_region_shown(r, reg, o))
            continue;
        for (uint64_t t = 0; t < r->nthreads; t++) {
            const struct ml_rstats *c = ml_report_cell(r, reg, t);
            char idx[16], tid[32];
            if (!c->active)
                continue;
            nact++;
            if (o->rows == ML_REPORT_TOTALS)
                continue;
            snprintf(idx, sizeof(idx), "%u", r->prof->threads[t].index);
            summary_row(f, r, reg, idx, ml_report_tid(r->prof, t, tid, sizeof(tid)), c, 0);
        }
        if (nact > 1 || o->rows == ML_REPORT_TOTALS)
            summary_row(f, r, reg, "total", "", &r->totals[reg], 1);
    }
    fputs("</table>\n", f);
}

/* Horizontal bars: bytes read and written per region, over all threads. */
static void bytes_chart(FILE *f, const struct ml_report *r, const struct ml_report_opts *o)
{
    const int bar = 14, row = 2 * bar + 14, label = 150, right = 90;
    uint64_t max = 1, n = 0;
    int y = 8;

    for (uint64_t reg = 0; reg < r->nregions; reg++) {
        const struct ml_rstats *s = &r->totals[reg];
        if (!s->active || !ml_report_region_shown(r, reg, o))
            continue;
        n++;
        if (ml_rstats_read(s) > max)
            max = ml_rstats_read(s);
        if (ml_rstats_written(s) > max)
            max = ml_rstats_written(s);
    }
    if (!n)
        return;
    fprintf(f,
            "<h3>Bytes per region</h3>\n<svg class=\"bytes\" xmlns=\"http://www.w3.org/2000/svg\" "
            "width=\"%d\" height=\"%d\" role=\"img\">\n",
            CHART_W, (int)(16 + n * row + 20));
    for (uint64_t reg = 0; reg < r->nregions; reg++) {
        const struct ml_rstats *s = &r->totals[reg];
        uint64_t v[2] = {ml_rstats_read(s), ml_rstats_written(s)};
        static const char *const kind[2] = {"rd", "wr"}, *const word[2] = {"read", "written"};

        if (!s->active || !ml_report_region_shown(r, reg, o))
            continue;
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">", label - 8, y + bar + 4);
        esc(f, region_name(r, reg));
        fputs("</text>\n", f);
        for (int k = 0; k < 2; k++) {
            char b[ML_REPORT_CELL];
            double w = (double)v[k] / (double)max * (CHART_W - label - right);
            fprintf(f, "<rect class=\"%s\" data-region=\"", kind[k]);
            esc(f, region_name(r, reg));
            fprintf(f,
                    "\" data-bytes=\"%" PRIu64 "\" x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\">"
                    "<title>",
                    v[k], label, y + k * bar, w, bar - 2);
            esc(f, region_name(r, reg));
            fprintf(f, ": %s %s</title></rect>\n", ml_report_fmt_bytes(b, v[k]), word[k]);
            fprintf(f, "<text x=\"%.1f\" y=\"%d\">%s</text>\n", label + w + 4, y + k * bar + 10, b);
        }
        y += row;
    }
    fprintf(f,
            "<rect class=\"rd\" x=\"%d\" y=\"%d\" width=\"10\" height=\"10\"/><text x=\"%d\" "
            "y=\"%d\">read</text><rect class=\"wr\" x=\"%d\" y=\"%d\" width=\"10\" height=\"10\"/>"
            "<text x=\"%d\" y=\"%d\">written</text>\n</svg>\n",
            label, y + 4, label + 14, y + 13, label + 70, y + 4, label + 84, y + 13);
}

/* One chart per region: read (solid) and write (dashed) GB/s of each thread per interval. */
static void region_chart(FILE *f, const struct ml_timeline *t, uint64_t first, uint64_t end)
{
    const struct ml_report *r = t->rep;
    const struct ml_profile *p = r->prof;
    uint32_t reg = t->series[first].region;
    double tmax = ml_timeline_end(t, t->nsnaps - 1), ymax = 0, ystep, xstep;
    int pw = CHART_W - PAD_L - PAD_R, ph = CHART_H - PAD_T - PAD_B;
    int legend_rows = (int)((end - first + 3) / 4); /* four threads per legend row */

    for (uint64_t s = first; s < end; s++)
        for (uint64_t i = 0; i < t->nsnaps; i++) {
            double dt = ml_timeline_end(t, i) - ml_timeline_start(t, i);
            const struct ml_tl_delta *d = &t->series[s].d[i];
            if (dt <= 0)
                continue;
            if ((double)d->bytes_read / dt / 1e9 > ymax)
                ymax = (double)d->bytes_read / dt / 1e9;
            if ((double)d->bytes_written / dt / 1e9 > ymax)
                ymax = (double)d->bytes_written / dt / 1e9;
        }
    ystep = nice_step(ymax);
    ymax = ymax > 0 ? ceil(ymax / ystep) * ystep : ystep;
    if (!(tmax > 0))
        tmax = 1;
    xstep = nice_step(tmax);

    fputs("<h3>Bandwidth over time: ", f);
    esc(f, region_name(r, reg));
    fputs("</h3>\n<svg class=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" ", f);
    fprintf(f, "width=\"%d\" height=\"%d\" role=\"img\" data-region=\"", CHART_W,
            CHART_H + 8 + 18 * legend_rows);
    esc(f, region_name(r, reg));
    fputs("\">\n<g class=\"axis\">\n", f);
    for (double y = 0; y <= ymax * 1.0001; y += ystep) {
        double py = PAD_T + ph - y / ymax * ph;
        fprintf(f,
                "<line class=\"grid\" x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\"/>"
                "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n",
                PAD_L, PAD_L + pw, py, py, PAD_L - 6, py + 4, y);
    }
    for (double x = 0; x <= tmax * 1.0001; x += xstep) {
        double px = PAD_L + x / tmax * pw;
        fprintf(f,
                "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\"/>"
                "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g</text>\n",
                px, px, PAD_T + ph, PAD_T + ph + 4, px, PAD_T + ph + 16, x);
    }
    fprintf(f,
            "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\"/><line x1=\"%d\" x2=\"%d\" y1=\"%d\" "
            "y2=\"%d\"/>\n<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">time (s)</text>"
            "<text x=\"14\" y=\"%d\" transform=\"rotate(-90 14 %d)\" text-anchor=\"middle\">"
            "GB/s</text>\n</g>\n",
            PAD_L, PAD_L + pw, PAD_T + ph, PAD_T + ph, PAD_L, PAD_L, PAD_T, PAD_T + ph,
            PAD_L + pw / 2, PAD_T + ph + 32, PAD_T + ph / 2, PAD_T + ph / 2);
    for (uint64_t s = first; s < end; s++) {
        const struct ml_tl_series *se = &t->series[s];
        const struct ml_profile_thread *th = &p->threads[se->thread];
        const char *colour = palette[(s - first) % NPAL];

        for (int k = 0; k < 2; k++) {
            fprintf(f,
                    "<path class=\"tl %s\" stroke=\"%s\" data-thread=\"%u\" data-points=\"%" PRIu64
                    "\" d=\"",
                    k ? "wr" : "rd", colour, th->index, t->nsnaps);
            /* One point per interval, at its end: the mean rate over the interval. */
            for (uint64_t i = 0; i < t->nsnaps; i++) {
                double from = ml_timeline_start(t, i), to = ml_timeline_end(t, i);
                uint64_t b = k ? se->d[i].bytes_written : se->d[i].bytes_read;
                double g = to > from ? (double)b / (to - from) / 1e9 : 0;
                fprintf(f, "%s%.1f %.1f", i ? " L" : "M", PAD_L + to / tmax * pw,
                        PAD_T + ph - g / ymax * ph);
            }
            fprintf(f, "\"><title>thread %u (tid %u) %s</title></path>\n", th->index, th->tid,
                    k ? "write" : "read");
        }
        {
            int lx = PAD_L + (int)((s - first) % 4) * 170,
                ly = CHART_H + 12 + 18 * (int)((s - first) / 4);
            fprintf(f,
                    "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"%s\" "
                    "stroke-width=\"2\"/><text x=\"%d\" y=\"%d\">thread %u (tid %u)</text>\n",
                    lx, lx + 20, ly, ly, colour, lx + 24, ly + 4, th->index, th->tid);
        }
    }
    fputs("</svg>\n<p class=\"meta\">solid: read, dashed: written; each point is the mean rate "
          "over one interval</p>\n",
          f);
}

static void timeline_charts(FILE *f, const struct ml_timeline *t, const struct ml_report_opts *o)
{
    const struct ml_prof_timeline *h = t->rep->prof->timeline;
    char b[ML_REPORT_CELL];

    if (!t->rep->prof->hdr.tsc_hz || !t->nsnaps) {
        fputs("<p class=\"note\">the timeline has no clock rate or no snapshot: "
              "no bandwidth over time</p>\n",
              f);
        return;
    }
    fprintf(f, "<p class=\"meta\">timeline: %" PRIu64 " snapshots, every %s</p>\n", t->nsnaps,
            ml_report_fmt_time(b, (double)h->interval_ns / 1e9));
    for (uint64_t s = 0; s < t->nseries;) {
        uint64_t e = s;
        while (e < t->nseries && t->series[e].thread >= 0)
            e++;
        /* series[s..e) are the threads of one region, series[e] its total */
        if (ml_report_region_shown(t->rep, t->series[s].region, o))
            region_chart(f, t, s, e);
        s = e + 1;
    }
}

static void profile_head(FILE *f, const struct ml_report *r)
{
    const struct ml_profile *p = r->prof;
    const char *host = ml_profile_meta(p, "hostname"), *prog = ml_profile_meta(p, "program");
    char b[ML_REPORT_CELL];

    fputs("<section class=\"profile\">\n<h2>", f);
    if (p->merged)
        fprintf(f, "merged %" PRIu64 " profiles of ", p->merged);
    esc(f, r->name);
    if (p->merged)
        fprintf(f, "</h2>\n<p class=\"meta\">tables %016" PRIx64 ", ", p->merged_fingerprint);
    else
        fprintf(f, "</h2>\n<p class=\"meta\">pid %u, ppid %u, ", p->hdr.pid, p->hdr.ppid);
    if (p->hdr.flags & ML_PROF_F_RANK)
        fprintf(f, p->hdr.nranks ? "rank %u of %u, " : "rank %u, ", p->hdr.rank, p->hdr.nranks);
    fputs("host ", f);
    esc(f, host ? host : "?");
    fprintf(f, ", %" PRIu64 " threads%s, %s wall%s</p>\n", p->nthreads,
            p->merged ? " by index" : "", ml_report_fmt_time(b, (double)p->hdr.wall_ns / 1e9),
            p->merged ? " in all" : "");
    if (prog) {
        fputs("<p class=\"meta\">program ", f);
        esc(f, prog);
        fputs("</p>\n", f);
    }
    if (ml_profile_meta(p, "cmdline")) {
        fputs("<p class=\"meta\">cmdline ", f);
        esc(f, ml_profile_meta(p, "cmdline"));
        fputs("</p>\n", f);
    }
    if (p->hdr.flags & ML_PROF_F_SIGNAL)
        fputs("<p class=\"note\">written from a terminating signal</p>\n", f);
    if (p->hdr.sample > 1)
        fprintf(f, "<p class=\"note\">1 in %" PRIu64 " region executions measured</p>\n",
                p->hdr.sample);
}

static void html_begin(FILE *f, const struct ml_report_opts *o)
{
    (void)o;
    fprintf(f,
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<title>memlens report</title>\n<style>%s</style>\n</head>\n<body>\n"
            "<h1>memlens report</h1>\n",
            style);
}

static void html_end(FILE *f, const struct ml_report_opts *o)
{
    (void)o;
    fputs("</body>\n</html>\n", f);
}

static int html_profile(FILE *f, const struct ml_report *r, const struct ml_timeline *t, size_t i,
                        const struct ml_report_opts *o)
{
    (void)i;
    profile_head(f, r);
    summary(f, r, o);
    bytes_chart(f, r, o);
    if (t)
        timeline_charts(f, t, o);
    else if (r->prof->merged)
        fputs("<p class=\"meta\">timelines belong to single runs: they are not merged</p>\n", f);
    else
        fputs("<p class=\"meta\">no timeline: run the program with MEMLENS_INTERVAL=100ms "
              "for bandwidth over time</p>\n",
              f);
    fputs("</section>\n", f);
    return 0;
}

const struct ml_renderer ml_render_html = {
    .begin = html_begin, .profile = html_profile, .end = html_end};
