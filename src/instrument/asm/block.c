/* Basic blocks of a parsed assembly file: leaders at referenced labels and after control transfers.
 */
#include "instrument/asm/asm.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int is_section_directive(const char *d)
{
    return !strcmp(d, ".text") || !strcmp(d, ".data") || !strcmp(d, ".bss") ||
           !strcmp(d, ".section") || !strcmp(d, ".pushsection") || !strcmp(d, ".popsection") ||
           !strcmp(d, ".previous");
}

/*
 * Whether lines (from, to) hold a leader: a label that may be a target (every
 * non-local label, and local ones referenced outside debug sections), inline
 * assembly, or a change of section. *label gets the last such label's line.
 */
static int leader_between(const struct ml_asm_file *f, int from, int to, int *label)
{
    int lead = 0;

    for (int i = from + 1; i < to; i++) {
        const struct ml_asm_line *l = &f->line[i];

        if (l->kind == ML_ASM_LABEL &&
            (strncmp(l->name, ".L", 2) || ml_asm_is_referenced(f, l->name))) {
            lead = 1;
            *label = i;
        } else if (l->kind == ML_ASM_APP ||
                   (l->kind == ML_ASM_DIRECTIVE && is_section_directive(l->name))) {
            lead = 1;
        }
    }
    return lead;
}

int ml_asm_blocks(const struct ml_asm_file *f, const struct ml_asm_units *u,
                  const struct ml_asm_insn *insn, struct ml_asm_block **blocks)
{
    struct ml_asm_block *b = malloc((u->n + 1) * sizeof(*b));
    int nb = 0;

    *blocks = b;
    if (!b)
        return -ENOMEM;
    for (int k = 0; k < u->n; k++) {
        int func = f->line[u->first[k]].func, label = -1, lead, other = 1;

        if (k == 0) {
            lead = 1;
            leader_between(f, -1, u->first[k], &label);
        } else {
            other = leader_between(f, u->last[k - 1], u->first[k], &label) ||
                    func != f->line[u->first[k - 1]].func || insn[k - 1].opaque || insn[k].opaque;
            lead = other || insn[k - 1].flow != ML_ASM_FLOW_NONE;
        }
        if (lead) {
            if (nb)
                b[nb - 1].end = k;
            b[nb++] = (struct ml_asm_block){
                func, k, k + 1, label, !other && insn[k - 1].flow == ML_ASM_FLOW_CALL, 0, 0, 0};
        }
    }
    if (nb)
        b[nb - 1].end = u->n;
    return nb;
}

/* Callees that may return twice: the code after their call runs more often than before it. */
static int returns_twice(const char *target)
{
    static const char *const names[] = {"setjmp",      "_setjmp", "__setjmp", "sigsetjmp",
                                        "__sigsetjmp", "savectx", "vfork",    "getcontext",
                                        "__vfork",     "qsetjmp"};
    size_t n = strcspn(target, "@ \t");

    if (*target == '*') /* through the GOT with -fno-plt: the name follows */
        return returns_twice(target + 1);
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strlen(names[i]) == n && !strncmp(target, names[i], n))
            return 1;
    return 0;
}

int ml_asm_chain_calls(const struct ml_asm_file *f, const struct ml_asm_units *u,
                       struct ml_asm_block *blocks, int nb)
{
    int n = 0;

    for (int i = 0; i < nb; i++) {
        const char *target = i ? f->line[u->last[blocks[i].first - 1]].operands : "";

        while (*target == ' ' || *target == '\t')
            target++;
        if (n && blocks[i].after_call && !returns_twice(target))
            blocks[n - 1].end = blocks[i].end;
        else
            blocks[n++] = blocks[i];
    }
    return n;
}

/* ---- liveness ---- */

unsigned ml_asm_gpr_before(const struct ml_asm_insn *in, unsigned after)
{
    if (in->opaque)
        return 0xffff;
    if (in->flow == ML_ASM_FLOW_CALL)
        return (after & ~ML_ASM_CALL_CLOBBERED) | ML_ASM_CALL_ARGS | in->reg_read |
               (1u << ML_ASM_RSP);
    return (after & ~in->reg_killed) | in->reg_read | (1u << ML_ASM_RSP);
}

unsigned ml_asm_flags_before(const struct ml_asm_insn *in, unsigned after)
{
    if (in->opaque)
        return ML_ASM_STATUS_FLAGS;
    if (in->flow == ML_ASM_FLOW_CALL)
        return 0;
    return (in->flags_read | (after & ~in->flags_written)) & ML_ASM_STATUS_FLAGS;
}

void ml_asm_block_out(const struct ml_asm_block *b, const struct ml_asm_insn *last, int tail,
                      unsigned *gpr, unsigned *flags)
{
    if (b->out_known) {
        *gpr = b->gpr_out;
        *flags = b->flags_out;
        return;
    }
    *flags = last->flow == ML_ASM_FLOW_CALL || last->flow == ML_ASM_FLOW_RET ||
                     last->flow == ML_ASM_FLOW_STOP || tail
                 ? 0
                 : ML_ASM_STATUS_FLAGS;
    *gpr = last->flow == ML_ASM_FLOW_RET ? ML_ASM_RET_LIVE
           : tail                        ? ML_ASM_RET_LIVE | ML_ASM_CALL_ARGS
                                         : 0xffff;
}

/* ---- control equivalence ---- */

/* Largest function (in blocks) whose classes are computed: dominators cost n^2 bits. */
#define FOLD_MAX_BLOCKS 2048

struct cfg {
    int n;     /* blocks of the function; node n is the exit */
    int *succ; /* two per block, -1: none */
    int *pred; /* flat predecessor lists: pred[pstart[v] .. pstart[v + 1]) */
    int *pstart;
    int *mark; /* DFS scratch: visit stamps */
    int *stack;
    int stamp;
};

struct lab {
    const char *name;
    int block;
};

static int lab_cmp(const void *a, const void *b)
{
    return strcmp(((const struct lab *)a)->name, ((const struct lab *)b)->name);
}

/* The block a jump's operand names ("  .LBB0_3"), or -1. */
static int target_block(const struct ml_asm_file *f, const struct ml_asm_units *u, int k,
                        const struct lab *labs, int nlab)
{
    const char *t = f->line[u->last[k]].operands;
    struct lab key, *hit;
    char name[256];
    size_t n;

    while (*t == ' ' || *t == '\t')
        t++;
    n = strcspn(t, " \t#");
    if (!n || n >= sizeof(name))
        return -1;
    memcpy(name, t, n);
    name[n] = 0;
    key.name = name;
    hit = bsearch(&key, labs, nlab, sizeof(*labs), lab_cmp);
    return hit ? hit->block : -1;
}

static int tail_jump(const struct ml_asm_file *f, const struct ml_asm_units *u, int k,
                     const struct ml_asm_insn *insn)
{
    const char *t = f->line[u->last[k]].operands;

    while (*t == ' ' || *t == '\t')
        t++;
    if (insn[k].flow == ML_ASM_FLOW_IJUMP)
        return *t == '*' && strstr(t, "@GOTPCREL(%rip)");
    return strncmp(t, ".L", 2) != 0;
}

/*
 * The control-flow graph of blocks b[0..n) of one function. Returns 0, 1 when
 * the function's flow is not fully known (indirect jumps other than tail calls,
 * inline assembly, undecoded units, setjmp-like callees, a jump to an unknown
 * label, a fall through its end), or -ENOMEM.
 */
static int build_cfg(const struct ml_asm_file *f, const struct ml_asm_units *u,
                     const struct ml_asm_insn *insn, const struct ml_asm_block *b, int n,
                     struct cfg *g)
{
    struct lab *labs = malloc(sizeof(*labs) * 16);
    int nlab = 0, caplab = 16, rc = 0;

    if (!labs)
        return -ENOMEM;
    for (int i = 0; i < n && !rc; i++) {
        int from = i ? u->last[b[i].first - 1] + 1 : f->func[b[i].func].first;

        for (int l = from; l < u->first[b[i].first]; l++) {
            if (f->line[l].kind == ML_ASM_APP ||
                (f->line[l].kind == ML_ASM_DIRECTIVE && is_section_directive(f->line[l].name)))
                rc = 1;
            if (f->line[l].kind != ML_ASM_LABEL)
                continue;
            if (nlab == caplab) {
                struct lab *x = realloc(labs, sizeof(*labs) * (caplab *= 2));

                if (!x) {
                    free(labs);
                    return -ENOMEM;
                }
                labs = x;
            }
            labs[nlab++] = (struct lab){f->line[l].name, i};
        }
        for (int k = b[i].first; k < b[i].end && !rc; k++)
            rc = insn[k].opaque ||
                 (insn[k].flow == ML_ASM_FLOW_CALL && returns_twice(f->line[u->last[k]].operands));
    }
    qsort(labs, nlab, sizeof(*labs), lab_cmp);
    for (int i = 0; i < n && !rc; i++) {
        int k = b[i].end - 1, *s = &g->succ[2 * i];

        s[0] = s[1] = -1;
        switch (insn[k].flow) {
        case ML_ASM_FLOW_RET:
        case ML_ASM_FLOW_STOP:
            s[0] = n;
            break;
        case ML_ASM_FLOW_IJUMP:
            if (!tail_jump(f, u, k, insn))
                rc = 1;
            s[0] = n;
            break;
        case ML_ASM_FLOW_JUMP:
            s[0] = tail_jump(f, u, k, insn) ? n : target_block(f, u, k, labs, nlab);
            rc = s[0] < 0;
            break;
        case ML_ASM_FLOW_CJUMP:
            s[0] = target_block(f, u, k, labs, nlab);
            s[1] = i + 1 < n ? i + 1 : -1;
            rc = s[0] < 0 || s[1] < 0;
            break;
        case ML_ASM_FLOW_CALL: /* a call at the function's end does not return (exit, abort) */
            s[0] = i + 1 < n ? i + 1 : n;
            break;
        default:
            s[0] = i + 1 < n ? i + 1 : -1;
            rc = s[0] < 0;
        }
    }
    free(labs);
    return rc;
}

typedef uint64_t word;
#define WBITS       64
#define HAS(set, v) ((set)[(v) / WBITS] >> ((v) % WBITS) & 1)

/*
 * Dominator sets over nodes 0..nn-1 from root, edges given by next(v) lists
 * (the predecessors for dominators, the successors for post-dominators):
 * set[v * w ..] holds the nodes that dominate v. Iterates to the fixed point.
 * Returns 1 when a node is not reached from root (its sets are meaningless).
 */
static int dominators(int nn, int root, const int *in, const int *instart, word *set, int w)
{
    int changed = 1;

    for (int v = 0; v < nn; v++)
        memset(&set[(size_t)v * w], v == root ? 0 : 0xff, w * sizeof(word));
    set[(size_t)root * w + root / WBITS] |= (word)1 << (root % WBITS);
    while (changed) {
        changed = 0;
        for (int v = 0; v < nn; v++) {
            word *d = &set[(size_t)v * w];

            if (v == root)
                continue;
            for (int x = 0; x < w; x++) {
                word acc = instart[v] == instart[v + 1] ? 0 : ~(word)0;

                for (int e = instart[v]; e < instart[v + 1]; e++)
                    acc &= set[(size_t)in[e] * w + x];
                if (x == v / WBITS)
                    acc |= (word)1 << (v % WBITS);
                if (acc != d[x])
                    d[x] = acc, changed = 1;
            }
        }
    }
    for (int v = 0; v < nn; v++)
        if (!HAS(&set[(size_t)v * w], root))
            return 1;
    return 0;
}

/*
 * Whether every node is reached from root, through the successors (succ, two
 * per node) or the flat lists next[start[v] .. start[v + 1]).
 */
static int all_reached(struct cfg *g, int root, const int *succ, const int *next, const int *start)
{
    int sp = 0, seen = 1;

    g->stamp++;
    g->mark[root] = g->stamp;
    g->stack[sp++] = root;
    while (sp) {
        int v = g->stack[--sp], from = succ ? 2 * v : start[v],
            to = succ ? 2 * v + 2 : start[v + 1];

        for (int e = from; e < to; e++) {
            int x = succ ? succ[e] : next[e];

            if (x < 0 || g->mark[x] == g->stamp)
                continue;
            g->mark[x] = g->stamp;
            g->stack[sp++] = x;
            seen++;
        }
    }
    return seen == g->n + 1;
}

/* Whether from can reach to through successors without entering avoid (from itself excluded). */
static int reaches(struct cfg *g, int from, int to, int avoid)
{
    int sp = 0;

    g->stamp++;
    for (int j = 0; j < 2; j++)
        if (g->succ[2 * from + j] >= 0)
            g->stack[sp++] = g->succ[2 * from + j];
    while (sp) {
        int v = g->stack[--sp];

        if (v == to)
            return 1;
        if (v == avoid || v >= g->n || g->mark[v] == g->stamp)
            continue;
        g->mark[v] = g->stamp;
        for (int j = 0; j < 2; j++)
            if (g->succ[2 * v + j] >= 0)
                g->stack[sp++] = g->succ[2 * v + j];
    }
    return 0;
}

/* General registers the blocks strictly between from and to (on some path from one to the other)
 * write. */
static unsigned between(struct cfg *g, const struct ml_asm_block *b, const struct ml_asm_insn *insn,
                        int from, int to)
{
    unsigned w = 0;
    int sp = 0, fwd;

    /* Forward from `from` (marks: this stamp), then backward from `to` over the marked ones. */
    reaches(g, from, -1, to);
    fwd = g->stamp++;
    g->stack[sp++] = to;
    while (sp) {
        int v = g->stack[--sp];

        for (int e = g->pstart[v]; e < g->pstart[v + 1]; e++) {
            int p = g->pred[e];

            if (p == from || p == to || p >= g->n || g->mark[p] != fwd)
                continue;
            g->mark[p] = g->stamp;
            for (int k = b[p].first; k < b[p].end; k++) {
                w |= insn[k].reg_written;
                for (int l = 0; l < insn[k].nlinear; l++)
                    w |= 1u << insn[k].lin[l].dst;
            }
            g->stack[sp++] = p;
        }
    }
    return w;
}

/*
 * What is live after each block of a function whose every block is reached
 * from its entry (no landing pads, whose edges the graph lacks): the union of
 * the successors' live-in sets, the ABI's rule at the exits. Iterates to the
 * fixed point; the sets only grow.
 */
static void liveness(struct cfg *g, const struct ml_asm_file *f, const struct ml_asm_units *u,
                     const struct ml_asm_insn *insn, struct ml_asm_block *b)
{
    int n = g->n, changed = 1;
    unsigned *gin = (unsigned *)g->mark, *fin = (unsigned *)g->stack;

    for (int i = 0; i < n; i++)
        gin[i] = fin[i] = 0, b[i].gpr_out = b[i].flags_out = 0, b[i].out_known = 0;
    while (changed) {
        changed = 0;
        for (int i = n - 1; i >= 0; i--) {
            unsigned go = 0, fo = 0, gx, fx;

            for (int j = 0; j < 2; j++) {
                int s = g->succ[2 * i + j];

                if (s == n) {
                    ml_asm_block_out(&b[i], &insn[b[i].end - 1],
                                     tail_jump(f, u, b[i].end - 1, insn) &&
                                         (insn[b[i].end - 1].flow == ML_ASM_FLOW_JUMP ||
                                          insn[b[i].end - 1].flow == ML_ASM_FLOW_IJUMP),
                                     &gx, &fx);
                    go |= gx, fo |= fx;
                } else if (s >= 0) {
                    go |= gin[s], fo |= fin[s];
                }
            }
            b[i].gpr_out = go, b[i].flags_out = fo;
            for (int k = b[i].end - 1; k >= b[i].first; k--) {
                go = ml_asm_gpr_before(&insn[k], go);
                fo = ml_asm_flags_before(&insn[k], fo);
            }
            if (go != gin[i] || fo != fin[i])
                gin[i] = go, fin[i] = fo, changed = 1;
        }
    }
    for (int i = 0; i < n; i++)
        b[i].out_known = 1;
}

/* Folds the blocks of one function, b[0..n), into classes: leader[] as ml_asm_fold_equivalent. */
static int fold_function(const struct ml_asm_file *f, const struct ml_asm_units *u,
                         const struct ml_asm_insn *insn, struct ml_asm_block *b, int n, int base,
                         struct ml_asm_fold *fold)
{
    struct cfg g = {n, NULL, NULL, NULL, NULL, NULL, 0};
    int nn = n + 1, w = (nn + WBITS - 1) / WBITS, rc, *rev = NULL, *rstart = NULL;
    word *dom = NULL, *pdom = NULL;

    g.succ = malloc(sizeof(int) * 2 * nn);
    g.pred = malloc(sizeof(int) * 2 * nn);
    g.pstart = calloc(nn + 1, sizeof(int));
    g.mark = calloc(nn, sizeof(int));
    g.stack = malloc(sizeof(int) * 2 * nn);
    rev = malloc(sizeof(int) * 2 * nn);
    rstart = calloc(nn + 1, sizeof(int));
    dom = malloc(sizeof(word) * w * nn);
    pdom = malloc(sizeof(word) * w * nn);
    rc = -ENOMEM;
    if (!g.succ || !g.pred || !g.pstart || !g.mark || !g.stack || !rev || !rstart || !dom || !pdom)
        goto out;
    g.succ[2 * n] = g.succ[2 * n + 1] = -1;
    rc = build_cfg(f, u, insn, b, n, &g);
    if (rc)
        goto out;
    /* Predecessor lists (for dominators) and successor lists (for post-dominators). */
    for (int v = 0; v < nn; v++)
        for (int j = 0; j < 2; j++)
            if (g.succ[2 * v + j] >= 0)
                g.pstart[g.succ[2 * v + j] + 1]++, rstart[v + 1]++;
    for (int v = 0; v < nn; v++)
        g.pstart[v + 1] += g.pstart[v], rstart[v + 1] += rstart[v];
    {
        int *fill = g.mark; /* scratch, reset below */

        memcpy(fill, g.pstart, sizeof(int) * nn);
        for (int v = 0; v < nn; v++)
            for (int j = 0; j < 2; j++)
                if (g.succ[2 * v + j] >= 0) {
                    g.pred[fill[g.succ[2 * v + j]]++] = v;
                    rev[rstart[v] + (j && g.succ[2 * v] >= 0)] = g.succ[2 * v + j];
                }
        memset(g.mark, 0, sizeof(int) * nn);
    }
    /*
     * Every block reached from the entry and reaching the exit, or nothing is
     * folded: a block reached only through edges the graph lacks (a landing
     * pad) could run more often than its dominators say.
     */
    rc = !all_reached(&g, 0, g.succ, NULL, NULL) || !all_reached(&g, n, NULL, g.pred, g.pstart);
    if (!rc)
        rc = dominators(nn, 0, g.pred, g.pstart, dom, w) ? 1 : 0;
    if (!rc)
        rc = dominators(nn, n, rev, rstart, pdom, w) ? 1 : 0;
    if (rc)
        goto out;
    /*
     * B joins the class of its nearest dominator A that it post-dominates when
     * no cycle goes through one of them without the other: then every run
     * visits them as A B A B ... A B, so they run equally often.
     */
    for (int v = 0; v < n; v++) {
        int best = -1, depth = -1;

        for (int a = 0; a < n; a++) {
            int d = 0;

            if (a == v || !HAS(&dom[(size_t)v * w], a) || !HAS(&pdom[(size_t)a * w], v))
                continue;
            for (int x = 0; x < w; x++)
                d += __builtin_popcountll(dom[(size_t)a * w + x]);
            if (d > depth && !reaches(&g, v, v, a) && !reaches(&g, a, a, v))
                best = a, depth = d;
        }
        rstart[v] = best; /* free once the post-dominators are known: the parent in the class */
    }
    for (int v = 0; v < n; v++) {
        int a = v;

        while (rstart[a] >= 0)
            a = rstart[a];
        fold[base + v].leader = base + a;
        fold[base + v].depth = 0;
        for (int x = 0; x < w; x++)
            fold[base + v].depth += __builtin_popcountll(dom[(size_t)v * w + x]);
    }
    /*
     * What the registers may lose between a member and the next one in the
     * dominator order: the writes of the blocks on the paths between them.
     */
    for (int v = 0; v < n; v++) {
        int prev = -1;

        for (int a = 0; a < n; a++)
            if (a != v && fold[base + a].leader == fold[base + v].leader &&
                fold[base + a].depth < fold[base + v].depth &&
                (prev < 0 || fold[base + a].depth > fold[base + prev].depth))
                prev = a;
        fold[base + v].clobber = prev < 0 ? 0xffff : between(&g, b, insn, prev, v);
    }
    liveness(&g, f, u, insn, b);
    rc = 0;
out:
    free(g.succ);
    free(g.pred);
    free(g.pstart);
    free(g.mark);
    free(g.stack);
    free(rev);
    free(rstart);
    free(dom);
    free(pdom);
    return rc;
}

int ml_asm_fold_equivalent(const struct ml_asm_file *f, const struct ml_asm_units *u,
                           const struct ml_asm_insn *insn, struct ml_asm_block *b, int nb,
                           struct ml_asm_fold *fold)
{
    for (int i = 0; i < nb; i++)
        fold[i] = (struct ml_asm_fold){i, 0, 0xffff, -1};
    for (int i = 0; i < nb;) {
        int j = i + 1;

        while (j < nb && b[j].func == b[i].func)
            j++;
        if (b[i].func >= 0 && j - i > 1 && j - i <= FOLD_MAX_BLOCKS) {
            int rc = fold_function(f, u, insn, b + i, j - i, i, fold);

            if (rc < 0)
                return rc;
        }
        i = j;
    }
    return 0;
}

/* ---- callees folded into their caller's unit ---- */

struct fname {
    const char *name;
    int func;
};

static int fname_cmp(const void *a, const void *b)
{
    return strcmp(((const struct fname *)a)->name, ((const struct fname *)b)->name);
}

static int name_char(int c)
{
    return isalnum(c) || c == '_' || c == '.' || c == '$';
}

/*
 * Notes every candidate named in s[0..n): site[func] becomes unit k when the
 * text is exactly a call or tail call of it (call is the operand text then,
 * else NULL), -2 (not folded) for any other mention or a second call.
 */
static void note_names(const char *s, size_t n, const struct fname *c, int nc, const char *call,
                       int k, int *site)
{
    size_t i = 0;

    while (i < n) {
        size_t b = i, e;
        char name[256];

        if (s[i] == '%' || isdigit((unsigned char)s[i])) { /* registers and numbers */
            for (i++; i < n && name_char((unsigned char)s[i]); i++)
                ;
            continue;
        }
        if (s[i] == '"') { /* a quoted name: compared whole, conservatively */
            for (b = ++i; i < n && s[i] != '"'; i++)
                ;
            e = i++;
        } else if (name_char((unsigned char)s[i])) {
            for (; i < n && name_char((unsigned char)s[i]); i++)
                ;
            e = i;
        } else {
            i++;
            continue;
        }
        if (e - b >= sizeof(name))
            continue;
        memcpy(name, s + b, e - b);
        name[e - b] = 0;
        struct fname key = {name, 0}, *hit = bsearch(&key, c, nc, sizeof(*c), fname_cmp);

        if (!hit)
            continue;
        size_t len = strlen(name);
        int called =
            call && !strncmp(call, name, len) && (!call[len] || !strcmp(call + len, "@PLT"));

        site[hit->func] = called && site[hit->func] == -1 ? k : -2;
    }
}

int ml_asm_fold_callees(const struct ml_asm_file *f, const struct ml_asm_units *u,
                        const struct ml_asm_insn *insn, const struct ml_asm_block *b, int nb,
                        struct ml_asm_fold *fold)
{
    int nf = f->nfunc, nc = 0, rc = -ENOMEM;
    int *one = malloc(sizeof(int) * (nf + 1)), *site = malloc(sizeof(int) * (nf + 1));
    int *parent = malloc(sizeof(int) * (nf + 1)), *lead = malloc(sizeof(int) * (nf + 1));
    int *unit = malloc(sizeof(int) * (f->nline + 1)), *ub = malloc(sizeof(int) * (u->n + 1));
    struct fname *c = malloc(sizeof(*c) * (nf + 1));

    if (!one || !site || !parent || !lead || !unit || !ub || !c)
        goto out;
    /* Candidates: functions of one block that ends in a return or a tail call. */
    for (int fn = 0; fn < nf; fn++)
        one[fn] = -1, site[fn] = -1;
    for (int i = 0; i < nb; i++) {
        int fn = b[i].func;

        if (fn < 0)
            continue;
        one[fn] = one[fn] == -1 && (i == 0 || b[i - 1].func != fn) ? i : -2;
        for (int k = b[i].first; k < b[i].end; k++)
            ub[k] = i;
    }
    for (int fn = 0; fn < nf; fn++) {
        int i = one[fn], ok = i >= 0 && (i + 1 == nb || b[i + 1].func != fn);

        for (int k = ok ? b[i].first : 0; ok && k < b[i].end; k++)
            ok = !insn[k].opaque;
        if (ok)
            ok = insn[b[i].end - 1].flow == ML_ASM_FLOW_RET ||
                 (insn[b[i].end - 1].flow == ML_ASM_FLOW_JUMP &&
                  tail_jump(f, u, b[i].end - 1, insn));
        for (const char *p = f->func[fn].name; ok && *p; p++)
            ok = name_char((unsigned char)*p);
        if (ok)
            c[nc++] = (struct fname){f->func[fn].name, fn};
        else
            one[fn] = -1;
    }
    qsort(c, nc, sizeof(*c), fname_cmp);
    for (int i = 0; i < f->nline; i++)
        unit[i] = -1;
    for (int k = 0; k < u->n; k++)
        unit[u->last[k]] = k;
    /* Every mention of a candidate outside debug sections: one call or tail call, nothing else. */
    for (int i = 0; i < f->nline && nc; i++) {
        const struct ml_asm_line *l = &f->line[i];
        int k = unit[i];

        if (l->debugref || l->kind == ML_ASM_LABEL || l->kind == ML_ASM_BLANK)
            continue;
        if (l->kind == ML_ASM_APP) {
            note_names(l->start, l->len, c, nc, NULL, -1, site);
        } else if (l->kind == ML_ASM_DIRECTIVE) {
            /* .addrsig_sym is a hint for identical-code folding (every symbol at -O0) */
            if (strcmp(l->name, ".type") && strcmp(l->name, ".size") &&
                strcmp(l->name, ".addrsig_sym"))
                note_names(l->operands, strlen(l->operands), c, nc, NULL, -1, site);
        } else if (l->operands) {
            const char *t = l->operands;
            int call =
                k >= 0 && (insn[k].flow == ML_ASM_FLOW_CALL || insn[k].flow == ML_ASM_FLOW_JUMP);

            while (*t == ' ' || *t == '\t')
                t++;
            note_names(t, strlen(t), c, nc, call ? t : NULL, k, site);
        }
    }
    for (int fn = 0; fn < nf; fn++)
        parent[fn] =
            one[fn] >= 0 && site[fn] >= 0 && b[ub[site[fn]]].func != fn ? ub[site[fn]] : -1;
    /* The unit each folds into: its caller's, through callers folded themselves. */
    for (int fn = 0; fn < nf; fn++) {
        int x = parent[fn], steps = 0;

        lead[fn] = -1;
        while (x >= 0 && steps <= nf) {
            int g = b[fold[x].leader].func;

            if (g < 0 || parent[g] < 0 || one[g] != fold[x].leader)
                break;
            x = parent[g], steps++;
        }
        if (x >= 0 && steps <= nf)
            lead[fn] = fold[x].leader;
    }
    for (int fn = 0; fn < nf; fn++)
        if (lead[fn] >= 0)
            fold[one[fn]] = (struct ml_asm_fold){lead[fn], fold[lead[fn]].depth, 0xffff, site[fn]};
    rc = 0;
out:
    free(one);
    free(site);
    free(parent);
    free(lead);
    free(unit);
    free(ub);
    free(c);
    return rc;
}
