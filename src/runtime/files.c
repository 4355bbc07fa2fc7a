/* Process identity taken at start (token, rank, program) and the output directory it writes to. */
#include "runtime/rt.h"
#include "runtime/clock.h"
#include "format/safefile.h"
#include "format/live.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct ml_rt_ident ml_rt_id;

/* The output directory: absolute path resolved at start, and a descriptor kept since then. */
static char out_path[PATH_MAX];
static int out_err; /* set when out_path could not be formed: every write reports it */
static int out_fd = -1;
static dev_t out_dev;
static ino_t out_ino;

/* argv as the C library passed it to constructors, for when /proc is not there. */
static int saved_argc;
static char **saved_argv;

/* Fills buf (len >= 1) with the file's first bytes, NUL-terminated; returns the bytes read. */
static size_t read_small(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    size_t got = 0;
    ssize_t n;

    if (fd >= 0) {
        while (got < len - 1 &&
               ((n = read(fd, buf + got, len - 1 - got)) > 0 || (n < 0 && errno == EINTR)))
            got += n > 0 ? (size_t)n : 0;
        close(fd);
    }
    buf[got] = 0;
    return got;
}

/* Start time of this process (field 22 of /proc/self/stat), 0 without /proc. */
static uint64_t start_time(void)
{
    char buf[1024];

    read_small("/proc/self/stat", buf, sizeof(buf));
    return ml_live_stat_start(buf);
}

uint64_t ml_rt_random(void)
{
    uint64_t v = 0;

    /* No entropy yet (early boot) or no getrandom: time, pid and addresses still tell apart
       the processes that could meet in one directory. */
    if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        v ^= ((uint64_t)ts.tv_sec << 30) ^ (uint64_t)ts.tv_nsec ^ ml_rt_ticks();
        v ^= ((uint64_t)getpid() << 40) ^ (uint64_t)(uintptr_t)&v;
        v *= 0x9e3779b97f4a7c15ull;
    }
    return v;
}

/* A rank from the first launcher variable set to a decimal number. */
static void read_rank(void)
{
    static const char *const vars[][2] = {{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                                          {"PMIX_RANK", "PMIX_SIZE"},
                                          {"PMI_RANK", "PMI_SIZE"},
                                          {"SLURM_PROCID", "SLURM_NTASKS"}};

    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        const char *r = getenv(vars[i][0]), *s = getenv(vars[i][1]);
        char *end;
        unsigned long v;
        if (!r || *r < '0' || *r > '9')
            continue;
        v = strtoul(r, &end, 10);
        if (*end || v > UINT32_MAX - 1)
            continue;
        ml_rt_id.rank = (uint32_t)v;
        ml_rt_id.has_rank = 1;
        ml_rt_id.nranks = 0;
        if (s && *s >= '1' && *s <= '9') {
            v = strtoul(s, &end, 10);
            if (!*end && v <= UINT32_MAX && v > ml_rt_id.rank)
                ml_rt_id.nranks = (uint32_t)v;
        }
        return;
    }
}

/* Appends one argument, in single quotes when a shell would need them; control bytes as '?'. */
static size_t put_arg(char *buf, size_t len, size_t n, const char *a)
{
    static const char safe[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                               "_-+=./,:@%^";
    int quote = !*a || a[strspn(a, safe)];
    char tmp[8];

    if (n && n < len - 1)
        buf[n++] = ' ';
    if (quote && n < len - 1)
        buf[n++] = '\'';
    for (; *a; a++) {
        const char *s = tmp;
        if (*a == '\'')
            s = "'\\''";
        else if ((unsigned char)*a < 0x20 || *a == 0x7f)
            s = "?";
        else
            tmp[0] = *a, tmp[1] = 0;
        for (; *s && n < len - 1; s++)
            buf[n++] = *s;
    }
    if (quote && n < len - 1)
        buf[n++] = '\'';
    buf[n] = 0;
    return n;
}

/* The command line, from /proc/self/cmdline or argv; marked with "..." when cut. */
static void take_cmdline(void)
{
    static char raw[sizeof(ml_rt_id.cmdline)];
    char *buf = ml_rt_id.cmdline;
    size_t len = sizeof(ml_rt_id.cmdline) - 4, n = 0, got;
    int cut = 0;

    got = read_small("/proc/self/cmdline", raw, sizeof(raw));
    if (got) {
        cut = got == sizeof(raw) - 1;
        for (size_t i = 0; i < got; i += strlen(raw + i) + 1)
            n = put_arg(buf, len, n, raw + i);
    } else {
        for (int i = 0; saved_argv && i < saved_argc && saved_argv[i]; i++)
            n = put_arg(buf, len, n, saved_argv[i]);
    }
    if (cut || n == len - 1)
        memcpy(buf + n, "...", 4);
}

static void take_program(void)
{
    const char *base;
    ssize_t n = readlink("/proc/self/exe", ml_rt_id.exe, sizeof(ml_rt_id.exe) - 1);

    if (n > 0) {
        ml_rt_id.exe[n] = 0;
    } else {
        /* No /proc (a chroot): the name the program was started by. */
        const char *a =
            saved_argv && saved_argc > 0 && saved_argv[0] ? saved_argv[0] : program_invocation_name;
        size_t k = a ? strlen(a) : 0;
        if (k >= sizeof(ml_rt_id.exe))
            k = sizeof(ml_rt_id.exe) - 1;
        memcpy(ml_rt_id.exe, a ? a : "", k);
        ml_rt_id.exe[k] = 0;
    }
    base = strrchr(ml_rt_id.exe, '/');
    base = base ? base + 1 : ml_rt_id.exe;
    if (!*base || !strcmp(base, ".") || !strcmp(base, ".."))
        base = "program";
    /* Room in a 255-byte file name for .<pid>.r<rank>.<token>.mlp.tmp */
    n = (ssize_t)strlen(base);
    if (n > (ssize_t)sizeof(ml_rt_id.prog) - 1)
        n = sizeof(ml_rt_id.prog) - 1;
    memcpy(ml_rt_id.prog, base, (size_t)n);
    ml_rt_id.prog[n] = 0;
}

/*
 * glibc passes argc and argv to constructors. This one runs before the
 * program's own (priority 101), but an instrumented library loaded at start
 * may have started the runtime already: then it only fills what /proc could
 * not give.
 */
__attribute__((constructor(101))) static void take_args(int argc, char **argv)
{
    saved_argc = argc;
    saved_argv = argv;
    if (ml_rt.initialised && !ml_rt_id.cmdline[0])
        take_cmdline();
    if (ml_rt.initialised && !ml_rt_id.exe[0])
        take_program();
}

/*
 * Keeps the directory's descriptor, moved out of the low numbers a program may
 * expect open() to return; returns it or a negative errno.
 */
static int keep_dir(int fd)
{
    struct stat st;
    int high = fcntl(fd, F_DUPFD_CLOEXEC, 100);

    if (high >= 0) {
        close(fd);
        fd = high;
    }
    if (fstat(fd, &st)) {
        int rc = -errno;
        close(fd);
        return rc;
    }
    out_fd = fd;
    out_dev = st.st_dev;
    out_ino = st.st_ino;
    return fd;
}

static void resolve_out(void)
{
    const char *env = getenv("MEMLENS_OUT");
    size_t k, n = 0;
    int fd;

    if (!env || !*env)
        env = "memlens-out";
    k = strlen(env);
    if (env[0] != '/') {
        if (!getcwd(out_path, sizeof(out_path))) {
            out_err = errno == ERANGE ? -ENAMETOOLONG : -errno;
            out_path[0] = 0;
            return;
        }
        n = strlen(out_path);
        if (n > 1)
            out_path[n++] = '/';
    }
    if (n + k >= sizeof(out_path)) {
        out_err = -ENAMETOOLONG;
        return;
    }
    memcpy(out_path + n, env, k + 1);
    fd = ml_sf_opendir(out_path, 1, NULL, 0);
    if (fd >= 0)
        keep_dir(fd); /* on failure, the writer tries again and says why */
}

void ml_rt_files_start(void)
{
    static int started;

    /* Region profiles and traces may both start the runtime: one identity per process. */
    if (__atomic_exchange_n(&started, 1, __ATOMIC_ACQ_REL))
        return;
    ml_rt_id.token = ml_rt_random();
    ml_rt_id.start_time = start_time();
    read_rank();
    take_program();
    take_cmdline();
    resolve_out();
}

void ml_rt_files_fork(void)
{
    ml_rt_id.token = ml_rt_random();
    ml_rt_id.start_time = start_time();
}

/* memlens: cannot write <what> to '<dir>': ['<where>'<sep>]<reason> */
static void say_dir(const char *what, const char *where, const char *sep, const char *reason)
{
    const char *msg[] = {"memlens: cannot write ",
                         what,
                         " to '",
                         out_path,
                         "': ",
                         where ? "'" : "",
                         where ? where : "",
                         where ? sep : "",
                         reason};

    ml_rt_say(msg, sizeof(msg) / sizeof(msg[0]));
}

int ml_rt_out_dir(const char *what)
{
    char where[PATH_MAX];
    struct stat st;
    int fd;

    if (out_err == -ENAMETOOLONG) {
        const char *msg[] = {"memlens: cannot write ", what,
                             ": MEMLENS_OUT is longer than 4095 bytes (with the current directory "
                             "in front when relative)"};
        ml_rt_say(msg, sizeof(msg) / sizeof(msg[0]));
        return out_err;
    }
    if (out_err) {
        const char *msg[] = {"memlens: cannot write ", what,
                             ": the current directory at start is unknown (",
                             ml_sf_strerror(-out_err), "); set MEMLENS_OUT to an absolute path"};
        ml_rt_say(msg, sizeof(msg) / sizeof(msg[0]));
        return out_err;
    }
    if (out_fd >= 0 && !fstat(out_fd, &st) && st.st_dev == out_dev && st.st_ino == out_ino) {
        if (st.st_nlink)
            return out_fd;
        say_dir(what, NULL, NULL, "the directory was deleted while the program ran");
        return -ENOENT;
    }
    /* Closed or replaced by the program (daemons close every descriptor): the same path, by
       the same rules; created only if it could not be at start. */
    fd = ml_sf_opendir(out_path, out_fd < 0, where, sizeof(where));
    if (fd < 0) {
        if (fd == -EPERM)
            say_dir(what, where, "' ", "is a symbolic link owned by another user");
        else
            say_dir(what, strcmp(where, out_path) ? where : NULL, "': ", ml_sf_strerror(-fd));
        return fd;
    }
    return keep_dir(fd);
}

const char *ml_rt_out_path(void)
{
    return out_path;
}

static char *put_u(char *p, char *end, uint64_t v, int base, int width)
{
    char tmp[24];
    int n = 0;

    do {
        tmp[n++] = "0123456789abcdef"[v % (unsigned)base];
        v /= (unsigned)base;
    } while (v || n < width);
    while (n && p < end)
        *p++ = tmp[--n];
    return p;
}

int ml_rt_file_name(char *buf, size_t len, uint64_t token, const char *suffix)
{
    char *p = buf, *end = buf + len - 1;
    size_t k = strlen(ml_rt_id.prog), s = strlen(suffix);

    if (k > (size_t)(end - p))
        return -ENAMETOOLONG;
    memcpy(p, ml_rt_id.prog, k);
    p += k;
    if (p < end)
        *p++ = '.';
    p = put_u(p, end, (uint64_t)getpid(), 10, 1);
    if (ml_rt_id.has_rank) {
        if (p < end)
            *p++ = '.';
        if (p < end)
            *p++ = 'r';
        p = put_u(p, end, ml_rt_id.rank, 10, 1);
    }
    if (p < end)
        *p++ = '.';
    p = put_u(p, end, token, 16, 16);
    if (s > (size_t)(end - p))
        return -ENAMETOOLONG;
    memcpy(p, suffix, s + 1);
    return 0;
}

void ml_rt_say_file(const char *what, const char *name, int err)
{
    const char *msg[] = {
        "memlens: cannot write ", what, " '", out_path, "/", name, "': ", ml_sf_strerror(-err)};

    ml_rt_say(msg, sizeof(msg) / sizeof(msg[0]));
}

/* Tries a fresh token when a name is taken: planted there, or (2^-64) another process's. */
#define NAME_TRIES 8

int ml_rt_out_create(int dirfd, const char *suffix, char *name, char *tmp, size_t len)
{
    uint64_t token = ml_rt_id.token;
    int fd = -EEXIST;

    for (int i = 0; i < NAME_TRIES && fd == -EEXIST; i++, token = ml_rt_random()) {
        size_t n;
        fd = ml_rt_file_name(name, len, token, suffix);
        if (fd)
            break;
        n = strlen(name);
        if (n + 5 > len) {
            fd = -ENAMETOOLONG;
            break;
        }
        memcpy(tmp, name, n);
        memcpy(tmp + n, ".tmp", 5);
        fd = ml_sf_create(dirfd, tmp);
    }
    return fd;
}

int ml_rt_out_commit(int dirfd, const char *suffix, const char *tmp, char *name, size_t len)
{
    int rc = ml_sf_commit(dirfd, tmp, name);

    for (int i = 1; i < NAME_TRIES && rc == -EEXIST; i++) {
        rc = ml_rt_file_name(name, len, ml_rt_random(), suffix);
        if (!rc)
            rc = ml_sf_commit(dirfd, tmp, name);
    }
    return rc;
}
