/* Inline region enter and exit: most executions touch two thread-local words and call nothing. */
#include "instrument/ir/ir.h"
#include "runtime/abi.h"

#include <errno.h>
#include <llvm-c/DebugInfo.h>
#include <stdlib.h>

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
static void expand(struct ml_ir *ir, LLVMValueRef call, int kind)
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
    w = LLVMBuildLoad2(ir->b, ir->t_i32, wp, "");
    if (kind == K_EXIT) {
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
    if (kind == K_EXIT) {
        LLVMBuildStore(
            ir->b, LLVMBuildAnd(ir->b, w, LLVMConstInt(ir->t_i32, ~ML_RT_SLOT_OPEN, 0), ""), wp);
    } else {
        LLVMBuildStore(ir->b,
                       LLVMBuildOr(ir->b, w1, LLVMConstInt(ir->t_i32, ML_RT_SLOT_OPEN, 0), ""), wp);
        answer = LLVMBuildAnd(ir->b, gate, LLVMConstInt(ir->t_i32, 1, 0), "");
    }
    LLVMBuildBr(ir->b, cont);

    LLVMPositionBuilderAtEnd(ir->b, slow);
    LLVMInsertIntoBuilder(ir->b, call);
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

int ml_inline_markers(struct ml_ir *ir)
{
    LLVMValueRef fns[3] = {ir->f_enter, ir->f_enter_always, ir->f_exit};
    LLVMValueRef *calls = NULL;
    int *kinds = NULL;
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
    for (size_t i = 0; i < n; i++)
        expand(ir, calls[i], kinds[i]);
    free(calls);
    free(kinds);
    return 0;
}
