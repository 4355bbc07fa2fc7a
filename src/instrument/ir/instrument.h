/* Bitcode instrumenter entry points: regions, counters and static facts on LLVM-C 14. */
#ifndef ML_IR_INSTRUMENT_H
#define ML_IR_INSTRUMENT_H

#include <llvm-c/Core.h>
#include <stddef.h>

struct ml_ir_opts {
    /* Called for each warning (library code never prints); may be NULL. */
    void (*warn)(void *ctx, const char *msg);
    void *warn_ctx;
    /*
     * Exact mode (a checking aid, slow): also report every memory access of
     * region code to the runtime with its address, which classifies it as
     * heap, global or stack by address. Profiles then carry both figures.
     */
    int exact;
    /*
     * All-blocks mode: count every defined function, not only region code.
     * Code outside regions gets units with an empty region set; regions and
     * their figures are unchanged. A module without regions is instrumented too.
     */
    int all;
    /*
     * Trace mode (memlens cc --trace): every access of every function is
     * recorded into the runtime's trace buffers, with markers (regions,
     * MEMLENS_MARK, on/off) as runtime calls; no region counters. With
     * trace_functions / trace_loops, function and loop entries and exits are
     * recorded too (src/instrument/ir/sink-trace.c, docs/trace.md).
     */
    int trace;
    int trace_functions;
    int trace_loops;
    /*
     * Event profiling (memlens cc --events): bit k set = the profiling modules
     * chosen need events of kind k (format/events.h), with event_fields
     * (ML_EVF_*); appended inline to the profiling queue
     * (src/instrument/ir/sink-queue.c, docs/profile.md). No region counters.
     */
    uint64_t events;
    unsigned event_fields;
};

/*
 * Instruments module m in place: finds MEMLENS_ROI_* regions, clones callees
 * reached from regions, adds thread-local counters and embeds the static
 * facts and a constructor that registers them with the runtime. Returns 0,
 * or 1 when the module has no regions (and o->all is off): it is left
 * unchanged. Returns -errno with a reason in err on failure; a reason about a
 * marker starts with its place, "<file>:<line>:<column>: " when the module has
 * debug locations, else "function '<name>': ".
 */
int ml_ir_instrument(LLVMModuleRef m, const struct ml_ir_opts *o, char *err, size_t errlen);

/* Bitcode to read: the file path, or when data is not NULL, len bytes named path. */
struct ml_ir_input {
    const char *path;
    const void *data;
    size_t len;
};

/*
 * Reads the bitcode in[0..n-1], links it into one module when n > 1,
 * instruments it and returns the new bitcode in *out (dispose with
 * LLVMDisposeMemoryBuffer). With one input that has nothing to instrument,
 * *out is NULL: the input is the result as it is (rewriting it would lose the
 * use-list order and so change the code generated from it). Returns 0 or
 * -errno with a reason in err.
 */
int ml_ir_instrument_bitcode(const struct ml_ir_input *in, int n, const struct ml_ir_opts *o,
                             LLVMMemoryBufferRef *out, char *err, size_t errlen);

#endif
