/* Trace sink internals shared by the sink (trace.c), its page-fault reader and the libc wrappers.
 */
#ifndef ML_RUNTIME_TRACE_RT_H
#define ML_RUNTIME_TRACE_RT_H

#include <stddef.h>
#include <stdint.h>

#include "format/events.h"

/* Sets the sink up (options, gate, exit hooks) once; safe to call from any entry point. */
void ml_tr_init(void);

/*
 * Appends a runtime event to the calling thread's stream, stamped now:
 * fields as docs/trace-format.md lists them per kind; gsite a global site id
 * or ML_EV_NOID. Async-signal-safe once the thread is set up.
 */
void ml_tr_event(unsigned kind, uint64_t addr, uint64_t aux, uint64_t size, uint64_t aux2,
                 uint32_t gsite);

/* An access of gsite recorded by a wrapper (str*, ranges); len 0 is not recorded. */
void ml_tr_access(uint32_t gsite, uint64_t addr, uint64_t len);

/* Whether accesses are being recorded now (the gate is open, not markers only). */
int ml_tr_recording(void);

/* Global id of a module's site. */
static inline uint32_t ml_tr_gsite(const struct ml_ev_module *m, uint32_t site)
{
    return m->site_base + site;
}

/*
 * Before exec: records EXEC, hands the calling thread's buffer to the writer
 * and waits until everything queued is on disk with an END chunk (reason
 * exec). Tracing continues if exec fails.
 */
void ml_tr_before_exec(uint32_t gsite);

/* Before _exit: everything recorded goes to disk with an END chunk (reason exit). */
void ml_tr_before_exit(void);

/* Page faults (trace-pf.c): per-thread software page-fault sampling and frame numbers. */
struct ml_tr_pf;
/* Probes once whether the kernel allows the event and pagemap shows frames; fills the reasons. */
void ml_tr_pf_probe(int want_faults, int want_pfn, char *faults_why, size_t n1, char *pfn_why,
                    size_t n2);
int ml_tr_pf_faults_on(void);
/* The runtime's start: a tick and the CLOCK_MONOTONIC ns read with it (fault times convert). */
void ml_tr_pf_clock(uint64_t tick0, uint64_t ns0);
int ml_tr_pf_pfn_on(void);
/* Opens the calling thread's event; NULL when faults are off or the open failed. */
struct ml_tr_pf *ml_tr_pf_open(void);
/* Closes the event and unmaps its ring (writer thread, after the last read). */
void ml_tr_pf_close(struct ml_tr_pf *pf);
/*
 * Reads samples from the ring: calls fn(ctx, tick, addr) for each fault whose
 * tick is <= upto, in order, and stops at the first later one (kept for the
 * next call). Lost samples are added to *lost.
 */
void ml_tr_pf_read(struct ml_tr_pf *pf, uint64_t upto,
                   void (*fn)(void *ctx, uint64_t tick, uint64_t addr), void *ctx, uint64_t *lost);
/* The tick of the next unread fault, UINT64_MAX when there is none yet. */
uint64_t ml_tr_pf_peek(struct ml_tr_pf *pf);
/* The frame number of the page holding addr (0: not present or unreadable), and flags. */
uint64_t ml_tr_pfn(uint64_t addr, uint32_t *flags);

#endif
