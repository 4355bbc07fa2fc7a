/* Inline region enter and exit: most executions touch two thread-local words and call nothing. */
#include "instrument/ir/cfg.h"
#include "instrument/ir/ir.h"
#include "instrument/ir/ptrmap.h"
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
 *
 * A region's words carried in a register through a loop (see carry_plan): an
 * alloca r, promoted by mem2reg, is 0 when the thread-local w is the truth
 * (nothing runs inline until the next runtime call), else w's budget + 1: a
 * BEGIN runs inline when r > 1 and takes one unit, so r stays non-zero until
 * its END, which only tests r; the answer is the gate's low bit, read where
 * it is needed (only the runtime changes the gate: one register fewer). r is
 * derived from the thread-local words where the loop is entered and after a
 * runtime END; a runtime BEGIN leaves w 0 (the runtime's) and r 0. Where the loop is
 * left and before a runtime BEGIN, w is written back from a non-zero r (with
 * OPEN where the region is open there), so the runtime's books are the
 * thread-local path's. Whether the region is open is known statically at every
 * point of a carried loop (carry_states).
 */
struct carry {
    uint32_t region;
    int kind;       /* K_ENTER or K_ALWAYS: the gate of the loop's BEGIN sites */
    int leaf;       /* every execution begins and ends in the loop (see leaf_loop) */
    LLVMValueRef r; /* alloca */
};

enum { ST_NONE, ST_CLOSED, ST_OPEN, ST_BAD };

static LLVMValueRef c32(struct ml_ir *ir, uint32_t v)
{
    return LLVMConstInt(ir->t_i32, v, 0);
}

/* The gate word of BEGINs of this kind (K_ENTER or K_ALWAYS), loaded. */
static LLVMValueRef gate_word(struct ml_ir *ir, int kind)
{
    return LLVMBuildLoad2(ir->b, ir->t_i32,
                          slot_ptr(ir, 2 * (uint64_t)ir->nregions + (kind == K_ALWAYS)), "");
}

static LLVMValueRef w_ptr(struct ml_ir *ir, const struct carry *c)
{
    return slot_ptr(ir, 2 * (uint64_t)c->region);
}

/* Thread-local words -> registers, the region open (ST_OPEN) or not at this point. */
static void carry_load(struct ml_ir *ir, const struct carry *c, int state)
{
    LLVMValueRef w = LLVMBuildLoad2(ir->b, ir->t_i32, w_ptr(ir, c), ""), r;
    LLVMValueRef g = gate_word(ir, c->kind);
    LLVMValueRef off = LLVMBuildICmp(ir->b, LLVMIntUGE, g, c32(ir, ML_RT_SLOT_LIMIT), "");

    if (state == ST_OPEN) { /* open inline (OPEN), the gate open: its END runs inline */
        LLVMValueRef mine = LLVMBuildICmp(ir->b, LLVMIntSLT, w, c32(ir, 0), "");
        r = LLVMBuildSelect(ir->b, LLVMBuildAnd(ir->b, mine, LLVMBuildNot(ir->b, off, ""), ""),
                            LLVMBuildAdd(ir->b, w, c32(ir, 1u - ML_RT_SLOT_OPEN), ""), c32(ir, 0),
                            "");
    } else { /* OPEN here: the runtime sorts out a BEGIN inside an inline execution */
        LLVMValueRef rare = LLVMBuildICmp(ir->b, LLVMIntUGE, LLVMBuildOr(ir->b, w, g, ""),
                                          c32(ir, ML_RT_SLOT_LIMIT), "");
        r = LLVMBuildSelect(ir->b, rare, c32(ir, 0), LLVMBuildAdd(ir->b, w, c32(ir, 1), ""), "");
    }
    LLVMBuildStore(ir->b, r, c->r);
}

/* Registers -> thread-local w (the gate is the runtime's: never written here). */
static void carry_store(struct ml_ir *ir, const struct carry *c, int state)
{
    LLVMValueRef r = LLVMBuildLoad2(ir->b, ir->t_i32, c->r, "");
    LLVMValueRef w = LLVMBuildLoad2(ir->b, ir->t_i32, w_ptr(ir, c), "");
    LLVMValueRef v =
        LLVMBuildAdd(ir->b, r, c32(ir, state == ST_OPEN ? ML_RT_SLOT_OPEN - 1 : ~0u), "");

    LLVMBuildStore(
        ir->b, LLVMBuildSelect(ir->b, LLVMBuildICmp(ir->b, LLVMIntEQ, r, c32(ir, 0), ""), w, v, ""),
        w_ptr(ir, c));
}

/* The value phi p takes from block bb, or NULL. */
static LLVMValueRef incoming_from(LLVMValueRef p, LLVMBasicBlockRef bb)
{
    for (unsigned i = 0, n = LLVMCountIncoming(p); i < n; i++)
        if (LLVMGetIncomingBlock(p, i) == bb)
            return LLVMGetIncomingValue(p, i);
    return NULL;
}

/*
 * When cont only picks the copy by the answer phi (phi, a compare with a
 * constant, a branch), the fast block branches on its answer itself: no phi
 * and no second test on the fast path.
 */
static void branch_from_fast(struct ml_ir *ir, LLVMBasicBlockRef fast, LLVMBasicBlockRef cont,
                             LLVMValueRef phi, LLVMValueRef answer)
{
    LLVMValueRef cmp = LLVMGetNextInstruction(phi), term = LLVMGetBasicBlockTerminator(cont), op;
    LLVMValueRef fixed;
    LLVMUseRef u = LLVMGetFirstUse(phi);
    LLVMBasicBlockRef to[2];

    if (!cmp || !LLVMIsAICmpInst(cmp) || LLVMGetNextInstruction(cmp) != term || !u ||
        LLVMGetNextUse(u) || LLVMGetUser(u) != cmp || LLVMGetInstructionOpcode(term) != LLVMBr ||
        !LLVMIsConditional(term) || LLVMGetCondition(term) != cmp ||
        LLVMGetNextUse(LLVMGetFirstUse(cmp)) || LLVMGetPreviousInstruction(phi) ||
        LLVMGetOperand(cmp, 0) != phi || !LLVMIsAConstant(op = LLVMGetOperand(cmp, 1)))
        return;
    to[0] = LLVMGetSuccessor(term, 0);
    to[1] = LLVMGetSuccessor(term, 1);
    if (to[0] == to[1] || to[0] == cont || to[1] == cont)
        return;
    for (int k = 0; k < 2; k++)
        for (LLVMValueRef p = LLVMGetFirstInstruction(to[k]); p && LLVMIsAPHINode(p);
             p = LLVMGetNextInstruction(p))
            if (incoming_from(p, cont) == phi || incoming_from(p, cont) == cmp)
                return;
    /* A plain copy's answer is a constant: one way only. */
    fixed = LLVMIsAConstant(answer) ? LLVMConstICmp(LLVMGetICmpPredicate(cmp), answer, op) : NULL;
    for (int k = 0; k < 2; k++)
        for (LLVMValueRef p = LLVMGetFirstInstruction(to[k]);
             p && LLVMIsAPHINode(p) && (!fixed || k == !LLVMConstIntGetZExtValue(fixed));
             p = LLVMGetNextInstruction(p)) {
            LLVMValueRef v = incoming_from(p, cont);
            if (v)
                LLVMAddIncoming(p, &v, &fast, 1);
        }
    LLVMInstructionEraseFromParent(LLVMGetBasicBlockTerminator(fast));
    LLVMPositionBuilderAtEnd(ir->b, fast);
    if (fixed)
        LLVMBuildBr(ir->b, to[!LLVMConstIntGetZExtValue(fixed)]);
    else
        LLVMBuildCondBr(ir->b, LLVMBuildICmp(ir->b, LLVMGetICmpPredicate(cmp), answer, op, ""),
                        to[0], to[1]);
    ml_phis_retarget(ir, cont, fast, NULL);
}

/* __memlens_enter_leaf, declared on first use. */
static LLVMValueRef enter_leaf_fn(struct ml_ir *ir)
{
    LLVMValueRef f = LLVMGetNamedFunction(ir->m, "__memlens_enter_leaf");

    return f ? f : LLVMAddFunction(ir->m, "__memlens_enter_leaf", ir->ty_enter);
}

/* Returns the test of a plain leaf BEGIN (see strip_plain), else NULL. */
static LLVMValueRef expand(struct ml_ir *ir, LLVMValueRef call, int kind, const struct carry *c,
                           int plain)
{
    uint32_t r = (uint32_t)LLVMConstIntGetZExtValue(LLVMGetOperand(call, 1));
    LLVMMetadataRef loc = LLVMInstructionGetDebugLoc(call);
    LLVMBasicBlockRef head = LLVMGetInstructionParent(call), cont = ml_split_after(ir, call);
    LLVMValueRef fn = LLVMGetBasicBlockParent(head), wp = slot_ptr(ir, 2 * (uint64_t)r);
    LLVMBasicBlockRef fast = LLVMInsertBasicBlockInContext(ir->ctx, cont, "memlens.fast");
    LLVMBasicBlockRef slow = LLVMAppendBasicBlockInContext(ir->ctx, fn, "memlens.slow");
    LLVMValueRef w, gate = NULL, w1 = NULL, ok, answer = NULL, br, got = call, shr = NULL;
    int used = LLVMGetFirstUse(call) != NULL;

    LLVMInstructionRemoveFromParent(call);
    LLVMPositionBuilderAtEnd(ir->b, head);
    LLVMSetCurrentDebugLocation2(ir->b, loc);
    if (c && kind == K_EXIT) {
        w = LLVMBuildLoad2(ir->b, ir->t_i32, c->r, "");
        ok = LLVMBuildICmp(ir->b, LLVMIntNE, w, c32(ir, 0), "");
    } else if (c) { /* r - 1 > 0, signed: r is below 2^31, so the add's flags decide (no cmp) */
        w = LLVMBuildLoad2(ir->b, ir->t_i32, c->r, "");
        w1 = LLVMBuildNSWAdd(ir->b, w, c32(ir, ~0u), "");
        ok = LLVMBuildICmp(ir->b, LLVMIntSGT, w1, c32(ir, 0), "");
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
    if (c) { /* BEGIN takes one unit of the budget; END has nothing to do */
        if (kind != K_EXIT) {
            LLVMBuildStore(ir->b, w1, c->r);
            answer =
                plain ? c32(ir, 0) : LLVMBuildAnd(ir->b, gate_word(ir, c->kind), c32(ir, 1), "");
        }
    } else if (kind == K_EXIT) {
        LLVMBuildStore(
            ir->b, LLVMBuildAnd(ir->b, w, LLVMConstInt(ir->t_i32, ~ML_RT_SLOT_OPEN, 0), ""), wp);
    } else {
        LLVMBuildStore(ir->b,
                       LLVMBuildOr(ir->b, w1, LLVMConstInt(ir->t_i32, ML_RT_SLOT_OPEN, 0), ""), wp);
        answer = plain ? c32(ir, 0) : LLVMBuildAnd(ir->b, gate, c32(ir, 1), "");
    }
    LLVMBuildBr(ir->b, cont);

    LLVMPositionBuilderAtEnd(ir->b, slow);
    if (c && kind != K_EXIT) { /* r from w1: r itself dies at the add (no copy kept for here) */
        LLVMBuildStore(ir->b, LLVMBuildAdd(ir->b, w1, c32(ir, 1), ""), c->r);
        carry_store(ir, c, ST_CLOSED);
    }
    if (c && c->leaf && kind != K_EXIT) /* same arguments and type: only the callee changes */
        LLVMSetOperand(call, (unsigned)LLVMGetNumOperands(call) - 1, enter_leaf_fn(ir));
    LLVMInsertIntoBuilder(ir->b, call);
    if (c && c->leaf && kind != K_EXIT) { /* answer | r << 1: r 0 unless handed to the END */
        shr = LLVMBuildLShr(ir->b, call, c32(ir, 1), "");
        LLVMBuildStore(ir->b, shr, c->r);
        got = LLVMBuildAnd(ir->b, call, c32(ir, 1), "");
    } else if (c && kind != K_EXIT) /* the runtime left w 0: the END calls it too */
        LLVMBuildStore(ir->b, c32(ir, 0), c->r);
    else if (c)
        carry_load(ir, c, ST_CLOSED);
    LLVMBuildBr(ir->b, cont);

    if (answer && used) {
        LLVMValueRef phi, first = LLVMGetFirstInstruction(cont);
        LLVMBasicBlockRef from[2] = {fast, slow};
        if (first)
            LLVMPositionBuilderBefore(ir->b, first);
        else
            LLVMPositionBuilderAtEnd(ir->b, cont);
        phi = LLVMBuildPhi(ir->b, ir->t_i32, "");
        LLVMReplaceAllUsesWith(call, phi);
        if (shr) { /* RAUW moved their uses too */
            LLVMSetOperand(shr, 0, call);
            LLVMSetOperand(got, 0, call);
        }
        LLVMValueRef in[2] = {answer, got};
        LLVMAddIncoming(phi, in, from, 2);
        if (c)
            branch_from_fast(ir, fast, cont, phi, answer);
    }
    LLVMSetCurrentDebugLocation2(ir->b, NULL);
    return c && c->leaf && plain && kind != K_EXIT ? br : NULL;
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

/*
 * Whether the region is open (ST_OPEN) or not (ST_CLOSED) where each block of
 * loop l ends (st[]), a loop whose markers are all of one region: the state at
 * the header (returned) must be the same on every way round, BEGIN must find
 * it closed and END open. -1 when no such states exist (then the loop is not
 * carried: nesting and recursion are the runtime's).
 */
static int carry_states(const struct ml_ir *ir, const struct ml_cfg *cfg, const struct ml_loop *l,
                        const unsigned char *in_loop, unsigned char *in, unsigned char *st)
{
    for (int h = ST_CLOSED; h <= ST_OPEN; h++) {
        int changed = 1, ok = 1;
        for (unsigned i = 0; i < l->nblocks; i++)
            in[l->blocks[i]] = st[l->blocks[i]] = ST_NONE;
        in[l->header] = (unsigned char)h;
        while (changed) {
            changed = 0;
            for (unsigned i = 0; i < l->nblocks; i++) {
                unsigned b = l->blocks[i];
                int x = in[b];
                uint32_t r;
                if (b != l->header) {
                    x = ST_NONE;
                    for (unsigned k = cfg->pred_off[b]; k < cfg->pred_off[b + 1]; k++) {
                        int y = in_loop[cfg->pred[k]] ? st[cfg->pred[k]] : ST_NONE;
                        x = x == ST_NONE ? y : y == ST_NONE || y == x ? x : ST_BAD;
                    }
                    changed |= in[b] != x;
                    in[b] = (unsigned char)x;
                }
                for (LLVMValueRef v = LLVMGetFirstInstruction(cfg->blocks[b]);
                     v && x != ST_NONE && x != ST_BAD; v = LLVMGetNextInstruction(v)) {
                    int k = marker_kind(ir, v, &r);
                    if (k == K_EXIT)
                        x = x == ST_OPEN ? ST_CLOSED : ST_BAD;
                    else if (k >= 0)
                        x = x == ST_CLOSED ? ST_OPEN : ST_BAD;
                }
                changed |= st[b] != x;
                st[b] = (unsigned char)x;
            }
        }
        for (unsigned i = 0; i < l->nblocks; i++)
            ok &= in[l->blocks[i]] != ST_BAD && st[l->blocks[i]] != ST_BAD;
        for (unsigned i = 0; i < l->nlatches; i++)
            ok &= st[l->latches[i]] == h;
        if (ok)
            return h;
    }
    return -1;
}

/*
 * Whether every execution of the region that begins in carried loop l (its
 * BEGINs sampled, header state h, block-end states st) also ends in it, on
 * every way out: closed at each exit and return. Such a loop holds no call, so
 * nothing else can run while one of its executions is open (a signal handler
 * aside), and its BEGIN may call __memlens_enter_leaf (abi.h).
 */
static int leaf_loop(const struct ml_cfg *cfg, const struct ml_loop *l,
                     const unsigned char *in_loop, const unsigned char *st, int kind, int h)
{
    if (kind != K_ENTER || h != ST_CLOSED)
        return 0;
    for (unsigned i = 0; i < l->nblocks; i++) {
        unsigned b = l->blocks[i];
        LLVMOpcode op = LLVMGetInstructionOpcode(LLVMGetBasicBlockTerminator(cfg->blocks[b]));
        int out = op == LLVMRet || op == LLVMResume || op == LLVMUnreachable;
        for (unsigned k = cfg->succ_off[b]; k < cfg->succ_off[b + 1]; k++)
            out |= !in_loop[cfg->succ[k]];
        if (out && st[b] != ST_CLOSED)
            return 0;
    }
    return 1;
}

/* An edge to split: w written back for `out` and/or read for `in`, in the region's states there. */
struct cedge {
    LLVMBasicBlockRef p, s;
    struct carry *out, *in;
    int out_state, in_state;
};

static int add_edge(struct cedge **e, size_t *n, size_t *cap, LLVMBasicBlockRef p,
                    LLVMBasicBlockRef s, struct carry *c, int out, int state)
{
    size_t i;

    for (i = 0; i < *n && ((*e)[i].p != p || (*e)[i].s != s); i++)
        ;
    if (i == *n) {
        if (*n == *cap) {
            size_t nc = *cap ? 2 * *cap : 16;
            struct cedge *e2 = realloc(*e, nc * sizeof(*e2));
            if (!e2)
                return -ENOMEM;
            *e = e2;
            *cap = nc;
        }
        (*e)[(*n)++] = (struct cedge){p, s, NULL, NULL, 0, 0};
    }
    if (out) {
        (*e)[i].out = c;
        (*e)[i].out_state = state;
    } else {
        (*e)[i].in = c;
        (*e)[i].in_state = state;
    }
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
    unsigned char *in_loop = NULL, *chosen = NULL, *st_in = NULL, *st = NULL;
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
    st_in = calloc(cfg.n ? cfg.n : 1, 1);
    st = calloc(cfg.n ? cfg.n : 1, 1);
    if (!in_loop || !chosen || !cs || !st_in || !st) {
        rc = -ENOMEM;
        goto out;
    }
    for (unsigned li = 0; li < cfg.nloops; li++) {
        const struct ml_loop *l = &cfg.loops[li];
        int64_t r;
        int covered = 0, kind = K_ENTER, h;
        for (int p = l->parent; p >= 0 && !covered; p = cfg.loops[p].parent)
            covered = chosen[p];
        if (covered)
            continue;
        memset(in_loop, 0, cfg.n);
        for (unsigned i = 0; i < l->nblocks; i++)
            in_loop[l->blocks[i]] = 1;
        r = loop_region(ir, &cfg, li, in_loop, &kind);
        if (r < 0 || (h = carry_states(ir, &cfg, l, in_loop, st_in, st)) < 0)
            continue;
        chosen[li] = 1;
        struct carry *c = &cs[nc++];
        c->region = (uint32_t)r;
        c->kind = kind;
        c->leaf = leaf_loop(&cfg, l, in_loop, st, kind, h);
        LLVMPositionBuilder(ir->b, LLVMGetEntryBasicBlock(fn),
                            LLVMGetFirstInstruction(LLVMGetEntryBasicBlock(fn)));
        LLVMSetCurrentDebugLocation2(ir->b, NULL);
        c->r = LLVMBuildAlloca(ir->b, ir->t_i32, "memlens.r");
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
                                                            cfg.blocks[cfg.succ[k]], c, 1, st[b])))
                    goto out;
            if (op == LLVMRet || op == LLVMResume || op == LLVMUnreachable) {
                LLVMPositionBuilderBefore(ir->b, term);
                carry_store(ir, c, st[b]);
            }
        }
        for (unsigned k = cfg.pred_off[l->header]; k < cfg.pred_off[l->header + 1]; k++)
            if (!in_loop[cfg.pred[k]] &&
                (rc = add_edge(&edges, &nedges, &capedges, cfg.blocks[cfg.pred[k]],
                               cfg.blocks[l->header], c, 0, h)))
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
            carry_store(ir, edges[i].out, edges[i].out_state);
        if (edges[i].in)
            carry_load(ir, edges[i].in, edges[i].in_state);
    }
out:
    free(edges);
    free(st_in);
    free(st);
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

/*
 * Strip-mining a leaf loop's plain copy. Its BEGIN (head: phis, then r - 1 > 0
 * and a branch to fast, which stores r - 1 and goes on to the body B) costs
 * two instructions per unmeasured execution. When the loop's latch L leaves it
 * by a step-1 induction variable I compared eq/ne with a loop-invariant bound N
 * (head -> fast -> B -> ... -> L -> head, the body S entered only at B and left
 * only at L), S becomes a strip that runs without the BEGIN while the budget
 * lasts: every way into B computes lim = I0 + 1 + min(N - I0 - 1, r - 1) (r as
 * the BEGIN just left it, r - 1 taken as 0 when r < 2; N - I0 wraps as the eq
 * test does) and c = r + I0 + 1, and L goes back to B while I + 1 != lim. At
 * the strip's exit r = c - (I + 1), and L's own test picks the loop's exit or
 * head, whose BEGIN then calls the runtime. S is not copied, so the measured
 * copy's code is as it was. Anything else keeps the countdown.
 */
struct strip {
    struct ml_ir *ir;
    LLVMBasicBlockRef head, fast, body, latch, exit;
    LLVMValueRef r, w1, iv, next, bound; /* r's alloca, r - 1, I (a phi of B), I + 1, N */
    LLVMBasicBlockRef *s;
    size_t ns;
    struct ml_ptrmap in_s; /* block of S -> 1 */
};

static int in_s(const struct strip *st, LLVMValueRef v)
{
    return LLVMIsAInstruction(v) && ml_ptrmap_get(&st->in_s, LLVMGetInstructionParent(v));
}

static int in_head(const struct strip *st, LLVMValueRef v)
{
    return LLVMIsAInstruction(v) && LLVMGetInstructionParent(v) == st->head;
}

/* x of add x, 1 (either operand order); else NULL. */
static LLVMValueRef step_of(LLVMValueRef next)
{
    if (!LLVMIsAInstruction(next) || LLVMGetInstructionOpcode(next) != LLVMAdd)
        return NULL;
    for (int k = 0; k < 2; k++) {
        LLVMValueRef c = LLVMGetOperand(next, (unsigned)k);
        if (LLVMIsAConstantInt(c) && LLVMConstIntGetZExtValue(c) == 1)
            return LLVMGetOperand(next, (unsigned)!k);
    }
    return NULL;
}

/* The body's blocks: reachable from B without passing head or the exit; 0 or -1. */
static int strip_blocks(struct strip *st)
{
    size_t cap = 16;

    if (!(st->s = malloc(cap * sizeof(*st->s))))
        return -1;
    st->s[st->ns++] = st->body;
    if (ml_ptrmap_put(&st->in_s, st->body, (void *)1))
        return -1;
    for (size_t i = 0; i < st->ns; i++) {
        LLVMValueRef t = LLVMGetBasicBlockTerminator(st->s[i]);
        LLVMOpcode op = LLVMGetInstructionOpcode(t);
        if (op != LLVMBr && op != LLVMSwitch)
            return -1;
        for (unsigned k = 0; k < LLVMGetNumSuccessors(t); k++) {
            LLVMBasicBlockRef b = LLVMGetSuccessor(t, k);
            if (b == st->head || b == st->exit) {
                if (st->s[i] != st->latch)
                    return -1;
                continue;
            }
            if (b == st->fast || ml_ptrmap_get(&st->in_s, b))
                continue;
            if (st->ns == cap && !(st->s = realloc(st->s, (cap *= 2) * sizeof(*st->s))))
                return -1;
            st->s[st->ns++] = b;
            if (ml_ptrmap_put(&st->in_s, b, (void *)1))
                return -1;
        }
    }
    return ml_ptrmap_get(&st->in_s, st->latch) ? 0 : -1;
}

/*
 * Whether S can run as a strip: no calls but intrinsics, no r, nothing of head
 * used but through B's phis (L will go straight to B), entered at B only.
 */
static int strip_ok(const struct strip *st)
{
    for (size_t i = 0; i < st->ns; i++) {
        LLVMBasicBlockRef b = st->s[i];
        if (b != st->body)
            for (LLVMUseRef u = LLVMGetFirstUse(LLVMBasicBlockAsValue(b)); u; u = LLVMGetNextUse(u))
                if (!in_s(st, LLVMGetUser(u)))
                    return 0;
        for (LLVMValueRef in = LLVMGetFirstInstruction(b); in; in = LLVMGetNextInstruction(in)) {
            if (LLVMIsACallInst(in)) {
                LLVMValueRef f = LLVMGetCalledValue(in);
                if (!LLVMIsAFunction(f) || !LLVMGetIntrinsicID(f))
                    return 0;
            }
            if (b == st->body && LLVMIsAPHINode(in))
                continue;
            for (int k = 0; k < LLVMGetNumOperands(in); k++) {
                LLVMValueRef o = LLVMGetOperand(in, (unsigned)k);
                if (o == st->r || in_head(st, o))
                    return 0;
            }
        }
    }
    return 1;
}

/* The pattern of the comment above around a plain leaf BEGIN whose test ends head; 0 or -1. */
static int strip_match(struct strip *st)
{
    LLVMValueRef t = LLVMGetBasicBlockTerminator(st->head), in, cmp, store;
    LLVMIntPredicate p;
    int n = 0;

    for (in = LLVMGetFirstInstruction(st->head); in && LLVMIsAPHINode(in);)
        in = LLVMGetNextInstruction(in);
    for (LLVMValueRef x = in; x; x = LLVMGetNextInstruction(x))
        n++;
    if (n != 4 || !LLVMIsALoadInst(in) || LLVMGetOperand(in, 0) != st->r || !LLVMIsConditional(t))
        return -1;
    st->w1 = LLVMGetNextInstruction(in);
    st->fast = LLVMGetSuccessor(t, 0);
    store = LLVMGetFirstInstruction(st->fast);
    if (!store || !LLVMIsAStoreInst(store) || LLVMGetOperand(store, 0) != st->w1 ||
        LLVMGetOperand(store, 1) != st->r ||
        LLVMGetNextInstruction(store) != LLVMGetBasicBlockTerminator(st->fast) ||
        LLVMIsConditional(LLVMGetBasicBlockTerminator(st->fast)))
        return -1;
    st->body = LLVMGetSuccessor(LLVMGetBasicBlockTerminator(st->fast), 0);
    if (st->body == st->head)
        return -1;
    /* the latch: a predecessor of head leaving by I + 1 ==/!= N */
    for (LLVMUseRef u = LLVMGetFirstUse(LLVMBasicBlockAsValue(st->head)); u && !st->latch;
         u = LLVMGetNextUse(u)) {
        LLVMValueRef br = LLVMGetUser(u);
        if (!LLVMIsABranchInst(br) || !LLVMIsConditional(br) ||
            !LLVMIsAICmpInst(cmp = LLVMGetCondition(br)))
            continue;
        p = LLVMGetICmpPredicate(cmp);
        if (!((p == LLVMIntEQ && LLVMGetSuccessor(br, 1) == st->head) ||
              (p == LLVMIntNE && LLVMGetSuccessor(br, 0) == st->head)))
            continue;
        for (int k = 0; k < 2 && !st->latch; k++) {
            LLVMValueRef x = LLVMGetOperand(cmp, (unsigned)k);
            LLVMBasicBlockRef lb = LLVMGetInstructionParent(br);
            LLVMValueRef i = step_of(x), pv;
            if (!i || !LLVMIsAPHINode(i) || LLVMGetInstructionParent(i) != st->body ||
                !(pv = incoming_from(i, st->fast)) || !LLVMIsAPHINode(pv) ||
                LLVMGetInstructionParent(pv) != st->head || incoming_from(pv, lb) != x ||
                LLVMGetTypeKind(LLVMTypeOf(x)) != LLVMIntegerTypeKind ||
                LLVMGetIntTypeWidth(LLVMTypeOf(x)) < 32)
                continue;
            st->latch = lb;
            st->exit = LLVMGetSuccessor(br, p == LLVMIntEQ ? 0 : 1);
            st->next = x;
            st->bound = LLVMGetOperand(cmp, (unsigned)!k);
            st->iv = i;
        }
    }
    if (!st->latch || st->exit == st->head || strip_blocks(st) || in_s(st, st->bound) ||
        in_head(st, st->bound) || !strip_ok(st))
        return -1;
    /* B's phis take from fast values from outside or phis of head (then L's for the strip) */
    for (LLVMValueRef q = LLVMGetFirstInstruction(st->body); q && LLVMIsAPHINode(q);
         q = LLVMGetNextInstruction(q)) {
        LLVMValueRef v = incoming_from(q, st->fast);
        if (!v || (in_head(st, v) && (!LLVMIsAPHINode(v) || !incoming_from(v, st->latch))))
            return -1;
    }
    return 0;
}

/* N available on every way into B (the measured copy's among them), and the edges splittable. */
static int strip_entries(const struct strip *st, LLVMBasicBlockRef *pred, size_t np)
{
    struct ml_cfg cfg;
    int ok = 1;

    for (size_t i = 0; i < np; i++) {
        LLVMOpcode op = LLVMGetInstructionOpcode(LLVMGetBasicBlockTerminator(pred[i]));
        if (op != LLVMBr && op != LLVMSwitch)
            return 0;
    }
    if (!LLVMIsAInstruction(st->bound))
        return 1;
    if (ml_cfg_build(LLVMGetBasicBlockParent(st->head), &cfg))
        return 0;
    for (size_t i = 0; i < np && ok; i++) {
        int d = ml_cfg_index(&cfg, LLVMGetInstructionParent(st->bound));
        int u = ml_cfg_index(&cfg, pred[i]);
        ok = d >= 0 && u >= 0 && ml_cfg_dominates(&cfg, (unsigned)d, (unsigned)u);
    }
    ml_cfg_free(&cfg);
    return ok;
}

/* Rewires S as a strip (the comment above); 0, or -ENOMEM. */
static int strip_build(struct strip *st)
{
    struct ml_ir *ir = st->ir;
    LLVMTypeRef ty = LLVMTypeOf(st->next);
    LLVMValueRef lt = LLVMGetBasicBlockTerminator(st->latch), cond = LLVMGetCondition(lt);
    LLVMValueRef one = LLVMConstInt(ty, 1, 0), lim_a, c_a, lim;
    LLVMBasicBlockRef sx, *pred = NULL,
                          succ[2] = {LLVMGetSuccessor(lt, 0), LLVMGetSuccessor(lt, 1)};
    size_t np = 0;
    unsigned at = 0;
    LLVMIntPredicate p = LLVMGetICmpPredicate(cond);
    LLVMValueRef ops[2] = {LLVMGetOperand(cond, 0), LLVMGetOperand(cond, 1)};

    for (LLVMUseRef u = LLVMGetFirstUse(LLVMBasicBlockAsValue(st->body)); u; u = LLVMGetNextUse(u))
        np++;
    if (!(pred = malloc((np ? np : 1) * sizeof(*pred))))
        return -ENOMEM;
    np = 0;
    for (LLVMUseRef u = LLVMGetFirstUse(LLVMBasicBlockAsValue(st->body)); u;
         u = LLVMGetNextUse(u)) {
        LLVMValueRef user = LLVMGetUser(u);
        LLVMBasicBlockRef pb = LLVMIsAInstruction(user) ? LLVMGetInstructionParent(user) : NULL;
        int seen = !pb;
        for (size_t i = 0; i < np && !seen; i++)
            seen = pred[i] == pb;
        if (!seen)
            pred[np++] = pb;
    }
    if (!strip_entries(st, pred, np)) {
        free(pred);
        return 0;
    }
    LLVMPositionBuilderBefore(ir->b, st->r);
    lim_a = LLVMBuildAlloca(ir->b, ty, "memlens.lim");
    c_a = LLVMBuildAlloca(ir->b, ir->t_i32, "memlens.c");

    /* L -> B: B's phis take what head's would have passed on */
    for (LLVMValueRef q = LLVMGetFirstInstruction(st->body); q && LLVMIsAPHINode(q);
         q = LLVMGetNextInstruction(q)) {
        LLVMValueRef v = incoming_from(q, st->fast);
        if (in_head(st, v))
            v = incoming_from(v, st->latch);
        LLVMAddIncoming(q, &v, &st->latch, 1);
    }
    sx = LLVMGetNextBasicBlock(st->latch)
             ? LLVMInsertBasicBlockInContext(ir->ctx, LLVMGetNextBasicBlock(st->latch),
                                             "memlens.strip.exit")
             : LLVMAppendBasicBlockInContext(ir->ctx, LLVMGetBasicBlockParent(st->latch),
                                             "memlens.strip.exit");
    LLVMInstructionEraseFromParent(lt);
    if (!LLVMGetFirstUse(cond))
        LLVMInstructionEraseFromParent(cond);
    LLVMPositionBuilderAtEnd(ir->b, st->latch);
    lim = LLVMBuildLoad2(ir->b, ty, lim_a, "");
    LLVMBuildCondBr(ir->b, LLVMBuildICmp(ir->b, LLVMIntEQ, st->next, lim, ""), sx, st->body);
    /* sx: r = c - (I + 1), then L's own test */
    LLVMPositionBuilderAtEnd(ir->b, sx);
    LLVMBuildStore(ir->b,
                   LLVMBuildSub(ir->b, LLVMBuildLoad2(ir->b, ir->t_i32, c_a, ""),
                                LLVMBuildTrunc(ir->b, st->next, ir->t_i32, ""), ""),
                   st->r);
    LLVMBuildCondBr(ir->b, LLVMBuildICmp(ir->b, p, ops[0], ops[1], ""), succ[0], succ[1]);
    ml_phis_retarget(ir, st->head, st->latch, sx);
    ml_phis_retarget(ir, st->exit, st->latch, sx);

    /* every other way into B starts a strip (splitting rebuilds B's phis: I by its place) */
    for (LLVMValueRef q = LLVMGetFirstInstruction(st->body); q != st->iv;
         q = LLVMGetNextInstruction(q))
        at++;
    for (size_t i = 0; i < np; i++) {
        LLVMBasicBlockRef e = ml_split_edge(ir, pred[i], st->body, "memlens.strip.ph");
        LLVMValueRef r, i0, k0, d1, k, iv = LLVMGetFirstInstruction(st->body);
        for (unsigned j = 0; j < at; j++)
            iv = LLVMGetNextInstruction(iv);
        LLVMPositionBuilderBefore(ir->b, LLVMGetBasicBlockTerminator(e));
        r = LLVMBuildLoad2(ir->b, ir->t_i32, st->r, "");
        i0 = incoming_from(iv, e);
        k0 = LLVMBuildSelect(ir->b, LLVMBuildICmp(ir->b, LLVMIntSGT, r, c32(ir, 1), ""),
                             LLVMBuildZExt(ir->b, LLVMBuildAdd(ir->b, r, c32(ir, ~0u), ""), ty, ""),
                             LLVMConstInt(ty, 0, 0), "");
        d1 = LLVMBuildSub(ir->b, LLVMBuildSub(ir->b, st->bound, i0, ""), one, "");
        k = LLVMBuildSelect(ir->b, LLVMBuildICmp(ir->b, LLVMIntULT, d1, k0, ""), d1, k0, "");
        LLVMBuildStore(ir->b, LLVMBuildAdd(ir->b, LLVMBuildAdd(ir->b, i0, one, ""), k, ""), lim_a);
        LLVMBuildStore(ir->b,
                       LLVMBuildAdd(ir->b, r,
                                    LLVMBuildAdd(ir->b, LLVMBuildTrunc(ir->b, i0, ir->t_i32, ""),
                                                 c32(ir, 1), ""),
                                    ""),
                       c_a);
    }
    free(pred);
    return 0;
}

/* Strip-mines the plain copy around the leaf BEGIN whose test ends head, where it matches. */
static int strip_plain(struct ml_ir *ir, LLVMBasicBlockRef head, LLVMValueRef r)
{
    struct strip st = {.ir = ir, .head = head, .r = r};
    int rc = 0;

    ml_ptrmap_init(&st.in_s);
    if (!strip_match(&st))
        rc = strip_build(&st);
    ml_ptrmap_free(&st.in_s);
    free(st.s);
    return rc;
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
        LLVMValueRef fn;
        struct carry *cs = NULL, **gc;
        size_t m = 0;
        int nc;
        if (done[i]) /* calls[i] may be gone (a plain END of a leaf loop) */
            continue;
        fn = LLVMGetBasicBlockParent(LLVMGetInstructionParent(calls[i]));
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
        for (size_t k = 0; k < m; k++) {
            int plain = LLVMGetMetadata(group[k], ir->md_plain) != NULL;
            LLVMSetMetadata(group[k], ir->md_plain, NULL);
            if (plain && gc[k] && gc[k]->leaf && kinds[idx[k]] == K_EXIT) {
                LLVMInstructionEraseFromParent(group[k]); /* ended at its BEGIN (leaf_loop) */
                group[k] = NULL;
            } else
                group[k] = expand(ir, group[k], kinds[idx[k]], gc[k], plain);
        }
        for (size_t k = 0; k < m && !rc; k++) /* group[k]: a plain leaf BEGIN's test */
            if (group[k])
                rc = strip_plain(ir, LLVMGetInstructionParent(group[k]), gc[k]->r);
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
