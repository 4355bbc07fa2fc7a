/* Event vocabulary shared by the instrumenter, the runtime sinks, the trace format and analyses. */
#ifndef ML_FORMAT_EVENTS_H
#define ML_FORMAT_EVENTS_H

#include <stdint.h>

/*
 * What happens at a point of a program. Static kinds belong to a *site* (an
 * IR instruction or call the instrumenter saw, listed in the module's site
 * table with its source location); runtime kinds are produced by the runtime
 * (libc wrappers, threads, the kernel). The numbers are part of the trace
 * format (docs/trace-format.md): never renumber, only append.
 */
enum ml_ev_kind {
    ML_EV_NONE = 0,
    /* Accesses: address, size, weight. RMW reads and writes its location (atomics). */
    ML_EV_LOAD = 1,
    ML_EV_STORE = 2,
    ML_EV_RMW = 3,
    /*
     * A load's value without its address (event profiling, when no chosen
     * module needs load addresses): word 1 = the value, aux = the size and
     * type (format/queue.h, ML_Q_VAL_AUX). Not an access for other modules.
     */
    ML_EV_LOAD_VALUE = 4,
    /* Semantic markers at static sites (each names a marker: region, mark, function, loop). */
    ML_EV_REGION_BEGIN = 8,
    ML_EV_REGION_END = 9,
    ML_EV_MARK = 10,
    ML_EV_FUNC_ENTRY = 11,
    ML_EV_FUNC_EXIT = 12,
    ML_EV_LOOP_ENTRY = 13,
    ML_EV_LOOP_ITER = 14,
    ML_EV_LOOP_EXIT = 15,
    ML_EV_TRACE_ON = 16,
    ML_EV_TRACE_OFF = 17,
    ML_EV_PAGES = 18, /* MEMLENS_PAGES(p, n): frame numbers of a range, on request */
    /* Call sites of wrapped libc functions (the runtime records what the call did). */
    ML_EV_CALL = 24,
    /* Runtime events. */
    ML_EV_THREAD_START = 32,
    ML_EV_THREAD_EXIT = 33,
    ML_EV_FORK = 34,
    ML_EV_EXEC = 35,
    ML_EV_MMAP = 36,
    ML_EV_MUNMAP = 37,
    ML_EV_MREMAP = 38,
    ML_EV_BRK = 39,
    ML_EV_IO = 40,
    ML_EV_PAGE_FAULT = 41,
    ML_EV_PFN = 42,
    ML_EV_WAIT = 43,        /* the producer waited for the writer (by default nothing is dropped) */
    ML_EV_DROP = 44,        /* records dropped (--drop) */
    ML_EV_SIGNAL = 45,      /* a fatal signal ended the process */
    ML_EV_LOST = 46,        /* raw records the writer found damaged and skipped */
    ML_EV_FAULTS_LOST = 47, /* page-fault samples the kernel could not deliver */
    /*
     * Event profiling (issue 14); not written to traces yet. Heap events come
     * from the runtime's malloc-family interposers (runtime/heap.c): ALLOC
     * word 1 = address, then size and the caller's return address; FREE word
     * 1 = address; REALLOC word 1 = the old address (the block it ends; the
     * new block is an ALLOC with aux ML_EV_HEAP_REALLOC). ALLOC_SITE is
     * static: a call in instrumented code that may return a new heap block
     * (word 1 = the pointer it returned) names the block's allocation site.
     * Stack and global objects are static sites naming an object (marker of
     * kind ML_MK_OBJECT: the variable): STACK_ALLOC (an address-taken alloca
     * at its llvm.lifetime.start, or at function entry without one) and
     * GLOBAL (a global variable, announced once when its module's
     * constructors run, dlopen included): word 1 = address, one extra unit
     * with the size in bytes; STACK_FREE (at llvm.lifetime.end and at every
     * function exit, for every stack object of the function): word 1 =
     * address.
     */
    ML_EV_ALLOC = 56,
    ML_EV_FREE = 57,
    ML_EV_REALLOC = 58,
    ML_EV_STACK_ALLOC = 59,
    ML_EV_STACK_FREE = 60,
    ML_EV_PTR_DEF = 61,
    ML_EV_ALLOC_SITE = 62,
    ML_EV_GLOBAL = 63,
    ML_EV_NKINDS = 64
};

static inline int ml_ev_is_access(unsigned k)
{
    return k >= ML_EV_LOAD && k <= ML_EV_RMW;
}

static inline int ml_ev_is_marker(unsigned k)
{
    return k >= ML_EV_REGION_BEGIN && k <= ML_EV_PAGES;
}

/* Lower-case names ("load", "region-begin", "page-fault"); "?" for unknown kinds. */
const char *ml_ev_kind_name(unsigned kind);

/* ALLOC aux flags: how the block was made. */
#define ML_EV_HEAP_REALLOC 1u /* by realloc (the REALLOC before it ended the old block) */
#define ML_EV_HEAP_ZERO    2u /* zeroed (calloc) */

/*
 * PTR_DEF sites (pointer creation, for points-to): the site's size field
 * says what made the pointer; word 1 of the record is the pointer.
 */
#define ML_EV_PTR_LOAD 0u /* a load of a pointer */
#define ML_EV_PTR_CALL 1u /* a call that returned a pointer */
#define ML_EV_PTR_ARG  2u /* parameter k of a function, at its entry: ML_EV_PTR_ARG + k */

/* Fields an event can carry; a sink asks for the ones it needs (ml_ev_sink.fields). */
enum ml_ev_field {
    ML_EVF_ADDR = 1u << 0,
    ML_EVF_SIZE = 1u << 1,
    ML_EVF_VALUE = 1u << 2, /* loaded or stored value (event profiling) */
    ML_EVF_SITE = 1u << 3,
    ML_EVF_TIME = 1u << 4,
    ML_EVF_WEIGHT = 1u << 5,
    /*
     * Function (and loop) events only in functions that can make an object
     * (docs/profile-modules.md, "Function events"): set when no chosen module
     * needs them anywhere else.
     */
    ML_EVF_FUNC_OBJS = 1u << 6,
    ML_EVF_LOOP_OBJS = 1u << 7,
    /*
     * No loads of variables whose address is never taken (an alloca only
     * loaded and stored): no other thread can store in them, so such a load
     * cannot see another thread's bytes. Set when every chosen module asks for
     * no more (sharing); stores are all kept (they make lines change owner).
     */
    ML_EVF_SHARED_LOADS = 1u << 8,
};

/* Kinds of marker (the semantic entity a marker site names). */
enum ml_marker_kind {
    ML_MK_REGION = 1,
    ML_MK_MARK = 2,
    ML_MK_FUNCTION = 3,
    ML_MK_LOOP = 4,
    ML_MK_TRACE = 5, /* MEMLENS_TRACE_ON/OFF */
    ML_MK_PAGES = 6,
    /*
     * A basic block of machine code selectively traced (--trace=asm): its
     * access sites name it. The name is "<source>:<function>:<block>
     * m=<accesses> l=<loads> s=<stores> r=<read-modify-writes> ma=<MA>
     * aia=<AIA> C=<chunk>" with the block's static figures (docs/select.md).
     */
    ML_MK_BLOCK = 7,
    /* A stack or global object (STACK_ALLOC and GLOBAL sites): name = the variable's name. */
    ML_MK_OBJECT = 8,
};

const char *ml_marker_kind_name(unsigned kind);

/* What kind of file an I/O event's descriptor is (fstat at the call). */
enum ml_fd_kind {
    ML_FD_UNKNOWN = 0,
    ML_FD_FILE = 1,
    ML_FD_BLOCK = 2,
    ML_FD_SOCKET = 3,
    ML_FD_PIPE = 4,
    ML_FD_CHAR = 5, /* terminals, /dev/null, ... */
    ML_FD_OTHER = 6,
};

const char *ml_fd_kind_name(unsigned kind);

/* The wrapped I/O calls (ML_EV_IO's call field). */
enum ml_io_call {
    ML_IO_READ = 1,
    ML_IO_WRITE,
    ML_IO_PREAD,
    ML_IO_PWRITE,
    ML_IO_READV,
    ML_IO_WRITEV,
    ML_IO_RECV,
    ML_IO_RECVFROM,
    ML_IO_RECVMSG,
    ML_IO_SEND,
    ML_IO_SENDTO,
    ML_IO_SENDMSG,
    ML_IO_NCALLS
};

const char *ml_io_call_name(unsigned call);

#define ML_EV_NOID UINT32_MAX

/*
 * Static tables the instrumenter embeds per module (one struct ml_ev_module)
 * and registers with the runtime from a constructor; the runtime copies them
 * into the trace, so no side files are needed. Other producers (the x86-64
 * assembly rewriter) emit the same structures. Bump ML_EV_ABI when a layout
 * changes; the runtime ignores modules of another ABI.
 */
#define ML_EV_ABI 1

/* One entry of the instruction (site) table. */
struct ml_ev_site {
    uint32_t kind;   /* enum ml_ev_kind */
    uint32_t size;   /* access bytes; 0 = variable (the record carries a length) */
    uint32_t weight; /* accesses one record stands for (selective tracing); 1 otherwise */
    uint32_t marker; /* module-local marker id for marker kinds, else ML_EV_NOID */
    uint32_t line;   /* 0 when unknown */
    uint32_t column;
    const char *func; /* function (linkage name as in the binary) */
    const char *file; /* "" when unknown */
    const char *text; /* instruction text for machine-code sites, or the called function; "" */
};

/* One entry of the marker table: the semantic entity marker sites refer to. */
struct ml_ev_marker {
    uint32_t kind; /* enum ml_marker_kind */
    uint32_t line;
    const char *name; /* region or mark name, function name, "func:loop@line" */
    const char *file;
    const char *func;
};

struct ml_ev_module {
    uint32_t abi;
    uint32_t nsites;
    uint32_t nmarkers;
    uint32_t nsegwords; /* words of segs */
    uint32_t flags;     /* ML_EVM_* */
    uint32_t reserved;
    const char *name; /* source file or output of the module */
    const struct ml_ev_site *sites;
    const struct ml_ev_marker *markers;
    /*
     * Trace sink: segment descriptors (format/trace-abi.h), 8-byte aligned;
     * instrumented code stores the address of one into the buffer ahead of
     * the segment's records.
     */
    const uint32_t *segs;
    /* Filled at registration. */
    uint32_t site_base;   /* global id of sites[0] */
    uint32_t marker_base; /* global id of markers[0] */
    struct ml_ev_module *next;
};

/* The module's code records function or loop markers inline (not only through calls). */
#define ML_EVM_INLINE_MARKERS 1u

#endif
