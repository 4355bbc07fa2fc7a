/* The one place that wraps libc for traces: I/O, mappings, fork/exec, str* ranges, marker stubs. */
#include "runtime/trace-rt.h"

#include <errno.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#define ML_EXPORT __attribute__((visibility("default")))

/*
 * The instrumenter (src/instrument/ir/events.c, table `wraps`) turns a call
 * of <name>(args) in traced code into __memlens_tr_<name>(args, module,
 * site): same parameters, then the caller's module descriptor and the call's
 * site (the sites after it name the ranges str* functions touch). Each
 * wrapper calls the C library, records what happened, and returns the
 * result with errno as the C library left it.
 */

uint32_t __memlens_trace_marker(struct ml_ev_module *m, uint32_t site);

static unsigned fd_kind(int fd)
{
    struct stat st;

    if (fd < 0 || fstat(fd, &st))
        return ML_FD_UNKNOWN;
    if (S_ISREG(st.st_mode))
        return ML_FD_FILE;
    if (S_ISBLK(st.st_mode))
        return ML_FD_BLOCK;
    if (S_ISSOCK(st.st_mode))
        return ML_FD_SOCKET;
    if (S_ISFIFO(st.st_mode))
        return ML_FD_PIPE;
    if (S_ISCHR(st.st_mode))
        return ML_FD_CHAR;
    return ML_FD_OTHER;
}

static void io(unsigned call, int fd, unsigned kind, const void *buf, size_t want, ssize_t got,
               struct ml_ev_module *m, uint32_t site)
{
    uint64_t fdc = fd < 0 ? 0 : fd > 65535 ? 65535 : (uint64_t)fd;

    ml_tr_event(ML_EV_IO, (uint64_t)(uintptr_t)buf, got > 0 ? (uint64_t)got : 0,
                want > UINT32_MAX ? UINT32_MAX : want, call | (uint64_t)kind << 8 | fdc << 16,
                ml_tr_gsite(m, site));
}

/* One record per element of a vector, the bytes transferred given to elements in order. */
static void iov(unsigned call, int fd, const struct iovec *v, size_t n, ssize_t got,
                struct ml_ev_module *m, uint32_t site)
{
    unsigned kind = fd_kind(fd);
    size_t left = got > 0 ? (size_t)got : 0;

    for (size_t i = 0; v && i < n; i++) {
        size_t t = left < v[i].iov_len ? left : v[i].iov_len;
        io(call, fd, kind, v[i].iov_base, v[i].iov_len, (ssize_t)t, m, site);
        left -= t;
    }
}

#define KEEP_ERRNO(expr)                                                                           \
    do {                                                                                           \
        int saved_ = errno;                                                                        \
        expr;                                                                                      \
        errno = saved_;                                                                            \
    } while (0)

ML_EXPORT ssize_t __memlens_tr_read(int fd, void *buf, size_t n, struct ml_ev_module *m,
                                    uint32_t site)
{
    ssize_t r = read(fd, buf, n);

    KEEP_ERRNO(io(ML_IO_READ, fd, fd_kind(fd), buf, n, r, m, site));
    return r;
}

ML_EXPORT ssize_t __memlens_tr_write(int fd, const void *buf, size_t n, struct ml_ev_module *m,
                                     uint32_t site)
{
    ssize_t r = write(fd, buf, n);

    KEEP_ERRNO(io(ML_IO_WRITE, fd, fd_kind(fd), buf, n, r, m, site));
    return r;
}

ML_EXPORT ssize_t __memlens_tr_pread(int fd, void *buf, size_t n, off_t off, struct ml_ev_module *m,
                                     uint32_t site)
{
    ssize_t r = pread(fd, buf, n, off);

    KEEP_ERRNO(io(ML_IO_PREAD, fd, fd_kind(fd), buf, n, r, m, site));
    return r;
}

ML_EXPORT ssize_t __memlens_tr_pread64(int fd, void *buf, size_t n, off_t off,
                                       struct ml_ev_module *m, uint32_t site)
{
    return __memlens_tr_pread(fd, buf, n, off, m, site);
}

ML_EXPORT ssize_t __memlens_tr_pwrite(int fd, const void *buf, size_t n, off_t off,
                                      struct ml_ev_module *m, uint32_t site)
{
    ssize_t r = pwrite(fd, buf, n, off);

    KEEP_ERRNO(io(ML_IO_PWRITE, fd, fd_kind(fd), buf, n, r, m, site));
    return r;
}

ML_EXPORT ssize_t __memlens_tr_pwrite64(int fd, const void *buf, size_t n, off_t off,
                                        struct ml_ev_module *m, uint32_t site)
{
    return __memlens_tr_pwrite(fd, buf, n, off, m, site);
}

ML_EXPORT ssize_t __memlens_tr_readv(int fd, const struct iovec *v, int n, struct ml_ev_module *m,
                                     uint32_t site)
{
    ssize_t r = readv(fd, v, n);

    KEEP_ERRNO(iov(ML_IO_READV, fd, v, n > 0 ? (size_t)n : 0, r, m, site));
    return r;
}

ML_EXPORT ssize_t __memlens_tr_writev(int fd, const struct iovec *v, int n, struct ml_ev_module *m,
                                      uint32_t site)
{
    ssize_t r = writev(fd, v, n);

    KEEP_ERRNO(iov(ML_IO_WRITEV, fd, v, n > 0 ? (size_t)n : 0, r, m, site));
    return r;
}

ML_EXPORT ssize_t __memlens_tr_recv(int fd, void *buf, size_t n, int flags, struct ml_ev_module *m,
                                    uint32_t site)
{
    ssize_t r = recv(fd, buf, n, flags);

    KEEP_ERRNO(io(ML_IO_RECV, fd, ML_FD_SOCKET, buf, n, r, m, site));
    return r;
}

ML_EXPORT ssize_t __memlens_tr_recvfrom(int fd, void *buf, size_t n, int flags,
                                        struct sockaddr *from, socklen_t *fromlen,
                                        struct ml_ev_module *m, uint32_t site)
{
    ssize_t r = recvfrom(fd, buf, n, flags, from, fromlen);

    KEEP_ERRNO(io(ML_IO_RECVFROM, fd, ML_FD_SOCKET, buf, n, r, m, site));
    return r;
}

ML_EXPORT ssize_t __memlens_tr_recvmsg(int fd, struct msghdr *msg, int flags,
                                       struct ml_ev_module *m, uint32_t site)
{
    ssize_t r = recvmsg(fd, msg, flags);

    KEEP_ERRNO(
        iov(ML_IO_RECVMSG, fd, msg ? msg->msg_iov : NULL, msg ? msg->msg_iovlen : 0, r, m, site));
    return r;
}

ML_EXPORT ssize_t __memlens_tr_send(int fd, const void *buf, size_t n, int flags,
                                    struct ml_ev_module *m, uint32_t site)
{
    ssize_t r = send(fd, buf, n, flags);

    KEEP_ERRNO(io(ML_IO_SEND, fd, ML_FD_SOCKET, buf, n, r, m, site));
    return r;
}

ML_EXPORT ssize_t __memlens_tr_sendto(int fd, const void *buf, size_t n, int flags,
                                      const struct sockaddr *to, socklen_t tolen,
                                      struct ml_ev_module *m, uint32_t site)
{
    ssize_t r = sendto(fd, buf, n, flags, to, tolen);

    KEEP_ERRNO(io(ML_IO_SENDTO, fd, ML_FD_SOCKET, buf, n, r, m, site));
    return r;
}

ML_EXPORT ssize_t __memlens_tr_sendmsg(int fd, const struct msghdr *msg, int flags,
                                       struct ml_ev_module *m, uint32_t site)
{
    ssize_t r = sendmsg(fd, msg, flags);

    KEEP_ERRNO(
        iov(ML_IO_SENDMSG, fd, msg ? msg->msg_iov : NULL, msg ? msg->msg_iovlen : 0, r, m, site));
    return r;
}

/* ---- mappings ---- */

ML_EXPORT void *__memlens_tr_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off,
                                  struct ml_ev_module *m, uint32_t site)
{
    void *r = mmap(addr, len, prot, flags, fd, off);

    if (r != MAP_FAILED)
        KEEP_ERRNO(ml_tr_event(ML_EV_MMAP, (uint64_t)(uintptr_t)r, len, (uint32_t)flags,
                               (uint32_t)prot, ml_tr_gsite(m, site)));
    return r;
}

ML_EXPORT void *__memlens_tr_mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off,
                                    struct ml_ev_module *m, uint32_t site)
{
    return __memlens_tr_mmap(addr, len, prot, flags, fd, off, m, site);
}

ML_EXPORT int __memlens_tr_munmap(void *addr, size_t len, struct ml_ev_module *m, uint32_t site)
{
    int r = munmap(addr, len);

    if (!r)
        KEEP_ERRNO(
            ml_tr_event(ML_EV_MUNMAP, (uint64_t)(uintptr_t)addr, len, 0, 0, ml_tr_gsite(m, site)));
    return r;
}

ML_EXPORT void *__memlens_tr_mremap(void *old, size_t oldlen, size_t newlen, int flags,
                                    void *newaddr, struct ml_ev_module *m, uint32_t site)
{
    void *r = mremap(old, oldlen, newlen, flags, newaddr);

    if (r != MAP_FAILED) {
        int saved = errno;
        ml_tr_event(ML_EV_MREMAP, (uint64_t)(uintptr_t)old, oldlen, 0, 0, ml_tr_gsite(m, site));
        ml_tr_event(ML_EV_MREMAP, (uint64_t)(uintptr_t)r, newlen, 0, 1, ml_tr_gsite(m, site));
        errno = saved;
    }
    return r;
}

ML_EXPORT int __memlens_tr_brk(void *addr, struct ml_ev_module *m, uint32_t site)
{
    void *old = sbrk(0);
    int r = brk(addr);

    if (!r)
        KEEP_ERRNO(ml_tr_event(ML_EV_BRK, (uint64_t)(uintptr_t)sbrk(0), (uint64_t)(uintptr_t)old, 0,
                               0, ml_tr_gsite(m, site)));
    return r;
}

ML_EXPORT void *__memlens_tr_sbrk(intptr_t inc, struct ml_ev_module *m, uint32_t site)
{
    void *r = sbrk(inc);

    if (r != (void *)-1 && inc) /* sbrk(0) only asks where the break is */
        KEEP_ERRNO(ml_tr_event(ML_EV_BRK, (uint64_t)(uintptr_t)r + (uint64_t)inc,
                               (uint64_t)(uintptr_t)r, 0, 0, ml_tr_gsite(m, site)));
    return r;
}

/* ---- processes ---- */

ML_EXPORT pid_t __memlens_tr_fork(struct ml_ev_module *m, uint32_t site)
{
    pid_t pid = fork();

    /* The child's trace is a file of its own (its runtime starts again after the fork). */
    if (pid > 0)
        KEEP_ERRNO(ml_tr_event(ML_EV_FORK, 0, (uint64_t)pid, 0, 0, ml_tr_gsite(m, site)));
    return pid;
}

/* _exit skips atexit handlers: the trace is finished here instead. */
ML_EXPORT void __memlens_tr__exit(int status, struct ml_ev_module *m, uint32_t site)
{
    (void)m;
    (void)site;
    ml_tr_before_exit();
    _exit(status);
}

ML_EXPORT void __memlens_tr__Exit(int status, struct ml_ev_module *m, uint32_t site)
{
    (void)m;
    (void)site;
    ml_tr_before_exit();
    _Exit(status);
}

ML_EXPORT int __memlens_tr_execve(const char *path, char *const argv[], char *const envp[],
                                  struct ml_ev_module *m, uint32_t site)
{
    ml_tr_before_exec(ml_tr_gsite(m, site));
    return execve(path, argv, envp);
}

ML_EXPORT int __memlens_tr_execv(const char *path, char *const argv[], struct ml_ev_module *m,
                                 uint32_t site)
{
    ml_tr_before_exec(ml_tr_gsite(m, site));
    return execv(path, argv);
}

ML_EXPORT int __memlens_tr_execvp(const char *file, char *const argv[], struct ml_ev_module *m,
                                  uint32_t site)
{
    ml_tr_before_exec(ml_tr_gsite(m, site));
    return execvp(file, argv);
}

ML_EXPORT int __memlens_tr_execvpe(const char *file, char *const argv[], char *const envp[],
                                   struct ml_ev_module *m, uint32_t site)
{
    ml_tr_before_exec(ml_tr_gsite(m, site));
    return execvpe(file, argv, envp);
}

/*
 * ---- str* and mem* ranges ----
 * Range site k of a call is site + k: the first is what the function reads,
 * the second what it writes (or, for comparisons, the second string read).
 */

static void range(struct ml_ev_module *m, uint32_t site, unsigned k, const void *p, size_t n)
{
    ml_tr_access(ml_tr_gsite(m, site + k), (uint64_t)(uintptr_t)p, n);
}

static void rd(struct ml_ev_module *m, uint32_t site, const void *p, size_t n)
{
    range(m, site, 1, p, n);
}

ML_EXPORT size_t __memlens_tr_strlen(const char *s, struct ml_ev_module *m, uint32_t site)
{
    size_t n = strlen(s);

    rd(m, site, s, n + 1);
    return n;
}

ML_EXPORT size_t __memlens_tr_strnlen(const char *s, size_t max, struct ml_ev_module *m,
                                      uint32_t site)
{
    size_t n = strnlen(s, max);

    rd(m, site, s, n < max ? n + 1 : n);
    return n;
}

ML_EXPORT char *__memlens_tr_strcpy(char *d, const char *s, struct ml_ev_module *m, uint32_t site)
{
    size_t n = strlen(s) + 1;

    rd(m, site, s, n);
    range(m, site, 2, d, n);
    return memcpy(d, s, n);
}

ML_EXPORT char *__memlens_tr_stpcpy(char *d, const char *s, struct ml_ev_module *m, uint32_t site)
{
    size_t n = strlen(s);

    rd(m, site, s, n + 1);
    range(m, site, 2, d, n + 1);
    memcpy(d, s, n + 1);
    return d + n;
}

ML_EXPORT char *__memlens_tr_strncpy(char *d, const char *s, size_t k, struct ml_ev_module *m,
                                     uint32_t site)
{
    size_t n = strnlen(s, k);

    rd(m, site, s, n < k ? n + 1 : n);
    range(m, site, 2, d, k);
    return strncpy(d, s, k);
}

ML_EXPORT char *__memlens_tr_strcat(char *d, const char *s, struct ml_ev_module *m, uint32_t site)
{
    size_t dl = strlen(d), sl = strlen(s);

    rd(m, site, d, dl + 1);
    rd(m, site, s, sl + 1);
    range(m, site, 2, d + dl, sl + 1);
    memcpy(d + dl, s, sl + 1);
    return d;
}

ML_EXPORT char *__memlens_tr_strncat(char *d, const char *s, size_t k, struct ml_ev_module *m,
                                     uint32_t site)
{
    size_t dl = strlen(d), sl = strnlen(s, k);

    rd(m, site, d, dl + 1);
    rd(m, site, s, sl < k ? sl + 1 : sl);
    range(m, site, 2, d + dl, sl + 1);
    return strncat(d, s, k);
}

/* Bytes a comparison examines: up to and including the first difference (or NUL, or k). */
static size_t compared(const unsigned char *a, const unsigned char *b, size_t k, int nul)
{
    size_t i = 0;

    for (; i < k; i++)
        if (a[i] != b[i] || (nul && !a[i]))
            return i + 1;
    return k;
}

ML_EXPORT int __memlens_tr_strcmp(const char *a, const char *b, struct ml_ev_module *m,
                                  uint32_t site)
{
    size_t n = compared((const unsigned char *)a, (const unsigned char *)b, SIZE_MAX, 1);

    rd(m, site, a, n);
    range(m, site, 2, b, n);
    return strcmp(a, b);
}

ML_EXPORT int __memlens_tr_strncmp(const char *a, const char *b, size_t k, struct ml_ev_module *m,
                                   uint32_t site)
{
    size_t n = compared((const unsigned char *)a, (const unsigned char *)b, k, 1);

    rd(m, site, a, n);
    range(m, site, 2, b, n);
    return strncmp(a, b, k);
}

ML_EXPORT int __memlens_tr_memcmp(const void *a, const void *b, size_t k, struct ml_ev_module *m,
                                  uint32_t site)
{
    size_t n = compared(a, b, k, 0);

    rd(m, site, a, n);
    range(m, site, 2, b, n);
    return memcmp(a, b, k);
}

ML_EXPORT char *__memlens_tr_strchr(const char *s, int c, struct ml_ev_module *m, uint32_t site)
{
    char *r = strchr(s, c);

    rd(m, site, s, r ? (size_t)(r - s) + 1 : strlen(s) + 1);
    return r;
}

ML_EXPORT char *__memlens_tr_strrchr(const char *s, int c, struct ml_ev_module *m, uint32_t site)
{
    rd(m, site, s, strlen(s) + 1);
    return strrchr(s, c);
}

ML_EXPORT void *__memlens_tr_memchr(const void *s, int c, size_t n, struct ml_ev_module *m,
                                    uint32_t site)
{
    void *r = memchr(s, c, n);

    rd(m, site, s, r ? (size_t)((const char *)r - (const char *)s) + 1 : n);
    return r;
}

ML_EXPORT char *__memlens_tr_strdup(const char *s, struct ml_ev_module *m, uint32_t site)
{
    char *r = strdup(s);

    if (r) {
        size_t n = strlen(s) + 1;
        rd(m, site, s, n);
        range(m, site, 2, r, n);
    }
    return r;
}

/* ---- markers ---- */

/* MEMLENS_PAGES in traced code: the marker, then the frame of every page of the range. */
ML_EXPORT void __memlens_trace_pages(struct ml_ev_module *m, uint32_t site, const void *p,
                                     uint64_t n)
{
    long ps = sysconf(_SC_PAGESIZE);
    uint64_t a = (uint64_t)(uintptr_t)p & ~(uint64_t)(ps - 1), end = (uint64_t)(uintptr_t)p + n;

    __memlens_trace_marker(m, site);
    for (; a < end; a += (uint64_t)ps) {
        uint32_t flags;
        uint64_t pfn = ml_tr_pfn(a, &flags);
        ml_tr_event(ML_EV_PFN, a, pfn, (uint64_t)ps, flags, ml_tr_gsite(m, site));
    }
}

/*
 * Code compiled with memlens.h but not instrumented for traces (region
 * builds, files built without --trace) still links: marks and page requests
 * record nothing there, on/off still switch recording for the rest.
 */
ML_EXPORT void __memlens_mark(const char *name)
{
    (void)name;
}

ML_EXPORT void __memlens_pages(const void *p, unsigned long n)
{
    (void)p;
    (void)n;
}

extern volatile uint32_t __memlens_trace_gate;

ML_EXPORT void __memlens_trace_on(void)
{
    __atomic_and_fetch(&__memlens_trace_gate, ~1u, __ATOMIC_RELEASE);
}

ML_EXPORT void __memlens_trace_off(void)
{
    __atomic_or_fetch(&__memlens_trace_gate, 1u, __ATOMIC_RELEASE);
}
