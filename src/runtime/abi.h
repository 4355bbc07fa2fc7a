/* Contract between instrumented code and the runtime: module descriptors and entry points. */
#ifndef ML_RUNTIME_ABI_H
#define ML_RUNTIME_ABI_H

#include <stdint.h>

#include "format/profile.h"

/*
 * The instrumenter emits one struct ml_rt_module per instrumented module as
 * an LLVM constant (src/instrument/ir/emit.c builds the same layout field by
 * field; bump ML_RT_ABI when either side changes). All static facts live in
 * the binary; the runtime copies them into the profile, so no side files are
 * needed.
 */
/* 3: modules unregister from a destructor (a runtime must not keep an older module, which
   leaves it pointing into an unmapped library after dlclose). */
#define ML_RT_ABI 3

struct ml_rt_unit {
    uint32_t kind; /* enum ml_unit_kind */
    uint32_t line;
    uint32_t regset; /* word offset into the module's regsets (local region ids) */
    uint32_t flags;  /* ML_RT_UNIT_*; 0 in modules built before flags existed */
    const char *func;
    const char *file;
    uint64_t facts[ML_NFACTS];
};

/* The unit holds the first instructions of its function: its count is the function's calls. */
#define ML_RT_UNIT_ENTRY 1u

struct ml_rt_call {
    uint32_t unit;
    uint32_t reserved;
    const char *callee;
    uint64_t per_exec;
};

struct ml_rt_module {
    uint32_t abi;
    uint32_t nunits;
    uint32_t nregions;
    uint32_t nregset_words;
    uint32_t ncalls;
    uint32_t index; /* filled at registration: position in the runtime's module list */
    const char *name;
    const char *const *region_names; /* [nregions] */
    const uint32_t *regsets;         /* n, local ids..., n, ... */
    const struct ml_rt_unit *units;  /* [nunits] */
    const struct ml_rt_call *calls;  /* [ncalls] */
    uint64_t *(*tls)(void);          /* this thread's counters [nunits] */
    uint32_t *region_ids;            /* [nregions], filled at registration: local -> global */
    struct ml_rt_module *next;       /* runtime's list link (in its own copies only) */
};

/*
 * Called by the constructor and the destructor the instrumenter adds to each
 * module. The destructor runs when the module goes away (dlclose of its
 * shared object, or exit): unregister copies into the runtime whatever the
 * profile needs from the descriptor and from every thread's counters of it,
 * since both are about to be unmapped. A module loaded again registers anew.
 */
void __memlens_register(struct ml_rt_module *m);
void __memlens_unregister(struct ml_rt_module *m);
/*
 * Region entry and exit; the instrumenter replaces MEMLENS_ROI_* calls with these.
 * __memlens_enter returns 1 when this execution of the region is measured (the
 * instrumented copy of the code runs) and 0 when it is not (a plain copy without
 * counters runs). Rules, which the instrumenter's code versioning relies on:
 * - a region already open on this thread (recursion) keeps its decision;
 * - a region entered while a measured region is open on this thread is measured
 *   (code cloned for a region context is always instrumented);
 * - a region entered while only unmeasured regions are open is not measured
 *   (their plain copy may hold the inner region's code);
 * - with no region open, the sampling policy decides.
 * __memlens_enter_always is called at BEGIN sites of code that is always
 * instrumented (functions that could not be versioned, clones): a new execution
 * is measured whatever the policy says; it returns 1. __memlens_exit is called
 * by both copies, so open/closed bookkeeping is the same for every execution.
 */
uint32_t __memlens_enter(struct ml_rt_module *m, uint32_t local_region);
uint32_t __memlens_enter_always(struct ml_rt_module *m, uint32_t local_region);
void __memlens_exit(struct ml_rt_module *m, uint32_t local_region);
/* Exact mode: one call per access of region code; flags bit 0 = read, bit 1 = write. */
void __memlens_access(struct ml_rt_module *m, uint32_t unit, const void *p, uint64_t n,
                      uint32_t flags);

#endif
