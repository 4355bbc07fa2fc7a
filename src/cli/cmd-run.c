/* memlens run: runs a program with the runtime configured and says where its profiles went. */
#include "cli/cli.h"

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

static const char run_usage[] =
    "usage: memlens run [-o <dir>] [-i <interval>] [-q] [--] <program> [<args>...]\n"
    "\n"
    "Runs a program built with memlens-cc and lists the profiles it wrote.\n"
    "\n"
    "    -o, --output <dir>   profile directory (sets MEMLENS_OUT; default ./memlens-out)\n"
    "    -i, --interval <t>   timeline snapshot every t, e.g. 100ms (sets MEMLENS_INTERVAL;\n"
    "                         units ns, us, ms, s); see 'memlens report --timeline'\n"
    "    -q, --quiet          do not list the profiles afterwards\n"
    "\n"
    "The program's exit status is passed through.\n";

/* Lists .mlp files in dir modified at or after t0. */
static void list_new(const char *dir, time_t t0)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;

    if (!d) {
        fprintf(stderr, "memlens: no profile written to '%s' (was the program built with memlens-cc "
                        "and did it run a region?)\n", dir);
        return;
    }
    while ((e = readdir(d))) {
        char path[4096];
        struct stat st;
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".mlp"))
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if (stat(path, &st) == 0 && st.st_mtime >= t0) {
            fprintf(stderr, "memlens: profile '%s'\n", path);
            n++;
        }
    }
    closedir(d);
    if (!n)
        fprintf(stderr, "memlens: no new profile in '%s' (was the program built with memlens-cc?)\n",
                dir);
}

int cmd_run(int argc, char **argv)
{
    const char *out = getenv("MEMLENS_OUT");
    int quiet = 0, i, status;
    time_t t0 = time(NULL);
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
        } else if (argv[i][0] == '-') {
            error("unknown option '%s'", argv[i]);
            usage(run_usage);
        } else {
            break;
        }
    }
    if (i >= argc)
        usage(run_usage);
    if (!out)
        out = "memlens-out";
    if (setenv("MEMLENS_OUT", out, 1))
        die("cannot set MEMLENS_OUT: %s", strerror(errno));
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
        list_new(out, t0 - 1);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}
