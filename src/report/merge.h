/* Summing profiles of one program (memlens report --merge): groups, keys, per-thread-index sums. */
#ifndef ML_REPORT_MERGE_H
#define ML_REPORT_MERGE_H

#include <stddef.h>
#include <stdint.h>

#include "report/report.h"

/*
 * Profiles are "of the same program" when they have the same program path
 * (META "program") and the same static tables: region names in id order,
 * region sets, modules, units with their facts, functions, files and lines,
 * not-seen calls, entry units and event names. Their ids then mean the same
 * thing, so counts add up id by id. Runs that load different modules
 * (dlopen), builds that changed and different MEMLENS_EVENTS make separate
 * groups. See docs/report.md, "Merging profiles".
 *
 * A group's merged profile sums, per thread index (0 = each process's first
 * thread), the unit counts, region entries, measured executions, ticks and
 * event sums of its profiles (the exited-threads records all into one, after
 * the indices); ticks become nanoseconds (each profile has its
 * own clock rate), so its tsc_hz is 1e9 (0 when some profile has no clock
 * rate). Per region it also keeps the sum of each profile's total time and
 * calibrated time (struct ml_profile, merged_ticks and merged_cal). Memory
 * grows with the groups, their threads and their tables, never with the
 * number of profiles.
 */
struct ml_merge;

struct ml_merge *ml_merge_new(void);
/*
 * Adds profile p, whose report is r (built from p); the merge owns p from
 * now on (the first profile of a group lends it its tables). Returns 0 or
 * -ENOMEM (p is freed in every case).
 */
int ml_merge_add(struct ml_merge *m, struct ml_profile *p, const struct ml_report *r);
size_t ml_merge_count(const struct ml_merge *m);
/*
 * The merged profile of group i (in order of first appearance), valid until
 * the next ml_merge_add or ml_merge_free; *name gets the program's path,
 * followed by " [tables <fingerprint>]" when another group has the same path
 * (another build of it). NULL on -ENOMEM.
 */
const struct ml_profile *ml_merge_profile(struct ml_merge *m, size_t i, const char **name);
void ml_merge_free(struct ml_merge *m);

#endif
