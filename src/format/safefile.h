/* Safe creation of the files memlens writes: no link followed, nothing replaced, mode 0600. */
#ifndef ML_FORMAT_SAFEFILE_H
#define ML_FORMAT_SAFEFILE_H

#include <stddef.h>

/*
 * Every file the runtime creates (profiles, traces, the live-view file) and
 * the files of memlens profile go through these functions; the rules are in
 * docs/files.md. Shared by the runtime and the tools, hence in format/. None of them
 * allocates or uses stdio, so they may run in a fork child or a signal handler.
 */

/*
 * Opens the directory at the absolute path `path`, walking it one component at
 * a time with O_NOFOLLOW. A symbolic link on the way, the last component
 * included, is followed only when root or the caller's effective uid owns it
 * (the user's own link, or the system's such as /var/run -> /run), its target
 * walked by the same rule, at most 40 links in all. With `create`, missing
 * components are created with mode 0700. Returns an O_PATH directory
 * descriptor (close-on-exec) for the *at calls below, or a negative errno:
 * -EPERM when a link owned by another user is in the way, -ENAMETOOLONG when a
 * link makes the path longer than PATH_MAX. On failure, `where` (if not NULL)
 * gets the path walked up to the failing component, NUL-terminated within
 * wlen bytes.
 */
int ml_sf_opendir(const char *path, int create, char *where, size_t wlen);

/*
 * Creates `name` in dirfd for writing: O_CREAT | O_EXCL | O_NOFOLLOW |
 * O_CLOEXEC, mode 0600 whatever the umask. Returns the descriptor or a
 * negative errno (-EEXIST when anything, a link included, already has the
 * name).
 */
int ml_sf_create(int dirfd, const char *name);

/*
 * Renames tmp to name within dirfd without ever replacing an existing name:
 * renameat2(RENAME_NOREPLACE), or link + unlink on file systems without it.
 * Returns 0, -EEXIST when name exists (tmp is then left in place), or a
 * negative errno.
 */
int ml_sf_commit(int dirfd, const char *tmp, const char *name);

/* The text of an errno value (positive), without locale or allocation. */
const char *ml_sf_strerror(int err);

#endif
