/* memlens trace: runs a program built with --trace, with the trace configured, and lists its
 * traces. */
#include "cli/cli.h"
#include "format/trace.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char trace_usage[] =
    "usage: memlens trace [<options>] [--] <program> [<args>...]\n"
    "\n"
    "Runs a program built with 'memlens cc --trace' (memlens-cc --ml-trace) and lists\n"
    "the traces it wrote, one per process: every load and store of instrumented code\n"
    "with markers (regions, MEMLENS_MARK, threads, fork/exec, mmap/munmap/brk, I/O,\n"
    "page faults) in $MEMLENS_OUT/<prog>.<pid>.<token>.mlt.\n"
    "\n"
    "    -o, --output <dir>  trace directory (sets MEMLENS_OUT; default ./memlens-out)\n"
    "    --start <on|off>    record accesses from the start (default) or only after\n"
    "                        MEMLENS_TRACE_ON()\n"
    "    --regions-only      record accesses only while a region is open (any thread)\n"
    "    --markers-only      record markers and events, no accesses\n"
    "    --collapse          one record per run of consecutive accesses of a thread to\n"
    "                        one 64-byte line (with their count)\n"
    "    --drop              never wait for the writer: drop full buffers and count them\n"
    "                        (default: the program waits, and the waits are recorded)\n"
    "    --no-faults         no page-fault records\n"
    "    --no-pfn            no physical frame numbers at page faults\n"
    "    -q, --quiet         do not list the traces afterwards\n"
    "\n"
    "These replace MEMLENS_TRACE (comma-separated: start=off, regions-only, markers-only,\n"
    "collapse, drop, no-faults, no-pfn), which a traced program also reads when run\n"
    "directly. The program's exit status is passed through. Then:\n"
    "'memlens analyze <trace> summary'. See docs/trace.md.\n";

static void add_opt(char *buf, size_t n, const char *o)
{
    size_t len = strlen(buf);

    snprintf(buf + len, n - len, "%s%s", len ? "," : "", o);
}

/* Lists the traces in dir that were not there before the run, with sizes and records. */
static void list_new(const char *dir, char **before, size_t nbefore)
{
    size_t n, shown = 0;
    char **now = ml_cli_files_in(dir, ".mlt", &n);

    for (size_t i = 0; i < n; i++) {
        char path[4096], err[256];
        struct stat st;
        struct ml_trace *t;
        if (!ml_cli_is_new(before, nbefore, now[i]))
            continue;
        shown++;
        snprintf(path, sizeof(path), "%s/%s", dir, now[i]);
        if (stat(path, &st))
            st.st_size = 0;
        if (ml_trace_open(path, &t, err, sizeof(err))) {
            fprintf(stderr, "memlens: trace '%s' (%lld bytes): %s\n", path, (long long)st.st_size,
                    err);
            continue;
        }
        fprintf(stderr, "memlens: trace '%s' (%lld bytes, %llu records%s)\n", path,
                (long long)st.st_size, (unsigned long long)ml_trace_info(t)->records,
                ml_trace_info(t)->ended ? "" : ", incomplete");
        ml_trace_close(t);
    }
    ml_cli_free_files(now, n);
    if (!shown)
        fprintf(stderr,
                "memlens: no trace written to '%s' (was the program built with 'memlens cc "
                "--trace'?)\n",
                dir);
}

int cmd_trace(int argc, char **argv)
{
    const char *out = getenv("MEMLENS_OUT");
    char opts[256] = "", *dir, **before;
    int quiet = 0, i, status;
    size_t nbefore;

    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) {
            i++;
            break;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(trace_usage, stdout);
            return 0;
        } else if ((!strcmp(a, "-o") || !strcmp(a, "--output")) && i + 1 < argc) {
            out = argv[++i];
        } else if (!strcmp(a, "--start") && i + 1 < argc) {
            const char *v = argv[++i];
            if (!strcmp(v, "off"))
                add_opt(opts, sizeof(opts), "start=off");
            else if (strcmp(v, "on"))
                die("bad --start '%s': expected on or off", v);
        } else if (!strncmp(a, "--start=", 8)) {
            if (!strcmp(a + 8, "off"))
                add_opt(opts, sizeof(opts), "start=off");
            else if (strcmp(a + 8, "on"))
                die("bad --start '%s': expected on or off", a + 8);
        } else if (!strcmp(a, "--regions-only") || !strcmp(a, "--markers-only") ||
                   !strcmp(a, "--collapse") || !strcmp(a, "--drop") || !strcmp(a, "--no-faults") ||
                   !strcmp(a, "--no-pfn")) {
            add_opt(opts, sizeof(opts), a + 2);
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            quiet = 1;
        } else if (a[0] == '-') {
            error("unknown option '%s'", a);
            usage(trace_usage);
        } else {
            break;
        }
    }
    if (i >= argc)
        usage(trace_usage);
    if (!out || !*out)
        out = "memlens-out";
    dir = ml_cli_absolute(out);
    /* Options replace MEMLENS_TRACE; without any, the one in the environment holds. */
    if (setenv("MEMLENS_OUT", dir, 1) || (opts[0] && setenv("MEMLENS_TRACE", opts, 1)))
        die("cannot set the environment: %s", strerror(errno));
    before = ml_cli_files_in(dir, ".mlt", &nbefore);
    status = ml_cli_run_child(argv + i);
    if (!quiet)
        list_new(dir, before, nbefore);
    ml_cli_free_files(before, nbefore);
    free(dir);
    return status;
}
