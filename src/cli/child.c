/* Running a profiled or traced program for 'memlens run' and 'memlens trace', and finding its
 * files. */
#include "cli/cli.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

char *ml_cli_absolute(const char *dir)
{
    char cwd[4096], *abs;

    if (dir[0] == '/') {
        if (!(abs = strdup(dir)))
            die("out of memory");
        return abs;
    }
    if (!getcwd(cwd, sizeof(cwd)))
        die("cannot resolve '%s': the current directory is unknown: %s", dir, strerror(errno));
    if (asprintf(&abs, "%s/%s", cwd, dir) < 0)
        die("out of memory");
    return abs;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

char **ml_cli_files_in(const char *dir, const char *suffix, size_t *n)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char **v = NULL;
    size_t cap = 0, sl = strlen(suffix);

    *n = 0;
    if (!d)
        return NULL;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len <= sl || strcmp(e->d_name + len - sl, suffix))
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

int ml_cli_is_new(char *const *before, size_t nbefore, const char *name)
{
    return !nbefore || !bsearch(&name, before, nbefore, sizeof(*before), name_cmp);
}

void ml_cli_free_files(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

int ml_cli_run_child(char **argv)
{
    pid_t pid = fork();
    int status;

    if (pid < 0)
        die("cannot fork: %s", strerror(errno));
    if (pid == 0) {
        execvp(argv[0], argv);
        fprintf(stderr, "memlens: cannot run '%s': %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    /* The child gets the terminal's SIGINT; we wait for it to write its files. */
    signal(SIGINT, SIG_IGN);
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            die("cannot wait for '%s': %s", argv[0], strerror(errno));
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}
