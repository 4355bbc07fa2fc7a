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

/* Whether loop li's count can be computed at the end of loop lo's preheader. */
static int inputs_invariant(const struct ml_cfg *cfg, const struct ml_trip *t, unsigned lo)
{
    LLVMValueRef v[2] = {t->start, t->bound};

    if (t->kind == ML_TRIP_CONST)
        return 1;
    for (int i = 0; i < 2; i++) {
        int b;
        if (LLVMIsAConstant(v[i]) || LLVMIsAArgument(v[i]))
            continue;
        if (!LLVMIsAInstruction(v[i]))
            return 0;
        b = ml_cfg_index(cfg, LLVMGetInstructionParent(v[i]));
        if (b < 0 || in_loop(cfg, lo, (unsigned)b))
            return 0;
    }
    return 1;
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
                     const uint32_t *set_of, const unsigned char *marked, struct ml_loopfold *lf)
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
    if (!lf->host || !lf->factor || !lf->anchor || !lf->chain || !lf->link || !lf->minus ||
        !lf->adds || !lf->trips) {
        ml_loopfold_free(lf);
        return -ENOMEM;
    }
    for (unsigned c = 0; c < nclasses; c++) {
        lf->host[c] = (int)c;
        lf->factor[c] = 1;
        lf->anchor[c] = -1;
        lf->link[c] = -1;
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
    for (unsigned c = 0; c < nclasses; c++) {
        unsigned cur = c;
        uint64_t f = 1;
        /* Constant-count links: merge into the first class that is not one. */
        while (lf->link[cur] >= 0 && lf->trips[lf->link[cur]].kind == ML_TRIP_CONST &&
               (f == 0 || link_count(lf, cur) <= MAX_FACTOR / f)) {
            f *= link_count(lf, cur);
            cur = (unsigned)class_of[cfg->loops[lf->link[cur]].preheader];
        }
        if (cur != c) {
            lf->host[c] = (int)cur;
            lf->factor[c] = f;
            continue;
        }
        if (lf->link[c] < 0)
            continue;
        /* Its own counter, added to once per entry into the outermost loop the inputs allow. */
        lf->chain[c] = 1;
        lf->anchor[c] = cfg->loops[lf->link[c]].preheader;
        cur = (unsigned)class_of[lf->anchor[c]];
        while (lf->link[cur] >= 0) {
            unsigned lo = (unsigned)lf->link[cur], k = c, ok = 1;
            for (unsigned i = 0; i < lf->chain[c] && ok; i++) {
                ok = inputs_invariant(cfg, &lf->trips[lf->link[k]], lo);
                k = (unsigned)class_of[cfg->loops[lf->link[k]].preheader];
            }
            if (!ok)
                break;
            lf->chain[c]++;
            lf->anchor[c] = cfg->loops[lo].preheader;
            cur = (unsigned)class_of[lf->anchor[c]];
        }
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

    for (unsigned i = 0; i < lf->chain[c]; i++) {
        const struct ml_trip *t = &lf->trips[lf->link[k]];
        LLVMValueRef n = ml_trip_build(b, t, i64);
        if (lf->minus[k])
            n = LLVMBuildSub(b, n, LLVMConstInt(i64, 1, 0), "");
        v = LLVMBuildMul(b, v, n, "");
        k = (unsigned)lf->class_of[cfg->loops[lf->link[k]].preheader];
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
    memset(lf, 0, sizeof(*lf));
}
