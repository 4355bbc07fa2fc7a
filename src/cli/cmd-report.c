/* memlens report: reads region profiles (.mlp) and prints per region and thread figures. */
#include "cli/cli.h"
#include "report/merge.h"
#include "report/report.h"
#include "report/timeline.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char report_usage[] =
    "usage: memlens report [options] [<profile.mlp | dir>...]\n"
    "\n"
    "Shows, per region and thread, executions, time, instructions by class, loads,\n"
    "stores, bytes read and written (heap/global/stack) and bandwidth. A directory\n"
    "stands for every *.mlp file in it; the default is ./memlens-out.\n"
    "\n"
    "    --csv             one CSV row per region and thread, plus a total row per region\n"
    "    --json            everything as JSON (regions, threads, not-seen calls, units)\n"
    "    --blocks          one CSV row per counting unit (function, file, line, counts)\n"
    "    --top <n>         the n hottest functions and blocks, by bytes and by\n"
    "                      executions (with --csv or --json: those layouts)\n"
    "    --timeline        bandwidth per region and thread per interval (with --csv: as CSV);\n"
    "                      needs a profile written with MEMLENS_INTERVAL=100ms\n"
    "    --html <file>     one self-contained HTML page with the summary and SVG charts\n"
    "                      (bytes per region, bandwidth over time); '-' for stdout\n"
    "    --merge           sum the profiles of each program (same path and tables)\n"
    "                      per thread index, and show one report per program\n"
    "    --region <name>   only this region (repeatable)\n"
    "    --totals          only the totals over threads\n"
    "    --threads         each thread and the totals (default)\n"
    "    -h, --help        this text\n"
    "\n"
    "Profiles are read one at a time, so any number of them can be reported.\n"
    "Unreadable profiles are reported on stderr and skipped; the others are shown\n"
    "and the exit status is then 128. See docs/report.md for the layouts.\n";

enum fmt { FMT_TABLE, FMT_CSV, FMT_JSON, FMT_BLOCKS, FMT_HTML };

/* Profiles to read: named ones (links followed) and those found in directories (not). */
struct paths {
    struct input {
        char *path;
        int flags; /* ml_profile_read flags */
    } * v;
    size_t n, cap;
};

static void paths_add(struct paths *ps, char *path, int flags)
{
    if (!path)
        die("out of memory");
    if (ps->n == ps->cap) {
        ps->cap = ps->cap ? 2 * ps->cap : 16;
        ps->v = realloc(ps->v, ps->cap * sizeof(*ps->v));
        if (!ps->v)
            die("out of memory");
    }
    ps->v[ps->n++] = (struct input){path, flags};
}

static int cmp_input(const void *a, const void *b)
{
    return strcmp(((const struct input *)a)->path, ((const struct input *)b)->path);
}

/* A path or a name from a profile, made safe for the terminal (report.h). */
static const char *esc(const char *s)
{
    static char buf[ML_REPORT_NAME];

    return ml_report_esc(buf, sizeof(buf), s);
}

/*
 * Adds the *.mlp files of dir in name order; returns how many, or -1 when the
 * directory cannot be read (after saying why). Another user may have put
 * anything there: links are not followed, FIFOs and devices are refused by
 * the reader, each with its own line.
 */
static long add_dir(struct paths *ps, const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    size_t first = ps->n;

    if (!d)
        return error("cannot read directory '%s': %s", esc(dir), strerror(errno));
    for (;;) {
        size_t len;
        char *path;
        errno = 0;
        e = readdir(d);
        if (!e)
            break;
        len = strlen(e->d_name);
        if (len <= 4 || strcmp(e->d_name + len - 4, ".mlp"))
            continue;
        if (asprintf(&path, "%s/%s", dir, e->d_name) < 0)
            die("out of memory");
        paths_add(ps, path, ML_PROF_NOFOLLOW);
    }
    if (errno) {
        error("cannot read directory '%s': %s", esc(dir), strerror(errno));
        closedir(d);
        return -1;
    }
    closedir(d);
    if (ps->n > first)
        qsort(ps->v + first, ps->n - first, sizeof(*ps->v), cmp_input);
    return (long)(ps->n - first);
}

/* Expands arguments into profile paths; returns the number of arguments that failed. */
static int collect(struct paths *ps, int argc, char **argv, int explicit)
{
    int bad = 0;

    for (int i = 0; i < argc; i++) {
        struct stat st;
        int found = stat(argv[i], &st) == 0;
        int missing = !found && errno == ENOENT;
        long n;

        if (found && S_ISDIR(st.st_mode)) {
            n = add_dir(ps, argv[i]);
            if (!n)
                error("no profiles (*.mlp) in '%s'%s", esc(argv[i]),
                      explicit ? "" : "; run a program with 'memlens run' or name a profile");
            bad += n <= 0;
            continue;
        }
        if (!explicit && missing) {
            error("cannot open '%s': no such directory; run a program with 'memlens run' "
                  "or name a profile",
                  esc(argv[i]));
            bad++;
            continue;
        }
        paths_add(ps, strdup(argv[i]), 0); /* named: a link is followed, as asked */
    }
    return bad;
}

/*
 * The output: stdout, or the --html file, written under a temporary name in
 * its directory and renamed over it at the end, so that a failed report
 * leaves no half page and a link planted at the name is replaced, not
 * followed. A name that exists and is no regular file (/dev/null, a FIFO)
 * is written directly.
 */
struct out {
    FILE *f;
    const char *path; /* --html file, NULL for stdout */
    char *tmp;        /* temporary name, or NULL */
};

static void out_open(struct out *w, const char *html)
{
    struct stat st;
    int fd;

    w->f = stdout;
    w->path = NULL;
    w->tmp = NULL;
    if (!html || !strcmp(html, "-"))
        return;
    w->path = html;
    if (stat(html, &st) == 0 && !S_ISREG(st.st_mode)) {
        w->f = fopen(html, "w");
        if (!w->f)
            die("cannot write '%s': %s", esc(html), strerror(errno));
        return;
    }
    if (asprintf(&w->tmp, "%s.XXXXXX", html) < 0)
        die("out of memory");
    fd = mkstemp(w->tmp);
    if (fd < 0)
        die("cannot write '%s': %s", esc(html), strerror(errno));
    w->f = fdopen(fd, "w");
    if (!w->f) {
        unlink(w->tmp);
        die("cannot write '%s': %s", esc(html), strerror(errno));
    }
}

/* A write error ends the report: what was written so far cannot be trusted to be whole. */
static noreturn void out_fail(struct out *w, int rc)
{
    if (w->tmp)
        unlink(w->tmp);
    if (w->path)
        die("cannot write '%s': %s", esc(w->path), strerror(-rc));
    die("cannot write the report: %s", strerror(-rc));
}

static void out_check(struct out *w)
{
    int rc = ml_report_flush(w->f);

    if (rc)
        out_fail(w, rc);
}

static void out_close(struct out *w)
{
    out_check(w);
    if (w->f == stdout)
        return;
    if (fclose(w->f))
        out_fail(w, -errno);
    if (w->tmp && rename(w->tmp, w->path))
        out_fail(w, -errno);
    free(w->tmp);
}

/* What one run of the command has done so far. */
struct job {
    const struct ml_report_opts *o;
    const struct ml_renderer *rd;
    int need_tl;      /* build timelines */
    int merge;        /* --merge: fold, render at the end */
    int timeline;     /* --timeline: some profile must have one */
    const char *html; /* --html path */
    struct out out;
    int begun;    /* the renderer's begin ran */
    size_t shown; /* profiles (or merged groups) rendered */
    size_t ngood; /* profiles read */
    int ntl;      /* of which with a timeline */
    int checked;  /* --region and --timeline checks passed */
    char *found;  /* [nregion_names]: some profile has that region */
    struct ml_merge *m;
};

/* Notes which --region names r has. */
static void note_regions(struct job *j, const struct ml_profile *p)
{
    for (size_t k = 0; k < j->o->nregion_names; k++)
        for (uint64_t reg = 0; reg < p->nregions && !j->found[k]; reg++)
            j->found[k] = !strcmp(j->o->regions[k], ml_profile_str(p, p->regions[reg]));
    j->ntl += p->timeline != NULL;
}

/* Every --region name must name a region of some profile: a typo should not print nothing. */
static void check_notes(struct job *j)
{
    for (size_t k = 0; k < j->o->nregion_names; k++)
        if (!j->found[k])
            die("no region '%s' in the profiles; 'memlens report' without --region lists them",
                esc(j->o->regions[k]));
    if (j->timeline && !j->ntl)
        die("no timeline in the profiles; run the program with MEMLENS_INTERVAL=100ms");
    j->checked = 1;
}

/* Renders one report (and its timeline); the output is checked after each profile. */
static void render(struct job *j, const struct ml_report *r)
{
    struct ml_timeline *t = NULL;
    int rc;

    if (!j->checked)
        check_notes(j);
    if (j->need_tl && ml_timeline_build(r, &t))
        die("out of memory");
    if (!j->begun) {
        out_open(&j->out, j->html);
        if (j->rd->begin)
            j->rd->begin(j->out.f, j->o);
        j->begun = 1;
    }
    rc = j->rd->profile(j->out.f, r, t, j->shown++, j->o);
    ml_timeline_free(t);
    if (rc)
        die("%s", strerror(-rc));
    out_check(&j->out);
}

/* Reads one profile and renders it (or folds it into --merge); 0, or -1 if it was bad. */
static int one(struct job *j, const struct input *in)
{
    struct ml_profile *p;
    struct ml_report *r;
    char err[256] = "";
    int rc = ml_profile_read(in->path, in->flags, &p, err, sizeof(err));

    if (!rc)
        rc = ml_report_build(p, in->path, &r);
    if (rc) {
        if (rc == -ENOMEM)
            die("out of memory");
        ml_profile_free(p);
        return error("cannot read profile '%s': %s", esc(in->path), err[0] ? err : strerror(-rc));
    }
    j->ngood++;
    if (j->merge) {
        rc = ml_merge_add(j->m, p, r);
        ml_report_free(r);
        if (rc)
            die("out of memory");
        return 0;
    }
    note_regions(j, p);
    render(j, r);
    ml_report_free(r);
    ml_profile_free(p);
    return 0;
}

/* --merge: one report per program, once every profile is folded in. */
static void render_merged(struct job *j)
{
    size_t n = ml_merge_count(j->m);

    for (size_t i = 0; i < n; i++) {
        const char *name;
        const struct ml_profile *p = ml_merge_profile(j->m, i, &name);
        if (!p)
            die("out of memory");
        note_regions(j, p);
    }
    for (size_t i = 0; i < n; i++) {
        const char *name;
        const struct ml_profile *p = ml_merge_profile(j->m, i, &name);
        struct ml_report *r;
        if (!p || ml_report_build(p, name, &r))
            die("out of memory");
        render(j, r);
        ml_report_free(r);
    }
}

/*
 * --region and --timeline are checked before anything is printed. With
 * several profiles that takes a first pass over them (only then), reading
 * one at a time; errors are left to the second pass.
 */
static void check_first(struct job *j, const struct paths *ps)
{
    for (size_t k = 0; k < ps->n; k++) {
        struct ml_profile *p;
        char err[256];
        if (ml_profile_read(ps->v[k].path, ps->v[k].flags, &p, err, sizeof(err)) == 0)
            note_regions(j, p);
        ml_profile_free(p);
    }
    check_notes(j);
}

int cmd_report(int argc, char **argv)
{
    struct ml_report_opts o = {.rows = ML_REPORT_THREADS_AND_TOTALS};
    const char **names = NULL;
    struct paths ps = {0};
    enum fmt fmt = FMT_TABLE;
    struct job j = {.o = &o};
    int nfmt = 0, bad, i;
    char *dflt[] = {"memlens-out"};

    names = calloc((size_t)argc, sizeof(*names));
    if (!names)
        die("out of memory");
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(report_usage, stdout);
            free(names);
            return 0;
        } else if (!strcmp(a, "--csv")) {
            fmt = FMT_CSV, nfmt++;
        } else if (!strcmp(a, "--json")) {
            fmt = FMT_JSON, nfmt++;
        } else if (!strcmp(a, "--blocks")) {
            fmt = FMT_BLOCKS, nfmt++;
        } else if (!strcmp(a, "--timeline")) {
            j.timeline = 1;
        } else if (!strcmp(a, "--merge")) {
            j.merge = 1;
        } else if (!strcmp(a, "--html") || !strncmp(a, "--html=", 7)) {
            if (a[6] == '=') {
                j.html = a + 7;
            } else if (i + 1 < argc) {
                j.html = argv[++i];
            } else {
                error("option '--html' needs an output file ('-' for stdout)");
                usage(report_usage);
            }
            fmt = FMT_HTML, nfmt++;
        } else if (!strcmp(a, "--totals")) {
            o.rows = ML_REPORT_TOTALS;
        } else if (!strcmp(a, "--threads")) {
            o.rows = ML_REPORT_THREADS_AND_TOTALS;
        } else if (!strcmp(a, "--top") || !strncmp(a, "--top=", 6)) {
            const char *v = a[5] == '=' ? a + 6 : i + 1 < argc ? argv[++i] : NULL;
            char *end;
            unsigned long long k = v ? strtoull(v, &end, 10) : 0;
            if (!v || !*v || *end || !k || v[0] == '-' || k > SIZE_MAX) {
                error("option '--top' needs a positive number of rows, got '%s'", v ? v : "");
                usage(report_usage);
            }
            o.top = (size_t)k;
        } else if (!strcmp(a, "--region") || !strncmp(a, "--region=", 9)) {
            if (a[8] == '=') {
                names[o.nregion_names++] = a + 9;
            } else if (i + 1 < argc) {
                names[o.nregion_names++] = argv[++i];
            } else {
                error("option '--region' needs a region name");
                usage(report_usage);
            }
        } else if (!strcmp(a, "--")) {
            i++;
            break;
        } else if (a[0] == '-' && a[1]) {
            error("unknown option '%s'", a);
            usage(report_usage);
        } else {
            break;
        }
    }
    if (o.top && fmt == FMT_BLOCKS) {
        error("--top ranks the blocks itself; use it without --blocks");
        usage(report_usage);
    }
    if (nfmt > 1) {
        error("choose one of --csv, --json, --blocks and --html (--json already lists the units)");
        usage(report_usage);
    }
    if (j.timeline && (fmt == FMT_JSON || fmt == FMT_BLOCKS)) {
        error("--timeline goes with the table or --csv (--html always has the timeline)");
        usage(report_usage);
    }
    if (j.timeline && j.merge) {
        error("--timeline shows one run over time; it does not combine with --merge");
        usage(report_usage);
    }
    o.regions = names;
    j.found = calloc(o.nregion_names + 1, 1);
    if (!j.found)
        die("out of memory");
    if (o.top)
        j.rd = fmt == FMT_CSV    ? &ml_render_top_csv
               : fmt == FMT_JSON ? &ml_render_top_json
                                 : &ml_render_top;
    else if (fmt == FMT_CSV)
        j.rd = j.timeline ? &ml_render_timeline_csv : &ml_render_csv;
    else if (fmt == FMT_JSON)
        j.rd = &ml_render_json;
    else if (fmt == FMT_BLOCKS)
        j.rd = &ml_render_blocks;
    else if (fmt == FMT_HTML)
        j.rd = &ml_render_html;
    else
        j.rd = j.timeline ? &ml_render_timeline : &ml_render_table;
    j.need_tl = !o.top && (j.timeline || fmt == FMT_HTML);

    bad = i < argc ? collect(&ps, argc - i, argv + i, 1) : collect(&ps, 1, dflt, 0);
    if (j.merge) {
        j.m = ml_merge_new();
        if (!j.m)
            die("out of memory");
    } else if (ps.n > 1 && (o.nregion_names || j.timeline)) {
        check_first(&j, &ps);
    }
    for (size_t k = 0; k < ps.n; k++)
        bad += one(&j, &ps.v[k]) < 0;
    if (j.merge)
        render_merged(&j);
    if (j.begun) {
        if (j.rd->end)
            j.rd->end(j.out.f, &o);
        out_close(&j.out);
    } else if (!j.ngood && !bad) {
        error("no profiles to report");
    }
    if (bad && j.ngood)
        error("%d of %zu inputs could not be read; the report shows the others", bad,
              j.ngood + (size_t)bad);
    for (size_t k = 0; k < ps.n; k++)
        free(ps.v[k].path);
    free(ps.v);
    free(j.found);
    free(names);
    ml_merge_free(j.m);
    return bad || !j.ngood ? 128 : 0;
}
