/* The --html page: one self-contained file, a section per analysis, SVG charts drawn here. */
#include "analyze/util.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                      "#9467bd", "#8c564b", "#e377c2", "#17becf"};

/* A "nice" axis maximum: 1, 2 or 5 x 10^k at or above v. */
static double nice(double v)
{
    double p;

    if (!(v > 0))
        return 1;
    p = pow(10, floor(log10(v)));
    return v <= p ? p : v <= 2 * p ? 2 * p : v <= 5 * p ? 5 * p : 10 * p;
}

static void fmt_num(char *buf, size_t n, double v)
{
    if (v != 0 && (fabs(v) >= 1e6 || fabs(v) < 1e-2))
        snprintf(buf, n, "%.2g", v);
    else
        snprintf(buf, n, "%.4g", v);
}

#define W  900
#define H  300
#define ML 70 /* margins */
#define MR 20
#define MT 30
#define MB 80

static void frame(FILE *out, const char *title, const char *xlabel, const char *ylabel, double ymax,
                  int height)
{
    char b[32];

    fprintf(out,
            "<figure><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "font-family=\"sans-serif\" font-size=\"11\">\n",
            W, height);
    fprintf(out, "<text x=\"%d\" y=\"18\" font-size=\"14\" font-weight=\"bold\">", ML);
    ml_html_esc(out, title);
    fputs("</text>\n", out);
    for (int i = 0; i <= 4; i++) {
        double y = MT + (height - MT - MB) * (1 - i / 4.0);
        fmt_num(b, sizeof(b), ymax * i / 4);
        fprintf(out,
                "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
                ML, W - MR, y, y, ML - 4, y + 4, b);
    }
    fprintf(out, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">", (ML + W - MR) / 2, height - 8);
    ml_html_esc(out, xlabel);
    fprintf(out,
            "</text><text x=\"14\" y=\"%d\" text-anchor=\"middle\" "
            "transform=\"rotate(-90 14 %d)\">",
            height / 2, height / 2);
    ml_html_esc(out, ylabel);
    fputs("</text>\n", out);
}

int ml_svg_bars(FILE *out, const char *title, const char *xlabel, const char *ylabel,
                const char *const *labels, const double *v, size_t n)
{
    double max = 0, bw;
    size_t every;

    for (size_t i = 0; i < n; i++)
        max = v[i] > max ? v[i] : max;
    max = nice(max);
    frame(out, title, xlabel, ylabel, max, H);
    bw = n ? (double)(W - ML - MR) / (double)n : 1;
    every = n > 40 ? (n + 39) / 40 : 1;
    for (size_t i = 0; i < n; i++) {
        double h = v[i] > 0 ? (H - MT - MB) * v[i] / max : 0, x = ML + bw * (double)i;
        char b[32];
        fmt_num(b, sizeof(b), v[i]);
        fprintf(out,
                "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\">"
                "<title>",
                x + 1, H - MB - h, bw > 3 ? bw - 2 : bw, h, palette[0]);
        ml_html_esc(out, labels[i]);
        fprintf(out, ": %s</title></rect>\n", b);
        if (i % every == 0) {
            fprintf(out,
                    "<text x=\"%.1f\" y=\"%d\" text-anchor=\"end\" transform=\"rotate(-35 %.1f "
                    "%d)\">",
                    x + bw / 2, H - MB + 12, x + bw / 2, H - MB + 12);
            ml_html_esc(out, labels[i]);
            fputs("</text>\n", out);
        }
    }
    fputs("</svg></figure>\n", out);
    return ferror(out) ? -EIO : 0;
}

int ml_svg_series(FILE *out, const char *title, const char *xlabel, const char *ylabel,
                  const double *x, const double *const *ys, const char *const *names, int ns,
                  size_t n, const struct ml_band *bands, size_t nbands)
{
    double ymax = 0, x0 = n ? x[0] : 0, x1 = n ? x[n - 1] : 1;
    int height = H;
    uint32_t maxthr = 0;

    for (int s = 0; s < ns; s++)
        for (size_t i = 0; i < n; i++)
            if (isfinite(ys[s][i]) && ys[s][i] > ymax)
                ymax = ys[s][i];
    ymax = nice(ymax);
    if (x1 <= x0)
        x1 = x0 + 1;
    for (size_t i = 0; i < nbands; i++)
        maxthr = bands[i].thread > maxthr ? bands[i].thread : maxthr;
    if (maxthr > 7)
        maxthr = 7;
    frame(out, title, xlabel, ylabel, ymax, height);
    /* Bands: one strip per thread (up to 8) at the top of the plot, shaded down to the axis. */
    {
        double strip = 14, plot_h = height - MT - MB;
        const char *names_seen[64];
        int nseen = 0;
        for (size_t i = 0; i < nbands; i++) {
            const struct ml_band *b = &bands[i];
            double bx0 = ML + (W - ML - MR) * (b->x0 - x0) / (x1 - x0),
                   bx1 = ML + (W - ML - MR) * (b->x1 - x0) / (x1 - x0);
            int c = 0;
            if (b->thread > 7)
                continue;
            for (; c < nseen && strcmp(names_seen[c], b->label); c++)
                ;
            if (c == nseen && nseen < 64)
                names_seen[nseen++] = b->label;
            if (bx1 - bx0 < 1)
                bx1 = bx0 + 1;
            fprintf(out,
                    "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\" "
                    "opacity=\"0.10\"/>"
                    "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\" "
                    "opacity=\"0.6\"><title>thread %u: ",
                    bx0, MT, bx1 - bx0, plot_h, palette[(c + 3) % 8], bx0, MT + strip * b->thread,
                    bx1 - bx0, strip - 2, palette[(c + 3) % 8], b->thread);
            ml_html_esc(out, b->label);
            fputs("</title></rect>\n", out);
            if (bx1 - bx0 > 60) {
                fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\">", bx0 + 2,
                        MT + strip * b->thread + 9);
                ml_html_esc(out, b->label);
                fputs("</text>\n", out);
            }
        }
    }
    for (int s = 0; s < ns; s++) {
        int pen = 0;
        fprintf(out, "<path fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" d=\"", palette[s % 8]);
        for (size_t i = 0; i < n; i++) {
            double px, py;
            if (!isfinite(ys[s][i])) {
                pen = 0;
                continue;
            }
            px = ML + (W - ML - MR) * (x[i] - x0) / (x1 - x0);
            py = MT + (height - MT - MB) * (1 - ys[s][i] / ymax);
            fprintf(out, "%c%.1f %.1f ", pen ? 'L' : 'M', px, py);
            pen = 1;
        }
        fprintf(out, "\"/>\n<text x=\"%d\" y=\"%d\" fill=\"%s\">", W - MR - 140, MT + 14 + 14 * s,
                palette[s % 8]);
        ml_html_esc(out, names[s]);
        fputs("</text>\n", out);
    }
    for (int i = 0; i <= 4; i++) {
        char b[32];
        double v = x0 + (x1 - x0) * i / 4, px = ML + (W - ML - MR) * i / 4.0;
        fmt_num(b, sizeof(b), v);
        fprintf(out, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", px,
                height - MB + 14, b);
    }
    fputs("</svg></figure>\n", out);
    return ferror(out) ? -EIO : 0;
}

int ml_svg_heat(FILE *out, const char *title, const char *const *rowlabels, size_t rows,
                size_t cols, const double *cells, const char *xlabel, double col_ns)
{
    double max = 0, cw, ch = 12, lx = 110;
    int height = (int)(MT + MB + ch * (double)rows);

    for (size_t i = 0; i < rows * cols; i++)
        max = cells[i] > max ? cells[i] : max;
    fprintf(out,
            "<figure><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "font-family=\"sans-serif\" font-size=\"10\">\n<text x=\"%d\" y=\"18\" "
            "font-size=\"14\" font-weight=\"bold\">",
            W, height, ML);
    ml_html_esc(out, title);
    fputs("</text>\n", out);
    cw = cols ? (W - lx - MR) / (double)cols : 1;
    for (size_t r = 0; r < rows; r++) {
        fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">", lx - 4,
                MT + ch * (double)r + 9);
        ml_html_esc(out, rowlabels[r]);
        fputs("</text>\n", out);
        for (size_t c = 0; c < cols; c++) {
            double v = cells[r * cols + c];
            /* Log scale: a page touched once is visible beside one touched a million times. */
            double f = v > 0 && max > 1 ? log1p(v) / log1p(max) : v > 0;
            if (v <= 0)
                continue;
            fprintf(out,
                    "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                    "fill=\"rgb(%d,%d,%d)\"><title>%.0f accesses</title></rect>\n",
                    lx + cw * (double)c, MT + ch * (double)r, cw + 0.3, ch - 1, (int)(255 * f),
                    (int)(60 + 120 * (1 - f)), (int)(255 * (1 - f)), v);
        }
    }
    fprintf(out, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">", (lx + W - MR) / 2,
            height - 8);
    ml_html_esc(out, xlabel);
    fputs("</text>\n", out);
    for (int i = 0; i <= 4; i++) {
        char b[32];
        fmt_num(b, sizeof(b), col_ns * (double)cols * i / 4 / 1e6);
        fprintf(out, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s ms</text>\n",
                lx + (W - lx - MR) * i / 4.0, height - MB + 14, b);
    }
    fputs("</svg></figure>\n", out);
    return ferror(out) ? -EIO : 0;
}

static const char style[] =
    "<style>body{font-family:sans-serif;margin:24px;max-width:1100px}"
    "table{border-collapse:collapse;font-size:12px;margin:8px 0 20px}"
    "td,th{border:1px solid #ccc;padding:2px 6px}td.n{text-align:right}"
    "th{background:#eee}caption{text-align:left;font-weight:bold;padding:4px 0}"
    "figure{margin:8px 0 16px}h2{border-bottom:1px solid #888;margin-top:32px}</style>\n";

int ml_an_html(struct ml_an_run *run, FILE *out)
{
    int rc = 0;

    fputs("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>memlens analyze</title>\n",
          out);
    fputs(style, out);
    fputs("</head><body>\n<h1>memlens analyze</h1>\n<ul>\n", out);
    for (int i = 0; i < ml_an_ntraces(run); i++) {
        fputs("<li>", out);
        ml_html_esc(out, ml_an_trace_path(run, i));
        fprintf(out, " (pid %u)</li>\n", ml_an_trace_pid(run, i));
    }
    fputs("</ul>\n", out);
    rc = ml_an_html_sections(run, out);
    fputs("</body></html>\n", out);
    if (!rc && ferror(out))
        rc = -EIO;
    return rc;
}

int ml_tab_html(FILE *out, const struct ml_tab *t)
{
    return ml_tab_html_rows(out, t, 400);
}
