/* memlens report: reads region profiles (.mlp) and prints per region and thread figures. */
#include "cli/cli.h"
#include "report/report.h"
#include "report/timeline.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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
    "    --region <name>   only this region (repeatable)\n"
    "    --totals          only the totals over threads\n"
    "    --threads         each thread and the totals (default)\n"
    "    -h, --help        this text\n"
    "\n"
    "Unreadable profiles are reported on stderr and skipped; the others are shown\n"
    "and the exit status is then 128. See docs/report.md for the layouts.\n";

enum fmt { FMT_TABLE, FMT_CSV, FMT_JSON, FMT_BLOCKS, FMT_HTML };

struct paths {
    char **v;
    size_t n, cap;
};

static void paths_add(struct paths *ps, char *path)
{
    if (ps->n == ps->cap) {
        ps->cap = ps->cap ? 2 * ps->cap : 16;
        ps->v = realloc(ps->v, ps->cap * sizeof(*ps->v));
        if (!ps->v)
            die("out of memory");
    }
    ps->v[ps->n++] = path;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Adds the *.mlp files of dir in name order; returns how many. */
static size_t add_dir(struct paths *ps, const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    size_t first = ps->n;

    if (!d)
        return 0;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        char *path;
        if (len <= 4 || strcmp(e->d_name + len - 4, ".mlp"))
            continue;
        if (asprintf(&path, "%s/%s", dir, e->d_name) < 0)
            die("out of memory");
        paths_add(ps, path);
    }
    closedir(d);
    qsort(ps->v + first, ps->n - first, sizeof(*ps->v), cmp_str);
    return ps->n - first;
}

/* Expands arguments into profile paths; returns the number of arguments that failed. */
static int collect(struct paths *ps, int argc, char **argv, int explicit)
{
    int bad = 0;

    for (int i = 0; i < argc; i++) {
        struct stat st;
        int found = stat(argv[i], &st) == 0;
        int missing = !found && errno == ENOENT;
        char *path;

        if (found && S_ISDIR(st.st_mode)) {
            if (!add_dir(ps, argv[i])) {
                error("no profiles (*.mlp) in '%s'%s", argv[i],
                      explicit ? "" : "; run a program with 'memlens run' or name a profile");
                bad++;
            }
            continue;
        }
        if (!explicit && missing) {
            error("cannot open '%s': no such directory; run a program with 'memlens run' "
                  "or name a profile",
                  argv[i]);
            bad++;
            continue;
        }
        path = strdup(argv[i]);
        if (!path)
            die("out of memory");
        paths_add(ps, path);
    }
    return bad;
}

/* Every --region name must name a region of some profile: a typo should not print nothing. */
static void check_regions(struct ml_report *const *reps, size_t n, const struct ml_report_opts *o)
{
    for (size_t k = 0; k < o->nregion_names; k++) {
        int found = 0;
        for (size_t i = 0; i < n && !found; i++)
            for (uint64_t reg = 0; reg < reps[i]->nregions && !found; reg++)
                found = !strcmp(o->regions[k],
                                ml_profile_str(reps[i]->prof, reps[i]->prof->regions[reg]));
        if (!found)
            die("no region '%s' in the profiles; 'memlens report' without --region lists them",
                o->regions[k]);
    }
}

/* --top: the rankings in the chosen layout. */
static int report_top(enum fmt fmt, struct ml_report *const *reps, size_t n,
                      const struct ml_report_opts *o)
{
    if (fmt == FMT_CSV)
        return ml_report_top_csv(stdout, reps, n, o);
    if (fmt == FMT_JSON)
        return ml_report_top_json(stdout, reps, n, o);
    return ml_report_top_table(stdout, reps, n, o);
}

int cmd_report(int argc, char **argv)
{
    struct ml_report_opts o = {.rows = ML_REPORT_THREADS_AND_TOTALS};
    const char **names = NULL;
    struct paths ps = {0};
    struct ml_profile **profs;
    struct ml_report **reps;
    enum fmt fmt = FMT_TABLE;
    struct ml_timeline **tls;
    const char *html = NULL;
    FILE *hf;
    int nfmt = 0, timeline = 0, ntl = 0, bad, i, rc;
    size_t ngood = 0;
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
            timeline = 1;
        } else if (!strcmp(a, "--html") || !strncmp(a, "--html=", 7)) {
            if (a[6] == '=') {
                html = a + 7;
            } else if (i + 1 < argc) {
                html = argv[++i];
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
    if (timeline && (fmt == FMT_JSON || fmt == FMT_BLOCKS)) {
        error("--timeline goes with the table or --csv (--html always has the timeline)");
        usage(report_usage);
    }
    o.regions = names;

    bad = i < argc ? collect(&ps, argc - i, argv + i, 1) : collect(&ps, 1, dflt, 0);
    profs = calloc(ps.n + 1, sizeof(*profs));
    reps = calloc(ps.n + 1, sizeof(*reps));
    tls = calloc(ps.n + 1, sizeof(*tls));
    if (!profs || !reps || !tls)
        die("out of memory");
    for (size_t k = 0; k < ps.n; k++) {
        char err[256] = "";
        rc = ml_profile_read(ps.v[k], &profs[ngood], err, sizeof(err));
        if (!rc)
            rc = ml_report_build(profs[ngood], ps.v[k], &reps[ngood]);
        if (rc) {
            error("cannot read profile '%s': %s", ps.v[k], err[0] ? err : strerror(-rc));
            ml_profile_free(profs[ngood]);
            profs[ngood] = NULL;
            bad++;
            continue;
        }
        if (ml_timeline_build(reps[ngood], &tls[ngood]))
            die("out of memory");
        ntl += tls[ngood] != NULL;
        ngood++;
    }
    if (!ngood) {
        if (!bad)
            error("no profiles to report");
        goto out;
    }
    check_regions(reps, ngood, &o);
    if (timeline && !ntl)
        die("no timeline in the profiles; run the program with MEMLENS_INTERVAL=100ms");

    if (o.top) {
        rc = report_top(fmt, reps, ngood, &o);
        goto written;
    }
    switch (fmt) {
    case FMT_CSV:
        rc = timeline ? ml_report_timeline_csv(stdout, reps, tls, ngood, &o)
                      : ml_report_csv(stdout, reps, ngood, &o);
        break;
    case FMT_HTML:
        hf = strcmp(html, "-") ? fopen(html, "w") : stdout;
        if (!hf)
            die("cannot write '%s': %s", html, strerror(errno));
        rc = ml_report_html(hf, reps, tls, ngood, &o);
        if (hf != stdout && fclose(hf) && !rc)
            rc = -EIO;
        break;
    case FMT_JSON:
        rc = ml_report_json(stdout, reps, ngood, &o);
        break;
    case FMT_BLOCKS:
        rc = ml_report_blocks_csv(stdout, reps, ngood, &o);
        break;
    default:
        rc = timeline ? ml_report_timeline_table(stdout, reps, tls, ngood, &o)
                      : ml_report_table(stdout, reps, ngood, &o);
        break;
    }
written:
    if (rc)
        die("cannot write the report: %s", strerror(-rc));
    if (bad)
        error("%d of %zu inputs could not be read; the report shows the others", bad,
              ngood + (size_t)bad);
out:
    for (size_t k = 0; k < ngood; k++) {
        ml_timeline_free(tls[k]);
        ml_report_free(reps[k]);
        ml_profile_free(profs[k]);
    }
    for (size_t k = 0; k < ps.n; k++)
        free(ps.v[k]);
    free(ps.v);
    free(profs);
    free(reps);
    free(tls);
    free(names);
    return bad || !ngood ? 128 : 0;
}
