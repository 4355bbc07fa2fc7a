/* Work of code inlined from other functions: shares of units by inlined function, for --top. */
#include "instrument/ir/ir.h"

#include <errno.h>
#include <llvm-c/DebugInfo.h>
#include <stdlib.h>
#include <string.h>

/* Operand i of metadata node md (the LLVM-C API has no getters for a subprogram's fields). */
static LLVMValueRef md_operand(LLVMContextRef ctx, LLVMMetadataRef md, unsigned i)
{
    LLVMValueRef v = LLVMMetadataAsValue(ctx, md), ops[16];
    unsigned n = LLVMGetMDNodeNumOperands(v);

    if (i >= n || n > 16)
        return NULL;
    LLVMGetMDNodeOperands(v, ops);
    return ops[i];
}

/* A lexical block's scope, or a subprogram's: operand 1 of both. */
static LLVMMetadataRef subprogram_of(LLVMContextRef ctx, LLVMMetadataRef scope)
{
    for (int depth = 0; scope && depth < 256; depth++) {
        LLVMMetadataKind k = LLVMGetMetadataKind(scope);
        LLVMValueRef up;
        if (k == LLVMDISubprogramMetadataKind)
            return scope;
        if (k != LLVMDILexicalBlockMetadataKind && k != LLVMDILexicalBlockFileMetadataKind)
            return NULL;
        up = md_operand(ctx, scope, 1);
        scope = up ? LLVMValueAsMetadata(up) : NULL;
    }
    return NULL;
}

LLVMMetadataRef ml_inl_scope(LLVMValueRef inst, uint32_t *line)
{
    LLVMMetadataRef loc = LLVMInstructionGetDebugLoc(inst);

    *line = 0;
    if (!loc || !LLVMDILocationGetInlinedAt(loc))
        return NULL;
    *line = LLVMDILocationGetLine(loc);
    return subprogram_of(LLVMGetTypeContext(LLVMTypeOf(inst)), LLVMDILocationGetScope(loc));
}

char *ml_inl_symbol(struct ml_ir *ir, LLVMMetadataRef sp)
{
    /* DISubprogram operands: 2 name, 3 linkage name (mangled C++, demangled by the report). */
    for (unsigned i = 3; i >= 2; i--) {
        LLVMValueRef v = md_operand(ir->ctx, sp, i);
        unsigned len = 0;
        const char *s = v ? LLVMGetMDString(v, &len) : NULL;
        if (s && len)
            return strndup(s, len);
    }
    return strdup("?");
}

char *ml_inl_file(LLVMMetadataRef sp)
{
    LLVMMetadataRef f = LLVMDIScopeGetFile(sp);
    unsigned len = 0;
    const char *s = f ? LLVMDIFileGetFilename(f, &len) : NULL;

    return strndup(s ? s : "", s ? len : 0);
}

int ml_inl_seg_add(struct ml_inlseg *s, LLVMMetadataRef sp, uint32_t line, const uint64_t *f0,
                   const uint64_t *f1, const struct ml_dynbytes *dyn, size_t ndyn,
                   const uint64_t *rd0, const uint64_t *wr0, size_t nd0)
{
    struct ml_inlacc *a = NULL;

    for (size_t i = 0; i < s->n && !a; i++)
        if (s->a[i].sp == sp)
            a = &s->a[i];
    if (!a) {
        if (ml_grow((void **)&s->a, &s->cap, s->n + 1, sizeof(*s->a)))
            return -ENOMEM;
        a = &s->a[s->n++];
        memset(a, 0, sizeof(*a));
        a->sp = sp;
        a->line = line;
    }
    if (line && (!a->line || line < a->line))
        a->line = line;
    for (int k = 0; k < ML_NFACTS; k++)
        a->facts[k] += f1[k] - f0[k];
    for (size_t i = 0; i < ndyn; i++) {
        a->rd[i] += dyn[i].rd - (i < nd0 ? rd0[i] : 0);
        a->wr[i] += dyn[i].wr - (i < nd0 ? wr0[i] : 0);
    }
    return 0;
}

int ml_inl_record(struct ml_ir *ir, uint32_t host, LLVMMetadataRef sp, uint32_t line,
                  const uint64_t *f)
{
    struct ml_inlrec *r = NULL;
    int any = 0;

    for (int k = 0; k < ML_NFACTS; k++)
        any |= k != ML_F_INCR && f[k];
    if (!any)
        return 0;
    /* A host's segments come together: look back a little, a duplicate only adds a record. */
    for (size_t i = ir->ninl, k = 0; i-- > 0 && k < 64 && !r; k++)
        if (ir->inl[i].host == host && ir->inl[i].sp == sp)
            r = &ir->inl[i];
    if (!r) {
        if (ml_grow((void **)&ir->inl, &ir->capinl, ir->ninl + 1, sizeof(*ir->inl)))
            return -ENOMEM;
        r = &ir->inl[ir->ninl++];
        memset(r, 0, sizeof(*r));
        r->host = host;
        r->sp = sp;
        r->line = line;
    }
    if (line && (!r->line || line < r->line))
        r->line = line;
    for (int k = 0; k < ML_NFACTS; k++)
        if (k != ML_F_INCR)
            r->facts[k] += f[k];
    return 0;
}
