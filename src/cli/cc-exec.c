/* Child processes and temporary files of memlens cc. */
#include "cli/cc-exec.h"
#include "cli/cc-args.h"
#include "cli/cli.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

bool ml_cc_verbose;
bool ml_cc_keep_temps;

static char *tmp_dir;
/* Paths handed out, for the signal handler (which must not walk directories). */
static struct ml_strv tmp_files;
static int tmp_count;

/* Removes the temporary directory; safe in a signal handler when from_signal. */
static void tmp_remove(bool from_signal)
{
    DIR *d;
    struct dirent *e;

    if (!tmp_dir || ml_cc_keep_temps)
        return;
    for (int i = 0; i < tmp_files.n; i++)
        unlink(tmp_files.v[i]);
    /* Side files clang writes next to its outputs (.dwo, .su, ...) go too. */
    if (!from_signal && (d = opendir(tmp_dir))) {
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
                unlinkat(dirfd(d), e->d_name, 0);
        closedir(d);
    }
    rmdir(tmp_dir);
}

static void tmp_atexit(void)
{
    if (tmp_dir && ml_cc_keep_temps)
        fprintf(stderr, "memlens: temporary files kept in '%s'\n", tmp_dir);
    tmp_remove(false);
}

static void tmp_on_signal(int sig)
{
    tmp_remove(true);
    signal(sig, SIG_DFL);
    raise(sig);
}

const char *ml_cc_tmp_path(const char *name)
{
    sigset_t all, old;
    char *path;

    if (!tmp_dir) {
        const char *base = getenv("TMPDIR");
        static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};

        tmp_dir = ml_cc_strfmt("%s/memlens-cc-XXXXXX", base && *base ? base : "/tmp");
        if (!mkdtemp(tmp_dir))
            die("cannot create a temporary directory '%s': %s", tmp_dir, strerror(errno));
        atexit(tmp_atexit);
        for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
            struct sigaction sa = {.sa_handler = tmp_on_signal};

            sigaction(sigs[i], &sa, NULL);
        }
    }
    path = ml_cc_strfmt("%s/%d-%s", tmp_dir, tmp_count++, name);
    /* The handler must never see the vector half-grown. */
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old);
    ml_strv_push(&tmp_files, path);
    sigprocmask(SIG_SETMASK, &old, NULL);
    return path;
}

static bool needs_quotes(const char *s)
{
    if (!*s)
        return true;
    for (; *s; s++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=+./,:@%^",
                    *s))
            return true;
    return false;
}

void ml_cc_trace(char *const *argv)
{
    if (!ml_cc_verbose)
        return;
    fputs("memlens:", stderr);
    for (; *argv; argv++) {
        if (!needs_quotes(*argv)) {
            fprintf(stderr, " %s", *argv);
            continue;
        }
        fputs(" '", stderr);
        for (const char *p = *argv; *p; p++)
            if (*p == '\'')
                fputs("'\\''", stderr);
            else
                fputc(*p, stderr);
        fputc('\'', stderr);
    }
    fputc('\n', stderr);
}

int ml_cc_run(char *const *argv)
{
    pid_t pid;
    int err, status;

    ml_cc_trace(argv);
    fflush(stdout);
    fflush(stderr);
    err = posix_spawnp(&pid, argv[0], NULL, NULL, argv, environ);
    if (err)
        die("cannot run '%s': %s", argv[0], strerror(err));
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            die("cannot wait for '%s': %s", argv[0], strerror(errno));
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    return 128 + WTERMSIG(status);
}

_Noreturn void ml_cc_exec(char *const *argv)
{
    ml_cc_trace(argv);
    tmp_remove(false);
    fflush(stdout);
    fflush(stderr);
    execvp(argv[0], argv);
    die("cannot run '%s': %s", argv[0], strerror(errno));
}
