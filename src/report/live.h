/* Live reading of a running profiled process's counters (the reader side of src/format/live.h). */
#ifndef ML_REPORT_LIVE_H
#define ML_REPORT_LIVE_H

#include <stddef.h>
#include <sys/types.h>

#include "format/live.h"
#include "format/profile.h"

/* An attached process: its published header and the static tables read so far. */
struct ml_live;

/*
 * Finds the live-view file of process pid (live-find.c): among
 * ML_LIVE_DIR/memlens.<pid>.<token>, the one that is a regular file owned by
 * one of the process's uids (or root) whose header has the process's pid and
 * start time (/proc/<pid>/stat) and its name's token. Candidates are opened
 * with O_NONBLOCK | O_NOFOLLOW, so a FIFO or a link planted there never hangs
 * or misleads the reader. Fills h with the *got bytes read and path with the
 * file's name. Returns 0, -ESRCH (no such process), -ENOENT (no candidate),
 * -ESTALE (candidates, none the process's), -EACCES (not readable by the
 * caller) or -EPROTO (an incompatible memlens), with one line in err.
 */
int ml_live_find(pid_t pid, struct ml_live_header *h, ssize_t *got, char *path, size_t pathlen,
                 char *err, size_t errlen);

/*
 * Attaches to process pid through its ML_LIVE_DIR/memlens.<pid>.<token>
 * (ml_live_find). Returns 0, or:
 * -ESRCH no such process; -ENOENT the process publishes nothing (not
 * profiled, or profiled by a memlens without live view); -EACCES / -EPERM the
 * caller may not read the file or the process's memory (ptrace rules);
 * -ESTALE the file does not match the process's memory (left by an earlier
 * process with that pid, or the process called exec); -EPROTO the file was
 * written by an incompatible memlens; -ENOMEM. err gets one line saying what
 * was wrong, without the "memlens: " prefix.
 */
int ml_live_open(pid_t pid, struct ml_live **out, char *err, size_t errlen);
void ml_live_close(struct ml_live *l);

/*
 * Reads the process's counters now, as a profile covering the process's run
 * so far (the profile it would write at this moment): thread counts, and
 * region entries and ticks, with an open region counted up to now as the
 * writer does. tsc_hz is calibrated from the runtime's start to now. The
 * profile owns copies of the tables; free it with ml_profile_free. Reads are
 * not atomic with respect to the running threads: a value may be at most one
 * increment or one region exit stale (ml_live_diff repairs what that breaks).
 * Returns 0; -ESRCH when the process has exited (or exec'd); -EPERM, -ENOMEM,
 * -EPROTO (its tables are inconsistent: err says which).
 */
int ml_live_read(struct ml_live *l, struct ml_profile **out, char *err, size_t errlen);

/*
 * Profile of the interval between two reads of one process: counts and region
 * entries and ticks are cur - prev per thread (matched by thread index; a
 * thread new in cur starts from zero), wall_ns the interval. A value of cur
 * below prev (a racy read) is first raised to prev in cur, so that the
 * intervals of successive reads add up to the last read minus the first. A
 * thread of prev gone from cur was folded into the exited-threads record: its
 * prev counts come off that record's difference, and what the difference
 * lacks (folded after the record was read) is added to the record in cur.
 * Returns 0 or -ENOMEM.
 */
int ml_live_diff(const struct ml_profile *prev, struct ml_profile *cur, struct ml_profile **out);

/*
 * The published layout is as hostile as any file: every offset and size of h
 * is checked before anything is read with it. Returns 0, or -EPROTO with
 * what is wrong in err: a field that does not fit in its record (unit,
 * region state: both are copied here whole), a record or offset beyond what
 * any runtime uses, or a region count out of range.
 */
int ml_live_check_layout(const struct ml_live_header *h, char *err, size_t errlen);
/* Fields of one unit and one region state copied from the process (h checked). */
void ml_live_unit(const struct ml_live_header *h, const unsigned char *rec, struct ml_prof_unit *u,
                  uint32_t *regset);
void ml_live_rstate(const struct ml_live_header *h, const unsigned char *rec, uint64_t *entries,
                    uint64_t *ticks, uint64_t *start, uint32_t *depth);

#endif
