/* Region instrumenter: finds regions, clones callees, places counters and collects static facts. */
#include "instrument/ir/ir.h"
#include "instrument/ir/cfg.h"
#include "instrument/ir/events.h"
#include "instrument/ir/loops.h"
#include "runtime/abi.h"

#include <errno.h>
#include <llvm-c/Analysis.h>
#include <llvm-c/BitReader.h>
#include <llvm-c/BitWriter.h>
#include <llvm-c/DebugInfo.h>
#include <llvm-c/Linker.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { ST_UNK = 0, ST_IN = 1, ST_OUT = 2 };

int ml_ir_fail(struct ml_ir *ir, int code, const char *fmt, ...)
{
    va_list ap;

    if (ir->errlen && !ir->err[0]) {
        va_start(ap, fmt);
        vsnprintf(ir->err, ir->errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

void ml_ir_warn(struct ml_ir *ir, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;

    if (!ir->o || !ir->o->warn)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    ir->o->warn(ir->o->warn_ctx, msg);
}

int ml_grow(void **p, size_t *cap, size_t need, size_t elem)
{
    size_t c = *cap ? *cap : 16;
    void *q;

    if (need <= *cap)
        return 0;
    while (c < need)
        c *= 2;
    q = realloc(*p, c * elem);
    if (!q)
        return -ENOMEM;
    *p = q;
    *cap = c;
    return 0;
}

/* ---- region sets ---- */

int ml_regset_intern(struct ml_ir *ir, const uint32_t *ids, uint32_t n, uint32_t *off)
{
    for (size_t i = 0; i < ir->nwords; i += ir->words[i] + 1) {
        if (ir->words[i] == n && memcmp(ir->words + i + 1, ids, n * sizeof(*ids)) == 0) {
            *off = (uint32_t)i;
            return 0;
        }
    }
    if (ml_grow((void **)&ir->words, &ir->capwords, ir->nwords + n + 1, sizeof(*ir->words)))
        return -ENOMEM;
    *off = (uint32_t)ir->nwords;
    ir->words[ir->nwords++] = n;
    memcpy(ir->words + ir->nwords, ids, n * sizeof(*ids));
    ir->nwords += n;
    return 0;
}

int ml_regset_has(const struct ml_ir *ir, uint32_t off, uint32_t id)
{
    if (off == ML_NOSET)
        return 0;
    for (uint32_t i = 0; i < ir->words[off]; i++)
        if (ir->words[off + 1 + i] == id)
            return 1;
    return 0;
}

/* Interns ctx ∪ {active ids}; ML_NOSET when empty. */
static int regset_union(struct ml_ir *ir, uint32_t ctx, const uint32_t *add, uint32_t nadd,
                        uint32_t *off)
{
    uint32_t ids[ir->nregions + 1], n = 0;

    for (uint32_t r = 0; r < ir->nregions; r++) {
        int in = ml_regset_has(ir, ctx, r);
        for (uint32_t k = 0; !in && k < nadd; k++)
            in = add[k] == r;
        if (in)
            ids[n++] = r;
    }
    if (!n) {
        *off = ML_NOSET;
        return 0;
    }
    return ml_regset_intern(ir, ids, n, off);
}

/* ---- region markers ---- */

static LLVMValueRef global_base(LLVMValueRef v)
{
    while (v && LLVMIsAConstantExpr(v)) {
        LLVMOpcode op = LLVMGetConstOpcode(v);
        if (op != LLVMGetElementPtr && op != LLVMBitCast && op != LLVMAddrSpaceCast)
            return NULL;
        v = LLVMGetOperand(v, 0);
    }
    return v && LLVMIsAGlobalVariable(v) ? v : NULL;
}

int ml_string_literal(LLVMValueRef v, const char **s, size_t *len)
{
    LLVMValueRef g = global_base(v), init = g ? LLVMGetInitializer(g) : NULL;

    /* "" is a zeroinitializer, not a ConstantDataSequential: LLVMIsConstantString would crash. */
    if (init && LLVMIsAConstantAggregateZero(init)) {
        *s = "";
        *len = 0;
        return 1;
    }
    if (!init || !LLVMIsAConstantDataSequential(init) || !LLVMIsConstantString(init))
        return 0;
    *s = LLVMGetAsString(init, len);
    if (*len && (*s)[*len - 1] == 0)
        (*len)--;
    return 1;
}

void ml_describe_loc(LLVMValueRef inst, char *buf, size_t len)
{
    unsigned flen = 0;
    const char *file = LLVMGetDebugLocFilename(inst, &flen);
    size_t nlen;
    const char *fn =
        LLVMGetValueName2(LLVMGetBasicBlockParent(LLVMGetInstructionParent(inst)), &nlen);

    unsigned col = file && flen ? LLVMGetDebugLocColumn(inst) : 0;

    if (file && flen && col)
        snprintf(buf, len, "%.*s:%u:%u", (int)flen, file, LLVMGetDebugLocLine(inst), col);
    else if (file && flen)
        snprintf(buf, len, "%.*s:%u", (int)flen, file, LLVMGetDebugLocLine(inst));
    else
        snprintf(buf, len, "function '%.*s'", (int)nlen, fn);
}

/*
 * 1 = BEGIN, 2 = END, 0 = not a marker. Markers are calls of __memlens_roi_*
 * (memlens.h without memlens cc) or, from memlens cc, llvm.annotation calls
 * tagged with ML_ANNOT_BEGIN / ML_ANNOT_END: the optimiser knows those touch
 * none of the program's memory (docs/regions.md).
 */
static int marker_kind(struct ml_ir *ir, LLVMValueRef inst)
{
    LLVMValueRef fn, tag;

    if (!LLVMIsACallInst(inst) && !LLVMIsAInvokeInst(inst))
        return 0;
    fn = ml_called_function(inst);
    if (!fn)
        return 0;
    if (fn == ir->f_begin)
        return 1;
    if (fn == ir->f_end)
        return 2;
    if (!ir->annot_id || LLVMGetIntrinsicID(fn) != ir->annot_id)
        return 0;
    tag = LLVMGetOperand(inst, 0);
    if (!LLVMIsAConstantInt(tag))
        return 0;
    switch (LLVMConstIntGetZExtValue(tag)) {
    case ML_ANNOT_BEGIN:
        return 1;
    case ML_ANNOT_END:
        return 2;
    default:
        return 0;
    }
}

/* The region name operand of a marker call. */
static LLVMValueRef marker_name(struct ml_ir *ir, LLVMValueRef call)
{
    LLVMValueRef fn = ml_called_function(call);

    return LLVMGetOperand(call, fn && LLVMGetIntrinsicID(fn) == ir->annot_id ? 1 : 0);
}

/* Does the module hold a region marker? */
static int module_has_markers(struct ml_ir *ir)
{
    if ((ir->f_begin && LLVMGetFirstUse(ir->f_begin)) || (ir->f_end && LLVMGetFirstUse(ir->f_end)))
        return 1;
    for (LLVMValueRef fn = LLVMGetFirstFunction(ir->m); fn && ir->annot_id;
         fn = LLVMGetNextFunction(fn)) {
        if (LLVMGetIntrinsicID(fn) != ir->annot_id)
            continue;
        for (LLVMUseRef u = LLVMGetFirstUse(fn); u; u = LLVMGetNextUse(u))
            if (LLVMIsAInstruction(LLVMGetUser(u)) && marker_kind(ir, LLVMGetUser(u)))
                return 1;
    }
    return 0;
}

/* Removes a marker call; an annotation's result (its first operand) stays available. */
static void erase_marker(LLVMValueRef call)
{
    if (LLVMGetFirstUse(call))
        LLVMReplaceAllUsesWith(call, LLVMGetOperand(call, 0));
    LLVMInstructionEraseFromParent(call);
}

/*
 * Event sinks see region markers as calls of __memlens_roi_* (what memlens.h
 * gives without memlens cc): annotations become such calls, in place.
 */
static void markers_to_calls(struct ml_ir *ir)
{
    static const char *const names[2] = {"__memlens_roi_begin", "__memlens_roi_end"};
    LLVMTypeRef ty = LLVMFunctionType(LLVMVoidTypeInContext(ir->ctx), &ir->t_i8p, 1, 0);
    LLVMValueRef f[2] = {ir->f_begin, ir->f_end};

    for (LLVMValueRef fn = LLVMGetFirstFunction(ir->m); fn && ir->annot_id;
         fn = LLVMGetNextFunction(fn)) {
        if (LLVMGetIntrinsicID(fn) != ir->annot_id)
            continue;
        for (LLVMUseRef u = LLVMGetFirstUse(fn), next; u; u = next) {
            LLVMValueRef call = LLVMGetUser(u), name, c;
            int k = LLVMIsAInstruction(call) ? marker_kind(ir, call) : 0;
            next = LLVMGetNextUse(u);
            if (!k)
                continue;
            if (!f[k - 1])
                f[k - 1] = LLVMAddFunction(ir->m, names[k - 1], ty);
            name = marker_name(ir, call);
            LLVMPositionBuilderBefore(ir->b, call);
            {
                /*
                 * An annotation's string lives in section llvm.metadata, which is never
                 * emitted: a call that keeps it (the queue sink's) needs a copy of its own.
                 */
                const char *str;
                size_t len;
                if (ml_string_literal(name, &str, &len)) {
                    char buf[len + 1];
                    memcpy(buf, str, len);
                    buf[len] = 0;
                    name = LLVMBuildGlobalStringPtr(ir->b, buf, "memlens.region");
                }
            }
            c = LLVMBuildCall2(ir->b, ty, f[k - 1], &name, 1, "");
            LLVMInstructionSetDebugLoc(c, LLVMInstructionGetDebugLoc(call));
            erase_marker(call);
        }
    }
    ir->f_begin = f[0];
    ir->f_end = f[1];
}

static int region_intern(struct ml_ir *ir, const char *name, size_t len, uint32_t *id)
{
    size_t cap = ir->nregions;

    for (uint32_t i = 0; i < ir->nregions; i++)
        if (strlen(ir->regions[i]) == len && memcmp(ir->regions[i], name, len) == 0) {
            *id = i;
            return 0;
        }
    if (ml_grow((void **)&ir->regions, &cap, ir->nregions + 1, sizeof(*ir->regions)))
        return -ENOMEM;
    ir->regions[ir->nregions] = strndup(name, len);
    if (!ir->regions[ir->nregions])
        return -ENOMEM;
    *id = ir->nregions++;
    return 0;
}

static int marker_region(struct ml_ir *ir, LLVMValueRef call, uint32_t *id)
{
    const char *s;
    size_t len;
    char where[256];

    if (!ml_string_literal(marker_name(ir, call), &s, &len)) {
        ml_describe_loc(call, where, sizeof(where));
        return ml_ir_fail(ir, -EINVAL, "%s: region name is not a string literal", where);
    }
    if (LLVMIsAInvokeInst(call)) {
        ml_describe_loc(call, where, sizeof(where));
        return ml_ir_fail(ir, -EINVAL, "%s: region marker may throw; declare it through memlens.h",
                          where);
    }
    if (!len || memchr(s, 0, len)) {
        ml_describe_loc(call, where, sizeof(where));
        return ml_ir_fail(ir, -EINVAL, "%s: region name %s", where,
                          len ? "holds a NUL byte" : "is empty");
    }
    return region_intern(ir, s, len, id);
}

/* ---- per-function work ---- */

struct marker {
    LLVMValueRef call;
    uint32_t region;
    int begin;
    int nested; /* a BEGIN inside a region open in this function (decided before replacing) */
};

struct fwork {
    LLVMValueRef fn;
    uint32_t ctx;
    unsigned nb;
    LLVMBasicBlockRef *blocks;
    struct ml_ptrmap index; /* block value -> index + 1 */
    unsigned *npred;
    unsigned **preds;
    struct marker *markers;
    size_t nmarkers;
    uint32_t *local; /* regions begun or ended here that the context does not hold */
    uint32_t nlocal;
    unsigned char *in, *out; /* [nlocal * nb] */
    unsigned char *scoping;  /* [nlocal * nloops]: the loop holds BEGIN and END */
};

static int block_index(const struct fwork *w, LLVMBasicBlockRef bb)
{
    return (int)(uintptr_t)ml_ptrmap_get(&w->index, LLVMBasicBlockAsValue(bb)) - 1;
}

static void fwork_free(struct fwork *w)
{
    for (unsigned i = 0; i < w->nb && w->preds; i++)
        free(w->preds[i]);
    free(w->preds);
    free(w->npred);
    free(w->blocks);
    free(w->markers);
    free(w->local);
    free(w->in);
    free(w->out);
    free(w->scoping);
    ml_ptrmap_free(&w->index);
}

/*
 * An END ends a region only in the function that began it (a region also ends
 * when that function returns), so an END whose region no BEGIN of the same
 * function names ends nothing: a misspelt or mismatched name, reported.
 */
static int check_ends(struct ml_ir *ir, const struct fwork *w)
{
    for (size_t i = 0; i < w->nmarkers; i++) {
        size_t k = 0;
        char where[256];

        while (k < w->nmarkers &&
               (!w->markers[k].begin || w->markers[k].region != w->markers[i].region))
            k++;
        if (w->markers[i].begin || k < w->nmarkers)
            continue;
        ml_describe_loc(w->markers[i].call, where, sizeof(where));
        return ml_ir_fail(ir, -EINVAL,
                          "%s: MEMLENS_ROI_END(\"%s\") without a MEMLENS_ROI_BEGIN(\"%s\") in "
                          "the same function",
                          where, ir->regions[w->markers[i].region],
                          ir->regions[w->markers[i].region]);
    }
    return 0;
}

static int fwork_build(struct ml_ir *ir, struct fwork *w)
{
    LLVMBasicBlockRef bb;
    size_t capm = 0;
    unsigned i = 0;
    int rc;

    w->nb = LLVMCountBasicBlocks(w->fn);
    w->blocks = calloc(w->nb, sizeof(*w->blocks));
    w->npred = calloc(w->nb, sizeof(*w->npred));
    w->preds = calloc(w->nb, sizeof(*w->preds));
    if (!w->blocks || !w->npred || !w->preds)
        return -ENOMEM;
    for (bb = LLVMGetFirstBasicBlock(w->fn); bb; bb = LLVMGetNextBasicBlock(bb), i++) {
        w->blocks[i] = bb;
        if (ml_ptrmap_put(&w->index, LLVMBasicBlockAsValue(bb), (void *)(uintptr_t)(i + 1)))
            return -ENOMEM;
    }
    for (i = 0; i < w->nb; i++) {
        LLVMValueRef t = LLVMGetBasicBlockTerminator(w->blocks[i]);
        unsigned ns = t ? LLVMGetNumSuccessors(t) : 0;
        for (unsigned k = 0; k < ns; k++) {
            int s = block_index(w, LLVMGetSuccessor(t, k));
            unsigned *p;
            if (s < 0)
                continue;
            p = realloc(w->preds[s], (w->npred[s] + 1) * sizeof(*p));
            if (!p)
                return -ENOMEM;
            w->preds[s] = p;
            p[w->npred[s]++] = i;
        }
        for (LLVMValueRef in = LLVMGetFirstInstruction(w->blocks[i]); in;
             in = LLVMGetNextInstruction(in)) {
            int k = marker_kind(ir, in);
            uint32_t r = 0;
            if (!k)
                continue;
            rc = marker_region(ir, in, &r);
            if (rc)
                return rc;
            if (ml_grow((void **)&w->markers, &capm, w->nmarkers + 1, sizeof(*w->markers)))
                return -ENOMEM;
            w->markers[w->nmarkers++] = (struct marker){in, r, k == 1, 0};
        }
    }
    return check_ends(ir, w);
}

static const struct marker *find_marker(const struct fwork *w, LLVMValueRef inst)
{
    for (size_t i = 0; i < w->nmarkers; i++)
        if (w->markers[i].call == inst)
            return &w->markers[i];
    return NULL;
}

/* Is loop li an ancestor-or-self of the innermost loop of block b? */
static int loop_contains(const struct ml_cfg *cfg, int li, unsigned b)
{
    for (int l = cfg->loop_of[b]; l >= 0; l = cfg->loops[l].parent)
        if (l == li)
            return 1;
    return 0;
}

/*
 * A loop that holds both a BEGIN and an END of a region scopes it: leaving
 * the loop (break, goto, an exit of an endless loop) ends the region, even
 * when the code after the loop can only be reached from inside the region.
 * Returns a [nlocal * nloops] flag array.
 */
static unsigned char *scoping_loops(const struct fwork *w, const struct ml_cfg *cfg)
{
    size_t n = (size_t)w->nlocal * cfg->nloops;
    unsigned char *has_begin = calloc(n + 1, 1), *has_end = calloc(n + 1, 1);

    if (!has_begin || !has_end) {
        free(has_begin);
        free(has_end);
        return NULL;
    }
    for (size_t i = 0; i < w->nmarkers; i++) {
        int b = block_index(w, LLVMGetInstructionParent(w->markers[i].call)), l;
        uint32_t k;
        for (k = 0; k < w->nlocal && w->local[k] != w->markers[i].region; k++)
            ;
        if (b < 0 || k == w->nlocal)
            continue;
        for (l = cfg->loop_of[b]; l >= 0; l = cfg->loops[l].parent)
            (w->markers[i].begin ? has_begin : has_end)[(size_t)k * cfg->nloops + l] = 1;
    }
    for (size_t i = 0; i < n; i++)
        has_begin[i] &= has_end[i];
    free(has_end);
    return has_begin;
}

/* Does the edge p->s leave a loop that scopes local region l? */
static int edge_ends_region(const struct ml_cfg *cfg, const unsigned char *scoping, uint32_t l,
                            unsigned p, unsigned s)
{
    for (int li = cfg->loop_of[p]; li >= 0; li = cfg->loops[li].parent)
        if (scoping[(size_t)l * cfg->nloops + li] && !loop_contains(cfg, li, s))
            return 1;
    return 0;
}

/*
 * For each local region, a block is inside when every predecessor leaves the
 * region open (the entry block starts outside, and edges out of a scoping
 * loop close it). Unknown predecessors (not yet reached) are ignored, so
 * states only move unknown -> in -> out and the iteration ends.
 */
static int region_dataflow(struct fwork *w, const struct ml_cfg *cfg)
{
    size_t n = (size_t)w->nlocal * w->nb;
    int changed = 1;

    w->in = calloc(n ? n : 1, 1);
    w->out = calloc(n ? n : 1, 1);
    w->scoping = scoping_loops(w, cfg);
    if (!w->in || !w->out || !w->scoping)
        return -ENOMEM;
    for (uint32_t l = 0; l < w->nlocal; l++) {
        unsigned char *in = w->in + (size_t)l * w->nb, *out = w->out + (size_t)l * w->nb;
        in[0] = ST_OUT;
        changed = 1;
        while (changed) {
            changed = 0;
            for (unsigned b = 0; b < w->nb; b++) {
                unsigned char st = in[b];
                if (b) {
                    unsigned char agg = ST_UNK;
                    for (unsigned k = 0; k < w->npred[b]; k++) {
                        unsigned p = w->preds[b][k];
                        unsigned char ps = out[p];
                        if (ps == ST_IN && edge_ends_region(cfg, w->scoping, l, p, b))
                            ps = ST_OUT;
                        if (ps == ST_OUT)
                            agg = ST_OUT;
                        else if (ps == ST_IN && agg == ST_UNK)
                            agg = ST_IN;
                    }
                    st = agg;
                }
                if (st != in[b]) {
                    in[b] = st;
                    changed = 1;
                }
                if (st != ST_UNK)
                    for (LLVMValueRef i = LLVMGetFirstInstruction(w->blocks[b]); i;
                         i = LLVMGetNextInstruction(i)) {
                        const struct marker *m = find_marker(w, i);
                        if (m && m->region == w->local[l])
                            st = m->begin ? ST_IN : ST_OUT;
                    }
                if (st != out[b]) {
                    out[b] = st;
                    changed = 1;
                }
            }
        }
    }
    return 0;
}

/*
 * Where inst stands in its function's own source: an instruction inlined from
 * another function (a header's kernel, a static helper) is placed at the call
 * site, so a unit, and the function row that --top derives from its units,
 * never points into the inlined callee's file and lines.
 */
static const char *own_loc(LLVMValueRef inst, unsigned *flen, unsigned *line)
{
    LLVMMetadataRef loc = inst ? LLVMInstructionGetDebugLoc(inst) : NULL, at, file;

    *flen = 0;
    *line = 0;
    if (!loc)
        return NULL;
    while ((at = LLVMDILocationGetInlinedAt(loc)))
        loc = at;
    file = LLVMDIScopeGetFile(LLVMDILocationGetScope(loc));
    if (!file)
        return NULL;
    *line = LLVMDILocationGetLine(loc);
    return LLVMDIFileGetFilename(file, flen);
}

static int new_unit(struct ml_ir *ir, uint32_t kind, uint32_t regset, const char *func,
                    LLVMValueRef loc, uint32_t *idx)
{
    struct ml_unit *u;
    unsigned flen = 0, line = 0;
    const char *file = own_loc(loc, &flen, &line);

    if (ml_grow((void **)&ir->units, &ir->capunits, ir->nunits + 1, sizeof(*ir->units)))
        return -ENOMEM;
    u = &ir->units[ir->nunits];
    memset(u, 0, sizeof(*u));
    u->kind = kind;
    u->regset = regset;
    u->flags = ir->cur_base ? ML_RT_UNIT_DYN : 0;
    u->func = func;
    u->line = file && flen ? line : 0;
    u->file = strndup(file && flen ? file : "", flen);
    if (!u->file)
        return -ENOMEM;
    /* A bytes unit stands for one instruction: its share is all or nothing (inl_finish). */
    if (kind == ML_UNIT_BYTES && loc)
        u->isp = ml_inl_scope(loc, &u->iline);
    *idx = (uint32_t)ir->nunits++;
    return 0;
}

/* Records `per` calls to callee per execution of unit. */
static int add_call(struct ml_ir *ir, uint32_t unit, const char *callee, size_t len, uint64_t per)
{
    for (size_t i = ir->ncalls; i-- > 0 && ir->calls[i].unit == unit;)
        if (strlen(ir->calls[i].callee) == len && !memcmp(ir->calls[i].callee, callee, len)) {
            ir->calls[i].per_exec += per;
            return 0;
        }
    if (ml_grow((void **)&ir->calls, &ir->capcalls, ir->ncalls + 1, sizeof(*ir->calls)))
        return -ENOMEM;
    ir->calls[ir->ncalls].unit = unit;
    ir->calls[ir->ncalls].per_exec = per;
    ir->calls[ir->ncalls].callee = strndup(callee, len);
    if (!ir->calls[ir->ncalls].callee)
        return -ENOMEM;
    ir->ncalls++;
    return 0;
}

/*
 * In a function that is not versioned (computed goto), every execution runs the
 * counted code: counts add by times the thread's measured flag (1 or 0), which
 * its BEGIN sites store in the module block. Built at the builder's position.
 */
static LLVMValueRef mult_by(struct ml_ir *ir, LLVMValueRef by)
{
    LLVMValueRef m;

    if (!ir->cur_mult)
        return by;
    m = LLVMBuildLoad2(ir->b, ir->t_i64, ir->mult_ph, "");
    return LLVMIsAConstantInt(by) && LLVMConstIntGetZExtValue(by) == 1
               ? m
               : LLVMBuildMul(ir->b, by, m, "");
}

static int add_uinfo(struct ml_ir *ir, uint32_t unit, uint32_t kind, const char *name, size_t len)
{
    if (ml_grow((void **)&ir->uinfo, &ir->capuinfo, ir->nuinfo + 1, sizeof(*ir->uinfo)))
        return -ENOMEM;
    ir->uinfo[ir->nuinfo] = (struct ml_uinfo){unit, kind, strndup(name, len)};
    return ir->uinfo[ir->nuinfo++].name ? 0 : -ENOMEM;
}

static int add_late(struct ml_ir *ir, LLVMValueRef call, uint32_t regset, uint32_t ticks)
{
    if (ml_grow((void **)&ir->late, &ir->caplate, ir->nlate + 1, sizeof(*ir->late)))
        return -ENOMEM;
    ir->late[ir->nlate++] = (struct ml_late){call, ir->cur_mult, regset, ticks};
    return 0;
}

/*
 * Adds `by` to a counter slot before `before`: one load-add-store on a
 * thread-local slot (or, in code counted under the dynamic context, on the
 * block the function found at its entry).
 */
static void emit_add(struct ml_ir *ir, LLVMValueRef before, uint32_t slot, LLVMValueRef by)
{
    LLVMValueRef idx = LLVMConstInt(ir->t_i64, slot, 0), p, v;

    LLVMPositionBuilderBefore(ir->b, before);
    by = mult_by(ir, by);
    p = ir->cur_base ? LLVMBuildGEP2(ir->b, ir->t_i64, ir->cur_base, &idx, 1, "")
                     : LLVMConstGEP2(ir->t_i64, ir->ctr_ph, &idx, 1);
    v = LLVMBuildLoad2(ir->b, ir->t_i64, p, "");
    v = LLVMBuildAdd(ir->b, v, by, "");
    LLVMBuildStore(ir->b, v, p);
}

/* The block index of v's block in the function being counted, or -1. */
static int block_of(const struct ml_ir *ir, LLVMValueRef v)
{
    void *i = ir->cur_cfg ? ml_ptrmap_get(&ir->cur_cfg->index,
                                          LLVMBasicBlockAsValue(LLVMGetInstructionParent(v)))
                          : NULL;

    return i ? (int)((uintptr_t)i - 1) : -1;
}

/*
 * Where the stack test of p, used at `before`, goes: the preheader of the
 * outermost loop around `before` that p does not change in (p is defined
 * outside it, so its definition dominates the preheader) and that holds no
 * region marker (after versioning, a BEGIN of the plain copy may enter the
 * loop's instrumented copy without passing its preheader), or `before`.
 */
static LLVMValueRef bit_point(const struct ml_ir *ir, LLVMValueRef p, LLVMValueRef before)
{
    const struct ml_cfg *cfg = ir->cur_cfg;
    int b = LLVMIsAInstruction(p) ? block_of(ir, before) : -1, d = b >= 0 ? block_of(ir, p) : -1;
    int target = -1;

    if (d < 0)
        return before;
    for (int l = cfg->loop_of[b]; l >= 0 && !loop_contains(cfg, l, (unsigned)d) &&
                                  cfg->loops[l].preheader >= 0 && !ir->cur_marked[l];
         l = cfg->loops[l].parent)
        target = cfg->loops[l].preheader;
    return target >= 0 ? LLVMGetBasicBlockTerminator(cfg->blocks[target]) : before;
}

/*
 * 1 when p points into the calling thread's stack, else 0 (i64), built before
 * `before`: (p - stack_lo) < stack_size on the bounds the runtime keeps in the
 * module's thread-local block (both 0 on a thread it does not know: heap).
 * Arguments are tested once, in the entry block (the same for both copies of a
 * versioned function); other pointers outside the loops they do not change in
 * (bit_point), once per preheader.
 */
static LLVMValueRef stack_bit(struct ml_ir *ir, LLVMValueRef p, LLVMValueRef before)
{
    LLVMValueRef one = LLVMConstInt(ir->t_i64, 1, 0), lo, size, v, cached, at = before;
    struct ml_ptrmap *cache = LLVMIsAArgument(p) ? &ir->argbits : &ir->ptrbits;

    if (LLVMIsAArgument(p)) {
        before = LLVMGetFirstInstruction(LLVMGetEntryBasicBlock(LLVMGetParamParent(p)));
        while (before && LLVMIsAAllocaInst(before))
            before = LLVMGetNextInstruction(before);
    } else {
        before = bit_point(ir, p, before);
    }
    cached = ml_ptrmap_get(cache, p);
    if (cached && LLVMGetInstructionParent(cached) == LLVMGetInstructionParent(before))
        return cached;
    if (before == at) /* not hoisted: no other use may share it */
        cache = NULL;
    LLVMPositionBuilderBefore(ir->b, before);
    lo = LLVMBuildLoad2(ir->b, ir->t_i64, ir->stk_ph, "");
    size = LLVMBuildLoad2(ir->b, ir->t_i64, LLVMConstGEP2(ir->t_i64, ir->stk_ph, &one, 1), "");
    v = LLVMBuildSub(ir->b, LLVMBuildPtrToInt(ir->b, p, ir->t_i64, ""), lo, "");
    v = LLVMBuildZExt(ir->b, LLVMBuildICmp(ir->b, LLVMIntULT, v, size, ""), ir->t_i64, "");
    if (cache && ml_ptrmap_put(cache, p, v))
        return NULL;
    return v;
}

/* Adds `by` to counter slot + bit (bit: an i64 0 or 1) before `before`. */
static void emit_add_at(struct ml_ir *ir, LLVMValueRef before, uint32_t slot, LLVMValueRef bit,
                        LLVMValueRef by)
{
    LLVMValueRef idx, p, v;

    LLVMPositionBuilderBefore(ir->b, before);
    by = mult_by(ir, by);
    idx = LLVMBuildAdd(ir->b, LLVMConstInt(ir->t_i64, slot, 0), bit, "");
    p = LLVMBuildGEP2(ir->b, ir->t_i64, ir->cur_base ? ir->cur_base : ir->ctr_ph, &idx, 1, "");
    v = LLVMBuildLoad2(ir->b, ir->t_i64, p, "");
    LLVMBuildStore(ir->b, LLVMBuildAdd(ir->b, v, by, ""), p);
}

/*
 * Two units for bytes whose class the address decides: heap (slot) and stack
 * (slot + 1), with rd and wr bytes each per count and `incr` increments.
 */
static int new_pair(struct ml_ir *ir, uint32_t kind, uint32_t regset, const char *func,
                    LLVMValueRef loc, uint64_t rd, uint64_t wr, uint64_t incr, uint32_t *slot)
{
    uint32_t u;
    int rc;

    for (int k = 0; k < 2; k++) {
        rc = new_unit(ir, kind, regset, func, loc, &u);
        if (rc)
            return rc;
        ir->units[u].facts[k ? ML_F_RD_STACK : ML_F_RD_HEAP] = rd;
        ir->units[u].facts[k ? ML_F_WR_STACK : ML_F_WR_HEAP] = wr;
        ir->units[u].facts[ML_F_INCR] = incr;
        if (!k)
            *slot = u;
    }
    return 0;
}

/*
 * A hoisted unit's bytes through a pointer that does not change in its loops (an argument, or
 * defined where it dominates the anchor): counted at the anchor with the unit's count.
 */
struct deferred {
    uint32_t unit, slot;
    LLVMValueRef base;
};

static int invariant_at_anchor(const struct ml_ir *ir, LLVMValueRef p)
{
    int d = LLVMIsAInstruction(p) ? block_of(ir, p) : -1;

    return LLVMIsAArgument(p) ||
           (d >= 0 && ir->cur_anchor >= 0 &&
            ml_cfg_dominates(ir->cur_cfg, (unsigned)d, (unsigned)ir->cur_anchor));
}

static LLVMValueRef clone_for(struct ml_ir *ir, LLVMValueRef fn, uint32_t ctx, uint32_t argsig);

/*
 * Class + 1 of each pointer argument 0-15 of a call (0: only the address can
 * tell). For an OpenMP microtask (threads) a pointer into this thread's stack
 * is left to the address: to the other threads of the team it is not stack.
 */
static uint32_t call_argsig(struct ml_ir *ir, LLVMValueRef call, unsigned first_arg,
                            unsigned first_param, int threads)
{
    unsigned nargs = (unsigned)LLVMGetNumArgOperands(call);
    uint32_t sig = 0;

    for (unsigned a = first_arg, p = first_param; a < nargs && p < 16; a++, p++) {
        LLVMValueRef v = LLVMGetOperand(call, a), base;
        enum ml_memclass c;
        if (LLVMGetTypeKind(LLVMTypeOf(v)) != LLVMPointerTypeKind)
            continue;
        c = ml_ptr_origin(ir, v, &base);
        if (c != ML_DYNAMIC && !(threads && c == ML_STACK))
            sig |= (uint32_t)(c + 1) << (2 * p);
    }
    return sig;
}

/* Blocks ml_dyn_base adds before a function's entry: not the program's, never counted. */
static int is_dyn_block(LLVMBasicBlockRef bb)
{
    const char *name = LLVMGetBasicBlockName(bb);

    return name && !strncmp(name, "memlens.dyn", 11);
}

/* OpenMP outlines parallel bodies: the microtask is region code run by every thread. */
static int is_fork_call(LLVMValueRef fn)
{
    size_t len;
    const char *name = LLVMGetValueName2(fn, &len);

    return (len == 16 && !memcmp(name, "__kmpc_fork_call", 16)) ||
           (len == 17 && !memcmp(name, "__kmpc_fork_teams", 17));
}

static int is_runtime_fn(LLVMValueRef fn)
{
    size_t len;
    const char *name = LLVMGetValueName2(fn, &len);

    return len >= 9 && !memcmp(name, "__memlens", 9);
}

/* Bytes `n` (i64) through p read (rd) or written, counted into a new bytes unit before `at`. */
static int count_bytes(struct ml_ir *ir, LLVMValueRef p, LLVMValueRef n, int rd, uint32_t regset,
                       const char *func, LLVMValueRef loc, LLVMValueRef at)
{
    LLVMValueRef base, bit;
    enum ml_memclass c = ml_ptr_origin(ir, p, &base);
    uint32_t bu;
    int rc;

    if (c != ML_DYNAMIC) {
        rc = new_unit(ir, ML_UNIT_BYTES, regset, func, loc, &bu);
        if (rc)
            return rc;
        ir->units[bu].facts[(rd ? ML_F_RD_HEAP : ML_F_WR_HEAP) + c] = 1;
        emit_add(ir, at, bu, n);
        return 0;
    }
    rc = new_pair(ir, ML_UNIT_BYTES, regset, func, loc, rd, !rd, 0, &bu);
    if (rc)
        return rc;
    bit = stack_bit(ir, base, at);
    if (!bit)
        return -ENOMEM;
    emit_add_at(ir, at, bu, bit, n);
    return 0;
}

/* Size argument(s) of allocators: index of the size, and of a second factor (calloc) or -1. */
static const struct {
    const char *name;
    int size, times;
} alloc_sizes[] = {
    {"malloc", 0, -1},
    {"valloc", 0, -1},
    {"pvalloc", 0, -1},
    {"calloc", 0, 1},
    {"realloc", 1, -1},
    {"reallocarray", 1, 2},
    {"aligned_alloc", 1, -1},
    {"memalign", 1, -1},
    {"posix_memalign", 2, -1},
    {"_Znwm", 0, -1},
    {"_Znam", 0, -1},
    {"_ZnwmRKSt9nothrow_t", 0, -1},
    {"_ZnamRKSt9nothrow_t", 0, -1},
    {"_ZnwmSt11align_val_t", 0, -1},
    {"_ZnamSt11align_val_t", 0, -1},
};

static const char *const deallocators[] = {
    "free",
    "cfree",
    "_ZdlPv",
    "_ZdaPv",
    "_ZdlPvm",
    "_ZdaPvm",
    "_ZdlPvSt11align_val_t",
    "_ZdaPvSt11align_val_t",
    "_ZdlPvmSt11align_val_t",
    "_ZdaPvmSt11align_val_t",
};

/*
 * Library calls whose effect the arguments or the result tell, from region
 * code (docs/regions.md, "Library work"): bytes of strlen, strnlen, memchr,
 * stpcpy, strncpy, stpncpy (counted like the program's own); the bytes asked
 * of allocators and the calls of deallocators (UNITINFO units).
 */
static int library_call(struct ml_ir *ir, LLVMValueRef call, LLVMValueRef fn, uint32_t regset,
                        const char *func)
{
    size_t len;
    const char *name = LLVMGetValueName2(fn, &len);
    unsigned nargs = (unsigned)LLVMGetNumArgOperands(call);
    LLVMValueRef next = LLVMGetNextInstruction(call), one = LLVMConstInt(ir->t_i64, 1, 0), n;
    uint32_t u;
    int rc;

#define IS(s) (len == sizeof(s) - 1 && !memcmp(name, s, len))
    for (size_t i = 0; i < sizeof(alloc_sizes) / sizeof(alloc_sizes[0]); i++) {
        if (strlen(alloc_sizes[i].name) != len || memcmp(name, alloc_sizes[i].name, len) ||
            (unsigned)alloc_sizes[i].size >= nargs || alloc_sizes[i].times >= (int)nargs)
            continue;
        LLVMPositionBuilderBefore(ir->b, call);
        n = LLVMBuildZExtOrBitCast(ir->b, LLVMGetOperand(call, (unsigned)alloc_sizes[i].size),
                                   ir->t_i64, "");
        if (alloc_sizes[i].times >= 0)
            n = LLVMBuildMul(
                ir->b, n,
                LLVMBuildZExtOrBitCast(ir->b, LLVMGetOperand(call, (unsigned)alloc_sizes[i].times),
                                       ir->t_i64, ""),
                "");
        rc = new_unit(ir, ML_UNIT_BYTES, regset, func, call, &u);
        if (!rc)
            rc = add_uinfo(ir, u, ML_UI_ALLOC_BYTES, name, len);
        if (rc)
            return rc;
        emit_add(ir, call, u, n);
        return 0;
    }
    for (size_t i = 0; i < sizeof(deallocators) / sizeof(deallocators[0]); i++) {
        if (strlen(deallocators[i]) != len || memcmp(name, deallocators[i], len))
            continue;
        rc = new_unit(ir, ML_UNIT_BYTES, regset, func, call, &u);
        if (!rc)
            rc = add_uinfo(ir, u, ML_UI_FREE_CALLS, name, len);
        if (rc)
            return rc;
        emit_add(ir, call, u, one);
        return 0;
    }
    /* The bytes follow from the result: counted after the call (a plain call, never an invoke). */
    if (!LLVMIsACallInst(call) || !next)
        return 0;
    LLVMPositionBuilderBefore(ir->b, next);
    if ((IS("strlen") || IS("strnlen")) && nargs >= 1) {
        n = LLVMBuildAdd(ir->b, LLVMBuildZExtOrBitCast(ir->b, call, ir->t_i64, ""), one, "");
        if (IS("strnlen") && nargs >= 2) {
            LLVMValueRef max =
                LLVMBuildZExtOrBitCast(ir->b, LLVMGetOperand(call, 1), ir->t_i64, "");
            n = LLVMBuildSelect(ir->b, LLVMBuildICmp(ir->b, LLVMIntULT, n, max, ""), n, max, "");
        }
        return count_bytes(ir, LLVMGetOperand(call, 0), n, 1, regset, func, call, next);
    }
    if (IS("memchr") && nargs >= 3) {
        LLVMValueRef s0 = LLVMBuildPtrToInt(ir->b, LLVMGetOperand(call, 0), ir->t_i64, "");
        LLVMValueRef r = LLVMBuildPtrToInt(ir->b, call, ir->t_i64, "");
        LLVMValueRef all = LLVMBuildZExtOrBitCast(ir->b, LLVMGetOperand(call, 2), ir->t_i64, "");
        n = LLVMBuildSelect(ir->b,
                            LLVMBuildICmp(ir->b, LLVMIntEQ, r, LLVMConstInt(ir->t_i64, 0, 0), ""),
                            all, LLVMBuildAdd(ir->b, LLVMBuildSub(ir->b, r, s0, ""), one, ""), "");
        return count_bytes(ir, LLVMGetOperand(call, 0), n, 1, regset, func, call, next);
    }
    if (IS("stpcpy") && nargs >= 2) {
        n = LLVMBuildAdd(
            ir->b,
            LLVMBuildSub(ir->b, LLVMBuildPtrToInt(ir->b, call, ir->t_i64, ""),
                         LLVMBuildPtrToInt(ir->b, LLVMGetOperand(call, 0), ir->t_i64, ""), ""),
            one, "");
        rc = count_bytes(ir, LLVMGetOperand(call, 1), n, 1, regset, func, call, next);
        return rc ? rc : count_bytes(ir, LLVMGetOperand(call, 0), n, 0, regset, func, call, next);
    }
    if ((IS("strncpy") || IS("stpncpy")) && nargs >= 3) {
        n = LLVMBuildZExtOrBitCast(ir->b, LLVMGetOperand(call, 2), ir->t_i64, "");
        return count_bytes(ir, LLVMGetOperand(call, 0), n, 0, regset, func, call, next);
    }
#undef IS
    return 0;
}

/*
 * Calls out of a region: clone bodies we have, record the rest as not seen
 * (mult calls per execution of unit).
 */
static int region_call(struct ml_ir *ir, LLVMValueRef call, uint32_t unit, uint64_t mult,
                       uint32_t regset, const char *func)
{
    LLVMValueRef fn = ml_called_function(call);
    int nops = LLVMGetNumOperands(call);
    size_t len;
    const char *name;
    int mk = ml_mem_call_kind(call);

    if (mk) {
        LLVMValueRef n = LLVMGetOperand(call, 2), len;
        int rc;
        if (LLVMIsAConstantInt(n))
            return 0;
        LLVMPositionBuilderBefore(ir->b, call);
        len = LLVMBuildZExtOrBitCast(ir->b, n, ir->t_i64, "");
        /* Per byte moved: written to the destination, read from the source (copies). */
        for (int side = 0; side < (mk == 1 ? 2 : 1); side++) {
            LLVMValueRef base, bit;
            enum ml_memclass c = ml_ptr_origin(ir, LLVMGetOperand(call, (unsigned)side), &base);
            uint32_t bu;
            if (c != ML_DYNAMIC) {
                rc = new_unit(ir, ML_UNIT_BYTES, regset, func, call, &bu);
                if (rc)
                    return rc;
                ir->units[bu].facts[(side ? ML_F_RD_HEAP : ML_F_WR_HEAP) + c] = 1;
                emit_add(ir, call, bu, len);
                continue;
            }
            rc = new_pair(ir, ML_UNIT_BYTES, regset, func, call, side, !side, 0, &bu);
            if (rc)
                return rc;
            bit = stack_bit(ir, base, call);
            if (!bit)
                return -ENOMEM;
            emit_add_at(ir, call, bu, bit, len);
        }
        return 0;
    }
    {
        /*
         * Missed by the static sets: instrumented code it reaches counts for them at run time
         * (the dynamic context); not seen, a known callee's time in timed executions is kept.
         */
        int missed =
            !fn || (!LLVMGetIntrinsicID(fn) && (LLVMIsDeclaration(fn) || !ml_can_clone(fn)) &&
                    !is_fork_call(fn) && !is_runtime_fn(fn));
        uint32_t ctxset =
            ir->dynset != ML_NOSET && regset != ir->dynset && regset != ML_NOSET && missed
                ? regset
                : ML_NOSET;
        uint32_t ticks = UINT32_MAX;
        int rc;
        if (fn && missed && !ir->cur_base && regset != ML_NOSET && LLVMIsACallInst(call)) {
            name = LLVMGetValueName2(fn, &len);
            rc = new_unit(ir, ML_UNIT_BYTES, regset, func, call, &ticks);
            if (!rc)
                rc = add_uinfo(ir, ticks, ML_UI_NOTSEEN_TICKS, name, len);
            if (rc)
                return rc;
        }
        if ((ctxset != ML_NOSET || ticks != UINT32_MAX) && add_late(ir, call, ctxset, ticks))
            return -ENOMEM;
        if (fn && missed && LLVMIsDeclaration(fn) && regset != ML_NOSET) {
            rc = library_call(ir, call, fn, regset, func);
            if (rc)
                return rc;
        }
    }
    if (!fn)
        return add_call(ir, unit, "(indirect call)", 15, mult);
    if (LLVMGetIntrinsicID(fn))
        return 0;
    name = LLVMGetValueName2(fn, &len);
    /* All-blocks mode outside regions: defined callees count their own blocks in place. */
    if (regset == ir->noregion && !LLVMIsDeclaration(fn))
        return 0;
    if (LLVMIsDeclaration(fn)) {
        /* OpenMP outlines parallel bodies: the microtask is region code run by every thread. */
        if (is_fork_call(fn)) {
            LLVMValueRef mt = LLVMGetOperand(call, 2), base = mt;
            while (base && LLVMIsAConstantExpr(base) && LLVMGetConstOpcode(base) == LLVMBitCast)
                base = LLVMGetOperand(base, 0);
            if (base && LLVMIsAFunction(base) && ml_can_clone(base) && regset != ir->noregion) {
                /* The microtask's arguments 2... are the fork call's 3... */
                LLVMValueRef c = clone_for(ir, base, regset, call_argsig(ir, call, 3, 2, 1));
                if (!c)
                    return -ENOMEM;
                LLVMSetOperand(call, 2, LLVMConstBitCast(c, LLVMTypeOf(mt)));
            }
        }
        return add_call(ir, unit, name, len, mult);
    }
    if (!ml_can_clone(fn))
        return add_call(ir, unit, name, len, mult);
    LLVMValueRef c = clone_for(ir, fn, regset, call_argsig(ir, call, 0, 0, 0));
    if (!c)
        return -ENOMEM;
    LLVMValueRef old = LLVMGetOperand(call, (unsigned)nops - 1);
    LLVMSetOperand(call, (unsigned)nops - 1,
                   LLVMTypeOf(old) == LLVMTypeOf(c) ? c : LLVMConstBitCast(c, LLVMTypeOf(old)));
    return 0;
}

static LLVMValueRef first_insertion_point(LLVMBasicBlockRef bb)
{
    LLVMValueRef in = LLVMGetFirstInstruction(bb);

    while (in && (LLVMIsAPHINode(in) || LLVMIsALandingPadInst(in)))
        in = LLVMGetNextInstruction(in);
    return in;
}

/* Exact mode: tell the runtime about each access of the segment's instructions, with its
 * address. */
static void emit_exact(struct ml_ir *ir, LLVMValueRef *insts, size_t n, uint32_t unit)
{
    for (size_t i = 0; i < n; i++) {
        struct ml_ev_point a[2];
        int na = ml_ev_accesses(ir->td, insts[i], a);
        for (int k = 0; k < na; k++) {
            LLVMValueRef args[5], len = ml_ev_operand(&a[k], a[k].len_op);
            LLVMPositionBuilderBefore(ir->b, insts[i]);
            args[0] = ir->desc_ph;
            args[1] = LLVMConstInt(ir->t_i32, unit, 0);
            args[2] =
                LLVMBuildPointerCast(ir->b, ml_ev_operand(&a[k], a[k].addr_op), ir->t_i8p, "");
            args[3] = len ? LLVMBuildZExtOrBitCast(ir->b, len, ir->t_i64, "")
                          : LLVMConstInt(ir->t_i64, a[k].size, 0);
            /* flags: bit 0 read, bit 1 write */
            args[4] = LLVMConstInt(ir->t_i32,
                                   a[k].kind == ML_EV_LOAD    ? 1
                                   : a[k].kind == ML_EV_STORE ? 2
                                                              : 3,
                                   0);
            LLVMBuildCall2(ir->b, ir->ty_access, ir->f_access, args, 5, "");
        }
    }
}

/*
 * Counts one segment [from, to) of a block whose active region set is regset.
 * When *holder names a unit, the segment's facts join it; otherwise a new unit
 * is made and *holder set to it. Each execution of the segment stands for mult
 * executions of the holder's code (mult > 1 inside folded constant-count
 * loops). own: the holder counts by its own increment, placed before `at` by
 * the first such segment; otherwise (a hoisted counter, or a host whose own
 * segment comes later) none is placed here. adds: hoisted adds placed at the
 * end of this block, so that ML_F_INCR counts every add executed. The
 * segment's instructions are listed first because handling them inserts new
 * ones.
 */
static int count_segment(struct ml_ir *ir, LLVMValueRef from, LLVMValueRef to, LLVMValueRef at,
                         uint32_t regset, const char *func, uint32_t *holder, uint64_t mult,
                         int own, unsigned adds, int hoist, struct deferred **defs, size_t *ndefs,
                         size_t *capdefs)
{
    uint64_t facts[ML_NFACTS] = {0}, f0[ML_NFACTS], rd0[ML_MAX_DYN], wr0[ML_MAX_DYN];
    LLVMValueRef loc = NULL, *insts = NULL;
    struct ml_dynbytes dyn[ML_MAX_DYN];
    struct ml_inlseg inl = {0};
    size_t n = 0, cap = 0, ndyn, nd0;
    uint32_t unit, iline;
    int any = 0, rc = 0, place;

    ir->dyn = dyn;
    ir->ndyn = 0;
    for (LLVMValueRef in = from; in != to; in = LLVMGetNextInstruction(in)) {
        LLVMMetadataRef sp = ml_inl_scope(in, &iline);
        if (ml_grow((void **)&insts, &cap, n + 1, sizeof(*insts))) {
            rc = -ENOMEM;
            goto out;
        }
        insts[n++] = in;
        if (sp) {
            memcpy(f0, facts, sizeof(f0));
            for (nd0 = 0; nd0 < ir->ndyn; nd0++) {
                rd0[nd0] = dyn[nd0].rd;
                wr0[nd0] = dyn[nd0].wr;
            }
        }
        any |= ml_facts_add(ir, in, facts);
        if (sp && ml_inl_seg_add(&inl, sp, iline, f0, facts, dyn, ir->ndyn, rd0, wr0, nd0)) {
            rc = -ENOMEM;
            goto out;
        }
        /* A variable-size memcpy/memset gets a bytes counter per side: more adds here. */
        if ((LLVMIsACallInst(in) || LLVMIsAInvokeInst(in)) && ml_mem_call_kind(in) &&
            !LLVMIsAConstantInt(LLVMGetOperand(in, 2)))
            facts[ML_F_INCR] += ml_mem_call_kind(in) == 1 ? 2 : 1;
        if (!loc && LLVMGetDebugLocLine(in))
            loc = in;
    }
    ndyn = ir->ndyn;
    ir->dyn = NULL;
    if ((!any && from != to) || !at)
        goto out;
    place = own && (*holder == UINT32_MAX || !ir->units[*holder].placed);
    facts[ML_F_INCR] += adds + (place ? 1 : 0);
    for (int k = 0; k < ML_NFACTS; k++)
        facts[k] *= mult;
    if (*holder != UINT32_MAX) {
        unit = *holder;
        for (int k = 0; k < ML_NFACTS; k++)
            ir->units[unit].facts[k] += facts[k];
    } else {
        rc = new_unit(ir, ML_UNIT_BLOCK, regset, func, loc, &unit);
        if (rc)
            goto out;
        memcpy(ir->units[unit].facts, facts, sizeof(facts));
    }
    for (size_t i = 0; i < inl.n; i++) {
        for (int k = 0; k < ML_NFACTS; k++)
            inl.a[i].facts[k] *= mult;
        rc = ml_inl_record(ir, unit, inl.a[i].sp, inl.a[i].line, inl.a[i].facts);
        if (rc)
            goto out;
    }
    /*
     * Bytes through a pointer of unknown class: a pair of units (heap, stack), one of which
     * counts each execution by the pointer's address. Through an argument of a hoisted unit:
     * at the anchor with the unit's count; else before the segment's first access.
     */
    for (size_t i = 0; i < ndyn; i++) {
        int defer = hoist && invariant_at_anchor(ir, dyn[i].base);
        uint32_t slot;
        LLVMValueRef bit;
        rc = new_pair(ir, ML_UNIT_BLOCK, regset, func, loc, dyn[i].rd, dyn[i].wr, !defer, &slot);
        if (rc)
            goto out;
        /* The pair's bytes that inlined code moved: heap to the first unit, stack to the next. */
        for (size_t j = 0; j < inl.n; j++)
            for (int k = 0; k < 2; k++) {
                uint64_t f[ML_NFACTS] = {0};
                f[k ? ML_F_RD_STACK : ML_F_RD_HEAP] = inl.a[j].rd[i];
                f[k ? ML_F_WR_STACK : ML_F_WR_HEAP] = inl.a[j].wr[i];
                rc = ml_inl_record(ir, slot + (uint32_t)k, inl.a[j].sp, inl.a[j].line, f);
                if (rc)
                    goto out;
            }
        if (defer) {
            if (ml_grow((void **)defs, capdefs, *ndefs + 1, sizeof(**defs))) {
                rc = -ENOMEM;
                goto out;
            }
            (*defs)[(*ndefs)++] = (struct deferred){unit, slot, dyn[i].base};
            continue;
        }
        bit = stack_bit(ir, dyn[i].base, dyn[i].first);
        if (!bit) {
            rc = -ENOMEM;
            goto out;
        }
        emit_add_at(ir, dyn[i].first, slot, bit, LLVMConstInt(ir->t_i64, 1, 0));
    }
    if (ir->o && ir->o->exact)
        emit_exact(ir, insts, n, unit);
    for (size_t i = 0; i < n; i++) {
        if ((LLVMIsACallInst(insts[i]) || LLVMIsAInvokeInst(insts[i])) &&
            !ml_is_ignored_call(insts[i])) {
            rc = region_call(ir, insts[i], unit, mult, regset, func);
            if (rc)
                goto out;
        }
    }
    if (place) {
        emit_add(ir, at, unit, LLVMConstInt(ir->t_i64, 1, 0));
        ir->units[unit].placed = 1;
    }
    *holder = unit;
out:
    ir->dyn = NULL;
    free(insts);
    free(inl.a);
    return rc;
}

static LLVMValueRef emit_marker_call(struct ml_ir *ir, LLVMValueRef fn, uint32_t region)
{
    LLVMValueRef args[2] = {ir->desc_ph, LLVMConstInt(ir->t_i32, region, 0)};
    return LLVMBuildCall2(ir->b, fn == ir->f_exit ? ir->ty_exit : ir->ty_enter, fn, args, 2, "");
}

/* Redirects edge p->s through a new block that closes regions; fixes the phis of s. */
static int exit_on_edge(struct ml_ir *ir, struct fwork *w, unsigned p, unsigned s,
                        const uint32_t *regions, uint32_t n)
{
    LLVMBasicBlockRef nb = ml_split_edge(ir, w->blocks[p], w->blocks[s], "memlens.exit");

    /* Unwind and indirect edges cannot be split; the runtime closes such regions later. */
    if (!nb)
        return 0;
    LLVMPositionBuilderBefore(ir->b, LLVMGetBasicBlockTerminator(nb));
    for (uint32_t i = 0; i < n; i++)
        emit_marker_call(ir, ir->f_exit, regions[i]);
    return 0;
}

static int local_index(const struct fwork *w, uint32_t region)
{
    for (uint32_t l = 0; l < w->nlocal; l++)
        if (w->local[l] == region)
            return (int)l;
    return -1;
}

static int block_has_marker(const struct fwork *w, LLVMBasicBlockRef bb)
{
    for (size_t i = 0; i < w->nmarkers; i++)
        if (LLVMGetInstructionParent(w->markers[i].call) == bb)
            return 1;
    return 0;
}

/*
 * Gives a preheader to each loop that lacks one but would fold with it: a new
 * block on the edge from the header's only outside predecessor. Its branch is
 * not the program's, so it is not counted (synth holds the new blocks).
 */
static int split_preheaders(struct ml_ir *ir, LLVMValueRef fn, struct ml_ptrmap *synth)
{
    struct ml_cfg cfg = {0};
    int rc = ml_cfg_build(fn, &cfg), e;

    for (unsigned li = 0; !rc && li < cfg.nloops; li++) {
        LLVMBasicBlockRef hb = cfg.blocks[cfg.loops[li].header], eb, nb;
        LLVMValueRef term;
        if (!ml_loopfold_wants_preheader(&cfg, li, &e))
            continue;
        eb = cfg.blocks[e];
        term = LLVMGetBasicBlockTerminator(eb);
        nb = LLVMInsertBasicBlockInContext(ir->ctx, hb, "memlens.ph");
        LLVMPositionBuilderAtEnd(ir->b, nb);
        /* The builder may still carry a location from another function (invalid here). */
        LLVMSetCurrentDebugLocation2(ir->b, LLVMInstructionGetDebugLoc(term));
        LLVMBuildBr(ir->b, hb);
        for (unsigned k = 0; k < LLVMGetNumSuccessors(term); k++)
            if (LLVMGetSuccessor(term, k) == hb)
                LLVMSetSuccessor(term, k, nb);
        ml_phis_retarget(ir, hb, eb, nb);
        if (ml_ptrmap_put(synth, LLVMBasicBlockAsValue(nb), nb))
            rc = -ENOMEM;
    }
    ml_cfg_free(&cfg);
    return rc;
}

/*
 * Plans loop folding (docs/loops.md): set_of[b] is the region set at the end
 * of block b (after its markers); blocks holding a marker never lie in a
 * folded loop but may be its preheader. Only classes whose blocks share one
 * counter (no marker, not unshared by versioning) may host merged facts.
 */
static int plan_loops(struct ml_ir *ir, const struct fwork *w, const struct ml_cfg *cfg,
                      const int *class_of, unsigned nclasses, const unsigned char *unshared,
                      uint32_t **set_of, struct ml_loopfold *lf)
{
    unsigned char *marked = calloc(w->nb + 1, 1), *keyed = calloc(nclasses + 1, 1);
    uint32_t active[w->nlocal + 1], nact;
    int rc = -ENOMEM;

    *set_of = calloc(w->nb + 1, sizeof(**set_of));
    if (!*set_of || !marked || !keyed)
        goto out;
    for (unsigned c = 0; c < nclasses; c++)
        keyed[c] = !unshared[c];
    for (unsigned b = 0; b < w->nb; b++) {
        nact = 0;
        for (uint32_t l = 0; l < w->nlocal; l++)
            if (w->out[(size_t)l * w->nb + b] == ST_IN)
                active[nact++] = w->local[l];
        marked[b] = block_has_marker(w, w->blocks[b]);
        if (marked[b] && class_of[b] >= 0)
            keyed[class_of[b]] = 0;
        rc = regset_union(ir, w->ctx, active, nact, &(*set_of)[b]);
        if (rc)
            goto out;
    }
    rc = ml_loopfold_plan(cfg, class_of, nclasses, *set_of, marked, keyed, lf);
out:
    free(marked);
    free(keyed);
    return rc;
}

/*
 * In a versioned function the code switches copies at BEGIN sites, so blocks
 * may share a counter only when no BEGIN site lies between them: one
 * execution then runs all of them in the same copy. For each class, walks the
 * paths from its leader to its last member within one iteration of their loop
 * and marks the class unshared when one passes a block holding a BEGIN.
 */
static int unshared_classes(const struct fwork *w, const struct ml_cfg *cfg, const int *class_of,
                            const unsigned *leaders, unsigned nclasses, unsigned char *unshared)
{
    unsigned char *has_begin = calloc(w->nb + 1, 1), *seen = calloc(w->nb + 1, 1);
    unsigned *last = calloc(nclasses + 1, sizeof(*last)),
             *stack = calloc(w->nb + 1, sizeof(*stack));
    int rc = 0;

    if (!has_begin || !seen || !last || !stack) {
        rc = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < w->nmarkers; i++) {
        int b = block_index(w, LLVMGetInstructionParent(w->markers[i].call));
        if (b >= 0 && w->markers[i].begin)
            has_begin[b] = 1;
    }
    for (unsigned c = 0; c < nclasses; c++)
        last[c] = leaders[c];
    for (unsigned b = 0; b < w->nb; b++)
        if (class_of[b] >= 0 && cfg->dom_pre[b] > cfg->dom_pre[last[class_of[b]]])
            last[class_of[b]] = b;
    for (unsigned c = 0; c < nclasses; c++) {
        unsigned a = leaders[c], n = 0;
        int l = cfg->loop_of[a];
        if (last[c] == a)
            continue;
        memset(seen, 0, w->nb);
        stack[n++] = a;
        seen[a] = 1;
        while (n && !unshared[c]) {
            unsigned x = stack[--n];
            if (x != a && has_begin[x])
                unshared[c] = 1;
            if (x == last[c])
                continue;
            for (unsigned k = cfg->succ_off[x]; k < cfg->succ_off[x + 1]; k++) {
                unsigned s = cfg->succ[k];
                if (seen[s] || (l >= 0 && (s == cfg->loops[l].header || !loop_contains(cfg, l, s))))
                    continue;
                seen[s] = 1;
                stack[n++] = s;
            }
        }
    }
out:
    free(has_begin);
    free(seen);
    free(last);
    free(stack);
    return rc;
}

/* Is some local region open (every path into it) just before marker m? */
static int marker_nested(const struct fwork *w, const struct marker *m)
{
    LLVMBasicBlockRef bb = LLVMGetInstructionParent(m->call);
    int b = block_index(w, bb);
    unsigned char open[w->nlocal + 1];

    if (b < 0)
        return 0;
    for (uint32_t l = 0; l < w->nlocal; l++)
        open[l] = w->in[(size_t)l * w->nb + (unsigned)b] == ST_IN;
    for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in && in != m->call;
         in = LLVMGetNextInstruction(in)) {
        const struct marker *k = find_marker(w, in);
        int l = k ? local_index(w, k->region) : -1;
        if (l >= 0)
            open[l] = (unsigned char)k->begin;
    }
    for (uint32_t l = 0; l < w->nlocal; l++)
        if (open[l])
            return 1;
    return 0;
}

static int instrument_function(struct ml_ir *ir, const struct ml_work *job)
{
    struct fwork w = {.fn = job->fn, .ctx = job->ctx};
    int dyn = ir->dynset != ML_NOSET && job->ctx == ir->dynset;
    uint32_t *active = NULL; /* sized after the markers have named their regions */
    struct ml_cfg cfg = {0};
    struct ml_ptrmap holders; /* (class, region set) -> unit + 1 */
    struct ml_ptrmap synth;   /* preheaders made by split_preheaders */
    struct ml_loopfold lf = {0};
    int *class_of = NULL, nclasses;
    unsigned *leaders = NULL;
    uint32_t *set_of = NULL, *hoisted = NULL; /* hoisted: units counted at an anchor, + class */
    size_t nhoisted = 0, first_unit, ndefs = 0, capdefs = 0;
    struct deferred *defs = NULL; /* bytes of hoisted units through invariant pointers */
    unsigned first_real = 0;      /* the function's own entry (after ml_dyn_base's blocks) */
    unsigned char *unshared = NULL, *marked = NULL; /* marked: loops holding a marker */
    int rc;

    ir->argsig = job->argsig;
    ir->cur_mult = job->mult;
    ml_ptrmap_free(&ir->argbits);
    ml_ptrmap_init(&ir->argbits);
    ml_ptrmap_free(&ir->ptrbits);
    ml_ptrmap_init(&ir->ptrbits);
    ir->cur_cfg = NULL;
    ir->cur_anchor = -1;
    /* A copy counted under the dynamic context finds its counter block first. */
    ir->cur_base = dyn ? ml_dyn_base(ir, w.fn) : NULL;
    ml_ptrmap_init(&w.index);
    ml_ptrmap_init(&holders);
    ml_ptrmap_init(&synth);
    rc = job->plain ? 0 : split_preheaders(ir, w.fn, &synth);
    if (rc)
        goto out;
    rc = fwork_build(ir, &w);
    if (rc)
        goto out;
    /* Blocks that always execute equally often share one counter. */
    rc = ml_cfg_build(w.fn, &cfg);
    if (rc)
        goto out;
    marked = calloc(cfg.nloops + 1, 1);
    if (!marked) {
        rc = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < w.nmarkers; i++) {
        int b = block_index(&w, LLVMGetInstructionParent(w.markers[i].call));
        for (int l = b >= 0 ? cfg.loop_of[b] : -1; l >= 0; l = cfg.loops[l].parent)
            marked[l] = 1;
    }
    ir->cur_cfg = &cfg;
    ir->cur_marked = marked;
    class_of = calloc(w.nb + 1, sizeof(*class_of));
    leaders = calloc(w.nb + 1, sizeof(*leaders));
    active = calloc(ir->nregions + 1, sizeof(*active));
    if (!class_of || !leaders || !active) {
        rc = -ENOMEM;
        goto out;
    }
    nclasses = ml_cfg_equiv_classes(&cfg, class_of, leaders);
    unshared = calloc((size_t)(nclasses > 0 ? nclasses : 0) + 1, 1);
    if (nclasses < 0 || !unshared) {
        rc = -ENOMEM;
        goto out;
    }
    w.local = calloc(w.nmarkers + 1, sizeof(*w.local));
    if (!w.local) {
        rc = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < w.nmarkers; i++)
        if (!ml_regset_has(ir, w.ctx, w.markers[i].region) &&
            local_index(&w, w.markers[i].region) < 0)
            w.local[w.nlocal++] = w.markers[i].region;
    rc = region_dataflow(&w, &cfg);
    if (rc)
        goto out;
    if (job->versioned && !job->plain) {
        rc = unshared_classes(&w, &cfg, class_of, leaders, (unsigned)nclasses, unshared);
        if (rc)
            goto out;
    }
    rc = plan_loops(ir, &w, &cfg, class_of, (unsigned)nclasses, unshared, &set_of, &lf);
    if (rc)
        goto out;
    hoisted = calloc(2 * (size_t)nclasses + 1, sizeof(*hoisted));
    if (!hoisted) {
        rc = -ENOMEM;
        goto out;
    }

    /*
     * Count every segment whose region set is non-empty (every segment in all-blocks mode);
     * the plain copy counts nothing.
     */
    first_unit = ir->nunits;
    while (first_real < w.nb && is_dyn_block(w.blocks[first_real]))
        first_real++;
    for (unsigned b = first_real; b < w.nb && !job->plain; b++) {
        LLVMBasicBlockRef bb = w.blocks[b];
        LLVMValueRef from = LLVMGetFirstInstruction(bb), at = first_insertion_point(bb);
        uint32_t nact = 0, set;
        int reachable = cfg.rpo_num[b] >= 0, whole = !block_has_marker(&w, bb);
        LLVMValueRef term = LLVMGetBasicBlockTerminator(bb);
        /* A preheader we made: nothing of its own to count, only what it hosts. */
        int made = ml_ptrmap_get(&synth, LLVMBasicBlockAsValue(bb)) != NULL;
        /*
         * Segments of a marked block run as often as the block, in the copy its last BEGIN (or
         * the class's leader's) chose: those after that BEGIN share the class's counter too
         * (the block after BEGIN and the one holding END of a loop body: one add, not two),
         * unless loop folding or a copy switch inside the class (unshared) is involved.
         */
        int part = !whole && reachable && !job->mult && !unshared[class_of[b]] &&
                   lf.host[class_of[b]] == class_of[b] && lf.anchor[class_of[b]] < 0;
        unsigned begins = 0; /* BEGINs of this block not passed yet */

        if (reachable && unshared[class_of[b]])
            whole = 0;
        for (size_t i = 0; i < w.nmarkers; i++)
            begins += w.markers[i].begin && LLVMGetInstructionParent(w.markers[i].call) == bb;

        for (uint32_t l = 0; l < w.nlocal; l++)
            if (w.in[(size_t)l * w.nb + b] == ST_IN)
                active[nact++] = w.local[l];
        if (!reachable)
            continue;
        for (LLVMValueRef in = LLVMGetFirstInstruction(bb);; in = LLVMGetNextInstruction(in)) {
            const struct marker *m = in ? find_marker(&w, in) : NULL;
            if (in && !m)
                continue;
            rc = regset_union(ir, w.ctx, active, nact, &set);
            if (rc)
                goto out;
            if (set == ML_NOSET)
                set = dyn ? ir->dynset : ir->noregion;
            if (set != ML_NOSET && from != in) {
                uint32_t holder = UINT32_MAX;
                /* Folding only involves whole blocks (the planner sees to it). */
                int c = class_of[b], host = whole ? lf.host[c] : c;
                int hoist = whole && host == c && lf.anchor[c] >= 0,
                    share = whole || (part && !begins);
                void *key = (void *)(uintptr_t)(((uint64_t)host << 32 | set) + 1);
                if (share && ml_ptrmap_get(&holders, key))
                    holder = (uint32_t)(uintptr_t)ml_ptrmap_get(&holders, key) - 1;
                ir->cur_anchor = hoist ? lf.anchor[c] : -1;
                rc = count_segment(ir, made ? term : from, made ? term : in, made ? term : at, set,
                                   job->src_name, &holder, whole ? lf.factor[c] : 1,
                                   host == c && !hoist, in ? 0 : lf.adds[b], hoist, &defs, &ndefs,
                                   &capdefs);
                if (rc)
                    goto out;
                if (hoist && holder != UINT32_MAX && !ir->units[holder].placed) {
                    ir->units[holder].placed = 1;
                    hoisted[nhoisted++] = holder;
                    hoisted[nhoisted++] = (uint32_t)c;
                }
                if (share && holder != UINT32_MAX &&
                    ml_ptrmap_put(&holders, key, (void *)(uintptr_t)(holder + 1))) {
                    rc = -ENOMEM;
                    goto out;
                }
            }
            if (!in)
                break;
            begins -= m->begin;
            if (local_index(&w, m->region) >= 0) {
                uint32_t k;
                for (k = 0; k < nact && active[k] != m->region; k++)
                    ;
                if (m->begin && k == nact)
                    active[nact++] = m->region;
                else if (!m->begin && k < nact)
                    active[k] = active[--nact];
            }
            from = at = LLVMGetNextInstruction(in);
        }
        if (b == first_real)
            ml_all_mark_entry(ir, first_unit);
    }

    /* Counters of folded loops: one add of the computed count at the anchor (a preheader). */
    for (size_t i = 0; i < nhoisted; i += 2) {
        LLVMValueRef term = LLVMGetBasicBlockTerminator(cfg.blocks[lf.anchor[hoisted[i + 1]]]);
        LLVMValueRef count;
        LLVMPositionBuilderBefore(ir->b, term);
        count = ml_loopfold_count(&lf, &cfg, hoisted[i + 1], ir->b, ir->t_i64);
        emit_add(ir, term, hoisted[i], count);
        for (size_t k = 0; k < ndefs; k++) {
            LLVMValueRef bit;
            if (defs[k].unit != hoisted[i])
                continue;
            bit = stack_bit(ir, defs[k].base, term);
            if (!bit) {
                rc = -ENOMEM;
                goto out;
            }
            emit_add_at(ir, term, defs[k].slot, bit, count);
        }
    }

    /* Close local regions on edges that leave them and at returns. */
    for (unsigned p = 0; p < w.nb; p++) {
        LLVMValueRef term = LLVMGetBasicBlockTerminator(w.blocks[p]);
        LLVMOpcode op;
        uint32_t exits[w.nlocal + 1], ne = 0;
        if (!term)
            continue;
        op = LLVMGetInstructionOpcode(term);
        if (op == LLVMRet || op == LLVMResume) {
            for (uint32_t l = 0; l < w.nlocal; l++)
                if (w.out[(size_t)l * w.nb + p] == ST_IN) {
                    LLVMPositionBuilderBefore(ir->b, term);
                    emit_marker_call(ir, ir->f_exit, w.local[l]);
                }
            continue;
        }
        for (unsigned k = 0; k < LLVMGetNumSuccessors(term); k++) {
            int s = block_index(&w, LLVMGetSuccessor(term, k));
            int seen = 0;
            if (s < 0)
                continue;
            for (unsigned j = 0; j < k; j++)
                seen |= LLVMGetSuccessor(term, j) == w.blocks[s];
            if (seen)
                continue;
            ne = 0;
            for (uint32_t l = 0; l < w.nlocal; l++)
                if (w.out[(size_t)l * w.nb + p] == ST_IN && w.in[(size_t)l * w.nb + s] != ST_IN)
                    exits[ne++] = w.local[l];
            if (ne) {
                rc = exit_on_edge(ir, &w, p, (unsigned)s, exits, ne);
                if (rc)
                    goto out;
            }
        }
    }

    /*
     * Markers become runtime calls on this module's descriptor; the id pairs the copies. A BEGIN
     * inside another region of this function (or its own: recursion) follows the enclosing
     * execution: measured in the instrumented copy, not in the plain one.
     */
    for (size_t i = 0; i < w.nmarkers; i++)
        w.markers[i].nested =
            w.markers[i].begin && job->versioned && marker_nested(&w, &w.markers[i]);
    for (size_t i = 0; i < w.nmarkers; i++) {
        int nested = w.markers[i].nested;
        LLVMValueRef fn = !w.markers[i].begin         ? ir->f_exit
                          : job->mult                 ? ir->f_enter
                          : nested && job->plain      ? ir->f_enter_never
                          : job->versioned && !nested ? ir->f_enter
                                                      : ir->f_enter_always;
        LLVMValueRef call;
        LLVMPositionBuilderBefore(ir->b, w.markers[i].call);
        call = emit_marker_call(ir, fn, w.markers[i].region);
        if (job->mult && w.markers[i].begin) /* the decision multiplies the counts that follow */
            LLVMBuildStore(ir->b, LLVMBuildZExt(ir->b, call, ir->t_i64, ""), ir->mult_ph);
        LLVMSetMetadata(call, ir->md_id, LLVMGetMetadata(w.markers[i].call, ir->md_id));
        erase_marker(w.markers[i].call);
    }
out:
    ir->cur_base = NULL;
    ir->cur_mult = 0;
    free(defs);
    free(unshared);
    free(active);
    free(class_of);
    free(leaders);
    free(set_of);
    free(hoisted);
    ir->cur_cfg = NULL;
    free(marked);
    ml_loopfold_free(&lf);
    ml_cfg_free(&cfg);
    ml_ptrmap_free(&holders);
    ml_ptrmap_free(&synth);
    fwork_free(&w);
    return rc;
}

static int push_work(struct ml_ir *ir, LLVMValueRef fn, uint32_t ctx, uint32_t argsig,
                     const char *src)
{
    if (ml_grow((void **)&ir->work, &ir->capwork, ir->nwork + 1, sizeof(*ir->work)))
        return -ENOMEM;
    ir->work[ir->nwork++] = (struct ml_work){fn, ctx, argsig, 0, src, 0, 0};
    return 0;
}

/*
 * The copy of fn counted under ctx, made once per (function, region set,
 * argument classes: the pointer arguments whose class its callers know).
 */
static LLVMValueRef clone_for(struct ml_ir *ir, LLVMValueRef fn, uint32_t ctx, uint32_t argsig)
{
    LLVMValueRef tmpl = ml_ptrmap_get(&ir->templates, fn), c;
    size_t len;
    const char *name;

    if (!tmpl)
        tmpl = fn;
    for (size_t i = 0; i < ir->nclones; i++)
        if (ir->clones[i].ctx == ctx && ir->clones[i].argsig == argsig &&
            ir->clones[i].mult == ir->cur_mult &&
            (ir->clones[i].tmpl == tmpl || ir->clones[i].fn == fn))
            return ir->clones[i].fn;
    if (ml_ptrmap_get(&ir->generated, fn)) {
        /* fn is itself a clone (recursion through a clone): find its template. */
        for (size_t i = 0; i < ir->nclones; i++)
            if (ir->clones[i].fn == fn)
                return clone_for(ir, ir->clones[i].tmpl, ctx, argsig);
    }
    name = LLVMGetValueName2(fn, &len);
    {
        char cname[len + 32];
        snprintf(cname, sizeof(cname), "%.*s.memlens.%zu", (int)len, name, ir->nclones);
        c = ml_clone_function(ir, tmpl, cname);
    }
    if (!c)
        return NULL;
    if (ml_grow((void **)&ir->clones, &ir->capclones, ir->nclones + 1, sizeof(*ir->clones)) ||
        ml_ptrmap_put(&ir->generated, c, c) || push_work(ir, c, ctx, argsig, name))
        return NULL;
    ir->work[ir->nwork - 1].mult = (unsigned char)ir->cur_mult;
    ir->clones[ir->nclones++] = (struct ml_clone){tmpl, ctx, argsig, ir->cur_mult, c};
    return c;
}

static int has_markers(struct ml_ir *ir, LLVMValueRef fn)
{
    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb))
        for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in; in = LLVMGetNextInstruction(in))
            if (marker_kind(ir, in))
                return 1;
    return 0;
}

/*
 * Dynamic attribution: a copy, counted under the dynamic context, of every
 * function a call the static sets miss may reach (dyn.c); the originals get
 * their entry checks once everything is instrumented.
 */
static int dyn_copies(struct ml_ir *ir)
{
    size_t n = 0;
    LLVMValueRef *fns;

    if (ir->dynset == ML_NOSET)
        return 0;
    for (LLVMValueRef fn = LLVMGetFirstFunction(ir->m); fn; fn = LLVMGetNextFunction(fn))
        n++;
    fns = calloc(n + 1, sizeof(*fns));
    if (!fns)
        return -ENOMEM;
    n = 0;
    for (LLVMValueRef fn = LLVMGetFirstFunction(ir->m); fn; fn = LLVMGetNextFunction(fn))
        if (ml_dyn_wanted(ir, fn) && !has_markers(ir, fn))
            fns[n++] = fn;
    for (size_t i = 0; i < n; i++) {
        LLVMValueRef c = clone_for(ir, fns[i], ir->dynset, 0);
        if (!c || ml_grow((void **)&ir->dyns, &ir->capdyns, ir->ndyns + 1, sizeof(*ir->dyns))) {
            free(fns);
            return -ENOMEM;
        }
        ir->dyns[ir->ndyns++] = (struct ml_version){fns[i], c};
    }
    free(fns);
    return 0;
}

/*
 * A function with regions that cannot be versioned (computed goto, callbr, too
 * many blocks) runs its counted code on every execution; sampling only keeps
 * 1 in N executions' counts (the thread's measured flag multiplies them). One
 * clang-style warning per region says so at compile time, and the module
 * marks the region (ML_RFLAG_NO_PLAIN) so the report can say it too.
 */
static int warn_unversioned(struct ml_ir *ir, LLVMValueRef fn)
{
    size_t flen;
    const char *fname = LLVMGetValueName2(fn, &flen);
    int goto_ = !ml_can_clone(fn);

    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb))
        for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in; in = LLVMGetNextInstruction(in)) {
            uint32_t r;
            unsigned len = 0;
            const char *file;
            char where[256];
            int rc;
            if (marker_kind(ir, in) != 1)
                continue;
            rc = marker_region(ir, in, &r);
            if (rc)
                return rc;
            if (!ir->rflags || r >= ir->nrflags) {
                uint32_t *f = realloc(ir->rflags, (ir->nregions + 16) * sizeof(*f));
                if (!f)
                    return -ENOMEM;
                memset(f + ir->nrflags, 0, (ir->nregions + 16 - ir->nrflags) * sizeof(*f));
                ir->rflags = f;
                ir->nrflags = ir->nregions + 16;
            }
            if (ir->rflags[r] & ML_RFLAG_NO_PLAIN)
                continue;
            ir->rflags[r] |= ML_RFLAG_NO_PLAIN;
            file = LLVMGetDebugLocFilename(in, &len);
            if (file && len)
                snprintf(where, sizeof(where), "%.*s:%u:%u", (int)len, file,
                         LLVMGetDebugLocLine(in), LLVMGetDebugLocColumn(in));
            else
                snprintf(where, sizeof(where), "%s", "memlens");
            ml_ir_warn(ir,
                       "%s: warning: region '%s' in function '%.*s' runs its counted code on every "
                       "execution (%s): sampling keeps 1 in N executions' counts but saves no time",
                       where, ir->regions[r], (int)flen, fname,
                       goto_ ? "computed goto" : "function too large to version");
        }
    return 0;
}

/*
 * All-blocks mode: every other defined function is counted in place, after
 * region code was cloned from the pristine bodies. Code outside regions
 * never clones, so this adds no work.
 */
static int instrument_rest(struct ml_ir *ir)
{
    size_t first = ir->nwork;
    int rc;

    for (LLVMValueRef fn = LLVMGetFirstFunction(ir->m); fn; fn = LLVMGetNextFunction(fn)) {
        size_t len;
        const char *name;
        if (!ml_all_wants(ir, fn))
            continue;
        name = LLVMGetValueName2(fn, &len);
        if (push_work(ir, fn, ML_NOSET, 0, name))
            return ml_ir_fail(ir, -ENOMEM, "out of memory");
    }
    for (size_t i = first; i < ir->nwork; i++) {
        struct ml_work job = ir->work[i];
        rc = instrument_function(ir, &job);
        if (rc)
            return rc == -ENOMEM ? ml_ir_fail(ir, rc, "out of memory") : rc;
    }
    return 0;
}

/*
 * Each share of an inlined function becomes a unit of its own that nothing
 * counts (a bytes unit: sums ignore it), named after the inlined function and
 * placed at its own source line, followed in the unit infos by its host: the
 * runtime writes the pair as an INLINED record (docs/report.md).
 */
static int inl_finish(struct ml_ir *ir)
{
    size_t nreal = ir->nunits;
    int rc = 0;

    for (size_t i = 0; i < nreal && !rc; i++)
        if (ir->units[i].kind == ML_UNIT_BYTES && ir->units[i].isp)
            rc = ml_inl_record(ir, (uint32_t)i, ir->units[i].isp, ir->units[i].iline,
                               ir->units[i].facts);
    for (size_t i = 0; i < ir->ninl && !rc; i++) {
        const struct ml_inlrec *r = &ir->inl[i];
        struct ml_unit *u;
        char *sym;
        if (ml_grow((void **)&ir->units, &ir->capunits, ir->nunits + 1, sizeof(*ir->units)))
            return -ENOMEM;
        u = &ir->units[ir->nunits];
        memset(u, 0, sizeof(*u));
        u->kind = ML_UNIT_BYTES;
        u->line = r->line;
        u->regset = ir->units[r->host].regset;
        u->flags = ir->units[r->host].flags & ML_RT_UNIT_DYN;
        u->placed = 1;
        memcpy(u->facts, r->facts, sizeof(u->facts));
        sym = ml_inl_symbol(ir, r->sp);
        u->file = ml_inl_file(r->sp);
        if (!sym || !u->file) {
            free(sym);
            free(u->file);
            return -ENOMEM;
        }
        /* The unit infos own the name; the unit points at it, like units at LLVM's names. */
        ir->nunits++;
        rc = add_uinfo(ir, (uint32_t)ir->nunits - 1, ML_UI_INLINED, sym, strlen(sym));
        if (!rc) {
            u = &ir->units[ir->nunits - 1];
            u->func = ir->uinfo[ir->nuinfo - 1].name;
            rc = add_uinfo(ir, r->host, ML_UI_INLINED_HOST, "", 0);
        }
        free(sym);
    }
    return rc;
}

static void ir_free(struct ml_ir *ir)
{
    for (uint32_t i = 0; i < ir->nregions; i++)
        free(ir->regions[i]);
    free(ir->regions);
    free(ir->words);
    for (size_t i = 0; i < ir->nunits; i++)
        free(ir->units[i].file);
    free(ir->units);
    for (size_t i = 0; i < ir->ncalls; i++)
        free(ir->calls[i].callee);
    free(ir->calls);
    free(ir->work);
    free(ir->clones);
    free(ir->versions);
    free(ir->dyns);
    for (size_t i = 0; i < ir->nuinfo; i++)
        free(ir->uinfo[i].name);
    free(ir->uinfo);
    free(ir->late);
    free(ir->rflags);
    free(ir->inl);
    ml_ptrmap_free(&ir->templates);
    ml_ptrmap_free(&ir->generated);
    ml_ptrmap_free(&ir->argbits);
    ml_ptrmap_free(&ir->ptrbits);
    if (ir->b)
        LLVMDisposeBuilder(ir->b);
    if (ir->td)
        LLVMDisposeTargetData(ir->td);
}

static void setup_types(struct ml_ir *ir)
{
    LLVMTypeRef params[2];

    ir->t_void = LLVMVoidTypeInContext(ir->ctx);
    ir->t_i8 = LLVMInt8TypeInContext(ir->ctx);
    ir->t_i32 = LLVMInt32TypeInContext(ir->ctx);
    ir->t_i64 = LLVMInt64TypeInContext(ir->ctx);
    ir->t_i8p = LLVMPointerType(ir->t_i8, 0);
    ir->t_i64p = LLVMPointerType(ir->t_i64, 0);
    params[0] = ir->t_i8p;
    params[1] = ir->t_i32;
    ir->ty_enter = LLVMFunctionType(ir->t_i32, params, 2, 0);
    ir->ty_exit = LLVMFunctionType(ir->t_void, params, 2, 0);
    ir->md_id = LLVMGetMDKindIDInContext(ir->ctx, "memlens.id", 10);
    ir->md_plain = LLVMGetMDKindIDInContext(ir->ctx, "memlens.plain", 13);
}

static LLVMValueRef runtime_fn(struct ml_ir *ir, const char *name, LLVMTypeRef ty)
{
    LLVMValueRef f = LLVMGetNamedFunction(ir->m, name);

    if (!f) {
        f = LLVMAddFunction(ir->m, name, ty);
        LLVMAddAttributeAtIndex(
            f, LLVMAttributeFunctionIndex,
            LLVMCreateEnumAttribute(ir->ctx, LLVMGetEnumAttributeKindForName("nounwind", 8), 0));
    }
    return f;
}

int ml_ir_instrument(LLVMModuleRef m, const struct ml_ir_opts *o, char *err, size_t errlen)
{
    struct ml_ir ir = {
        .m = m, .ctx = LLVMGetModuleContext(m), .o = o, .err = err, .errlen = errlen};
    LLVMValueRef fn;
    int rc = 0;

    if (errlen)
        err[0] = 0;
    ir.f_begin = LLVMGetNamedFunction(m, "__memlens_roi_begin");
    ir.f_end = LLVMGetNamedFunction(m, "__memlens_roi_end");
    ir.annot_id = LLVMLookupIntrinsicID("llvm.annotation", 15);
    if (!module_has_markers(&ir) && !(o && (o->all || o->trace || o->events)))
        return 1; /* no regions: leave the module untouched */
    ml_ptrmap_init(&ir.templates);
    ml_ptrmap_init(&ir.generated);
    ml_ptrmap_init(&ir.argbits);
    ml_ptrmap_init(&ir.ptrbits);
    ir.td = LLVMCreateTargetData(LLVMGetDataLayoutStr(m));
    ir.b = LLVMCreateBuilderInContext(ir.ctx);
    setup_types(&ir);
    if (o && (o->trace || o->events)) {
        markers_to_calls(&ir);
        rc = o->events ? ml_sink_queue(&ir) : ml_sink_trace(&ir);
        goto out;
    }
    ir.f_enter = runtime_fn(&ir, "__memlens_enter", ir.ty_enter);
    ir.f_enter_always = runtime_fn(&ir, "__memlens_enter_always", ir.ty_enter);
    ir.f_enter_never = runtime_fn(&ir, "__memlens_enter_never", ir.ty_enter);
    ir.f_exit = runtime_fn(&ir, "__memlens_exit", ir.ty_exit);
    if (o && o->exact) {
        LLVMTypeRef p[5] = {ir.t_i8p, ir.t_i32, ir.t_i8p, ir.t_i64, ir.t_i32};
        ir.ty_access = LLVMFunctionType(ir.t_void, p, 5, 0);
        ir.f_access = LLVMGetNamedFunction(m, "__memlens_access");
        if (!ir.f_access)
            ir.f_access = LLVMAddFunction(m, "__memlens_access", ir.ty_access);
    }
    if (ml_all_setup(&ir) || ml_dyn_setup(&ir)) {
        rc = ml_ir_fail(&ir, -ENOMEM, "out of memory");
        goto out;
    }
    ir.desc_ph = LLVMAddGlobal(m, ir.t_i8, "__memlens_desc.placeholder");
    ir.ctr_ph = LLVMAddGlobal(m, ir.t_i64, "__memlens_ctr.placeholder");
    ir.stk_ph = LLVMAddGlobal(m, ir.t_i64, "__memlens_stack.placeholder");
    ir.mult_ph = LLVMAddGlobal(m, ir.t_i64, "__memlens_mult.placeholder");

    /* Functions with markers are changed in place: keep pristine copies to clone from. */
    for (fn = LLVMGetFirstFunction(m); fn; fn = LLVMGetNextFunction(fn)) {
        size_t len;
        const char *name;
        if (LLVMIsDeclaration(fn) || ml_ptrmap_get(&ir.generated, fn) || !has_markers(&ir, fn))
            continue;
        name = LLVMGetValueName2(fn, &len);
        if (ml_can_clone(fn)) {
            char tname[len + 16];
            snprintf(tname, sizeof(tname), "%.*s.memlens.tmpl", (int)len, name);
            LLVMValueRef t = ml_clone_function(&ir, fn, tname);
            if (!t || ml_ptrmap_put(&ir.templates, fn, t) || ml_ptrmap_put(&ir.generated, t, t)) {
                rc = ml_ir_fail(&ir, -ENOMEM, "out of memory");
                goto out;
            }
        }
        if (push_work(&ir, fn, ML_NOSET, 0, name)) {
            rc = ml_ir_fail(&ir, -ENOMEM, "out of memory");
            goto out;
        }
        /*
         * Sampling: a plain copy runs the executions the runtime does not measure. Not in
         * all-blocks mode, where code outside regions is counted too.
         */
        if (!(ir.o && ir.o->all) && ml_version_supported(fn)) {
            LLVMValueRef plain = NULL;
            if (ml_version_prepare(&ir, fn, &plain) ||
                ml_grow((void **)&ir.versions, &ir.capversions, ir.nversions + 1,
                        sizeof(*ir.versions)) ||
                ml_ptrmap_put(&ir.generated, plain, plain) ||
                push_work(&ir, plain, ML_NOSET, 0, name)) {
                rc = ml_ir_fail(&ir, -ENOMEM, "out of memory");
                goto out;
            }
            ir.work[ir.nwork - 2].versioned = 1;
            ir.work[ir.nwork - 1].versioned = 1;
            ir.work[ir.nwork - 1].plain = 1;
            ir.versions[ir.nversions++] = (struct ml_version){fn, plain};
        } else if (!(ir.o && ir.o->all)) {
            ir.work[ir.nwork - 1].mult = 1;
            rc = warn_unversioned(&ir, fn);
            if (rc) {
                ml_ir_fail(&ir, rc, "out of memory");
                goto out;
            }
        }
    }
    rc = dyn_copies(&ir);
    if (rc) {
        ml_ir_fail(&ir, rc, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < ir.nwork; i++) {
        struct ml_work job = ir.work[i];
        rc = instrument_function(&ir, &job);
        if (rc) {
            if (rc == -ENOMEM)
                ml_ir_fail(&ir, rc, "out of memory");
            goto out;
        }
    }
    rc = instrument_rest(&ir);
    if (rc)
        goto out;
    /* The last units: the region slots that inline.c addresses follow the counters. */
    rc = inl_finish(&ir);
    if (rc) {
        ml_ir_fail(&ir, rc, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < ir.ndyns; i++)
        ml_dyn_entry_check(&ir, ir.dyns[i].fn, ir.dyns[i].plain);
    for (size_t i = 0; i < ir.nversions; i++) {
        rc = ml_version_merge(&ir, &ir.versions[i]);
        if (rc) {
            ml_ir_fail(&ir, rc, "out of memory");
            goto out;
        }
    }
    rc = ml_late_calls(&ir);
    if (!rc)
        rc = ml_inline_markers(&ir);
    if (rc) {
        ml_ir_fail(&ir, rc, "out of memory");
        goto out;
    }
    rc = ml_emit_module(&ir);
    if (rc)
        goto out;
    for (size_t i = 0; i < ir.nclones; i++)
        ml_strip_debug(ir.clones[i].fn);
    /* Templates were only ever copied from, never called. */
    for (size_t i = 0; i < ir.nwork; i++) {
        LLVMValueRef t = ir.work[i].ctx == ML_NOSET && !ir.work[i].plain
                             ? ml_ptrmap_get(&ir.templates, ir.work[i].fn)
                             : NULL;
        if (t && !LLVMGetFirstUse(t))
            LLVMDeleteFunction(t);
    }
out:
    ir_free(&ir);
    return rc;
}

/* ---- bitcode entry point ---- */

static int read_module(LLVMContextRef ctx, const struct ml_ir_input *in, LLVMModuleRef *m,
                       char *err, size_t errlen)
{
    LLVMMemoryBufferRef buf;
    char *msg = NULL;

    if (in->data) {
        buf = LLVMCreateMemoryBufferWithMemoryRange(in->data, in->len, in->path, 0);
    } else if (LLVMCreateMemoryBufferWithContentsOfFile(in->path, &buf, &msg)) {
        snprintf(err, errlen, "cannot read bitcode '%s': %s", in->path, msg ? msg : "?");
        LLVMDisposeMessage(msg);
        return -EIO;
    }
    if (LLVMParseBitcodeInContext2(ctx, buf, m)) {
        snprintf(err, errlen, "'%s' is not LLVM 14 bitcode", in->path);
        LLVMDisposeMemoryBuffer(buf);
        return -EINVAL;
    }
    LLVMDisposeMemoryBuffer(buf);
    return 0;
}

/* Only the first line of LLVM's verifier report fits a one-line error. */
static void first_line(char *s)
{
    char *nl = strchr(s, '\n');
    if (nl)
        *nl = 0;
}

int ml_ir_instrument_bitcode(const struct ml_ir_input *in, int n, const struct ml_ir_opts *o,
                             LLVMMemoryBufferRef *out, char *err, size_t errlen)
{
    LLVMContextRef ctx = LLVMContextCreate();
    LLVMModuleRef m = NULL;
    char *msg = NULL;
    int rc;

    err[0] = 0;
    *out = NULL;
    rc = read_module(ctx, &in[0], &m, err, errlen);
    for (int i = 1; i < n && !rc; i++) {
        LLVMModuleRef other;
        rc = read_module(ctx, &in[i], &other, err, errlen);
        if (!rc && LLVMLinkModules2(m, other)) {
            snprintf(err, errlen, "cannot link bitcode '%s' into '%s'", in[i].path, in[0].path);
            rc = -EINVAL;
        }
    }
    if (rc)
        goto out;
    rc = ml_ir_instrument(m, o, err, errlen);
    if (rc < 0 || (rc == 1 && n == 1)) {
        rc = rc < 0 ? rc : 0; /* untouched: the input is the result, use-list order and all */
        goto out;
    }
    if (LLVMVerifyModule(m, LLVMReturnStatusAction, &msg)) {
        first_line(msg);
        snprintf(err, errlen, "internal error: instrumented '%s' does not verify: %s", in[0].path,
                 msg);
        rc = -EINVAL;
        goto out;
    }
    *out = LLVMWriteBitcodeToMemoryBuffer(m);
    rc = *out ? 0 : -ENOMEM;
    if (rc)
        snprintf(err, errlen, "out of memory");
out:
    LLVMDisposeMessage(msg);
    if (m)
        LLVMDisposeModule(m);
    LLVMContextDispose(ctx);
    return rc;
}
