/* Trip-count recogniser for counted natural loops and the exact trip-count formula. */
#include "instrument/ir/tripcount.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef __int128 i128;

static uint64_t mask_of(unsigned bits)
{
    return bits >= 64 ? ~0ULL : (1ULL << bits) - 1;
}

static i128 as_signed(uint64_t v, unsigned bits)
{
    uint64_t m = mask_of(bits);
    v &= m;
    if (bits < 64 && (v >> (bits - 1)) & 1)
        return (i128)v - ((i128)1 << bits);
    return bits == 64 ? (i128)(int64_t)v : (i128)v;
}

/* Inverse of an odd number modulo 2^64 (Newton: each step doubles the correct bits). */
static uint64_t inverse_odd(uint64_t a)
{
    uint64_t x = a;
    for (int i = 0; i < 6; i++)
        x *= 2 - a * x;
    return x;
}

/* First k >= 0 with x0 + k * step == b (mod 2^bits); -ERANGE if there is none. */
static int solve_ne(uint64_t x0, uint64_t b, uint64_t step, unsigned bits, uint64_t *k)
{
    uint64_t m = mask_of(bits), d = (b - x0) & m;
    unsigned tz = (unsigned)__builtin_ctzll(step);

    if (tz >= bits || (d & ((1ULL << tz) - 1)))
        return -ERANGE;
    *k = ((d >> tz) * inverse_odd(step >> tz)) & mask_of(bits - tz);
    return 0;
}

int ml_trip_eval(const struct ml_trip_rule *r, uint64_t start, uint64_t bound, uint64_t *count)
{
    uint64_t m = mask_of(r->bits), ustep = (uint64_t)r->step & m, k;
    uint64_t x0 = (start + (r->tests_next ? ustep : 0)) & m;
    int sgn = 0, up, strict;
    i128 x, b, s = r->step, lo, hi, lim, kk;

    if (r->bits < 1 || r->bits > 64 || !ustep)
        return -ERANGE;
    bound &= m;
    switch (r->pred) {
    case LLVMIntEQ:
        *count = x0 == bound ? 2 : 1;
        return 0;
    case LLVMIntNE:
        if (solve_ne(x0, bound, ustep, r->bits, &k) || k == ~0ULL)
            return -ERANGE;
        *count = k + 1;
        return 0;
    case LLVMIntSLT:
    case LLVMIntSLE:
    case LLVMIntSGT:
    case LLVMIntSGE:
        sgn = 1;
        break;
    case LLVMIntULT:
    case LLVMIntULE:
    case LLVMIntUGT:
    case LLVMIntUGE:
        break;
    default:
        return -ERANGE;
    }
    up = r->pred == LLVMIntSLT || r->pred == LLVMIntSLE || r->pred == LLVMIntULT ||
         r->pred == LLVMIntULE;
    strict = r->pred == LLVMIntSLT || r->pred == LLVMIntSGT || r->pred == LLVMIntULT ||
             r->pred == LLVMIntUGT;
    x = sgn ? as_signed(x0, r->bits) : (i128)x0;
    b = sgn ? as_signed(bound, r->bits) : (i128)bound;
    lo = sgn ? -((i128)1 << (r->bits - 1)) : 0;
    hi = sgn ? ((i128)1 << (r->bits - 1)) - 1 : (i128)m;
    /* Continue while lim <= x (down) or x <= lim (up). */
    lim = up ? (strict ? b - 1 : b) : (strict ? b + 1 : b);
    if (up ? x > lim : x < lim) {
        *count = 1;
        return 0;
    }
    /* The test holds now; moving away from the bound only ends by wrapping. */
    if (up ? s <= 0 : s >= 0)
        return -ERANGE;
    kk = (up ? lim - x : x - lim) / (up ? s : -s) + 1;
    if (x + kk * s > hi || x + kk * s < lo || kk + 1 > (i128)~0ULL)
        return -ERANGE;
    *count = (uint64_t)kk + 1;
    return 0;
}

static int cmp_unsigned(const void *a, const void *b)
{
    unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
    return (x > y) - (x < y);
}

static int in_loop(const struct ml_loop *l, unsigned b)
{
    return bsearch(&b, l->blocks, l->nblocks, sizeof(unsigned), cmp_unsigned) != NULL;
}

static int block_in_loop(const struct ml_cfg *cfg, const struct ml_loop *l, LLVMBasicBlockRef bb)
{
    int b = ml_cfg_index(cfg, bb);

    return b >= 0 && in_loop(l, (unsigned)b);
}

static LLVMIntPredicate swap_pred(LLVMIntPredicate p)
{
    switch (p) {
    case LLVMIntSLT:
        return LLVMIntSGT;
    case LLVMIntSGT:
        return LLVMIntSLT;
    case LLVMIntSLE:
        return LLVMIntSGE;
    case LLVMIntSGE:
        return LLVMIntSLE;
    case LLVMIntULT:
        return LLVMIntUGT;
    case LLVMIntUGT:
        return LLVMIntULT;
    case LLVMIntULE:
        return LLVMIntUGE;
    case LLVMIntUGE:
        return LLVMIntULE;
    default:
        return p;
    }
}

static LLVMIntPredicate invert_pred(LLVMIntPredicate p)
{
    switch (p) {
    case LLVMIntEQ:
        return LLVMIntNE;
    case LLVMIntNE:
        return LLVMIntEQ;
    case LLVMIntSLT:
        return LLVMIntSGE;
    case LLVMIntSGE:
        return LLVMIntSLT;
    case LLVMIntSGT:
        return LLVMIntSLE;
    case LLVMIntSLE:
        return LLVMIntSGT;
    case LLVMIntULT:
        return LLVMIntUGE;
    case LLVMIntUGE:
        return LLVMIntULT;
    case LLVMIntUGT:
        return LLVMIntULE;
    default:
        return LLVMIntUGT; /* ULE */
    }
}

/* Loop-invariant: a constant, an argument, or an instruction outside the loop. */
static int invariant(const struct ml_cfg *cfg, const struct ml_loop *l, LLVMValueRef v)
{
    if (LLVMIsAConstantInt(v) || LLVMIsAArgument(v))
        return 1;
    if (LLVMIsAInstruction(v))
        return !block_in_loop(cfg, l, LLVMGetInstructionParent(v));
    return 0;
}

/* For next = phi + C or C + phi or phi - C, the step C (or -C); 0 if next is not that. */
static int64_t step_of(LLVMValueRef next, LLVMValueRef phi)
{
    LLVMValueRef a, b;
    LLVMOpcode op;

    if (!LLVMIsABinaryOperator(next))
        return 0;
    op = LLVMGetInstructionOpcode(next);
    a = LLVMGetOperand(next, 0);
    b = LLVMGetOperand(next, 1);
    if (op == LLVMAdd && a == phi && LLVMIsAConstantInt(b))
        return LLVMConstIntGetSExtValue(b);
    if (op == LLVMAdd && b == phi && LLVMIsAConstantInt(a))
        return LLVMConstIntGetSExtValue(a);
    if (op == LLVMSub && a == phi && LLVMIsAConstantInt(b) &&
        LLVMConstIntGetSExtValue(b) != INT64_MIN)
        return -LLVMConstIntGetSExtValue(b);
    return 0;
}

/*
 * Matches x as the induction variable: a phi of the header (tests_next 0) or
 * its increment coming back from the latch (tests_next 1).
 */
static int match_iv(const struct ml_cfg *cfg, const struct ml_loop *l, unsigned entry,
                    unsigned latch, LLVMValueRef x, struct ml_trip *t)
{
    LLVMValueRef phi = NULL, start = NULL, next = NULL;
    LLVMBasicBlockRef hb = cfg->blocks[l->header];
    int64_t step;

    if (LLVMIsAPHINode(x) && LLVMGetInstructionParent(x) == hb) {
        phi = x;
    } else if (LLVMIsABinaryOperator(x)) {
        for (unsigned i = 0; i < 2 && !phi; i++) {
            LLVMValueRef o = LLVMGetOperand(x, i);
            if (LLVMIsAPHINode(o) && LLVMGetInstructionParent(o) == hb)
                phi = o;
        }
    }
    if (!phi || LLVMGetTypeKind(LLVMTypeOf(phi)) != LLVMIntegerTypeKind ||
        LLVMGetIntTypeWidth(LLVMTypeOf(phi)) > 64 || LLVMCountIncoming(phi) != 2)
        return 0;
    for (unsigned i = 0; i < 2; i++) {
        LLVMBasicBlockRef from = LLVMGetIncomingBlock(phi, i);
        if (from == cfg->blocks[entry])
            start = LLVMGetIncomingValue(phi, i);
        else if (from == cfg->blocks[latch])
            next = LLVMGetIncomingValue(phi, i);
    }
    if (!start || !next || (x != phi && x != next))
        return 0;
    /* Keep the documented form: sign-extended from the IV's width (sub i8 -128 is -128). */
    step = (int64_t)as_signed((uint64_t)step_of(next, phi), LLVMGetIntTypeWidth(LLVMTypeOf(phi)));
    if (!step)
        return 0;
    t->phi = phi;
    t->start = start;
    t->rule.bits = LLVMGetIntTypeWidth(LLVMTypeOf(phi));
    t->rule.step = step;
    t->rule.tests_next = x == next;
    return 1;
}

int ml_loop_tripcount(const struct ml_cfg *cfg, unsigned li, struct ml_trip *t)
{
    memset(t, 0, sizeof(*t));
    if (li >= cfg->nloops)
        return -EINVAL;
    if (cfg->loops[li].preheader < 0)
        return 0;
    return ml_loop_tripcount_from(cfg, li, (unsigned)cfg->loops[li].preheader, t);
}

int ml_loop_tripcount_from(const struct ml_cfg *cfg, unsigned li, unsigned entry, struct ml_trip *t)
{
    const struct ml_loop *l;
    LLVMValueRef term, cond, ops[2];
    LLVMIntPredicate pred;
    int exiting = -1, cont0;

    memset(t, 0, sizeof(*t));
    if (li >= cfg->nloops || entry >= cfg->n)
        return -EINVAL;
    l = &cfg->loops[li];
    if (l->nlatches != 1)
        return 0;
    for (unsigned i = 0; i < l->nblocks; i++) {
        unsigned b = l->blocks[i];
        for (unsigned k = cfg->succ_off[b]; k < cfg->succ_off[b + 1]; k++) {
            if (in_loop(l, cfg->succ[k]))
                continue;
            if (exiting >= 0 && exiting != (int)b)
                return 0;
            exiting = (int)b;
        }
    }
    if (exiting < 0 || (exiting != (int)l->header && exiting != (int)l->latches[0]))
        return 0;
    term = LLVMGetBasicBlockTerminator(cfg->blocks[exiting]);
    if (!term || LLVMGetInstructionOpcode(term) != LLVMBr || !LLVMIsConditional(term))
        return 0;
    cond = LLVMGetCondition(term);
    if (!LLVMIsAICmpInst(cond))
        return 0;
    pred = LLVMGetICmpPredicate(cond);
    cont0 = block_in_loop(cfg, l, LLVMGetSuccessor(term, 0));
    if (!cont0)
        pred = invert_pred(pred);
    ops[0] = LLVMGetOperand(cond, 0);
    ops[1] = LLVMGetOperand(cond, 1);
    if (match_iv(cfg, l, entry, l->latches[0], ops[0], t) && invariant(cfg, l, ops[1])) {
        t->bound = ops[1];
    } else if (match_iv(cfg, l, entry, l->latches[0], ops[1], t) && invariant(cfg, l, ops[0])) {
        t->bound = ops[0];
        pred = swap_pred(pred);
    } else {
        memset(t, 0, sizeof(*t));
        return 0;
    }
    t->rule.pred = pred;
    t->kind = ML_TRIP_RECIPE;
    if (LLVMIsAConstantInt(t->start) && LLVMIsAConstantInt(t->bound)) {
        uint64_t s = LLVMConstIntGetZExtValue(t->start), b = LLVMConstIntGetZExtValue(t->bound);
        t->kind = ml_trip_eval(&t->rule, s, b, &t->count) ? ML_TRIP_UNKNOWN : ML_TRIP_CONST;
    }
    return 0;
}

static int pred_up(LLVMIntPredicate p)
{
    return p == LLVMIntSLT || p == LLVMIntSLE || p == LLVMIntULT || p == LLVMIntULE;
}

static int pred_strict(LLVMIntPredicate p)
{
    return p == LLVMIntSLT || p == LLVMIntSGT || p == LLVMIntULT || p == LLVMIntUGT;
}

static int pred_signed(LLVMIntPredicate p)
{
    return p == LLVMIntSLT || p == LLVMIntSLE || p == LLVMIntSGT || p == LLVMIntSGE;
}

int ml_trip_foldable(const struct ml_trip_rule *r, const uint64_t *bound)
{
    int up = pred_up(r->pred), sgn = pred_signed(r->pred);
    i128 b, lim, lo, hi, s = r->step < 0 ? -(i128)r->step : (i128)r->step;

    if (r->bits < 1 || r->bits > 64 || !r->step)
        return 0;
    if (r->pred == LLVMIntEQ || r->pred == LLVMIntNE)
        return 1;
    if (up ? r->step < 0 : r->step > 0)
        return 0;
    if (s == 1)
        return 1;
    if (!bound)
        return 0;
    b = sgn ? as_signed(*bound, r->bits) : (i128)(*bound & mask_of(r->bits));
    lo = sgn ? -((i128)1 << (r->bits - 1)) : 0;
    hi = sgn ? ((i128)1 << (r->bits - 1)) - 1 : (i128)mask_of(r->bits);
    lim = up ? (pred_strict(r->pred) ? b - 1 : b) : (pred_strict(r->pred) ? b + 1 : b);
    /* The last passing value is within |step| of lim on its side; one more step must not wrap. */
    return up ? lim + s <= hi : lim - s >= lo;
}

static LLVMValueRef frozen(LLVMBuilderRef b, LLVMValueRef v)
{
    return LLVMIsAConstant(v) ? v : LLVMBuildFreeze(b, v, "");
}

LLVMValueRef ml_trip_build(LLVMBuilderRef b, const struct ml_trip *t, LLVMTypeRef i64)
{
    const struct ml_trip_rule *r = &t->rule;
    LLVMTypeRef ty = LLVMTypeOf(t->start);
    LLVMValueRef x0 = frozen(b, t->start), bnd = frozen(b, t->bound), diff, c, k;
    LLVMValueRef one = LLVMConstInt(i64, 1, 0), two = LLVMConstInt(i64, 2, 0);
    uint64_t ustep = (uint64_t)r->step & mask_of(r->bits);
    unsigned tz;

    if (t->kind == ML_TRIP_CONST)
        return LLVMConstInt(i64, t->count, 0);
    if (r->tests_next)
        x0 = LLVMBuildAdd(b, x0, LLVMConstInt(ty, ustep, 0), "");
    switch (r->pred) {
    case LLVMIntEQ:
        c = LLVMBuildICmp(b, LLVMIntEQ, x0, bnd, "");
        return LLVMBuildSelect(b, c, two, one, "");
    case LLVMIntNE:
        /* k = ((bound - x0) >> tz) * inverse(step >> tz) mod 2^(bits - tz); count = k + 1. */
        tz = (unsigned)__builtin_ctzll(ustep);
        diff = LLVMBuildSub(b, bnd, x0, "");
        if (tz)
            diff = LLVMBuildLShr(b, diff, LLVMConstInt(ty, tz, 0), "");
        k = LLVMBuildMul(b, diff, LLVMConstInt(ty, inverse_odd(ustep >> tz), 0), "");
        if (tz)
            k = LLVMBuildAnd(b, k, LLVMConstInt(ty, mask_of(r->bits - tz), 0), "");
        return LLVMBuildAdd(b, LLVMBuildZExtOrBitCast(b, k, i64, ""), one, "");
    default:
        break;
    }
    /* Ordered: when the first test passes, (distance to the last passing value) / |step| + 2. */
    c = LLVMBuildICmp(b, r->pred, x0, bnd, "");
    if (pred_up(r->pred))
        diff = LLVMBuildSub(b, bnd, x0, "");
    else
        diff = LLVMBuildSub(b, x0, bnd, "");
    if (pred_strict(r->pred))
        diff = LLVMBuildSub(b, diff, LLVMConstInt(ty, 1, 0), "");
    k = LLVMBuildZExtOrBitCast(b, diff, i64, "");
    if (r->step != 1 && r->step != -1)
        k = LLVMBuildUDiv(
            b, k, LLVMConstInt(i64, r->step < 0 ? 0 - (uint64_t)r->step : (uint64_t)r->step, 0),
            "");
    return LLVMBuildSelect(b, c, LLVMBuildAdd(b, k, two, ""), one, "");
}
