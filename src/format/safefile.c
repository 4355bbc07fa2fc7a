/* Safe file creation (runtime and tools): directory walk without foreign links, O_EXCL, no replace. */
#include "format/safefile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h> /* renameat */
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

#define MAX_LINKS 40

static int open_step(int dirfd, const char *name, int create)
{
    int fd = openat(dirfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

    if (fd < 0 && errno == ENOENT && create) {
        if (mkdirat(dirfd, name, 0700) && errno != EEXIST)
            return -errno;
        fd = openat(dirfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    return fd < 0 ? -errno : fd;
}

/* Appends "/name" to the walked path shown in messages (truncated quietly: it is only shown). */
static void where_add(char *where, size_t wlen, const char *name)
{
    size_t n;

    if (!where || !wlen)
        return;
    n = strlen(where);
    if (n + 1 < wlen && !(n == 1 && where[0] == '/'))
        where[n++] = '/';
    for (; *name && n + 1 < wlen; name++)
        where[n++] = *name;
    where[n] = 0;
}

/* Drops the last component of the walked path, or all of it (an absolute link target). */
static void where_pop(char *where, size_t wlen, int all)
{
    char *slash;

    if (!where || !wlen)
        return;
    slash = all ? where : strrchr(where, '/');
    if (slash)
        slash[slash == where] = 0;
}

/*
 * A component that O_NOFOLLOW refused: if it is a link we may follow, splice
 * its target in front of the rest of the walk. Returns 1 when the target is
 * absolute (the walk restarts at /), 0 when relative, or a negative errno.
 */
static int splice_link(int dirfd, const char *name, char *rest, size_t *pos, int *links)
{
    char target[PATH_MAX];
    struct stat st;
    ssize_t n;
    size_t tail;

    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW))
        return -errno;
    if (!S_ISLNK(st.st_mode))
        return -ENOTDIR;
    if (st.st_uid != 0 && st.st_uid != geteuid())
        return -EPERM;
    if (++*links > MAX_LINKS)
        return -ELOOP;
    n = readlinkat(dirfd, name, target, sizeof(target));
    if (n < 0)
        return -errno;
    if (n == 0)
        return -ENOENT;
    tail = strlen(rest + *pos);
    if ((size_t)n + 1 + tail >= PATH_MAX)
        return -ENAMETOOLONG;
    /* rest becomes target "/" remaining-components (the remaining part moves right first) */
    memmove(rest + n + 1, rest + *pos, tail + 1);
    memcpy(rest, target, (size_t)n);
    rest[n] = '/';
    *pos = 0;
    return target[0] == '/';
}

int ml_sf_opendir(const char *path, int create, char *where, size_t wlen)
{
    char rest[PATH_MAX], name[NAME_MAX + 2];
    size_t pos = 0, len = strlen(path);
    int cur = -1, links = 0, rc;

    if (where && wlen > 1)
        memcpy(where, "/", 2);
    if (path[0] != '/')
        return -EINVAL;
    if (len >= sizeof(rest))
        return -ENAMETOOLONG;
    memcpy(rest, path, len + 1);
    for (;;) {
        size_t end, k;
        int fd, dirfd = cur >= 0 ? cur : AT_FDCWD;

        while (rest[pos] == '/')
            pos++;
        if (!rest[pos])
            return cur >= 0 ? cur : open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        for (end = pos; rest[end] && rest[end] != '/'; end++)
            ;
        k = end - pos;
        if ((k == 1 && rest[pos] == '.') || (k == 2 && cur < 0 && !strncmp(rest + pos, "..", 2))) {
            pos = end; /* "/.." is "/" */
            continue;
        }
        if (k > NAME_MAX) {
            rc = -ENAMETOOLONG;
            break;
        }
        /* At the root the first component goes by its absolute name, never "/" then the name:
           an emulator's sysroot (qemu-user -L) overlays "/" but not the paths it lacks. */
        name[0] = '/';
        memcpy(name + (cur < 0), rest + pos, k);
        name[k + (cur < 0)] = 0;
        pos = end;
        where_add(where, wlen, name + (cur < 0));
        fd = open_step(dirfd, name, create);
        if (fd >= 0) {
            if (cur >= 0)
                close(cur);
            cur = fd;
            continue;
        }
        if (fd != -ELOOP && fd != -ENOTDIR) {
            rc = fd;
            break;
        }
        /* A link: its target replaces it in the walk (the message path follows the target). */
        rc = splice_link(dirfd, name, rest, &pos, &links);
        if (rc < 0)
            break;
        where_pop(where, wlen, rc == 1);
        if (rc == 1 && cur >= 0) {
            close(cur);
            cur = -1;
        }
    }
    if (cur >= 0)
        close(cur);
    return rc;
}

int ml_sf_create(int dirfd, const char *name)
{
    int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);

    if (fd < 0)
        return -errno;
    /* The umask may have taken bits away, never added: make it exactly 0600. */
    if (fchmod(fd, 0600)) {
        int rc = -errno;
        close(fd);
        unlinkat(dirfd, name, 0);
        return rc;
    }
    return fd;
}

int ml_sf_commit(int dirfd, const char *tmp, const char *name)
{
    struct stat st;

    if (!syscall(SYS_renameat2, dirfd, tmp, dirfd, name, RENAME_NOREPLACE))
        return 0;
    if (errno != EINVAL && errno != ENOSYS)
        return -errno;
    /* No RENAME_NOREPLACE here (old kernel, some network file systems): a new link fails
       when the name exists, which is the same promise. */
    if (!linkat(dirfd, tmp, dirfd, name, 0)) {
        unlinkat(dirfd, tmp, 0);
        return 0;
    }
    if (errno != EPERM && errno != EOPNOTSUPP)
        return -errno;
    /* Neither (FAT, some FUSE file systems): the names carry a random token, so a check just
       before the rename only loses to someone racing for that exact name on purpose. */
    if (!fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW))
        return -EEXIST;
    return renameat(dirfd, tmp, dirfd, name) ? -errno : 0;
}

const char *ml_sf_strerror(int err)
{
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 32)
    const char *s = strerrordesc_np(err);
    if (s)
        return s;
#endif
    return "unknown error";
}
