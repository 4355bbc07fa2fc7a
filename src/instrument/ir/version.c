/* Code versioning for sampling: an instrumented and a plain copy of each function with regions. */
#include "instrument/ir/ir.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The SSA repair recurses along predecessor chains: bound its depth. */
#define ML_VERSION_MAX_BLOCKS 4000

int ml_version_supported(LLVMValueRef fn)
{
    return ml_can_clone(fn) && LLVMCountBasicBlocks(fn) <= ML_VERSION_MAX_BLOCKS;
}

static LLVMValueRef tag_of(const struct ml_ir *ir, LLVMValueRef in)
{
    return LLVMGetMetadata(in, ir->md_id);
}

int ml_version_prepare(struct ml_ir *ir, LLVMValueRef fn, LLVMValueRef *plain)
{
    unsigned k = 0;
    size_t len;
    const char *name = LLVMGetValueName2(fn, &len);
    char pname[len + 16];

    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb))
        for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in; in = LLVMGetNextInstruction(in)) {
            LLVMMetadataRef id = LLVMValueAsMetadata(LLVMConstInt(ir->t_i32, k++, 0));
            LLVMSetMetadata(in, ir->md_id,
                            LLVMMetadataAsValue(ir->ctx, LLVMMDNodeInContext2(ir->ctx, &id, 1)));
        }
    snprintf(pname, sizeof(pname), "%.*s.memlens.plain", (int)len, name);
    *plain = ml_clone_function(ir, fn, pname);
    if (!*plain)
        return -ENOMEM;
    /* The cloner builds phis afresh: give them their originals' ids (phis lead each block). */
    for (LLVMBasicBlockRef a = LLVMGetFirstBasicBlock(fn), b = LLVMGetFirstBasicBlock(*plain);
         a && b; a = LLVMGetNextBasicBlock(a), b = LLVMGetNextBasicBlock(b))
        for (LLVMValueRef x = LLVMGetFirstInstruction(a), y = LLVMGetFirstInstruction(b);
             x && y && LLVMIsAPHINode(x) && LLVMIsAPHINode(y);
             x = LLVMGetNextInstruction(x), y = LLVMGetNextInstruction(y))
            LLVMSetMetadata(y, ir->md_id, tag_of(ir, x));
    return 0;
}

/* ml_phis_retarget; once: keep only the first entry from `from` (its edges became one). */
static void phis_rebuild(struct ml_ir *ir, LLVMBasicBlockRef bb, LLVMBasicBlockRef from,
                         LLVMBasicBlockRef to, int once)
{
    for (LLVMValueRef phi = LLVMGetFirstInstruction(bb); phi && LLVMIsAPHINode(phi);) {
        LLVMValueRef next = LLVMGetNextInstruction(phi), np;
        unsigned cnt = LLVMCountIncoming(phi);
        size_t len;
        const char *nm;
        int hit = 0;

        for (unsigned i = 0; i < cnt; i++)
            hit |= LLVMGetIncomingBlock(phi, i) == from;
        if (!hit) {
            phi = next;
            continue;
        }
        LLVMPositionBuilderBefore(ir->b, phi);
        np = LLVMBuildPhi(ir->b, LLVMTypeOf(phi), "");
        hit = 0;
        for (unsigned i = 0; i < cnt; i++) {
            LLVMValueRef v = LLVMGetIncomingValue(phi, i);
            LLVMBasicBlockRef b = LLVMGetIncomingBlock(phi, i);
            if (b == from && (!to || (once && hit)))
                continue;
            if (b == from) {
                b = to;
                hit = 1;
            }
            LLVMAddIncoming(np, &v, &b, 1);
        }
        LLVMSetMetadata(np, ir->md_id, tag_of(ir, phi));
        LLVMReplaceAllUsesWith(phi, np);
        nm = LLVMGetValueName2(phi, &len);
        {
            char buf[len + 1];
            memcpy(buf, nm, len);
            buf[len] = 0;
            LLVMInstructionEraseFromParent(phi);
            LLVMSetValueName2(np, buf, len);
        }
        phi = next;
    }
}

void ml_phis_retarget(struct ml_ir *ir, LLVMBasicBlockRef bb, LLVMBasicBlockRef from,
                      LLVMBasicBlockRef to)
{
    phis_rebuild(ir, bb, from, to, 0);
}

LLVMBasicBlockRef ml_split_edge(struct ml_ir *ir, LLVMBasicBlockRef pb, LLVMBasicBlockRef sb,
                                const char *name)
{
    LLVMValueRef term = LLVMGetBasicBlockTerminator(pb), first = LLVMGetFirstInstruction(sb);
    LLVMOpcode op = LLVMGetInstructionOpcode(term);
    LLVMBasicBlockRef nb;

    if (op == LLVMIndirectBr || op == LLVMCallBr || (first && LLVMIsALandingPadInst(first)))
        return NULL;
    nb = LLVMAppendBasicBlockInContext(ir->ctx, LLVMGetBasicBlockParent(pb), name);
    LLVMPositionBuilderAtEnd(ir->b, nb);
    LLVMBuildBr(ir->b, sb);
    for (unsigned k = 0; k < LLVMGetNumSuccessors(term); k++)
        if (LLVMGetSuccessor(term, k) == sb)
            LLVMSetSuccessor(term, k, nb);
    /* Several edges p->s became one nb->s: each phi keeps one entry for it. */
    phis_rebuild(ir, sb, pb, nb, 1);
    return nb;
}

void ml_move_to_builder(struct ml_ir *ir, LLVMValueRef in)
{
    size_t len;
    const char *nm = LLVMGetValueName2(in, &len);
    char buf[len + 1];

    memcpy(buf, nm, len);
    buf[len] = 0;
    LLVMInstructionRemoveFromParent(in);
    LLVMInsertIntoBuilder(ir->b, in); /* the builder clears the name: put it back */
    LLVMSetValueName2(in, buf, len);
}

LLVMBasicBlockRef ml_split_after(struct ml_ir *ir, LLVMValueRef at)
{
    LLVMBasicBlockRef head = LLVMGetInstructionParent(at), next = LLVMGetNextBasicBlock(head), cont;
    LLVMValueRef in = LLVMGetNextInstruction(at), term;

    cont = next ? LLVMInsertBasicBlockInContext(ir->ctx, next, "memlens.cont")
                : LLVMAppendBasicBlockInContext(ir->ctx, LLVMGetBasicBlockParent(head),
                                                "memlens.cont");
    LLVMPositionBuilderAtEnd(ir->b, cont);
    /* Moved instructions keep their own locations, not the builder's last one. */
    LLVMSetCurrentDebugLocation2(ir->b, NULL);
    while (in) {
        LLVMValueRef n = LLVMGetNextInstruction(in);
        ml_move_to_builder(ir, in);
        in = n;
    }
    term = LLVMGetBasicBlockTerminator(cont);
    for (unsigned k = 0, ns = LLVMGetNumSuccessors(term); k < ns; k++) {
        LLVMBasicBlockRef s = LLVMGetSuccessor(term, k);
        int seen = 0;
        for (unsigned j = 0; j < k; j++)
            seen |= LLVMGetSuccessor(term, j) == s;
        if (!seen)
            ml_phis_retarget(ir, s, head, cont);
    }
    return cont;
}

/* ---- SSA repair: Braun et al.'s on-demand construction, for one value with two definitions ----
 */

struct repair {
    struct ml_ir *ir;
    struct ml_ptrmap index; /* block -> index + 1 */
    LLVMBasicBlockRef *blocks;
    unsigned nb;
    unsigned *pred_off, *pred; /* predecessor edges (duplicates kept), reachable sources only */
    unsigned char *live;       /* reachable from the entry */
    struct ml_ptrmap memo;     /* block -> value live at its start (current variable) */
    LLVMValueRef def[2];       /* the variable's two definitions */
    LLVMBasicBlockRef defb[2];
    LLVMValueRef *phis; /* phis made by the repair, NULL once removed */
    size_t nphis, capphis;
    int oom;
};

static int bindex(const struct repair *r, LLVMBasicBlockRef bb)
{
    return (int)(uintptr_t)ml_ptrmap_get(&r->index, LLVMBasicBlockAsValue(bb)) - 1;
}

static LLVMValueRef read_start(struct repair *r, unsigned b);

static LLVMValueRef read_end(struct repair *r, unsigned b)
{
    for (int k = 0; k < 2; k++)
        if (r->blocks[b] == r->defb[k])
            return r->def[k];
    return read_start(r, b);
}

static LLVMValueRef read_start(struct repair *r, unsigned b)
{
    LLVMValueRef v = ml_ptrmap_get(&r->memo, r->blocks[b]), phi;
    unsigned np = r->pred_off[b + 1] - r->pred_off[b];

    if (v)
        return v;
    if (!np) /* only the entry: the original definition dominates every use, so never taken */
        v = LLVMGetUndef(LLVMTypeOf(r->def[0]));
    else if (np == 1)
        v = read_end(r, r->pred[r->pred_off[b]]);
    if (v) {
        if (ml_ptrmap_put(&r->memo, r->blocks[b], v))
            r->oom = 1;
        return v;
    }
    LLVMPositionBuilderBefore(r->ir->b, LLVMGetFirstInstruction(r->blocks[b]));
    phi = LLVMBuildPhi(r->ir->b, LLVMTypeOf(r->def[0]), "");
    if (ml_ptrmap_put(&r->memo, r->blocks[b], phi) ||
        (r->nphis == r->capphis &&
         !(r->phis = realloc(r->phis, (r->capphis = r->capphis ? 2 * r->capphis : 16) *
                                          sizeof(*r->phis))))) {
        r->oom = 1;
        return phi;
    }
    r->phis[r->nphis++] = phi;
    for (unsigned k = r->pred_off[b]; k < r->pred_off[b + 1]; k++) {
        LLVMValueRef in = read_end(r, r->pred[k]);
        LLVMBasicBlockRef pb = r->blocks[r->pred[k]];
        LLVMAddIncoming(phi, &in, &pb, 1);
    }
    return phi;
}

static void repair_free(struct repair *r)
{
    ml_ptrmap_free(&r->index);
    ml_ptrmap_free(&r->memo);
    free(r->blocks);
    free(r->pred_off);
    free(r->pred);
    free(r->live);
    free(r->phis);
}

/* Block list, reachability and predecessor edges of fn as it is now. */
static int repair_init(struct repair *r, LLVMValueRef fn)
{
    unsigned i = 0, ne = 0, *stack, n = 0;

    r->nb = LLVMCountBasicBlocks(fn);
    r->blocks = calloc(r->nb + 1, sizeof(*r->blocks));
    r->pred_off = calloc(r->nb + 2, sizeof(*r->pred_off));
    r->live = calloc(r->nb + 1, 1);
    stack = calloc(r->nb + 1, sizeof(*stack));
    if (!r->blocks || !r->pred_off || !r->live || !stack)
        goto nomem;
    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb)) {
        r->blocks[i] = bb;
        if (ml_ptrmap_put(&r->index, LLVMBasicBlockAsValue(bb), (void *)(uintptr_t)(++i)))
            goto nomem;
    }
    r->live[0] = 1;
    stack[n++] = 0;
    while (n) {
        LLVMValueRef t = LLVMGetBasicBlockTerminator(r->blocks[stack[--n]]);
        for (unsigned k = 0, ns = LLVMGetNumSuccessors(t); k < ns; k++) {
            int s = bindex(r, LLVMGetSuccessor(t, k));
            if (!r->live[s]) {
                r->live[s] = 1;
                stack[n++] = (unsigned)s;
            }
        }
    }
    /* Counting pass, then filling pass (pred_off[s + 1] counts edges into s). */
    for (int pass = 0; pass < 2; pass++) {
        unsigned *fill = pass ? calloc(r->nb + 1, sizeof(*fill)) : NULL;
        if (pass && !fill)
            goto nomem;
        for (unsigned b = 0; b < r->nb; b++) {
            LLVMValueRef t = LLVMGetBasicBlockTerminator(r->blocks[b]);
            if (!r->live[b])
                continue;
            for (unsigned k = 0, ns = LLVMGetNumSuccessors(t); k < ns; k++) {
                unsigned s = (unsigned)bindex(r, LLVMGetSuccessor(t, k));
                if (!pass)
                    r->pred_off[s + 1]++;
                else
                    r->pred[r->pred_off[s] + fill[s]++] = b;
            }
        }
        if (!pass) {
            for (unsigned b = 0; b < r->nb; b++)
                r->pred_off[b + 1] += r->pred_off[b];
            ne = r->pred_off[r->nb];
            r->pred = calloc(ne + 1, sizeof(*r->pred));
            if (!r->pred)
                goto nomem;
        }
        free(fill);
    }
    free(stack);
    return 0;
nomem:
    free(stack);
    return -ENOMEM;
}

/*
 * Points every use of the pair (a, b) at the definition that reaches it
 * through the merged CFG. Dominance is not the test: the header of the
 * instrumented copy of a loop dominates the plain copy's blocks, yet its
 * values are stale there once the plain copy redefined them. So every use
 * outside its definition's block is looked up; the lookup returns the
 * definition itself where no other one intervenes.
 */
static int repair_value(struct repair *r, LLVMValueRef a, LLVMValueRef b)
{
    LLVMValueRef defs[2] = {a, b}, *users = NULL;
    size_t nu, cap = 0;
    int rc = 0;

    r->def[0] = a;
    r->def[1] = b;
    r->defb[0] = LLVMGetInstructionParent(a);
    r->defb[1] = LLVMGetInstructionParent(b);
    ml_ptrmap_free(&r->memo);
    ml_ptrmap_init(&r->memo);
    for (int d = 0; d < 2; d++) {
        /* Collect users first: the lookup adds uses (new phis) that are right as built. */
        nu = 0;
        for (LLVMUseRef u = LLVMGetFirstUse(defs[d]); u; u = LLVMGetNextUse(u)) {
            LLVMValueRef user = LLVMGetUser(u);
            LLVMBasicBlockRef ub;
            int seen = 0;
            if (!LLVMIsAInstruction(user))
                continue;
            ub = LLVMGetInstructionParent(user);
            if (!r->live[bindex(r, ub)] || (ub == r->defb[d] && !LLVMIsAPHINode(user)))
                continue;
            for (size_t j = 0; j < nu && !seen; j++)
                seen = users[j] == user;
            if (seen)
                continue;
            if (nu == cap) {
                LLVMValueRef *nw = realloc(users, (cap = cap ? 2 * cap : 16) * sizeof(*nw));
                if (!nw) {
                    rc = -ENOMEM;
                    goto out;
                }
                users = nw;
            }
            users[nu++] = user;
        }
        for (size_t j = 0; j < nu; j++) {
            LLVMValueRef user = users[j];
            LLVMBasicBlockRef ub = LLVMGetInstructionParent(user);
            if (LLVMIsAPHINode(user)) {
                for (unsigned i = 0, n = LLVMCountIncoming(user); i < n; i++) {
                    LLVMBasicBlockRef ib = LLVMGetIncomingBlock(user, i);
                    if (LLVMGetIncomingValue(user, i) == defs[d] && r->live[bindex(r, ib)])
                        LLVMSetOperand(user, i, read_end(r, (unsigned)bindex(r, ib)));
                }
                continue;
            }
            for (int i = 0, n = LLVMGetNumOperands(user); i < n; i++)
                if (LLVMGetOperand(user, (unsigned)i) == defs[d])
                    LLVMSetOperand(user, (unsigned)i, read_start(r, (unsigned)bindex(r, ub)));
        }
        if (r->oom) {
            rc = -ENOMEM;
            goto out;
        }
    }
out:
    free(users);
    return rc;
}

/* Phis whose incoming values are all one value (or the phi itself) are that value. */
static void remove_trivial_phis(struct repair *r)
{
    int changed = 1;

    while (changed) {
        changed = 0;
        for (size_t i = 0; i < r->nphis; i++) {
            LLVMValueRef phi = r->phis[i], same = NULL;
            int trivial = 1;
            if (!phi)
                continue;
            for (unsigned k = 0, n = LLVMCountIncoming(phi); k < n && trivial; k++) {
                LLVMValueRef v = LLVMGetIncomingValue(phi, k);
                if (v == phi || v == same)
                    continue;
                if (same)
                    trivial = 0;
                same = v;
            }
            if (!trivial)
                continue;
            LLVMReplaceAllUsesWith(phi, same ? same : LLVMGetUndef(LLVMTypeOf(phi)));
            LLVMInstructionEraseFromParent(phi);
            r->phis[i] = NULL;
            changed = 1;
        }
    }
}

/* Deletes blocks the entry cannot reach (the plain copy's entry and what only it reached). */
static void drop_dead_blocks(struct ml_ir *ir, struct repair *r)
{
    for (unsigned b = 0; b < r->nb; b++) {
        LLVMValueRef t;
        if (r->live[b])
            continue;
        t = LLVMGetBasicBlockTerminator(r->blocks[b]);
        for (unsigned k = 0, ns = LLVMGetNumSuccessors(t); k < ns; k++) {
            LLVMBasicBlockRef s = LLVMGetSuccessor(t, k);
            if (r->live[bindex(r, s)])
                ml_phis_retarget(ir, s, r->blocks[b], NULL);
        }
    }
    for (unsigned b = 0; b < r->nb; b++)
        if (!r->live[b])
            for (LLVMValueRef in = LLVMGetFirstInstruction(r->blocks[b]); in;
                 in = LLVMGetNextInstruction(in))
                if (LLVMGetTypeKind(LLVMTypeOf(in)) != LLVMVoidTypeKind)
                    LLVMReplaceAllUsesWith(in, LLVMGetUndef(LLVMTypeOf(in)));
    for (unsigned b = 0; b < r->nb; b++)
        if (!r->live[b])
            LLVMDeleteBasicBlock(r->blocks[b]);
}

static void strip_tags(struct ml_ir *ir, LLVMValueRef fn)
{
    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb))
        for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in; in = LLVMGetNextInstruction(in))
            LLVMSetMetadata(in, ir->md_id, NULL);
}

static int is_call_to(LLVMValueRef in, LLVMValueRef fn)
{
    return LLVMIsACallInst(in) && LLVMGetCalledValue(in) == fn;
}

/* Tag -> instruction for fn; sets *dup when a tag occurs twice. */
static int map_tags(struct ml_ir *ir, LLVMValueRef fn, struct ml_ptrmap *map, int *dup)
{
    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb))
        for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in; in = LLVMGetNextInstruction(in)) {
            LLVMValueRef t = tag_of(ir, in);
            if (!t)
                continue;
            if (ml_ptrmap_get(map, t))
                *dup = 1;
            if (ml_ptrmap_put(map, t, in))
                return -ENOMEM;
        }
    return 0;
}

/*
 * Checks that the copies pair up: every tagged instruction of the plain copy
 * has a twin of the same opcode, BEGIN sites pair one to one, and values of
 * the plain entry block (which is replaced by the shared entry) have twins in
 * the instrumented entry. Returns 1 when they do, 0 when not, or -ENOMEM.
 */
static int copies_pair(struct ml_ir *ir, const struct ml_version *v, struct ml_ptrmap *imap,
                       struct ml_ptrmap *pmap)
{
    int dup = 0, rc;
    LLVMBasicBlockRef ientry = LLVMGetEntryBasicBlock(v->fn),
                      pentry = LLVMGetEntryBasicBlock(v->plain);

    rc = map_tags(ir, v->fn, imap, &dup);
    if (!rc)
        rc = map_tags(ir, v->plain, pmap, &dup);
    if (rc)
        return rc;
    if (dup)
        return 0;
    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(v->plain); bb;
         bb = LLVMGetNextBasicBlock(bb))
        for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in; in = LLVMGetNextInstruction(in)) {
            LLVMValueRef t = tag_of(ir, in), twin = t ? ml_ptrmap_get(imap, t) : NULL;
            if (t && (!twin || LLVMGetInstructionOpcode(twin) != LLVMGetInstructionOpcode(in)))
                return 0;
            if (is_call_to(in, ir->f_enter) && (!twin || !is_call_to(twin, ir->f_enter)))
                return 0;
            if (bb == pentry && LLVMGetFirstUse(in) &&
                (!twin || LLVMGetInstructionParent(twin) != ientry))
                return 0;
        }
    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(v->fn); bb; bb = LLVMGetNextBasicBlock(bb))
        for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in; in = LLVMGetNextInstruction(in))
            if (is_call_to(in, ir->f_enter) &&
                (!tag_of(ir, in) || !ml_ptrmap_get(pmap, tag_of(ir, in))))
                return 0;
    return 1;
}

/* The copies could not be paired: keep fn, always instrumented. */
static void fall_back(struct ml_ir *ir, const struct ml_version *v)
{
    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(v->fn); bb; bb = LLVMGetNextBasicBlock(bb))
        for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in; in = LLVMGetNextInstruction(in))
            if (is_call_to(in, ir->f_enter))
                LLVMSetOperand(in, (unsigned)LLVMGetNumOperands(in) - 1, ir->f_enter_always);
    strip_tags(ir, v->fn);
    LLVMDeleteFunction(v->plain);
}

int ml_version_merge(struct ml_ir *ir, const struct ml_version *v)
{
    struct ml_ptrmap imap, pmap;
    struct repair r = {.ir = ir};
    LLVMValueRef *enters = NULL;
    LLVMBasicBlockRef *conts = NULL;
    size_t nenters = 0;
    int dup = 0;
    LLVMBasicBlockRef pentry = LLVMGetEntryBasicBlock(v->plain), bb, next;
    int rc;

    ml_ptrmap_init(&imap);
    ml_ptrmap_init(&pmap);
    ml_ptrmap_init(&r.index);
    ml_ptrmap_init(&r.memo);
    rc = copies_pair(ir, v, &imap, &pmap);
    if (rc <= 0) {
        if (!rc)
            fall_back(ir, v);
        goto out;
    }
    rc = 0;
    /* BEGIN sites of the plain copy, each followed by its instrumented twin; its markers noted. */
    for (bb = LLVMGetFirstBasicBlock(v->plain); bb; bb = LLVMGetNextBasicBlock(bb))
        for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in; in = LLVMGetNextInstruction(in)) {
            if (is_call_to(in, ir->f_exit) || is_call_to(in, ir->f_enter))
                LLVMSetMetadata(
                    in, ir->md_plain,
                    LLVMMetadataAsValue(ir->ctx, LLVMMDNodeInContext2(ir->ctx, NULL, 0)));
            if (is_call_to(in, ir->f_enter)) {
                LLVMValueRef *e = realloc(enters, (nenters + 2) * sizeof(*e));
                LLVMBasicBlockRef *c = e ? realloc(conts, (nenters + 2) * sizeof(*c)) : NULL;
                if (e)
                    enters = e;
                if (!c) {
                    rc = -ENOMEM;
                    goto out;
                }
                conts = c;
                enters[nenters++] = in;
                enters[nenters++] = ml_ptrmap_get(&imap, tag_of(ir, in));
            }
        }
    /* Each BEGIN site ends its block, in both copies; splitting rebuilds phis, so map again. */
    for (size_t i = 0; i < nenters; i++)
        conts[i] = ml_split_after(ir, enters[i]);
    ml_ptrmap_free(&imap);
    ml_ptrmap_free(&pmap);
    ml_ptrmap_init(&imap);
    ml_ptrmap_init(&pmap);
    rc = map_tags(ir, v->fn, &imap, &dup);
    if (!rc)
        rc = map_tags(ir, v->plain, &pmap, &dup);
    if (rc)
        goto out;
    /* One body: the plain blocks move into fn; fn's entry serves both copies. */
    for (unsigned i = 0; i < LLVMCountParams(v->fn); i++)
        LLVMReplaceAllUsesWith(LLVMGetParam(v->plain, i), LLVMGetParam(v->fn, i));
    for (bb = LLVMGetFirstBasicBlock(v->plain); bb; bb = next) {
        next = LLVMGetNextBasicBlock(bb);
        LLVMRemoveBasicBlockFromParent(bb);
        LLVMAppendExistingBasicBlock(v->fn, bb);
    }
    LLVMSetCurrentDebugLocation2(ir->b, NULL);
    for (size_t i = 0; i < nenters; i++) {
        LLVMValueRef measured;
        LLVMPositionBuilderAtEnd(ir->b, LLVMGetInstructionParent(enters[i]));
        measured = LLVMBuildICmp(ir->b, LLVMIntNE, enters[i], LLVMConstInt(ir->t_i32, 0, 0), "");
        /* enters[] pairs (plain, instrumented): measured runs go to the instrumented copy. */
        LLVMBuildCondBr(ir->b, measured, conts[i | 1], conts[i & ~(size_t)1]);
    }
    for (LLVMValueRef in = LLVMGetFirstInstruction(pentry); in; in = LLVMGetNextInstruction(in))
        if (LLVMGetFirstUse(in))
            LLVMReplaceAllUsesWith(in, ml_ptrmap_get(&imap, tag_of(ir, in)));

    /* SSA repair of every value whose two definitions now meet. */
    rc = repair_init(&r, v->fn);
    for (bb = LLVMGetFirstBasicBlock(v->fn); !rc && bb; bb = LLVMGetNextBasicBlock(bb)) {
        if (bb == pentry)
            continue;
        for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in && !rc;
             in = LLVMGetNextInstruction(in)) {
            LLVMValueRef t = tag_of(ir, in), twin = t ? ml_ptrmap_get(&imap, t) : NULL;
            /* Visit each pair once, from its plain member. */
            if (!twin || twin == in || LLVMGetTypeKind(LLVMTypeOf(in)) == LLVMVoidTypeKind ||
                ml_ptrmap_get(&pmap, t) != in)
                continue;
            rc = repair_value(&r, twin, in);
        }
    }
    if (rc)
        goto out;
    drop_dead_blocks(ir, &r);
    remove_trivial_phis(&r);
    strip_tags(ir, v->fn);
    LLVMDeleteFunction(v->plain);
out:
    free(enters);
    free(conts);
    repair_free(&r);
    ml_ptrmap_free(&imap);
    ml_ptrmap_free(&pmap);
    return rc;
}
