/* Whole-program linking of memlens cc: finds bitcode among link inputs and merges it. */
#ifndef ML_CC_LINK_H
#define ML_CC_LINK_H

#include <stdbool.h>
#include <stddef.h>

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
