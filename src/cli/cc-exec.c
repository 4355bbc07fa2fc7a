/* Child processes, their outputs and temporary files of memlens cc. */
#include "cli/cc-exec.h"
#include "cli/cc-args.h"
#include "cli/cli.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

bool ml_cc_verbose;
bool ml_cc_keep_temps;

/* What the signal handler cleans up; each is set only once complete. */
static char *volatile tmp_dir;
static volatile pid_t child;              /* the running child, or 0 */
static volatile sig_atomic_t child_group; /* it leads its own process group */
static const char *volatile partial;      /* an output being written through a temporary */

static const int fwd_sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

/*
 * Removes the temporary directory and everything in it (clang also leaves
 * side files there: .dwo, .su, ...). Async-signal-safe: getdents64 instead of
 * readdir, which may allocate.
 */
static void tmp_remove(void)
{
    char buf[4096];
    long n;
    int fd;

    if (!tmp_dir || ml_cc_keep_temps)
        return;
    fd = open(tmp_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    while (fd >= 0 && (n = getdents64(fd, buf, sizeof(buf))) > 0) {
        for (long off = 0; off < n;) {
            struct dirent64 *e = (struct dirent64 *)(buf + off);

            if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
                unlinkat(fd, e->d_name, 0);
            off += e->d_reclen;
        }
    }
    if (fd >= 0)
        close(fd);
    rmdir(tmp_dir);
}

static void tmp_atexit(void)
{
    if (tmp_dir && ml_cc_keep_temps)
        fprintf(stderr, "memlens: temporary files kept in '%s'\n", tmp_dir);
    tmp_remove();
}

/* Passes the signal on to the child, waits for it, cleans up and dies of the signal. */
static void on_signal(int sig)
{
    pid_t pid = child;

    if (pid > 0) {
        pid_t target = child_group ? -pid : pid;
        struct timespec tick = {0, 10 * 1000 * 1000};

        kill(target, sig);
        /* clang ends within milliseconds; anything that ignores the signal gets 5 s. */
        for (int i = 0; waitpid(pid, NULL, WNOHANG) == 0; i++) {
            if (i == 500)
                kill(target, SIGKILL);
            nanosleep(&tick, NULL);
        }
    }
    if (partial)
        unlink(partial);
    tmp_remove();
    signal(sig, SIG_DFL);
    raise(sig); /* delivered when the handler returns: the exit status make expects */
}

static void block_signals(sigset_t *old)
{
    sigset_t set;

    sigemptyset(&set);
    for (size_t i = 0; i < sizeof(fwd_sigs) / sizeof(fwd_sigs[0]); i++)
        sigaddset(&set, fwd_sigs[i]);
    sigprocmask(SIG_BLOCK, &set, old);
}

static void setup_signals(void)
{
    static bool done;
    struct sigaction sa = {.sa_handler = on_signal};

    if (done)
        return;
    done = true;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof(fwd_sigs) / sizeof(fwd_sigs[0]); i++)
        sigaddset(&sa.sa_mask, fwd_sigs[i]);
    for (size_t i = 0; i < sizeof(fwd_sigs) / sizeof(fwd_sigs[0]); i++) {
        struct sigaction old;

        /* A signal ignored by whoever started memlens (nohup, background jobs) stays so. */
        if (!sigaction(fwd_sigs[i], NULL, &old) && old.sa_handler != SIG_IGN)
            sigaction(fwd_sigs[i], &sa, NULL);
    }
}

const char *ml_cc_tmp_path(const char *name)
{
    static int count;

    if (!tmp_dir) {
        const char *base = getenv("TMPDIR");
        char *dir = ml_cc_strfmt("%s/memlens-cc-XXXXXX", base && *base ? base : "/tmp");

        setup_signals();
        if (!mkdtemp(dir))
            die("cannot create a temporary directory '%s': %s", dir, strerror(errno));
        tmp_dir = dir;
        atexit(tmp_atexit);
    }
    return ml_cc_strfmt("%s/%d-%s", tmp_dir, count++, name);
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

/*
 * In the foreground of a terminal, the terminal signals the child itself, and a
 * child in another process group would be stopped when it reads the terminal
 * (SIGTTIN) or, with 'stty tostop', writes to it.
 */
static bool terminal_foreground(void)
{
    for (int fd = 0; fd <= 2; fd++) {
        pid_t pg = tcgetpgrp(fd);

        if (pg > 0 && pg == getpgrp())
            return true;
    }
    return false;
}

/*
 * Starts argv with its standard output on out_fd and /dev/fd/3 on side_fd (if
 * >= 0), its standard error on /dev/null if quiet, and records it for
 * on_signal.
 */
static pid_t spawn(char *const *argv, int out_fd, int side_fd, bool quiet)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    bool group = !terminal_foreground();
    short flags = POSIX_SPAWN_SETSIGMASK;
    sigset_t old;
    pid_t pid;
    int err;

    ml_cc_trace(argv);
    fflush(stdout);
    fflush(stderr);
    setup_signals();
    posix_spawn_file_actions_init(&fa);
    if (out_fd >= 0)
        posix_spawn_file_actions_adddup2(&fa, out_fd, STDOUT_FILENO);
    if (side_fd >= 0)
        posix_spawn_file_actions_adddup2(&fa, side_fd, 3);
    if (quiet)
        posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawnattr_init(&attr);
    if (group) {
        flags |= POSIX_SPAWN_SETPGROUP;
        posix_spawnattr_setpgroup(&attr, 0);
    }
    /* No signal may arrive between the start and the record of the child. */
    block_signals(&old);
    posix_spawnattr_setsigmask(&attr, &old);
    posix_spawnattr_setflags(&attr, flags);
    err = posix_spawnp(&pid, argv[0], &fa, &attr, argv, environ);
    if (!err) {
        child_group = group;
        child = pid;
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&fa);
    if (err)
        die("cannot run '%s': %s", argv[0], strerror(err));
    return pid;
}

static int reap(pid_t pid, const char *name)
{
    siginfo_t si;
    int status;

    /* Wait without reaping: until the child is reaped, on_signal cannot hit a reused pid. */
    while (waitid(P_PID, pid, &si, WEXITED | WNOWAIT) < 0)
        if (errno != EINTR)
            die("cannot wait for '%s': %s", name, strerror(errno));
    child = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            die("cannot wait for '%s': %s", name, strerror(errno));
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    return 128 + WTERMSIG(status);
}

int ml_cc_run(char *const *argv)
{
    return reap(spawn(argv, -1, -1, false), argv[0]);
}

/* Appends what fd has to offer now to b; returns false at end of file. */
static bool drain(int fd, struct ml_cc_buf *b, size_t *cap, const char *name)
{
    ssize_t n;

    if (b->len == *cap) {
        char *p = realloc(b->data, *cap = *cap ? 2 * *cap : 1 << 16);

        if (!p)
            die("out of memory");
        b->data = p;
    }
    n = read(fd, b->data + b->len, *cap - b->len);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return true;
    if (n < 0)
        die("cannot read the output of '%s': %s", name, strerror(errno));
    b->len += n;
    return n > 0;
}

int ml_cc_run_capture(char *const *argv, struct ml_cc_buf *out, struct ml_cc_buf *side, bool quiet)
{
    struct ml_cc_buf *bufs[2] = {out, side};
    struct pollfd pfd[2];
    size_t cap[2] = {0, 0};
    int fd[2][2], npipes = side ? 2 : 1;
    pid_t pid;

    for (int k = 0; k < npipes; k++) {
        *bufs[k] = (struct ml_cc_buf){0};
        if (pipe2(fd[k], O_CLOEXEC))
            die("cannot make a pipe: %s", strerror(errno));
        pfd[k] = (struct pollfd){.fd = fd[k][0], .events = POLLIN};
    }
    pid = spawn(argv, fd[0][1], side ? fd[1][1] : -1, quiet);
    for (int k = 0; k < npipes; k++)
        close(fd[k][1]);
    /* Both pipes at once: a child blocked on a full one would never close the other. */
    while (pfd[0].fd >= 0 || (side && pfd[1].fd >= 0)) {
        if (poll(pfd, side ? 2 : 1, -1) < 0) {
            if (errno == EINTR)
                continue;
            die("cannot read the output of '%s': %s", argv[0], strerror(errno));
        }
        for (int k = 0; k < npipes; k++)
            if (pfd[k].fd >= 0 && pfd[k].revents && !drain(pfd[k].fd, bufs[k], &cap[k], argv[0])) {
                close(pfd[k].fd);
                pfd[k].fd = -1;
            }
    }
    return reap(pid, argv[0]);
}

static int write_all(int fd, const char *p, size_t len)
{
    while (len) {
        ssize_t n = write(fd, p, len);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        p += n;
        len -= n;
    }
    return 0;
}

int ml_cc_write(const char *path, const void *data, size_t len)
{
    static int count;
    struct stat st;
    char *tmp = NULL;
    int fd = -1, rc;

    if (!strcmp(path, "-"))
        return write_all(STDOUT_FILENO, data, len);
    if (!stat(path, &st) && !S_ISREG(st.st_mode)) {
        fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
    } else {
        sigset_t old;

        /* The temporary is recorded for on_signal as soon as it exists, and only if ours. */
        block_signals(&old);
        for (int tries = 0; fd < 0 && tries < 100; tries++) {
            tmp = ml_cc_strfmt("%s.memlens-%d-%d.tmp", path, (int)getpid(), count++);
            fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
            if (fd < 0 && errno != EEXIST)
                break;
        }
        rc = errno;
        if (fd >= 0)
            partial = tmp;
        sigprocmask(SIG_SETMASK, &old, NULL);
        errno = rc;
    }
    if (fd < 0) {
        rc = -errno;
        partial = NULL;
        return rc;
    }
    rc = write_all(fd, data, len);
    if (close(fd) && !rc)
        rc = -errno;
    if (!rc && tmp && rename(tmp, path))
        rc = -errno;
    if (rc && tmp)
        unlink(tmp);
    partial = NULL;
    return rc;
}

int ml_cc_read(const char *path, struct ml_cc_buf *out)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC), rc = 0;
    struct stat st;

    out->data = NULL;
    out->len = 0;
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) || !(out->data = malloc(st.st_size + 1)))
        rc = -errno;
    while (!rc && out->len < (size_t)st.st_size) {
        ssize_t n = read(fd, out->data + out->len, st.st_size - out->len);

        if (n < 0 && errno != EINTR)
            rc = -errno;
        else if (n == 0)
            rc = -EIO; /* shrank while read */
        else if (n > 0)
            out->len += n;
    }
    close(fd);
    return rc;
}

_Noreturn void ml_cc_exec(char *const *argv)
{
    ml_cc_trace(argv);
    tmp_remove();
    fflush(stdout);
    fflush(stderr);
    execvp(argv[0], argv);
    die("cannot run '%s': %s", argv[0], strerror(errno));
}
