/* Queue sink of the instrumenter: inline appends of event records to the profiling queue. */
#include "format/queue.h"
#include "instrument/ir/events.h"

#include <errno.h>
#include <llvm-c/DebugInfo.h>
#include <stdlib.h>
#include <string.h>

/*
 * `memlens cc --events=<modules>` (ml_ir_opts.events): the event layer
 * (events.c) gives the points the chosen modules need and nothing else; each
 * run of points in one block with no call between them becomes one inline
 * append of at most ML_Q_MAX_EVENT bytes (format/queue.h, "Producer ABI"):
 * load the cursor, compare, a cold call when the chunk is full, non-temporal
 * stores, store the new position. Record of a point (docs/profile.md):
 *   word 0  kind, extra units, aux = access size (1..63, else 0), id = global site id
 *   word 1  the address (accesses), the pointer (alloc sites, pointer creation) or the
 *           global marker id (loop and function markers)
 *   extra   accesses of variable or large size: the length; with values: the value
 *           (zero-extended) and its type (ML_Q_VAL_*)
 * Global ids are the module's bases, which the runtime assigns at
 * registration (__memlens_q_register), plus the module-local ids.
 */
struct qsink {
    struct ml_ir *ir;
    struct ml_ev ev;
    LLVMTypeRef t_cur, t_curp; /* struct ml_q_cursor { i8 *pos, *end; ... } */
    LLVMValueRef g_cur, f_next, desc_ph;
    LLVMTypeRef ty_next;
    unsigned md_prof, md_nt;
    int compact; /* loads with a value carry it in word 1, without their address */
    LLVMValueRef prof_unlikely, nt_node;
};

static void setup(struct qsink *s)
{
    struct ml_ir *ir = s->ir;
    LLVMTypeRef f[2] = {ir->t_i8p, ir->t_i8p};
    LLVMMetadataRef w[3], one;

    s->t_cur = LLVMStructCreateNamed(ir->ctx, "memlens.qcursor");
    LLVMStructSetBody(s->t_cur, f, 2, 0);
    s->t_curp = LLVMPointerType(s->t_cur, 0);
    s->g_cur = LLVMGetNamedGlobal(ir->m, "__memlens_q_cur");
    if (!s->g_cur) {
        s->g_cur = LLVMAddGlobal(ir->m, s->t_curp, "__memlens_q_cur");
        LLVMSetThreadLocal(s->g_cur, 1);
        LLVMSetThreadLocalMode(s->g_cur, LLVMInitialExecTLSModel);
    }
    s->ty_next = LLVMFunctionType(s->t_curp, NULL, 0, 0);
    s->f_next = LLVMGetNamedFunction(ir->m, "__memlens_q_next");
    if (!s->f_next) {
        s->f_next = LLVMAddFunction(ir->m, "__memlens_q_next", s->ty_next);
        LLVMAddAttributeAtIndex(
            s->f_next, LLVMAttributeFunctionIndex,
            LLVMCreateEnumAttribute(ir->ctx, LLVMGetEnumAttributeKindForName("nounwind", 8), 0));
    }
    s->desc_ph = LLVMAddGlobal(ir->m, ir->t_i32, "__memlens_qdesc.placeholder");
    s->md_prof = LLVMGetMDKindIDInContext(ir->ctx, "prof", 4);
    w[0] = LLVMMDStringInContext2(ir->ctx, "branch_weights", 14);
    w[1] = LLVMValueAsMetadata(LLVMConstInt(ir->t_i32, 1, 0));
    w[2] = LLVMValueAsMetadata(LLVMConstInt(ir->t_i32, 4000, 0));
    s->prof_unlikely = LLVMMetadataAsValue(ir->ctx, LLVMMDNodeInContext2(ir->ctx, w, 3));
    s->md_nt = LLVMGetMDKindIDInContext(ir->ctx, "nontemporal", 11);
    one = LLVMValueAsMetadata(LLVMConstInt(ir->t_i32, 1, 0));
    s->nt_node = LLVMMetadataAsValue(ir->ctx, LLVMMDNodeInContext2(ir->ctx, &one, 1));
}

/*
 * The type code of a value the record carries (ML_Q_VAL_*), 0 for values it
 * does not: vectors (whose lanes would read as one odd number), aggregates
 * and scalars wider than 8 bytes.
 */
static unsigned value_type(LLVMTypeRef t)
{
    switch (LLVMGetTypeKind(t)) {
    case LLVMPointerTypeKind:
        return ML_Q_VAL_PTR;
    case LLVMHalfTypeKind:
    case LLVMBFloatTypeKind:
        return ML_Q_VAL_INT; /* no C type reads them back: their bits */
    case LLVMFloatTypeKind:
        return ML_Q_VAL_FLOAT;
    case LLVMDoubleTypeKind:
        return ML_Q_VAL_DOUBLE;
    case LLVMIntegerTypeKind:
        return LLVMGetIntTypeWidth(t) <= 64 ? ML_Q_VAL_INT : 0;
    default:
        return 0;
    }
}

/* Whether load p goes as a one-unit ML_EV_LOAD_VALUE record (its value in word 1). */
static int compact_load(const struct qsink *s, const struct ml_ev_point *p)
{
    return s->compact && p->kind == ML_EV_LOAD && p->len_op < 0 && p->value_op != -1 &&
           p->size >= 1 && p->size <= 8 && value_type(LLVMTypeOf(ml_ev_operand(p, p->value_op)));
}

/* Units of a point's record, and whether its extra unit holds a length or a value. */
static unsigned record_units(const struct qsink *s, const struct ml_ev_point *p, int *len,
                             int *value)
{
    *len = *value = 0;
    if (p->kind == ML_EV_STACK_ALLOC || p->kind == ML_EV_GLOBAL) {
        *len = 1; /* the object's size */
        return 2;
    }
    if (!ml_ev_is_access(p->kind) || compact_load(s, p))
        return 1;
    if (p->len_op >= 0 || p->size >= 64)
        *len = 1;
    else if (p->value_op != -1 && (s->ev.o.fields & ML_EVF_VALUE) &&
             value_type(LLVMTypeOf(ml_ev_operand(p, p->value_op))))
        *value = 1;
    return 1 + (unsigned)(*len || *value);
}

/* A field of the descriptor (site_base = 10, marker_base = 11), loaded as i64. */
static LLVMValueRef load_base(struct qsink *s, unsigned field)
{
    struct ml_ir *ir = s->ir;
    LLVMValueRef idx = LLVMConstInt(ir->t_i64, field == 10 ? 0 : 1, 0);
    LLVMValueRef p = LLVMBuildGEP2(ir->b, ir->t_i32, s->desc_ph, &idx, 1, "");

    return LLVMBuildZExt(ir->b, LLVMBuildLoad2(ir->b, ir->t_i32, p, ""), ir->t_i64, "");
}

static void store_word(struct qsink *s, LLVMValueRef base, unsigned off, LLVMValueRef v)
{
    struct ml_ir *ir = s->ir;
    LLVMValueRef idx = LLVMConstInt(ir->t_i64, off / 8, 0);
    LLVMValueRef p = LLVMBuildGEP2(ir->b, ir->t_i64, base, &idx, 1, "");
    LLVMValueRef st = LLVMBuildStore(ir->b, v, p);

    LLVMSetMetadata(st, s->md_nt, s->nt_node);
}

/* The value of a load or store (value_type() != 0) as 64 bits, zero-extended. */
static LLVMValueRef value_word(struct qsink *s, LLVMValueRef v)
{
    struct ml_ir *ir = s->ir;
    LLVMTypeRef t = LLVMTypeOf(v);
    LLVMTypeKind k = LLVMGetTypeKind(t);

    if (k == LLVMPointerTypeKind)
        return LLVMBuildPtrToInt(ir->b, v, ir->t_i64, "");
    if (k != LLVMIntegerTypeKind && k != LLVMDoubleTypeKind)
        v = LLVMBuildBitCast(ir->b, v,
                             LLVMIntTypeInContext(ir->ctx, k == LLVMFloatTypeKind ? 32 : 16), "");
    if (k == LLVMDoubleTypeKind) {
        /*
         * The optimiser turns a store of a double's bits into a store of the
         * double, and x86 has no non-temporal store from an SSE register: a
         * plain store into the line the other words reach by movnti flushes
         * the write-combining buffer at every record (spmv ran 100x slower).
         * An empty asm that takes and gives the bits in an integer register
         * keeps the store an integer one.
         */
        static char cons[] = "=r,0";
        LLVMTypeRef ty = LLVMFunctionType(ir->t_i64, &ir->t_i64, 1, 0);
        LLVMValueRef gpr =
            LLVMGetInlineAsm(ty, "", 0, cons, sizeof(cons) - 1, 0, 0, LLVMInlineAsmDialectATT, 0);
        LLVMValueRef bits = LLVMBuildBitCast(ir->b, v, ir->t_i64, "");
        return LLVMBuildCall2(ir->b, ty, gpr, &bits, 1, "");
    }
    return LLVMBuildZExt(ir->b, v, ir->t_i64, "");
}

/* The inline append of points p[0..n-1] (at most ML_Q_MAX_EVENT bytes), after the last one. */
static void emit_group(struct qsink *s, const struct ml_ev_point *p, uint32_t n)
{
    struct ml_ir *ir = s->ir;
    LLVMBuilderRef b = ir->b;
    LLVMValueRef last = p[n - 1].at, ins, c, pos, end, full, br, c2, pos2, cph, pph, ph[2], base;
    LLVMValueRef site_base = NULL, marker_base = NULL;
    LLVMBasicBlockRef rec, fill, slow, blocks[2];
    unsigned off = 0;

    ins = LLVMIsATerminatorInst(last) ? last : LLVMGetNextInstruction(last);
    LLVMPositionBuilderBefore(b, ins);
    LLVMSetCurrentDebugLocation2(b, LLVMInstructionGetDebugLoc(last));
    c = LLVMBuildLoad2(b, s->t_curp, s->g_cur, "");
    pos = LLVMBuildLoad2(b, ir->t_i8p, LLVMBuildStructGEP2(b, s->t_cur, c, 0, ""), "");
    end = LLVMBuildLoad2(b, ir->t_i8p, LLVMBuildStructGEP2(b, s->t_cur, c, 1, ""), "");
    full = LLVMBuildICmp(b, LLVMIntUGT, pos, end, "");
    rec = LLVMGetInstructionParent(full);
    fill = ml_split_after(ir, full);
    slow = LLVMInsertBasicBlockInContext(ir->ctx, fill, "memlens.qnext");
    LLVMPositionBuilderAtEnd(b, rec);
    br = LLVMBuildCondBr(b, full, slow, fill);
    LLVMSetMetadata(br, s->md_prof, s->prof_unlikely);
    LLVMPositionBuilderAtEnd(b, slow);
    c2 = LLVMBuildCall2(b, s->ty_next, s->f_next, NULL, 0, "");
    pos2 = LLVMBuildLoad2(b, ir->t_i8p, LLVMBuildStructGEP2(b, s->t_cur, c2, 0, ""), "");
    LLVMBuildBr(b, fill);
    LLVMPositionBuilderBefore(b, LLVMGetFirstInstruction(fill));
    blocks[0] = rec;
    blocks[1] = slow;
    cph = LLVMBuildPhi(b, s->t_curp, "");
    ph[0] = c;
    ph[1] = c2;
    LLVMAddIncoming(cph, ph, blocks, 2);
    pph = LLVMBuildPhi(b, ir->t_i8p, "");
    ph[0] = pos;
    ph[1] = pos2;
    LLVMAddIncoming(pph, ph, blocks, 2);
    base = LLVMBuildBitCast(b, pph, ir->t_i64p, "");
    for (uint32_t k = 0; k < n; k++) {
        const struct ml_ev_point *q = &p[k];
        int len, value;
        unsigned units = record_units(s, q, &len, &value);
        unsigned aux = ml_ev_is_access(q->kind) && !len ? (unsigned)q->size : 0;
        LLVMValueRef w0, w1;

        int cv = compact_load(s, q);
        if (!site_base)
            site_base = load_base(s, 10);
        if (cv)
            aux = ML_Q_VAL_AUX(q->size, value_type(LLVMTypeOf(ml_ev_operand(q, q->value_op))));
        w0 = LLVMConstInt(ir->t_i64,
                          ML_Q_W0(cv ? ML_EV_LOAD_VALUE : q->kind, units - 1, aux, q->site), 0);
        w0 =
            LLVMBuildAdd(b, w0, LLVMBuildShl(b, site_base, LLVMConstInt(ir->t_i64, 16, 0), ""), "");
        if (cv) {
            w1 = value_word(s, ml_ev_operand(q, q->value_op));
        } else if (q->addr_op != -1) {
            w1 = LLVMBuildPtrToInt(b, ml_ev_operand(q, q->addr_op), ir->t_i64, "");
        } else {
            uint32_t mk = s->ev.sites[q->site].marker;
            if (!marker_base)
                marker_base = load_base(s, 11);
            w1 = LLVMBuildAdd(b, marker_base, LLVMConstInt(ir->t_i64, mk, 0), "");
        }
        store_word(s, base, off, w0);
        store_word(s, base, off + 8, w1);
        if (len)
            store_word(s, base, off + 16,
                       q->len_op >= 0
                           ? LLVMBuildZExtOrBitCast(b, ml_ev_operand(q, q->len_op), ir->t_i64, "")
                           : LLVMConstInt(ir->t_i64, q->size, 0));
        if (value) {
            LLVMValueRef v = ml_ev_operand(q, q->value_op);
            store_word(s, base, off + 16, value_word(s, v));
            store_word(s, base, off + 24, LLVMConstInt(ir->t_i64, value_type(LLVMTypeOf(v)), 0));
        } else if (len) {
            store_word(s, base, off + 24, LLVMConstInt(ir->t_i64, 0, 0));
        }
        off += units * ML_Q_UNIT;
    }
    {
        LLVMValueRef idx = LLVMConstInt(ir->t_i64, off, 0);
        LLVMBuildStore(b, LLVMBuildGEP2(b, ir->t_i8, pph, &idx, 1, ""),
                       LLVMBuildStructGEP2(b, s->t_cur, cph, 0, ""));
    }
    LLVMSetCurrentDebugLocation2(b, NULL);
}

/* Points p[0..n-1] of one function as inline appends: runs in one block with no call between. */
static void emit_points(struct qsink *s, const struct ml_ev_point *p, size_t n)
{
    size_t start = 0;
    unsigned bytes = 0;

    for (size_t i = 0; i <= n; i++) {
        int len, value, cut = i == n;
        unsigned sz = i < n ? record_units(s, &p[i], &len, &value) * ML_Q_UNIT : 0;
        if (!cut && i > start)
            cut = LLVMGetInstructionParent(p[i - 1].at) != LLVMGetInstructionParent(p[i].at) ||
                  ml_ev_barrier_between(p[i - 1].at, p[i].at) || bytes + sz > ML_Q_MAX_EVENT ||
                  LLVMIsATerminatorInst(p[i - 1].at);
        if (cut && i > start) {
            emit_group(s, p + start, (uint32_t)(i - start));
            start = i;
            bytes = 0;
        }
        bytes += sz;
    }
}

static int do_function(struct qsink *s, LLVMValueRef fn)
{
    struct ml_ev_point *p = NULL;
    size_t n = 0;
    int rc = ml_ev_points(&s->ev, fn, &p, &n);

    if (!rc)
        emit_points(s, p, n);
    free(p);
    return rc;
}

/*
 * Global objects: a constructor of the unit announces each global (GLOBAL
 * records) once, when the program or the shared library it is linked into is
 * loaded; it runs after the registrations (priority 101), before the
 * program's own constructors.
 */
static int announce_globals(struct qsink *s)
{
    struct ml_ir *ir = s->ir;
    struct ml_ev_point *p = NULL;
    size_t n = 0;
    LLVMTypeRef ty = LLVMFunctionType(LLVMVoidTypeInContext(ir->ctx), NULL, 0, 0);
    LLVMValueRef fn = LLVMAddFunction(ir->m, "__memlens_qglobals", ty), ret;
    int rc;

    LLVMSetLinkage(fn, LLVMInternalLinkage);
    LLVMPositionBuilderAtEnd(ir->b, LLVMAppendBasicBlockInContext(ir->ctx, fn, "entry"));
    ret = LLVMBuildRetVoid(ir->b);
    rc = ml_ev_globals(&s->ev, fn, ret, &p, &n);
    if (!rc && n) {
        emit_points(s, p, n);
        ml_emit_xtor(ir, fn, "llvm.global_ctors", 102);
    } else {
        LLVMDeleteFunction(fn);
    }
    free(p);
    return rc;
}

/*
 * Region markers (MEMLENS_ROI_*, annotations the instrumenter turned into
 * __memlens_roi_* calls) mean nothing to the profiling modules: the calls go,
 * so that an event build does not profile regions on the side, and no code
 * refers to the annotation's name string, which lives in the section
 * llvm.metadata that is never emitted (the link failed on an undefined .L.str).
 */
static void drop_region_markers(struct qsink *s)
{
    LLVMValueRef f[2] = {s->ev.f_roi_begin, s->ev.f_roi_end};

    if (s->ev.o.kinds & (ML_EV_BIT(ML_EV_REGION_BEGIN) | ML_EV_BIT(ML_EV_REGION_END)))
        return;
    for (int k = 0; k < 2; k++)
        for (LLVMUseRef u = f[k] ? LLVMGetFirstUse(f[k]) : NULL, next; u; u = next) {
            LLVMValueRef call = LLVMGetUser(u);
            next = LLVMGetNextUse(u);
            if (LLVMIsACallInst(call) && LLVMGetCalledValue(call) == f[k])
                LLVMInstructionEraseFromParent(call);
        }
}

int ml_sink_queue(struct ml_ir *ir)
{
    struct qsink s = {.ir = ir};
    struct ml_ev_opts eo = {0};
    LLVMValueRef *fns = NULL, desc;
    size_t nfns = 0;
    int rc = 0;

    eo.kinds = ir->o->events;
    /* Values without addresses: half the bytes for a value build (no module reads load addresses).
     */
    s.compact = (ir->o->event_fields & ML_EVF_VALUE) && !(ir->o->event_fields & ML_EVF_ADDR);
    eo.fields = ir->o->event_fields | ML_EVF_ADDR | ML_EVF_SIZE | ML_EVF_SITE;
    eo.loops = !!(eo.kinds & (ML_EV_BIT(ML_EV_LOOP_ENTRY) | ML_EV_BIT(ML_EV_LOOP_ITER) |
                              ML_EV_BIT(ML_EV_LOOP_EXIT)));
    eo.functions = !!(eo.kinds & (ML_EV_BIT(ML_EV_FUNC_ENTRY) | ML_EV_BIT(ML_EV_FUNC_EXIT)));
    rc = ml_ev_init(&s.ev, ir, &eo);
    if (rc)
        return ml_ir_fail(ir, rc, "out of memory");
    setup(&s);
    rc = ml_ev_functions(ir, &fns, &nfns);
    if (rc)
        goto out;
    for (size_t i = 0; i < nfns && !rc; i++)
        rc = do_function(&s, fns[i]);
    if (!rc && (eo.kinds & ML_EV_BIT(ML_EV_GLOBAL)))
        rc = announce_globals(&s);
    if (rc)
        goto out;
    drop_region_markers(&s);
    desc = ml_ev_emit_module(&s.ev, LLVMConstNull(LLVMPointerType(ir->t_i32, 0)), 0,
                             "__memlens_qmodule");
    if (!desc) {
        rc = -ENOMEM;
        goto out;
    }
    {
        /* site_base and marker_base: fields 10 and 11 of struct ml_ev_module. */
        LLVMValueRef idx[2] = {LLVMConstInt(ir->t_i32, 0, 0), LLVMConstInt(ir->t_i32, 10, 0)};
        LLVMReplaceAllUsesWith(s.desc_ph,
                               LLVMConstInBoundsGEP2(LLVMGlobalGetValueType(desc), desc, idx, 2));
    }
    LLVMDeleteGlobal(s.desc_ph);
    /* Registered before the program's own constructors, which may run instrumented code. */
    /* Heap events: the registration that also links the malloc-family interposers in. */
    ml_emit_register(ir, desc,
                     eo.kinds & ML_EV_HEAP_KINDS ? "__memlens_q_register_heap"
                                                 : "__memlens_q_register",
                     NULL, "__memlens_queue", 101);
out:
    if (rc == -ENOMEM)
        ml_ir_fail(ir, rc, "out of memory");
    free(fns);
    ml_ev_free(&s.ev);
    return rc;
}
