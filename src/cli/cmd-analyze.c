/* memlens analyze: runs trace analyses (summary, dump, ...) over one or more traces. */
#include "analyze/analyze.h"
#include "cli/cli.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char analyze_usage_head[] =
    "usage: memlens analyze [<options>] <trace>... [<analysis>...]\n"
    "\n"
    "Reads memory traces (.mlt files, or directories of them) written by programs built\n"
    "with 'memlens cc --trace', streaming them chunk by chunk with threads merged by\n"
    "time, and runs the analyses named (default: summary). Traces of several processes\n"
    "are read one after the other.\n"
    "\n"
    "    --csv            comma-separated values (one header line per analysis)\n"
    "    --json           JSON\n"
    "    -o, --output <file>  write the report to a file instead of standard output\n"
    "    --progress       chunks read so far on standard error\n"
    "    -q, --quiet      do not report damaged or truncated parts of traces\n"
    "\n"
    "Analyses:\n";

static void print_usage(FILE *f)
{
    fputs(analyze_usage_head, f);
    for (size_t i = 0; ml_analyses[i]; i++)
        fprintf(f, "    %-10s %s\n", ml_analyses[i]->name, ml_analyses[i]->summary);
    fputs("\nSee docs/trace.md; the file format is docs/trace-format.md.\n", f);
}

struct strs {
    char **v;
    int n;
};

/* Takes a copy of x. */
static void push(struct strs *s, const char *x)
{
    char **v = realloc(s->v, (s->n + 1) * sizeof(*v));

    if (!v || !(x = strdup(x)))
        die("out of memory");
    s->v = v;
    s->v[s->n++] = (char *)x;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every .mlt file of a directory, in name order. */
static void add_dir(struct strs *paths, const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int first = paths->n;

    if (!d)
        die("cannot open directory '%s': %s", dir, strerror(errno));
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        char *p;
        if (len < 5 || strcmp(e->d_name + len - 4, ".mlt"))
            continue;
        if (asprintf(&p, "%s/%s", dir, e->d_name) < 0)
            die("out of memory");
        push(paths, p);
        free(p);
    }
    closedir(d);
    if (paths->n == first)
        die("no trace (.mlt) in directory '%s'", dir);
    qsort(paths->v + first, (size_t)(paths->n - first), sizeof(char *), by_name);
}

int cmd_analyze(int argc, char **argv)
{
    struct ml_an_opts o = {.out = stdout, .fmt = ML_AN_TABLE, .warn = stderr};
    const struct ml_analysis *an[16];
    void *st[16];
    struct strs paths = {0};
    const char *outpath = NULL;
    int nan = 0, rc, dashdash = 0;
    char err[512];

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const struct ml_analysis *x;
        struct stat sb;
        if (!dashdash && !strcmp(a, "--")) {
            dashdash = 1;
        } else if (!dashdash && (!strcmp(a, "--help") || !strcmp(a, "-h"))) {
            print_usage(stdout);
            return 0;
        } else if (!dashdash && !strcmp(a, "--csv")) {
            o.fmt = ML_AN_CSV;
        } else if (!dashdash && !strcmp(a, "--json")) {
            o.fmt = ML_AN_JSON;
        } else if (!dashdash && !strcmp(a, "--progress")) {
            o.progress = 1;
        } else if (!dashdash && (!strcmp(a, "-q") || !strcmp(a, "--quiet"))) {
            o.warn = NULL;
        } else if (!dashdash && (!strcmp(a, "-o") || !strcmp(a, "--output"))) {
            if (++i >= argc)
                die("option '%s' needs a file name", a);
            outpath = argv[i];
        } else if (!dashdash && a[0] == '-') {
            error("unknown option '%s'", a);
            print_usage(stderr);
            return 129;
        } else if ((x = ml_analysis_find(a)) && stat(a, &sb)) {
            if (nan == (int)(sizeof(an) / sizeof(an[0])))
                die("too many analyses");
            an[nan++] = x;
        } else if (!stat(a, &sb) && S_ISDIR(sb.st_mode)) {
            add_dir(&paths, a);
        } else {
            push(&paths, a);
        }
    }
    if (!paths.n) {
        error("no trace given");
        print_usage(stderr);
        return 129;
    }
    if (!nan)
        an[nan++] = &ml_an_summary;
    if (outpath && !(o.out = fopen(outpath, "w")))
        die("cannot write '%s': %s", outpath, strerror(errno));
    if (o.progress && !isatty(2))
        o.progress = 0;
    for (int a = 0; a < nan; a++)
        if (!(st[a] = an[a]->start(&o)))
            die("out of memory");
    rc = ml_an_run((const char *const *)paths.v, paths.n, an, st, nan, &o, err, sizeof(err));
    if (rc)
        die("%s", err);
    for (int a = 0; a < nan; a++) {
        if (an[a]->report(st[a], o.out, o.fmt))
            die("cannot write the report: %s", strerror(errno));
        an[a]->free(st[a]);
    }
    if (o.out != stdout && fclose(o.out))
        die("cannot write '%s': %s", outpath, strerror(errno));
    for (int i = 0; i < paths.n; i++)
        free(paths.v[i]);
    free(paths.v);
    return 0;
}
