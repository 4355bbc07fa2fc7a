/* Error reporting for the command-line program, in the style of git's usage.c. */
#include "cli/cli.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void vreport(const char *prefix, const char *fmt, va_list ap)
{
    fflush(stdout);
    fprintf(stderr, "memlens: %s", prefix);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

noreturn void die(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vreport("", fmt, ap);
    va_end(ap);
    exit(128);
}

int error(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vreport("", fmt, ap);
    va_end(ap);
    return -1;
}

void warning(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vreport("warning: ", fmt, ap);
    va_end(ap);
}

noreturn void usage(const char *text)
{
    fputs(text, stderr);
    exit(129);
}

const char *ml_self_dir(void)
{
    static char dir[PATH_MAX];
    ssize_t n;
    char *slash;

    if (dir[0])
        return dir;
    n = readlink("/proc/self/exe", dir, sizeof(dir) - 1);
    if (n <= 0)
        die("cannot find the memlens executable through '/proc/self/exe'");
    dir[n] = 0;
    slash = strrchr(dir, '/');
    if (slash)
        *slash = 0;
    return dir;
}
