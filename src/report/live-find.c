/* Finds a process's live-view file in /dev/shm without trusting what other users put there. */
#include "report/live.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The process's start time and its uids (real, effective, saved, file system) from /proc. */
static int proc_identity(pid_t pid, uint64_t *start, uid_t uid[4])
{
    char path[64], buf[1024];
    FILE *f;
    int n = 0;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    f = fopen(path, "re");
    if (!f)
        return -ESRCH;
    buf[0] = 0;
    if (!fgets(buf, sizeof(buf), f))
        buf[0] = 0;
    fclose(f);
    *start = ml_live_stat_start(buf);
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    f = fopen(path, "re");
    if (!f)
        return -ESRCH;
    while (fgets(buf, sizeof(buf), f)) {
        unsigned long u[4];
        if (sscanf(buf, "Uid: %lu %lu %lu %lu", &u[0], &u[1], &u[2], &u[3]) == 4) {
            for (int i = 0; i < 4; i++)
                uid[i] = (uid_t)u[i];
            n = 4;
            break;
        }
    }
    fclose(f);
    return *start && n ? 0 : -ESRCH;
}

/* The token of a name "memlens.<pid>.<16 lowercase hex digits>", or -1 for any other name. */
static int name_token(const char *name, const char *prefix, uint64_t *token)
{
    size_t k = strlen(prefix);
    uint64_t v = 0;
    const char *p;

    if (strncmp(name, prefix, k) || strlen(name + k) != 16)
        return -1;
    for (p = name + k; *p; p++) {
        int d = *p >= '0' && *p <= '9' ? *p - '0' : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10 : -1;
        if (d < 0)
            return -1;
        v = v << 4 | (uint64_t)d;
    }
    *token = v;
    return 0;
}

/* Why the best candidate so far was refused: a later refusal replaces it if it says more. */
struct refusal {
    pid_t pid;
    int rc, rank;
    char msg[384];
};

static void refuse(struct refusal *r, int rank, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* A refusal with -ESTALE reads "process <pid> is not profiled by memlens (<reason>)". */
static void refuse(struct refusal *r, int rank, int rc, const char *fmt, ...)
{
    va_list ap;
    int n = 0;

    if (rank <= r->rank)
        return;
    r->rank = rank;
    r->rc = rc;
    if (rc == -ESTALE)
        n = snprintf(r->msg, sizeof(r->msg), "process %d is not profiled by memlens (",
                     (int)r->pid);
    va_start(ap, fmt);
    n += vsnprintf(r->msg + n, sizeof(r->msg) - (size_t)n, fmt, ap);
    va_end(ap);
    if (rc == -ESTALE && (size_t)n < sizeof(r->msg) - 1)
        strcat(r->msg, ")");
}

/*
 * Checks one candidate; 0 when it is the process's file (h and *got filled),
 * else 1 after noting why not.
 */
static int check_candidate(int dirfd, const char *name, uint64_t token, pid_t pid, uint64_t start,
                           const uid_t uid[4], struct ml_live_header *h, ssize_t *got,
                           struct refusal *why)
{
    struct stat st;
    ssize_t n;
    int fd, owner_ok;

    /* Non-blocking: a FIFO planted under the name must not hang the open or the read. */
    fd = openat(dirfd, name, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        if (errno == EACCES || errno == EPERM)
            refuse(why, 4, -EACCES, "cannot read process %d: permission denied", (int)pid);
        else
            refuse(why, 1, -ESTALE, "'%s/%s' cannot be opened: %s", ML_LIVE_DIR, name,
                   strerror(errno));
        return 1;
    }
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        refuse(why, 2, -ESTALE, "'%s/%s' is not a regular file", ML_LIVE_DIR, name);
        close(fd);
        return 1;
    }
    owner_ok = st.st_uid == 0;
    for (int i = 0; i < 4; i++)
        owner_ok |= st.st_uid == uid[i];
    if (!owner_ok) {
        refuse(why, 2, -ESTALE, "'%s/%s' belongs to uid %u, not to the process", ML_LIVE_DIR, name,
               (unsigned)st.st_uid);
        close(fd);
        return 1;
    }
    memset(h, 0, sizeof(*h));
    n = read(fd, h, sizeof(*h));
    close(fd);
    if (n < (ssize_t)offsetof(struct ml_live_header, version) + 4 ||
        memcmp(h->magic, ML_LIVE_MAGIC, sizeof(h->magic))) {
        refuse(why, 2, -ESTALE, "'%s/%s' is not a memlens live header", ML_LIVE_DIR, name);
        return 1;
    }
    if (h->version != ML_LIVE_VERSION || n < (ssize_t)offsetof(struct ml_live_header, off)) {
        refuse(why, 3, -EPROTO,
               "process %d was built with an incompatible memlens (live layout version %u; this "
               "memlens reads version %u)",
               (int)pid, h->version, ML_LIVE_VERSION);
        return 1;
    }
    if (h->pid != (uint32_t)pid || h->start_time != start || h->token != token) {
        refuse(why, 2, -ESTALE, "'%s/%s' is stale: left by an earlier process with that pid",
               ML_LIVE_DIR, name);
        return 1;
    }
    *got = n;
    return 0;
}

int ml_live_find(pid_t pid, struct ml_live_header *h, ssize_t *got, char *path, size_t pathlen,
                 char *err, size_t errlen)
{
    struct refusal why = {.pid = pid, .rc = -ENOENT};
    char prefix[32];
    uint64_t start, token;
    uid_t uid[4];
    struct dirent *e;
    DIR *d;
    int fd, found = 0;

    if (pid <= 0 || proc_identity(pid, &start, uid)) {
        snprintf(err, errlen, "no process %d", (int)pid);
        return -ESRCH;
    }
    snprintf(prefix, sizeof(prefix), "memlens.%d.", (int)pid);
    snprintf(why.msg, sizeof(why.msg), "process %d is not profiled by memlens (no %s/%s*)",
             (int)pid, ML_LIVE_DIR, prefix);
    fd = open(ML_LIVE_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        snprintf(err, errlen, "%s", why.msg);
        return -ENOENT;
    }
    while (!found && (e = readdir(d)))
        if (!name_token(e->d_name, prefix, &token))
            found = !check_candidate(dirfd(d), e->d_name, token, pid, start, uid, h, got, &why);
    if (found)
        snprintf(path, pathlen, "%s/%s", ML_LIVE_DIR, e->d_name);
    closedir(d);
    if (found)
        return 0;
    snprintf(err, errlen, "%s", why.msg);
    return why.rc;
}
