/* memlens analyze: runs trace analyses (summary, membus, reuse, ...) over one or more traces. */
#include "analyze/analyze.h"
#include "analyze/cachesim.h"
#include "analyze/util.h"
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
    "with 'memlens cc --trace' or '--trace=asm', once, chunk by chunk, with each process's\n"
    "threads merged by time, and runs the analyses named (default: summary) in that one\n"
    "pass. Traces of several processes are read one after the other; figures are given\n"
    "per process (pid), thread and, with --by, marker interval.\n"
    "\n"
    "Output:\n"
    "    --csv                comma-separated values (the main table of each analysis)\n"
    "    --json               JSON (every table; one object keyed by analysis when several)\n"
    "    -o, --output <file>  write the report to a file instead of standard output\n"
    "    --html <file>        one self-contained page with charts (analyses default to\n"
    "                         membus reuse streams hotpages bandwidth io)\n"
    "    --force              output files may replace existing ones\n"
    "    --by <what>          break figures down by region, mark, function, loop, io or\n"
    "                         thread (default): each record counts in its thread's\n"
    "                         innermost open interval of that kind ('-': none)\n"
    "    --progress           progress on standard error (default when it is a terminal)\n"
    "    --no-progress        none\n"
    "    -j, --jobs <n>       threads decoding chunks (default: the online CPUs)\n"
    "    -q, --quiet          do not report damaged or truncated parts of traces\n"
    "\n"
    "Cache hierarchy (membus, bandwidth --memory, export; default: this machine's, from\n"
    "sysfs): private l1 and l2 per thread, shared llc; <size>:<ways>, or none\n"
    "    --l1 <geom>  --l2 <geom>  --llc <geom>  --line <bytes>\n"
    "\n"
    "Analysis options:\n"
    "    --filter <file>      membus: write what memory sees as a trace (fills are loads,\n"
    "                         write-backs stores of a line; markers and events kept)\n"
    "    --interval <time>    bandwidth, hotpages, export: 1us..1s (ns, us, ms, s);\n"
    "                         default about 100 intervals per trace\n"
    "    --memory             bandwidth: what memory sees too, through the cache filter\n"
    "    --top <n>            hotpages: pages and lines listed per row (default 10)\n"
    "    --lru <n>            hotpages: entries of the hot-page LRU (default 128)\n"
    "    --sample <rate>      reuse: SHARDS sampling of lines and pages, at a rate that\n"
    "                         starts at 1 and halves while more than --sample-keys keys\n"
    "                         are sampled, never below <rate> (e.g. 0.01); each miss\n"
    "                         ratio comes with its error bound\n"
    "    --sample-keys <n>    reuse: sampled keys per granularity before the rate halves\n"
    "                         (default 8192; memory is O(max(n, rate x keys)))\n"
    "    --perfetto <file>    export: Chrome JSON timeline for ui.perfetto.dev\n"
    "    --din <file>         export: Dinero IV input (din format)\n"
    "\n"
    "Analyses:\n";

static void print_usage(FILE *f)
{
    fputs(analyze_usage_head, f);
    for (size_t i = 0; ml_analyses[i]; i++)
        fprintf(f, "    %-10s %s\n", ml_analyses[i]->name, ml_analyses[i]->summary);
    fputs("\nSee docs/analyze.md; the file format is docs/trace-format.md.\n", f);
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

/* "100us", "2ms", "1s", "500ns", "1000" (ns). */
static uint64_t parse_time(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    double mul = !strcmp(end, "") || !strcmp(end, "ns") ? 1
                 : !strcmp(end, "us")                   ? 1e3
                 : !strcmp(end, "ms")                   ? 1e6
                 : !strcmp(end, "s")                    ? 1e9
                                                        : -1;

    if (end == s || mul < 0 || !(v > 0))
        die("invalid interval '%s' (use 1us..1s: 10us, 2ms, 1s)", s);
    v *= mul;
    if (v < 1e3 || v > 1e9)
        die("interval '%s' is out of range (1us..1s)", s);
    return (uint64_t)(v + 0.5);
}

static const char *arg_of(int argc, char **argv, int *i)
{
    if (*i + 1 >= argc)
        die("option '%s' needs a value", argv[*i]);
    return argv[++*i];
}

static int has(const struct ml_analysis *const *an, int nan, const struct ml_analysis *x)
{
    for (int k = 0; k < nan; k++)
        if (an[k] == x)
            return 1;
    return 0;
}

static void level(const char *opt, const char *v, struct ml_an_level *l)
{
    if (ml_an_parse_level(v, l))
        die("invalid cache geometry '%s' for %s (use <size>:<ways> such as 48k:12, or none)", v,
            opt);
}

int cmd_analyze(int argc, char **argv)
{
    struct ml_an_opts o;
    const struct ml_analysis *an[32];
    struct strs paths = {0};
    const char *outpath = NULL;
    int nan = 0, rc, dashdash = 0, progress = -1;
    struct ml_an_run *run;
    struct ml_outfile of = {.fd = -1}, hf = {.fd = -1};
    char err[512];

    ml_an_opts_init(&o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const struct ml_analysis *x;
        struct stat sb;
        if (dashdash || a[0] != '-' || !a[1]) {
            if (!dashdash && (x = ml_analysis_find(a)) && stat(a, &sb)) {
                if (has(an, nan, x))
                    die("analysis '%s' named twice", a);
                if (nan == (int)(sizeof(an) / sizeof(an[0])))
                    die("too many analyses");
                an[nan++] = x;
            } else if (!stat(a, &sb) && S_ISDIR(sb.st_mode)) {
                add_dir(&paths, a);
            } else {
                push(&paths, a);
            }
        } else if (!strcmp(a, "--")) {
            dashdash = 1;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            print_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--csv")) {
            o.fmt = ML_AN_CSV;
        } else if (!strcmp(a, "--json")) {
            o.fmt = ML_AN_JSON;
        } else if (!strcmp(a, "--progress")) {
            progress = 1;
        } else if (!strcmp(a, "--no-progress")) {
            progress = 0;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            o.warn = NULL;
        } else if (!strcmp(a, "--force")) {
            o.force = 1;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            outpath = arg_of(argc, argv, &i);
        } else if (!strcmp(a, "--html")) {
            o.html = arg_of(argc, argv, &i);
        } else if (!strcmp(a, "--by")) {
            const char *v = arg_of(argc, argv, &i);
            static const char *const names[] = {"thread",   "region", "mark",
                                                "function", "loop",   "io"};
            int k = 0;
            while (k < 6 && strcmp(v, names[k]))
                k++;
            if (k == 6)
                die("invalid --by '%s' (region, mark, function, loop, io or thread)", v);
            o.by = (enum ml_an_by)k;
        } else if (!strcmp(a, "-j") || !strcmp(a, "--jobs") || !strncmp(a, "-j", 2)) {
            const char *v = a[2] && a[1] == 'j' ? a + 2 : arg_of(argc, argv, &i);
            char *end;
            long n = strtol(v, &end, 10);
            if (*end || n < 1 || n > 256)
                die("invalid --jobs '%s' (1..256)", v);
            o.jobs = (int)n;
        } else if (!strcmp(a, "--l1")) {
            level(a, arg_of(argc, argv, &i), &o.l1);
            if (!o.l1.size)
                die("the l1 cache cannot be none");
        } else if (!strcmp(a, "--l2")) {
            level(a, arg_of(argc, argv, &i), &o.l2);
        } else if (!strcmp(a, "--llc")) {
            level(a, arg_of(argc, argv, &i), &o.llc);
        } else if (!strcmp(a, "--line")) {
            const char *v = arg_of(argc, argv, &i);
            char *end;
            unsigned long n = strtoul(v, &end, 10);
            if (*end || n < 8 || n > 4096 || (n & (n - 1)))
                die("invalid --line '%s' (a power of two, 8..4096)", v);
            o.line = (uint32_t)n;
        } else if (!strcmp(a, "--filter")) {
            o.filter = arg_of(argc, argv, &i);
        } else if (!strcmp(a, "--interval")) {
            o.interval_ns = parse_time(arg_of(argc, argv, &i));
        } else if (!strcmp(a, "--memory")) {
            o.memory = 1;
        } else if (!strcmp(a, "--top") || !strcmp(a, "--lru")) {
            const char *v = arg_of(argc, argv, &i);
            char *end;
            unsigned long n = strtoul(v, &end, 10);
            if (*end || !n || n > 1000000)
                die("invalid %s '%s' (1..1000000)", a, v);
            *(a[2] == 't' ? &o.top : &o.lru_pages) = (uint32_t)n;
        } else if (!strcmp(a, "--sample")) {
            const char *v = arg_of(argc, argv, &i);
            char *end;
            double r = strtod(v, &end);
            if (*end || !(r > 0) || r > 1)
                die("invalid --sample '%s' (a rate in (0, 1], such as 0.01)", v);
            o.sample = r;
        } else if (!strcmp(a, "--sample-keys")) {
            const char *v = arg_of(argc, argv, &i);
            char *end;
            unsigned long long n = strtoull(v, &end, 10);
            if (*end || n < 64 || n > (1ull << 32))
                die("invalid --sample-keys '%s' (64..4294967296)", v);
            o.sample_keys = n;
        } else if (!strcmp(a, "--perfetto")) {
            o.perfetto = arg_of(argc, argv, &i);
        } else if (!strcmp(a, "--din")) {
            o.din = arg_of(argc, argv, &i);
        } else {
            error("unknown option '%s'", a);
            print_usage(stderr);
            return 129;
        }
    }
    if (!paths.n) {
        error("no trace given");
        print_usage(stderr);
        return 129;
    }
    if (!nan && o.html) {
        static const char *const dflt[] = {"membus",   "reuse",     "streams",
                                           "hotpages", "bandwidth", "io"};
        for (size_t k = 0; k < sizeof(dflt) / sizeof(dflt[0]); k++)
            an[nan++] = ml_analysis_find(dflt[k]);
    }
    if (!nan)
        an[nan++] = &ml_an_summary;
    if (!has(an, nan, &ml_an_export) && (o.perfetto || o.din))
        an[nan++] = &ml_an_export;
    if (has(an, nan, &ml_an_export) && !o.perfetto && !o.din)
        die("export needs --perfetto <file> or --din <file>");
    if (o.filter && !has(an, nan, &ml_an_membus))
        die("--filter is an option of membus: name the analysis 'membus'");
    {
        struct ml_csim sim;
        if (ml_csim_init(&sim, &o, 0))
            die("invalid cache hierarchy: each size must be a multiple of the line size "
                "times the ways");
        ml_csim_free(&sim);
    }
    o.progress = progress >= 0 ? progress : isatty(2);
    if (outpath && strcmp(outpath, "-")) {
        if (ml_outfile_open(&of, outpath, o.force, err, sizeof(err)))
            die("%s", err);
        o.out = of.f;
    }
    if (o.html && ml_outfile_open(&hf, o.html, o.force, err, sizeof(err))) {
        if (of.path)
            ml_outfile_abort(&of);
        die("%s", err);
    }
    run = ml_an_new(&o, an, nan, err, sizeof(err));
    if (!run) {
        ml_outfile_abort(&of);
        ml_outfile_abort(&hf);
        die("%s", err);
    }
    rc = ml_an_read(run, (const char *const *)paths.v, paths.n, err, sizeof(err));
    if (!rc && ml_an_report(run, o.out, o.fmt))
        snprintf(err, sizeof(err), "cannot write the report: %s", strerror(errno)), rc = -EIO;
    if (!rc && o.html && ml_an_html(run, hf.f))
        snprintf(err, sizeof(err), "cannot write '%s': %s", o.html, strerror(errno)), rc = -EIO;
    ml_an_free(run);
    if (rc) {
        ml_outfile_abort(&of);
        ml_outfile_abort(&hf);
        die("%s", err);
    }
    if (of.path && ml_outfile_commit(&of, o.force, err, sizeof(err)))
        die("%s", err);
    if (hf.path && ml_outfile_commit(&hf, o.force, err, sizeof(err)))
        die("%s", err);
    for (int i = 0; i < paths.n; i++)
        free(paths.v[i]);
    free(paths.v);
    return 0;
}
