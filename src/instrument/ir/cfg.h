/* Control-flow analyses on LLVM-C 14: CFG, dominators, post-dominators, natural loops, count
 * classes. */
#ifndef ML_IR_CFG_H
#define ML_IR_CFG_H

#include <llvm-c/Core.h>

#include "instrument/ir/ptrmap.h"

/*
 * A natural loop: all back edges (b -> h with h dominating b) into one header h
 * merged. Loops nest by containment: a loop's blocks include those of every loop
 * nested in it. Cycles that are not natural loops (irreducible cycles, entered
 * at more than one block) are not reported as loops; their blocks are flagged
 * in ml_cfg.irreducible instead.
 */
struct ml_loop {
    unsigned header;  /* block index */
    int parent;       /* enclosing loop index (always < this loop's index) or -1 */
    unsigned depth;   /* 1 = outermost */
    unsigned *blocks; /* ascending block indices, header included */
    unsigned nblocks;
    int preheader;     /* the unique out-of-loop predecessor of header, if it has a single
                          successor (the header); else -1 */
    unsigned *latches; /* blocks in the loop with an edge to header, ascending */
    unsigned nlatches;
    unsigned *exits; /* blocks outside the loop with a predecessor inside, ascending */
    unsigned nexits;
};

/*
 * The CFG of one function and its analyses. Block indices run 0..n-1: 0 is the
 * entry, the rest follow function order. Only blocks reachable from the entry
 * take part in the analyses: edges out of unreachable blocks appear in succ/pred
 * but are ignored by dominators, post-dominators, loops and count classes.
 *
 * Post-dominators are computed on the reverse CFG with a virtual exit (index n)
 * whose predecessors are the reachable blocks without successors (ret, resume,
 * unreachable, cleanupret/catchswitch unwinding to the caller). So that blocks
 * that can never reach such a block (infinite loops) still get post-dominators,
 * the sources of the retreating edges of each such region (the latches of an
 * exitless loop) are treated as extra predecessors of the virtual exit: an
 * "exit" then means the end of an iteration of the infinite loop. Blocks from
 * which every path reaches a real exit keep their exact post-dominators; for
 * the others the extra edges can only remove post-dominance, never add it.
 */
struct ml_cfg {
    LLVMValueRef fn;
    unsigned n;                /* number of blocks */
    LLVMBasicBlockRef *blocks; /* [n] */
    unsigned *succ_off, *succ; /* successors of b: succ[succ_off[b] .. succ_off[b+1]-1], no
                                  duplicates, in terminator operand order */
    unsigned *pred_off, *pred; /* predecessors, same layout, ascending, no duplicates */
    unsigned *rpo;             /* [nrpo] reverse post-order of the reachable blocks, rpo[0] = 0 */
    unsigned nrpo;
    int *rpo_num;          /* [n] position of each block in rpo, -1 if unreachable */
    int *idom;             /* [n] immediate dominator; -1 for the entry and unreachable blocks */
    int *ipdom;            /* [n] immediate post-dominator; n = the virtual exit; -1 for
                              unreachable blocks */
    struct ml_loop *loops; /* outer loops before inner ones (header RPO order) */
    unsigned nloops;
    int *loop_of;               /* [n] innermost loop of each block or -1 */
    unsigned char *irreducible; /* [n] 1 if the block lies on a cycle without a back edge, i.e.
                                   an irreducible cycle (entered at more than one block) */
    struct ml_ptrmap index;     /* LLVMBasicBlockRef -> index + 1 */
    /* Pre/post numbers of the dominator and post-dominator trees for O(1) queries. */
    unsigned *dom_pre, *dom_post;   /* [n] */
    unsigned *pdom_pre, *pdom_post; /* [n + 1] */
};

/*
 * Builds the CFG and every analysis for fn, which must have a body. On error
 * cfg is left empty (ml_cfg_free is still safe). Returns 0 or -ENOMEM (-EINVAL
 * for a declaration).
 */
int ml_cfg_build(LLVMValueRef fn, struct ml_cfg *cfg);
/* Releases everything ml_cfg_build allocated; safe on a zeroed or freed cfg. */
void ml_cfg_free(struct ml_cfg *cfg);
/* Index of bb, or -1 if it is not a block of cfg->fn. */
int ml_cfg_index(const struct ml_cfg *cfg, LLVMBasicBlockRef bb);
/*
 * 1 if a dominates b (reflexive), else 0. Always 0 when a or b is unreachable.
 */
int ml_cfg_dominates(const struct ml_cfg *cfg, unsigned a, unsigned b);
/*
 * 1 if a post-dominates b (reflexive), else 0; a or b may be n, the virtual
 * exit, which post-dominates every reachable block. 0 for unreachable blocks.
 */
int ml_cfg_postdominates(const struct ml_cfg *cfg, unsigned a, unsigned b);

/*
 * Partitions the reachable blocks into classes whose execution counts are equal
 * on every execution that leaves the function through a terminator (a call
 * that unwinds without invoke, or longjmp, can stop a block half-way, as for
 * any CFG-based profile). Block b joins the class of a when
 *   - a dominates b and b post-dominates a,
 *   - a and b have the same innermost loop L (or none) and neither is irreducible,
 *   - when L exists, b post-dominates a within one iteration of L: every path
 *     from a that leaves L or takes a back edge of L passes b.
 * The last rule is needed because "same innermost loop" alone is not enough:
 * with latches a -> h and b -> h and the exit only after b, a runs more often
 * than b. Under these rules every cycle through a passes b and vice versa, so
 * their executions alternate. Blocks on irreducible cycles are singletons.
 *
 * class_of[n] receives the class of each block (-1 for unreachable ones);
 * leader_of_class[] (capacity n) the leader of each class, its dominating-most
 * block. Classes are numbered in RPO order of their leaders, so class 0 is the
 * entry's. Returns the number of classes or -ENOMEM.
 */
int ml_cfg_equiv_classes(const struct ml_cfg *cfg, int *class_of, unsigned *leader_of_class);

#endif
