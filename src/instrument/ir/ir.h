/* Instrumenter internals shared by its passes: module state, units, region sets. */
#ifndef ML_IR_IR_H
#define ML_IR_IR_H

#include <llvm-c/Core.h>
#include <llvm-c/Target.h>
#include <stddef.h>
#include <stdint.h>

#include "format/profile.h"
#include "instrument/ir/instrument.h"
#include "instrument/ir/ptrmap.h"

/* Pointers counted by address per segment; beyond that their bytes count as heap. */
#define ML_MAX_DYN 32

/* One counting unit: a counter slot and the facts one increment stands for. */
struct ml_unit {
    uint32_t kind; /* enum ml_unit_kind */
    uint32_t line;
    uint32_t regset;  /* word offset into ml_ir.words */
    uint32_t flags;   /* ML_RT_UNIT_* */
    const char *func; /* interned by LLVM (function name) or a literal */
    char *file;       /* owned */
    uint64_t facts[ML_NFACTS];
    int placed;          /* its increment (or hoisted add) has been emitted */
    LLVMMetadataRef isp; /* a bytes unit of inlined code: the inlined function, or NULL */
    uint32_t iline;      /* and the line in it */
};

/*
 * The part of a unit's facts that belongs to code inlined from another
 * function (inlined.c): made into a unit of its own, never counted, that the
 * report counts with the host's count (format/profile.h, INLINED).
 */
struct ml_inlrec {
    uint32_t host;
    uint32_t line;      /* lowest line of the inlined function's code in the host */
    LLVMMetadataRef sp; /* the inlined function (DISubprogram) */
    uint64_t facts[ML_NFACTS];
};

/* Shares of inlined functions in one segment being counted, before its units exist. */
struct ml_inlseg {
    struct ml_inlacc {
        LLVMMetadataRef sp;
        uint32_t line;
        uint64_t facts[ML_NFACTS];
        uint64_t rd[ML_MAX_DYN], wr[ML_MAX_DYN]; /* of each ml_dynbytes entry */
    } * a;
    size_t n, cap;
};

/* A unit whose count is not executions (format/profile.h, UNITINFO). */
struct ml_uinfo {
    uint32_t unit;
    uint32_t kind; /* ML_UI_* */
    char *name;    /* owned */
};

/* A call whose wrapping waits until the code is final (late.c): context and clock. */
struct ml_late {
    LLVMValueRef call;
    int mult;        /* in code that counts times the measured flag: so does the context */
    uint32_t regset; /* dynamic context to set around it, or ML_NOSET */
    uint32_t ticks;  /* unit counting its ticks in timed executions, or UINT32_MAX */
};

struct ml_callrec {
    uint32_t unit;
    char *callee; /* owned */
    uint64_t per_exec;
};

/* Bytes of one segment's accesses through one pointer whose class only its address tells. */
struct ml_dynbytes {
    LLVMValueRef base;  /* the pointer: an argument, a loaded pointer, a call's result, ... */
    LLVMValueRef first; /* the segment's first instruction that accesses through it */
    uint64_t rd, wr;
};

/* A function body to instrument under a context: regions active on every path into it. */
struct ml_work {
    LLVMValueRef fn;
    uint32_t ctx;            /* regset offset; ML_NOSET when none */
    uint32_t argsig;         /* class + 1 of pointer arguments 0-15, 2 bits each (0: unknown) */
    unsigned char mult;      /* counts times the thread's measured flag (not versioned) */
    const char *src_name;    /* the source function it stands for */
    unsigned char versioned; /* BEGIN sites choose between an instrumented and a plain copy */
    unsigned char plain;     /* the plain copy: region markers and exits, no counters */
};

/* A function with markers and its plain copy, merged after both are instrumented. */
struct ml_version {
    LLVMValueRef fn;
    LLVMValueRef plain;
};

struct ml_clone {
    LLVMValueRef tmpl;
    uint32_t ctx;
    uint32_t argsig;
    int mult;
    LLVMValueRef fn;
};

#define ML_NOSET UINT32_MAX

/* llvm.annotation tags of region markers ('MLRB', 'MLRE'), as include/memlens.h writes them. */
#define ML_ANNOT_BEGIN 0x4d4c5242u
#define ML_ANNOT_END   0x4d4c5245u

struct ml_ir {
    LLVMModuleRef m;
    LLVMContextRef ctx;
    LLVMTargetDataRef td;
    LLVMBuilderRef b;
    const struct ml_ir_opts *o;
    char *err;
    size_t errlen;

    LLVMTypeRef t_void, t_i8, t_i32, t_i64, t_i8p, t_i64p;
    LLVMValueRef f_begin, f_end;  /* user API (may be NULL) */
    unsigned annot_id;            /* llvm.annotation: markers from memlens cc (memlens.h) */
    LLVMValueRef f_enter, f_exit; /* runtime entry points */
    LLVMValueRef f_enter_always;  /* BEGIN in code that is always instrumented */
    LLVMValueRef f_enter_never;   /* BEGIN nested in a plain copy: never measured */
    LLVMTypeRef ty_enter, ty_exit;
    unsigned md_id;        /* metadata kind pairing the two copies' instructions */
    unsigned md_plain;     /* metadata kind marking the ENDs of plain copies (inline.c) */
    LLVMValueRef f_access; /* exact mode only */
    LLVMTypeRef ty_access;
    LLVMValueRef desc_ph; /* placeholder for the module descriptor */
    LLVMValueRef ctr_ph;  /* placeholder for the counter array */

    char **regions;
    uint32_t nregions;
    uint32_t *words; /* region sets: n, ids... (sorted) */
    size_t nwords, capwords;
    struct ml_unit *units;
    size_t nunits, capunits;
    struct ml_callrec *calls;
    size_t ncalls, capcalls;

    struct ml_work *work;
    size_t nwork, capwork;
    struct ml_clone *clones;
    size_t nclones, capclones;
    struct ml_ptrmap templates; /* function instrumented in place -> pristine copy */
    struct ml_ptrmap generated; /* clones and templates: never scanned as originals */
    uint32_t noregion;          /* all-blocks mode: the empty region set; else ML_NOSET */
    uint32_t argsig;            /* the function being instrumented: struct ml_work.argsig */
    struct ml_dynbytes *dyn; /* collector of ml_facts_add, or NULL (dynamic bytes count as heap) */
    size_t ndyn;
    LLVMValueRef stk_ph; /* placeholder for the thread's stack bounds (2 x i64, thread-local) */
    struct ml_ptrmap argbits;        /* argument -> its stack bit, computed in the entry block */
    struct ml_ptrmap ptrbits;        /* other pointer -> its stack bit, in a loop preheader */
    const struct ml_cfg *cur_cfg;    /* of the function being counted (stack bits are hoisted) */
    const unsigned char *cur_marked; /* [cur_cfg->nloops]: the loop holds a region marker */
    int cur_anchor;                  /* block of the folded loop's counts being made, or -1 */
    /* Dynamic attribution (dyn.c). */
    uint32_t dynset;         /* ctx of copies counted under the dynamic context, or ML_NOSET */
    LLVMValueRef g_dctx;     /* the runtime's thread-local context word (a global set id) */
    LLVMValueRef setids_ph;  /* placeholder: module region set -> global set id, per word */
    LLVMValueRef f_dynblock; /* __memlens_dyn_block */
    LLVMTypeRef ty_dynblock;
    LLVMValueRef cur_base;   /* counter block of the function being instrumented, or NULL */
    struct ml_version *dyns; /* (original, dynamic copy) pairs that get an entry check */
    size_t ndyns, capdyns;
    struct ml_uinfo *uinfo; /* units counting allocations, frees, ticks of not-seen calls */
    size_t nuinfo, capuinfo;
    struct ml_late *late; /* calls to wrap once the code is final */
    size_t nlate, caplate;
    LLVMValueRef g_timed; /* the runtime's thread-local count of open timed executions */
    uint32_t *rflags;     /* per region: ML_RFLAG_* ([nrflags], grown as regions appear) */
    uint32_t nrflags;
    int cur_mult;         /* the function being instrumented counts times the mult word */
    LLVMValueRef mult_ph; /* placeholder: the module block's measured flag of this thread */
    struct ml_version *versions;
    size_t nversions, capversions;
    struct ml_inlrec *inl; /* shares of inlined functions, by host unit */
    size_t ninl, capinl;
};

/* Makes room for need elements of elem bytes in *p (capacity *cap, doubled); -ENOMEM. */
int ml_grow(void **p, size_t *cap, size_t need, size_t elem);

/* Reports an error into ir->err; returns -EINVAL (or the given code). */
int ml_ir_fail(struct ml_ir *ir, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void ml_ir_warn(struct ml_ir *ir, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The string a constant pointer (into a global string literal) points at, without its NUL. */
int ml_string_literal(LLVMValueRef v, const char **s, size_t *len);
/* "file:line" of inst, or "function 'name'" without debug information. */
void ml_describe_loc(LLVMValueRef inst, char *buf, size_t len);

/*
 * inlined.c: with -g, the function whose source inst is when the compiler
 * inlined it from another function (*line: its line there), else NULL.
 */
LLVMMetadataRef ml_inl_scope(LLVMValueRef inst, uint32_t *line);
/* The symbol of subprogram sp (its linkage name, else its name) and its file, NUL-terminated. */
char *ml_inl_symbol(struct ml_ir *ir, LLVMMetadataRef sp);
char *ml_inl_file(LLVMMetadataRef sp);
/*
 * Adds to s the facts inst added (f0 -> f1) and the dynamic bytes it added
 * (entries of dyn, whose rd/wr were rd0/wr0 for the first nd0), when inst is
 * inlined code (sp from ml_inl_scope).
 */
int ml_inl_seg_add(struct ml_inlseg *s, LLVMMetadataRef sp, uint32_t line, const uint64_t *f0,
                   const uint64_t *f1, const struct ml_dynbytes *dyn, size_t ndyn,
                   const uint64_t *rd0, const uint64_t *wr0, size_t nd0);
/* Adds facts f (ML_F_INCR is memlens' own and left out) of sp's code to host's share. */
int ml_inl_record(struct ml_ir *ir, uint32_t host, LLVMMetadataRef sp, uint32_t line,
                  const uint64_t *f);

/* Region sets. */
int ml_regset_intern(struct ml_ir *ir, const uint32_t *ids, uint32_t n, uint32_t *off);
int ml_regset_has(const struct ml_ir *ir, uint32_t off, uint32_t id);

/* facts.c: static facts of instructions. */
enum ml_memclass { ML_HEAP = 0, ML_GLOBAL = 1, ML_STACK = 2, ML_DYNAMIC = 3 };
/* Static class of the object ptr points into, ML_DYNAMIC counted as heap (no context). */
enum ml_memclass ml_ptr_class(LLVMValueRef ptr);
/*
 * Class of the object ptr points into, in the function being instrumented
 * (ir->argsig); ML_DYNAMIC when only the address can tell, *base then being
 * the pointer whose address decides (docs/regions.md, "What a count is").
 */
enum ml_memclass ml_ptr_origin(const struct ml_ir *ir, LLVMValueRef ptr, LLVMValueRef *base);
/* Adds the facts of one instruction to f; returns 0 for instructions that are not counted. */
int ml_facts_add(struct ml_ir *ir, LLVMValueRef inst, uint64_t *f);
/* Memory intrinsic or libc memcpy/memmove/memset: 1 = copy, 2 = set, 0 = neither. */
int ml_mem_call_kind(LLVMValueRef call);
int ml_is_ignored_call(LLVMValueRef call);
LLVMValueRef ml_called_function(LLVMValueRef call);

/* clone.c: copies fn into a new internal function named name (debug info dropped later). */
LLVMValueRef ml_clone_function(struct ml_ir *ir, LLVMValueRef fn, const char *name);
/* Removes debug locations and debug intrinsics from a generated function. */
void ml_strip_debug(LLVMValueRef fn);
int ml_can_clone(LLVMValueRef fn);

/* all.c: all-blocks mode (ml_ir_opts.all). */
/* Interns the empty region set into ir->noregion in all-blocks mode; else ML_NOSET. */
int ml_all_setup(struct ml_ir *ir);
/* Whether a defined function still needs its blocks counted in place (not yet instrumented). */
int ml_all_wants(struct ml_ir *ir, LLVMValueRef fn);
/* Marks the first block unit of a function's entry block: its count is the function's calls. */
void ml_all_mark_entry(struct ml_ir *ir, size_t first_unit);

/*
 * version.c: code versioning for sampling (docs/regions.md). ml_version_prepare
 * tags every instruction of fn with a metadata id and makes the plain copy, a
 * separate function instrumented without counters; ml_version_merge then moves
 * the plain copy's blocks into fn, branches on __memlens_enter's result at
 * every BEGIN site and repairs SSA form. When the copies cannot be paired, the
 * merge falls back to fn alone, always instrumented (__memlens_enter_always).
 * Both return 0 or -ENOMEM.
 */
int ml_version_prepare(struct ml_ir *ir, LLVMValueRef fn, LLVMValueRef *plain);
int ml_version_merge(struct ml_ir *ir, const struct ml_version *v);
/* Can fn be versioned (cloneable, not too large for the SSA repair)? */
int ml_version_supported(LLVMValueRef fn);
/* Moves instruction in to the builder's position, keeping its name. */
void ml_move_to_builder(struct ml_ir *ir, LLVMValueRef in);
/*
 * Moves everything after `at` into a new block placed after at's block and
 * returns it; at's block is left without a terminator. Successors' phis are
 * retargeted.
 */
LLVMBasicBlockRef ml_split_after(struct ml_ir *ir, LLVMValueRef at);
/*
 * Routes every edge pb->sb through a new block (ending in a branch to sb,
 * built with the builder's current location) and fixes sb's phis. NULL when the edge
 * cannot be split: indirect branches, callbr, edges into landing pads.
 */
LLVMBasicBlockRef ml_split_edge(struct ml_ir *ir, LLVMBasicBlockRef pb, LLVMBasicBlockRef sb,
                                const char *name);
/* Rebuilds the phis of bb with incoming block `from` renamed `to` (NULL: dropped). */
void ml_phis_retarget(struct ml_ir *ir, LLVMBasicBlockRef bb, LLVMBasicBlockRef from,
                      LLVMBasicBlockRef to);

/*
 * inline.c: turns every call of __memlens_enter, __memlens_enter_always and
 * __memlens_exit into the inline path of runtime/abi.h ("Region slots"), the
 * call kept on its cold side. Runs last, after versioning. 0 or -ENOMEM.
 */
int ml_inline_markers(struct ml_ir *ir);

/*
 * dyn.c: dynamic attribution (docs/regions.md, "Dynamic attribution").
 * setup: the empty set for code counted under the dynamic context
 * (ir->dynset, ML_NOSET when off: all-blocks and exact mode), the runtime's
 * context word and entry point. wanted: fn may be reached by a call the
 * static sets miss (its address escapes, or other modules may call it) and
 * can get a dynamic copy. base: builds, before fn's entry, the counter block
 * for the thread's context (counters of a dynamic copy add into it).
 * entry_check: fn runs dyn when a context is set. wrap_call: a call from
 * region code (set regset) that the static sets miss runs under that set.
 */
int ml_dyn_setup(struct ml_ir *ir);
int ml_dyn_wanted(struct ml_ir *ir, LLVMValueRef fn);
LLVMValueRef ml_dyn_base(struct ml_ir *ir, LLVMValueRef fn);
void ml_dyn_entry_check(struct ml_ir *ir, LLVMValueRef fn, LLVMValueRef dyn);
void ml_dyn_wrap_call(struct ml_ir *ir, LLVMValueRef call, uint32_t regset, int mult);
/*
 * Wraps the recorded calls (ir->late) once the code is final: the dynamic
 * context around calls the static sets miss, and clock reads around not-seen
 * calls in timed executions. 0 or -ENOMEM.
 */
int ml_late_calls(struct ml_ir *ir);
/* sink-trace.c: trace mode (ml_ir_opts.trace) instead of regions. */
int ml_sink_trace(struct ml_ir *ir);
/* sink-queue.c: event profiling (ml_ir_opts.events) instead of regions. */
int ml_sink_queue(struct ml_ir *ir);

/* emit.c: the descriptor, counters, constructor. */
int ml_emit_module(struct ml_ir *ir);
/* Interns string constants so that repeated function and file names share one global. */
struct ml_strtab {
    char **keys;
    LLVMValueRef *vals;
    size_t cap, len;
};
/* A pointer to a private constant string s (NULL when out of memory). */
LLVMValueRef ml_emit_cstr(struct ml_ir *ir, struct ml_strtab *t, const char *s);
void ml_emit_strtab_free(struct ml_strtab *t);
/* An internal global with initializer init, constant when ro. */
LLVMValueRef ml_emit_global(struct ml_ir *ir, LLVMValueRef init, const char *name, int ro);
/* Pointer to element 0 of an array global, or null for an empty table (g NULL). */
LLVMValueRef ml_emit_array_ptr(struct ml_ir *ir, LLVMValueRef g, LLVMTypeRef elem);
/*
 * Appends fn to list, llvm.global_ctors or llvm.global_dtors, with a priority,
 * rebuilding the appending array (LLVM-C cannot extend it in place).
 */
void ml_emit_xtor(struct ml_ir *ir, LLVMValueRef fn, const char *list, unsigned priority);
/*
 * A constructor <prefix>_ctor calling reg(desc) and a destructor <prefix>_dtor
 * calling unreg(desc) (none when unreg is NULL), at the given priority.
 */
void ml_emit_register(struct ml_ir *ir, LLVMValueRef desc, const char *reg, const char *unreg,
                      const char *prefix, unsigned priority);

#endif
