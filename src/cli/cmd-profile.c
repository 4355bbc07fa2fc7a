/* memlens profile: runs a program built for events with a backend and writes per-module profiles.
 */
#include "backend/backend.h"
#include "cli/cli.h"
#include "format/json.h"
#include "format/queue.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static const char profile_usage[] =
    "usage: memlens profile -m <module>[,<module>...] [-o <dir>] [-w <n>] [-q] [--]\n"
    "                       <program> [<args>...]\n"
    "\n"
    "Runs a program built with 'memlens cc --events=...' and feeds its events to\n"
    "profiling modules; writes <prog>.<pid>.<module>.csv and .json per module.\n"
    "\n"
    "    -m, --modules <list>   modules to run, comma-separated (see --list-modules)\n"
    "    -o, --output <dir>     output directory (default ./memlens-out)\n"
    "    -w, --workers <n>      backend worker threads; each reads every event and\n"
    "                           handles its share (default: one per CPU but one, >= 1;\n"
    "                           more are cut to that, see --force-workers)\n"
    "    --force-workers        run every worker -w asks for, even without a CPU each\n"
    "    -q, --quiet            no tables on stdout\n"
    "    --chunk-size <bytes>   queue chunk per thread, twice (default 1M; K, M, G suffixes)\n"
    "    --max-threads <n>      program threads alive at once (default 1024)\n"
    "    --list-modules         list the modules and exit\n"
    "\n"
    "The program's exit status is passed through. The JSON files and the summary say\n"
    "whether the profile is complete (see docs/profile.md).\n";

static pid_t child = -1;

/* SIGTERM or SIGHUP to memlens goes to the program; its profile is still written. */
static void forward(int sig)
{
    if (child > 0)
        kill(child, sig);
}

static int parse_uint(const char *s, uint64_t max, uint64_t *v, int suffixes)
{
    char *end;
    unsigned long long n;

    if (!*s || *s == '-' || *s == '+')
        return -1;
    errno = 0;
    n = strtoull(s, &end, 10);
    if (errno || end == s)
        return -1;
    if (suffixes && *end) {
        unsigned shift = *end == 'K' || *end == 'k'   ? 10
                         : *end == 'M' || *end == 'm' ? 20
                         : *end == 'G' || *end == 'g' ? 30
                                                      : 64;
        if (shift == 64 || end[1] || n > (max >> shift))
            return -1;
        n <<= shift;
        end++;
    }
    if (*end || n > max)
        return -1;
    *v = n;
    return 0;
}

static void list_modules(void)
{
    for (size_t i = 0; ml_modules[i]; i++)
        printf("   %-10s %s\n", ml_modules[i]->name, ml_modules[i]->summary);
}

static uint32_t parse_modules(const char *list, const struct ml_module **mods, uint32_t max)
{
    char *copy = strdup(list), *save = NULL, *tok;
    uint32_t n = 0;

    if (!copy)
        die("out of memory");
    for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        const struct ml_module *m = ml_module_find(tok);
        char err[256];
        if (!m)
            die("unknown module '%s' (see 'memlens profile --list-modules')", tok);
        if (ml_module_check(m, err, sizeof(err)))
            die("%s", err);
        for (uint32_t i = 0; i < n; i++)
            if (mods[i] == m)
                die("module '%s' named twice", tok);
        if (n == max)
            die("too many modules (at most %u)", max);
        mods[n++] = m;
    }
    free(copy);
    if (!n)
        die("no module in '%s' (see 'memlens profile --list-modules')", list);
    return n;
}

static int pidfd_open_(pid_t pid)
{
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, pid, 0);
#else
    (void)pid;
    errno = ENOSYS;
    return -1;
#endif
}

static void describe_status(int status, char *buf, size_t n)
{
    if (WIFEXITED(status))
        snprintf(buf, n, "exit %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, n, "signal %d (SIG%s)", WTERMSIG(status),
                 sigabbrev_np(WTERMSIG(status)) ? sigabbrev_np(WTERMSIG(status)) : "?");
    else
        snprintf(buf, n, "unknown");
}

/*
 * Waits until the program is gone: the direct child and, when another
 * process of the run attached (a shell ran the program), that one too.
 * Beats the backend's heartbeat meanwhile. Returns the child's wait status;
 * *att_status gets the attached process's when known, else -1.
 */
static int wait_program(struct ml_backend *b, pid_t pid, int *att_status)
{
    int cfd = pidfd_open_(pid), afd = -1, status = 0, child_done = 0, att_done = 0;
    pid_t att = 0;

    *att_status = -1;
    for (;;) {
        struct pollfd p[2];
        int np = 0;
        if (!att && (att = ml_backend_attached(b)) && att != pid) {
            afd = pidfd_open_(att);
            if (afd < 0) /* gone already, or no pidfd: it is dead or we cannot tell */
                att_done = 1;
        }
        if (child_done && (!att || att == pid || att_done))
            break;
        if (!child_done && cfd >= 0)
            p[np++] = (struct pollfd){.fd = cfd, .events = POLLIN};
        if (afd >= 0 && !att_done)
            p[np++] = (struct pollfd){.fd = afd, .events = POLLIN};
        if (np)
            poll(p, (nfds_t)np, 10);
        else
            usleep(10000);
        ml_backend_beat(b);
        if (!child_done) {
            pid_t r = waitpid(pid, &status, WNOHANG);
            if (r == pid)
                child_done = 1;
            else if (r < 0 && errno != EINTR)
                die("cannot wait for the program: %s", strerror(errno));
        }
        if (afd >= 0 && !att_done) {
            struct pollfd q = {.fd = afd, .events = POLLIN};
            if (poll(&q, 1, 0) == 1) {
                /* a subreaper gets orphans: their status, when they are ours */
                att_done = 1;
                if (waitpid(att, att_status, WNOHANG) != att)
                    *att_status = -1;
            }
        }
    }
    if (cfd >= 0)
        close(cfd);
    if (afd >= 0)
        close(afd);
    if (att == pid)
        *att_status = status;
    return status;
}

static void json_run(FILE *f, const char *module, const struct ml_brun *r)
{
    fprintf(f, "{\"memlens\": \"profile\", \"format\": 1, \"module\": ");
    ml_json_str(f, module);
    fprintf(f, ",\n \"program\": ");
    ml_json_str(f, r->prog);
    fprintf(f, ", \"pid\": %d, \"complete\": %s, \"ended\": ", r->pid,
            r->complete ? "true" : "false");
    ml_json_str(f, r->ended);
    fprintf(f, ", \"why\": ");
    ml_json_str(f, r->why);
    fprintf(f,
            ",\n \"events\": %llu, \"bytes\": %llu, \"chunks\": %llu, \"threads\": %llu, "
            "\"lost_events\": %llu, \"lost_threads\": %llu, \"corrupt_chunks\": %llu, "
            "\"forks\": %u, \"workers\": %u, \"seconds\": %.6f, \"wait_seconds\": %.6f, "
            "\"busy_seconds\": %.6f,\n \"data\": ",
            (unsigned long long)r->events, (unsigned long long)r->bytes,
            (unsigned long long)r->chunks, (unsigned long long)r->threads,
            (unsigned long long)r->lost_events, (unsigned long long)r->lost_threads,
            (unsigned long long)r->corrupt_chunks, r->forks, r->workers, r->seconds,
            r->wait_seconds, r->busy_seconds);
}

/* The completeness rule of docs/profile.md. */
static void judge(struct ml_brun *r, int att_status, int exited_cleanly)
{
    size_t n = strlen(r->why);
    char *w = r->why;

#define WHY(...)                                                                                   \
    do {                                                                                           \
        if (n < sizeof(r->why))                                                                    \
            n += (size_t)snprintf(w + n, sizeof(r->why) - n, "%s", n ? "; " : "");                 \
        if (n < sizeof(r->why))                                                                    \
            n += (size_t)snprintf(w + n, sizeof(r->why) - n, __VA_ARGS__);                         \
    } while (0)

    if (att_status >= 0)
        describe_status(att_status, r->ended, sizeof(r->ended));
    else
        snprintf(r->ended, sizeof(r->ended), exited_cleanly ? "exit" : "unknown");
    if (att_status >= 0 && WIFSIGNALED(att_status))
        WHY("the program was killed by %s; every event up to then arrived", r->ended);
    else if (!exited_cleanly)
        WHY("the program ended without running its exit handlers (_exit or a signal); every "
            "event up to then arrived");
    if (r->lost_events)
        WHY("%llu events were lost (appended from a signal handler during a flush, or by "
            "threads without a queue slot)",
            (unsigned long long)r->lost_events);
    if (r->lost_threads)
        WHY("%llu threads found no queue slot (raise --max-threads)",
            (unsigned long long)r->lost_threads);
    if (r->corrupt_chunks)
        WHY("%llu chunks were malformed (the program wrote over the queue?)",
            (unsigned long long)r->corrupt_chunks);
    r->complete = n == 0;
#undef WHY
}

static void human_bytes(char *buf, size_t n, uint64_t b)
{
    if (b >= (1ull << 30))
        snprintf(buf, n, "%.2f GiB", (double)b / (1ull << 30));
    else if (b >= (1ull << 20))
        snprintf(buf, n, "%.1f MiB", (double)b / (1ull << 20));
    else
        snprintf(buf, n, "%.1f KiB", (double)b / 1024);
}

static int write_module(struct ml_backend *b, struct ml_bfiles *files, uint32_t i,
                        const struct ml_module *m, const struct ml_brun *run, int quiet)
{
    struct ml_bout o = {.table = quiet ? NULL : stdout, .run = run, .blobs = ml_backend_blobs(b)};
    char csv_path[4096], json_path[4096];
    void *st;
    int rc;

    st = ml_backend_merged(b, i, &rc);
    if (!st)
        return error("module '%s': cannot merge the workers' results: %s", m->name, strerror(-rc));
    o.csv = ml_bfiles_create(files, m->name, "csv");
    o.json = o.csv ? ml_bfiles_create(files, m->name, "json") : NULL;
    if (!o.csv || !o.json) {
        rc = errno;
        if (o.csv)
            ml_bfiles_discard(files, o.csv);
        return error("cannot create the output of module '%s': %s", m->name, strerror(rc));
    }
    if (o.table) {
        printf("\n# memlens profile: module '%s', program '%s' (pid %d), %s\n", m->name, run->prog,
               run->pid, run->complete ? "complete" : "INCOMPLETE");
        if (!run->complete)
            printf("# incomplete: %s\n", run->why);
    }
    json_run(o.json, m->name, run);
    rc = m->report(st, &o);
    fprintf(o.json, "}\n");
    if (rc) {
        ml_bfiles_discard(files, o.csv);
        ml_bfiles_discard(files, o.json);
        return error("module '%s' could not write its profile: %s", m->name, strerror(-rc));
    }
    if ((rc = ml_bfiles_commit(files, o.csv, csv_path, sizeof(csv_path)))) {
        ml_bfiles_discard(files, o.json);
        return error("cannot write '%s': %s", csv_path, strerror(-rc));
    }
    if ((rc = ml_bfiles_commit(files, o.json, json_path, sizeof(json_path))))
        return error("cannot write '%s': %s", json_path, strerror(-rc));
    fprintf(stderr, "memlens: profile '%s', '%s'\n", csv_path, json_path);
    return 0;
}

int cmd_profile(int argc, char **argv)
{
    const struct ml_module *mods[16];
    struct ml_backend_opts o = {.mods = mods};
    const char *out = "memlens-out", *modlist = NULL;
    struct ml_backend *b;
    struct ml_bfiles *files;
    struct ml_brun run;
    char err[512], size[32], where[4096] = "";
    int quiet = 0, i, rc, status, att_status, failed = 0, epipe[2];
    uint64_t v;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    const char *prog;

    o.workers = ncpu > 1 ? (uint32_t)(ncpu - 1) : 1;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (!strcmp(a, "--")) {
            i++;
            break;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(profile_usage, stdout);
            puts("\nModules:");
            list_modules();
            return 0;
        } else if (!strcmp(a, "--list-modules")) {
            list_modules();
            return 0;
        } else if ((!strcmp(a, "-m") || !strcmp(a, "--modules")) && more) {
            modlist = argv[++i];
        } else if ((!strcmp(a, "-o") || !strcmp(a, "--output")) && more) {
            out = argv[++i];
        } else if ((!strcmp(a, "-w") || !strcmp(a, "--workers")) && more) {
            if (parse_uint(argv[++i], 256, &v, 0) || !v)
                die("bad --workers '%s': expected 1 to 256", argv[i]);
            o.workers = (uint32_t)v;
        } else if (!strcmp(a, "--force-workers")) {
            o.force_workers = 1;
        } else if (!strcmp(a, "--chunk-size") && more) {
            if (parse_uint(argv[++i], ML_Q_MAX_CHUNK, &v, 1) || v < ML_Q_MIN_CHUNK || v % 4096)
                die("bad --chunk-size '%s': expected 1M to 1G, a multiple of 4K", argv[i]);
            o.chunk_size = (uint32_t)v;
        } else if (!strcmp(a, "--max-threads") && more) {
            if (parse_uint(argv[++i], ML_Q_MAX_SLOTS, &v, 0) || !v)
                die("bad --max-threads '%s': expected 1 to %u", argv[i], ML_Q_MAX_SLOTS);
            o.max_threads = (uint32_t)v;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            quiet = 1;
        } else if (a[0] == '-') {
            error("unknown option '%s'%s", a, more ? "" : " (or its value is missing)");
            usage(profile_usage);
        } else {
            break;
        }
    }
    if (i >= argc)
        usage(profile_usage);
    if (!modlist)
        die("no module: name one with -m (see 'memlens profile --list-modules')");
    o.nmods = parse_modules(modlist, mods, 16);
    prog = strrchr(argv[i], '/') ? strrchr(argv[i], '/') + 1 : argv[i];

    if ((rc = ml_bfiles_open(&files, out, where, sizeof(where)))) {
        if (rc == -EPERM)
            die("cannot write to '%s': '%s' is a symbolic link owned by another user", out, where);
        die("cannot write to '%s': '%s': %s", out, where, strerror(-rc));
    }
    if (ml_backend_new(&b, &o, err, sizeof(err)))
        die("%s", err);
    if (ml_backend_workers(b) < o.workers)
        fprintf(stderr,
                "memlens: running %u worker%s, not %u: each worker reads every event, and "
                "the program needs a CPU beside them (--force-workers runs %u)\n",
                ml_backend_workers(b), ml_backend_workers(b) == 1 ? "" : "s", o.workers, o.workers);
    /* descendants orphaned by a shell or wrapper are reaped here, so their end is seen */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    if ((rc = ml_backend_start(b)))
        die("cannot start the backend's workers: %s", strerror(-rc));
    /* a close-on-exec pipe tells an exec failure (errno written) from a run */
    if (pipe2(epipe, O_CLOEXEC))
        die("cannot create a pipe: %s", strerror(errno));
    fflush(NULL);
    child = fork();
    if (child < 0)
        die("cannot fork: %s", strerror(errno));
    if (child == 0) {
        int e;
        close(epipe[0]);
        /* the queue's fd stays open across exec; the runtime closes it once mapped */
        if (fcntl(ml_backend_fd(b), F_SETFD, 0) || setenv(ML_Q_ENV, ml_backend_env(b), 1)) {
            fprintf(stderr, "memlens: cannot pass the event queue: %s\n", strerror(errno));
            _exit(127);
        }
        execvp(argv[i], argv + i);
        e = errno;
        if (write(epipe[1], &e, sizeof(e)) < 0)
            _exit(127);
        _exit(127);
    }
    close(epipe[1]);
    if (read(epipe[0], &rc, sizeof(rc)) == (ssize_t)sizeof(rc)) {
        waitpid(child, &status, 0);
        error("cannot run '%s': %s", argv[i], strerror(rc));
        ml_backend_free(b);
        ml_bfiles_close(files);
        return 127;
    }
    close(epipe[0]);
    signal(SIGINT, SIG_IGN); /* the terminal's SIGINT reaches the program too */
    signal(SIGTERM, forward);
    signal(SIGHUP, forward);
    status = wait_program(b, child, &att_status);

    memset(&run, 0, sizeof(run));
    run.prog = prog;
    run.pid = ml_backend_attached(b);
    ml_backend_stop(b, &run);
    if (!run.pid) {
        warning("'%s' sent no events (was it built with 'memlens cc --events=...'?)", argv[i]);
        ml_backend_free(b);
        ml_bfiles_close(files);
        return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
    }
    judge(&run, att_status, ml_backend_exited(b));
    if ((rc = ml_bfiles_name(files, prog, run.pid)))
        die("cannot name the output in '%s': %s", out, strerror(-rc));
    for (uint32_t m = 0; m < o.nmods; m++)
        failed |= write_module(b, files, m, mods[m], &run, quiet) != 0;
    human_bytes(size, sizeof(size), run.bytes);
    fprintf(stderr, "memlens: %llu events (%s) from %llu thread%s in %.2f s, %u worker%s; %s%s\n",
            (unsigned long long)run.events, size, (unsigned long long)run.threads,
            run.threads == 1 ? "" : "s", run.seconds, run.workers, run.workers == 1 ? "" : "s",
            run.complete ? "complete" : "incomplete: ", run.complete ? "" : run.why);
    if (run.forks)
        fprintf(stderr, "memlens: the program forked %u time%s; children were not profiled\n",
                run.forks, run.forks == 1 ? "" : "s");
    ml_backend_free(b);
    ml_bfiles_close(files);
    if (failed)
        return 128;
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}
