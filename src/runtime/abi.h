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
   leaves it pointing into an unmapped library after dlclose).
   4: region slots follow the counters in the thread-local block (inline enter/exit).
   5: __memlens_exit also ends an execution the inline path started (w has OPEN): loops that
      carry the words in registers may leave that END to the runtime.
   6: __memlens_enter_leaf (BEGIN sites whose executions begin and end in one call-free loop).
   7: __memlens_enter_leaf ends an unmeasured execution at once (the plain copy's END is gone). */
#define ML_RT_ABI 7

struct ml_rt_unit {
    uint32_t kind; /* enum ml_unit_kind */
    uint32_t line;
    uint32_t regset; /* word offset into the module's regsets (local region ids) */
    uint32_t flags;  /* ML_RT_UNIT_*; 0 in modules built before flags existed */
    const char *func;
    const char *file;
    uint64_t facts[ML_NFACTS];
};

/*
 * Region slots (since ABI 4). The thread-local block that tls() returns holds
 * nunits u64 counters, then ML_RT_SLOTS(nregions) u64 words that instrumented
 * code and the runtime share as u32 words, so that most region executions
 * never call the runtime (docs/regions.md, "Inline enter and exit"):
 *   [2 r]      w: executions the inline path may still run alone (bits 0-29),
 *              ML_RT_SLOT_OPEN while one it started is open; 0 when the runtime
 *              must be called (it tracks the region, or gave no budget)
 *   [2 r + 1]  base: the budget w held when the runtime last set it, so that
 *              base - w executions ran inline since
 *   [2 nregions]      gate of BEGIN sites that sample: bit 0 = the answer of
 *                     an inline BEGIN (1 measured), ML_RT_GATE_OFF = call the
 *                     runtime whatever w says
 *   [2 nregions + 1]  the same for BEGIN sites that are always measured
 * An inline BEGIN runs when ((w - 1) | gate) < ML_RT_SLOT_LIMIT: it stores
 * (w - 1) | ML_RT_SLOT_OPEN and answers gate & 1. An inline END runs when w
 * has ML_RT_SLOT_OPEN: it clears it. Otherwise they call __memlens_enter /
 * __memlens_enter_always / __memlens_exit; __memlens_exit clears OPEN too when
 * it finds it set (since ABI 5). Inside a call-free loop the instrumenter may
 * keep w in a register (reading the gate where it needs the answer) and write
 * w back on the loop's exits and before each runtime BEGIN (an END that calls
 * the runtime finds w the runtime's own; src/instrument/ir/inline.c,
 * carry_plan), so a reader on another thread sees w lag by at most one
 * inline budget. 32-bit
 * words keep every constant an immediate operand on x86-64.
 */
#define ML_RT_SLOTS(nregions) ((nregions) + 1)
#define ML_RT_SLOT_OPEN       (1u << 31)
#define ML_RT_SLOT_LIMIT      (1u << 30)
#define ML_RT_GATE_OFF        (1u << 31)

/*
 * After the region slots, the thread's stack bounds (since ABI 4), written by
 * the runtime when the thread first uses the module: u64 lowest address and
 * size (0 and 0 on a thread it does not know). Instrumented code counts the
 * bytes of an access through a pointer of unknown class as stack when
 * (p - lo) < size, else heap (docs/regions.md, "What a count is").
 */
#define ML_RT_STACK_WORDS 2

/*
 * After the stack bounds, a cache of the dynamic context (since ABI 4): the
 * global set id whose counter block code counted under the dynamic context
 * last used on this thread, and that block's address.
 */
#define ML_RT_DYN_WORDS 2

/*
 * Last, the measured flag of functions that cannot be versioned (since ABI 4):
 * their BEGIN sites store the decision (1 measured, 0 not) and their counts
 * add that much, so unmeasured executions count nothing.
 */
#define ML_RT_MULT_WORDS 1

/* The unit holds the first instructions of its function: its count is the function's calls. */
#define ML_RT_UNIT_ENTRY 1u
/*
 * The unit belongs to code counted under the dynamic context (since ABI 4): its
 * counts are kept per (thread, open region set) in blocks the runtime makes
 * (__memlens_dyn_block), and the profile lists one copy of it per set.
 */
#define ML_RT_UNIT_DYN 2u

struct ml_rt_call {
    uint32_t unit;
    uint32_t reserved;
    const char *callee;
    uint64_t per_exec;
};

/* A unit whose count is not executions (format/profile.h, struct ml_prof_unitinfo). */
struct ml_rt_uinfo {
    uint32_t unit;
    uint32_t kind; /* ML_UI_* */
    const char *name;
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
    uint64_t *(*tls)(void);          /* this thread's counters [nunits], then region slots */
    uint32_t *region_ids;            /* [nregions], filled at registration: local -> global */
    uint32_t *setids; /* [nregset_words], filled at registration: a set's global set id */
    uint32_t nuinfo;
    uint32_t reserved;
    const struct ml_rt_uinfo *uinfo; /* [nuinfo] */
    const uint32_t *rflags;          /* [nregions] ML_RFLAG_* of the module's regions */
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
/*
 * __memlens_enter_never (since ABI 4): a BEGIN in the plain copy inside
 * another region of the same function, so inside an unmeasured execution: the
 * new execution is not measured (returns 0) and does not count towards the
 * sampling policy of its region.
 */
uint32_t __memlens_enter_never(struct ml_rt_module *m, uint32_t local_region);
void __memlens_exit(struct ml_rt_module *m, uint32_t local_region);
/*
 * __memlens_enter_leaf (since ABI 6): __memlens_enter at a sampled BEGIN site
 * in a loop that carries the region's words in a register, holds no call and
 * is left only with the region closed, so that nothing else runs while one of
 * its executions is open. It returns the answer in bit 0 and, above it, the
 * budget + 1 that the site's register takes (0: as after __memlens_enter,
 * w left 0 and the END calls the runtime). Non-zero when a measured execution
 * that reads no clock was counted at once and handed to the inline END, with
 * w = budget | ML_RT_SLOT_OPEN and base = budget: no runtime END follows.
 * Since ABI 7 an unmeasured answer (0 in bit 0) leaves nothing open for an
 * END, a new execution counted and ended at once (the same budget words, or
 * the register 0 when the thread has no block yet), a recursive one part of
 * the open execution as before: the site's loop has no END in its plain copy.
 */
uint32_t __memlens_enter_leaf(struct ml_rt_module *m, uint32_t local_region);
/*
 * Dynamic attribution (since ABI 4): __memlens_dctx is the calling thread's
 * dynamic context, the global id of the region set that the code around a
 * call the static sets miss counts for (0: none); code counted under it asks
 * __memlens_dyn_block for its counter block (m's units, for this thread and
 * set), and caches it in m's block words.
 */
extern __thread uint32_t __memlens_dctx;
/* Open timed executions on the thread (since ABI 4): not-seen calls read the clock meanwhile. */
extern __thread uint32_t __memlens_timed;
uint64_t *__memlens_dyn_block(struct ml_rt_module *m, uint32_t set);
/* Exact mode: one call per access of region code; flags bit 0 = read, bit 1 = write. */
void __memlens_access(struct ml_rt_module *m, uint32_t unit, const void *p, uint64_t n,
                      uint32_t flags);

#endif
