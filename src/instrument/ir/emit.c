/* Emits the module descriptor (static facts), the thread-local counters, the registering
 * constructor and the unregistering destructor. */
#include "instrument/ir/ir.h"
#include "runtime/abi.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t fnv(const char *s)
{
    uint64_t h = 1469598103934665603ull;

    while (*s)
        h = (h ^ (unsigned char)*s++) * 1099511628211ull;
    return h;
}

LLVMValueRef ml_emit_cstr(struct ml_ir *ir, struct ml_strtab *t, const char *s)
{
    size_t j;
    LLVMValueRef g, zero[2];

    if ((t->len + 1) * 2 > t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 256;
        char **keys = calloc(cap, sizeof(*keys));
        LLVMValueRef *vals = calloc(cap, sizeof(*vals));
        if (!keys || !vals) {
            free(keys);
            free(vals);
            return NULL;
        }
        for (size_t i = 0; i < t->cap; i++) {
            if (!t->keys[i])
                continue;
            for (j = fnv(t->keys[i]) & (cap - 1); keys[j]; j = (j + 1) & (cap - 1))
                ;
            keys[j] = t->keys[i];
            vals[j] = t->vals[i];
        }
        free(t->keys);
        free(t->vals);
        t->keys = keys;
        t->vals = vals;
        t->cap = cap;
    }
    for (j = fnv(s) & (t->cap - 1); t->keys[j]; j = (j + 1) & (t->cap - 1))
        if (strcmp(t->keys[j], s) == 0)
            return t->vals[j];
    LLVMValueRef init = LLVMConstStringInContext(ir->ctx, s, (unsigned)strlen(s), 0);
    g = LLVMAddGlobal(ir->m, LLVMTypeOf(init), "__memlens_str");
    LLVMSetInitializer(g, init);
    LLVMSetGlobalConstant(g, 1);
    LLVMSetLinkage(g, LLVMPrivateLinkage);
    LLVMSetUnnamedAddress(g, LLVMGlobalUnnamedAddr);
    zero[0] = zero[1] = LLVMConstInt(ir->t_i32, 0, 0);
    t->keys[j] = strdup(s);
    if (!t->keys[j])
        return NULL;
    t->vals[j] = LLVMConstGEP2(LLVMTypeOf(init), g, zero, 2);
    t->len++;
    return t->vals[j];
}

void ml_emit_strtab_free(struct ml_strtab *t)
{
    for (size_t i = 0; i < t->cap; i++)
        free(t->keys[i]);
    free(t->keys);
    free(t->vals);
}

LLVMValueRef ml_emit_global(struct ml_ir *ir, LLVMValueRef init, const char *name, int ro)
{
    LLVMValueRef g = LLVMAddGlobal(ir->m, LLVMTypeOf(init), name);

    LLVMSetInitializer(g, init);
    LLVMSetLinkage(g, LLVMInternalLinkage);
    LLVMSetGlobalConstant(g, ro);
    return g;
}

LLVMValueRef ml_emit_array_ptr(struct ml_ir *ir, LLVMValueRef g, LLVMTypeRef elem)
{
    LLVMValueRef zero[2] = {LLVMConstInt(ir->t_i32, 0, 0), LLVMConstInt(ir->t_i32, 0, 0)};

    if (!g)
        return LLVMConstNull(LLVMPointerType(elem, 0));
    return LLVMConstGEP2(LLVMGlobalGetValueType(g), g, zero, 2);
}

static LLVMValueRef i32c(struct ml_ir *ir, uint64_t v)
{
    return LLVMConstInt(ir->t_i32, v, 0);
}

void ml_emit_xtor(struct ml_ir *ir, LLVMValueRef fn, const char *list, unsigned priority)
{
    LLVMValueRef old = LLVMGetNamedGlobal(ir->m, list), init = NULL, g;
    LLVMTypeRef fnp = LLVMPointerType(LLVMGlobalGetValueType(fn), 0);
    LLVMTypeRef fields[3] = {ir->t_i32, fnp, ir->t_i8p}, ety;
    unsigned n = 0;

    if (old) {
        init = LLVMGetInitializer(old);
        ety = LLVMGetElementType(LLVMGlobalGetValueType(old));
        n = init ? (unsigned)LLVMGetNumOperands(init) : 0;
    } else {
        ety = LLVMStructTypeInContext(ir->ctx, fields, 3, 0);
    }
    LLVMValueRef elems[n + 1];
    for (unsigned i = 0; i < n; i++)
        elems[i] = LLVMGetOperand(init, i);
    LLVMValueRef vals[3] = {i32c(ir, priority),
                            LLVMConstBitCast(fn, LLVMStructGetTypeAtIndex(ety, 1)),
                            LLVMConstNull(LLVMStructGetTypeAtIndex(ety, 2))};
    elems[n] = LLVMConstNamedStruct(ety, vals, 3);
    if (old)
        LLVMDeleteGlobal(old);
    LLVMValueRef arr = LLVMConstArray(ety, elems, n + 1);
    g = LLVMAddGlobal(ir->m, LLVMTypeOf(arr), list);
    LLVMSetInitializer(g, arr);
    LLVMSetLinkage(g, LLVMAppendingLinkage);
}

void ml_emit_register(struct ml_ir *ir, LLVMValueRef desc, const char *reg, const char *unreg,
                      const char *prefix, unsigned priority)
{
    for (int k = 0; k < (unreg ? 2 : 1); k++) {
        LLVMTypeRef reg_t = LLVMFunctionType(ir->t_void, &ir->t_i8p, 1, 0);
        const char *callee = k ? unreg : reg;
        LLVMValueRef f = LLVMGetNamedFunction(ir->m, callee), fn;
        LLVMValueRef arg = LLVMConstBitCast(desc, ir->t_i8p);
        char name[64];
        if (!f)
            f = LLVMAddFunction(ir->m, callee, reg_t);
        snprintf(name, sizeof(name), "%s_%s", prefix, k ? "dtor" : "ctor");
        fn = LLVMAddFunction(ir->m, name, LLVMFunctionType(ir->t_void, NULL, 0, 0));
        LLVMSetLinkage(fn, LLVMInternalLinkage);
        LLVMPositionBuilderAtEnd(ir->b, LLVMAppendBasicBlockInContext(ir->ctx, fn, ""));
        LLVMBuildCall2(ir->b, reg_t, f, &arg, 1, "");
        LLVMBuildRetVoid(ir->b);
        ml_emit_xtor(ir, fn, k ? "llvm.global_dtors" : "llvm.global_ctors", priority);
    }
}

int ml_emit_module(struct ml_ir *ir)
{
    struct ml_strtab st = {0};
    LLVMTypeRef facts_t = LLVMArrayType(ir->t_i64, ML_NFACTS);
    LLVMTypeRef unit_f[7] = {ir->t_i32, ir->t_i32, ir->t_i32, ir->t_i32,
                             ir->t_i8p, ir->t_i8p, facts_t};
    LLVMTypeRef unit_t = LLVMStructTypeInContext(ir->ctx, unit_f, 7, 0);
    LLVMTypeRef call_f[4] = {ir->t_i32, ir->t_i32, ir->t_i8p, ir->t_i64};
    LLVMTypeRef call_t = LLVMStructTypeInContext(ir->ctx, call_f, 4, 0);
    LLVMTypeRef tls_fn_t = LLVMFunctionType(ir->t_i64p, NULL, 0, 0);
    size_t nunits = ir->nunits ? ir->nunits : 1;
    LLVMValueRef *units = calloc(nunits, sizeof(*units));
    LLVMValueRef *calls = calloc(ir->ncalls + 1, sizeof(*calls));
    LLVMValueRef *names = calloc(ir->nregions + 1, sizeof(*names));
    LLVMValueRef *words = calloc(ir->nwords + 1, sizeof(*words));
    LLVMValueRef ctr, tls_fn, desc, g_units, g_calls = NULL, g_names, g_words = NULL, g_ids;
    LLVMValueRef g_setids, g_uinfo = NULL, g_rflags;
    LLVMTypeRef ui_f[3] = {ir->t_i32, ir->t_i32, ir->t_i8p};
    LLVMTypeRef ui_t = LLVMStructTypeInContext(ir->ctx, ui_f, 3, 0);
    LLVMValueRef zero2[2];
    const char *modname;
    size_t len;
    int rc = -ENOMEM;

    if (!units || !calls || !names || !words)
        goto out;

    /* Counters: one thread-local slot per unit, so increments never contend; then the region
       slots of the inline enter and exit and the thread's stack bounds (runtime/abi.h). */
    ctr = LLVMAddGlobal(ir->m,
                        LLVMArrayType(ir->t_i64, (unsigned)(ir->nunits + ML_RT_SLOTS(ir->nregions) +
                                                            ML_RT_STACK_WORDS + ML_RT_DYN_WORDS +
                                                            ML_RT_MULT_WORDS)),
                        "__memlens_ctr");
    LLVMSetInitializer(ctr, LLVMConstNull(LLVMGlobalGetValueType(ctr)));
    LLVMSetLinkage(ctr, LLVMInternalLinkage);
    LLVMSetThreadLocal(ctr, 1);
    LLVMSetAlignment(ctr, 64);
    LLVMReplaceAllUsesWith(ir->ctr_ph, LLVMConstBitCast(ctr, ir->t_i64p));
    LLVMDeleteGlobal(ir->ctr_ph);
    {
        LLVMValueRef at = LLVMConstInt(ir->t_i64, ir->nunits + ML_RT_SLOTS(ir->nregions), 0);
        LLVMValueRef mat = LLVMConstInt(
            ir->t_i64, ir->nunits + ML_RT_SLOTS(ir->nregions) + ML_RT_STACK_WORDS + ML_RT_DYN_WORDS,
            0);
        LLVMReplaceAllUsesWith(ir->stk_ph,
                               LLVMConstGEP2(ir->t_i64, LLVMConstBitCast(ctr, ir->t_i64p), &at, 1));
        LLVMDeleteGlobal(ir->stk_ph);
        LLVMReplaceAllUsesWith(
            ir->mult_ph, LLVMConstGEP2(ir->t_i64, LLVMConstBitCast(ctr, ir->t_i64p), &mat, 1));
        LLVMDeleteGlobal(ir->mult_ph);
    }

    tls_fn = LLVMAddFunction(ir->m, "__memlens_tls", tls_fn_t);
    LLVMSetLinkage(tls_fn, LLVMInternalLinkage);
    LLVMPositionBuilderAtEnd(ir->b, LLVMAppendBasicBlockInContext(ir->ctx, tls_fn, ""));
    zero2[0] = zero2[1] = i32c(ir, 0);
    LLVMBuildRet(ir->b, LLVMConstGEP2(LLVMGlobalGetValueType(ctr), ctr, zero2, 2));

    for (size_t i = 0; i < ir->nunits; i++) {
        const struct ml_unit *u = &ir->units[i];
        LLVMValueRef fv[ML_NFACTS], f[7];
        for (int k = 0; k < ML_NFACTS; k++)
            fv[k] = LLVMConstInt(ir->t_i64, u->facts[k], 0);
        f[0] = i32c(ir, u->kind);
        f[1] = i32c(ir, u->line);
        f[2] = i32c(ir, u->regset);
        f[3] = i32c(ir, u->flags);
        f[4] = ml_emit_cstr(ir, &st, u->func ? u->func : "");
        f[5] = ml_emit_cstr(ir, &st, u->file);
        if (!f[4] || !f[5])
            goto out;
        f[6] = LLVMConstArray(ir->t_i64, fv, ML_NFACTS);
        units[i] = LLVMConstNamedStruct(unit_t, f, 7);
    }
    for (size_t i = 0; i < ir->ncalls; i++) {
        LLVMValueRef f[4] = {i32c(ir, ir->calls[i].unit), i32c(ir, 0),
                             ml_emit_cstr(ir, &st, ir->calls[i].callee),
                             LLVMConstInt(ir->t_i64, ir->calls[i].per_exec, 0)};
        if (!f[2])
            goto out;
        calls[i] = LLVMConstNamedStruct(call_t, f, 4);
    }
    for (uint32_t i = 0; i < ir->nregions; i++)
        if (!(names[i] = ml_emit_cstr(ir, &st, ir->regions[i])))
            goto out;
    for (size_t i = 0; i < ir->nwords; i++)
        words[i] = i32c(ir, ir->words[i]);

    g_units = ir->nunits ? ml_emit_global(ir, LLVMConstArray(unit_t, units, (unsigned)ir->nunits),
                                          "__memlens_units", 1)
                         : NULL;
    if (ir->ncalls)
        g_calls = ml_emit_global(ir, LLVMConstArray(call_t, calls, (unsigned)ir->ncalls),
                                 "__memlens_calls", 1);
    g_names = ml_emit_global(ir, LLVMConstArray(ir->t_i8p, names, ir->nregions),
                             "__memlens_region_names", 1);
    if (ir->nwords)
        g_words = ml_emit_global(ir, LLVMConstArray(ir->t_i32, words, (unsigned)ir->nwords),
                                 "__memlens_regsets", 1);
    g_ids = ml_emit_global(ir, LLVMConstNull(LLVMArrayType(ir->t_i32, ir->nregions)),
                           "__memlens_region_ids", 0);
    /* Global set ids of the module's region sets, per word (the runtime fills them). */
    g_setids = ml_emit_global(ir, LLVMConstNull(LLVMArrayType(ir->t_i32, (unsigned)ir->nwords)),
                              "__memlens_setids", 0);
    if (ir->setids_ph) {
        LLVMReplaceAllUsesWith(ir->setids_ph, ml_emit_array_ptr(ir, g_setids, ir->t_i32));
        LLVMDeleteGlobal(ir->setids_ph);
    }
    if (ir->nuinfo) {
        LLVMValueRef ui[ir->nuinfo];
        for (size_t i = 0; i < ir->nuinfo; i++) {
            LLVMValueRef f[3] = {i32c(ir, ir->uinfo[i].unit), i32c(ir, ir->uinfo[i].kind),
                                 ml_emit_cstr(ir, &st, ir->uinfo[i].name)};
            if (!f[2])
                goto out;
            ui[i] = LLVMConstNamedStruct(ui_t, f, 3);
        }
        g_uinfo = ml_emit_global(ir, LLVMConstArray(ui_t, ui, (unsigned)ir->nuinfo),
                                 "__memlens_uinfo", 1);
    }
    {
        LLVMValueRef fl[ir->nregions + 1];
        for (uint32_t i = 0; i < ir->nregions; i++)
            fl[i] = i32c(ir, i < ir->nrflags ? ir->rflags[i] : 0);
        g_rflags =
            ml_emit_global(ir, LLVMConstArray(ir->t_i32, fl, ir->nregions), "__memlens_rflags", 1);
    }

    modname = LLVMGetSourceFileName(ir->m, &len);
    {
        char name[len + 1];
        memcpy(name, modname, len);
        name[len] = 0;
        LLVMValueRef mname = ml_emit_cstr(ir, &st, name);
        if (!mname)
            goto out;
        /* Field order and types mirror struct ml_rt_module in runtime/abi.h. */
        LLVMValueRef d[19] = {
            i32c(ir, ML_RT_ABI),
            i32c(ir, ir->nunits),
            i32c(ir, ir->nregions),
            i32c(ir, ir->nwords),
            i32c(ir, ir->ncalls),
            i32c(ir, 0),
            mname,
            ml_emit_array_ptr(ir, g_names, ir->t_i8p),
            ml_emit_array_ptr(ir, g_words, ir->t_i32),
            ml_emit_array_ptr(ir, g_units, unit_t),
            ml_emit_array_ptr(ir, g_calls, call_t),
            tls_fn,
            ml_emit_array_ptr(ir, g_ids, ir->t_i32),
            ml_emit_array_ptr(ir, g_setids, ir->t_i32),
            i32c(ir, ir->nuinfo),
            i32c(ir, 0),
            ml_emit_array_ptr(ir, g_uinfo, ui_t),
            ml_emit_array_ptr(ir, g_rflags, ir->t_i32),
            LLVMConstNull(ir->t_i8p),
        };
        desc =
            ml_emit_global(ir, LLVMConstStructInContext(ir->ctx, d, 19, 0), "__memlens_module", 0);
    }
    LLVMReplaceAllUsesWith(ir->desc_ph, LLVMConstBitCast(desc, ir->t_i8p));
    LLVMDeleteGlobal(ir->desc_ph);

    /* The constructor registers the module; the destructor unregisters it before dlclose
       unmaps it (the runtime then keeps its own copy of what the profile needs). */
    ml_emit_register(ir, desc, "__memlens_register", "__memlens_unregister", "__memlens", 65535);
    rc = 0;
out:
    if (rc)
        ml_ir_fail(ir, rc, "out of memory while emitting the module descriptor");
    ml_emit_strtab_free(&st);
    free(units);
    free(calls);
    free(names);
    free(words);
    return rc;
}
