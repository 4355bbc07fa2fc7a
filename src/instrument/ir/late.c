/* Calls wrapped once the code is final: the dynamic context, the clock around not-seen calls. */
#include "instrument/ir/ir.h"

#include <errno.h>
#include <string.h>
#include <llvm-c/DebugInfo.h>

/*
 * Around a not-seen call, in timed executions only (the runtime's count of
 * open timed executions is not zero): clock reads before and after, their
 * difference added to the call's ticks unit. Other executions pay a test.
 */
static void clock_call(struct ml_ir *ir, LLVMValueRef call, uint32_t unit, LLVMValueRef rcc,
                       LLVMTypeRef rcc_t)
{
    LLVMBasicBlockRef bb = LLVMGetInstructionParent(call), cont = ml_split_after(ir, call), callbb;
    LLVMBasicBlockRef pre, post;
    LLVMValueRef timed, t0, t0p, t1, in[2], idx, p, v;
    LLVMMetadataRef loc = LLVMInstructionGetDebugLoc(call);
    LLVMBasicBlockRef from[2];

    callbb = LLVMInsertBasicBlockInContext(ir->ctx, cont, "memlens.ns");
    pre = LLVMInsertBasicBlockInContext(ir->ctx, callbb, "memlens.ns.t0");
    post = LLVMInsertBasicBlockInContext(ir->ctx, cont, "memlens.ns.t1");
    LLVMInstructionRemoveFromParent(call);
    LLVMPositionBuilderAtEnd(ir->b, bb);
    LLVMSetCurrentDebugLocation2(ir->b, loc);
    timed = LLVMBuildICmp(ir->b, LLVMIntNE, LLVMBuildLoad2(ir->b, ir->t_i32, ir->g_timed, ""),
                          LLVMConstInt(ir->t_i32, 0, 0), "");
    LLVMBuildCondBr(ir->b, timed, pre, callbb);
    LLVMPositionBuilderAtEnd(ir->b, pre);
    t0 = LLVMBuildCall2(ir->b, rcc_t, rcc, NULL, 0, "");
    LLVMBuildBr(ir->b, callbb);
    LLVMPositionBuilderAtEnd(ir->b, callbb);
    t0p = LLVMBuildPhi(ir->b, ir->t_i64, "");
    in[0] = t0;
    in[1] = LLVMConstInt(ir->t_i64, 0, 0);
    from[0] = pre;
    from[1] = bb;
    LLVMAddIncoming(t0p, in, from, 2);
    LLVMInsertIntoBuilder(ir->b, call);
    LLVMBuildCondBr(ir->b, timed, post, cont);
    LLVMPositionBuilderAtEnd(ir->b, post);
    t1 = LLVMBuildCall2(ir->b, rcc_t, rcc, NULL, 0, "");
    idx = LLVMConstInt(ir->t_i64, unit, 0);
    p = LLVMConstGEP2(ir->t_i64, ir->ctr_ph, &idx, 1);
    v = LLVMBuildLoad2(ir->b, ir->t_i64, p, "");
    LLVMBuildStore(ir->b, LLVMBuildAdd(ir->b, v, LLVMBuildSub(ir->b, t1, t0p, ""), ""), p);
    LLVMBuildBr(ir->b, cont);
    LLVMSetCurrentDebugLocation2(ir->b, NULL);
}

/*
 * The runtime's region clock (src/runtime/clock.h): rdtsc on x86-64, which
 * llvm.readcyclecounter is; on AArch64 that intrinsic reads pmccntr_el0, which
 * user code may not (SIGILL), so the virtual counter as the runtime reads it.
 */
static LLVMValueRef clock_fn(struct ml_ir *ir, LLVMTypeRef t)
{
    static char aarch64_asm[] = "isb; mrs $0, cntvct_el0", cons[] = "=r";
    LLVMValueRef f;

    if (!strncmp(LLVMGetTarget(ir->m), "aarch64", 7))
        return LLVMGetInlineAsm(t, aarch64_asm, sizeof(aarch64_asm) - 1, cons, sizeof(cons) - 1, 1,
                                0, LLVMInlineAsmDialectATT, 0);
    f = LLVMGetNamedFunction(ir->m, "llvm.readcyclecounter");
    return f ? f : LLVMAddFunction(ir->m, "llvm.readcyclecounter", t);
}

int ml_late_calls(struct ml_ir *ir)
{
    LLVMTypeRef rcc_t = LLVMFunctionType(ir->t_i64, NULL, 0, 0);
    LLVMValueRef rcc = NULL;

    for (size_t i = 0; i < ir->nlate; i++) {
        const struct ml_late *l = &ir->late[i];
        if (l->regset != ML_NOSET)
            ml_dyn_wrap_call(ir, l->call, l->regset, l->mult);
        if (l->ticks == UINT32_MAX)
            continue;
        if (!rcc)
            rcc = clock_fn(ir, rcc_t);
        clock_call(ir, l->call, l->ticks, rcc, rcc_t);
    }
    return 0;
}
