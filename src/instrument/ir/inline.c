/* Inline region enter and exit: most executions touch two thread-local words and call nothing. */
#include "instrument/ir/cfg.h"
#include "instrument/ir/ir.h"
#include "runtime/abi.h"

#include <errno.h>
#include <llvm-c/DebugInfo.h>
#include <llvm-c/Transforms/Utils.h>
#include <stdlib.h>
#include <string.h>

enum { K_ENTER, K_ALWAYS, K_EXIT };

/* u32 word `word` of the region slots, which follow the counters in the thread-local block. */
static LLVMValueRef slot_ptr(struct ml_ir *ir, uint64_t word)
{
    LLVMValueRef idx = LLVMConstInt(ir->t_i64, ir->nunits, 0), base, widx;

    base = LLVMConstGEP2(ir->t_i64, ir->ctr_ph, &idx, 1);
    base = LLVMConstBitCast(base, LLVMPointerType(ir->t_i32, 0));
    widx = LLVMConstInt(ir->t_i64, word, 0);
    return LLVMConstGEP2(ir->t_i32, base, &widx, 1);
}

/* The inline side is the likely one: the code generator lays it out straight. */
static void likely_first(struct ml_ir *ir, LLVMValueRef br)
{
    LLVMMetadataRef md[3] = {
        LLVMMDStringInContext2(ir->ctx, "branch_weights", 14),
        LLVMValueAsMetadata(LLVMConstInt(ir->t_i32, 4000, 0)),
        LLVMValueAsMetadata(LLVMConstInt(ir->t_i32, 1, 0)),
    };

    LLVMSetMetadata(br, LLVMGetMDKindIDInContext(ir->ctx, "prof", 4),
                    LLVMMetadataAsValue(ir->ctx, LLVMMDNodeInContext2(ir->ctx, md, 3)));
}

/*
 * BEGIN: if ((w - 1) | gate) < LIMIT, w = (w - 1) | OPEN and the answer is
 * gate & 1; END: if w has OPEN, clear it. Otherwise the runtime call runs.
 */
/*
 * A region's words carried in a register through a loop (see carry_plan): one
 * alloca, promoted by mem2reg, holds v = w's budget (bits 0-29), the answer of
 * an inline BEGIN (bit 30, ANS) and OPEN (bit 31). v is derived from the
 * thread-local w and gate where the loop is entered and after each runtime
 * call; w is written back on the loop's exits and before each runtime call.
 * When the gate is closed or w is OPEN on loading ("rare": nothing runs
 * inline), v is 0 and w is written back as it was (an END then lets the
 * runtime clear OPEN, abi.h).
 */
struct carry {
    uint32_t region;
    int kind;       /* K_ENTER or K_ALWAYS: the gate of the loop's BEGIN sites */
    LLVMValueRef v; /* alloca */
};

#define CARRY_ANS ML_RT_SLOT_LIMIT

static LLVMValueRef c32(struct ml_ir *ir, uint32_t v)
{
    return LLVMConstInt(ir->t_i32, v, 0);
}

/* The thread-local w and gate; *rare: they leave nothing to the inline path. */
static void carry_words(struct ml_ir *ir, const struct carry *c, LLVMValueRef *w, LLVMValueRef *g,
                        LLVMValueRef *rare)
{
    *w = LLVMBuildLoad2(ir->b, ir->t_i32, slot_ptr(ir, 2 * (uint64_t)c->region), "");
    *g = LLVMBuildLoad2(ir->b, ir->t_i32,
                        slot_ptr(ir, 2 * (uint64_t)ir->nregions + (c->kind == K_ALWAYS)), "");
    *rare = LLVMBuildICmp(ir->b, LLVMIntUGE, LLVMBuildOr(ir->b, *w, *g, ""),
                          c32(ir, ML_RT_SLOT_LIMIT), "");
}

/* Thread-local words -> register. */
static void carry_load(struct ml_ir *ir, const struct carry *c)
{
    LLVMValueRef w, g, rare, ans;

    carry_words(ir, c, &w, &g, &rare);
    ans = LLVMBuildShl(ir->b, LLVMBuildAnd(ir->b, g, c32(ir, 1), ""), c32(ir, 30), "");
    LLVMBuildStore(
        ir->b, LLVMBuildSelect(ir->b, rare, c32(ir, 0), LLVMBuildOr(ir->b, w, ans, ""), ""), c->v);
}

/* Register -> thread-local w (the gate is the runtime's: never written here). */
static void carry_store(struct ml_ir *ir, const struct carry *c)
{
    LLVMValueRef w, g, rare, v = LLVMBuildLoad2(ir->b, ir->t_i32, c->v, "");

    carry_words(ir, c, &w, &g, &rare);
    v = LLVMBuildAnd(ir->b, v, c32(ir, ~(uint32_t)CARRY_ANS), "");
    LLVMBuildStore(ir->b, LLVMBuildSelect(ir->b, rare, w, v, ""),
                   slot_ptr(ir, 2 * (uint64_t)c->region));
}

/*
 * The test of a carried marker, v in *x: BEGIN runs inline when v has a budget
 * and no OPEN, END when v has OPEN.
 */
static LLVMValueRef carry_fast(struct ml_ir *ir, const struct carry *c, int kind, LLVMValueRef *x)
{
    LLVMValueRef v = *x = LLVMBuildLoad2(ir->b, ir->t_i32, c->v, "");

    if (kind == K_EXIT)
        return LLVMBuildICmp(ir->b, LLVMIntSLT, v, c32(ir, 0), "");
    return LLVMBuildAnd(ir->b,
                        LLVMBuildICmp(ir->b, LLVMIntNE,
                                      LLVMBuildAnd(ir->b, v, c32(ir, ML_RT_SLOT_LIMIT - 1), ""),
                                      c32(ir, 0), ""),
                        LLVMBuildICmp(ir->b, LLVMIntSGE, v, c32(ir, 0), ""), "");
}

static void expand(struct ml_ir *ir, LLVMValueRef call, int kind, const struct carry *c)
{
    uint32_t r = (uint32_t)LLVMConstIntGetZExtValue(LLVMGetOperand(call, 1));
    LLVMMetadataRef loc = LLVMInstructionGetDebugLoc(call);
    LLVMBasicBlockRef head = LLVMGetInstructionParent(call), cont = ml_split_after(ir, call);
    LLVMValueRef fn = LLVMGetBasicBlockParent(head), wp = slot_ptr(ir, 2 * (uint64_t)r);
    LLVMBasicBlockRef fast = LLVMInsertBasicBlockInContext(ir->ctx, cont, "memlens.fast");
    LLVMBasicBlockRef slow = LLVMAppendBasicBlockInContext(ir->ctx, fn, "memlens.slow");
    LLVMValueRef w, gate = NULL, w1 = NULL, ok, answer = NULL, br;

    LLVMInstructionRemoveFromParent(call);
    LLVMPositionBuilderAtEnd(ir->b, head);
    LLVMSetCurrentDebugLocation2(ir->b, loc);
    if (c) {
        ok = carry_fast(ir, c, kind, &w);
    } else if ((w = LLVMBuildLoad2(ir->b, ir->t_i32, wp, "")), kind == K_EXIT) {
        ok = LLVMBuildICmp(ir->b, LLVMIntSLT, w, LLVMConstInt(ir->t_i32, 0, 0), "");
    } else {
        gate = LLVMBuildLoad2(ir->b, ir->t_i32,
                              slot_ptr(ir, 2 * (uint64_t)ir->nregions + (kind == K_ALWAYS ? 1 : 0)),
                              "");
        w1 = LLVMBuildAdd(ir->b, w, LLVMConstInt(ir->t_i32, UINT32_MAX, 0), "");
        ok = LLVMBuildICmp(ir->b, LLVMIntULT, LLVMBuildOr(ir->b, w1, gate, ""),
                           LLVMConstInt(ir->t_i32, ML_RT_SLOT_LIMIT, 0), "");
    }
    br = LLVMBuildCondBr(ir->b, ok, fast, slow);
    likely_first(ir, br);

    LLVMPositionBuilderAtEnd(ir->b, fast);
    if (c && kind == K_EXIT) {
        LLVMBuildStore(ir->b, LLVMBuildAnd(ir->b, w, c32(ir, ~ML_RT_SLOT_OPEN), ""), c->v);
    } else if (c) { /* budget - 1, OPEN set: one add */
        LLVMValueRef v = LLVMBuildAdd(ir->b, w, c32(ir, ML_RT_SLOT_OPEN - 1), "");
        LLVMBuildStore(ir->b, v, c->v);
        answer =
            LLVMBuildLShr(ir->b, LLVMBuildAnd(ir->b, v, c32(ir, CARRY_ANS), ""), c32(ir, 30), "");
    } else if (kind == K_EXIT) {
        LLVMBuildStore(
            ir->b, LLVMBuildAnd(ir->b, w, LLVMConstInt(ir->t_i32, ~ML_RT_SLOT_OPEN, 0), ""), wp);
    } else {
        LLVMBuildStore(ir->b,
                       LLVMBuildOr(ir->b, w1, LLVMConstInt(ir->t_i32, ML_RT_SLOT_OPEN, 0), ""), wp);
        answer = LLVMBuildAnd(ir->b, gate, LLVMConstInt(ir->t_i32, 1, 0), "");
    }
    LLVMBuildBr(ir->b, cont);

    LLVMPositionBuilderAtEnd(ir->b, slow);
    if (c)
        carry_store(ir, c);
    LLVMInsertIntoBuilder(ir->b, call);
    if (c)
        carry_load(ir, c);
    LLVMBuildBr(ir->b, cont);

    if (answer && LLVMGetFirstUse(call)) {
        LLVMValueRef phi, first = LLVMGetFirstInstruction(cont);
        LLVMBasicBlockRef from[2] = {fast, slow};
        if (first)
            LLVMPositionBuilderBefore(ir->b, first);
        else
            LLVMPositionBuilderAtEnd(ir->b, cont);
        phi = LLVMBuildPhi(ir->b, ir->t_i32, "");
        LLVMReplaceAllUsesWith(call, phi);
        LLVMValueRef in[2] = {answer, call};
        LLVMAddIncoming(phi, in, from, 2);
    }
    LLVMSetCurrentDebugLocation2(ir->b, NULL);
}

/* A marker call of ours: its kind, and its region in *r; else -1. */
static int marker_kind(const struct ml_ir *ir, LLVMValueRef in, uint32_t *r)
{
    LLVMValueRef fns[3] = {ir->f_enter, ir->f_enter_always, ir->f_exit}, callee;

    if (!LLVMIsACallInst(in))
        return -1;
    callee = LLVMGetCalledValue(in);
    for (int k = 0; k < 3; k++)
        if (fns[k] && callee == fns[k] && LLVMIsAConstantInt(LLVMGetOperand(in, 1))) {
            *r = (uint32_t)LLVMConstIntGetZExtValue(LLVMGetOperand(in, 1));
            return k;
        }
    return -1;
}

/*
 * mem2reg promotes every promotable alloca of a function: carry only in
 * functions that have none besides ours (at -O1 and above the optimiser has
 * promoted the program's own), so the program's memory operations stay as
 * they were counted. Conservative: any alloca used only by loads, stores and
 * intrinsic calls counts as promotable.
 */
static int has_promotable(LLVMValueRef fn)
{
    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb))
        for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in; in = LLVMGetNextInstruction(in)) {
            int simple = 1;
            if (!LLVMIsAAllocaInst(in))
                continue;
            for (LLVMUseRef u = LLVMGetFirstUse(in); u && simple; u = LLVMGetNextUse(u)) {
                LLVMValueRef user = LLVMGetUser(u), callee;
                if (LLVMIsALoadInst(user))
                    continue;
                if (LLVMIsAStoreInst(user) && LLVMGetOperand(user, 1) == in)
                    continue;
                callee = LLVMIsACallInst(user) ? ml_called_function(user) : NULL;
                simple = callee && LLVMGetIntrinsicID(callee);
            }
            if (simple)
                return 1;
        }
    return 0;
}

/*
 * The region whose markers loop li may carry in registers, or -1: every call
 * in it is an intrinsic or an inline marker of that one region (so nothing
 * but its own runtime calls can read or change its words), its BEGINs are all
 * of one kind (*kind), and its entry and exit edges can be split.
 */
static int64_t loop_region(const struct ml_ir *ir, const struct ml_cfg *cfg, unsigned li,
                           const unsigned char *in_loop, int *kind)
{
    const struct ml_loop *l = &cfg->loops[li];
    int64_t region = -1;
    int kinds = 0;

    for (unsigned i = 0; i < l->nblocks; i++) {
        LLVMBasicBlockRef bb = cfg->blocks[l->blocks[i]];
        for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in; in = LLVMGetNextInstruction(in)) {
            LLVMOpcode op = LLVMGetInstructionOpcode(in);
            uint32_t r;
            int k = marker_kind(ir, in, &r);
            if (k >= 0) {
                if (region >= 0 && region != r)
                    return -1;
                region = r;
                kinds |= k == K_EXIT ? 0 : 1 << k;
            } else if (op == LLVMCall) {
                LLVMValueRef callee = ml_called_function(in);
                if (!callee || !LLVMGetIntrinsicID(callee))
                    return -1;
            } else if (op == LLVMInvoke || op == LLVMCallBr || op == LLVMIndirectBr) {
                return -1;
            }
        }
        for (unsigned k = cfg->succ_off[l->blocks[i]]; k < cfg->succ_off[l->blocks[i] + 1]; k++) {
            LLVMValueRef first = LLVMGetFirstInstruction(cfg->blocks[cfg->succ[k]]);
            if (!in_loop[cfg->succ[k]] && first && LLVMIsALandingPadInst(first))
                return -1;
        }
    }
    for (unsigned k = cfg->pred_off[l->header]; k < cfg->pred_off[l->header + 1]; k++) {
        LLVMOpcode op =
            LLVMGetInstructionOpcode(LLVMGetBasicBlockTerminator(cfg->blocks[cfg->pred[k]]));
        if (!in_loop[cfg->pred[k]] && (op == LLVMIndirectBr || op == LLVMCallBr))
            return -1;
    }
    if (kinds != 1 << K_ENTER && kinds != 1 << K_ALWAYS)
        return -1; /* no BEGIN to save anything, or both gates */
    *kind = kinds == 1 << K_ENTER ? K_ENTER : K_ALWAYS;
    return region;
}

/* An edge to split: w written back for `out` and/or read for `in`. */
struct cedge {
    LLVMBasicBlockRef p, s;
    struct carry *out, *in;
};

static int add_edge(struct cedge **e, size_t *n, size_t *cap, LLVMBasicBlockRef p,
                    LLVMBasicBlockRef s, struct carry *out, struct carry *in)
{
    for (size_t i = 0; i < *n; i++)
        if ((*e)[i].p == p && (*e)[i].s == s) {
            if (out)
                (*e)[i].out = out;
            if (in)
                (*e)[i].in = in;
            return 0;
        }
    if (*n == *cap) {
        size_t nc = *cap ? 2 * *cap : 16;
        struct cedge *e2 = realloc(*e, nc * sizeof(*e2));
        if (!e2)
            return -ENOMEM;
        *e = e2;
        *cap = nc;
    }
    (*e)[(*n)++] = (struct cedge){p, s, out, in};
    return 0;
}

/*
 * Carries the words of region markers in registers through loops of fn (docs/regions.md,
 * "Inline enter and exit"): in each outermost loop that loop_region accepts, the
 * markers' loads and stores of thread-local words become register operations,
 * so a loop-body region costs a few register instructions per execution instead
 * of five thread-local memory accesses. Sets carried[i] for calls[i] in such a
 * loop. Returns the number of carries made (in *out, to free), or -ENOMEM.
 */
static int carry_plan(struct ml_ir *ir, LLVMValueRef fn, LLVMValueRef *calls, size_t n,
                      struct carry **carried, struct carry **out)
{
    struct ml_cfg cfg;
    unsigned char *in_loop = NULL, *chosen = NULL;
    struct carry *cs = NULL;
    struct cedge *edges = NULL;
    size_t nedges = 0, capedges = 0;
    int nc = 0, rc = 0;

    *out = NULL;
    if (LLVMGetEnumAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                                    LLVMGetEnumAttributeKindForName("optnone", 7)) ||
        has_promotable(fn))
        return 0;
    if (ml_cfg_build(fn, &cfg))
        return -ENOMEM;
    in_loop = calloc(cfg.n ? cfg.n : 1, 1);
    chosen = calloc(cfg.nloops ? cfg.nloops : 1, 1);
    cs = calloc(cfg.nloops ? cfg.nloops : 1, sizeof(*cs));
    if (!in_loop || !chosen || !cs) {
        rc = -ENOMEM;
        goto out;
    }
    for (unsigned li = 0; li < cfg.nloops; li++) {
        const struct ml_loop *l = &cfg.loops[li];
        int64_t r;
        int covered = 0, kind = K_ENTER;
        for (int p = l->parent; p >= 0 && !covered; p = cfg.loops[p].parent)
            covered = chosen[p];
        if (covered)
            continue;
        memset(in_loop, 0, cfg.n);
        for (unsigned i = 0; i < l->nblocks; i++)
            in_loop[l->blocks[i]] = 1;
        r = loop_region(ir, &cfg, li, in_loop, &kind);
        if (r < 0)
            continue;
        chosen[li] = 1;
        struct carry *c = &cs[nc++];
        c->region = (uint32_t)r;
        c->kind = kind;
        LLVMPositionBuilder(ir->b, LLVMGetEntryBasicBlock(fn),
                            LLVMGetFirstInstruction(LLVMGetEntryBasicBlock(fn)));
        LLVMSetCurrentDebugLocation2(ir->b, NULL);
        c->v = LLVMBuildAlloca(ir->b, ir->t_i32, "memlens.v");
        for (unsigned i = 0; i < l->nblocks; i++) {
            unsigned b = l->blocks[i];
            LLVMBasicBlockRef bb = cfg.blocks[b];
            LLVMValueRef term = LLVMGetBasicBlockTerminator(bb);
            LLVMOpcode op = LLVMGetInstructionOpcode(term);
            for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in; in = LLVMGetNextInstruction(in))
                for (size_t k = 0; k < n; k++)
                    if (calls[k] == in)
                        carried[k] = c;
            for (unsigned k = cfg.succ_off[b]; k < cfg.succ_off[b + 1]; k++)
                if (!in_loop[cfg.succ[k]] && (rc = add_edge(&edges, &nedges, &capedges, bb,
                                                            cfg.blocks[cfg.succ[k]], c, NULL)))
                    goto out;
            if (op == LLVMRet || op == LLVMResume || op == LLVMUnreachable) {
                LLVMPositionBuilderBefore(ir->b, term);
                carry_store(ir, c);
            }
        }
        for (unsigned k = cfg.pred_off[l->header]; k < cfg.pred_off[l->header + 1]; k++)
            if (!in_loop[cfg.pred[k]] &&
                (rc = add_edge(&edges, &nedges, &capedges, cfg.blocks[cfg.pred[k]],
                               cfg.blocks[l->header], NULL, c)))
                goto out;
    }
    for (size_t i = 0; i < nedges; i++) {
        LLVMBasicBlockRef nb;
        LLVMSetCurrentDebugLocation2(ir->b, NULL);
        nb = ml_split_edge(ir, edges[i].p, edges[i].s, "memlens.carry");
        if (!nb) /* loop_region checked every edge */
            continue;
        LLVMPositionBuilderBefore(ir->b, LLVMGetBasicBlockTerminator(nb));
        if (edges[i].out)
            carry_store(ir, edges[i].out);
        if (edges[i].in)
            carry_load(ir, edges[i].in);
    }
out:
    free(edges);
    free(in_loop);
    free(chosen);
    ml_cfg_free(&cfg);
    if (rc || !nc) {
        free(cs);
        return rc;
    }
    *out = cs;
    return nc;
}

/* Registers for the carried words: mem2reg on fn (carry_plan made sure only ours promote). */
static void promote(struct ml_ir *ir, LLVMValueRef fn)
{
    LLVMPassManagerRef pm = LLVMCreateFunctionPassManagerForModule(ir->m);

    LLVMAddPromoteMemoryToRegisterPass(pm);
    LLVMInitializeFunctionPassManager(pm);
    LLVMRunFunctionPassManager(pm, fn);
    LLVMFinalizeFunctionPassManager(pm);
    LLVMDisposePassManager(pm);
}

/* Expands calls[0..n) (grouped by function here), carrying words through loops where it can. */
static int expand_all(struct ml_ir *ir, LLVMValueRef *calls, int *kinds, size_t n)
{
    struct carry **carried = calloc(n ? n : 1, sizeof(*carried));
    unsigned char *done = calloc(n ? n : 1, 1);
    LLVMValueRef *group = malloc((n ? n : 1) * sizeof(*group));
    size_t *idx = malloc((n ? n : 1) * sizeof(*idx));
    int rc = 0;

    if (!carried || !done || !group || !idx) {
        rc = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < n && !rc; i++) {
        LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInstructionParent(calls[i]));
        struct carry *cs = NULL, **gc;
        size_t m = 0;
        int nc;
        if (done[i])
            continue;
        for (size_t j = i; j < n; j++)
            if (!done[j] && LLVMGetBasicBlockParent(LLVMGetInstructionParent(calls[j])) == fn) {
                done[j] = 1;
                idx[m] = j;
                group[m++] = calls[j];
            }
        gc = carried; /* the group's carries, in group order */
        memset(gc, 0, m * sizeof(*gc));
        nc = carry_plan(ir, fn, group, m, gc, &cs);
        if (nc < 0) {
            rc = nc;
            break;
        }
        for (size_t k = 0; k < m; k++)
            expand(ir, group[k], kinds[idx[k]], gc[k]);
        if (nc)
            promote(ir, fn);
        free(cs);
    }
out:
    free(carried);
    free(done);
    free(group);
    free(idx);
    return rc;
}

int ml_inline_markers(struct ml_ir *ir)
{
    LLVMValueRef fns[3] = {ir->f_enter, ir->f_enter_always, ir->f_exit};
    LLVMValueRef *calls = NULL;
    int *kinds = NULL, rc;
    size_t n = 0, cap = 0;

    for (int k = 0; k < 3; k++)
        for (LLVMUseRef u = fns[k] ? LLVMGetFirstUse(fns[k]) : NULL; u; u = LLVMGetNextUse(u)) {
            LLVMValueRef c = LLVMGetUser(u);
            if (!LLVMIsACallInst(c) || LLVMGetCalledValue(c) != fns[k] ||
                !LLVMIsAConstantInt(LLVMGetOperand(c, 1)))
                continue;
            if (n == cap) {
                size_t nc = cap ? 2 * cap : 64;
                LLVMValueRef *c2 = realloc(calls, nc * sizeof(*c2));
                int *k2 = c2 ? realloc(kinds, nc * sizeof(*k2)) : NULL;
                if (c2)
                    calls = c2;
                if (!k2) {
                    free(calls);
                    free(kinds);
                    return -ENOMEM;
                }
                kinds = k2;
                cap = nc;
            }
            calls[n] = c;
            kinds[n++] = k;
        }
    rc = expand_all(ir, calls, kinds, n);
    free(calls);
    free(kinds);
    return rc;
}
