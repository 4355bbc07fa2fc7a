/* Whole-file driver: decode units, cut blocks, select per block, explain, write the assembly. */
#include "instrument/asm/asm.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static int has(const char *s, const char *what)
{
    return s && strstr(s, what) != NULL;
}

/* TLS general/local-dynamic and descriptor sequences: the linker rewrites them whole. */
static void mark_tls(const struct ml_asm_file *f, const struct ml_asm_units *u,
                     struct ml_asm_insn *insn)
{
    for (int k = 0; k < u->n; k++) {
        const char *ops = f->line[u->last[k]].operands;

        if (has(ops, "@TLSGD") || has(ops, "@TLSLD") || has(ops, "@TLSDESC") ||
            has(ops, "@TLSCALL") || has(ops, "@tlsgd") || has(ops, "@tlsld")) {
            insn[k].tls_sequence = 1;
            if (k + 1 < u->n && insn[k + 1].flow == ML_ASM_FLOW_CALL)
                insn[k + 1].tls_sequence = 1;
        }
    }
    for (int k = 0; k < u->n; k++)
        if (insn[k].tls_sequence)
            insn[k].naccess = 0;
}

static const char *dir_name(int dir)
{
    return dir == (ML_ASM_LOAD | ML_ASM_STORE) ? "modify" : dir == ML_ASM_STORE ? "store" : "load";
}

static const char *why_name(int why)
{
    static const char *const n[] = {"every access (ns)", "forced: count known at run time",
                                    "cluster representative", "refined: exact address", ""};

    return n[why];
}

static void print_bid(FILE *o, const struct ml_asm_bid *b)
{
    const char *sep = "";

    if (b->unstable) {
        fputs("(unstable)", o);
        return;
    }
    if (b->seg)
        fputs(b->seg == ML_ASM_SEG_FS ? "%fs:" : "%gs:", o);
    if (b->sym) {
        fprintf(o, "%.*s", (int)b->symlen, b->sym);
        sep = "+";
    }
    if (b->base != ML_ASM_NOREG) {
        fprintf(o, "%s%%%s#%d", sep, ml_asm_reg_name(b->base), b->base_inc);
        sep = "+";
    }
    if (b->index != ML_ASM_NOREG) {
        fprintf(o, "%s%%%s#%d*%d", sep, ml_asm_reg_name(b->index), b->index_inc, b->scale);
        sep = "+";
    }
    if (b->d || !*sep)
        fprintf(o, "%s%" PRId64, b->d < 0 || !*sep ? "" : "+", b->d);
}

/*
 * A selection unit: a block, or a class of control-equivalent blocks in their
 * dominator order, its instructions copied one after the other (cat) with an
 * instruction writing what the blocks between two members may change; map[c]
 * is the unit of cat[c], or -1 for those.
 */
struct unit {
    int *member, nmember;
    struct ml_asm_insn *cat;
    int *map, n;
};

static void explain_unit(FILE *o, const struct ml_asm_file *f, const struct ml_asm_units *u,
                         const struct ml_asm_block *blocks, const struct ml_asm_fold *fold,
                         const struct unit *un, const struct ml_asm_result *r, int bno)
{
    const struct ml_asm_block *b = &blocks[un->member[0]];
    int ninsn = 0;

    for (int j = 0; j < un->nmember; j++)
        ninsn += blocks[un->member[j]].end - blocks[un->member[j]].first;
    fprintf(o, "  block %d", bno);
    if (b->label_line >= 0)
        fprintf(o, " %s", f->line[b->label_line].name);
    fprintf(o, " (line %d): %d instructions, %d accesses", u->first[b->first] + 1, ninsn, r->m);
    if (r->m)
        fprintf(o, ", W %d, %d classes, %d clusters, %d instrumented, MA %.3f AIA %.3f", r->budget,
                r->nclass, r->ncluster, r->nsel, r->ma, r->aia);
    fputc('\n', o);
    for (int c = 0, a = 0; c < un->n; c++) {
        const struct ml_asm_insn *in = &un->cat[c];
        const struct ml_asm_line *l;
        int k = un->map[c];

        if (k < 0)
            continue;
        l = &f->line[u->last[k]];
        if (c && un->map[c - 1] != k - 1) {
            int m = -1;

            for (int j = 0; j < un->nmember; j++)
                if (blocks[un->member[j]].first == k)
                    m = un->member[j];
            if (m >= 0 && fold[m].site >= 0) {
                fprintf(o, "    callee %s (line %d): called from line %d only, one budget\n",
                        f->func[blocks[m].func].name, u->first[k] + 1, u->last[fold[m].site] + 1);
            } else if (m >= 0) {
                fprintf(o, "    control-equivalent block");
                if (blocks[m].label_line >= 0)
                    fprintf(o, " %s", f->line[blocks[m].label_line].name);
                fprintf(o, " (line %d): runs as often, one budget\n", u->first[k] + 1);
            } else {
                fprintf(o, "    back from the callee (line %d)\n", u->first[k] + 1);
            }
        }
        if (in->opaque || in->tls_sequence)
            fprintf(o, "      %s %s   [%s]\n", l->name, l->operands,
                    in->opaque ? "not decoded: left alone" : "TLS sequence: left alone");
        for (int j = 0; j < in->naccess && !in->opaque; j++, a++) {
            const struct ml_asm_pick *p = &r->pick[a];
            const struct ml_asm_access *ac = &in->acc[j];

            fprintf(o, "    %c %s %s%s  %s %u B at ", p->selected ? '+' : '.', l->name, l->operands,
                    ac->implicit ? " (implicit)" : "", dir_name(ac->dir), ac->size);
            print_bid(o, &p->bid);
            fprintf(o, "  class %d", p->cls);
            if (p->selected) {
                fprintf(o, ": %s", why_name(p->why));
                if (p->why == ML_ASM_WHY_CLUSTER || p->why == ML_ASM_WHY_REFINE)
                    fprintf(o, ", value %ld", p->value);
                if (p->weight > 1)
                    fprintf(o, ", weight %d", p->weight);
            } else {
                const struct ml_asm_pick *q = &r->pick[p->rep];

                fprintf(o, ": counted by line %d", u->last[un->map[q->insn]] + 1);
                if (p->level == 1)
                    fputs(" (same address)", o);
                else if (p->level == 2)
                    fprintf(o, " (%" PRIu64 " B away)",
                            (uint64_t)(p->bid.d > q->bid.d ? p->bid.d - q->bid.d
                                                           : q->bid.d - p->bid.d));
                else
                    fputs(" (address unknown)", o);
                fprintf(o, ", item value %ld", p->value);
            }
            fputc('\n', o);
        }
    }
}

/*
 * Lays block bi's instructions into un->cat from n on, each callee folded into
 * the unit (inl[k]: the block of the callee unit k calls, or -1) right before
 * its call, as if inlined: it sees the caller's registers, %rsp 8 lower for
 * the return address a call pushes. Returns the new n.
 */
static int lay_block(const struct ml_asm_insn *insn, const struct ml_asm_block *blocks,
                     const int *inl, int bi, struct unit *un, int n)
{
    for (int k = blocks[bi].first; k < blocks[bi].end; k++) {
        if (inl[k] >= 0) {
            if (insn[k].flow == ML_ASM_FLOW_CALL) {
                un->cat[n] = (struct ml_asm_insn){.nlinear = 1,
                                                  .lin = {{ML_ASM_RSP, ML_ASM_RSP, 0, -8, NULL}}};
                un->map[n++] = -1;
            }
            n = lay_block(insn, blocks, inl, inl[k], un, n);
        }
        un->cat[n] = insn[k];
        un->map[n++] = k;
    }
    return n;
}

/*
 * The members of leader's class (next[]: the list of each leader's members,
 * from head[leader]) in dominator order, their instructions concatenated, and
 * the callees folded into them at their calls.
 */
static int make_unit(const struct ml_asm_insn *insn, const struct ml_asm_block *blocks,
                     const struct ml_asm_fold *fold, const int *head, const int *next,
                     const int *inl, int leader, struct unit *un)
{
    int n = 0;

    un->nmember = 0;
    for (int i = head[leader]; i >= 0; i = next[i])
        un->member[un->nmember++] = i;
    /* insertion sort by depth, callees last: classes are small */
    for (int j = 1; j < un->nmember; j++)
        for (int x = j; x > 0; x--) {
            const struct ml_asm_fold *p = &fold[un->member[x - 1]], *q = &fold[un->member[x]];
            int t = un->member[x];

            if ((p->site >= 0) < (q->site >= 0) ||
                ((p->site >= 0) == (q->site >= 0) && p->depth <= q->depth))
                break;
            un->member[x] = un->member[x - 1];
            un->member[x - 1] = t;
        }
    for (int j = 0; j < un->nmember && fold[un->member[j]].site < 0; j++) {
        if (j && fold[un->member[j]].clobber) {
            un->cat[n] = (struct ml_asm_insn){.reg_written = fold[un->member[j]].clobber,
                                              .reg_killed = fold[un->member[j]].clobber};
            un->map[n++] = -1;
        }
        n = lay_block(insn, blocks, inl, un->member[j], un, n);
    }
    un->n = n;
    return n;
}

/* The part of r that falls in member block b, insn indices relative to b->first (into part->pick).
 */
static void part_of(const struct unit *un, const struct ml_asm_block *b,
                    const struct ml_asm_result *r, struct ml_asm_result *part)
{
    struct ml_asm_pick *pick = part->pick;

    *part = *r;
    part->pick = pick;
    part->m = 0;
    for (int a = 0; a < r->m; a++) {
        int k = un->map[r->pick[a].insn];

        if (k >= b->first && k < b->end) {
            part->pick[part->m] = r->pick[a];
            part->pick[part->m++].insn = k - b->first;
        }
    }
}

int ml_asm_rewrite(const struct ml_asm_file *f, const struct ml_asm_units *u,
                   const struct ml_asm_opts *o, FILE *out, struct ml_asm_stats *st, char *err,
                   size_t errlen)
{
    struct ml_asm_insn *insn = calloc(u->n + 1, sizeof(*insn));
    struct ml_asm_block *blocks = NULL;
    struct ml_asm_fold *fold;
    struct unit un;
    char *done;
    int *head = NULL, *next = NULL, *inl = NULL;
    struct ml_asm_emit *em;
    const struct ml_asm_params *p = &o->params;
    double ma = 0, aia = 0;
    int nb, rc = 0, lastfunc = -2;

    memset(st, 0, sizeof(*st));
    if (!insn) {
        ml_asm_err(err, errlen, "out of memory");
        return -ENOMEM;
    }
    for (int k = 0; k < u->n; k++) {
        const struct ml_asm_line *l = &f->line[u->last[k]];

        if (ml_asm_decode(u->code[k], u->len[k], l->operands, &insn[k]))
            st->opaque++;
        insn[k].line = u->first[k];
        st->untraced += insn[k].untraced;
    }
    mark_tls(f, u, insn);
    nb = ml_asm_blocks(f, u, insn, &blocks);
    if (nb < 0) {
        free(insn);
        ml_asm_err(err, errlen, "out of memory");
        return nb;
    }
    /*
     * Also in ns mode, which records every access anyway: its block markers
     * must name the same blocks as a selective build's, for measured accuracy.
     */
    nb = ml_asm_chain_calls(f, u, blocks, nb);
    /* Also in ns mode, for the same reason: one marker per unit. */
    fold = malloc((nb + 1) * sizeof(*fold));
    done = calloc(nb + 1, 1);
    un.member = malloc((nb + 1) * sizeof(int));
    /* a clobber before each member, an %rsp step before each callee */
    un.cat = malloc((u->n + 2 * nb + 1) * sizeof(*un.cat));
    un.map = malloc((u->n + 2 * nb + 1) * sizeof(int));
    head = malloc((nb + 1) * sizeof(int));
    next = malloc((nb + 1) * sizeof(int));
    inl = malloc((u->n + 1) * sizeof(int));
    em = ml_asm_emit_new(f, u, insn, p->mode, p->chunk, o->name ? o->name : "", o->pic);
    if (!em || !fold || !done || !un.member || !un.cat || !un.map || !head || !next || !inl ||
        ml_asm_fold_equivalent(f, u, insn, blocks, nb, fold) ||
        ml_asm_fold_callees(f, u, insn, blocks, nb, fold)) {
        ml_asm_err(err, errlen, "out of memory");
        rc = -ENOMEM; /* nothing below runs but the cleanup */
    }
    for (int i = 0; i < nb && !rc; i++)
        head[i] = -1;
    for (int k = 0; k < u->n && !rc; k++)
        inl[k] = -1;
    for (int i = nb - 1; i >= 0 && !rc; i--) {
        next[i] = head[fold[i].leader];
        head[fold[i].leader] = i;
        if (fold[i].site >= 0)
            inl[fold[i].site] = i;
    }
    st->functions = f->nfunc;
    st->insns = u->n;
    if (o->explain)
        fprintf(o->explain, "memlens: '%s': trace=asm mode=%s omega=%g chunk=%u scores=%d:%d:%d\n",
                o->name,
                p->mode == ML_ASM_NS   ? "ns"
                : p->mode == ML_ASM_MA ? "ma"
                                       : "aia",
                p->omega, p->chunk, p->score[0], p->score[1], p->score[2]);
    for (int i = 0, bno = 0; i < nb && !rc; i++) {
        const struct ml_asm_block *b = &blocks[i];
        struct ml_asm_result r, part;
        int marker;

        /* a unit is taken at its first block in file order */
        if (done[fold[i].leader])
            continue;
        done[fold[i].leader] = 1;
        make_unit(insn, blocks, fold, head, next, inl, fold[i].leader, &un);
        b = &blocks[un.member[0]];
        rc = ml_asm_select(un.cat, un.n, p, &r);
        if (rc) {
            ml_asm_err(err, errlen, "out of memory");
            break;
        }
        part.pick = malloc((r.m ? r.m : 1) * sizeof(*part.pick));
        st->accesses += r.m;
        st->selected += r.nsel;
        ma += r.ma * r.m;
        aia += r.aia * r.m;
        for (int a = 0; a < r.m; a++)
            st->forced += r.pick[a].why == ML_ASM_WHY_FORCED;
        for (int c = 0; c < un.n; c++)
            st->tls += un.cat[c].tls_sequence;
        marker = part.pick ? ml_asm_emit_marker(em, b, bno, un.cat, &r) : -ENOMEM;
        rc = marker < -1 ? marker : 0;
        for (int j = 0; j < un.nmember && !rc; j++) {
            part_of(&un, &blocks[un.member[j]], &r, &part);
            rc = ml_asm_emit_block(em, &blocks[un.member[j]], marker, &part);
        }
        if (rc) {
            ml_asm_err(err, errlen,
                       rc == -ENOSPC ? "no scratch register for a record" : "out of memory");
            free(part.pick);
            ml_asm_result_free(&r);
            break;
        }
        if (o->explain) {
            if (b->func != lastfunc)
                fprintf(o->explain, "function %s\n", b->func >= 0 ? f->func[b->func].name : "?");
            lastfunc = b->func;
            explain_unit(o->explain, f, u, blocks, fold, &un, &r, bno);
        }
        bno++;
        st->blocks++;
        free(part.pick);
        ml_asm_result_free(&r);
    }
    st->ma = st->accesses ? ma / st->accesses : 1;
    st->aia = st->accesses ? aia / st->accesses : 1;
    if (!rc && o->explain)
        fprintf(o->explain,
                "total: %d functions, %d blocks, %d instructions, %d accesses, %d instrumented "
                "(%d forced), MA %.3f AIA %.3f, %d not decoded, %d in TLS sequences, %d accesses "
                "not traced\n",
                st->functions, st->blocks, st->insns, st->accesses, st->selected, st->forced,
                st->ma, st->aia, st->opaque, st->tls, st->untraced);
    if (!rc && ml_asm_emit_write(em, out, o->name ? o->name : "")) {
        ml_asm_err(err, errlen, "cannot write the assembly");
        rc = -EIO;
    }
    ml_asm_emit_free(em);
    free(fold);
    free(done);
    free(un.member);
    free(un.cat);
    free(un.map);
    free(head);
    free(next);
    free(inl);
    free(blocks);
    free(insn);
    return rc;
}
