/* Static facts of LLVM instructions: instruction class, memory operations and bytes by class. */
#include "instrument/ir/ir.h"

#include <string.h>

static int name_is(LLVMValueRef fn, const char *want);

/*
 * Functions whose result is a fresh heap block. A result marked noalias is one
 * too (a fresh object that nothing else points to: the allocator's).
 */
static const char *const allocators[] = {
    "malloc",
    "calloc",
    "realloc",
    "reallocarray",
    "aligned_alloc",
    "memalign",
    "valloc",
    "pvalloc",
    "strdup",
    "strndup",
    "_Znwm",
    "_Znam",
    "_ZnwmRKSt9nothrow_t",
    "_ZnamRKSt9nothrow_t",
    "_ZnwmSt11align_val_t",
    "_ZnamSt11align_val_t",
    "_ZnwmSt11align_val_tRKSt9nothrow_t",
    "_ZnamSt11align_val_tRKSt9nothrow_t",
};

static int allocates(LLVMValueRef call)
{
    LLVMValueRef fn = ml_called_function(call);
    unsigned noalias = LLVMGetEnumAttributeKindForName("noalias", 7);

    if (LLVMGetCallSiteEnumAttribute(call, LLVMAttributeReturnIndex, noalias))
        return 1;
    if (!fn)
        return 0;
    if (LLVMGetEnumAttributeAtIndex(fn, LLVMAttributeReturnIndex, noalias))
        return 1;
    for (size_t i = 0; i < sizeof(allocators) / sizeof(allocators[0]); i++)
        if (name_is(fn, allocators[i]))
            return 1;
    return 0;
}

/* Position of argument a among its function's parameters. */
static unsigned arg_index(LLVMValueRef a)
{
    LLVMValueRef fn = LLVMGetParamParent(a);
    unsigned n = LLVMCountParams(fn);

    for (unsigned i = 0; i < n; i++)
        if (LLVMGetParam(fn, i) == a)
            return i;
    return n;
}

/* Phis and selects being walked (the path from the pointer asked about), at most ML_WALK deep. */
#define ML_WALK 8
struct walk {
    LLVMValueRef open[ML_WALK];
    int n;
};

/* origin_walk's answer for a phi or select already being walked: it adds no class of its own. */
#define ML_CYCLE (-1)

/*
 * Walks through address arithmetic and casts to the object a pointer is based
 * on. Allocas are stack, globals global, fresh allocations heap, arguments what
 * the function's signature says (ir->argsig: clones made for calls whose
 * arguments were known); anything else (loaded pointers, other calls, unknown
 * arguments, inttoptr, phis that mix classes) is ML_DYNAMIC, *base being the
 * value whose address decides at run time. A phi or select is as provable as
 * its inputs agree; one reached again through its own inputs (pointers swapped
 * or advanced round a loop) only passes on values of the other inputs, so it
 * adds no class (ML_CYCLE): the walk that opened it still checks all of them.
 */
static int origin_walk(const struct ml_ir *ir, LLVMValueRef p, LLVMValueRef *base, struct walk *w)
{
    *base = NULL;
    while (p) {
        if (LLVMIsAAllocaInst(p))
            return ML_STACK;
        if (LLVMIsAGlobalVariable(p))
            return ML_GLOBAL;
        if (LLVMIsAGlobalAlias(p)) {
            p = LLVMAliasGetAliasee(p);
            continue;
        }
        if (LLVMIsAGetElementPtrInst(p) || LLVMIsABitCastInst(p) || LLVMIsAAddrSpaceCastInst(p)) {
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
        if (LLVMIsAConstant(p))
            return ML_HEAP; /* null, undef: never dereferenced in a run that completes */
        if ((LLVMIsACallInst(p) || LLVMIsAInvokeInst(p)) && allocates(p))
            return ML_HEAP;
        if (LLVMIsAArgument(p)) {
            unsigned i = arg_index(p);
            uint32_t c = i < 16 ? (ir->argsig >> (2 * i)) & 3 : 0;
            if (c)
                return (enum ml_memclass)(c - 1);
            break;
        }
        if (LLVMIsAPHINode(p) || LLVMIsASelectInst(p)) {
            unsigned n = LLVMIsAPHINode(p) ? LLVMCountIncoming(p) : 2, i;
            int c = ML_CYCLE;
            for (int k = 0; k < w->n; k++)
                if (w->open[k] == p)
                    return ML_CYCLE;
            if (w->n == ML_WALK)
                break;
            w->open[w->n++] = p;
            for (i = 0; i < n; i++) {
                LLVMValueRef in = LLVMIsAPHINode(p) ? LLVMGetIncomingValue(p, i)
                                                    : LLVMGetOperand(p, i + 1),
                             b;
                int ci = origin_walk(ir, in, &b, w);
                if (ci == ML_CYCLE)
                    continue;
                if (ci == ML_DYNAMIC || (c != ML_CYCLE && ci != c))
                    break;
                c = ci;
            }
            w->n--;
            if (i == n)
                return c;
        }
        break;
    }
    *base = p;
    return p ? ML_DYNAMIC : ML_HEAP;
}

/* A pointer whose every input is a cycle (unreachable code) is never dereferenced: heap. */
enum ml_memclass ml_ptr_origin(const struct ml_ir *ir, LLVMValueRef ptr, LLVMValueRef *base)
{
    struct walk w = {.n = 0};
    int c = origin_walk(ir, ptr, base, &w);

    return c == ML_CYCLE ? ML_HEAP : (enum ml_memclass)c;
}

enum ml_memclass ml_ptr_class(LLVMValueRef ptr)
{
    static const struct ml_ir none;
    LLVMValueRef base;
    enum ml_memclass c = ml_ptr_origin(&none, ptr, &base);

    return c == ML_DYNAMIC ? ML_HEAP : c;
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
        name_starts(fn, "llvm.memcpy.inline.") || name_is(fn, "memcpy") || name_is(fn, "memmove") ||
        name_is(fn, "__memcpy_chk") || name_is(fn, "__memmove_chk"))
        return 1;
    if (name_starts(fn, "llvm.memset.") || name_is(fn, "memset") || name_is(fn, "__memset_chk"))
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

/*
 * Bytes of an access through ptr by instruction in: into the facts when the
 * class is static, else (a collector is on) to the collector's entry for the
 * pointer's base, so the instrumenter can count them by the address.
 */
static void mem_access(struct ml_ir *ir, uint64_t *f, LLVMValueRef in, LLVMValueRef ptr,
                       uint64_t bytes, int write)
{
    LLVMValueRef base;
    enum ml_memclass c = ml_ptr_origin(ir, ptr, &base);
    struct ml_dynbytes *d = NULL;

    if (c == ML_DYNAMIC && ir->dyn) {
        for (size_t i = 0; i < ir->ndyn && !d; i++)
            if (ir->dyn[i].base == base)
                d = &ir->dyn[i];
        if (!d && ir->ndyn < ML_MAX_DYN) {
            d = &ir->dyn[ir->ndyn++];
            *d = (struct ml_dynbytes){.base = base, .first = in};
        }
        if (d) {
            *(write ? &d->wr : &d->rd) += bytes;
            return;
        }
    }
    if (c == ML_DYNAMIC)
        c = ML_HEAP;
    f[(write ? ML_F_WR_HEAP : ML_F_RD_HEAP) + c] += bytes;
}

/* Masked and gathered vector accesses count their full width: an upper bound (docs/regions.md). */
static int intrinsic_mem(struct ml_ir *ir, LLVMValueRef call, LLVMValueRef fn, uint64_t *f)
{
    if (name_starts(fn, "llvm.masked.load.") || name_starts(fn, "llvm.masked.gather.")) {
        f[ML_F_LOADS]++;
        mem_access(ir, f, call, LLVMGetOperand(call, 0), store_size(ir, LLVMTypeOf(call)), 0);
        return 1;
    }
    if (name_starts(fn, "llvm.masked.store.") || name_starts(fn, "llvm.masked.scatter.")) {
        LLVMValueRef v = LLVMGetOperand(call, 0);
        f[ML_F_STORES]++;
        mem_access(ir, f, call, LLVMGetOperand(call, 1), store_size(ir, LLVMTypeOf(v)), 1);
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
        mem_access(ir, f, inst, LLVMGetOperand(inst, 0), n, 1);
        if (mk == 1) {
            f[ML_F_LOADS]++;
            mem_access(ir, f, inst, LLVMGetOperand(inst, 1), n, 0);
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

    /* The dynamic context word is memlens', not the program's (dyn.c sets it around calls). */
    if (ir->g_dctx && ((op == LLVMLoad && LLVMGetOperand(inst, 0) == ir->g_dctx) ||
                       (op == LLVMStore && LLVMGetOperand(inst, 1) == ir->g_dctx)))
        return 0;

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
        mem_access(ir, f, inst, LLVMGetOperand(inst, 0), store_size(ir, t), 0);
        break;
    case LLVMStore: {
        LLVMValueRef v = LLVMGetOperand(inst, 0);
        t = LLVMTypeOf(v);
        f[ML_F_STORES]++;
        f[ML_F_I_MEM]++;
        mem_access(ir, f, inst, LLVMGetOperand(inst, 1), store_size(ir, t), 1);
        break;
    }
    case LLVMAtomicRMW:
    case LLVMAtomicCmpXchg: {
        /* Both read and write their location; a failed compare-exchange still locks the line. */
        uint64_t n = store_size(ir, op == LLVMAtomicRMW ? t : LLVMTypeOf(LLVMGetOperand(inst, 1)));
        f[ML_F_LOADS]++;
        f[ML_F_STORES]++;
        f[ML_F_I_MEM]++;
        mem_access(ir, f, inst, LLVMGetOperand(inst, 0), n, 0);
        mem_access(ir, f, inst, LLVMGetOperand(inst, 0), n, 1);
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
