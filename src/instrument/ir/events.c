/* Event layer: finds the IR points where events happen and builds the site and marker tables. */
#include "instrument/ir/events.h"
#include "instrument/ir/cfg.h"

#include <errno.h>
#include <llvm-c/DebugInfo.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * libc functions whose calls from instrumented code go through the runtime
 * (src/runtime/interpose.c defines __memlens_tr_<name> with the same
 * parameters followed by the module and the site). Events: I/O, memory
 * mappings, fork and exec, recorded in uninstrumented copies too. Ranges: the
 * bytes str* functions read and write, recorded as accesses of the call's
 * range sites (only while accesses are recorded).
 */
static const struct ml_ev_wrap wraps[] = {
    {"read", 3, 0, 0, {0, 0}, 1},
    {"write", 3, 0, 0, {0, 0}, 1},
    {"pread", 4, 0, 0, {0, 0}, 1},
    {"pread64", 4, 0, 0, {0, 0}, 1},
    {"pwrite", 4, 0, 0, {0, 0}, 1},
    {"pwrite64", 4, 0, 0, {0, 0}, 1},
    {"readv", 3, 0, 0, {0, 0}, 1},
    {"writev", 3, 0, 0, {0, 0}, 1},
    {"recv", 4, 0, 0, {0, 0}, 1},
    {"recvfrom", 6, 0, 0, {0, 0}, 1},
    {"recvmsg", 3, 0, 0, {0, 0}, 1},
    {"send", 4, 0, 0, {0, 0}, 1},
    {"sendto", 6, 0, 0, {0, 0}, 1},
    {"sendmsg", 3, 0, 0, {0, 0}, 1},
    {"mmap", 6, 0, 0, {0, 0}, 1},
    {"mmap64", 6, 0, 0, {0, 0}, 1},
    {"munmap", 2, 0, 0, {0, 0}, 1},
    {"mremap", 5, 1, 0, {0, 0}, 1},
    {"brk", 1, 0, 0, {0, 0}, 1},
    {"sbrk", 1, 0, 0, {0, 0}, 1},
    {"fork", 0, 0, 0, {0, 0}, 1},
    {"_exit", 1, 0, 0, {0, 0}, 1},
    {"_Exit", 1, 0, 0, {0, 0}, 1},
    {"execv", 2, 0, 0, {0, 0}, 1},
    {"execve", 3, 0, 0, {0, 0}, 1},
    {"execvp", 2, 0, 0, {0, 0}, 1},
    {"execvpe", 3, 0, 0, {0, 0}, 1},
    {"strlen", 1, 0, 1, {ML_EV_LOAD, 0}, 0},
    {"strnlen", 2, 0, 1, {ML_EV_LOAD, 0}, 0},
    {"strcpy", 2, 0, 2, {ML_EV_LOAD, ML_EV_STORE}, 0},
    {"stpcpy", 2, 0, 2, {ML_EV_LOAD, ML_EV_STORE}, 0},
    {"strncpy", 3, 0, 2, {ML_EV_LOAD, ML_EV_STORE}, 0},
    {"strcat", 2, 0, 2, {ML_EV_LOAD, ML_EV_STORE}, 0},
    {"strncat", 3, 0, 2, {ML_EV_LOAD, ML_EV_STORE}, 0},
    {"strcmp", 2, 0, 2, {ML_EV_LOAD, ML_EV_LOAD}, 0},
    {"strncmp", 3, 0, 2, {ML_EV_LOAD, ML_EV_LOAD}, 0},
    {"memcmp", 3, 0, 2, {ML_EV_LOAD, ML_EV_LOAD}, 0},
    {"strchr", 2, 0, 1, {ML_EV_LOAD, 0}, 0},
    {"strrchr", 2, 0, 1, {ML_EV_LOAD, 0}, 0},
    {"memchr", 3, 0, 1, {ML_EV_LOAD, 0}, 0},
    {"strdup", 1, 0, 2, {ML_EV_LOAD, ML_EV_STORE}, 0},
};

const char *ml_ev_wrapped(size_t i)
{
    return i < sizeof(wraps) / sizeof(wraps[0]) ? wraps[i].name : NULL;
}

int ml_ev_grow(void **p, uint32_t *cap, uint32_t need, size_t elem)
{
    uint32_t c = *cap ? *cap : 64;
    void *q;

    if (need <= *cap)
        return 0;
    while (c < need)
        c *= 2;
    q = realloc(*p, (size_t)c * elem);
    if (!q)
        return -ENOMEM;
    *p = q;
    *cap = c;
    return 0;
}

static char *dupn(const char *s, size_t n)
{
    char *d = malloc(n + 1);

    if (d) {
        memcpy(d, s ? s : "", s ? n : 0);
        d[s ? n : 0] = 0;
    }
    return d;
}

static int object_functions(struct ml_ev *ev);

int ml_ev_init(struct ml_ev *ev, struct ml_ir *ir, const struct ml_ev_opts *o)
{
    memset(ev, 0, sizeof(*ev));
    ev->ir = ir;
    ev->o = *o;
    ev->f_roi_begin = LLVMGetNamedFunction(ir->m, "__memlens_roi_begin");
    ev->f_roi_end = LLVMGetNamedFunction(ir->m, "__memlens_roi_end");
    ev->f_mark = LLVMGetNamedFunction(ir->m, "__memlens_mark");
    ev->f_on = LLVMGetNamedFunction(ir->m, "__memlens_trace_on");
    ev->f_off = LLVMGetNamedFunction(ir->m, "__memlens_trace_off");
    ev->f_pages = LLVMGetNamedFunction(ir->m, "__memlens_pages");
    if (o->fields & (ML_EVF_FUNC_OBJS | ML_EVF_LOOP_OBJS))
        return object_functions(ev);
    return 0;
}

void ml_ev_free(struct ml_ev *ev)
{
    for (uint32_t i = 0; i < ev->nsites; i++) {
        free((char *)ev->sites[i].func);
        free((char *)ev->sites[i].file);
        free((char *)ev->sites[i].text);
    }
    for (uint32_t i = 0; i < ev->nmarkers; i++) {
        free((char *)ev->markers[i].name);
        free((char *)ev->markers[i].file);
        free((char *)ev->markers[i].func);
    }
    free(ev->sites);
    free(ev->markers);
    ml_ptrmap_free(&ev->objfns);
}

static const char *fn_name(LLVMValueRef fn, size_t *len)
{
    return LLVMGetValueName2(fn, len);
}

/* The location of inst (its file and line; 0 and "" without debug information). */
static void loc_of(LLVMValueRef inst, const char **file, unsigned *flen, unsigned *line,
                   unsigned *col)
{
    *file = NULL;
    *flen = 0;
    *line = *col = 0;
    if (!inst || !LLVMGetDebugLocLine(inst))
        return;
    *file = LLVMGetDebugLocFilename(inst, flen);
    *line = LLVMGetDebugLocLine(inst);
    *col = LLVMGetDebugLocColumn(inst);
}

/* Where a site or marker is in the source. */
struct loc {
    const char *file;
    unsigned flen, line, col;
};

/* A new site of function name at loc; text may be NULL. Returns its id or -ENOMEM. */
static int64_t add_site_at(struct ml_ev *ev, uint32_t kind, uint64_t size, uint32_t marker,
                           const char *name, size_t nlen, const struct loc *lc, const char *text)
{
    struct ml_ev_site *s;
    const char *file = lc->file;
    unsigned flen = lc->flen, line = lc->line, col = lc->col;

    if (ml_ev_grow((void **)&ev->sites, &ev->capsites, ev->nsites + 1, sizeof(*ev->sites)))
        return -ENOMEM;
    s = &ev->sites[ev->nsites];
    s->kind = kind;
    s->size = size <= UINT32_MAX ? (uint32_t)size : 0;
    s->weight = 1;
    s->marker = marker;
    s->line = line;
    s->column = col;
    s->func = dupn(name, nlen);
    s->file = dupn(file, flen);
    s->text = dupn(text, text ? strlen(text) : 0);
    if (!s->func || !s->file || !s->text)
        return -ENOMEM;
    return ev->nsites++;
}

/* A new site of fn at inst; text may be NULL. Returns its id or -ENOMEM. */
static int64_t add_site(struct ml_ev *ev, uint32_t kind, uint64_t size, uint32_t marker,
                        LLVMValueRef fn, LLVMValueRef inst, const char *text)
{
    struct loc lc;
    size_t nlen;
    const char *name = fn_name(fn, &nlen);

    loc_of(inst, &lc.file, &lc.flen, &lc.line, &lc.col);
    return add_site_at(ev, kind, size, marker, name, nlen, &lc, text);
}

/* A new marker (kind, name) of function fname at loc. Returns its id or -ENOMEM. */
static int64_t add_marker_at(struct ml_ev *ev, uint32_t kind, const char *name, size_t len,
                             const char *fname, size_t nlen, const struct loc *lc)
{
    struct ml_ev_marker *m;

    if (ml_ev_grow((void **)&ev->markers, &ev->capmarkers, ev->nmarkers + 1, sizeof(*ev->markers)))
        return -ENOMEM;
    m = &ev->markers[ev->nmarkers];
    m->kind = kind;
    m->line = lc->line;
    m->name = dupn(name, len);
    m->file = dupn(lc->file, lc->flen);
    m->func = dupn(fname, nlen);
    if (!m->name || !m->file || !m->func)
        return -ENOMEM;
    return ev->nmarkers++;
}

/* The marker of (kind, name), made once per module; file:line from where it was first seen. */
static int64_t add_marker(struct ml_ev *ev, uint32_t kind, const char *name, size_t len,
                          LLVMValueRef fn, LLVMValueRef inst, int shared)
{
    struct loc lc;
    const char *fname;
    size_t nlen;

    if (shared)
        for (uint32_t i = 0; i < ev->nmarkers; i++)
            if (ev->markers[i].kind == kind && strlen(ev->markers[i].name) == len &&
                !memcmp(ev->markers[i].name, name, len))
                return i;
    loc_of(inst, &lc.file, &lc.flen, &lc.line, &lc.col);
    fname = fn_name(fn, &nlen);
    return add_marker_at(ev, kind, name, len, fname, nlen, &lc);
}

/* ---- calls ---- */

static const struct ml_ev_wrap *wrap_of(LLVMValueRef fn)
{
    size_t len;
    const char *name;

    if (!fn || !LLVMIsDeclaration(fn) || LLVMGetIntrinsicID(fn))
        return NULL;
    name = fn_name(fn, &len);
    for (size_t i = 0; i < sizeof(wraps) / sizeof(wraps[0]); i++)
        if (strlen(wraps[i].name) == len && !memcmp(wraps[i].name, name, len)) {
            unsigned np = LLVMCountParams(fn);
            int va = LLVMIsFunctionVarArg(LLVMGlobalGetValueType(fn));
            /* Only the libc function itself: same parameters (or fewer before ...). */
            if (wraps[i].variadic ? (va && np <= wraps[i].nparams)
                                  : (!va && np == wraps[i].nparams))
                return &wraps[i];
            return NULL;
        }
    return NULL;
}

static int marker_call(struct ml_ev *ev, LLVMValueRef fn, LLVMValueRef call, uint32_t kind,
                       uint32_t mkind, struct ml_ev_call *out)
{
    const char *s = NULL;
    size_t len = 0;
    char where[256];
    int64_t mk, site;

    if (mkind == ML_MK_REGION || mkind == ML_MK_MARK) {
        if (!ml_string_literal(LLVMGetOperand(call, 0), &s, &len)) {
            ml_describe_loc(call, where, sizeof(where));
            return ml_ir_fail(ev->ir, -EINVAL, "%s: %s name is not a string literal", where,
                              mkind == ML_MK_REGION ? "region" : "mark");
        }
    } else {
        s = mkind == ML_MK_TRACE ? "trace" : "pages";
        len = strlen(s);
    }
    mk = add_marker(ev, mkind, s, len, fn, call, 1);
    if (mk < 0)
        return (int)mk;
    site = add_site(ev, kind, 0, (uint32_t)mk, fn, call, NULL);
    if (site < 0)
        return (int)site;
    *out = (struct ml_ev_call){call, kind, (uint32_t)site, NULL};
    return 0;
}

int ml_ev_calls(struct ml_ev *ev, LLVMValueRef fn, struct ml_ev_call **out, size_t *n)
{
    uint32_t cap = 0, count = 0;
    struct ml_ev_call *v = NULL;
    int rc = 0;

    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb && !rc;
         bb = LLVMGetNextBasicBlock(bb))
        for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in && !rc;
             in = LLVMGetNextInstruction(in)) {
            LLVMValueRef f;
            const struct ml_ev_wrap *w;
            struct ml_ev_call c;
            if (!LLVMIsACallInst(in) && !LLVMIsAInvokeInst(in))
                continue;
            f = ml_called_function(in);
            if (!f)
                continue;
            if (ml_ev_grow((void **)&v, &cap, count + 1, sizeof(*v))) {
                rc = -ENOMEM;
                break;
            }
            if (f == ev->f_roi_begin)
                rc = marker_call(ev, fn, in, ML_EV_REGION_BEGIN, ML_MK_REGION, &c);
            else if (f == ev->f_roi_end)
                rc = marker_call(ev, fn, in, ML_EV_REGION_END, ML_MK_REGION, &c);
            else if (f == ev->f_mark)
                rc = marker_call(ev, fn, in, ML_EV_MARK, ML_MK_MARK, &c);
            else if (f == ev->f_on)
                rc = marker_call(ev, fn, in, ML_EV_TRACE_ON, ML_MK_TRACE, &c);
            else if (f == ev->f_off)
                rc = marker_call(ev, fn, in, ML_EV_TRACE_OFF, ML_MK_TRACE, &c);
            else if (f == ev->f_pages)
                rc = marker_call(ev, fn, in, ML_EV_PAGES, ML_MK_PAGES, &c);
            else if ((w = wrap_of(f))) {
                int64_t site = add_site(ev, ML_EV_CALL, 0, ML_EV_NOID, fn, in, w->name);
                for (unsigned k = 0; k < w->nranges && site >= 0; k++)
                    if (add_site(ev, w->range_kind[k], 0, ML_EV_NOID, fn, in, w->name) < 0)
                        site = -ENOMEM;
                if (site < 0)
                    rc = (int)site;
                c = (struct ml_ev_call){in, ML_EV_CALL, (uint32_t)site, w};
            } else
                continue;
            if (!rc)
                v[count++] = c;
        }
    if (rc) {
        free(v);
        return rc;
    }
    *out = v;
    *n = count;
    return 0;
}

/* ---- points ---- */

int ml_ev_is_barrier(LLVMValueRef inst)
{
    LLVMValueRef f;

    if (!LLVMIsACallInst(inst) && !LLVMIsAInvokeInst(inst) && !LLVMIsACallBrInst(inst))
        return 0;
    f = ml_called_function(inst);
    return !f || !LLVMGetIntrinsicID(f);
}

unsigned ml_ev_point_words(const struct ml_ev_point *p)
{
    if (!ml_ev_is_access(p->kind))
        return 0;
    return p->len_op >= 0 ? 2 : 1;
}

LLVMValueRef ml_ev_operand(const struct ml_ev_point *p, int op)
{
    return op == -2 ? p->at : op < 0 ? NULL : LLVMGetOperand(p->at, (unsigned)op);
}

struct plist {
    struct ml_ev_point *v;
    uint32_t n, cap;
};

static int push_point(struct ml_ev *ev, struct plist *l, LLVMValueRef fn, uint32_t kind,
                      LLVMValueRef at, int addr_op, int len_op, uint64_t size, int value_op,
                      uint32_t marker)
{
    int64_t site;

    if (ml_ev_is_access(kind) && len_op < 0 && !size)
        return 0; /* zero bytes: nothing happens */
    if (!(ev->o.kinds & ML_EV_BIT(kind)))
        return 0;
    site = add_site(ev, kind, len_op >= 0 ? 0 : size, marker, fn, at, NULL);
    if (site < 0 || ml_ev_grow((void **)&l->v, &l->cap, l->n + 1, sizeof(*l->v)))
        return -ENOMEM;
    l->v[l->n++] = (struct ml_ev_point){
        kind, (uint32_t)site, at, addr_op, len_op, ev->o.fields & ML_EVF_VALUE ? value_op : -1,
        size};
    return 0;
}

static int name_starts(LLVMValueRef fn, const char *prefix)
{
    size_t len;
    const char *name = fn_name(fn, &len);

    return len >= strlen(prefix) && !memcmp(name, prefix, strlen(prefix));
}

int ml_ev_accesses(LLVMTargetDataRef td, LLVMValueRef in, struct ml_ev_point out[2])
{
    LLVMValueRef f;
    int mk;

    switch (LLVMGetInstructionOpcode(in)) {
    case LLVMLoad:
        out[0] = (struct ml_ev_point){
            ML_EV_LOAD, 0, in, 0, -1, -2, LLVMStoreSizeOfType(td, LLVMTypeOf(in))};
        return 1;
    case LLVMStore:
        out[0] = (struct ml_ev_point){ML_EV_STORE,
                                      0,
                                      in,
                                      1,
                                      -1,
                                      0,
                                      LLVMStoreSizeOfType(td, LLVMTypeOf(LLVMGetOperand(in, 0)))};
        return 1;
    case LLVMAtomicRMW:
        out[0] = (struct ml_ev_point){
            ML_EV_RMW, 0, in, 0, -1, -1, LLVMStoreSizeOfType(td, LLVMTypeOf(in))};
        return 1;
    case LLVMAtomicCmpXchg:
        out[0] = (struct ml_ev_point){ML_EV_RMW,
                                      0,
                                      in,
                                      0,
                                      -1,
                                      -1,
                                      LLVMStoreSizeOfType(td, LLVMTypeOf(LLVMGetOperand(in, 1)))};
        return 1;
    case LLVMCall:
    case LLVMInvoke:
        break;
    default:
        return 0;
    }
    f = ml_called_function(in);
    mk = ml_mem_call_kind(in);
    if (mk) {
        LLVMValueRef n = LLVMGetOperand(in, 2);
        int len_op = -1, k = 0;
        uint64_t size = 0;
        if (LLVMIsAConstantInt(n) && LLVMConstIntGetZExtValue(n) <= UINT32_MAX)
            size = LLVMConstIntGetZExtValue(n);
        else
            len_op = 2;
        /* A copy reads, then writes. */
        if (mk == 1)
            out[k++] = (struct ml_ev_point){ML_EV_LOAD, 0, in, 1, len_op, -1, size};
        out[k++] = (struct ml_ev_point){ML_EV_STORE, 0, in, 0, len_op, -1, size};
        return k;
    }
    if (!f || !LLVMGetIntrinsicID(f))
        return 0;
    /* Masked vector accesses: the full width, as region counts do (an upper bound). */
    if (name_starts(f, "llvm.masked.load.")) {
        out[0] = (struct ml_ev_point){
            ML_EV_LOAD, 0, in, 0, -1, -1, LLVMStoreSizeOfType(td, LLVMTypeOf(in))};
        return 1;
    }
    if (name_starts(f, "llvm.masked.store.")) {
        out[0] = (struct ml_ev_point){ML_EV_STORE,
                                      0,
                                      in,
                                      1,
                                      -1,
                                      -1,
                                      LLVMStoreSizeOfType(td, LLVMTypeOf(LLVMGetOperand(in, 0)))};
        return 1;
    }
    return 0;
}

static int address_taken(LLVMValueRef a);

/* The accesses of one instruction, as points with sites. */
static int access_points(struct ml_ev *ev, struct plist *l, LLVMValueRef fn, LLVMValueRef in)
{
    struct ml_ev_point a[2];
    int n = ml_ev_accesses(ev->ir->td, in, a), rc = 0;

    for (int k = 0; k < n && !rc; k++) {
        LLVMValueRef p = ml_ev_operand(&a[k], a[k].addr_op);
        if ((ev->o.fields & ML_EVF_SHARED_LOADS) && a[k].kind == ML_EV_LOAD && p &&
            LLVMIsAAllocaInst(p) && !address_taken(p))
            continue;
        rc = push_point(ev, l, fn, a[k].kind, in, a[k].addr_op, a[k].len_op, a[k].size,
                        a[k].value_op, ML_EV_NOID);
    }
    return rc;
}

static LLVMValueRef first_real(LLVMBasicBlockRef bb)
{
    LLVMValueRef in = LLVMGetFirstInstruction(bb);

    while (in && (LLVMIsAPHINode(in) || LLVMIsALandingPadInst(in)))
        in = LLVMGetNextInstruction(in);
    return in;
}

/* A block entered only from pred (one edge): where an invoke's result can be read. */
static int single_pred(LLVMBasicBlockRef bb, LLVMBasicBlockRef pred)
{
    LLVMValueRef me = LLVMBasicBlockAsValue(bb);
    unsigned n = 0;

    for (LLVMUseRef u = LLVMGetFirstUse(me); u; u = LLVMGetNextUse(u)) {
        LLVMValueRef t = LLVMGetUser(u);
        if (!LLVMIsAInstruction(t) || LLVMGetInstructionParent(t) != pred)
            return 0;
        n++;
    }
    return n == 1;
}

/*
 * Heap blocks get their site from the call in instrumented code that
 * returned them (docs/profile-modules.md, "lifetime"): a call of a function
 * not defined here (malloc, new, strdup, fopen, a library's constructor, a
 * function pointer) returning a pointer, or posix_memalign (the block it
 * stored). The point reads the returned pointer from a helper instruction
 * made after the call (ptrtoint; posix_memalign: a load of *memptr), which
 * is returned so that the walk skips it; NULL when the call is not one.
 */
static LLVMValueRef alloc_site_point(struct ml_ev *ev, struct plist *l, LLVMValueRef fn,
                                     LLVMValueRef in)
{
    struct ml_ir *ir = ev->ir;
    LLVMValueRef f = ml_called_function(in), at;
    LLVMBasicBlockRef dest = NULL;
    const char *name = "";
    size_t len = 0;
    int memalign;

    if (!(ev->o.kinds & ML_EV_BIT(ML_EV_ALLOC_SITE)))
        return NULL;
    if (f && (LLVMGetIntrinsicID(f) || !LLVMIsDeclaration(f) || name_starts(f, "__memlens")))
        return NULL;
    if (f)
        name = fn_name(f, &len);
    memalign = len == 14 && !memcmp(name, "posix_memalign", 14);
    if (LLVMGetTypeKind(LLVMTypeOf(in)) != LLVMPointerTypeKind && !memalign)
        return NULL;
    if (LLVMIsAInvokeInst(in)) {
        dest = LLVMGetNormalDest(in);
        if (memalign || !single_pred(dest, LLVMGetInstructionParent(in)))
            return NULL;
        LLVMPositionBuilderBefore(ir->b, first_real(dest));
    } else {
        LLVMPositionBuilderBefore(ir->b, LLVMGetNextInstruction(in));
    }
    if (memalign) {
        LLVMValueRef pp =
            LLVMBuildBitCast(ir->b, LLVMGetOperand(in, 0), LLVMPointerType(ir->t_i8p, 0), "");
        at = LLVMBuildLoad2(ir->b, ir->t_i8p, pp, "memlens.block");
    } else {
        at = LLVMBuildPtrToInt(ir->b, in, ir->t_i64, "memlens.block");
    }
    LLVMInstructionSetDebugLoc(at, LLVMInstructionGetDebugLoc(in));
    {
        char text[len + 1];
        int64_t site;
        memcpy(text, name, len);
        text[len] = 0;
        site = add_site(ev, ML_EV_ALLOC_SITE, 0, ML_EV_NOID, fn, in, text);
        if (site < 0 || ml_ev_grow((void **)&l->v, &l->cap, l->n + 1, sizeof(*l->v)))
            return NULL;
        l->v[l->n++] = (struct ml_ev_point){
            ML_EV_ALLOC_SITE, (uint32_t)site, at, memalign ? -2 : 0, -1, -1, 0};
    }
    return dest ? in : at;
}

/*
 * Pointer creation (points-to): a load of a pointer and a call that returned
 * one (after its ALLOC_SITE point, so that a new block is named before the
 * pointer is looked up; `after` is that point's helper, or NULL).
 */
static int ptr_point(struct ml_ev *ev, struct plist *l, LLVMValueRef fn, LLVMValueRef in,
                     LLVMValueRef after)
{
    LLVMOpcode op = LLVMGetInstructionOpcode(in);

    if (!(ev->o.kinds & ML_EV_BIT(ML_EV_PTR_DEF)) ||
        LLVMGetTypeKind(LLVMTypeOf(in)) != LLVMPointerTypeKind)
        return 0;
    if (op == LLVMLoad)
        return push_point(ev, l, fn, ML_EV_PTR_DEF, in, -2, -1, ML_EV_PTR_LOAD, -1, ML_EV_NOID);
    if (op != LLVMCall || (ml_called_function(in) && LLVMGetIntrinsicID(ml_called_function(in))))
        return 0; /* an invoke's value exists only on its normal edge */
    if (after && LLVMIsAPtrToIntInst(after) && LLVMGetOperand(after, 0) == in)
        return push_point(ev, l, fn, ML_EV_PTR_DEF, after, 0, -1, ML_EV_PTR_CALL, -1, ML_EV_NOID);
    return push_point(ev, l, fn, ML_EV_PTR_DEF, in, -2, -1, ML_EV_PTR_CALL, -1, ML_EV_NOID);
}

/*
 * Pointer parameters of fn at its entry, before `at`: a helper ptrtoint of
 * each, located at the function's line (its subprogram), so that the site
 * reads "file:line of the function" whatever the optimiser did to the body.
 */
static int arg_points(struct ml_ev *ev, struct plist *l, LLVMValueRef fn, LLVMValueRef at)
{
    struct ml_ir *ir = ev->ir;
    LLVMMetadataRef sp = LLVMGetSubprogram(fn), loc = NULL;
    unsigned np = LLVMCountParams(fn);
    int rc = 0;

    if (!(ev->o.kinds & ML_EV_BIT(ML_EV_PTR_DEF)) || !at)
        return 0;
    if (sp)
        loc = LLVMDIBuilderCreateDebugLocation(ir->ctx, LLVMDISubprogramGetLine(sp), 0, sp, NULL);
    for (unsigned k = 0; k < np && !rc; k++) {
        LLVMValueRef a = LLVMGetParam(fn, k), h;
        if (LLVMGetTypeKind(LLVMTypeOf(a)) != LLVMPointerTypeKind)
            continue;
        LLVMPositionBuilderBefore(ir->b, at);
        h = LLVMBuildPtrToInt(ir->b, a, ir->t_i64, "memlens.arg");
        if (loc)
            LLVMInstructionSetDebugLoc(h, loc);
        rc = push_point(ev, l, fn, ML_EV_PTR_DEF, h, 0, -1, ML_EV_PTR_ARG + k, -1, ML_EV_NOID);
    }
    return rc;
}

/* ---- stack and global objects ---- */

/* A call of a function whose name starts with prefix (intrinsics included). */
static int calls(LLVMValueRef in, const char *prefix)
{
    LLVMValueRef f;

    if (!LLVMIsACallInst(in) || !(f = ml_called_function(in)))
        return 0;
    return name_starts(f, prefix);
}

/* The pointer v without bitcasts and all-zero GEPs (what a lifetime marker names). */
static LLVMValueRef strip_ptr(LLVMValueRef v)
{
    for (;;) {
        int zero = LLVMIsAGetElementPtrInst(v) != NULL;
        for (unsigned k = 1; zero && k < (unsigned)LLVMGetNumOperands(v); k++) {
            LLVMValueRef i = LLVMGetOperand(v, k);
            zero = LLVMIsAConstantInt(i) && !LLVMConstIntGetZExtValue(i);
        }
        if (zero || LLVMIsABitCastInst(v) ||
            (LLVMIsAConstantExpr(v) && LLVMGetConstOpcode(v) == LLVMBitCast))
            v = LLVMGetOperand(v, 0);
        else
            return v;
    }
}

/* Whether every use of v is a lifetime or debug marker (through bitcasts). */
static int only_markers(LLVMValueRef v)
{
    for (LLVMUseRef u = LLVMGetFirstUse(v); u; u = LLVMGetNextUse(u)) {
        LLVMValueRef t = LLVMGetUser(u);
        if (!calls(t, "llvm.lifetime.") && !calls(t, "llvm.dbg.") &&
            !(LLVMIsABitCastInst(t) && only_markers(t)))
            return 0;
    }
    return 1;
}

/*
 * Whether the address of alloca a is used otherwise than to load from it or
 * store to it (an object a pointer can reach: arrays, structs, &x); other
 * allocas are variables no pointer names and would only cost events.
 */
static int address_taken(LLVMValueRef a)
{
    for (LLVMUseRef u = LLVMGetFirstUse(a); u; u = LLVMGetNextUse(u)) {
        LLVMValueRef t = LLVMGetUser(u);
        if (LLVMIsALoadInst(t) || (LLVMIsAStoreInst(t) && LLVMGetOperand(t, 0) != a))
            continue;
        if (calls(t, "llvm.lifetime.") || calls(t, "llvm.dbg.") ||
            (LLVMIsABitCastInst(t) && only_markers(t)))
            continue;
        return 1;
    }
    return 0;
}

/* Bytes of a static alloca (constant count), 0 for a dynamic one. */
static uint64_t alloca_size(struct ml_ir *ir, LLVMValueRef a)
{
    LLVMValueRef n = LLVMGetOperand(a, 0);

    if (!LLVMIsAConstantInt(n))
        return 0;
    return LLVMABISizeOfType(ir->td, LLVMGetAllocatedType(a)) * LLVMConstIntGetZExtValue(n);
}

/* The name and declaration of a debug variable (DILocalVariable or DIGlobalVariable) varv. */
static void var_loc(LLVMValueRef varv, const char **name, size_t *nlen, struct loc *lc)
{
    LLVMMetadataRef var = LLVMValueAsMetadata(varv), file;
    unsigned n = LLVMGetMDNodeNumOperands(varv), flen = 0;

    if (n > 1) {
        LLVMValueRef ops[n];
        unsigned len = 0;
        const char *s;
        LLVMGetMDNodeOperands(varv, ops);
        if (ops[1] && (s = LLVMGetMDString(ops[1], &len)) && len) {
            *name = s;
            *nlen = len;
        }
    }
    file = LLVMDIVariableGetFile(var);
    if (file) {
        lc->file = LLVMDIFileGetFilename(file, &flen);
        lc->flen = flen;
    }
    lc->line = LLVMDIVariableGetLine(var);
    lc->col = 0;
}

struct sobj {
    LLVMValueRef a;
    uint64_t size;
    uint32_t marker;
    int marked; /* has an llvm.lifetime.start: made there, not at function entry */
    const char *name;
    size_t nlen;
    struct loc lc;
};

struct olist {
    struct sobj *v;
    uint32_t n, cap;
};

/*
 * The stack objects of fn: static, address-taken allocas of its entry block,
 * each with an object marker named after its variable (llvm.dbg.declare).
 * With make = 0 only finds whether there is one (no marker).
 */
static int stack_objects(struct ml_ev *ev, LLVMValueRef fn, struct olist *o, int make)
{
    LLVMBasicBlockRef entry = LLVMGetEntryBasicBlock(fn);
    size_t fnlen;
    const char *fname = fn_name(fn, &fnlen);

    for (LLVMValueRef in = LLVMGetFirstInstruction(entry); in; in = LLVMGetNextInstruction(in)) {
        uint64_t size;
        if (!LLVMIsAAllocaInst(in) || name_starts(in, "memlens") ||
            !(size = alloca_size(ev->ir, in)) || !address_taken(in))
            continue;
        if (ml_ev_grow((void **)&o->v, &o->cap, o->n + 1, sizeof(*o->v)))
            return -ENOMEM;
        o->v[o->n++] = (struct sobj){.a = in, .size = size};
        if (!make)
            return 0;
    }
    if (!make || !o->n)
        return 0;
    for (LLVMBasicBlockRef bb = entry; bb; bb = LLVMGetNextBasicBlock(bb))
        for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in; in = LLVMGetNextInstruction(in)) {
            int start = calls(in, "llvm.lifetime.start"), decl = calls(in, "llvm.dbg.declare");
            LLVMValueRef p = NULL;
            if (start)
                p = strip_ptr(LLVMGetOperand(in, 1));
            else if (decl && LLVMGetMDNodeNumOperands(LLVMGetOperand(in, 0)) == 1)
                LLVMGetMDNodeOperands(LLVMGetOperand(in, 0), &p);
            for (uint32_t i = 0; p && i < o->n; i++)
                if (o->v[i].a == p && start)
                    o->v[i].marked = 1;
                else if (o->v[i].a == p && !o->v[i].name)
                    var_loc(LLVMGetOperand(in, 1), &o->v[i].name, &o->v[i].nlen, &o->v[i].lc);
        }
    for (uint32_t i = 0; i < o->n; i++) {
        struct sobj *x = &o->v[i];
        int64_t mk;
        if (!x->name)
            x->name = LLVMGetValueName2(x->a, &x->nlen);
        if (!x->nlen) {
            x->name = "stack object";
            x->nlen = strlen(x->name);
        }
        if (!x->lc.line) { /* no debug variable: the function's line */
            LLVMMetadataRef sp = LLVMGetSubprogram(fn);
            unsigned line;
            loc_of(first_real(entry), &x->lc.file, &x->lc.flen, &line, &x->lc.col);
            x->lc.line = sp ? LLVMDISubprogramGetLine(sp) : line;
            x->lc.col = 0;
        }
        mk = add_marker_at(ev, ML_MK_OBJECT, x->name, x->nlen, fname, fnlen, &x->lc);
        if (mk < 0)
            return (int)mk;
        x->marker = (uint32_t)mk;
    }
    return 0;
}

/* A point of object x: its site at x's declaration. */
static int push_obj(struct ml_ev *ev, struct plist *l, const char *fname, size_t fnlen,
                    uint32_t kind, LLVMValueRef at, int addr_op, uint64_t size, uint32_t marker,
                    const struct loc *lc)
{
    int64_t site;

    if (!(ev->o.kinds & ML_EV_BIT(kind)))
        return 0;
    site = add_site_at(ev, kind, size, marker, fname, fnlen, lc, NULL);
    if (site < 0 || ml_ev_grow((void **)&l->v, &l->cap, l->n + 1, sizeof(*l->v)))
        return -ENOMEM;
    l->v[l->n++] = (struct ml_ev_point){kind, (uint32_t)site, at, addr_op, -1, -1, size};
    return 0;
}

/* Points of kind for the objects (marked ones too when all), at helpers before `before`. */
static int obj_points(struct ml_ev *ev, struct plist *l, LLVMValueRef fn, const struct olist *o,
                      uint32_t kind, int all, LLVMValueRef before, LLVMValueRef *first)
{
    struct ml_ir *ir = ev->ir;
    size_t fnlen;
    const char *fname = fn_name(fn, &fnlen);
    int rc = 0;

    for (uint32_t i = 0; i < o->n && !rc; i++) {
        LLVMValueRef h;
        if (o->v[i].marked && !all)
            continue;
        LLVMPositionBuilderBefore(ir->b, before);
        h = LLVMBuildPtrToInt(ir->b, o->v[i].a, ir->t_i64, "memlens.obj");
        if (first && !*first)
            *first = h;
        rc = push_obj(ev, l, fname, fnlen, kind, h, 0, o->v[i].size, o->v[i].marker, &o->v[i].lc);
    }
    return rc;
}

/* A lifetime marker of one of the objects: its STACK_ALLOC or STACK_FREE point. */
static int marker_point(struct ml_ev *ev, struct plist *l, LLVMValueRef fn, const struct olist *o,
                        LLVMValueRef in)
{
    int start = calls(in, "llvm.lifetime.start");
    LLVMValueRef p;
    size_t fnlen;
    const char *fname = fn_name(fn, &fnlen);

    if (!o->n || (!start && !calls(in, "llvm.lifetime.end")))
        return 0;
    p = strip_ptr(LLVMGetOperand(in, 1));
    for (uint32_t i = 0; i < o->n; i++)
        if (o->v[i].a == p)
            return push_obj(ev, l, fname, fnlen, start ? ML_EV_STACK_ALLOC : ML_EV_STACK_FREE, in,
                            1, o->v[i].size, o->v[i].marker, &o->v[i].lc);
    return 0;
}

/*
 * What a call may do for objects: 0 nothing (an intrinsic other than a
 * lifetime start, memlens' own), 1 make one (a function not defined here or
 * whose definition the link may replace, a function pointer, inline
 * assembly, a lifetime start), 2 what the defined function it calls may do.
 */
static int call_objects(LLVMValueRef in)
{
    LLVMValueRef f;

    if (!LLVMIsACallInst(in) && !LLVMIsAInvokeInst(in) && !LLVMIsACallBrInst(in))
        return 0;
    f = ml_called_function(in);
    if (!f)
        return 1;
    if (LLVMGetIntrinsicID(f))
        return name_starts(f, "llvm.lifetime.start");
    if (LLVMIsDeclaration(f))
        return !name_starts(f, "__memlens");
    switch (LLVMGetLinkage(f)) {
    case LLVMWeakAnyLinkage: /* the link may pick another definition */
    case LLVMLinkOnceAnyLinkage:
    case LLVMExternalWeakLinkage:
        return 1;
    default:
        return 2;
    }
}

/* Whether instruction in may make an object (once the object functions are known). */
static int makes_object(const struct ml_ev *ev, LLVMValueRef in)
{
    int k = call_objects(in);

    return k == 1 || (k == 2 && ml_ptrmap_get(&ev->objfns, ml_called_function(in)));
}

/*
 * Whether fn can make an object while it is the innermost instrumented
 * function: it has stack objects, or calls a function not defined here (which
 * may allocate), a function pointer, or a function defined here that can.
 */
static int object_functions(struct ml_ev *ev)
{
    struct ml_ir *ir = ev->ir;
    struct {
        LLVMValueRef from, to;
    } *e = NULL;
    uint32_t ne = 0, cap = 0;
    int rc = 0, changed = 1, stack = !!(ev->o.kinds & ML_EV_BIT(ML_EV_STACK_ALLOC));

    ml_ptrmap_init(&ev->objfns);
    for (LLVMValueRef fn = LLVMGetFirstFunction(ir->m); fn && !rc; fn = LLVMGetNextFunction(fn)) {
        int mk = 0;
        if (LLVMIsDeclaration(fn))
            continue;
        if (stack) {
            struct olist o = {0};
            rc = stack_objects(ev, fn, &o, 0);
            mk = o.n > 0;
            free(o.v);
        }
        for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb && !mk && !rc;
             bb = LLVMGetNextBasicBlock(bb))
            for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in && !mk && !rc;
                 in = LLVMGetNextInstruction(in)) {
                int k = call_objects(in);
                LLVMValueRef f = k == 2 ? ml_called_function(in) : NULL;
                if (k == 1)
                    mk = 1;
                else if (k == 2 && f != fn) {
                    if (ml_ev_grow((void **)&e, &cap, ne + 1, sizeof(*e)))
                        rc = -ENOMEM;
                    else
                        e[ne].from = fn, e[ne++].to = f;
                }
            }
        if (mk && !rc)
            rc = ml_ptrmap_put(&ev->objfns, fn, fn);
    }
    while (changed && !rc) {
        changed = 0;
        for (uint32_t i = 0; i < ne && !rc; i++)
            if (!ml_ptrmap_get(&ev->objfns, e[i].from) && ml_ptrmap_get(&ev->objfns, e[i].to)) {
                rc = ml_ptrmap_put(&ev->objfns, e[i].from, e[i].from);
                changed = 1;
            }
    }
    free(e);
    return rc;
}

int ml_ev_globals(struct ml_ev *ev, LLVMValueRef fn, LLVMValueRef before, struct ml_ev_point **out,
                  size_t *n)
{
    struct ml_ir *ir = ev->ir;
    struct plist l = {0};
    unsigned dbg = LLVMGetMDKindIDInContext(ir->ctx, "dbg", 3);
    int rc = 0;

    (void)fn;
    for (LLVMValueRef g = LLVMGetFirstGlobal(ir->m); g && !rc; g = LLVMGetNextGlobal(g)) {
        const char *sec = LLVMGetSection(g), *gname, *name;
        size_t glen, nlen;
        struct loc lc = {0};
        uint64_t size;
        size_t nmd = 0;
        LLVMValueMetadataEntry *md;
        int64_t mk;
        LLVMValueRef h;
        if (LLVMIsDeclaration(g) || LLVMIsThreadLocal(g) ||
            LLVMGetLinkage(g) == LLVMAvailableExternallyLinkage ||
            (sec && !strcmp(sec, "llvm.metadata")) || name_starts(g, "llvm.") ||
            name_starts(g, "__memlens") ||
            (LLVMGetLinkage(g) == LLVMPrivateLinkage &&
             LLVMGetUnnamedAddress(g) == LLVMGlobalUnnamedAddr) ||
            !LLVMTypeIsSized(LLVMGlobalGetValueType(g)) ||
            !(size = LLVMABISizeOfType(ir->td, LLVMGlobalGetValueType(g))))
            continue;
        name = gname = LLVMGetValueName2(g, &glen);
        nlen = glen;
        md = LLVMGlobalCopyAllMetadata(g, &nmd);
        for (size_t i = 0; i < nmd; i++)
            if (LLVMValueMetadataEntriesGetKind(md, (unsigned)i) == dbg) {
                LLVMMetadataRef v = LLVMDIGlobalVariableExpressionGetVariable(
                    LLVMValueMetadataEntriesGetMetadata(md, (unsigned)i));
                if (v)
                    var_loc(LLVMMetadataAsValue(ir->ctx, v), &name, &nlen, &lc);
                break;
            }
        if (md)
            LLVMDisposeValueMetadataEntries(md);
        /* The site's function is the symbol: globals without debug information stay apart. */
        mk = add_marker_at(ev, ML_MK_OBJECT, name, nlen, gname, glen, &lc);
        if (mk < 0) {
            rc = (int)mk;
            break;
        }
        /* A freeze is an instruction to anchor the point at (a ptrtoint of a global folds). */
        LLVMPositionBuilderBefore(ir->b, before);
        h = LLVMBuildFreeze(ir->b, g, "memlens.global");
        rc = push_obj(ev, &l, gname, glen, ML_EV_GLOBAL, h, -2, size, (uint32_t)mk, &lc);
    }
    if (rc) {
        free(l.v);
        return ml_ir_fail(ir, rc, "out of memory");
    }
    *out = l.v;
    *n = l.n;
    return 0;
}

/* Marker points waiting for the block made for them (split loop edges). */
struct edge_mark {
    LLVMBasicBlockRef bb;
    uint32_t kind, marker;
};

struct emlist {
    struct edge_mark *v;
    uint32_t n, cap;
};

static int add_edge_mark(struct emlist *e, LLVMBasicBlockRef bb, uint32_t kind, uint32_t marker)
{
    if (ml_ev_grow((void **)&e->v, &e->cap, e->n + 1, sizeof(*e->v)))
        return -ENOMEM;
    e->v[e->n++] = (struct edge_mark){bb, kind, marker};
    return 0;
}

/*
 * The loop whose next iteration the edge p -> s starts (s is its header, p
 * inside it), when iterations are wanted; -1 otherwise.
 */
static int back_edge_loop(const struct ml_cfg *cfg, unsigned p, unsigned s, int want,
                          const unsigned char *keep)
{
    if (!want)
        return -1;
    for (int l = cfg->loop_of[p]; l >= 0; l = cfg->loops[l].parent)
        if (cfg->loops[l].header == s)
            return keep[l] ? l : -1;
    return -1;
}

/*
 * The loops that get markers: all, or with ML_EVF_LOOP_OBJS those whose body
 * may make an object (and the loops around them). keep[] has nloops entries.
 */
static void loops_kept(const struct ml_ev *ev, const struct ml_cfg *cfg, unsigned char *keep)
{
    int all = !(ev->o.fields & ML_EVF_LOOP_OBJS);

    for (unsigned l = 0; l < cfg->nloops; l++)
        keep[l] = (unsigned char)all;
    for (unsigned b = 0; b < cfg->n && !all; b++) {
        int mk = 0;
        if (cfg->loop_of[b] < 0)
            continue;
        for (LLVMValueRef in = LLVMGetFirstInstruction(cfg->blocks[b]); in && !mk;
             in = LLVMGetNextInstruction(in))
            mk = makes_object(ev, in);
        for (int l = mk ? cfg->loop_of[b] : -1; l >= 0; l = cfg->loops[l].parent)
            keep[l] = 1;
    }
}

/*
 * Loop markers: one per natural loop, named "<function>:loop@<line>" after
 * the header's first located instruction. Every edge entering a loop (into
 * its header from outside) and every edge leaving it is routed through a new
 * block that holds the entry or exit points (outer loops entered first, inner
 * loops left first). Unwind edges cannot be split and get none.
 */
static int loop_marks(struct ml_ev *ev, LLVMValueRef fn, struct emlist *em)
{
    struct ml_cfg cfg = {0};
    int rc = ml_cfg_build(fn, &cfg), iters = !!(ev->o.kinds & ML_EV_BIT(ML_EV_LOOP_ITER));
    uint32_t *marker = NULL;
    unsigned char *keep = NULL;
    struct {
        LLVMBasicBlockRef p, s;
    } *edges = NULL;
    uint32_t nedges = 0, capedges = 0;

    if (rc)
        goto out;
    marker = calloc(cfg.nloops + 1, sizeof(*marker));
    keep = calloc(cfg.nloops + 1, 1);
    if (!marker || !keep) {
        rc = -ENOMEM;
        goto out;
    }
    loops_kept(ev, &cfg, keep);
    for (unsigned li = 0; li < cfg.nloops; li++) {
        if (!keep[li])
            continue;
        LLVMBasicBlockRef hb = cfg.blocks[cfg.loops[li].header];
        LLVMValueRef loc = NULL;
        unsigned line = 0;
        size_t nlen;
        const char *name = fn_name(fn, &nlen);
        for (LLVMValueRef in = LLVMGetFirstInstruction(hb); in && !loc;
             in = LLVMGetNextInstruction(in))
            if (LLVMGetDebugLocLine(in))
                loc = in;
        if (loc)
            line = LLVMGetDebugLocLine(loc);
        {
            char buf[nlen + 48];
            int64_t mk;
            snprintf(buf, sizeof(buf), "%.*s:loop@%u", (int)nlen, name, line);
            mk = add_marker(ev, ML_MK_LOOP, buf, strlen(buf), fn,
                            loc ? loc : LLVMGetFirstInstruction(hb), 0);
            if (mk < 0) {
                rc = (int)mk;
                goto out;
            }
            marker[li] = (uint32_t)mk;
        }
    }
    /* Edges that enter or leave some loop; split after collecting (splitting changes the CFG). */
    for (unsigned p = 0; p < cfg.n; p++) {
        if (cfg.rpo_num[p] < 0)
            continue;
        for (unsigned k = cfg.succ_off[p]; k < cfg.succ_off[p + 1]; k++) {
            unsigned s = cfg.succ[k];
            if (cfg.loop_of[p] == cfg.loop_of[s] && back_edge_loop(&cfg, p, s, iters, keep) < 0)
                continue;
            if (ml_ev_grow((void **)&edges, &capedges, nedges + 1, sizeof(*edges))) {
                rc = -ENOMEM;
                goto out;
            }
            edges[nedges].p = cfg.blocks[p];
            edges[nedges].s = cfg.blocks[s];
            nedges++;
        }
    }
    for (uint32_t e = 0; e < nedges; e++) {
        int pi = ml_cfg_index(&cfg, edges[e].p), si = ml_cfg_index(&cfg, edges[e].s);
        int left[64], entered[64], nl = 0, ne = 0;
        LLVMBasicBlockRef nb;
        /* Loops around p but not s are left (innermost first); around s but not p entered. */
        for (int l = cfg.loop_of[pi]; l >= 0 && nl < 64; l = cfg.loops[l].parent) {
            int in_s = 0;
            for (int m = cfg.loop_of[si]; m >= 0 && !in_s; m = cfg.loops[m].parent)
                in_s = m == l;
            if (!in_s && keep[l])
                left[nl++] = l;
        }
        for (int l = cfg.loop_of[si]; l >= 0 && ne < 64; l = cfg.loops[l].parent) {
            int in_p = 0;
            for (int m = cfg.loop_of[pi]; m >= 0 && !in_p; m = cfg.loops[m].parent)
                in_p = m == l;
            /* A back edge re-enters nothing: only edges into a header from outside enter. */
            if (!in_p && keep[l])
                entered[ne++] = l;
        }
        int iter = back_edge_loop(&cfg, (unsigned)pi, (unsigned)si, iters, keep);
        if (!nl && !ne && iter < 0)
            continue;
        nb = ml_split_edge(ev->ir, edges[e].p, edges[e].s, "memlens.loopedge");
        if (!nb)
            continue;
        for (int i = 0; i < nl && !rc; i++)
            rc = add_edge_mark(em, nb, ML_EV_LOOP_EXIT, marker[left[i]]);
        if (iter >= 0 && !rc)
            rc = add_edge_mark(em, nb, ML_EV_LOOP_ITER, marker[iter]);
        for (int i = ne - 1; i >= 0 && !rc; i--)
            rc = add_edge_mark(em, nb, ML_EV_LOOP_ENTRY, marker[entered[i]]);
        if (rc)
            goto out;
    }
out:
    free(edges);
    free(marker);
    free(keep);
    ml_cfg_free(&cfg);
    return rc;
}

int ml_ev_points(struct ml_ev *ev, LLVMValueRef fn, struct ml_ev_point **out, size_t *n)
{
    struct plist l = {0};
    struct emlist em = {0};
    struct olist objs = {0};
    int64_t fmark = -1;
    int rc = 0, objfn = !!ml_ptrmap_get(&ev->objfns, fn);

    /* Modules that need function or loop frames only around objects get none elsewhere. */
    if (ev->o.loops && (objfn || !(ev->o.fields & ML_EVF_LOOP_OBJS))) {
        rc = loop_marks(ev, fn, &em);
        if (rc)
            goto out;
    }
    if (ev->o.kinds & ML_EV_BIT(ML_EV_STACK_ALLOC)) {
        rc = stack_objects(ev, fn, &objs, 1);
        if (rc)
            goto out;
    }
    if (ev->o.functions && (objfn || !(ev->o.fields & ML_EVF_FUNC_OBJS))) {
        size_t nlen;
        const char *name = fn_name(fn, &nlen);
        fmark = add_marker(ev, ML_MK_FUNCTION, name, nlen, fn,
                           first_real(LLVMGetEntryBasicBlock(fn)), 0);
        if (fmark < 0) {
            rc = (int)fmark;
            goto out;
        }
    }
    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb && !rc;
         bb = LLVMGetNextBasicBlock(bb)) {
        LLVMValueRef in = LLVMGetFirstInstruction(bb);
        if (bb == LLVMGetEntryBasicBlock(fn)) {
            LLVMValueRef at = in, first = NULL;
            while (at && LLVMIsAAllocaInst(at))
                at = LLVMGetNextInstruction(at);
            rc = arg_points(ev, &l, fn, at);
            /* Objects without lifetime markers live from the entry, inside the call's frame. */
            uint32_t k0 = l.n, k1;
            if (!rc)
                rc = obj_points(ev, &l, fn, &objs, ML_EV_STACK_ALLOC, 0, at, &first);
            k1 = l.n;
            if (fmark >= 0 && !rc)
                rc = push_point(ev, &l, fn, ML_EV_FUNC_ENTRY, first ? first : at, -1, -1, 0, -1,
                                (uint32_t)fmark);
            if (!rc && l.n > k1 && k1 > k0) { /* the entry goes before those objects */
                struct ml_ev_point fe = l.v[k1];
                memmove(&l.v[k0 + 1], &l.v[k0], (k1 - k0) * sizeof(*l.v));
                l.v[k0] = fe;
            }
        }
        for (uint32_t i = 0; i < em.n && !rc; i++)
            if (em.v[i].bb == bb)
                rc = push_point(ev, &l, fn, em.v[i].kind, LLVMGetBasicBlockTerminator(bb), -1, -1,
                                0, -1, em.v[i].marker);
        for (; in && !rc; in = LLVMGetNextInstruction(in)) {
            LLVMOpcode op = LLVMGetInstructionOpcode(in);
            if (op == LLVMRet || op == LLVMResume) {
                /* Every object dies with the frame (those with markers too: any path may skip
                 * their end). */
                rc = obj_points(ev, &l, fn, &objs, ML_EV_STACK_FREE, 1, in, NULL);
                if (fmark >= 0 && !rc)
                    rc =
                        push_point(ev, &l, fn, ML_EV_FUNC_EXIT, in, -1, -1, 0, -1, (uint32_t)fmark);
            } else if ((rc = access_points(ev, &l, fn, in)) == 0 &&
                       (LLVMIsACallInst(in) || LLVMIsAInvokeInst(in))) {
                LLVMValueRef skip = alloc_site_point(ev, &l, fn, in);
                rc = marker_point(ev, &l, fn, &objs, in);
                if (!rc)
                    rc = ptr_point(ev, &l, fn, in, skip);
                if (skip)
                    in = skip;
            } else if (!rc) {
                rc = ptr_point(ev, &l, fn, in, NULL);
            }
        }
    }
out:
    free(em.v);
    free(objs.v);
    if (rc) {
        free(l.v);
        return rc == -ENOMEM ? ml_ir_fail(ev->ir, rc, "out of memory") : rc;
    }
    *out = l.v;
    *n = l.n;
    return 0;
}

LLVMValueRef ml_ev_emit_module(struct ml_ev *ev, LLVMValueRef segs_ptr, uint32_t nsegs,
                               const char *symbol)
{
    struct ml_ir *ir = ev->ir;
    struct ml_strtab st = {0};
    LLVMTypeRef site_f[9] = {ir->t_i32, ir->t_i32, ir->t_i32, ir->t_i32, ir->t_i32,
                             ir->t_i32, ir->t_i8p, ir->t_i8p, ir->t_i8p};
    LLVMTypeRef site_t = LLVMStructTypeInContext(ir->ctx, site_f, 9, 0);
    LLVMTypeRef mark_f[5] = {ir->t_i32, ir->t_i32, ir->t_i8p, ir->t_i8p, ir->t_i8p};
    LLVMTypeRef mark_t = LLVMStructTypeInContext(ir->ctx, mark_f, 5, 0);
    LLVMValueRef *sites = calloc(ev->nsites + 1, sizeof(*sites));
    LLVMValueRef *marks = calloc(ev->nmarkers + 1, sizeof(*marks));
    LLVMValueRef g_sites = NULL, g_marks = NULL, desc = NULL, mname;
    const char *modname;
    size_t len;

    if (!sites || !marks)
        goto out;
    for (uint32_t i = 0; i < ev->nsites; i++) {
        const struct ml_ev_site *x = &ev->sites[i];
        LLVMValueRef f[9] = {
            LLVMConstInt(ir->t_i32, x->kind, 0),   LLVMConstInt(ir->t_i32, x->size, 0),
            LLVMConstInt(ir->t_i32, x->weight, 0), LLVMConstInt(ir->t_i32, x->marker, 0),
            LLVMConstInt(ir->t_i32, x->line, 0),   LLVMConstInt(ir->t_i32, x->column, 0),
            ml_emit_cstr(ir, &st, x->func),        ml_emit_cstr(ir, &st, x->file),
            ml_emit_cstr(ir, &st, x->text)};
        if (!f[6] || !f[7] || !f[8])
            goto out;
        sites[i] = LLVMConstNamedStruct(site_t, f, 9);
    }
    for (uint32_t i = 0; i < ev->nmarkers; i++) {
        const struct ml_ev_marker *x = &ev->markers[i];
        LLVMValueRef f[5] = {LLVMConstInt(ir->t_i32, x->kind, 0),
                             LLVMConstInt(ir->t_i32, x->line, 0), ml_emit_cstr(ir, &st, x->name),
                             ml_emit_cstr(ir, &st, x->file), ml_emit_cstr(ir, &st, x->func)};
        if (!f[2] || !f[3] || !f[4])
            goto out;
        marks[i] = LLVMConstNamedStruct(mark_t, f, 5);
    }
    if (ev->nsites)
        g_sites =
            ml_emit_global(ir, LLVMConstArray(site_t, sites, ev->nsites), "__memlens_tsites", 1);
    if (ev->nmarkers)
        g_marks = ml_emit_global(ir, LLVMConstArray(mark_t, marks, ev->nmarkers),
                                 "__memlens_tmarkers", 1);
    modname = LLVMGetSourceFileName(ir->m, &len);
    {
        char name[len + 1];
        memcpy(name, modname, len);
        name[len] = 0;
        mname = ml_emit_cstr(ir, &st, name);
    }
    if (!mname)
        goto out;
    {
        /* Field order and types mirror struct ml_ev_module in format/events.h. */
        LLVMValueRef d[13] = {
            LLVMConstInt(ir->t_i32, ML_EV_ABI, 0),
            LLVMConstInt(ir->t_i32, ev->nsites, 0),
            LLVMConstInt(ir->t_i32, ev->nmarkers, 0),
            LLVMConstInt(ir->t_i32, nsegs, 0),
            LLVMConstInt(ir->t_i32, ev->o.functions || ev->o.loops ? ML_EVM_INLINE_MARKERS : 0, 0),
            LLVMConstInt(ir->t_i32, 0, 0),
            mname,
            ml_emit_array_ptr(ir, g_sites, site_t),
            ml_emit_array_ptr(ir, g_marks, mark_t),
            segs_ptr,
            LLVMConstInt(ir->t_i32, 0, 0),
            LLVMConstInt(ir->t_i32, 0, 0),
            LLVMConstNull(ir->t_i8p),
        };
        desc = ml_emit_global(ir, LLVMConstStructInContext(ir->ctx, d, 13, 0), symbol, 0);
    }
out:
    ml_emit_strtab_free(&st);
    free(sites);
    free(marks);
    return desc;
}

int ml_ev_barrier_between(LLVMValueRef from, LLVMValueRef to)
{
    for (LLVMValueRef in = from; in && in != to; in = LLVMGetNextInstruction(in))
        if (ml_ev_is_barrier(in))
            return 1;
    return 0;
}

/* Functions a sink instruments: defined here, not memlens' own, not naked. */
static int wanted(LLVMValueRef fn)
{
    size_t len;
    const char *name = LLVMGetValueName2(fn, &len);

    if (LLVMIsDeclaration(fn) || LLVMGetLinkage(fn) == LLVMAvailableExternallyLinkage)
        return 0;
    if (len >= 9 && !memcmp(name, "__memlens", 9))
        return 0;
    return !LLVMGetEnumAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                                        LLVMGetEnumAttributeKindForName("naked", 5));
}

int ml_ev_functions(struct ml_ir *ir, LLVMValueRef **out, size_t *n)
{
    LLVMValueRef *fns = NULL;
    size_t cap = 0;

    *n = 0;
    for (LLVMValueRef fn = LLVMGetFirstFunction(ir->m); fn; fn = LLVMGetNextFunction(fn)) {
        if (!wanted(fn))
            continue;
        if (*n == cap) {
            LLVMValueRef *v = realloc(fns, (cap = cap ? 2 * cap : 64) * sizeof(*v));
            if (!v) {
                free(fns);
                return ml_ir_fail(ir, -ENOMEM, "out of memory");
            }
            fns = v;
        }
        fns[(*n)++] = fn;
    }
    *out = fns;
    return 0;
}
