/* Output files of memlens profile: safe creation in a directory opened without following links. */
#include "backend/backend.h"
#include "format/safefile.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_OPEN 32

struct ml_bfiles {
    int dirfd;
    char *dir;
    char stem[300];
    struct {
        FILE *fp;
        char tmp[400], name[400];
    } open[MAX_OPEN];
};

int ml_bfiles_open(struct ml_bfiles **out, const char *dir, char *where, size_t wlen)
{
    char abs[PATH_MAX];
    struct ml_bfiles *f;
    int fd;

    *out = NULL;
    /* relative to where memlens started, whatever the program does later */
    if (dir[0] != '/') {
        size_t n;
        if (!getcwd(abs, sizeof(abs)))
            return -errno;
        n = strlen(abs);
        if ((size_t)snprintf(abs + n, sizeof(abs) - n, "/%s", dir) >= sizeof(abs) - n)
            return -ENAMETOOLONG;
        dir = abs;
    }
    if ((fd = ml_sf_opendir(dir, 1, where, wlen)) < 0)
        return fd;
    if (!(f = calloc(1, sizeof(*f))) || !(f->dir = strdup(dir))) {
        free(f);
        close(fd);
        return -ENOMEM;
    }
    f->dirfd = fd;
    *out = f;
    return 0;
}

/* Whether an entry of the directory starts with prefix. */
static int taken(struct ml_bfiles *f, const char *prefix)
{
    int fd = openat(f->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    size_t n = strlen(prefix);
    struct dirent *e;
    DIR *d;
    int hit = 0;

    if (fd < 0 || !(d = fdopendir(fd))) {
        if (fd >= 0)
            close(fd);
        return -errno;
    }
    while (!hit && (e = readdir(d)))
        hit = !strncmp(e->d_name, prefix, n);
    closedir(d);
    return hit;
}

int ml_bfiles_name(struct ml_bfiles *f, const char *prog, int pid)
{
    char safe[200], prefix[320];
    size_t k = 0;

    for (const char *p = prog; *p && k < sizeof(safe) - 1; p++) {
        int ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                 *p == '_' || *p == '-' || *p == '+' || (*p == '.' && k);
        safe[k++] = ok ? *p : '_';
    }
    safe[k] = 0;
    if (!k)
        strcpy(safe, "program");
    for (int n = 1; n < 10000; n++) {
        int t;
        if (n == 1)
            snprintf(f->stem, sizeof(f->stem), "%s.%d", safe, pid);
        else
            snprintf(f->stem, sizeof(f->stem), "%s.%d.%d", safe, pid, n);
        snprintf(prefix, sizeof(prefix), "%s.", f->stem);
        if ((t = taken(f, prefix)) < 0)
            return t;
        if (!t)
            return 0;
    }
    return -EEXIST;
}

FILE *ml_bfiles_create(struct ml_bfiles *f, const char *module, const char *ext)
{
    int slot = -1, fd = -1;
    FILE *fp;

    for (int i = 0; i < MAX_OPEN && slot < 0; i++)
        if (!f->open[i].fp)
            slot = i;
    if (slot < 0 || !f->stem[0]) {
        errno = slot < 0 ? EMFILE : EINVAL;
        return NULL;
    }
    snprintf(f->open[slot].name, sizeof(f->open[slot].name), "%s.%s.%s", f->stem, module, ext);
    for (int tries = 0; tries < 100 && fd < 0; tries++) {
        char tmp[sizeof(f->open[slot].tmp)];
        uint32_t r = 0;
        if (getrandom(&r, sizeof(r), 0) < 0)
            r = (uint32_t)tries * 2654435761u ^ (uint32_t)getpid();
        snprintf(tmp, sizeof(tmp), ".%.380s.%08x.tmp", f->open[slot].name, r);
        memcpy(f->open[slot].tmp, tmp, sizeof(tmp));
        fd = ml_sf_create(f->dirfd, f->open[slot].tmp);
        if (fd < 0 && fd != -EEXIST) {
            errno = -fd;
            return NULL;
        }
    }
    if (fd < 0) {
        errno = EEXIST;
        return NULL;
    }
    if (!(fp = fdopen(fd, "w"))) {
        int e = errno;
        close(fd);
        unlinkat(f->dirfd, f->open[slot].tmp, 0);
        errno = e;
        return NULL;
    }
    f->open[slot].fp = fp;
    return fp;
}

static int slot_of(struct ml_bfiles *f, FILE *fp)
{
    for (int i = 0; i < MAX_OPEN; i++)
        if (f->open[i].fp == fp)
            return i;
    return -1;
}

int ml_bfiles_commit(struct ml_bfiles *f, FILE *fp, char *path, size_t pathlen)
{
    int i = slot_of(f, fp), rc = 0;

    if (i < 0)
        return -EINVAL;
    snprintf(path, pathlen, "%s/%s", f->dir, f->open[i].name);
    if (fflush(fp) || ferror(fp))
        rc = errno ? -errno : -EIO;
    if (fclose(fp) && !rc)
        rc = -errno;
    f->open[i].fp = NULL;
    if (!rc)
        rc = ml_sf_commit(f->dirfd, f->open[i].tmp, f->open[i].name);
    if (rc)
        unlinkat(f->dirfd, f->open[i].tmp, 0);
    return rc;
}

void ml_bfiles_discard(struct ml_bfiles *f, FILE *fp)
{
    int i = slot_of(f, fp);

    if (i < 0)
        return;
    fclose(fp);
    unlinkat(f->dirfd, f->open[i].tmp, 0);
    f->open[i].fp = NULL;
}

void ml_bfiles_close(struct ml_bfiles *f)
{
    if (!f)
        return;
    for (int i = 0; i < MAX_OPEN; i++)
        if (f->open[i].fp)
            ml_bfiles_discard(f, f->open[i].fp);
    close(f->dirfd);
    free(f->dir);
    free(f);
}
