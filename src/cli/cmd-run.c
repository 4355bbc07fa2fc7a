/* memlens run: runs a program with the runtime configured and says where its profiles went. */
#include "cli/cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char run_usage[] =
    "usage: memlens run [-o <dir>] [-i <interval>] [-q] [--sample <n>] [--events <list>] [--]\n"
    "                   <program> [<args>...]\n"
    "\n"
    "Runs a program built with memlens-cc and lists the profiles it wrote.\n"
    "\n"
    "    -o, --output <dir>   profile directory (sets MEMLENS_OUT; default ./memlens-out)\n"
    "    -i, --interval <t>   timeline snapshot every t, e.g. 100ms (sets MEMLENS_INTERVAL;\n"
    "                         units ns, us, ms, s); see 'memlens report --timeline'\n"
    "    -q, --quiet          do not list the profiles afterwards\n"
    "    --sample <n>         measure 1 in n executions of each region per thread\n"
    "                         (sets MEMLENS_SAMPLE)\n"
    "    --events <list>      hardware counters around measured executions, perf names\n"
    "                         such as cycles,instructions,L1-dcache-load-misses\n"
    "                         (sets MEMLENS_EVENTS)\n"
    "\n"
    "The program's exit status is passed through.\n";

/*
 * Lists the profiles in dir that were not there before the run: names carry
 * a token unique to each process start, so a new name is a new profile.
 */
static void list_new(const char *dir, char **before, size_t nbefore)
{
    size_t n, shown = 0;
    char **now = ml_cli_files_in(dir, ".mlp", &n);

    for (size_t i = 0; i < n; i++)
        if (ml_cli_is_new(before, nbefore, now[i])) {
            fprintf(stderr, "memlens: profile '%s/%s'\n", dir, now[i]);
            shown++;
        }
    ml_cli_free_files(now, n);
    if (!shown)
        fprintf(stderr,
                "memlens: no profile written to '%s' (was the program built with memlens-cc?)\n",
                dir);
}

int cmd_run(int argc, char **argv)
{
    const char *out = getenv("MEMLENS_OUT");
    int quiet = 0, i, status;
    char *dir, **before;
    size_t nbefore;

    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--")) {
            i++;
            break;
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(run_usage, stdout);
            return 0;
        } else if ((!strcmp(argv[i], "-o") || !strcmp(argv[i], "--output")) && i + 1 < argc) {
            out = argv[++i];
        } else if ((!strcmp(argv[i], "-i") || !strcmp(argv[i], "--interval")) && i + 1 < argc) {
            if (setenv("MEMLENS_INTERVAL", argv[++i], 1))
                die("cannot set MEMLENS_INTERVAL: %s", strerror(errno));
        } else if (!strcmp(argv[i], "-q") || !strcmp(argv[i], "--quiet")) {
            quiet = 1;
        } else if (!strcmp(argv[i], "--sample") && i + 1 < argc) {
            const char *n = argv[++i];
            if (!*n || strspn(n, "0123456789") != strlen(n) || strspn(n, "0") == strlen(n))
                die("bad --sample '%s': expected a positive integer", n);
            if (setenv("MEMLENS_SAMPLE", n, 1))
                die("cannot set MEMLENS_SAMPLE: %s", strerror(errno));
        } else if (!strcmp(argv[i], "--events") && i + 1 < argc) {
            if (setenv("MEMLENS_EVENTS", argv[++i], 1))
                die("cannot set MEMLENS_EVENTS: %s", strerror(errno));
        } else if (argv[i][0] == '-') {
            error("unknown option '%s'", argv[i]);
            usage(run_usage);
        } else {
            break;
        }
    }
    if (i >= argc)
        usage(run_usage);
    if (!out || !*out)
        out = "memlens-out";
    dir = ml_cli_absolute(out);
    if (setenv("MEMLENS_OUT", dir, 1))
        die("cannot set MEMLENS_OUT: %s", strerror(errno));
    before = ml_cli_files_in(dir, ".mlp", &nbefore);
    status = ml_cli_run_child(argv + i);
    if (!quiet)
        list_new(dir, before, nbefore);
    ml_cli_free_files(before, nbefore);
    free(dir);
    return status;
}
