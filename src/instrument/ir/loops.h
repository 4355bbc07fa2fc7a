/* Loop folding: count counted loops once per entry instead of once per iteration. */
#ifndef ML_IR_LOOPS_H
#define ML_IR_LOOPS_H

#include <llvm-c/Core.h>
#include <stdint.h>

#include "instrument/ir/cfg.h"
#include "instrument/ir/tripcount.h"

/*
 * A plan over the equal-count classes of one function (docs/loops.md).
 *
 * A loop L is *folded* when ml_loop_tripcount recognises it with a constant
 * count or a foldable recipe, L and its preheader hold no region marker and
 * have one region set, and every call in L is an intrinsic or will return
 * (willreturn). Then the class of L's header runs count(L) times per execution
 * of L's preheader, and, for a loop tested in its header, the class of the
 * header's in-loop successor (when that is its only predecessor) count(L) - 1
 * times: the class is *linked* to L. A block whose only predecessor g ends in
 * a conditional br on a value invariant in g's loop, with g's class linked,
 * runs [cond] times per execution of g: its class is linked to the guard g.
 *
 * Per class c:
 *   - host[c] != c: c's facts, times factor[c], belong to host[c]'s counter
 *     (c is linked to constant-count loops up to host[c]; factor <= 2^32);
 *   - host[c] == c and anchor[c] >= 0: c has its own counter, incremented not
 *     in c but at the end of block anchor[c] (a preheader) by the value that
 *     ml_loopfold_count builds there: the product of the factors (loop counts,
 *     guard conditions) of the links from c out to anchor[c]'s loop, all of
 *     whose inputs are available there;
 *   - otherwise c counts itself, one increment per execution.
 * adds[b] is the number of hoisted adds placed at the end of block b.
 */
struct ml_loopfold {
    unsigned nclasses, nloops;
    const int *class_of;   /* borrowed from the caller, [cfg->n] */
    int *host;             /* [nclasses] */
    uint64_t *factor;      /* [nclasses] */
    int *anchor;           /* [nclasses] block index or -1 */
    unsigned *chain;       /* [nclasses] number of links from c to its anchor's loop */
    int *link;             /* [nclasses] loop the class is linked to, or -1 */
    int *guard;            /* [nclasses] guard block the class is linked to, or -1 */
    LLVMValueRef *cond;    /* [nclasses] the guard's condition */
    unsigned char *minus;  /* [nclasses] loop: 1 if linked as count - 1; guard: 1 if taken when
                              the condition is false */
    unsigned *adds;        /* [cfg->n] */
    struct ml_trip *trips; /* [nloops]; kind UNKNOWN when the loop is not folded */
    unsigned nfolded;      /* number of folded loops */
};

/*
 * Plans folding for cfg with equal-count classes class_of[] (from
 * ml_cfg_equiv_classes, nclasses of them). set_of[b] identifies the region set
 * at the end of block b; marked[b] is 1 when b holds a region marker. A folded
 * loop has no marked block, and its blocks' sets equal its preheader's.
 * keyed[c] is 1 when all blocks of class c share one counter (the caller keys
 * them by class): only such classes host merged facts or get hoisted counts.
 * Returns 0 or -ENOMEM; lf is then to be released with ml_loopfold_free.
 */
int ml_loopfold_plan(const struct ml_cfg *cfg, const int *class_of, unsigned nclasses,
                     const uint32_t *set_of, const unsigned char *marked,
                     const unsigned char *keyed, struct ml_loopfold *lf);
/*
 * Emits at the builder's position (the end of anchor[c], before its
 * terminator) the i64 number of executions of class c per execution of its
 * anchor. Only for classes with host[c] == c and anchor[c] >= 0.
 */
LLVMValueRef ml_loopfold_count(const struct ml_loopfold *lf, const struct ml_cfg *cfg, unsigned c,
                               LLVMBuilderRef b, LLVMTypeRef i64);
void ml_loopfold_free(struct ml_loopfold *lf);
/*
 * Whether loop li lacks a preheader but would fold (ignoring region markers)
 * with one split on the edge from its only outside predecessor, which ends in
 * a br: then 1, and *entry is that predecessor. LLVM's optimiser does not keep
 * preheaders, e.g. for the main loop of an unrolled loop.
 */
int ml_loopfold_wants_preheader(const struct ml_cfg *cfg, unsigned li, int *entry);

#endif
