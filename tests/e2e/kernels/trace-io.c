/*
 * Trace test kernel: I/O and memory-mapping calls whose records the test checks: write and
 * read of a file, pwrite/pread, writev/readv, a pipe, a socket pair with send/recv, mmap,
 * mremap, munmap and sbrk; str* calls. Prints the buffers' addresses to stderr
 * ("buf <name> <hex>") and the results to stdout. Usage: trace-io <dir> <n>, n >= 1000.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "memlens.h"

static void show(const char *name, const void *p)
{
    fprintf(stderr, "buf %s %#lx\n", name, (unsigned long)(uintptr_t)p);
}

int main(int argc, char **argv)
{
    char path[4096], *w, *r, *m, *m2, line[64];
    void *brk0;
    long n = argc > 2 ? atol(argv[2]) : 4096;
    int fd, p[2], sv[2];
    struct iovec iov[2];
    ssize_t got = 0;
    size_t len;

    if (argc < 2 || n < 1000)
        return 1;
    /* Moving the break under malloc breaks it: before the first allocation, up and back. */
    MEMLENS_MARK("brk");
    brk0 = sbrk(0);
    if (sbrk(8192) == (void *)-1)
        return 7;
    sbrk(-8192);
    w = malloc(n);
    r = malloc(n);
    if (!w || !r)
        return 1;
    for (long i = 0; i < n; i++)
        w[i] = (char)('a' + i % 26);
    show("w", w);
    show("r", r);
    snprintf(path, sizeof(path), "%s/data", argv[1]);
    MEMLENS_MARK("file");
    fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0600);
    if (fd < 0)
        return 2;
    got += write(fd, w, n);
    got += pwrite(fd, w, n / 2, n);
    lseek(fd, 0, SEEK_SET);
    got += read(fd, r, n);
    got += pread(fd, r, n / 2, n);
    iov[0] = (struct iovec){w, 100};
    iov[1] = (struct iovec){w + 100, 200};
    got += writev(fd, iov, 2);
    close(fd);
    MEMLENS_MARK("pipe");
    if (pipe(p))
        return 3;
    got += write(p[1], w, 1000);
    got += read(p[0], r, 1000);
    close(p[0]);
    close(p[1]);
    MEMLENS_MARK("socket");
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
        return 4;
    got += send(sv[0], w, 500, 0);
    got += recv(sv[1], r, 500, 0);
    close(sv[0]);
    close(sv[1]);
    MEMLENS_MARK("maps");
    m = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return 5;
    show("m", m);
    m2 = mremap(m, 1 << 20, 2 << 20, MREMAP_MAYMOVE);
    if (m2 == MAP_FAILED)
        return 6;
    show("m2", m2);
    munmap(m2, 2 << 20);
    show("brk", brk0);
    MEMLENS_MARK("strings");
    strcpy(line, "hello, world");
    len = strlen(line);
    show("line", line);
    printf("%zd %zu %d %c\n", got, len, strcmp(line, "hello"), r[n / 2]);
    return 0;
}
