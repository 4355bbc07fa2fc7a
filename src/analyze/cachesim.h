/* Cache hierarchy simulator: private levels per thread and a shared last level, LRU, write-back. */
#ifndef ML_ANALYZE_CACHESIM_H
#define ML_ANALYZE_CACHESIM_H

#include <stdint.h>

#include "analyze/analyze.h"

/*
 * Model (docs/analyze.md, membus): every level is set-associative with LRU
 * replacement, write-allocate and write-back; l1 and l2 are private to each
 * thread, llc is shared by the threads of a trace. A demand access looks up
 * l1, then l2, then llc, then memory, and installs the line at every level
 * that missed (non-inclusive: no back-invalidation). A store dirties the l1
 * copy. A dirty victim is written back to the next level that holds the
 * line (marked dirty there, recency unchanged) or, past the last level, to
 * memory; write-backs allocate nothing. Coherence is not modelled: each
 * thread's private copies live on until evicted.
 */

/* Counters one access adds to (the layout of a membus row). */
enum {
    ML_CS_ACCESSES, /* weighted accesses */
    ML_CS_LOADS,    /* weighted */
    ML_CS_STORES,   /* weighted (an RMW is both) */
    ML_CS_L1_MISS,  /* lines */
    ML_CS_L1_WB,    /* dirty lines written back to the next level */
    ML_CS_L2_ACC,   /* demand lookups */
    ML_CS_L2_MISS,
    ML_CS_L2_WB,
    ML_CS_LLC_ACC,
    ML_CS_LLC_MISS,
    ML_CS_LLC_WB,
    ML_CS_MEM_RD, /* lines read from memory */
    ML_CS_MEM_WR, /* lines written to memory */
    ML_CS_N
};

struct ml_cache {
    uint64_t *tags; /* [sets * ways], each set MRU first: line << 1 | dirty, or ML_CS_EMPTY */
    uint64_t sets, mask;
    uint32_t ways;
    int pow2;
};

#define ML_CS_EMPTY UINT64_MAX

struct ml_csim_thr {
    struct ml_cache priv[2]; /* l1, l2 (ways 0: absent) */
    uint64_t last;           /* line of the thread's last access: MRU in its l1 */
    uint64_t *last_tag;      /* its tag, NULL: none */
};

/* A request queued for the levels below l1: a demand fill or a dirty line written back. */
struct ml_cs_req {
    uint64_t line; /* line << 1 | 1 for a write-back */
    uint64_t *c;   /* the counters of the access that caused it */
    struct ml_csim_thr *t;
};

/* Requests held before the lower levels run them (ml_csim_line flushes at this many). */
#define ML_CS_QUEUE 256

/* What memory saw, in order, when the caller asks for it (membus --filter). */
struct ml_cs_mem {
    uint64_t line;
    int write;
};

struct ml_csim {
    struct ml_an_level geom[3];
    uint32_t line_shift;
    struct ml_cache llc;
    struct ml_csim_thr **thr;
    uint32_t nthr;
    struct ml_cs_mem *mem; /* NULL: not recorded */
    uint32_t nmem, capmem;
    /* Requests for l2/llc, run in order by ml_csim_flush, so that each level works through a
     * list of lines known ahead and prefetches their sets (its tags are out of the host's
     * caches). [0]: from l1, [1]: from l2. */
    struct ml_cs_req *q[2];
    uint32_t nq;
    int batch; /* 0: ml_csim_line flushes before returning */
};

/* Parses "48k:12", "1m:16", "32m:16" (k, m, g suffixes) or "none"; 0 or -EINVAL. */
int ml_an_parse_level(const char *s, struct ml_an_level *l);

int ml_csim_init(struct ml_csim *s, const struct ml_an_opts *o, int record_mem);
void ml_csim_free(struct ml_csim *s);
/* Starts from empty caches (a new process). */
void ml_csim_reset(struct ml_csim *s);
/* Describes the hierarchy ("l1 32 KiB 8-way, ..."). */
const char *ml_csim_describe(const struct ml_csim *s, char *buf, size_t n);

/*
 * Slow path: a line not the thread's last one. c: counters to add to. 0 or -ENOMEM. With
 * s->batch set, what l2 and llc do with the line may wait until ml_csim_flush: their
 * counters (and s->mem) are complete only after it. The l1 counters are always current.
 */
int ml_csim_line(struct ml_csim *s, uint32_t thread, uint64_t line, int write, uint64_t *c);
/* Runs the queued requests through l2 and llc. 0 or -ENOMEM. */
int ml_csim_flush(struct ml_csim *s);

/*
 * One access of `weight` accesses to [addr, addr + size) by thread (index
 * within the trace). Kind: ML_EV_LOAD, STORE or RMW. The first access of a
 * record touches every line of its range; the others (weight - 1) hit.
 */
static inline int ml_csim_access(struct ml_csim *s, uint32_t thread, unsigned kind, uint64_t addr,
                                 uint32_t size, uint32_t weight, uint64_t *c)
{
    uint64_t first = addr >> s->line_shift, last = (addr + (size ? size - 1 : 0)) >> s->line_shift;
    int write = kind != ML_EV_LOAD;
    struct ml_csim_thr *t;

    c[ML_CS_ACCESSES] += weight;
    c[ML_CS_LOADS] += kind != ML_EV_STORE ? weight : 0;
    c[ML_CS_STORES] += write ? weight : 0;
    if (first == last && thread < s->nthr && (t = s->thr[thread]) && t->last_tag) {
        /* The thread's last line, or a line at the front of its l1 set: a hit, no reordering. */
        uint64_t *set;
        if (t->last == first) {
            *t->last_tag |= (uint64_t)write;
            return 0;
        }
        set =
            t->priv[0].tags +
            (t->priv[0].pow2 ? first & t->priv[0].mask : first % t->priv[0].sets) * t->priv[0].ways;
        if ((set[0] >> 1) == first) {
            set[0] |= (uint64_t)write;
            t->last = first;
            t->last_tag = set;
            return 0;
        }
    }
    for (uint64_t l = first; l <= last; l++) {
        int rc = ml_csim_line(s, thread, l, write, c);
        if (rc)
            return rc;
        if (l == UINT64_MAX)
            break;
    }
    return 0;
}

#endif
