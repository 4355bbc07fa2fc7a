/* Ground-truth region clock for bench/: the marker calls of an uninstrumented build, timed with
 * CLOCK_MONOTONIC and written to $BENCH_ROI_OUT at exit ("name seconds executions" per line). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAXR 64

struct roi {
    const char *name;
    double secs;
    uint64_t execs;
};

static struct roi rois[MAXR];
static int nrois;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static __thread struct {
    int depth;
    struct timespec start;
} open_roi[MAXR];

/* Names are string literals, so pointer equality usually hits; strcmp covers merged files. */
static int roi_id(const char *name)
{
    int i;

    pthread_mutex_lock(&lock);
    for (i = 0; i < nrois; i++)
        if (rois[i].name == name || strcmp(rois[i].name, name) == 0)
            break;
    if (i == nrois && nrois < MAXR)
        rois[nrois++].name = name;
    pthread_mutex_unlock(&lock);
    return i < MAXR ? i : -1;
}

static void dump(void)
{
    const char *path = getenv("BENCH_ROI_OUT");
    FILE *f = path ? fopen(path, "w") : NULL;

    if (!f)
        return;
    for (int i = 0; i < nrois; i++)
        fprintf(f, "%s %.9f %llu\n", rois[i].name, rois[i].secs,
                (unsigned long long)rois[i].execs);
    fclose(f);
}

void __memlens_roi_begin(const char *name)
{
    int i = roi_id(name);

    if (i >= 0 && open_roi[i].depth++ == 0)
        clock_gettime(CLOCK_MONOTONIC, &open_roi[i].start);
}

void __memlens_roi_end(const char *name)
{
    struct timespec now;
    int i = roi_id(name);

    clock_gettime(CLOCK_MONOTONIC, &now);
    if (i < 0 || open_roi[i].depth == 0 || --open_roi[i].depth)
        return;
    pthread_mutex_lock(&lock);
    rois[i].secs += (double)(now.tv_sec - open_roi[i].start.tv_sec) +
                    1e-9 * (double)(now.tv_nsec - open_roi[i].start.tv_nsec);
    rois[i].execs++;
    pthread_mutex_unlock(&lock);
}

__attribute__((constructor)) static void init(void)
{
    atexit(dump);
}
