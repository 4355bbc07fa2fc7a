/* Trace sink of the instrumenter: inline appends to the thread's buffer, descriptors, versioning.
 */
#include "format/trace-abi.h"
#include "instrument/ir/events.h"

#include <errno.h>
#include <llvm-c/DebugInfo.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Every defined function with events gets two copies in one body: the
 * traced one (each segment of events appends its records inline, see
 * format/trace-abi.h) and a plain one, the original code. The entry block
 * reads __memlens_trace_gate and picks one, so a program built with
 * --trace but recording nothing pays a load and a branch per call.
 * Functions that switch recording themselves are the exception (see
 * do_function). Markers and wrapped libc calls go to the runtime in both
 * copies.
 */
struct tsink {
    struct ml_ir *ir;
    struct ml_ev ev;
    LLVMTypeRef t_wordp; /* i64* */
    LLVMValueRef g_ptr, g_end, g_gate;
    LLVMValueRef f_flush, f_marker, f_pages;
    LLVMTypeRef ty_flush, ty_marker, ty_pages;
    LLVMValueRef desc_ph, segs_ph; /* replaced by the real globals at the end */
    uint32_t *segs;                /* descriptor words */
    uint32_t nsegs, capsegs;
    unsigned md_prof;
    LLVMValueRef prof_unlikely;
};

static LLVMValueRef extern_global(struct tsink *s, LLVMTypeRef t, const char *name, int tls)
{
    LLVMValueRef g = LLVMGetNamedGlobal(s->ir->m, name);

    if (!g) {
        g = LLVMAddGlobal(s->ir->m, t, name);
        if (tls) {
            LLVMSetThreadLocal(g, 1);
            LLVMSetThreadLocalMode(g, LLVMInitialExecTLSModel);
        }
    }
    return g;
}

static LLVMValueRef runtime_fn(struct tsink *s, const char *name, LLVMTypeRef ty)
{
    LLVMValueRef f = LLVMGetNamedFunction(s->ir->m, name);

    if (!f) {
        f = LLVMAddFunction(s->ir->m, name, ty);
        LLVMAddAttributeAtIndex(
            f, LLVMAttributeFunctionIndex,
            LLVMCreateEnumAttribute(s->ir->ctx, LLVMGetEnumAttributeKindForName("nounwind", 8), 0));
    }
    return f;
}

static void setup(struct tsink *s)
{
    struct ml_ir *ir = s->ir;
    LLVMTypeRef p2[2] = {ir->t_i8p, ir->t_i32},
                p4[4] = {ir->t_i8p, ir->t_i32, ir->t_i8p, ir->t_i64};
    LLVMTypeRef i64t = ir->t_i64;
    LLVMMetadataRef w[3];

    s->t_wordp = ir->t_i64p;
    s->g_ptr = extern_global(s, s->t_wordp, ML_TB_SYM_PTR, 1);
    s->g_end = extern_global(s, s->t_wordp, ML_TB_SYM_END, 1);
    s->g_gate = extern_global(s, ir->t_i32, ML_TB_SYM_GATE, 0);
    s->ty_flush = LLVMFunctionType(s->t_wordp, &i64t, 1, 0);
    s->f_flush = runtime_fn(s, ML_TB_SYM_FLUSH, s->ty_flush);
    s->ty_marker = LLVMFunctionType(ir->t_i32, p2, 2, 0);
    s->f_marker = runtime_fn(s, ML_TB_SYM_MARKER, s->ty_marker);
    s->ty_pages = LLVMFunctionType(ir->t_void, p4, 4, 0);
    s->f_pages = runtime_fn(s, "__memlens_trace_pages", s->ty_pages);
    s->desc_ph = LLVMAddGlobal(ir->m, ir->t_i8, "__memlens_tdesc.placeholder");
    s->segs_ph = LLVMAddGlobal(ir->m, ir->t_i32, "__memlens_tsegs.placeholder");
    s->md_prof = LLVMGetMDKindIDInContext(ir->ctx, "prof", 4);
    w[0] = LLVMMDStringInContext2(ir->ctx, "branch_weights", 14);
    w[1] = LLVMValueAsMetadata(LLVMConstInt(ir->t_i32, 1, 0));
    w[2] = LLVMValueAsMetadata(LLVMConstInt(ir->t_i32, 4000, 0));
    s->prof_unlikely = LLVMMetadataAsValue(ir->ctx, LLVMMDNodeInContext2(ir->ctx, w, 3));
}

/* ---- calls ---- */

static LLVMValueRef rebuild_call(struct tsink *s, LLVMValueRef old, LLVMTypeRef fty, LLVMValueRef f,
                                 LLVMValueRef *args, unsigned nargs)
{
    LLVMBuilderRef b = s->ir->b;
    LLVMValueRef c;

    LLVMPositionBuilderBefore(b, old);
    LLVMSetCurrentDebugLocation2(b, LLVMInstructionGetDebugLoc(old));
    if (LLVMIsAInvokeInst(old))
        c = LLVMBuildInvoke2(b, fty, f, args, nargs, LLVMGetNormalDest(old), LLVMGetUnwindDest(old),
                             "");
    else
        c = LLVMBuildCall2(b, fty, f, args, nargs, "");
    LLVMSetCurrentDebugLocation2(b, NULL);
    return c;
}

static LLVMValueRef desc_arg(struct tsink *s)
{
    return s->desc_ph;
}

/* A wrapped libc call becomes a call of __memlens_tr_<name>(args..., module, site). */
static int replace_wrap(struct tsink *s, const struct ml_ev_call *c)
{
    struct ml_ir *ir = s->ir;
    LLVMValueRef orig = ml_called_function(c->call), f, nc;
    LLVMTypeRef oty = LLVMGlobalGetValueType(orig);
    unsigned np = LLVMCountParamTypes(oty), nw = c->wrap->nparams, nargs;
    LLVMTypeRef ptypes[nw + 2];
    LLVMValueRef args[nw + 2];
    char name[96];

    LLVMGetParamTypes(oty, ptypes);
    for (unsigned i = np; i < nw; i++)
        ptypes[i] = ir->t_i8p; /* variadic tail (mremap's new address) */
    ptypes[nw] = ir->t_i8p;
    ptypes[nw + 1] = ir->t_i32;
    nargs = LLVMGetNumArgOperands(c->call);
    for (unsigned i = 0; i < nw; i++) {
        LLVMValueRef a = i < nargs ? LLVMGetOperand(c->call, i) : LLVMConstNull(ptypes[i]);
        if (LLVMTypeOf(a) != ptypes[i]) {
            LLVMPositionBuilderBefore(ir->b, c->call);
            a = LLVMGetTypeKind(ptypes[i]) == LLVMPointerTypeKind &&
                        LLVMGetTypeKind(LLVMTypeOf(a)) == LLVMPointerTypeKind
                    ? LLVMBuildPointerCast(ir->b, a, ptypes[i], "")
                : LLVMGetTypeKind(ptypes[i]) == LLVMPointerTypeKind
                    ? LLVMBuildIntToPtr(ir->b, a, ptypes[i], "")
                    : LLVMBuildZExtOrBitCast(ir->b, a, ptypes[i], "");
        }
        args[i] = a;
    }
    args[nw] = desc_arg(s);
    args[nw + 1] = LLVMConstInt(ir->t_i32, c->site, 0);
    snprintf(name, sizeof(name), "__memlens_tr_%s", c->wrap->name);
    {
        LLVMTypeRef fty = LLVMFunctionType(LLVMGetReturnType(oty), ptypes, nw + 2, 0);
        f = LLVMGetNamedFunction(ir->m, name);
        if (!f)
            f = LLVMAddFunction(ir->m, name, fty);
        nc = rebuild_call(s, c->call, fty, f, args, nw + 2);
    }
    if (LLVMGetTypeKind(LLVMTypeOf(c->call)) != LLVMVoidTypeKind)
        LLVMReplaceAllUsesWith(c->call, nc);
    LLVMInstructionEraseFromParent(c->call);
    return 0;
}

static int replace_marker(struct tsink *s, const struct ml_ev_call *c)
{
    struct ml_ir *ir = s->ir;
    LLVMValueRef nc;
    char where[256];

    if (LLVMIsAInvokeInst(c->call)) {
        ml_describe_loc(c->call, where, sizeof(where));
        return ml_ir_fail(ir, -EINVAL, "%s: memlens marker may throw; declare it through memlens.h",
                          where);
    }
    if (c->kind == ML_EV_PAGES) {
        LLVMValueRef args[4] = {desc_arg(s), LLVMConstInt(ir->t_i32, c->site, 0),
                                LLVMGetOperand(c->call, 0), LLVMGetOperand(c->call, 1)};
        LLVMPositionBuilderBefore(ir->b, c->call);
        args[2] = LLVMBuildPointerCast(ir->b, args[2], ir->t_i8p, "");
        args[3] = LLVMBuildZExtOrBitCast(ir->b, args[3], ir->t_i64, "");
        nc = rebuild_call(s, c->call, s->ty_pages, s->f_pages, args, 4);
    } else {
        LLVMValueRef args[2] = {desc_arg(s), LLVMConstInt(ir->t_i32, c->site, 0)};
        nc = rebuild_call(s, c->call, s->ty_marker, s->f_marker, args, 2);
    }
    (void)nc;
    LLVMInstructionEraseFromParent(c->call);
    return 0;
}

static int do_calls(struct tsink *s, LLVMValueRef fn)
{
    struct ml_ev_call *calls = NULL;
    size_t n = 0;
    int rc = ml_ev_calls(&s->ev, fn, &calls, &n);

    for (size_t i = 0; i < n && !rc; i++)
        rc = calls[i].wrap ? replace_wrap(s, &calls[i]) : replace_marker(s, &calls[i]);
    free(calls);
    return rc;
}

/* ---- segments ---- */

/* Appends a descriptor for points p[0..n-1]; returns its word offset. */
static int add_descriptor(struct tsink *s, const struct ml_ev_point *p, uint32_t n, uint32_t *off)
{
    uint32_t words = (1 + n + 1) & ~1u;

    if (ml_ev_grow((void **)&s->segs, &s->capsegs, s->nsegs + words, sizeof(*s->segs)))
        return -ENOMEM;
    *off = s->nsegs;
    s->segs[s->nsegs] = n;
    for (uint32_t k = 0; k < n; k++)
        s->segs[s->nsegs + 1 + k] = p[k].site;
    if (words > 1 + n)
        s->segs[s->nsegs + 1 + n] = 0;
    s->nsegs += words;
    return 0;
}

static LLVMValueRef word_ptr(struct tsink *s, LLVMValueRef p, unsigned slot)
{
    LLVMValueRef idx = LLVMConstInt(s->ir->t_i64, slot, 0);

    return LLVMBuildGEP2(s->ir->b, s->ir->t_i64, p, &idx, 1, "");
}

/*
 * The inline append of one segment (format/trace-abi.h), placed after its
 * last event (before it when that is a terminator): the addresses are SSA
 * values by then, so reservation and stores sit together. guarded: the
 * function may switch recording on or off itself, so the append is skipped
 * while __memlens_trace_gate is closed.
 */
static int emit_segment(struct tsink *s, const struct ml_ev_point *p, uint32_t n, int guarded)
{
    struct ml_ir *ir = s->ir;
    LLVMBuilderRef b = ir->b;
    uint32_t W = 1, off, slot = 1;
    LLVMValueRef last = p[n - 1].at, ins, p0, np, lim, full, q, ph, hdr, idx, incoming[2], br;
    LLVMBasicBlockRef bb, cont, rec, slow, fill, blocks[2];
    LLVMMetadataRef loc = LLVMInstructionGetDebugLoc(last);
    int rc;

    for (uint32_t k = 0; k < n; k++)
        W += ml_ev_point_words(&p[k]);
    rc = add_descriptor(s, p, n, &off);
    if (rc)
        return rc;
    ins = LLVMIsATerminatorInst(last) ? last : LLVMGetNextInstruction(last);
    LLVMPositionBuilderBefore(b, ins);
    LLVMSetCurrentDebugLocation2(b, loc);
    if (guarded) {
        LLVMValueRef g = LLVMBuildLoad2(b, ir->t_i32, s->g_gate, "");
        LLVMValueRef on = LLVMBuildICmp(b, LLVMIntEQ, g, LLVMConstInt(ir->t_i32, 0, 0), "");
        bb = LLVMGetInstructionParent(on);
        cont = ml_split_after(ir, on);
        rec = LLVMInsertBasicBlockInContext(ir->ctx, cont, "memlens.rec");
        LLVMPositionBuilderAtEnd(b, bb);
        LLVMBuildCondBr(b, on, rec, cont);
        LLVMPositionBuilderAtEnd(b, rec);
    } else {
        cont = NULL;
        rec = LLVMGetInstructionParent(ins);
    }
    p0 = LLVMBuildLoad2(b, s->t_wordp, s->g_ptr, "");
    np = word_ptr(s, p0, W);
    lim = LLVMBuildLoad2(b, s->t_wordp, s->g_end, "");
    full = LLVMBuildICmp(b, LLVMIntUGT, np, lim, "");
    if (guarded) {
        fill = LLVMInsertBasicBlockInContext(ir->ctx, cont, "memlens.fill");
    } else {
        fill = ml_split_after(ir, full);
        rec = LLVMGetInstructionParent(full);
    }
    slow = LLVMInsertBasicBlockInContext(ir->ctx, fill, "memlens.flush");
    LLVMPositionBuilderAtEnd(b, rec);
    br = LLVMBuildCondBr(b, full, slow, fill);
    LLVMSetMetadata(br, s->md_prof, s->prof_unlikely);
    LLVMPositionBuilderAtEnd(b, slow);
    {
        LLVMValueRef wv = LLVMConstInt(ir->t_i64, W, 0);
        q = LLVMBuildCall2(b, s->ty_flush, s->f_flush, &wv, 1, "");
    }
    LLVMBuildBr(b, fill);
    if (guarded)
        LLVMPositionBuilderAtEnd(b, fill);
    else
        LLVMPositionBuilderBefore(b, LLVMGetFirstInstruction(fill));
    ph = LLVMBuildPhi(b, s->t_wordp, "");
    incoming[0] = p0;
    incoming[1] = q;
    blocks[0] = rec;
    blocks[1] = slow;
    LLVMAddIncoming(ph, incoming, blocks, 2);
    idx = LLVMConstInt(ir->t_i64, off, 0);
    hdr = LLVMConstPtrToInt(LLVMConstGEP2(ir->t_i32, s->segs_ph, &idx, 1), ir->t_i64);
    LLVMBuildStore(b, hdr, ph);
    for (uint32_t k = 0; k < n; k++) {
        unsigned w = ml_ev_point_words(&p[k]);
        if (!w)
            continue;
        LLVMBuildStore(b, LLVMBuildPtrToInt(b, ml_ev_operand(&p[k], p[k].addr_op), ir->t_i64, ""),
                       word_ptr(s, ph, slot));
        if (w == 2)
            LLVMBuildStore(
                b, LLVMBuildZExtOrBitCast(b, ml_ev_operand(&p[k], p[k].len_op), ir->t_i64, ""),
                word_ptr(s, ph, slot + 1));
        slot += w;
    }
    /* Committed last: a snapshot of the buffer (at exit, from a signal) holds whole segments. */
    LLVMBuildStore(b, word_ptr(s, ph, W), s->g_ptr);
    if (guarded)
        LLVMBuildBr(b, cont);
    LLVMSetCurrentDebugLocation2(b, NULL);
    return 0;
}

static int emit_points(struct tsink *s, const struct ml_ev_point *p, size_t n, int guarded)
{
    size_t start = 0;
    unsigned words = 1;

    for (size_t i = 0; i <= n; i++) {
        int cut = i == n;
        if (!cut && i > start) {
            const struct ml_ev_point *a = &p[i - 1], *c = &p[i];
            cut = LLVMGetInstructionParent(a->at) != LLVMGetInstructionParent(c->at) ||
                  ml_ev_barrier_between(a->at, c->at) || i - start >= 255 ||
                  words + ml_ev_point_words(c) > ML_TB_MAX_SEG;
        }
        if (cut && i > start) {
            int rc = emit_segment(s, p + start, (uint32_t)(i - start), guarded);
            if (rc)
                return rc;
            start = i;
            words = 1;
        }
        if (i < n)
            words += ml_ev_point_words(&p[i]);
    }
    return 0;
}

/* ---- versioning ---- */

static int static_alloca(LLVMValueRef in)
{
    return LLVMIsAAllocaInst(in) && LLVMIsAConstant(LLVMGetOperand(in, 0));
}

static void hoist_allocas(struct ml_ir *ir, LLVMBasicBlockRef from, LLVMBasicBlockRef to)
{
    for (LLVMValueRef in = LLVMGetFirstInstruction(from), next; in; in = next) {
        next = LLVMGetNextInstruction(in);
        if (!static_alloca(in))
            continue;
        LLVMPositionBuilderBefore(ir->b, LLVMGetBasicBlockTerminator(to));
        ml_move_to_builder(ir, in);
    }
}

/* One body: a new entry block reads the gate and enters the traced or the plain copy. */
static void merge(struct tsink *s, LLVMValueRef fn, LLVMValueRef plain)
{
    struct ml_ir *ir = s->ir;
    LLVMBasicBlockRef tentry = LLVMGetEntryBasicBlock(fn), pentry = LLVMGetEntryBasicBlock(plain);
    LLVMBasicBlockRef gate = LLVMInsertBasicBlockInContext(ir->ctx, tentry, "memlens.gate"), bb,
                      next;
    LLVMValueRef g, on, br;

    for (unsigned i = 0; i < LLVMCountParams(fn); i++)
        LLVMReplaceAllUsesWith(LLVMGetParam(plain, i), LLVMGetParam(fn, i));
    for (bb = pentry; bb; bb = next) {
        next = LLVMGetNextBasicBlock(bb);
        LLVMRemoveBasicBlockFromParent(bb);
        LLVMAppendExistingBasicBlock(fn, bb);
    }
    LLVMPositionBuilderAtEnd(ir->b, gate);
    LLVMSetCurrentDebugLocation2(ir->b, NULL);
    g = LLVMBuildLoad2(ir->b, ir->t_i32, s->g_gate, "");
    on = LLVMBuildICmp(ir->b, LLVMIntEQ, g, LLVMConstInt(ir->t_i32, 0, 0), "");
    br = LLVMBuildCondBr(ir->b, on, tentry, pentry);
    (void)br;
    hoist_allocas(ir, tentry, gate);
    hoist_allocas(ir, pentry, gate);
    LLVMDeleteFunction(plain);
}

/*
 * A function that switches recording itself (region markers, on/off, or a
 * call of a function of this module that does) keeps one copy whose appends
 * check the gate; any other gets a traced and a plain copy chosen at entry.
 */
static int do_function(struct tsink *s, LLVMValueRef fn, int guarded)
{
    struct ml_ev_point *pts = NULL;
    LLVMValueRef plain = NULL;
    size_t n = 0;
    int rc;

    if (!guarded && ml_can_clone(fn)) {
        size_t len;
        const char *name = LLVMGetValueName2(fn, &len);
        char pname[len + 16];
        snprintf(pname, sizeof(pname), "%.*s.memlens.plain", (int)len, name);
        plain = ml_clone_function(s->ir, fn, pname);
        if (!plain)
            return ml_ir_fail(s->ir, -ENOMEM, "out of memory");
    }
    rc = ml_ev_points(&s->ev, fn, &pts, &n);
    if (!rc)
        rc = emit_points(s, pts, n, guarded || !plain);
    free(pts);
    if (rc) {
        if (plain)
            LLVMDeleteFunction(plain);
        return rc;
    }
    if (!plain)
        return 0;
    if (!n) {
        LLVMDeleteFunction(plain);
        return 0;
    }
    merge(s, fn, plain);
    return 0;
}

/* Does fn call the runtime's marker for a site that switches recording? */
static int switches_directly(struct tsink *s, LLVMValueRef fn)
{
    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb))
        for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in; in = LLVMGetNextInstruction(in)) {
            uint32_t site, k;
            if (!LLVMIsACallInst(in) || ml_called_function(in) != s->f_marker)
                continue;
            site = (uint32_t)LLVMConstIntGetZExtValue(LLVMGetOperand(in, 1));
            k = site < s->ev.nsites ? s->ev.sites[site].kind : 0;
            if (k == ML_EV_REGION_BEGIN || k == ML_EV_REGION_END || k == ML_EV_TRACE_ON ||
                k == ML_EV_TRACE_OFF)
                return 1;
        }
    return 0;
}

/* Marks every function that switches recording, directly or through calls within the module. */
static void find_switching(struct tsink *s, LLVMValueRef *fns, size_t n, unsigned char *sw)
{
    int changed = 1;

    for (size_t i = 0; i < n; i++)
        sw[i] = (unsigned char)switches_directly(s, fns[i]);
    while (changed) {
        changed = 0;
        for (size_t i = 0; i < n; i++) {
            if (sw[i])
                continue;
            for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fns[i]); bb && !sw[i];
                 bb = LLVMGetNextBasicBlock(bb))
                for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in && !sw[i];
                     in = LLVMGetNextInstruction(in)) {
                    LLVMValueRef f;
                    if (!LLVMIsACallInst(in) && !LLVMIsAInvokeInst(in))
                        continue;
                    f = ml_called_function(in);
                    for (size_t k = 0; f && k < n; k++)
                        if (fns[k] == f && sw[k]) {
                            sw[i] = 1;
                            changed = 1;
                            break;
                        }
                }
        }
    }
}

/* ---- the module descriptor ---- */

static int emit_module(struct tsink *s)
{
    struct ml_ir *ir = s->ir;
    LLVMValueRef *words = calloc(s->nsegs + 1, sizeof(*words));
    LLVMValueRef g_segs = NULL, desc = NULL, segs_ptr;

    if (!words)
        return ml_ir_fail(ir, -ENOMEM, "out of memory while emitting the trace tables");
    for (uint32_t i = 0; i < s->nsegs; i++)
        words[i] = LLVMConstInt(ir->t_i32, s->segs[i], 0);
    if (s->nsegs) {
        g_segs =
            ml_emit_global(ir, LLVMConstArray(ir->t_i32, words, s->nsegs), "__memlens_tsegs", 1);
        LLVMSetAlignment(g_segs, 8);
    }
    free(words);
    segs_ptr = ml_emit_array_ptr(ir, g_segs, ir->t_i32);
    LLVMReplaceAllUsesWith(s->segs_ph, segs_ptr);
    LLVMDeleteGlobal(s->segs_ph);
    desc = ml_ev_emit_module(&s->ev, segs_ptr, s->nsegs, "__memlens_tmodule");
    if (!desc)
        return ml_ir_fail(ir, -ENOMEM, "out of memory while emitting the trace tables");
    LLVMReplaceAllUsesWith(s->desc_ph, LLVMConstBitCast(desc, ir->t_i8p));
    LLVMDeleteGlobal(s->desc_ph);
    /* Registered before the program's own constructors, which may run traced code;
       unregistered before dlclose unmaps the tables. */
    ml_emit_register(ir, desc, ML_TB_SYM_REGISTER, "__memlens_trace_unregister", "__memlens_trace",
                     101);
    return 0;
}

int ml_sink_trace(struct ml_ir *ir)
{
    struct tsink s = {.ir = ir};
    struct ml_ev_opts eo = {0};
    LLVMValueRef *fns = NULL;
    unsigned char *sw = NULL;
    size_t nfns = 0;
    int rc = 0;

    eo.kinds = ML_EV_BIT(ML_EV_LOAD) | ML_EV_BIT(ML_EV_STORE) | ML_EV_BIT(ML_EV_RMW);
    eo.fields = ML_EVF_ADDR | ML_EVF_SIZE | ML_EVF_SITE;
    eo.functions = ir->o->trace_functions;
    eo.loops = ir->o->trace_loops;
    if (eo.functions)
        eo.kinds |= ML_EV_BIT(ML_EV_FUNC_ENTRY) | ML_EV_BIT(ML_EV_FUNC_EXIT);
    if (eo.loops)
        eo.kinds |= ML_EV_BIT(ML_EV_LOOP_ENTRY) | ML_EV_BIT(ML_EV_LOOP_ITER) | ML_EV_BIT(ML_EV_LOOP_EXIT);
    ml_ev_init(&s.ev, ir, &eo);
    setup(&s);
    /* The functions as they are now: clones made below are not visited. */
    rc = ml_ev_functions(ir, &fns, &nfns);
    if (rc)
        goto out;
    for (size_t i = 0; i < nfns && !rc; i++)
        rc = do_calls(&s, fns[i]);
    sw = calloc(nfns + 1, 1);
    if (!sw && !rc)
        rc = ml_ir_fail(ir, -ENOMEM, "out of memory");
    if (!rc)
        find_switching(&s, fns, nfns, sw);
    for (size_t i = 0; i < nfns && !rc; i++)
        rc = do_function(&s, fns[i], sw[i]);
    if (!rc)
        rc = emit_module(&s);
out:
    if (rc == -ENOMEM)
        ml_ir_fail(ir, rc, "out of memory");
    free(fns);
    free(sw);
    free(s.segs);
    ml_ev_free(&s.ev);
    return rc;
}
