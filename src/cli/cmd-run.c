/* memlens run: runs a program with the runtime configured and says where its profiles went. */
#include "cli/cli.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

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

static int is_profile(const char *name)
{
    size_t len = strlen(name);

    return len > 4 && !strcmp(name + len - 4, ".mlp");
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Names of the profiles in dir, sorted; *n = 0 when there is no such directory. */
static char **profiles_in(const char *dir, size_t *n)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char **v = NULL;
    size_t cap = 0;

    *n = 0;
    if (!d)
        return NULL;
    while ((e = readdir(d))) {
        if (!is_profile(e->d_name))
            continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 64;
            v = realloc(v, cap * sizeof(*v));
            if (!v)
                die("out of memory");
        }
        if (!(v[(*n)++] = strdup(e->d_name)))
            die("out of memory");
    }
    closedir(d);
    if (*n)
        qsort(v, *n, sizeof(*v), name_cmp);
    return v;
}

/*
 * Lists the profiles in dir that were not there before the run: names carry
 * a token unique to each process start, so a new name is a new profile.
 */
static void list_new(const char *dir, char **before, size_t nbefore)
{
    size_t n, shown = 0;
    char **now = profiles_in(dir, &n);

    for (size_t i = 0; i < n; i++) {
        if (!nbefore || !bsearch(&now[i], before, nbefore, sizeof(*before), name_cmp)) {
            fprintf(stderr, "memlens: profile '%s/%s'\n", dir, now[i]);
            shown++;
        }
        free(now[i]);
    }
    free(now);
    if (!shown)
        fprintf(stderr,
                "memlens: no profile written to '%s' (was the program built with memlens-cc?)\n",
                dir);
}

/* MEMLENS_OUT made absolute, so that the program and this listing agree whatever it does. */
static char *absolute(const char *dir)
{
    char cwd[4096], *abs;

    if (dir[0] == '/')
        return strdup(dir);
    if (!getcwd(cwd, sizeof(cwd)))
        die("cannot resolve '%s': the current directory is unknown: %s", dir, strerror(errno));
    if (asprintf(&abs, "%s/%s", cwd, dir) < 0)
        die("out of memory");
    return abs;
}

int cmd_run(int argc, char **argv)
{
    const char *out = getenv("MEMLENS_OUT");
    int quiet = 0, i, status;
    char *dir, **before;
    size_t nbefore;
    pid_t pid;

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
    dir = absolute(out);
    if (!dir)
        die("out of memory");
    if (setenv("MEMLENS_OUT", dir, 1))
        die("cannot set MEMLENS_OUT: %s", strerror(errno));
    before = profiles_in(dir, &nbefore);
    pid = fork();
    if (pid < 0)
        die("cannot fork: %s", strerror(errno));
    if (pid == 0) {
        execvp(argv[i], argv + i);
        fprintf(stderr, "memlens: cannot run '%s': %s\n", argv[i], strerror(errno));
        _exit(127);
    }
    /* The child gets the terminal's SIGINT; we wait for it to write its profile. */
    signal(SIGINT, SIG_IGN);
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            die("cannot wait for '%s': %s", argv[i], strerror(errno));
    if (!quiet)
        list_new(dir, before, nbefore);
    for (size_t k = 0; k < nbefore; k++)
        free(before[k]);
    free(before);
    free(dir);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}
