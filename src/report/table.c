/* Human-readable report: per profile, three aligned tables of region and thread figures. */
#include "report/report.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define CELL 24 /* longest formatted value, "(1023 MiB)" and the like, fits */

/*
 * A table is collected whole before printing so that every column gets the
 * width of its widest cell: region names have any length.
 */
struct tbl {
    size_t ncols, nrows, cap;
    char (*cells)[CELL];
    char **first; /* column 0 of each row: a region or function name, escaped */
    char **note;  /* text after the last column, or NULL (tbl_note) */
    size_t cut;   /* column 0 holds function names, cut to this many characters (0: whole) */
};

/* Columns a UTF-8 string takes on a terminal: one per character (names are escaped first). */
static size_t width(const char *s)
{
    size_t n = 0;

    for (; *s; s++)
        n += ((unsigned char)*s & 0xc0) != 0x80;
    return n;
}

/* Makes room for one more row and starts it with first (escaped); 0 or -ENOMEM. */
static int tbl_grow(struct tbl *t, const char *first)
{
    char e[ML_REPORT_LONG], c[ML_REPORT_NAME];

    if (t->nrows == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 16;
        char(*cells)[CELL] = realloc(t->cells, cap * t->ncols * CELL);
        char **fst;
        if (!cells)
            return -ENOMEM;
        t->cells = cells;
        fst = realloc(t->first, cap * sizeof(*fst));
        if (!fst)
            return -ENOMEM;
        t->first = fst;
        fst = realloc(t->note, cap * sizeof(*fst));
        if (!fst)
            return -ENOMEM;
        t->note = fst;
        t->cap = cap;
    }
    t->note[t->nrows] = NULL;
    ml_report_esc(e, t->cut ? sizeof(e) : ML_REPORT_NAME, first);
    t->first[t->nrows] = strdup(t->cut && t->nrows ? ml_report_cut(c, sizeof(c), e, t->cut) : e);
    return t->first[t->nrows] ? 0 : -ENOMEM;
}

/* Sets the note of the last row (plain text made by memlens, printed as is); 0 or -ENOMEM. */
static int tbl_note(struct tbl *t, const char *note)
{
    t->note[t->nrows - 1] = strdup(note);
    return t->note[t->nrows - 1] ? 0 : -ENOMEM;
}

static int tbl_row(struct tbl *t, const char *first, ...)
{
    va_list ap;

    if (tbl_grow(t, first))
        return -ENOMEM;
    va_start(ap, first);
    for (size_t c = 1; c < t->ncols; c++)
        snprintf(t->cells[t->nrows * t->ncols + c], CELL, "%s", va_arg(ap, const char *));
    va_end(ap);
    t->nrows++;
    return 0;
}

/* Like tbl_row, with the cells after the first in an array of ncols - 1. */
static int tbl_rowv(struct tbl *t, const char *first, const char *const *cells)
{
    if (tbl_grow(t, first))
        return -ENOMEM;
    for (size_t c = 1; c < t->ncols; c++)
        snprintf(t->cells[t->nrows * t->ncols + c], CELL, "%s", cells[c - 1]);
    t->nrows++;
    return 0;
}

static void tbl_print(FILE *f, const struct tbl *t)
{
    size_t w[32] = {0};

    for (size_t r = 0; r < t->nrows; r++) {
        size_t n = width(t->first[r]);
        if (n > w[0])
            w[0] = n;
        for (size_t c = 1; c < t->ncols; c++) {
            n = width(t->cells[r * t->ncols + c]);
            if (n > w[c])
                w[c] = n;
        }
    }
    for (size_t r = 0; r < t->nrows; r++) {
        /* printf pads by bytes: pad by columns so that names with UTF-8 line up. */
        fprintf(f, "  %s%*s", t->first[r], (int)(w[0] - width(t->first[r])), "");
        for (size_t c = 1; c < t->ncols; c++) {
            const char *v = t->cells[r * t->ncols + c];
            int pad = (int)(w[c] - width(v));
            if (c == 1)
                fprintf(f, "  %s%*s", v, pad, "");
            else
                fprintf(f, "  %*s%s", pad, "", v);
        }
        if (t->note[r])
            fprintf(f, "  %s", t->note[r]);
        fputc('\n', f);
    }
}

static void tbl_free(struct tbl *t)
{
    for (size_t r = 0; r < t->nrows; r++) {
        free(t->first[r]);
        free(t->note[r]);
    }
    free(t->cells);
    free(t->first);
    free(t->note);
}

/* Three significant digits, no exponent: 1.23, 12.3, 123. */
static void sig3(char *buf, size_t len, double x, const char *unit)
{
    const char *fmt = x < 9.995 ? "%.2f%s" : x < 99.95 ? "%.1f%s" : "%.0f%s";
    snprintf(buf, len, fmt, x, unit);
}

static const char *fmt_count(char *buf, uint64_t v)
{
    static const char *const sfx[] = {"K", "M", "G", "T", "P", "E"};
    double x = (double)v;
    int i = -1;

    if (v < 10000) {
        snprintf(buf, CELL, "%" PRIu64, v);
        return buf;
    }
    while (x >= 999.5 && i < 5) {
        x /= 1000;
        i++;
    }
    sig3(buf, CELL, x, sfx[i]);
    return buf;
}

static const char *fmt_bytes(char *buf, uint64_t v)
{
    static const char *const sfx[] = {" KiB", " MiB", " GiB", " TiB", " PiB", " EiB"};
    double x = (double)v;
    int i = -1;

    if (v < 1024) {
        snprintf(buf, CELL, "%" PRIu64 " B", v);
        return buf;
    }
    while (x >= 1023.5 && i < 5) {
        x /= 1024;
        i++;
    }
    sig3(buf, CELL, x, sfx[i]);
    return buf;
}

static void fmt_seconds(char *buf, size_t len, double s)
{
    if (s < 0)
        snprintf(buf, len, "-");
    else if (s == 0)
        snprintf(buf, len, "0 s");
    else if (s < 1e-6)
        sig3(buf, len, s * 1e9, " ns");
    else if (s < 1e-3)
        sig3(buf, len, s * 1e6, " us");
    else if (s < 1)
        sig3(buf, len, s * 1e3, " ms");
    else
        sig3(buf, len, s, " s");
}

/* Borrowed times, and the bandwidths computed from them, are shown in parentheses. */
static const char *fmt_time(char *buf, double s, int borrowed)
{
    char tmp[CELL - 2];

    fmt_seconds(tmp, sizeof(tmp), s);
    snprintf(buf, CELL, borrowed && s >= 0 ? "(%s)" : "%s", tmp);
    return buf;
}

/* Three significant digits down to 1 GB/s, then three decimals (0.012). */
static const char *fmt_gbs(char *buf, double gbs, int borrowed)
{
    char tmp[CELL];

    if (gbs < 0) {
        snprintf(buf, CELL, "-");
        return buf;
    }
    if (gbs < 0.9995)
        snprintf(tmp, sizeof(tmp), "%.3f", gbs);
    else
        sig3(tmp, sizeof(tmp), gbs, "");
    snprintf(buf, CELL, borrowed ? "(%s)" : "%s", tmp);
    return buf;
}

/* Column titles of the events table: the event names of the profile being printed. */
static const char *r_event_names[ML_MAX_EVENTS];

enum { T_MAIN, T_MIX, T_BYTES, T_EXACT, T_COUNTERS, T_SAMPLE, T_CORR, T_EVENTS, T_N };

/* A scale factor, "12.5", or "-" when nothing was measured. */
static const char *fmt_scale(char *buf, double x)
{
    if (x < 0)
        snprintf(buf, CELL, "-");
    else
        sig3(buf, CELL, x, "");
    return buf;
}

static int add_rows(struct tbl *t, int which, const char *region, const char *thread,
                    const char *tid, const struct ml_rstats *s, uint64_t tsc_hz)
{
    char b[16][CELL];
    double sec = ml_rstats_seconds(s, tsc_hz);
    double cf = ml_rstats_ticks_seconds(s, s->cf_ticks, tsc_hz);
    double cal = ml_rstats_ticks_seconds(s, s->cal_ticks, tsc_hz);
    const uint64_t *v = s->v;
    int bw = s->borrowed;

    switch (which) {
    case T_SAMPLE:
        if (s->scale < 0) /* nothing measured: nothing to scale */
            return tbl_row(t, region, thread, tid, fmt_count(b[0], s->entries),
                           fmt_count(b[1], s->measured), "-", "-", "-", "-", "-", "-", "-");
        return tbl_row(t, region, thread, tid, fmt_count(b[0], s->entries),
                       fmt_count(b[1], s->measured), fmt_scale(b[2], s->scale),
                       fmt_time(b[3], ml_rstats_ticks_seconds(s, s->est_ticks, tsc_hz), bw),
                       fmt_count(b[4], ml_rstats_est(s, v[ML_F_INSTR])),
                       fmt_count(b[5], ml_rstats_est(s, v[ML_F_LOADS])),
                       fmt_count(b[6], ml_rstats_est(s, v[ML_F_STORES])),
                       fmt_bytes(b[7], ml_rstats_est(s, ml_rstats_read(s))),
                       fmt_bytes(b[8], ml_rstats_est(s, ml_rstats_written(s))));
    case T_CORR:
        if (s->cf < 0)
            snprintf(b[2], CELL, "-");
        else
            snprintf(b[2], CELL, "%.3f", s->cf);
        return tbl_row(t, region, thread, tid, fmt_time(b[0], sec, bw),
                       fmt_count(b[1], v[ML_F_INCR]), b[2], fmt_time(b[3], cf, bw),
                       fmt_time(b[4], cal, bw),
                       fmt_gbs(b[5], ml_report_gbs(ml_rstats_read(s), sec), bw),
                       fmt_gbs(b[6], ml_report_gbs(ml_rstats_read(s), cf), bw),
                       fmt_gbs(b[7], ml_report_gbs(ml_rstats_read(s), cal), bw),
                       fmt_gbs(b[8], ml_report_gbs(ml_rstats_written(s), sec), bw),
                       fmt_gbs(b[9], ml_report_gbs(ml_rstats_written(s), cf), bw),
                       fmt_gbs(b[10], ml_report_gbs(ml_rstats_written(s), cal), bw));
    case T_EVENTS: {
        const char *cells[2 + ML_MAX_EVENTS];
        cells[0] = thread;
        cells[1] = tid;
        for (size_t e = 0; e + 3 < t->ncols; e++)
            cells[2 + e] = fmt_count(b[e], s->ev[e]);
        return tbl_rowv(t, region, cells);
    }
    case T_MAIN:
        return tbl_row(t, region, thread, tid, fmt_count(b[0], s->entries),
                       fmt_time(b[1], sec, s->borrowed), fmt_count(b[2], v[ML_F_INSTR]),
                       fmt_count(b[3], v[ML_F_LOADS]), fmt_count(b[4], v[ML_F_STORES]),
                       fmt_bytes(b[5], ml_rstats_read(s)), fmt_bytes(b[6], ml_rstats_written(s)),
                       fmt_gbs(b[7], ml_report_gbs(ml_rstats_read(s), sec), s->borrowed),
                       fmt_gbs(b[8], ml_report_gbs(ml_rstats_written(s), sec), s->borrowed));
    case T_MIX:
        return tbl_row(t, region, thread, tid, fmt_count(b[0], v[ML_F_I_INT]),
                       fmt_count(b[1], v[ML_F_I_FP]), fmt_count(b[2], v[ML_F_I_VEC]),
                       fmt_count(b[3], v[ML_F_I_MEM]), fmt_count(b[4], v[ML_F_I_BRANCH]),
                       fmt_count(b[5], v[ML_F_I_CALL]), fmt_count(b[6], v[ML_F_I_OTHER]),
                       fmt_count(b[7], v[ML_F_INSTR]));
    case T_EXACT: {
        /* How far the static classes are from the addresses: heap + global, read + written. */
        uint64_t hs = v[ML_F_RD_HEAP] + v[ML_F_RD_GLOBAL] + v[ML_F_WR_HEAP] + v[ML_F_WR_GLOBAL];
        uint64_t hx =
            s->x[ML_C_RD_HEAP] + s->x[ML_C_RD_GLOBAL] + s->x[ML_C_WR_HEAP] + s->x[ML_C_WR_GLOBAL];
        if (hx)
            snprintf(b[6], CELL, "%.3f", (double)hs / (double)hx);
        else
            snprintf(b[6], CELL, "-");
        return tbl_row(t, region, thread, tid, fmt_bytes(b[0], s->x[ML_C_RD_HEAP]),
                       fmt_bytes(b[1], s->x[ML_C_RD_GLOBAL]), fmt_bytes(b[2], s->x[ML_C_RD_STACK]),
                       fmt_bytes(b[3], s->x[ML_C_WR_HEAP]), fmt_bytes(b[4], s->x[ML_C_WR_GLOBAL]),
                       fmt_bytes(b[5], s->x[ML_C_WR_STACK]), b[6]);
    }
    case T_COUNTERS:
        if (s->entries && v[ML_F_INCR] < 1000 * s->entries)
            sig3(b[2], CELL, (double)v[ML_F_INCR] / (double)s->entries, "");
        else if (s->entries)
            fmt_count(b[2], v[ML_F_INCR] / s->entries);
        else
            snprintf(b[2], CELL, "-");
        return tbl_row(t, region, thread, tid, fmt_count(b[0], s->counters),
                       fmt_count(b[1], v[ML_F_INCR]), b[2]);
    default:
        return tbl_row(t, region, thread, tid, fmt_bytes(b[0], v[ML_F_RD_HEAP]),
                       fmt_bytes(b[1], v[ML_F_RD_GLOBAL]), fmt_bytes(b[2], v[ML_F_RD_STACK]),
                       fmt_bytes(b[3], v[ML_F_WR_HEAP]), fmt_bytes(b[4], v[ML_F_WR_GLOBAL]),
                       fmt_bytes(b[5], v[ML_F_WR_STACK]));
    }
}

static const char *const titles[T_N] = {
    "time, memory operations and bandwidth",
    "instructions by class",
    "bytes by memory class",
    "bytes by address class (exact mode: every access classified by its address at run time)",
    "counters: static (counting units) and dynamic (increments executed)",
    "sampling: figures above cover the measured executions; est. = scaled by execs / measured",
    "bandwidth corrected for instrumentation overhead (CF: published factor, cal: calibrated)",
    "hardware counters, summed over measured executions",
};

static const size_t ncols[T_N] = {12, 11, 9, 10, 6, 12, 14, 3};

static int header_row(struct tbl *t, int which)
{
    switch (which) {
    case T_MAIN:
        return tbl_row(t, "region", "thread", "tid", "execs", "time", "instrs", "loads", "stores",
                       "read", "written", "rd GB/s", "wr GB/s");
    case T_MIX:
        return tbl_row(t, "region", "thread", "tid", "int", "fp", "vec", "mem", "branch", "call",
                       "other", "total");
    case T_EXACT:
        return tbl_row(t, "region", "thread", "tid", "rd heap", "rd global", "rd stack", "wr heap",
                       "wr global", "wr stack", "h+g static/exact");
    case T_COUNTERS:
        return tbl_row(t, "region", "thread", "tid", "counters", "increments", "incr/exec");
    case T_SAMPLE:
        return tbl_row(t, "region", "thread", "tid", "execs", "measured", "scale", "est. time",
                       "est. instrs", "est. loads", "est. stores", "est. read", "est. written");
    case T_CORR:
        return tbl_row(t, "region", "thread", "tid", "time", "incr", "CF", "time/CF", "time cal",
                       "rd GB/s", "rd CF", "rd cal", "wr GB/s", "wr CF", "wr cal");
    case T_EVENTS: {
        const char *cells[2 + ML_MAX_EVENTS] = {"thread", "tid"};
        for (size_t e = 0; e + 3 < t->ncols; e++)
            cells[2 + e] = r_event_names[e];
        return tbl_rowv(t, "region", cells);
    }
    default:
        return tbl_row(t, "region", "thread", "tid", "rd heap", "rd global", "rd stack", "wr heap",
                       "wr global", "wr stack");
    }
}

/* The warnings of a row of the main table (ml_report_note), after its last column. */
static int add_note(struct tbl *t, const struct ml_report *r, uint64_t reg,
                    const struct ml_rstats *s)
{
    char buf[256];
    const char *note = ml_report_note(r, reg, s, buf, sizeof(buf));

    return note ? tbl_note(t, note) : 0;
}

/* Fills table `which` for r; *borrowed is set when a row shows a borrowed time. */
static int fill(struct tbl *t, int which, const struct ml_report *r, const struct ml_report_opts *o,
                int *borrowed)
{
    uint64_t hz = r->prof->hdr.tsc_hz;
    int rc = header_row(t, which);

    for (uint64_t reg = 0; reg < r->nregions && !rc; reg++) {
        const char *name = ml_profile_str(r->prof, r->prof->regions[reg]);
        unsigned nactive = 0;

        if (!r->totals[reg].active || !ml_report_region_shown(r, reg, o))
            continue;
        for (uint64_t th = 0; th < r->nthreads; th++)
            nactive += ml_report_cell(r, reg, th)->active;
        for (uint64_t th = 0; th < r->nthreads && !rc && o->rows != ML_REPORT_TOTALS; th++) {
            const struct ml_rstats *c = ml_report_cell(r, reg, th);
            char idx[CELL], tid[CELL];
            if (!c->active)
                continue;
            snprintf(idx, sizeof(idx), "%u", r->prof->threads[th].index);
            ml_report_tid(r->prof, th, tid, sizeof(tid));
            *borrowed |= c->borrowed && which == T_MAIN;
            rc = add_rows(t, which, name, idx, tid, c, hz);
            if (!rc && which == T_MAIN)
                rc = add_note(t, r, reg, c);
        }
        if (!rc && (o->rows == ML_REPORT_TOTALS || nactive > 1)) {
            rc = add_rows(t, which, name, "total", "", &r->totals[reg], hz);
            if (!rc && which == T_MAIN)
                rc = add_note(t, r, reg, &r->totals[reg]);
        }
    }
    return rc;
}

/*
 * Clock sampling (docs/regions.md, "Inline enter and exit"): when some measured
 * executions did not read the clock, region times are estimates; say how many did.
 */
static void print_clock_note(FILE *f, const struct ml_profile *p)
{
    uint64_t timed = 0, measured = 0;

    for (uint64_t t = 0; t < p->nthreads; t++)
        for (uint64_t reg = 0; p->threads[t].timed && reg < p->nregions; reg++) {
            timed += p->threads[t].timed[reg];
            measured += p->threads[t].rstats[reg].measured;
        }
    if (timed < measured)
        fprintf(f,
                "  note: clock sampled, %" PRIu64 " of %" PRIu64
                " measured region executions read the clock; region times scale theirs to all "
                "measured ones (estimates)\n",
                timed, measured);
}
static void print_header(FILE *f, const struct ml_report *r)
{
    const struct ml_profile *p = r->prof;
    const char *prog = ml_profile_meta(p, "program");
    const char *cmd = ml_profile_meta(p, "cmdline");
    const char *host = ml_profile_meta(p, "hostname");
    char wall[CELL], e[ML_REPORT_NAME];

    fmt_seconds(wall, sizeof(wall), (double)p->hdr.wall_ns / 1e9);
    if (p->merged) {
        fprintf(f, "merged %" PRIu64 " profiles of %s\n", p->merged,
                ml_report_esc(e, sizeof(e), r->name));
        fprintf(f, "  tables %016" PRIx64, p->merged_fingerprint);
    } else {
        fprintf(f, "profile %s\n", ml_report_esc(e, sizeof(e), r->name));
        fprintf(f, "  pid %u, ppid %u", p->hdr.pid, p->hdr.ppid);
    }
    if (p->hdr.flags & ML_PROF_F_RANK)
        fprintf(f, p->hdr.nranks ? ", rank %u of %u" : ", rank %u", p->hdr.rank, p->hdr.nranks);
    fprintf(f, "%s%s, %" PRIu64 " thread%s%s, %s wall%s\n", host ? ", host " : "",
            host ? ml_report_esc(e, sizeof(e), host) : "", p->nthreads, p->nthreads == 1 ? "" : "s",
            p->merged ? " by index" : "", wall, p->merged ? " in all" : "");
    if (prog)
        fprintf(f, "  program %s\n", ml_report_esc(e, sizeof(e), prog));
    if (cmd)
        fprintf(f, "  cmdline %s\n", ml_report_esc(e, sizeof(e), cmd));
    if (ml_report_sampled(r))
        fprintf(f,
                "  note: sampled, 1 in %" PRIu64
                " region executions measured (MEMLENS_SAMPLE); counts and times cover the "
                "measured ones, est. figures scale them to all\n",
                p->hdr.sample);
    print_clock_note(f, p);
    if (p->hdr.flags & ML_PROF_F_SIGNAL)
        fputs(p->merged ? "  note: some profiles were written when a signal ended the process\n"
                        : "  note: written when a signal ended the process; figures cover the run "
                          "up to it\n",
              f);
    if (!p->hdr.tsc_hz)
        fputs("  note: the profile has no clock rate; times and bandwidths are unknown\n", f);
}

/* A not-seen callee for the table: demangled, escaped, cut (whole in JSON). */
static const char *callee_name(const char *name, char *buf, size_t len)
{
    char d[ML_REPORT_LONG], e[ML_REPORT_LONG];

    return ml_report_cut(buf, len,
                         ml_report_esc(e, sizeof(e), ml_report_demangle(name, d, sizeof(d))),
                         ML_REPORT_COLS);
}

static void print_not_seen(FILE *f, const struct ml_report *r, const struct ml_report_opts *o)
{
    const uint64_t limit = 10;
    char e[ML_REPORT_NAME];
    int any = 0, w = 0;

    for (uint64_t i = 0; i < r->ncallees; i++) {
        int n = (int)strlen(ml_report_esc(
            e, sizeof(e), ml_profile_str(r->prof, r->prof->regions[r->callees[i].region])));
        if (n > w && ml_report_region_shown(r, r->callees[i].region, o))
            w = n;
    }
    for (uint64_t i = 0; i < r->ncallees;) {
        uint32_t reg = r->callees[i].region;
        uint64_t j = i, shown = 0;
        char b[CELL];

        while (j < r->ncallees && r->callees[j].region == reg)
            j++;
        if (ml_report_region_shown(r, reg, o)) {
            if (!any)
                fputs("\n  calls into functions memlens did not see (their work is not counted "
                      "above)\n",
                      f);
            any = 1;
            fprintf(f, "  %-*s  not seen:", w,
                    ml_report_esc(e, sizeof(e), ml_profile_str(r->prof, r->prof->regions[reg])));
            for (uint64_t k = i; k < j && shown < limit; k++, shown++)
                fprintf(f, "%s %s \xc3\x97%s", shown ? "," : "",
                        callee_name(r->callees[k].name, e, sizeof(e)),
                        fmt_count(b, r->callees[k].total));
            if (j - i > limit)
                fprintf(f, ", and %" PRIu64 " more (see --json)", j - i - limit);
            fputc('\n', f);
        }
        i = j;
    }
}

static int table_one(FILE *f, const struct ml_report *r, const struct ml_report_opts *o)
{
    int borrowed = 0, rc = 0, any = 0, idle = 0;
    char e[ML_REPORT_NAME];

    print_header(f, r);
    for (uint64_t reg = 0; reg < r->nregions; reg++) {
        if (!ml_report_region_shown(r, reg, o))
            continue;
        if (r->totals[reg].active) {
            any = 1;
            continue;
        }
        fprintf(f, idle++ ? ", %s" : "  not executed: %s",
                ml_report_esc(e, sizeof(e), ml_profile_str(r->prof, r->prof->regions[reg])));
    }
    if (idle)
        fputc('\n', f);
    if (!any) {
        fputs(r->nregions ? "  no executed region matches\n" : "  the profile has no regions\n", f);
        return 0;
    }
    for (int which = 0; which < T_N && !rc; which++) {
        struct tbl t = {.ncols = ncols[which]};
        if ((which == T_SAMPLE && !ml_report_sampled(r)) || (which == T_EXACT && !r->prof->exact))
            continue;
        if (which == T_EVENTS) {
            if (!r->prof->nevents)
                continue;
            t.ncols = 3 + r->prof->nevents;
            for (uint32_t e = 0; e < r->prof->nevents; e++)
                r_event_names[e] = r->prof->event_names[e];
        }
        rc = fill(&t, which, r, o, &borrowed);
        if (!rc) {
            fprintf(f, "\n  %s\n", titles[which]);
            tbl_print(f, &t);
        }
        tbl_free(&t);
    }
    if (rc)
        return rc;
    if (borrowed)
        fputs("\n  (...) the thread ran region code without entering the region (e.g. an OpenMP "
              "worker):\n        time is that of the thread(s) that entered it\n",
              f);
    print_not_seen(f, r, o);
    return 0;
}

static int table_profile(FILE *f, const struct ml_report *r, const struct ml_timeline *t, size_t i,
                         const struct ml_report_opts *o)
{
    (void)t;
    if (i)
        fputc('\n', f);
    return table_one(f, r, o);
}

const struct ml_renderer ml_render_table = {.profile = table_profile};

/* ---- --top: hottest functions and blocks ---- */

/* "file:line", keeping the end of a long path (the file name matters most). */
static const char *fmt_where(char *buf, const struct ml_profile *p, uint32_t file, uint32_t line)
{
    char e[ML_REPORT_NAME], full[ML_REPORT_NAME + 16];
    const char *s = ml_report_esc(e, sizeof(e), ml_profile_str(p, file));
    size_t n;

    if (!line || !*s)
        return "?";
    n = (size_t)snprintf(full, sizeof(full), "%s:%u", s, line);
    if (n >= sizeof(full))
        n = sizeof(full) - 1;
    if (n < CELL) {
        memcpy(buf, full, n + 1);
        return buf;
    }
    snprintf(buf, CELL, "...%s", full + n - (CELL - 4));
    return buf;
}

static const char *fmt_share(char *buf, uint64_t part, uint64_t whole)
{
    snprintf(buf, CELL, "%.1f%%", whole ? 100.0 * (double)part / (double)whole : 0.0);
    return buf;
}

/*
 * A function row's name for the table. An inlined function's row cuts its two
 * names apart, so that "(inlined into caller)" survives the cut of long names.
 */
static const char *top_fn_cell(const struct ml_report *r, const struct ml_top_fn *f, char *buf,
                               size_t len)
{
    const struct ml_profile *p = r->prof;
    char d[ML_REPORT_LONG], e[ML_REPORT_LONG], k[4 * ML_REPORT_COLS], c[4 * ML_REPORT_COLS];

    if (f->into == ML_TOP_NO_PARENT)
        return ml_top_fn_name(r, f, buf, len);
    ml_report_cut(
        k, sizeof(k),
        ml_report_esc(e, sizeof(e), ml_report_demangle(ml_profile_str(p, f->func), d, sizeof(d))),
        ML_REPORT_COLS / 2);
    ml_report_cut(
        c, sizeof(c),
        ml_report_esc(e, sizeof(e), ml_report_demangle(ml_profile_str(p, f->into), d, sizeof(d))),
        ML_REPORT_COLS / 2 - 16);
    snprintf(buf, len, "%s (inlined into %s)", k, c);
    return buf;
}

enum { TOP_FN_BYTES, TOP_UNIT_BYTES, TOP_FN_EXECS, TOP_UNIT_EXECS, TOP_N };

/* Fills one ranking; *unlocated becomes 1 when a function row has no line at all (no -g). */
static int top_fill(struct tbl *t, int which, const struct ml_report *r, const struct ml_top *top,
                    size_t rows, int *unlocated)
{
    const struct ml_profile *p = r->prof;
    char c[8][CELL], name[ML_REPORT_LONG];
    int rc;

    if (which == TOP_FN_BYTES || which == TOP_FN_EXECS) {
        rc = tbl_row(t, "function", "calls", "instrs", "read", "written", "share", "where");
        for (size_t i = 0; i < rows && !rc; i++) {
            const struct ml_top_fn *f =
                &top->fns[(which == TOP_FN_BYTES ? top->fns_by_bytes : top->fns_by_execs)[i]];
            uint64_t rd = f->v[ML_F_RD_HEAP] + f->v[ML_F_RD_GLOBAL] + f->v[ML_F_RD_STACK];
            uint64_t wr = f->v[ML_F_WR_HEAP] + f->v[ML_F_WR_GLOBAL] + f->v[ML_F_WR_STACK];
            *unlocated |= !f->line;
            rc =
                tbl_row(t, top_fn_cell(r, f, name, sizeof(name)),
                        f->known ? fmt_count(c[0], f->executions) : "-",
                        fmt_count(c[1], f->v[ML_F_INSTR]), fmt_bytes(c[2], rd), fmt_bytes(c[3], wr),
                        fmt_share(c[4], rd + wr, top->bytes), fmt_where(c[5], p, f->file, f->line));
        }
        return rc;
    }
    rc = tbl_row(t, "function", "unit", "execs", "instrs", "read", "written", "share", "where");
    for (size_t i = 0; i < rows && !rc; i++) {
        uint32_t ui = (which == TOP_UNIT_BYTES ? top->units_by_bytes : top->units_by_execs)[i];
        const struct ml_prof_unit *u = &p->units[ui];
        uint64_t cnt = r->unit_counts[ui];
        const uint64_t *fa = u->facts;
        uint64_t rd = cnt * (fa[ML_F_RD_HEAP] + fa[ML_F_RD_GLOBAL] + fa[ML_F_RD_STACK]);
        uint64_t wr = cnt * (fa[ML_F_WR_HEAP] + fa[ML_F_WR_GLOBAL] + fa[ML_F_WR_STACK]);
        snprintf(c[0], CELL, "%u", ui);
        rc =
            tbl_row(t, ml_top_fn_name(r, ml_top_fn_of(top, r, ui), name, sizeof(name)), c[0],
                    u->kind == ML_UNIT_BYTES ? "-" : fmt_count(c[1], cnt),
                    fmt_count(c[2], cnt * fa[ML_F_INSTR]), fmt_bytes(c[3], rd), fmt_bytes(c[4], wr),
                    fmt_share(c[5], rd + wr, top->bytes), fmt_where(c[6], p, u->file, u->line));
    }
    return rc;
}

static int top_one(FILE *f, const struct ml_report *r, const struct ml_report_opts *o)
{
    static const char *const titles[TOP_N] = {"hottest functions by bytes (read + written)",
                                              "hottest blocks by bytes", "functions by calls",
                                              "blocks by executions"};
    struct ml_top *top;
    int rc, unlocated = 0;

    print_header(f, r);
    rc = ml_top_build(r, o, &top);
    if (rc)
        return rc;
    if (!top->nunits)
        fputs("  no counted code matches (build with 'memlens cc --all' to count every "
              "function)\n",
              f);
    for (int which = 0; which < TOP_N && !rc && top->nunits; which++) {
        size_t avail = which == TOP_FN_BYTES || which == TOP_FN_EXECS ? top->nfns
                       : which == TOP_UNIT_BYTES                      ? top->nunits
                                                                      : top->nunits_by_execs;
        size_t rows = avail < o->top ? avail : o->top;
        struct tbl t = {.ncols = which == TOP_FN_BYTES || which == TOP_FN_EXECS ? 7 : 8,
                        .cut = ML_REPORT_COLS};
        rc = top_fill(&t, which, r, top, rows, &unlocated);
        if (!rc) {
            fprintf(f, "\n  %s (%zu of %zu)\n", titles[which], rows, avail);
            tbl_print(f, &t);
        }
        tbl_free(&t);
    }
    if (!rc && top->nunits)
        fputs("\n  share: of all bytes counted; calls: counts of each function's first block "
              "(- when it was not counted)\n",
              f);
    if (!rc && top->nunits && unlocated)
        fputs("  where: ? = no line information; build with -g for file:line (and OpenMP bodies' "
              "parents, inlined functions)\n",
              f);
    ml_top_free(top);
    return rc;
}

static int top_profile(FILE *f, const struct ml_report *r, const struct ml_timeline *t, size_t i,
                       const struct ml_report_opts *o)
{
    (void)t;
    if (i)
        fputc('\n', f);
    return top_one(f, r, o);
}

const struct ml_renderer ml_render_top = {.profile = top_profile};

const char *ml_report_fmt_count(char *buf, uint64_t v)
{
    return fmt_count(buf, v);
}

const char *ml_report_fmt_bytes(char *buf, uint64_t v)
{
    return fmt_bytes(buf, v);
}

const char *ml_report_fmt_time(char *buf, double seconds)
{
    return fmt_time(buf, seconds, 0);
}

const char *ml_report_fmt_gbs(char *buf, double gbs)
{
    return fmt_gbs(buf, gbs, 0);
}
