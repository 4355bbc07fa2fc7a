/* Loop folding plan: links equal-count classes to counted loops, picks hosts and anchors. */
#include "instrument/ir/loops.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "instrument/ir/ir.h"

/* Facts of a class merged into a host are multiplied by at most this (no overflow of facts). */
#define MAX_FACTOR (1ULL << 32)

static int in_loop(const struct ml_cfg *cfg, unsigned li, unsigned b)
{
    for (int l = cfg->loop_of[b]; l >= 0; l = cfg->loops[l].parent)
        if (l == (int)li)
            return 1;
    return 0;
}

static int has_fn_attr(LLVMValueRef call, LLVMValueRef fn, unsigned kind)
{
    return LLVMGetCallSiteEnumAttribute(call, LLVMAttributeFunctionIndex, kind) ||
           (fn && LLVMGetEnumAttributeAtIndex(fn, LLVMAttributeFunctionIndex, kind));
}

/*
 * Every call in the loop returns to it: an intrinsic, or a call marked
 * willreturn. A call that may exit() or longjmp would leave the loop with
 * iterations counted in the preheader that never ran.
 */
static int calls_return(const struct ml_cfg *cfg, const struct ml_loop *l, unsigned kind)
{
    for (unsigned i = 0; i < l->nblocks; i++)
        for (LLVMValueRef in = LLVMGetFirstInstruction(cfg->blocks[l->blocks[i]]); in;
             in = LLVMGetNextInstruction(in)) {
            LLVMValueRef fn;
            if (!LLVMIsACallInst(in) && !LLVMIsAInvokeInst(in))
                continue;
            fn = ml_called_function(in);
            if (fn && LLVMGetIntrinsicID(fn))
                continue;
            if (!has_fn_attr(in, fn, kind))
                return 0;
        }
    return 1;
}

/* No marker in the loop, and one region set from the end of the preheader throughout. */
static int one_set(const struct ml_loop *l, const uint32_t *set_of, const unsigned char *marked)
{
    uint32_t s = set_of[l->preheader];

    for (unsigned i = 0; i < l->nblocks; i++)
        if (marked[l->blocks[i]] || set_of[l->blocks[i]] != s)
            return 0;
    return 1;
}

static void const_bound(const struct ml_trip *t, const uint64_t **p, uint64_t *v)
{
    *p = NULL;
    if (LLVMIsAConstantInt(t->bound)) {
        *v = LLVMConstIntGetZExtValue(t->bound);
        *p = v;
    }
}

/* Whether v can be used at the end of block a: a constant, an argument, or defined in a
 * block that dominates a. */
static int available(const struct ml_cfg *cfg, LLVMValueRef v, unsigned a)
{
    int b;

    if (!v || LLVMIsAConstant(v) || LLVMIsAArgument(v))
        return 1;
    if (!LLVMIsAInstruction(v))
        return 0;
    b = ml_cfg_index(cfg, LLVMGetInstructionParent(v));
    return b >= 0 && ml_cfg_dominates(cfg, (unsigned)b, a);
}

/* The values the factor of class c's link reads, all available at the end of block a. */
static int link_available(const struct ml_cfg *cfg, const struct ml_loopfold *lf, unsigned c,
                          unsigned a)
{
    const struct ml_trip *t;

    if (lf->guard[c] >= 0)
        return available(cfg, lf->cond[c], a);
    t = &lf->trips[lf->link[c]];
    return t->kind == ML_TRIP_CONST || (available(cfg, t->start, a) && available(cfg, t->bound, a));
}

static int has_link(const struct ml_loopfold *lf, unsigned c)
{
    return lf->link[c] >= 0 || lf->guard[c] >= 0;
}

/* The class whose executions c's link multiplies: the preheader's or the guard's. */
static unsigned link_next(const struct ml_cfg *cfg, const struct ml_loopfold *lf, unsigned c)
{
    if (lf->guard[c] >= 0)
        return (unsigned)lf->class_of[lf->guard[c]];
    return (unsigned)lf->class_of[cfg->loops[lf->link[c]].preheader];
}

/*
 * A block x whose only predecessor g ends in a conditional br on a value that
 * does not change in g's loop runs [cond] times per execution of g. Linking
 * x's class to g lets a chain pass an invariant guard, such as the "k > 0"
 * test clang leaves inside an outer loop in front of an inner loop.
 */
static void link_guards(const struct ml_cfg *cfg, const uint32_t *set_of,
                        const unsigned char *marked, struct ml_loopfold *lf)
{
    for (unsigned i = 0; i < cfg->nrpo; i++) {
        unsigned g = cfg->rpo[i];
        LLVMValueRef term = LLVMGetBasicBlockTerminator(cfg->blocks[g]), cond;
        int l = cfg->loop_of[g];
        if (l < 0 || marked[g] || !has_link(lf, (unsigned)lf->class_of[g]) || !term ||
            LLVMGetInstructionOpcode(term) != LLVMBr || !LLVMIsConditional(term) ||
            LLVMGetSuccessor(term, 0) == LLVMGetSuccessor(term, 1))
            continue;
        cond = LLVMGetCondition(term);
        if (!available(cfg, cond, (unsigned)cfg->loops[l].header) ||
            (LLVMIsAInstruction(cond) &&
             in_loop(cfg, (unsigned)l,
                     (unsigned)ml_cfg_index(cfg, LLVMGetInstructionParent(cond)))))
            continue;
        for (unsigned k = 0; k < 2; k++) {
            int x = ml_cfg_index(cfg, LLVMGetSuccessor(term, k));
            if (x < 0 || cfg->pred_off[x + 1] - cfg->pred_off[x] != 1 || lf->class_of[x] < 0 ||
                has_link(lf, (unsigned)lf->class_of[x]) || cfg->loop_of[x] != l || marked[x] ||
                set_of[x] != set_of[g])
                continue;
            lf->guard[lf->class_of[x]] = (int)g;
            lf->cond[lf->class_of[x]] = cond;
            lf->minus[lf->class_of[x]] = (unsigned char)k; /* 1: taken when cond is false */
        }
    }
}

static void link_loop(const struct ml_cfg *cfg, const int *class_of, unsigned li,
                      struct ml_loopfold *lf)
{
    const struct ml_loop *l = &cfg->loops[li];
    unsigned h = l->header, s = h;
    int tested_at_header = 0;

    for (unsigned k = cfg->succ_off[h]; k < cfg->succ_off[h + 1]; k++) {
        if (!in_loop(cfg, li, cfg->succ[k]))
            tested_at_header = 1;
        else
            s = cfg->succ[k];
    }
    lf->link[class_of[h]] = (int)li;
    lf->minus[class_of[h]] = 0;
    /* The body of a loop tested at the top runs once less than its header. */
    if (tested_at_header && h != l->latches[0] && s != h &&
        cfg->pred_off[s + 1] - cfg->pred_off[s] == 1 && class_of[s] >= 0 &&
        cfg->loop_of[s] == (int)li) {
        lf->link[class_of[s]] = (int)li;
        lf->minus[class_of[s]] = 1;
    }
}

static uint64_t link_count(const struct ml_loopfold *lf, unsigned c)
{
    const struct ml_trip *t = &lf->trips[lf->link[c]];
    return t->count - lf->minus[c];
}

int ml_loopfold_plan(const struct ml_cfg *cfg, const int *class_of, unsigned nclasses,
                     const uint32_t *set_of, const unsigned char *marked,
                     const unsigned char *keyed, struct ml_loopfold *lf)
{
    unsigned willreturn = LLVMGetEnumAttributeKindForName("willreturn", 10);

    memset(lf, 0, sizeof(*lf));
    lf->nclasses = nclasses;
    lf->nloops = cfg->nloops;
    lf->class_of = class_of;
    lf->host = calloc(nclasses + 1, sizeof(*lf->host));
    lf->factor = calloc(nclasses + 1, sizeof(*lf->factor));
    lf->anchor = calloc(nclasses + 1, sizeof(*lf->anchor));
    lf->chain = calloc(nclasses + 1, sizeof(*lf->chain));
    lf->link = calloc(nclasses + 1, sizeof(*lf->link));
    lf->minus = calloc(nclasses + 1, 1);
    lf->adds = calloc(cfg->n + 1, sizeof(*lf->adds));
    lf->trips = calloc(cfg->nloops + 1, sizeof(*lf->trips));
    lf->guard = calloc(nclasses + 1, sizeof(*lf->guard));
    lf->cond = calloc(nclasses + 1, sizeof(*lf->cond));
    if (!lf->host || !lf->factor || !lf->anchor || !lf->chain || !lf->link || !lf->minus ||
        !lf->adds || !lf->trips || !lf->guard || !lf->cond) {
        ml_loopfold_free(lf);
        return -ENOMEM;
    }
    for (unsigned c = 0; c < nclasses; c++) {
        lf->host[c] = (int)c;
        lf->factor[c] = 1;
        lf->anchor[c] = -1;
        lf->link[c] = -1;
        lf->guard[c] = -1;
    }
    for (unsigned li = 0; li < cfg->nloops; li++) {
        struct ml_trip *t = &lf->trips[li];
        const uint64_t *bp;
        uint64_t bv;
        if (ml_loop_tripcount(cfg, li, t) || t->kind == ML_TRIP_UNKNOWN)
            goto skip;
        const_bound(t, &bp, &bv);
        if ((t->kind == ML_TRIP_RECIPE && !ml_trip_foldable(&t->rule, bp)) ||
            !one_set(&cfg->loops[li], set_of, marked) ||
            !calls_return(cfg, &cfg->loops[li], willreturn))
            goto skip;
        link_loop(cfg, class_of, li, lf);
        lf->nfolded++;
        continue;
    skip:
        memset(t, 0, sizeof(*t));
    }
    link_guards(cfg, set_of, marked, lf);
    for (unsigned c = 0; c < nclasses; c++) {
        unsigned cur = c;
        uint64_t f = 1;
        /* Constant-count links: merge into the first class that is not one. */
        while (lf->link[cur] >= 0 && lf->trips[lf->link[cur]].kind == ML_TRIP_CONST &&
               keyed[link_next(cfg, lf, cur)] &&
               (f == 0 || link_count(lf, cur) <= MAX_FACTOR / f)) {
            f *= link_count(lf, cur);
            cur = (unsigned)class_of[cfg->loops[lf->link[cur]].preheader];
        }
        if (cur != c) {
            lf->host[c] = (int)cur;
            lf->factor[c] = f;
            continue;
        }
        if (!keyed[c])
            continue;
        /*
         * Its own counter, added to once per entry into the outermost loop whose preheader
         * every factor of the chain can be computed in (guards are passed, never anchors).
         */
        for (unsigned k = c, len = 0; has_link(lf, k); k = link_next(cfg, lf, k)) {
            unsigned a, j = c;
            int ok = 1;
            len++;
            if (lf->link[k] < 0)
                continue;
            a = (unsigned)cfg->loops[lf->link[k]].preheader;
            for (unsigned i = 0; i < len && ok; i++, j = link_next(cfg, lf, j))
                ok = link_available(cfg, lf, j, a);
            if (!ok)
                break;
            lf->anchor[c] = (int)a;
            lf->chain[c] = len;
        }
        if (lf->anchor[c] >= 0)
            lf->adds[lf->anchor[c]]++;
    }
    return 0;
}

int ml_loopfold_wants_preheader(const struct ml_cfg *cfg, unsigned li, int *entry)
{
    const struct ml_loop *l = &cfg->loops[li];
    unsigned h = l->header, willreturn = LLVMGetEnumAttributeKindForName("willreturn", 10);
    const uint64_t *bp;
    struct ml_trip t;
    LLVMValueRef term;
    uint64_t bv;
    int e = -1;

    *entry = -1;
    if (l->preheader >= 0)
        return 0;
    for (unsigned k = cfg->pred_off[h]; k < cfg->pred_off[h + 1]; k++) {
        unsigned p = cfg->pred[k];
        if (cfg->rpo_num[p] < 0 || in_loop(cfg, li, p))
            continue;
        if (e >= 0)
            return 0;
        e = (int)p;
    }
    if (e < 0)
        return 0;
    term = LLVMGetBasicBlockTerminator(cfg->blocks[e]);
    if (!term || LLVMGetInstructionOpcode(term) != LLVMBr ||
        ml_loop_tripcount_from(cfg, li, (unsigned)e, &t) || t.kind == ML_TRIP_UNKNOWN)
        return 0;
    const_bound(&t, &bp, &bv);
    if ((t.kind == ML_TRIP_RECIPE && !ml_trip_foldable(&t.rule, bp)) ||
        !calls_return(cfg, l, willreturn))
        return 0;
    *entry = e;
    return 1;
}

LLVMValueRef ml_loopfold_count(const struct ml_loopfold *lf, const struct ml_cfg *cfg, unsigned c,
                               LLVMBuilderRef b, LLVMTypeRef i64)
{
    LLVMValueRef v = LLVMConstInt(i64, 1, 0);
    unsigned k = c;

    for (unsigned i = 0; i < lf->chain[c]; i++, k = link_next(cfg, lf, k)) {
        LLVMValueRef n;
        if (lf->guard[k] >= 0) {
            LLVMValueRef cond = lf->cond[k], one = LLVMConstInt(i64, 1, 0);
            LLVMValueRef zero = LLVMConstInt(i64, 0, 0);
            if (!LLVMIsAConstant(cond))
                cond = LLVMBuildFreeze(b, cond, "");
            n = LLVMBuildSelect(b, cond, lf->minus[k] ? zero : one, lf->minus[k] ? one : zero, "");
        } else {
            n = ml_trip_build(b, &lf->trips[lf->link[k]], i64);
            if (lf->minus[k])
                n = LLVMBuildSub(b, n, LLVMConstInt(i64, 1, 0), "");
        }
        v = LLVMBuildMul(b, v, n, "");
    }
    return v;
}

void ml_loopfold_free(struct ml_loopfold *lf)
{
    free(lf->host);
    free(lf->factor);
    free(lf->anchor);
    free(lf->chain);
    free(lf->link);
    free(lf->minus);
    free(lf->adds);
    free(lf->trips);
    free(lf->guard);
    free(lf->cond);
    memset(lf, 0, sizeof(*lf));
}
