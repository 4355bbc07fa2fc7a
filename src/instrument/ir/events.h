/* Event layer of the instrumenter: which IR sites emit which events, with which fields. */
#ifndef ML_IR_EVENTS_H
#define ML_IR_EVENTS_H

#include "format/events.h"
#include "instrument/ir/ir.h"
#include "instrument/ir/ptrmap.h"

/*
 * The layer answers one question for every sink (the trace today, the event
 * queue next): at which IR points does an event happen, of which kind, with
 * which fields. It builds the module's site and marker tables (source
 * locations included); a sink decides how the records are stored.
 */

/*
 * One event at one IR point, in program order within its block. Fields are
 * operands of `at`, named by index and read when needed (ml_ev_operand):
 * sinks split blocks, which rebuilds phis, so values other than `at` itself
 * may be replaced meanwhile.
 */
struct ml_ev_point {
    uint32_t kind;   /* enum ml_ev_kind */
    uint32_t site;   /* module-local site id */
    LLVMValueRef at; /* the event happens at this instruction (never erased by sinks) */
    int addr_op;     /* accesses: operand index of the pointer; -1 for none */
    int len_op;      /* accesses of variable size: operand index of the length in bytes */
    int value_op;    /* with ML_EVF_VALUE: operand index of the value, -2: `at` itself, -1 none */
    uint64_t size;   /* accesses of constant size: bytes */
};

/* The operand of p->at with index op (-2: p->at itself), or NULL for -1. */
LLVMValueRef ml_ev_operand(const struct ml_ev_point *p, int op);

/* A libc function whose calls the runtime wraps (src/runtime/interpose.c). */
struct ml_ev_wrap {
    const char *name;
    unsigned nparams;  /* the wrapper takes these, then (module, site) */
    unsigned variadic; /* declared with ... : missing trailing arguments are passed as 0 */
    unsigned nranges;  /* sites after the call site for the ranges it reads/writes */
    uint8_t range_kind[2];
    unsigned events; /* 1: records events (kept in uninstrumented copies too) */
};

/* The i-th wrapped libc function's name (its wrapper is __memlens_tr_<name>), NULL past the end. */
const char *ml_ev_wrapped(size_t i);

/* A call the layer recognises: a marker of memlens.h or a wrapped libc function. */
struct ml_ev_call {
    LLVMValueRef call;
    uint32_t kind; /* enum ml_ev_kind of its site */
    uint32_t site;
    const struct ml_ev_wrap *wrap; /* NULL for markers */
};

struct ml_ev_opts {
    uint64_t kinds;  /* bit k: the sinks want events of kind k */
    unsigned fields; /* ML_EVF_* */
    int functions;   /* function entry and exit markers */
    int loops;       /* loop entry and exit markers */
};

struct ml_ev {
    struct ml_ir *ir;
    struct ml_ev_opts o;
    struct ml_ev_site *sites; /* func, file and text strings owned */
    uint32_t nsites, capsites;
    struct ml_ev_marker *markers; /* name, file, func owned */
    uint32_t nmarkers, capmarkers;
    LLVMValueRef f_roi_begin, f_roi_end, f_mark, f_on, f_off, f_pages;
    /* With ML_EVF_FUNC_OBJS / ML_EVF_LOOP_OBJS: the functions that can make an object. */
    struct ml_ptrmap objfns;
};

#define ML_EV_BIT(k) (1ull << (k))
/* Static kinds that name stack and global objects. */
#define ML_EV_OBJ_KINDS                                                                            \
    (ML_EV_BIT(ML_EV_STACK_ALLOC) | ML_EV_BIT(ML_EV_STACK_FREE) | ML_EV_BIT(ML_EV_GLOBAL))
/* Kinds the runtime's heap interposers send (a module asking for one gets them all). */
#define ML_EV_HEAP_KINDS (ML_EV_BIT(ML_EV_ALLOC) | ML_EV_BIT(ML_EV_FREE) | ML_EV_BIT(ML_EV_REALLOC))

int ml_ev_init(struct ml_ev *ev, struct ml_ir *ir, const struct ml_ev_opts *o);
void ml_ev_free(struct ml_ev *ev);

/*
 * The marker and wrapped-libc calls of fn, each with a new site (wrapped
 * calls: 1 + nranges consecutive sites). Fails with a located reason when a
 * marker's name is not a string literal. *out is malloc'd.
 */
int ml_ev_calls(struct ml_ev *ev, LLVMValueRef fn, struct ml_ev_call **out, size_t *n);

/*
 * The events of fn's body in program order: accesses (loads, stores,
 * atomics, memory intrinsics and memcpy/memmove/memset calls), and with the
 * options function entry/exit and loop entry/exit markers (edges into and out
 * of loops are split for them), stack objects made and released, pointer
 * creation and allocation sites. Each point gets a new site. *out is malloc'd.
 */
int ml_ev_points(struct ml_ev *ev, LLVMValueRef fn, struct ml_ev_point **out, size_t *n);

/*
 * The accesses instruction `in` makes, at most two (a copy reads, then
 * writes): kind, operands and size, site 0. The one classification every
 * per-access emitter uses (exact mode, the trace sink). Returns how many.
 */
int ml_ev_accesses(LLVMTargetDataRef td, LLVMValueRef in, struct ml_ev_point out[2]);

/* Whether inst may run other code (a call that is not an intrinsic): sinks batch between these. */
int ml_ev_is_barrier(LLVMValueRef inst);

/* Does an instruction in [from, to) of one block run other code? */
int ml_ev_barrier_between(LLVMValueRef from, LLVMValueRef to);

/*
 * The functions of the module a sink instruments, as they are now (clones a
 * sink makes later are not listed): defined here, not memlens' own, not
 * naked. *out is malloc'd (NULL when n is 0). 0 or -ENOMEM.
 */
int ml_ev_functions(struct ml_ir *ir, LLVMValueRef **out, size_t *n);

/* Grows *p (elements of elem bytes) to hold need; 0 or -ENOMEM. */
int ml_ev_grow(void **p, uint32_t *cap, uint32_t need, size_t elem);

/*
 * Emits the module's site and marker tables and its struct ml_ev_module (a
 * writable global named symbol: the runtime fills the bases) with the sink's
 * segment descriptors segs_ptr (nsegs words; a null pointer for none).
 * Returns the descriptor, NULL when out of memory.
 */
LLVMValueRef ml_ev_emit_module(struct ml_ev *ev, LLVMValueRef segs_ptr, uint32_t nsegs,
                               const char *symbol);

/*
 * GLOBAL points for the module's global objects (defined here, not
 * thread-local, not memlens' own, not the compiler's unnamed constants), each
 * at a helper instruction the layer inserts before `before`. *out is malloc'd.
 */
int ml_ev_globals(struct ml_ev *ev, LLVMValueRef fn, LLVMValueRef before, struct ml_ev_point **out,
                  size_t *n);

/* Payload words of a point in the trace buffer (format/trace-abi.h). */
unsigned ml_ev_point_words(const struct ml_ev_point *p);

#endif
