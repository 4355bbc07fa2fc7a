/* Function cloning on LLVM-C, which has no CloneFunction: copy blocks, then remap operands. */
#include "instrument/ir/ir.h"

#include <llvm-c/DebugInfo.h>
#include <stdlib.h>
#include <string.h>

/* Blocks whose address is taken (indirectbr, callbr) cannot be remapped through LLVM-C. */
int ml_can_clone(LLVMValueRef fn)
{
    if (LLVMIsDeclaration(fn) || LLVMGetIntrinsicID(fn))
        return 0;
    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb)) {
        LLVMValueRef term = LLVMGetBasicBlockTerminator(bb);
        if (!term)
            return 0;
        LLVMOpcode op = LLVMGetInstructionOpcode(term);
        if (op == LLVMIndirectBr || op == LLVMCallBr)
            return 0;
    }
    return 1;
}

static void copy_attrs(LLVMValueRef from, LLVMValueRef to, LLVMAttributeIndex idx)
{
    unsigned n = LLVMGetAttributeCountAtIndex(from, idx);
    LLVMAttributeRef attrs[n ? n : 1];

    if (!n)
        return;
    LLVMGetAttributesAtIndex(from, idx, attrs);
    for (unsigned i = 0; i < n; i++)
        LLVMAddAttributeAtIndex(to, idx, attrs[i]);
}

static int is_dbg_intrinsic(LLVMValueRef inst)
{
    LLVMValueRef fn;
    size_t len;
    const char *name;

    if (!LLVMIsACallInst(inst))
        return 0;
    fn = ml_called_function(inst);
    if (!fn)
        return 0;
    name = LLVMGetValueName2(fn, &len);
    return len > 9 && memcmp(name, "llvm.dbg.", 9) == 0;
}

LLVMValueRef ml_clone_function(struct ml_ir *ir, LLVMValueRef fn, const char *name)
{
    LLVMValueRef nf = LLVMAddFunction(ir->m, name, LLVMGlobalGetValueType(fn));
    unsigned nparams = LLVMCountParams(fn);
    struct ml_ptrmap map;
    LLVMBasicBlockRef bb;

    ml_ptrmap_init(&map);
    LLVMSetLinkage(nf, LLVMInternalLinkage);
    LLVMSetFunctionCallConv(nf, LLVMGetFunctionCallConv(fn));
    if (LLVMHasPersonalityFn(fn))
        LLVMSetPersonalityFn(nf, LLVMGetPersonalityFn(fn));
    copy_attrs(fn, nf, LLVMAttributeFunctionIndex);
    copy_attrs(fn, nf, LLVMAttributeReturnIndex);
    for (unsigned i = 0; i < nparams; i++) {
        LLVMValueRef p = LLVMGetParam(fn, i), np = LLVMGetParam(nf, i);
        size_t len;
        const char *pn = LLVMGetValueName2(p, &len);
        copy_attrs(fn, nf, i + 1);
        LLVMSetValueName2(np, pn, len);
        if (ml_ptrmap_put(&map, p, np))
            goto nomem;
    }
    for (bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb)) {
        LLVMBasicBlockRef nb = LLVMAppendBasicBlockInContext(ir->ctx, nf, LLVMGetBasicBlockName(bb));
        if (ml_ptrmap_put(&map, LLVMBasicBlockAsValue(bb), LLVMBasicBlockAsValue(nb)))
            goto nomem;
    }
    /* Pass 1: copy instructions; phis start empty because their blocks are not operands. */
    for (bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb)) {
        LLVMBasicBlockRef nb = LLVMValueAsBasicBlock(ml_ptrmap_get(&map, LLVMBasicBlockAsValue(bb)));
        LLVMPositionBuilderAtEnd(ir->b, nb);
        for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in; in = LLVMGetNextInstruction(in)) {
            LLVMValueRef ni;
            size_t len;
            const char *iname;
            if (is_dbg_intrinsic(in))
                continue;
            iname = LLVMGetValueName2(in, &len);
            if (LLVMIsAPHINode(in)) {
                ni = LLVMBuildPhi(ir->b, LLVMTypeOf(in), "");
            } else {
                ni = LLVMInstructionClone(in);
                LLVMInsertIntoBuilder(ir->b, ni);
            }
            if (len)
                LLVMSetValueName2(ni, iname, len);
            if (ml_ptrmap_put(&map, in, ni))
                goto nomem;
        }
    }
    /* Pass 2: point operands at the copies. */
    for (bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb)) {
        for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in; in = LLVMGetNextInstruction(in)) {
            LLVMValueRef ni = ml_ptrmap_get(&map, in);
            if (!ni)
                continue;
            if (LLVMIsAPHINode(in)) {
                unsigned n = LLVMCountIncoming(in);
                for (unsigned i = 0; i < n; i++) {
                    LLVMValueRef v = LLVMGetIncomingValue(in, i), nv = ml_ptrmap_get(&map, v);
                    LLVMBasicBlockRef ib = LLVMGetIncomingBlock(in, i);
                    LLVMValueRef nbv = ml_ptrmap_get(&map, LLVMBasicBlockAsValue(ib));
                    LLVMBasicBlockRef nib = LLVMValueAsBasicBlock(nbv);
                    LLVMValueRef val = nv ? nv : v;
                    LLVMAddIncoming(ni, &val, &nib, 1);
                }
                continue;
            }
            int nops = LLVMGetNumOperands(in);
            for (int i = 0; i < nops; i++) {
                LLVMValueRef v = LLVMGetOperand(in, i), nv;
                if (!v)
                    continue;
                nv = ml_ptrmap_get(&map, v);
                if (nv)
                    LLVMSetOperand(ni, (unsigned)i, nv);
            }
        }
    }
    ml_ptrmap_free(&map);
    return nf;
nomem:
    ml_ptrmap_free(&map);
    LLVMDeleteFunction(nf);
    return NULL;
}

void ml_strip_debug(LLVMValueRef fn)
{
    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb)) {
        LLVMValueRef in = LLVMGetFirstInstruction(bb);
        while (in) {
            LLVMValueRef next = LLVMGetNextInstruction(in);
            if (is_dbg_intrinsic(in))
                LLVMInstructionEraseFromParent(in);
            else
                LLVMInstructionSetDebugLoc(in, NULL);
            in = next;
        }
    }
}
