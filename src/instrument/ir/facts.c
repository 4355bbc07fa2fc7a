/* Static facts of LLVM instructions: instruction class, memory operations and bytes by class. */
#include "instrument/ir/ir.h"

#include <string.h>

/* Walks through address arithmetic and casts to the object a pointer is based on. */
static enum ml_memclass ptr_class_depth(LLVMValueRef p, int depth)
{
    while (p) {
        if (LLVMIsAAllocaInst(p))
            return ML_STACK;
        if (LLVMIsAGlobalVariable(p))
            return ML_GLOBAL;
        if (LLVMIsAGlobalAlias(p)) {
            p = LLVMAliasGetAliasee(p);
            continue;
        }
        if (LLVMIsAGetElementPtrInst(p) || LLVMIsABitCastInst(p) ||
            LLVMIsAAddrSpaceCastInst(p)) {
            p = LLVMGetOperand(p, 0);
            continue;
        }
        if (LLVMIsAConstantExpr(p)) {
            LLVMOpcode op = LLVMGetConstOpcode(p);
            if (op == LLVMGetElementPtr || op == LLVMBitCast || op == LLVMAddrSpaceCast) {
                p = LLVMGetOperand(p, 0);
                continue;
            }
            return ML_HEAP;
        }
        /* A phi or select is as provable as all of its inputs agree. */
        if ((LLVMIsAPHINode(p) || LLVMIsASelectInst(p)) && depth < 8) {
            unsigned n = LLVMIsAPHINode(p) ? LLVMCountIncoming(p) : 2;
            enum ml_memclass c = ML_HEAP;
            for (unsigned i = 0; i < n; i++) {
                LLVMValueRef in = LLVMIsAPHINode(p) ? LLVMGetIncomingValue(p, i)
                                                     : LLVMGetOperand(p, i + 1);
                enum ml_memclass ci;
                if (in == p)
                    continue;
                ci = ptr_class_depth(in, depth + 1);
                if (ci == ML_HEAP || (i > 0 && ci != c))
                    return ML_HEAP;
                c = ci;
            }
            return c;
        }
        return ML_HEAP;
    }
    return ML_HEAP;
}

enum ml_memclass ml_ptr_class(LLVMValueRef ptr)
{
    return ptr_class_depth(ptr, 0);
}

LLVMValueRef ml_called_function(LLVMValueRef call)
{
    LLVMValueRef v = LLVMGetCalledValue(call);

    while (v && LLVMIsAConstantExpr(v) && LLVMGetConstOpcode(v) == LLVMBitCast)
        v = LLVMGetOperand(v, 0);
    if (v && LLVMIsAGlobalAlias(v))
        v = LLVMAliasGetAliasee(v);
    return v && LLVMIsAFunction(v) ? v : NULL;
}

static int name_is(LLVMValueRef fn, const char *want)
{
    size_t len;
    const char *name = LLVMGetValueName2(fn, &len);

    return strlen(want) == len && memcmp(name, want, len) == 0;
}

static int name_starts(LLVMValueRef fn, const char *prefix)
{
    size_t len;
    const char *name = LLVMGetValueName2(fn, &len);

    return len >= strlen(prefix) && memcmp(name, prefix, strlen(prefix)) == 0;
}

int ml_mem_call_kind(LLVMValueRef call)
{
    LLVMValueRef fn = ml_called_function(call);

    if (!fn)
        return 0;
    if (name_starts(fn, "llvm.memcpy.") || name_starts(fn, "llvm.memmove.") ||
        name_starts(fn, "llvm.memcpy.inline.") || name_is(fn, "memcpy") ||
        name_is(fn, "memmove"))
        return 1;
    if (name_starts(fn, "llvm.memset.") || name_is(fn, "memset"))
        return 2;
    return 0;
}

/* Intrinsics that generate no code: never counted as instructions. */
int ml_is_ignored_call(LLVMValueRef call)
{
    LLVMValueRef fn = ml_called_function(call);

    return fn && (name_starts(fn, "llvm.dbg.") || name_starts(fn, "llvm.lifetime.") ||
                  name_starts(fn, "llvm.assume") || name_starts(fn, "llvm.invariant.") ||
                  name_starts(fn, "llvm.experimental.noalias.scope.decl") ||
                  name_starts(fn, "llvm.pseudoprobe") || name_starts(fn, "llvm.var.annotation") ||
                  name_starts(fn, "llvm.donothing") || name_starts(fn, "llvm.sideeffect") ||
                  name_starts(fn, "llvm.annotation."));
}

static uint64_t store_size(struct ml_ir *ir, LLVMTypeRef t)
{
    return LLVMStoreSizeOfType(ir->td, t);
}

static int is_fp(LLVMTypeRef t)
{
    if (LLVMGetTypeKind(t) == LLVMVectorTypeKind)
        t = LLVMGetElementType(t);
    switch (LLVMGetTypeKind(t)) {
    case LLVMHalfTypeKind:
    case LLVMBFloatTypeKind:
    case LLVMFloatTypeKind:
    case LLVMDoubleTypeKind:
    case LLVMX86_FP80TypeKind:
    case LLVMFP128TypeKind:
    case LLVMPPC_FP128TypeKind:
        return 1;
    default:
        return 0;
    }
}

static int is_vec(LLVMTypeRef t)
{
    LLVMTypeKind k = LLVMGetTypeKind(t);
    return k == LLVMVectorTypeKind || k == LLVMScalableVectorTypeKind;
}

static void mem_read(uint64_t *f, enum ml_memclass c, uint64_t bytes)
{
    f[ML_F_RD_HEAP + c] += bytes;
}

static void mem_write(uint64_t *f, enum ml_memclass c, uint64_t bytes)
{
    f[ML_F_WR_HEAP + c] += bytes;
}

/* Masked and gathered vector accesses count their full width: an upper bound (docs/regions.md). */
static int intrinsic_mem(struct ml_ir *ir, LLVMValueRef call, LLVMValueRef fn, uint64_t *f)
{
    if (name_starts(fn, "llvm.masked.load.") || name_starts(fn, "llvm.masked.gather.")) {
        f[ML_F_LOADS]++;
        mem_read(f, ml_ptr_class(LLVMGetOperand(call, 0)), store_size(ir, LLVMTypeOf(call)));
        return 1;
    }
    if (name_starts(fn, "llvm.masked.store.") || name_starts(fn, "llvm.masked.scatter.")) {
        LLVMValueRef v = LLVMGetOperand(call, 0);
        f[ML_F_STORES]++;
        mem_write(f, ml_ptr_class(LLVMGetOperand(call, 1)), store_size(ir, LLVMTypeOf(v)));
        return 1;
    }
    return 0;
}

static void call_facts(struct ml_ir *ir, LLVMValueRef inst, uint64_t *f)
{
    LLVMValueRef fn = ml_called_function(inst);
    int mk = ml_mem_call_kind(inst);

    if (mk) {
        /* Constant sizes are static bytes; variable sizes are added by a bytes unit. */
        LLVMValueRef len = LLVMGetOperand(inst, 2);
        uint64_t n = LLVMIsAConstantInt(len) ? LLVMConstIntGetZExtValue(len) : 0;
        f[ML_F_I_MEM]++;
        f[ML_F_STORES]++;
        mem_write(f, ml_ptr_class(LLVMGetOperand(inst, 0)), n);
        if (mk == 1) {
            f[ML_F_LOADS]++;
            mem_read(f, ml_ptr_class(LLVMGetOperand(inst, 1)), n);
        }
        if (!fn || LLVMGetIntrinsicID(fn) == 0)
            f[ML_F_I_CALL]++;
        return;
    }
    if (fn && LLVMGetIntrinsicID(fn)) {
        if (intrinsic_mem(ir, inst, fn, f)) {
            f[ML_F_I_MEM]++;
            return;
        }
        /* Other intrinsics are arithmetic (sqrt, fma, min, ctpop, ...), classed by type. */
        LLVMTypeRef t = LLVMTypeOf(inst);
        if (LLVMGetTypeKind(t) == LLVMVoidTypeKind)
            f[ML_F_I_OTHER]++;
        else if (is_fp(t))
            f[ML_F_I_FP]++;
        else
            f[ML_F_I_INT]++;
        return;
    }
    f[ML_F_I_CALL]++;
}

int ml_facts_add(struct ml_ir *ir, LLVMValueRef inst, uint64_t *f)
{
    LLVMOpcode op = LLVMGetInstructionOpcode(inst);
    LLVMTypeRef t = LLVMTypeOf(inst);

    switch (op) {
    case LLVMCall:
        if (ml_is_ignored_call(inst))
            return 0;
        call_facts(ir, inst, f);
        break;
    case LLVMInvoke:
        call_facts(ir, inst, f);
        f[ML_F_I_BRANCH]++;
        break;
    case LLVMLoad:
        f[ML_F_LOADS]++;
        f[ML_F_I_MEM]++;
        mem_read(f, ml_ptr_class(LLVMGetOperand(inst, 0)), store_size(ir, t));
        break;
    case LLVMStore: {
        LLVMValueRef v = LLVMGetOperand(inst, 0);
        t = LLVMTypeOf(v);
        f[ML_F_STORES]++;
        f[ML_F_I_MEM]++;
        mem_write(f, ml_ptr_class(LLVMGetOperand(inst, 1)), store_size(ir, t));
        break;
    }
    case LLVMAtomicRMW:
    case LLVMAtomicCmpXchg: {
        /* Both read and write their location; a failed compare-exchange still locks the line. */
        enum ml_memclass c = ml_ptr_class(LLVMGetOperand(inst, 0));
        uint64_t n = store_size(ir, op == LLVMAtomicRMW ? t : LLVMTypeOf(LLVMGetOperand(inst, 1)));
        f[ML_F_LOADS]++;
        f[ML_F_STORES]++;
        f[ML_F_I_MEM]++;
        mem_read(f, c, n);
        mem_write(f, c, n);
        break;
    }
    case LLVMFence:
        f[ML_F_I_MEM]++;
        break;
    case LLVMUnreachable:
        return 0;
    case LLVMRet:
    case LLVMBr:
    case LLVMSwitch:
    case LLVMIndirectBr:
    case LLVMResume:
    case LLVMCallBr:
    case LLVMCleanupRet:
    case LLVMCatchRet:
    case LLVMCatchSwitch:
        f[ML_F_I_BRANCH]++;
        break;
    case LLVMFNeg:
    case LLVMFAdd:
    case LLVMFSub:
    case LLVMFMul:
    case LLVMFDiv:
    case LLVMFRem:
    case LLVMFCmp:
    case LLVMFPToUI:
    case LLVMFPToSI:
    case LLVMUIToFP:
    case LLVMSIToFP:
    case LLVMFPTrunc:
    case LLVMFPExt:
        f[ML_F_I_FP]++;
        break;
    case LLVMAdd:
    case LLVMSub:
    case LLVMMul:
    case LLVMUDiv:
    case LLVMSDiv:
    case LLVMURem:
    case LLVMSRem:
    case LLVMShl:
    case LLVMLShr:
    case LLVMAShr:
    case LLVMAnd:
    case LLVMOr:
    case LLVMXor:
    case LLVMICmp:
    case LLVMTrunc:
    case LLVMZExt:
    case LLVMSExt:
        f[ML_F_I_INT]++;
        break;
    default:
        f[ML_F_I_OTHER]++;
        break;
    }
    if (is_vec(t) || (op == LLVMStore && is_vec(LLVMTypeOf(LLVMGetOperand(inst, 0)))))
        f[ML_F_I_VEC]++;
    f[ML_F_INSTR]++;
    return 1;
}
