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
#define ML_RT_ABI 1

struct ml_rt_unit {
    uint32_t kind;   /* enum ml_unit_kind */
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
    const char *const *region_names;  /* [nregions] */
    const uint32_t *regsets;          /* n, local ids..., n, ... */
    const struct ml_rt_unit *units;   /* [nunits] */
    const struct ml_rt_call *calls;   /* [ncalls] */
    uint64_t *(*tls)(void);           /* this thread's counters [nunits] */
    uint32_t *region_ids;             /* [nregions], filled at registration: local -> global */
    struct ml_rt_module *next;        /* runtime's list link */
};

/* Called by the constructor the instrumenter adds to each module. */
void __memlens_register(struct ml_rt_module *m);
/* Region entry and exit; the instrumenter replaces MEMLENS_ROI_* calls with these. */
void __memlens_enter(struct ml_rt_module *m, uint32_t local_region);
void __memlens_exit(struct ml_rt_module *m, uint32_t local_region);
/* Exact mode: one call per access of region code; flags bit 0 = read, bit 1 = write. */
void __memlens_access(struct ml_rt_module *m, uint32_t unit, const void *p, uint64_t n,
                      uint32_t flags);

#endif
