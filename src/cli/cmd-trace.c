/* memlens trace: runs a program built with --trace, with the trace configured, and lists its traces. */
#include "cli/cli.h"
#include "format/trace.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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
    "These set MEMLENS_TRACE (comma-separated: start=off, regions-only, markers-only,\n"
    "collapse, drop, no-faults, no-pfn), which a traced program also reads when run\n"
    "directly. The program's exit status is passed through. Then:\n"
    "'memlens analyze <trace> summary'. See docs/trace.md.\n";

static void add_opt(char *buf, size_t n, const char *o)
{
    size_t len = strlen(buf);

    snprintf(buf + len, n - len, "%s%s", len ? "," : "", o);
}

/* Lists the traces in dir written since t0, with their sizes and records. */
static void list_new(const char *dir, time_t t0)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;

    if (d) {
        while ((e = readdir(d))) {
            char path[4096], err[256];
            struct stat st;
            struct ml_trace *t;
            size_t len = strlen(e->d_name);
            if (len < 5 || strcmp(e->d_name + len - 4, ".mlt"))
                continue;
            snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
            if (stat(path, &st) || st.st_mtime < t0)
                continue;
            n++;
            if (ml_trace_open(path, &t, err, sizeof(err))) {
                fprintf(stderr, "memlens: trace '%s' (%lld bytes): %s\n", path,
                        (long long)st.st_size, err);
                continue;
            }
            fprintf(stderr, "memlens: trace '%s' (%lld bytes, %llu records%s)\n", path,
                    (long long)st.st_size, (unsigned long long)ml_trace_info(t)->records,
                    ml_trace_info(t)->ended ? "" : ", incomplete");
            ml_trace_close(t);
        }
        closedir(d);
    }
    if (!n)
        fprintf(stderr,
                "memlens: no trace written to '%s' (was the program built with 'memlens cc "
                "--trace'?)\n",
                dir);
}

int cmd_trace(int argc, char **argv)
{
    const char *out = getenv("MEMLENS_OUT");
    char opts[256] = "";
    int quiet = 0, i, status;
    time_t t0 = time(NULL);
    pid_t pid;

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
                   !strcmp(a, "--collapse") || !strcmp(a, "--drop") ||
                   !strcmp(a, "--no-faults") || !strcmp(a, "--no-pfn")) {
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
    if (!out)
        out = "memlens-out";
    if (setenv("MEMLENS_OUT", out, 1) || (opts[0] && setenv("MEMLENS_TRACE", opts, 1)))
        die("cannot set the environment: %s", strerror(errno));
    if (!opts[0])
        unsetenv("MEMLENS_TRACE");
    pid = fork();
    if (pid < 0)
        die("cannot fork: %s", strerror(errno));
    if (pid == 0) {
        execvp(argv[i], argv + i);
        fprintf(stderr, "memlens: cannot run '%s': %s\n", argv[i], strerror(errno));
        _exit(127);
    }
    /* The child gets the terminal's SIGINT; we wait for it to finish its trace. */
    signal(SIGINT, SIG_IGN);
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            die("cannot wait for '%s': %s", argv[i], strerror(errno));
    if (!quiet)
        list_new(out, t0 - 1);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}
