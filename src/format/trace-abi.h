/* Trace buffer ABI: how generated code (IR or rewritten assembly) appends records for the runtime.
 */
#ifndef ML_FORMAT_TRACE_ABI_H
#define ML_FORMAT_TRACE_ABI_H

#include <stdint.h>

#include "format/events.h"

/*
 * Every thread owns a buffer of 64-bit words. Two thread-local variables,
 * defined by the runtime (initial-exec TLS, so generated code reaches them as
 * %fs:sym@tpoff on x86-64), delimit its free part:
 *
 *     __memlens_tb_ptr   next free word
 *     __memlens_tb_end   limit: a reservation may end at most here
 *
 * Both start as NULL in every new thread, so the first reservation of a
 * thread takes the slow path, which sets the thread up.
 *
 * A *segment* is a run of records that generated code appends at once: one
 * header word, then the payload words of each site of the segment in order.
 * The append sequence, for a segment of W words (header included, W <=
 * ML_TB_MAX_SEG), placed after the segment's last access:
 *
 *     p  = __memlens_tb_ptr
 *     if (p + W > __memlens_tb_end)    (unsigned compare; rarely true)
 *         p = __memlens_trace_flush(W)
 *     p[0] = (uint64_t)&descriptor     (the segment descriptor, below)
 *     p[1..W-1] = payload words
 *     __memlens_tb_ptr = p + W         (commit, last)
 *
 * Words count only once committed, so the writer, a thread finishing the
 * process, or a signal handler never sees a half-written segment. No lock,
 * no call on the common path: on x86-64 about 7 instructions per segment
 * plus one store (and usually an lea) per address.
 *
 * __memlens_trace_flush(W): C calling convention of the platform (SysV on
 * x86-64: clobbers rax, rcx, rdx, rsi, rdi, r8-r11, flags and all vector
 * registers; the stack must be 16-byte aligned at the call). It hands the
 * committed part of the buffer to the writer thread (waiting for a free one,
 * or dropping with --drop) and returns a buffer with room for W words;
 * __memlens_tb_ptr points at it (nothing is reserved: the caller fills and
 * commits as above). It never fails: when tracing cannot continue it
 * returns scratch space whose content is discarded. Rewritten assembly must
 * save what it needs (flags, live caller-saved and vector registers, the red
 * zone) around the call.
 */
#define ML_TB_SYM_PTR   "__memlens_tb_ptr"
#define ML_TB_SYM_END   "__memlens_tb_end"
#define ML_TB_SYM_FLUSH "__memlens_trace_flush"
#define ML_TB_MAX_SEG   256 /* words per segment, header included */

/*
 * Segment descriptor: static, in the module's ml_ev_module.segs array, at an
 * 8-byte aligned position (so the header word's low 3 bits are 0):
 *
 *     uint32_t n;           number of sites
 *     uint32_t site[n];     module-local site ids, in record order
 *     (uint32_t 0 padding to a multiple of 8 bytes)
 *
 * The header word is the descriptor's address. The payload of each site,
 * from its kind and size in the site table:
 *     access, size > 0      1 word: the address
 *     access, size == 0     2 words: the address, then the length in bytes
 *     marker kinds          0 words (function and loop entry/exit)
 * A segment holds at most 255 sites and ML_TB_MAX_SEG words.
 *
 * Any other header word is written by the runtime (its low 3 bits are not 0):
 *     tag 1 (runtime event):  bits 3-7 payload words (0-31), bits 8-15
 *                             enum ml_ev_kind, bits 16-63 an argument;
 *                             payload[0] is the time (ticks).
 *     tag 2 (explicit access): bits 3-7 payload words, bits 8-63 the global
 *                             site id; payload: address, then the length
 *                             (variable-size sites), then the weight when the
 *                             payload has one more word.
 * A zero header word is never written.
 */
#define ML_TB_TAG_MASK   7u
#define ML_TB_TAG_EVENT  1u
#define ML_TB_TAG_ACCESS 2u

static inline uint64_t ml_tb_event_word(unsigned kind, unsigned nwords, uint64_t arg)
{
    return (arg << 16) | ((uint64_t)kind << 8) | ((uint64_t)nwords << 3) | ML_TB_TAG_EVENT;
}

static inline uint64_t ml_tb_access_word(uint32_t gsite, unsigned nwords)
{
    return ((uint64_t)gsite << 8) | ((uint64_t)nwords << 3) | ML_TB_TAG_ACCESS;
}

/* Payload words of one site in a segment (see above). */
static inline unsigned ml_tb_site_words(const struct ml_ev_site *s)
{
    if (!ml_ev_is_access(s->kind))
        return 0;
    return s->size ? 1 : 2;
}

/*
 * Runtime entry points that generated code calls (declared here so that
 * every producer spells them alike). m is the caller's module descriptor;
 * site a module-local site id.
 *
 * __memlens_trace_register(m): from a constructor, before any record of m.
 * __memlens_trace_marker(m, site): a marker site reached through a call
 *     (region begin/end, MEMLENS_MARK, MEMLENS_TRACE_ON/OFF); the runtime
 *     stamps it with the exact time. Returns 1 when accesses are to be
 *     recorded from here on, 0 when not (code then continues in its
 *     uninstrumented copy).
 * __memlens_trace_gate: process-wide, 0 when accesses are recorded. Generated
 *     code reads it at function entry (and after calls that may change it) to
 *     choose between its traced and plain copies.
 */
#define ML_TB_SYM_REGISTER "__memlens_trace_register"
#define ML_TB_SYM_MARKER   "__memlens_trace_marker"
#define ML_TB_SYM_GATE     "__memlens_trace_gate"

#endif
