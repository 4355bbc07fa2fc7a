/* Value profile of one load: constant, a small set, strided per thread, or varied. */
#ifndef ML_BACKEND_VPROF_H
#define ML_BACKEND_VPROF_H

#include <stdint.h>

/*
 * The values one instruction loaded, summarised as they arrive: how many,
 * the distinct values with their counts while there are at most
 * ML_VPROF_SET_MAX of them, and per program thread whether the thread's
 * sequence is an arithmetic progression so far (a stride across threads
 * that interleave means nothing). docs/profile-modules.md, "value", states
 * the classification; ml_vprof_class implements it.
 */
#define ML_VPROF_SET_MAX 8u

enum ml_vkind {
    ML_VK_NONE = 0, /* no value arrived (vector or wide loads, memory intrinsics) */
    ML_VK_CONSTANT, /* one distinct value */
    ML_VK_STRIDED,  /* every thread's sequence steps by one non-zero stride, the same */
    ML_VK_SET,      /* 2..ML_VPROF_SET_MAX distinct values, not strided */
    ML_VK_VARIED,   /* anything else */
};

/* One thread's sequence. */
struct ml_vseq {
    uint32_t thread;
    uint8_t state; /* ML_VSEQ_* */
    uint64_t first, last;
    uint64_t stride; /* the difference (integers: modulo 2^(8 size); floats: a double's bits) */
};

#define ML_VSEQ_ONE     1 /* one value so far */
#define ML_VSEQ_STRIDED 2 /* at least two, every step the same non-zero stride */
#define ML_VSEQ_BROKEN  3 /* not a progression */

struct ml_vprof {
    uint64_t n;        /* values */
    uint64_t novalue;  /* loads that carried no value */
    uint32_t type;     /* enum ml_q_val of the values (the first seen) */
    uint32_t size;     /* bytes of the load */
    uint32_t nvals;    /* distinct values held */
    uint32_t overflow; /* more than ML_VPROF_SET_MAX distinct values came */
    uint64_t val[ML_VPROF_SET_MAX], cnt[ML_VPROF_SET_MAX];
    struct ml_vseq *seq;        /* per thread, in order of first value */
    uint32_t nseq, capseq, hot; /* hot: index of the last thread seen */
    int nomem;
};

void ml_vprof_add_slow(struct ml_vprof *p, uint32_t thread, uint64_t v, unsigned type,
                       unsigned size);

/* One value v of type (enum ml_q_val) loaded size bytes wide by thread. */
static inline void ml_vprof_add(struct ml_vprof *p, uint32_t thread, uint64_t v, unsigned type,
                                unsigned size)
{
    /* settled (too many values, and this thread's are no progression): only counted */
    if (p->overflow && p->hot < p->nseq && p->seq[p->hot].thread == thread &&
        p->seq[p->hot].state == ML_VSEQ_BROKEN) {
        p->n++;
        return;
    }
    ml_vprof_add_slow(p, thread, v, type, size);
}
/*
 * Folds from into into: value counts add; sequences of one thread are
 * treated as one progression only when both are one with the same stride
 * (folding copies of one instruction made by inlining). from is unchanged.
 */
void ml_vprof_merge(struct ml_vprof *into, const struct ml_vprof *from);
void ml_vprof_fini(struct ml_vprof *p);

/*
 * The class of p. *value gets the constant, the most frequent value of a set
 * (ties: the smallest), or the first value of the lowest-numbered thread of a
 * strided load; *stride the stride (strided only).
 */
enum ml_vkind ml_vprof_class(const struct ml_vprof *p, uint64_t *value, uint64_t *stride);
const char *ml_vkind_name(enum ml_vkind k);
/* A value (or a stride, as_stride) of p's type as text: signed decimal, %.17g, 0x... */
const char *ml_vprof_fmt(const struct ml_vprof *p, uint64_t v, int as_stride, char *buf,
                         unsigned len);

#endif
