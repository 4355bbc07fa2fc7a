/* Linking in memlens cc: the runtime's link arguments, and whole-program bitcode merging. */
#ifndef ML_CC_LINK_H
#define ML_CC_LINK_H

#include <stdbool.h>
#include <stddef.h>

#include "cli/cc-args.h"

/*
 * Appends to v what links the memlens runtime into the output of link
 * command c; archive is the runtime's libmemlens-rt.a, with libmemlens-rt.so
 * beside it (docs/cc.md, "Shared libraries and plugins"):
 * - an executable links the archive whole and exports the runtime's entry
 *   points (__memlens_*) and pthread_create, so that the instrumented shared
 *   libraries and plugins it loads use its runtime, and threads created by any
 *   library are recorded; a static one also pulls in glibc's pthread_create
 *   under its internal name, which the runtime calls (dlsym cannot there);
 * - a shared library links libmemlens-rt.so where it needs it (--as-needed),
 *   found through a run path: loaded by a program without memlens it brings a
 *   runtime; loaded by a memlens executable, its references bind to the
 *   executable's exported runtime first, so only one runtime ever runs.
 * Returns the file the link needs (the archive or the shared runtime).
 */
const char *ml_cc_runtime_args(struct ml_strv *v, const struct ml_cc_cmd *c, const char *archive,
                               bool heap);

/* True if the file starts like LLVM bitcode (raw or in the wrapper header). */
bool ml_cc_is_bitcode(const char *path);

/* True if the file is a (non-thin) ar archive. */
bool ml_cc_is_archive(const char *path);

/*
 * Links the bitcode files objs[0..nobj-1] into one module written to out.
 * Bitcode members of the archives ars[0..nar-1] join it when they define a
 * symbol that the bitcode gathered so far references and nobody defines,
 * archive by archive in order, each searched until nothing more is pulled
 * (like ld's handling of one archive; native members are left to the linker).
 * ar_all_bitcode[a] tells whether archive a holds only bitcode members (the
 * native link must then not see it: ld cannot read them without a plugin).
 * Returns the number of archive members merged, or -1 with a reason in err.
 */
int ml_cc_merge_bitcode(char *const *objs, int nobj, char *const *ars, int nar, const char *out,
                        bool *ar_all_bitcode, char *err, size_t errlen);

#endif
