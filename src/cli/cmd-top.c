/* memlens top: live per region and thread bandwidth of a running profiled process. */
#include "cli/cli.h"
#include "format/csv.h"
#include "report/live.h"
#include "report/report.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

static const char top_usage[] =
    "usage: memlens top [-d <seconds>] [-n <frames>] [-b | --batch] [--csv] <pid>\n"
    "\n"
    "Attaches to a running program built with memlens-cc and shows, every interval,\n"
    "per region and thread: executions, time in the region, bytes read and written\n"
    "and the bandwidth of that interval, highest bandwidth first.\n"
    "\n"
    "    -d, --delay <seconds>   interval between frames (default 1)\n"
    "    -n, --iterations <n>    stop after n frames (default: until the program exits)\n"
    "    -b, --batch             append plain frames instead of redrawing the screen\n"
    "                            (the default when stdout is not a terminal)\n"
    "    --csv                   one CSV row per region, thread and frame (implies --batch)\n"
    "    -h, --help              this text\n"
    "\n"
    "q or Ctrl-C quits. Reading another process needs the same permission as ptrace\n"
    "(same user, or root). See docs/top.md.\n";

static volatile sig_atomic_t stop;

static void on_stop(int sig)
{
    (void)sig;
    stop = 1;
}

static struct termios saved_tty;
static int tty_raw;

static void tty_restore(void)
{
    if (tty_raw)
        tcsetattr(STDIN_FILENO, TCSANOW, &saved_tty);
    tty_raw = 0;
}

/* Single keys without echo, so that q quits at once; Ctrl-C still raises SIGINT. */
static void tty_setup(void)
{
    struct termios t;

    if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &saved_tty))
        return;
    t = saved_tty;
    t.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
    t.c_cc[VMIN] = 0;
    t.c_cc[VTIME] = 0;
    if (tcsetattr(STDIN_FILENO, TCSANOW, &t) == 0) {
        tty_raw = 1;
        atexit(tty_restore);
    }
}

static uint64_t mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Sleeps until deadline (CLOCK_MONOTONIC ns); watches for q on a raw terminal. */
static void wait_until(uint64_t deadline)
{
    for (uint64_t now; !stop && (now = mono_ns()) < deadline;) {
        int ms = (int)((deadline - now + 999999) / 1000000);
        if (tty_raw) {
            struct pollfd pfd = {.fd = STDIN_FILENO, .events = POLLIN};
            char c;
            if (poll(&pfd, 1, ms) > 0 && read(STDIN_FILENO, &c, 1) == 1 && (c == 'q' || c == 'Q'))
                stop = 1;
        } else {
            struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};
            nanosleep(&ts, NULL);
        }
    }
}

/* One row: a region on a thread, over the last interval. */
struct row {
    uint64_t region, thread;
    const struct ml_rstats *s;
    uint64_t entries, rd, wr;
    double seconds; /* < 0: unknown */
    int borrowed;
    double gbs; /* read + written; < 0: unknown */
};

static int row_cmp(const void *a, const void *b)
{
    const struct row *x = a, *y = b;

    if (x->gbs != y->gbs)
        return x->gbs > y->gbs ? -1 : 1;
    if (x->rd + x->wr != y->rd + y->wr)
        return x->rd + x->wr > y->rd + y->wr ? -1 : 1;
    if (x->region != y->region)
        return x->region < y->region ? -1 : 1;
    return x->thread < y->thread ? -1 : x->thread > y->thread;
}

/*
 * Rows of the interval d (a profile of differences). Bytes come from the
 * report's aggregation. Time is the region's ticks on that thread in the
 * interval, which include an execution still open at either end: a thread
 * inside one long execution has time but no completed entry, so the report's
 * rule (time belongs to threads that entered) becomes "to threads that were
 * in the region"; a thread that ran region code without being in it (an
 * OpenMP worker) borrows the region's longest time, as in the report.
 */
static size_t collect_rows(const struct ml_report *r, struct row *rows)
{
    const struct ml_profile *d = r->prof;
    uint64_t hz = d->hdr.tsc_hz;
    size_t n = 0;

    for (uint64_t g = 0; g < r->nregions; g++) {
        uint64_t longest = 0;
        for (uint64_t t = 0; t < r->nthreads; t++)
            if (d->threads[t].rstats[g].ticks > longest)
                longest = d->threads[t].rstats[g].ticks;
        for (uint64_t t = 0; t < r->nthreads; t++) {
            const struct ml_rstats *s = ml_report_cell(r, g, t);
            uint64_t ticks = d->threads[t].rstats[g].ticks;
            struct row *w = &rows[n];
            if (!ticks && !s->active)
                continue;
            w->region = g;
            w->thread = t;
            w->s = s;
            w->entries = s->entries;
            w->rd = ml_rstats_read(s);
            w->wr = ml_rstats_written(s);
            w->borrowed = !ticks;
            if (!ticks)
                ticks = longest;
            w->seconds = ticks && hz ? (double)ticks / (double)hz : -1;
            w->gbs = ml_report_gbs(w->rd + w->wr, w->seconds);
            n++;
        }
    }
    qsort(rows, n, sizeof(*rows), row_cmp);
    return n;
}

static double gbs_of(uint64_t bytes, const struct row *w)
{
    return ml_report_gbs(bytes, w->seconds);
}

static void print_csv(FILE *f, const struct ml_report *r, const struct row *rows, size_t n,
                      unsigned frame, double elapsed)
{
    const struct ml_profile *d = r->prof;

    for (size_t i = 0; i < n; i++) {
        const struct row *w = &rows[i];
        double rg = gbs_of(w->rd, w), wg = gbs_of(w->wr, w);
        fprintf(f, "%u,%.6f,", frame, elapsed);
        ml_csv_str(f, ml_profile_str(d, d->regions[w->region]));
        char tid[ML_REPORT_CELL];
        fprintf(f, ",%u,%s,%" PRIu64 ",", d->threads[w->thread].index,
                ml_report_tid(d, w->thread, tid, sizeof(tid)), w->entries);
        if (w->seconds >= 0)
            fprintf(f, "%.9f", w->seconds);
        fprintf(f, ",%" PRIu64 ",%" PRIu64 ",", w->rd, w->wr);
        if (rg >= 0)
            fprintf(f, "%.6f", rg);
        fputc(',', f);
        if (wg >= 0)
            fprintf(f, "%.6f", wg);
        fprintf(f, ",%d\n", w->borrowed);
    }
}

/* Borrowed times, and the bandwidths computed from them, in parentheses as in the report. */
static const char *paren(char *buf, const char *s, int borrowed)
{
    if (borrowed && strcmp(s, "-"))
        snprintf(buf, ML_REPORT_CELL, "(%s)", s);
    else
        snprintf(buf, ML_REPORT_CELL, "%s", s);
    return buf;
}

static void print_table(FILE *f, const struct ml_report *r, const struct row *rows, size_t n,
                        size_t max_rows)
{
    const struct ml_profile *d = r->prof;
    size_t wname = 6;
    char a[ML_REPORT_CELL], b[ML_REPORT_CELL], c[ML_REPORT_CELL], e[ML_REPORT_CELL],
        g[ML_REPORT_CELL], h[ML_REPORT_CELL], t[ML_REPORT_CELL], t2[ML_REPORT_CELL],
        t3[ML_REPORT_CELL], tid[ML_REPORT_CELL], name[ML_REPORT_NAME];

    if (n > max_rows)
        n = max_rows;
    /* Names are the program's: escaped, so that they cannot drive the terminal. */
    for (size_t i = 0; i < n; i++) {
        size_t k = strlen(
            ml_report_esc(name, sizeof(name), ml_profile_str(d, d->regions[rows[i].region])));
        if (k > wname)
            wname = k;
    }
    fprintf(f, "  %-*s  %6s  %7s  %6s  %9s  %9s  %9s  %8s  %8s\n", (int)wname, "region", "thread",
            "tid", "execs", "time", "read", "written", "rd GB/s", "wr GB/s");
    for (size_t i = 0; i < n; i++) {
        const struct row *w = &rows[i];
        fprintf(f, "  %-*s  %6u  %7s  %6s  %9s  %9s  %9s  %8s  %8s\n", (int)wname,
                ml_report_esc(name, sizeof(name), ml_profile_str(d, d->regions[w->region])),
                d->threads[w->thread].index, ml_report_tid(d, w->thread, tid, sizeof(tid)),
                ml_report_fmt_count(a, w->entries),
                paren(b, ml_report_fmt_time(t, w->seconds), w->borrowed),
                ml_report_fmt_bytes(c, w->rd), ml_report_fmt_bytes(e, w->wr),
                paren(g, ml_report_fmt_gbs(t2, gbs_of(w->rd, w)), w->borrowed),
                paren(h, ml_report_fmt_gbs(t3, gbs_of(w->wr, w)), w->borrowed));
    }
    if (!n)
        fputs("  (no region ran in this interval)\n", f);
}

static void proc_name(pid_t pid, char *buf, size_t len)
{
    char path[64];
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
    buf[0] = 0;
    f = fopen(path, "r");
    if (!f)
        return;
    if (fgets(buf, (int)len, f))
        buf[strcspn(buf, "\n")] = 0;
    fclose(f);
}

static size_t screen_rows(void)
{
    struct winsize ws;

    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 6)
        return ws.ws_row - 4u;
    return 20;
}

/* Exit message for a read that failed after attaching. */
static int read_error(int rc, const char *err)
{
    if (rc == -ESRCH) {
        fprintf(stderr, "memlens: %s\n", err);
        return 0;
    }
    if (rc == -EPERM)
        die("%s (run as the same user, or check /proc/sys/kernel/yama/ptrace_scope)", err);
    die("%s", err);
}

int cmd_top(int argc, char **argv)
{
    double delay = 1.0;
    long frames = -1;
    int batch = 0, csv = 0, i, rc, interactive;
    char *end, err[512], name[64], ename[ML_REPORT_NAME];
    struct ml_live *l;
    struct ml_profile *prev = NULL, *cur = NULL, *d = NULL;
    struct ml_report *r = NULL;
    struct row *rows = NULL;
    struct sigaction sa;
    uint64_t t0, next;
    long pidl;
    pid_t pid;

    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(top_usage, stdout);
            return 0;
        } else if ((!strcmp(a, "-d") || !strcmp(a, "--delay")) && i + 1 < argc) {
            errno = 0;
            delay = strtod(argv[++i], &end);
            if (errno || *end || end == argv[i] || !(delay >= 0.01 && delay <= 86400))
                die("invalid interval '%s': expected seconds between 0.01 and 86400", argv[i]);
        } else if ((!strcmp(a, "-n") || !strcmp(a, "--iterations")) && i + 1 < argc) {
            errno = 0;
            frames = strtol(argv[++i], &end, 10);
            if (errno || *end || end == argv[i] || frames <= 0)
                die("invalid frame count '%s': expected a positive integer", argv[i]);
        } else if (!strcmp(a, "-b") || !strcmp(a, "--batch")) {
            batch = 1;
        } else if (!strcmp(a, "--csv")) {
            batch = csv = 1;
        } else if (!strcmp(a, "--")) {
            i++;
            break;
        } else if (a[0] == '-') {
            error("unknown option '%s'", a);
            usage(top_usage);
        } else {
            break;
        }
    }
    if (i != argc - 1) {
        error(i >= argc ? "no process id given" : "one process id expected");
        usage(top_usage);
    }
    errno = 0;
    pidl = strtol(argv[i], &end, 10);
    if (errno || *end || end == argv[i] || pidl <= 0 || pidl > 0x3fffffff)
        die("invalid process id '%s'", argv[i]);
    pid = (pid_t)pidl;

    rc = ml_live_open(pid, &l, err, sizeof(err));
    if (rc == -EACCES || rc == -EPERM)
        die("%s (run as the same user, or check /proc/sys/kernel/yama/ptrace_scope)", err);
    if (rc)
        die("%s", err);
    rc = ml_live_read(l, &prev, err, sizeof(err));
    if (rc) {
        ml_live_close(l);
        return read_error(rc, err);
    }
    proc_name(pid, name, sizeof(name));

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    interactive = !batch && isatty(STDOUT_FILENO);
    if (interactive)
        tty_setup();
    if (csv)
        puts("frame,seconds,region,thread,tid,executions,region_seconds,bytes_read,bytes_written,"
             "read_gbs,write_gbs,time_borrowed");

    t0 = next = mono_ns();
    for (unsigned frame = 1; !stop && (frames < 0 || frame <= frames); frame++) {
        size_t n;
        next += (uint64_t)(delay * 1e9);
        wait_until(next);
        if (stop)
            break;
        rc = ml_live_read(l, &cur, err, sizeof(err));
        if (rc) {
            tty_restore();
            rc = read_error(rc, err);
            goto out;
        }
        if (ml_live_diff(prev, cur, &d) || ml_report_build(d, name, &r))
            die("out of memory");
        free(rows);
        rows = calloc(d->nregions * d->nthreads + 1, sizeof(*rows));
        if (!rows)
            die("out of memory");
        n = collect_rows(r, rows);
        if (csv) {
            print_csv(stdout, r, rows, n, frame, (double)(mono_ns() - t0) / 1e9);
        } else {
            char iv[ML_REPORT_CELL];
            if (interactive)
                fputs("\033[H\033[2J", stdout);
            else if (frame > 1)
                fputc('\n', stdout);
            fprintf(stdout,
                    "memlens top  pid %d (%s)  %" PRIu64 " thread%s  frame %u  interval %s\n",
                    (int)pid, ml_report_esc(ename, sizeof(ename), name), d->nthreads,
                    d->nthreads == 1 ? "" : "s", frame,
                    ml_report_fmt_time(iv, (double)d->hdr.wall_ns / 1e9));
            if (d->hdr.sample > 1)
                fprintf(stdout, "  sampling: 1 in %" PRIu64 " region executions measured\n",
                        d->hdr.sample);
            print_table(stdout, r, rows, n, interactive ? screen_rows() : n);
        }
        rc = ml_report_flush(stdout);
        if (rc)
            die("cannot write the output: %s", strerror(-rc));
        ml_report_free(r);
        r = NULL;
        ml_profile_free(d);
        d = NULL;
        ml_profile_free(prev);
        prev = cur;
        cur = NULL;
    }
    rc = 0;
out:
    tty_restore();
    free(rows);
    ml_report_free(r);
    ml_profile_free(d);
    ml_profile_free(cur);
    ml_profile_free(prev);
    ml_live_close(l);
    return rc;
}
