/* Where and how the runtime writes its profile: the program changes directory, deletes or closes
 * its output directory, ends main with pthread_exit, or waits. Mode in argv[1], n in argv[2]. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memlens.h"

static long n;
static long *buf;

/* Reads n longs in a region: n * 8 heap bytes per call. */
static long work(void)
{
    long s = 0;

    MEMLENS_ROI_BEGIN("work");
    for (long i = 0; i < n; i++)
        s += buf[i];
    MEMLENS_ROI_END("work");
    return s;
}

static void *late_thread(void *arg)
{
    (void)arg;
    usleep(100000); /* main has returned through pthread_exit by now */
    printf("%ld\n", work());
    return NULL;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "plain", *arg = argc > 3 ? argv[3] : ".";
    pthread_t t;

    n = argc > 2 ? atol(argv[2]) : 1000;
    buf = calloc(n, sizeof(*buf));
    for (long i = 0; i < n; i++)
        buf[i] = i;
    printf("%ld\n", work());
    fflush(stdout);
    if (!strcmp(mode, "chdir") && chdir(arg)) /* a server that moves to its work directory */
        return 2;
    if (!strcmp(mode, "rmdir") && rmdir(arg)) /* a harness that removes the output directory */
        return 2;
    if (!strcmp(mode, "closeall")) /* a daemon that closes every descriptor */
        for (int fd = 3; fd < 1024; fd++)
            close(fd);
    if (!strcmp(mode, "dup2")) { /* ... or puts its own files on them */
        int null = open("/dev/null", O_RDONLY);
        for (int fd = 3; fd < 1024; fd++)
            if (fd != null)
                dup2(null, fd);
    }
    if (!strcmp(mode, "wait")) /* until the test has done something to the directory */
        while (access(arg, F_OK))
            usleep(10000);
    if (!strcmp(mode, "ptexit")) {
        pthread_create(&t, NULL, late_thread, NULL);
        pthread_exit(NULL);
    }
    return 0;
}
