/* Runtime side of the live view: publishes where this process's counters are (src/format/live.h).
 */
#include "runtime/rt.h"
#include "runtime/clock.h"
#include "format/safefile.h"
#include "format/live.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct ml_live_header pub;
static char pub_path[96];
static pid_t pub_pid;

static void fill_offsets(uint32_t *o)
{
    o[ML_LF_RT_MODS] = offsetof(struct ml_rt, mods);
    o[ML_LF_RT_NMODS] = offsetof(struct ml_rt, nmods);
    o[ML_LF_RT_NUNITS] = offsetof(struct ml_rt, nunits);
    o[ML_LF_RT_NAMES] = offsetof(struct ml_rt, region_names);
    o[ML_LF_RT_NREGIONS] = offsetof(struct ml_rt, nregions);
    o[ML_LF_RT_THREADS] = offsetof(struct ml_rt, threads);
    o[ML_LF_RT_TICK0] = offsetof(struct ml_rt, tick0);
    o[ML_LF_RT_MONO0] = offsetof(struct ml_rt, mono0);
    o[ML_LF_MOD_NEXT] = offsetof(struct ml_rt_module, next);
    o[ML_LF_MOD_NUNITS] = offsetof(struct ml_rt_module, nunits);
    o[ML_LF_MOD_NREGSET] = offsetof(struct ml_rt_module, nregset_words);
    o[ML_LF_MOD_NREGIONS] = offsetof(struct ml_rt_module, nregions);
    o[ML_LF_MOD_REGSETS] = offsetof(struct ml_rt_module, regsets);
    o[ML_LF_MOD_UNITS] = offsetof(struct ml_rt_module, units);
    o[ML_LF_MOD_REGION_IDS] = offsetof(struct ml_rt_module, region_ids);
    o[ML_LF_UNIT_SIZE] = sizeof(struct ml_rt_unit);
    o[ML_LF_UNIT_KIND] = offsetof(struct ml_rt_unit, kind);
    o[ML_LF_UNIT_REGSET] = offsetof(struct ml_rt_unit, regset);
    o[ML_LF_UNIT_FACTS] = offsetof(struct ml_rt_unit, facts);
    o[ML_LF_THR_NEXT] = offsetof(struct ml_thread_rec, next);
    o[ML_LF_THR_TID] = offsetof(struct ml_thread_rec, tid);
    o[ML_LF_THR_INDEX] = offsetof(struct ml_thread_rec, index);
    o[ML_LF_THR_DONE] = offsetof(struct ml_thread_rec, done);
    o[ML_LF_THR_NMODS] = offsetof(struct ml_thread_rec, nmods);
    o[ML_LF_THR_TLS] = offsetof(struct ml_thread_rec, tls);
    o[ML_LF_THR_SNAP] = offsetof(struct ml_thread_rec, snap);
    o[ML_LF_THR_SNAPN] = offsetof(struct ml_thread_rec, snap_units);
    o[ML_LF_THR_RS] = offsetof(struct ml_thread_rec, rs);
    o[ML_LF_RS_SIZE] = sizeof(struct ml_rstate);
    o[ML_LF_RS_ENTRIES] = offsetof(struct ml_rstate, entries);
    o[ML_LF_RS_TICKS] = offsetof(struct ml_rstate, ticks);
    o[ML_LF_RS_START] = offsetof(struct ml_rstate, start);
    o[ML_LF_RS_DEPTH] = offsetof(struct ml_rstate, depth);
    o[ML_LF_RT_SAMPLE] = offsetof(struct ml_rt, sample);
    o[ML_LF_RT_ACC] = offsetof(struct ml_rt, acc);
    o[ML_LF_RT_NFOLDED] = offsetof(struct ml_rt, nfolded);
    o[ML_LF_RT_RECSEQ] = offsetof(struct ml_rt, recseq);
}

void ml_rt_unpublish(void)
{
    /* A fork child inherits the exit hook; only the publisher removes its file. */
    if (pub_path[0] && getpid() == pub_pid)
        unlink(pub_path);
}

static void unpublish_at_exit(void)
{
    ml_rt_unpublish();
}

/* Writes the header to name.tmp in dirfd and renames it to name; 0 or a negative errno. */
static int publish_as(int dirfd, const char name[48])
{
    char tmp[64];
    int fd, rc = 0;

    snprintf(tmp, sizeof(tmp), "%s.tmp", name);
    fd = ml_sf_create(dirfd, tmp);
    if (fd < 0)
        return fd;
    errno = 0;
    if (write(fd, &pub, sizeof(pub)) != (ssize_t)sizeof(pub))
        rc = errno ? -errno : -ENOSPC;
    if (close(fd) && !rc)
        rc = -errno;
    if (!rc)
        rc = ml_sf_commit(dirfd, tmp, name);
    if (rc)
        unlinkat(dirfd, tmp, 0);
    return rc;
}

void ml_rt_publish(void)
{
    char name[48] = "";
    int dirfd, rc = -EEXIST;

    memcpy(pub.magic, ML_LIVE_MAGIC, sizeof(pub.magic));
    pub.version = ML_LIVE_VERSION;
    pub.header_size = sizeof(pub);
    pub.cookie = ml_rt_random() | 1;
    pub.self_addr = (uint64_t)(uintptr_t)&pub;
    pub.rt_addr = (uint64_t)(uintptr_t)&ml_rt;
    pub.pid = (uint32_t)getpid();
    pub.clock = ML_RT_CLOCK;
    pub.ptr_size = sizeof(void *);
    pub.nfacts = ML_NFACTS;
    pub.max_regions = ML_RT_MAX_REGIONS;
    pub.nfields = ML_LIVE_NFIELDS;
    pub.start_time = ml_rt_id.start_time;
    fill_offsets(pub.off);
    pub_pid = getpid();

    dirfd = ml_sf_opendir(ML_LIVE_DIR, 0, NULL, 0);
    if (dirfd == -ENOENT)
        return; /* no /dev/shm here: nothing to watch the process with, nothing to say */
    /* /dev/shm is world-writable: a name someone else took gets a fresh token, never reused. */
    for (int i = 0; dirfd >= 0 && i < 8 && rc == -EEXIST; i++) {
        if (i)
            ml_rt_id.token = ml_rt_random();
        pub.token = ml_rt_id.token;
        snprintf(name, sizeof(name), "memlens.%d.%016llx", (int)pub_pid,
                 (unsigned long long)pub.token);
        rc = publish_as(dirfd, name);
    }
    if (dirfd >= 0)
        close(dirfd);
    else
        rc = dirfd;
    if (rc) {
        /* The profile is still written at exit; say why `memlens top` will not find us. */
        const char *msg[] = {"memlens: live view off: cannot publish '",
                             ML_LIVE_DIR,
                             "/",
                             name,
                             "': ",
                             ml_sf_strerror(-rc)};
        if (dirfd < 0)
            msg[3] = "memlens.*";
        ml_rt_say(msg, sizeof(msg) / sizeof(msg[0]));
        return;
    }
    snprintf(pub_path, sizeof(pub_path), "%s/%s", ML_LIVE_DIR, name);
    atexit(unpublish_at_exit);
}
