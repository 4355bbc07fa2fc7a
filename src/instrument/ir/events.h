/* Event layer of the instrumenter: which IR sites emit which events, with which fields. */
#ifndef ML_IR_EVENTS_H
#define ML_IR_EVENTS_H

#include "format/events.h"
#include "instrument/ir/ir.h"

/*
 * The layer answers one question for every sink (the trace today, the event
 * queue next): at which IR points does an event happen, of which kind, with
 * which fields. It builds the module's site and marker tables (source
 * locations included); a sink decides how the records are stored.
 */

/* One event at one IR point, in program order within its block. */
struct ml_ev_point {
    uint32_t kind;      /* enum ml_ev_kind */
    uint32_t site;      /* module-local site id */
    LLVMValueRef at;    /* the event happens at this instruction: records go just before it */
    LLVMValueRef addr;  /* accesses: the pointer */
    LLVMValueRef len;   /* accesses of variable size: the length in bytes (any integer type) */
    uint64_t size;      /* accesses of constant size: bytes */
    LLVMValueRef value; /* with ML_EVF_VALUE: the loaded or stored value */
};

/* A libc function whose calls the runtime wraps (src/runtime/interpose.c). */
struct ml_ev_wrap {
    const char *name;
    unsigned nparams;  /* the wrapper takes these, then (module, site) */
    unsigned variadic; /* declared with ... : missing trailing arguments are passed as 0 */
    unsigned nranges;  /* sites after the call site for the ranges it reads/writes */
    uint8_t range_kind[2];
    unsigned events; /* 1: records events (kept in uninstrumented copies too) */
};

/* A call the layer recognises: a marker of memlens.h or a wrapped libc function. */
struct ml_ev_call {
    LLVMValueRef call;
    uint32_t kind; /* enum ml_ev_kind of its site */
    uint32_t site;
    const struct ml_ev_wrap *wrap; /* NULL for markers */
};

struct ml_ev_opts {
    uint64_t kinds; /* bit k: the sinks want events of kind k */
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
};

#define ML_EV_BIT(k) (1ull << (k))

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
 * of loops are split for them). Each point gets a new site. *out is malloc'd.
 */
int ml_ev_points(struct ml_ev *ev, LLVMValueRef fn, struct ml_ev_point **out, size_t *n);

/* Whether inst may run other code (a call that is not an intrinsic): sinks batch between these. */
int ml_ev_is_barrier(LLVMValueRef inst);

/* Payload words of a point in the trace buffer (format/trace-abi.h). */
unsigned ml_ev_point_words(const struct ml_ev_point *p);

#endif
