/* Dynamic attribution: code reached by calls the static region sets miss counts for the regions
 * open at run time (docs/regions.md, "Dynamic attribution"). */
#include "instrument/ir/ir.h"
#include "runtime/abi.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* An external thread-local i32 of the runtime, accessed in the initial-exec model. */
static LLVMValueRef runtime_tls(struct ml_ir *ir, const char *name)
{
    LLVMValueRef g = LLVMGetNamedGlobal(ir->m, name);

    if (!g) {
        g = LLVMAddGlobal(ir->m, ir->t_i32, name);
        LLVMSetThreadLocal(g, 1);
        LLVMSetThreadLocalMode(g, LLVMInitialExecTLSModel);
    }
    return g;
}

int ml_dyn_setup(struct ml_ir *ir)
{
    uint32_t none = 0;
    LLVMTypeRef params[2] = {ir->t_i8p, ir->t_i32};

    ir->g_timed = runtime_tls(ir, "__memlens_timed");
    ir->dynset = ML_NOSET;
    /* All-blocks mode counts that code in place already; exact mode checks static facts. */
    if (ir->o && (ir->o->all || ir->o->exact))
        return 0;
    ir->g_dctx = runtime_tls(ir, "__memlens_dctx");
    ir->setids_ph = LLVMAddGlobal(ir->m, ir->t_i32, "__memlens_setids.placeholder");
    ir->ty_dynblock = LLVMFunctionType(ir->t_i64p, params, 2, 0);
    ir->f_dynblock = LLVMGetNamedFunction(ir->m, "__memlens_dyn_block");
    if (!ir->f_dynblock)
        ir->f_dynblock = LLVMAddFunction(ir->m, "__memlens_dyn_block", ir->ty_dynblock);
    return ml_regset_intern(ir, &none, 0, &ir->dynset);
}

static int has_attr(LLVMValueRef fn, LLVMAttributeIndex idx, const char *name)
{
    return LLVMGetEnumAttributeAtIndex(fn, idx,
                                       LLVMGetEnumAttributeKindForName(name, strlen(name))) != NULL;
}

/* A use of fn other than as the callee of a call: its address escapes. */
static int address_taken(LLVMValueRef fn)
{
    for (LLVMUseRef u = LLVMGetFirstUse(fn); u; u = LLVMGetNextUse(u)) {
        LLVMValueRef user = LLVMGetUser(u);
        if ((LLVMIsACallInst(user) || LLVMIsAInvokeInst(user)) && LLVMGetCalledValue(user) == fn)
            continue;
        return 1;
    }
    return 0;
}

int ml_dyn_wanted(struct ml_ir *ir, LLVMValueRef fn)
{
    LLVMLinkage l = LLVMGetLinkage(fn);
    size_t len;
    const char *name = LLVMGetValueName2(fn, &len);
    unsigned n = LLVMCountParams(fn);

    if (ir->dynset == ML_NOSET || LLVMIsDeclaration(fn) || LLVMGetIntrinsicID(fn) ||
        ml_ptrmap_get(&ir->generated, fn) || !ml_can_clone(fn) ||
        LLVMIsFunctionVarArg(LLVMGlobalGetValueType(fn)) || l == LLVMAvailableExternallyLinkage ||
        (len == 4 && !memcmp(name, "main", 4)) || (len >= 9 && !memcmp(name, "__memlens", 9)) ||
        has_attr(fn, LLVMAttributeFunctionIndex, "naked") ||
        has_attr(fn, LLVMAttributeFunctionIndex, "returns_twice"))
        return 0;
    /* Arguments passed by value in memory cannot be forwarded by a plain call. */
    for (unsigned i = 0; i < n; i++)
        if (has_attr(fn, i + 1, "byval") || has_attr(fn, i + 1, "inalloca") ||
            has_attr(fn, i + 1, "preallocated"))
            return 0;
    /*
     * Reachable by a call the static sets miss: its address escapes (function pointers,
     * vtables, callbacks), or other modules may call it (external, not an inline function,
     * of which every module keeps its own copy).
     */
    return address_taken(fn) ||
           (l == LLVMExternalLinkage || l == LLVMWeakAnyLinkage || l == LLVMExternalWeakLinkage);
}

/* Builds at the end of head, a new entry block before entry: entry's allocas move there. */
static void new_head(struct ml_ir *ir, LLVMBasicBlockRef head, LLVMBasicBlockRef entry)
{
    LLVMPositionBuilderAtEnd(ir->b, head);
    LLVMSetCurrentDebugLocation2(ir->b, NULL);
    for (LLVMValueRef a = LLVMGetFirstInstruction(entry); a && LLVMIsAAllocaInst(a);) {
        LLVMValueRef next = LLVMGetNextInstruction(a);
        LLVMInstructionRemoveFromParent(a);
        LLVMInsertIntoBuilder(ir->b, a);
        a = next;
    }
}

/*
 * The entry of a function counted under the dynamic context: the counter block
 * of this thread, module and open region set, computed in new blocks before
 * the entry (the function's allocas move along, to stay static). Two words of
 * the module block cache the last set and its block; on a miss the runtime
 * finds or makes the block.
 */
LLVMValueRef ml_dyn_base(struct ml_ir *ir, LLVMValueRef fn)
{
    LLVMBasicBlockRef entry = LLVMGetEntryBasicBlock(fn);
    LLVMBasicBlockRef head = LLVMInsertBasicBlockInContext(ir->ctx, entry, "memlens.dyn");
    LLVMBasicBlockRef miss = LLVMInsertBasicBlockInContext(ir->ctx, entry, "memlens.dyn.miss");
    LLVMBasicBlockRef join = LLVMInsertBasicBlockInContext(ir->ctx, entry, "memlens.dyn.base");
    LLVMValueRef idx2 = LLVMConstInt(ir->t_i64, 2, 0), idx3 = LLVMConstInt(ir->t_i64, 3, 0);
    LLVMValueRef d, cd, cb, hit, slow, phi, args[2], in[2];
    LLVMBasicBlockRef from[2] = {head, miss};

    new_head(ir, head, entry);
    d = LLVMBuildZExt(ir->b, LLVMBuildLoad2(ir->b, ir->t_i32, ir->g_dctx, ""), ir->t_i64, "");
    cd = LLVMBuildLoad2(ir->b, ir->t_i64, LLVMConstGEP2(ir->t_i64, ir->stk_ph, &idx2, 1), "");
    cb = LLVMBuildLoad2(ir->b, ir->t_i64, LLVMConstGEP2(ir->t_i64, ir->stk_ph, &idx3, 1), "");
    hit = LLVMBuildAnd(ir->b, LLVMBuildICmp(ir->b, LLVMIntEQ, d, cd, ""),
                       LLVMBuildICmp(ir->b, LLVMIntNE, d, LLVMConstInt(ir->t_i64, 0, 0), ""), "");
    LLVMBuildCondBr(ir->b, hit, join, miss);
    LLVMPositionBuilderAtEnd(ir->b, miss);
    args[0] = ir->desc_ph;
    args[1] = LLVMBuildTrunc(ir->b, d, ir->t_i32, "");
    slow = LLVMBuildCall2(ir->b, ir->ty_dynblock, ir->f_dynblock, args, 2, "");
    LLVMBuildBr(ir->b, join);
    LLVMPositionBuilderAtEnd(ir->b, join);
    phi = LLVMBuildPhi(ir->b, ir->t_i64p, "memlens.base");
    in[0] = LLVMBuildIntToPtr(ir->b, cb, ir->t_i64p, "");
    in[1] = slow;
    LLVMInstructionRemoveFromParent(in[0]);
    LLVMPositionBuilderBefore(ir->b, LLVMGetBasicBlockTerminator(head));
    LLVMInsertIntoBuilder(ir->b, in[0]);
    LLVMAddIncoming(phi, in, from, 2);
    LLVMPositionBuilderAtEnd(ir->b, join);
    LLVMBuildBr(ir->b, entry);
    return phi;
}

/*
 * The original fn, reached by a call the static sets miss while regions are
 * open on the thread (the runtime's dynamic context is set), runs its copy
 * counted under that context instead: a test at its entry.
 */
void ml_dyn_entry_check(struct ml_ir *ir, LLVMValueRef fn, LLVMValueRef dyn)
{
    LLVMBasicBlockRef entry = LLVMGetEntryBasicBlock(fn);
    LLVMBasicBlockRef head = LLVMInsertBasicBlockInContext(ir->ctx, entry, "memlens.dyncheck");
    LLVMBasicBlockRef go = LLVMInsertBasicBlockInContext(ir->ctx, entry, "memlens.dyncall");
    unsigned n = LLVMCountParams(fn);
    LLVMValueRef args[n + 1], call, d;
    LLVMTypeRef fty = LLVMGlobalGetValueType(fn);

    new_head(ir, head, entry);
    d = LLVMBuildLoad2(ir->b, ir->t_i32, ir->g_dctx, "");
    LLVMBuildCondBr(ir->b, LLVMBuildICmp(ir->b, LLVMIntNE, d, LLVMConstInt(ir->t_i32, 0, 0), ""),
                    go, entry);
    LLVMPositionBuilderAtEnd(ir->b, go);
    for (unsigned i = 0; i < n; i++)
        args[i] = LLVMGetParam(fn, i);
    call = LLVMBuildCall2(ir->b, fty, dyn, args, n, "");
    LLVMSetInstructionCallConv(call, LLVMGetFunctionCallConv(dyn));
    LLVMSetTailCall(call, 1);
    if (LLVMGetTypeKind(LLVMGetReturnType(fty)) == LLVMVoidTypeKind)
        LLVMBuildRetVoid(ir->b);
    else
        LLVMBuildRet(ir->b, call);
}

/*
 * Around a call from region code (set regset) that the static sets miss, the
 * thread's dynamic context names that set, so instrumented code the call
 * reaches counts for it; the previous context comes back after the call. An
 * invoke whose unwind block other calls share keeps the context on that path:
 * the region's own exits still close it (the context is not a region state).
 */
void ml_dyn_wrap_call(struct ml_ir *ir, LLVMValueRef call, uint32_t regset, int mult)
{
    LLVMValueRef idx = LLVMConstInt(ir->t_i64, regset, 0), old, sid;

    LLVMPositionBuilderBefore(ir->b, call);
    old = LLVMBuildLoad2(ir->b, ir->t_i32, ir->g_dctx, "");
    sid = LLVMBuildLoad2(ir->b, ir->t_i32, LLVMConstGEP2(ir->t_i32, ir->setids_ph, &idx, 1), "");
    if (mult) /* an unmeasured execution of code that is not versioned: no context */
        sid = LLVMBuildMul(
            ir->b, sid,
            LLVMBuildTrunc(ir->b, LLVMBuildLoad2(ir->b, ir->t_i64, ir->mult_ph, ""), ir->t_i32, ""),
            "");
    LLVMBuildStore(ir->b, sid, ir->g_dctx);
    if (LLVMIsACallInst(call)) {
        LLVMValueRef next = LLVMGetNextInstruction(call);
        LLVMPositionBuilderBefore(ir->b, next);
        LLVMBuildStore(ir->b, old, ir->g_dctx);
        return;
    }
    {
        LLVMBasicBlockRef bb = LLVMGetInstructionParent(call), nd = LLVMGetNormalDest(call);
        LLVMBasicBlockRef ud = LLVMGetUnwindDest(call), sb;
        LLVMValueRef pad = LLVMGetFirstInstruction(ud);
        unsigned preds = 0;

        sb = LLVMInsertBasicBlockInContext(ir->ctx, nd, "memlens.dctx");
        LLVMPositionBuilderAtEnd(ir->b, sb);
        LLVMBuildStore(ir->b, old, ir->g_dctx);
        LLVMBuildBr(ir->b, nd);
        LLVMSetNormalDest(call, sb);
        ml_phis_retarget(ir, nd, bb, sb);
        for (LLVMUseRef u = LLVMGetFirstUse(LLVMBasicBlockAsValue(ud)); u; u = LLVMGetNextUse(u))
            preds++;
        if (preds == 1 && pad && LLVMGetNextInstruction(pad)) {
            LLVMPositionBuilderBefore(ir->b, LLVMGetNextInstruction(pad));
            LLVMBuildStore(ir->b, old, ir->g_dctx);
        }
    }
}
