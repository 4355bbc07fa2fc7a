/* Trip counts of counted natural loops: a constant, or a recipe to evaluate in the preheader. */
#ifndef ML_IR_TRIPCOUNT_H
#define ML_IR_TRIPCOUNT_H

#include <llvm-c/Core.h>
#include <stdint.h>

#include "instrument/ir/cfg.h"

enum ml_trip_kind {
    ML_TRIP_UNKNOWN, /* not a recognised counted loop, or the count is not certain */
    ML_TRIP_CONST,   /* count holds the answer */
    ML_TRIP_RECIPE,  /* evaluate rule on start and bound at the end of the preheader */
};

/*
 * The exit test of a counted loop. The k-th test (k = 0, 1, ...) compares
 *     x_k = start + (tests_next ? step : 0) + k * step      (modulo 2^bits)
 * with the loop-invariant bound, and the loop goes on while "x_k pred bound"
 * holds; pred is already oriented that way (inverted when the branch leaves the
 * loop on true). The first failing test, number K, ends the loop, so the header
 * runs K + 1 times per entry into the loop.
 */
struct ml_trip_rule {
    unsigned bits;         /* width of the induction variable, 1..64 */
    LLVMIntPredicate pred; /* continue condition, x_k on the left */
    int64_t step;          /* non-zero, sign-extended from bits */
    int tests_next;        /* 1 if the test reads the incremented value (iv + step) */
};

struct ml_trip {
    enum ml_trip_kind kind;
    uint64_t count;     /* ML_TRIP_CONST: header executions per entry into the loop */
    LLVMValueRef phi;   /* the induction variable (a phi in the header) */
    LLVMValueRef start; /* its value on entry (incoming from the preheader) */
    LLVMValueRef bound; /* the loop-invariant operand of the exit test */
    struct ml_trip_rule rule;
};

/*
 * Header executions per entry into the loop for the given rule and the bits-wide
 * values of start and bound (higher bits ignored). Exact under wrapping
 * arithmetic: eq and ne solve the congruence (so "i != n" that wraps around is
 * counted), the ordered predicates answer only when the tested value reaches
 * the bound without wrapping past the end of its range. Returns 0, or -ERANGE
 * when the loop would not end (or only by wrapping) or the count does not fit
 * 64 bits. This is the formula an ML_TRIP_RECIPE asks the caller to evaluate.
 */
int ml_trip_eval(const struct ml_trip_rule *r, uint64_t start, uint64_t bound, uint64_t *count);

/*
 * Recognises loop li of cfg as a counted loop: a preheader, one latch, one
 * exiting block (the header or the latch) ending in a conditional br on
 * icmp(iv or iv.next, bound), where iv is a header phi of an integer of at most
 * 64 bits taking start from the preheader and iv.next = iv + constant (add or
 * sub, either operand order) from the latch, and bound is a constant, an
 * argument or defined outside the loop (so start and bound are both available
 * at the end of the preheader). Anything else, including loops left by break
 * or return, gives ML_TRIP_UNKNOWN. With constant start and bound the answer
 * is ML_TRIP_CONST, or UNKNOWN if ml_trip_eval fails. Returns 0 (the kind says
 * the result) or -EINVAL for a bad loop index.
 */
int ml_loop_tripcount(const struct ml_cfg *cfg, unsigned li, struct ml_trip *t);
/*
 * The same for a loop without a preheader, entered only from block entry (the
 * header's one predecessor outside the loop, which may have other successors):
 * the answer is what the count would be with a preheader split on that edge.
 */
int ml_loop_tripcount_from(const struct ml_cfg *cfg, unsigned li, unsigned entry,
                           struct ml_trip *t);

/*
 * Whether ml_trip_build gives the exact count for every execution of a loop
 * with this rule that ends through its exit test. bound points to the bound's
 * value when it is a constant, else NULL. eq and ne always qualify (a ne loop
 * whose bound is never met does not end). Ordered predicates qualify when the
 * step moves towards the bound and cannot jump past the end of the range
 * (step +-1, or a constant bound at least |step| from that end): a loop that
 * then fails ml_trip_eval never ends. Steps away from the bound, and steps
 * over 1 against a variable bound, do not qualify (they may end by wrapping).
 */
int ml_trip_foldable(const struct ml_trip_rule *r, const uint64_t *bound);

/*
 * Emits at the builder's position the i64 header executions per entry of a
 * counted loop t (kind ML_TRIP_RECIPE or ML_TRIP_CONST, t->start and t->bound
 * available there): ml_trip_eval's formula as branch-free IR (compare, sub,
 * udiv by the constant |step|, select). For a rule that is ml_trip_foldable
 * the value equals the loop's count whenever the loop ends through its exit
 * test (modulo 2^64). Inputs that are not constants are frozen, so the value
 * is never poison; with constant inputs the builder folds it to a constant.
 */
LLVMValueRef ml_trip_build(LLVMBuilderRef b, const struct ml_trip *t, LLVMTypeRef i64);

#endif
