/* CFG construction, Cooper-Harvey-Kennedy (post-)dominators, natural loops and count classes. */
#include "instrument/ir/cfg.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A directed graph in CSR form, both directions; may alias ml_cfg arrays. */
struct graph {
    unsigned n;
    const unsigned *soff, *succ, *poff, *pred;
};

struct owned_graph {
    struct graph g;
    unsigned *mem;
};

static void owned_graph_free(struct owned_graph *og)
{
    free(og->mem);
    og->mem = NULL;
}

/* Builds both CSR directions from ne edges (edges[2i] -> edges[2i+1]). */
static int owned_graph_build(struct owned_graph *og, unsigned n, const unsigned *edges, unsigned ne)
{
    unsigned *m = calloc(2 * (size_t)(n + 1) + 2 * (size_t)ne + 1, sizeof(*m));
    unsigned *soff, *poff, *succ, *pred;

    if (!m)
        return -ENOMEM;
    soff = m;
    poff = soff + n + 1;
    succ = poff + n + 1;
    pred = succ + ne;
    for (unsigned i = 0; i < ne; i++) {
        soff[edges[2 * i] + 1]++;
        poff[edges[2 * i + 1] + 1]++;
    }
    for (unsigned v = 0; v < n; v++) {
        soff[v + 1] += soff[v];
        poff[v + 1] += poff[v];
    }
    /* Fill with a moving cursor, then shift the offsets back. */
    for (unsigned i = 0; i < ne; i++) {
        succ[soff[edges[2 * i]]++] = edges[2 * i + 1];
        pred[poff[edges[2 * i + 1]]++] = edges[2 * i];
    }
    for (unsigned v = n; v > 0; v--) {
        soff[v] = soff[v - 1];
        poff[v] = poff[v - 1];
    }
    soff[0] = poff[0] = 0;
    og->mem = m;
    og->g = (struct graph){n, soff, succ, poff, pred};
    return 0;
}

/*
 * Reverse post-order of the nodes reachable from root: order[0..*norder-1], and
 * num[v] = position of v in it or -1. Iterative DFS so deep CFGs cannot
 * overflow the stack.
 */
static int rpo_compute(const struct graph *g, unsigned root, unsigned *order, unsigned *norder,
                       int *num)
{
    unsigned *stack = malloc(sizeof(*stack) * g->n), *next = malloc(sizeof(*next) * g->n);
    unsigned top = 0, cnt = 0;
    int ret = -ENOMEM;

    if (!stack || !next)
        goto out;
    for (unsigned v = 0; v < g->n; v++)
        num[v] = -1;
    /* num[v] = -2 marks "on the DFS path or finished" until real numbers are assigned. */
    stack[top++] = root;
    next[root] = g->soff[root];
    num[root] = -2;
    while (top) {
        unsigned v = stack[top - 1];
        if (next[v] < g->soff[v + 1]) {
            unsigned w = g->succ[next[v]++];
            if (num[w] == -1) {
                num[w] = -2;
                next[w] = g->soff[w];
                stack[top++] = w;
            }
        } else {
            order[cnt++] = v; /* post-order for now */
            top--;
        }
    }
    for (unsigned i = 0; i < cnt / 2; i++) {
        unsigned t = order[i];
        order[i] = order[cnt - 1 - i];
        order[cnt - 1 - i] = t;
    }
    for (unsigned i = 0; i < cnt; i++)
        num[order[i]] = (int)i;
    *norder = cnt;
    ret = 0;
out:
    free(stack);
    free(next);
    return ret;
}

static int intersect(const int *idom, const int *num, int a, int b)
{
    while (a != b) {
        while (num[a] > num[b])
            a = idom[a];
        while (num[b] > num[a])
            b = idom[b];
    }
    return a;
}

/*
 * Cooper, Harvey and Kennedy, "A Simple, Fast Dominance Algorithm": iterate
 * idom(b) = intersection of the processed predecessors' dominator chains, in
 * RPO, to a fixed point. idom[root] = root; unreachable nodes get -1. order
 * and num come from rpo_compute on the same graph.
 */
static void dom_solve(const struct graph *g, unsigned root, const unsigned *order, unsigned cnt,
                      const int *num, int *idom)
{
    int changed = 1;

    for (unsigned v = 0; v < g->n; v++)
        idom[v] = -1;
    idom[root] = (int)root;
    while (changed) {
        changed = 0;
        for (unsigned i = 1; i < cnt; i++) {
            unsigned b = order[i];
            int nd = -1;
            for (unsigned k = g->poff[b]; k < g->poff[b + 1]; k++) {
                unsigned p = g->pred[k];
                if (idom[p] == -1)
                    continue;
                nd = nd == -1 ? (int)p : intersect(idom, num, (int)p, nd);
            }
            if (idom[b] != nd) {
                idom[b] = nd;
                changed = 1;
            }
        }
    }
}

/* Pre/post DFS numbers of the tree given by parent[] (parent[root] ignored). */
static int tree_number(unsigned n, const int *parent, unsigned root, unsigned *pre, unsigned *post)
{
    unsigned *off = calloc(n + 1, sizeof(*off)), *kid = malloc(sizeof(*kid) * (n + 1));
    unsigned *stack = malloc(sizeof(*stack) * (n + 1)), *next = malloc(sizeof(*next) * (n + 1));
    unsigned top = 0, c_pre = 0, c_post = 0;
    int ret = -ENOMEM;

    if (!off || !kid || !stack || !next)
        goto out;
    for (unsigned v = 0; v < n; v++)
        if (v != root && parent[v] >= 0)
            off[parent[v] + 1]++;
    for (unsigned v = 0; v < n; v++)
        off[v + 1] += off[v];
    memcpy(next, off, sizeof(*next) * n);
    for (unsigned v = 0; v < n; v++)
        if (v != root && parent[v] >= 0)
            kid[next[parent[v]]++] = v;
    for (unsigned v = 0; v < n; v++)
        pre[v] = post[v] = UINT32_MAX;
    memcpy(next, off, sizeof(*next) * n);
    stack[top++] = root;
    pre[root] = c_pre++;
    while (top) {
        unsigned v = stack[top - 1];
        if (next[v] < off[v + 1]) {
            unsigned w = kid[next[v]++];
            pre[w] = c_pre++;
            stack[top++] = w;
        } else {
            post[v] = c_post++;
            top--;
        }
    }
    ret = 0;
out:
    free(off);
    free(kid);
    free(stack);
    free(next);
    return ret;
}

static int cmp_unsigned(const void *a, const void *b)
{
    unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
    return (x > y) - (x < y);
}

static int reachable(const struct ml_cfg *cfg, unsigned b)
{
    return cfg->rpo_num[b] >= 0;
}

static struct graph cfg_graph(const struct ml_cfg *cfg)
{
    return (struct graph){cfg->n, cfg->succ_off, cfg->succ, cfg->pred_off, cfg->pred};
}

/* Successor and predecessor lists, duplicates removed with a per-block stamp. */
static int build_edges(struct ml_cfg *cfg)
{
    unsigned n = cfg->n, ne = 0, cap = 0;
    unsigned *stamp = calloc(n, sizeof(*stamp)), *edges = NULL;
    struct owned_graph og = {0};
    int ret = -ENOMEM;

    if (!stamp)
        goto out;
    for (unsigned b = 0; b < n; b++) {
        LLVMValueRef term = LLVMGetBasicBlockTerminator(cfg->blocks[b]);
        unsigned ns = term ? LLVMGetNumSuccessors(term) : 0;
        for (unsigned i = 0; i < ns; i++) {
            int s = ml_cfg_index(cfg, LLVMGetSuccessor(term, i));
            if (s < 0 || stamp[s] == b + 1)
                continue;
            stamp[s] = b + 1;
            if (ne == cap) {
                unsigned *e;
                cap = cap ? 2 * cap : 64;
                e = realloc(edges, sizeof(*e) * 2 * cap);
                if (!e)
                    goto out;
                edges = e;
            }
            edges[2 * ne] = b;
            edges[2 * ne + 1] = (unsigned)s;
            ne++;
        }
    }
    if (owned_graph_build(&og, n, edges, ne))
        goto out;
    cfg->succ_off = malloc(sizeof(unsigned) * (n + 1));
    cfg->pred_off = malloc(sizeof(unsigned) * (n + 1));
    cfg->succ = malloc(sizeof(unsigned) * (ne + 1));
    cfg->pred = malloc(sizeof(unsigned) * (ne + 1));
    if (!cfg->succ_off || !cfg->pred_off || !cfg->succ || !cfg->pred)
        goto out;
    /* Edges were generated by ascending source, so both lists come out in the documented order. */
    memcpy(cfg->succ_off, og.g.soff, sizeof(unsigned) * (n + 1));
    memcpy(cfg->pred_off, og.g.poff, sizeof(unsigned) * (n + 1));
    memcpy(cfg->succ, og.g.succ, sizeof(unsigned) * ne);
    memcpy(cfg->pred, og.g.pred, sizeof(unsigned) * ne);
    ret = 0;
out:
    owned_graph_free(&og);
    free(stamp);
    free(edges);
    return ret;
}

/*
 * Post-dominators: dominators of the reverse CFG rooted at the virtual exit n.
 * Blocks that cannot reach a real exit are handled in one RPO pass: when a
 * block v that still cannot reach the exit is the target of a retreating edge
 * u -> v from another such block, u (a latch of an exitless cycle) is linked to
 * the exit. One pass suffices: a block left over at the end would start an
 * infinite path among left-over blocks, hence a cycle, hence a retreating edge
 * between left-over blocks, which the pass links.
 */
static int build_postdom(struct ml_cfg *cfg)
{
    unsigned n = cfg->n, ne = 0, top = 0, cnt;
    unsigned char *reach = calloc(n, 1);
    unsigned *stack = malloc(sizeof(*stack) * (n + 1));
    unsigned *edges = malloc(sizeof(*edges) * 2 * ((size_t)cfg->succ_off[n] + n + 1));
    unsigned *order = malloc(sizeof(*order) * (n + 1));
    int *num = malloc(sizeof(*num) * (n + 1));
    struct owned_graph og = {0};
    int ret = -ENOMEM;

    if (!reach || !stack || !edges || !order || !num)
        goto out;
    for (unsigned b = 0; b < n; b++) {
        if (!reachable(cfg, b))
            continue;
        if (cfg->succ_off[b] == cfg->succ_off[b + 1]) {
            edges[2 * ne] = n;
            edges[2 * ne + 1] = b;
            ne++;
            reach[b] = 1;
            stack[top++] = b;
        }
        for (unsigned k = cfg->succ_off[b]; k < cfg->succ_off[b + 1]; k++) {
            edges[2 * ne] = cfg->succ[k];
            edges[2 * ne + 1] = b;
            ne++;
        }
    }
    for (unsigned i = 0;; i++) {
        while (top) {
            unsigned v = stack[--top];
            for (unsigned k = cfg->pred_off[v]; k < cfg->pred_off[v + 1]; k++) {
                unsigned p = cfg->pred[k];
                if (reachable(cfg, p) && !reach[p]) {
                    reach[p] = 1;
                    stack[top++] = p;
                }
            }
        }
        if (i == cfg->nrpo)
            break;
        unsigned v = cfg->rpo[i];
        if (reach[v])
            continue;
        for (unsigned k = cfg->pred_off[v]; k < cfg->pred_off[v + 1]; k++) {
            unsigned u = cfg->pred[k];
            if (reachable(cfg, u) && !reach[u] && cfg->rpo_num[u] >= (int)i) {
                edges[2 * ne] = n;
                edges[2 * ne + 1] = u;
                ne++;
                reach[u] = 1;
                stack[top++] = u;
            }
        }
    }
    if (owned_graph_build(&og, n + 1, edges, ne) || rpo_compute(&og.g, n, order, &cnt, num))
        goto out;
    dom_solve(&og.g, n, order, cnt, num, cfg->ipdom);
    ret = 0;
out:
    owned_graph_free(&og);
    free(reach);
    free(stack);
    free(edges);
    free(order);
    free(num);
    return ret;
}

/* Natural loops, discovered in RPO order of their headers so parents precede children. */
static int build_loops(struct ml_cfg *cfg)
{
    unsigned n = cfg->n, cap = 0;
    unsigned *mark = calloc(n, sizeof(*mark)), *xmark = calloc(n, sizeof(*xmark));
    unsigned *work = malloc(sizeof(*work) * n);
    int ret = -ENOMEM;

    if (!mark || !xmark || !work)
        goto out;
    for (unsigned b = 0; b < n; b++)
        cfg->loop_of[b] = -1;
    for (unsigned i = 0; i < cfg->nrpo; i++) {
        unsigned h = cfg->rpo[i], nw = 0, nl = 0, stampv;
        struct ml_loop *l;

        for (unsigned k = cfg->pred_off[h]; k < cfg->pred_off[h + 1]; k++)
            if (reachable(cfg, cfg->pred[k]) && ml_cfg_dominates(cfg, h, cfg->pred[k]))
                nl++;
        if (!nl)
            continue;
        if (cfg->nloops == cap) {
            struct ml_loop *nlps;
            cap = cap ? 2 * cap : 8;
            nlps = realloc(cfg->loops, sizeof(*nlps) * cap);
            if (!nlps)
                goto out;
            cfg->loops = nlps;
        }
        l = &cfg->loops[cfg->nloops];
        memset(l, 0, sizeof(*l));
        cfg->nloops++;
        stampv = cfg->nloops;
        l->header = h;
        l->preheader = -1;
        l->latches = malloc(sizeof(unsigned) * nl);
        if (!l->latches)
            goto out;
        /* Body: walk backwards from the latches, never through the header. */
        mark[h] = stampv;
        work[nw++] = h;
        for (unsigned k = cfg->pred_off[h]; k < cfg->pred_off[h + 1]; k++) {
            unsigned u = cfg->pred[k];
            if (!reachable(cfg, u) || !ml_cfg_dominates(cfg, h, u))
                continue;
            l->latches[l->nlatches++] = u;
            if (mark[u] != stampv) {
                mark[u] = stampv;
                work[nw++] = u;
            }
        }
        for (unsigned w = 1; w < nw; w++) {
            unsigned x = work[w];
            for (unsigned k = cfg->pred_off[x]; k < cfg->pred_off[x + 1]; k++) {
                unsigned p = cfg->pred[k];
                if (reachable(cfg, p) && mark[p] != stampv) {
                    mark[p] = stampv;
                    work[nw++] = p;
                }
            }
        }
        qsort(work, nw, sizeof(*work), cmp_unsigned);
        l->nblocks = nw;
        l->blocks = malloc(sizeof(unsigned) * nw);
        if (!l->blocks)
            goto out;
        memcpy(l->blocks, work, sizeof(unsigned) * nw);
        /* Exits, deduplicated with xmark. */
        for (unsigned w = 0; w < nw; w++) {
            unsigned x = l->blocks[w];
            for (unsigned k = cfg->succ_off[x]; k < cfg->succ_off[x + 1]; k++) {
                unsigned s = cfg->succ[k];
                if (mark[s] != stampv && xmark[s] != stampv) {
                    xmark[s] = stampv;
                    work[l->nexits++] = s;
                }
            }
        }
        qsort(work, l->nexits, sizeof(*work), cmp_unsigned);
        l->exits = malloc(sizeof(unsigned) * (l->nexits + 1));
        if (!l->exits)
            goto out;
        memcpy(l->exits, work, sizeof(unsigned) * l->nexits);
        {
            int outside = -1, nout = 0;
            for (unsigned k = cfg->pred_off[h]; k < cfg->pred_off[h + 1]; k++) {
                unsigned p = cfg->pred[k];
                if (reachable(cfg, p) && mark[p] != stampv) {
                    outside = (int)p;
                    nout++;
                }
            }
            if (nout == 1 && cfg->succ_off[outside + 1] - cfg->succ_off[outside] == 1)
                l->preheader = outside;
        }
        l->parent = cfg->loop_of[h];
        l->depth = l->parent < 0 ? 1 : cfg->loops[l->parent].depth + 1;
        for (unsigned w = 0; w < nw; w++)
            cfg->loop_of[l->blocks[w]] = (int)(cfg->nloops - 1);
    }
    ret = 0;
out:
    free(mark);
    free(xmark);
    free(work);
    return ret;
}

/*
 * Blocks on irreducible cycles: the non-trivial strongly connected components
 * of the reachable CFG without its back edges (a graph is reducible iff that
 * graph is acyclic). Iterative Tarjan.
 */
static int build_irreducible(struct ml_cfg *cfg)
{
    unsigned n = cfg->n, counter = 0, sp = 0;
    unsigned *idx = malloc(sizeof(*idx) * n), *low = malloc(sizeof(*low) * n);
    unsigned *next = malloc(sizeof(*next) * n), *cs = malloc(sizeof(*cs) * n);
    unsigned *st = malloc(sizeof(*st) * n);
    unsigned char *on = calloc(n, 1);
    int ret = -ENOMEM;

    if (!idx || !low || !next || !cs || !st || !on)
        goto out;
    for (unsigned v = 0; v < n; v++)
        idx[v] = UINT32_MAX;
    for (unsigned r = 0; r < n; r++) {
        unsigned top = 0;
        if (!reachable(cfg, r) || idx[r] != UINT32_MAX)
            continue;
        cs[top++] = r;
        idx[r] = low[r] = counter++;
        next[r] = cfg->succ_off[r];
        st[sp++] = r;
        on[r] = 1;
        while (top) {
            unsigned v = cs[top - 1];
            if (next[v] < cfg->succ_off[v + 1]) {
                unsigned w = cfg->succ[next[v]++];
                if (ml_cfg_dominates(cfg, w, v))
                    continue; /* back edge (or self loop) */
                if (idx[w] == UINT32_MAX) {
                    idx[w] = low[w] = counter++;
                    next[w] = cfg->succ_off[w];
                    st[sp++] = w;
                    on[w] = 1;
                    cs[top++] = w;
                } else if (on[w] && idx[w] < low[v]) {
                    low[v] = idx[w];
                }
                continue;
            }
            if (low[v] == idx[v]) {
                unsigned first = sp;
                do
                    on[st[--first]] = 0;
                while (st[first] != v);
                if (sp - first > 1)
                    for (unsigned k = first; k < sp; k++)
                        cfg->irreducible[st[k]] = 1;
                sp = first;
            }
            if (--top && low[v] < low[cs[top - 1]])
                low[cs[top - 1]] = low[v];
        }
    }
    ret = 0;
out:
    free(idx);
    free(low);
    free(next);
    free(cs);
    free(st);
    free(on);
    return ret;
}

int ml_cfg_build(LLVMValueRef fn, struct ml_cfg *cfg)
{
    unsigned n = LLVMCountBasicBlocks(fn), b = 0;
    struct graph g;

    memset(cfg, 0, sizeof(*cfg));
    ml_ptrmap_init(&cfg->index);
    if (!n)
        return -EINVAL;
    cfg->fn = fn;
    cfg->n = n;
    cfg->blocks = malloc(sizeof(*cfg->blocks) * n);
    if (!cfg->blocks)
        goto nomem;
    /* LLVM keeps the entry block first, so function order already puts it at index 0. */
    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb)) {
        cfg->blocks[b] = bb;
        if (ml_ptrmap_put(&cfg->index, bb, (void *)(uintptr_t)(b + 1)))
            goto nomem;
        b++;
    }
    if (build_edges(cfg))
        goto nomem;
    cfg->rpo = malloc(sizeof(unsigned) * n);
    cfg->rpo_num = malloc(sizeof(int) * n);
    cfg->idom = malloc(sizeof(int) * n);
    cfg->ipdom = malloc(sizeof(int) * (n + 1));
    cfg->loop_of = malloc(sizeof(int) * n);
    cfg->irreducible = calloc(n, 1);
    cfg->dom_pre = malloc(sizeof(unsigned) * n);
    cfg->dom_post = malloc(sizeof(unsigned) * n);
    cfg->pdom_pre = malloc(sizeof(unsigned) * (n + 1));
    cfg->pdom_post = malloc(sizeof(unsigned) * (n + 1));
    if (!cfg->rpo || !cfg->rpo_num || !cfg->idom || !cfg->ipdom || !cfg->loop_of ||
        !cfg->irreducible || !cfg->dom_pre || !cfg->dom_post || !cfg->pdom_pre || !cfg->pdom_post)
        goto nomem;
    g = cfg_graph(cfg);
    if (rpo_compute(&g, 0, cfg->rpo, &cfg->nrpo, cfg->rpo_num))
        goto nomem;
    dom_solve(&g, 0, cfg->rpo, cfg->nrpo, cfg->rpo_num, cfg->idom);
    if (tree_number(n, cfg->idom, 0, cfg->dom_pre, cfg->dom_post))
        goto nomem;
    cfg->idom[0] = -1;
    if (build_postdom(cfg) || tree_number(n + 1, cfg->ipdom, n, cfg->pdom_pre, cfg->pdom_post))
        goto nomem;
    cfg->ipdom[n] = -1;
    if (build_loops(cfg) || build_irreducible(cfg))
        goto nomem;
    return 0;
nomem:
    ml_cfg_free(cfg);
    return -ENOMEM;
}

void ml_cfg_free(struct ml_cfg *cfg)
{
    for (unsigned i = 0; i < cfg->nloops; i++) {
        free(cfg->loops[i].blocks);
        free(cfg->loops[i].latches);
        free(cfg->loops[i].exits);
    }
    free(cfg->loops);
    free(cfg->blocks);
    free(cfg->succ_off);
    free(cfg->succ);
    free(cfg->pred_off);
    free(cfg->pred);
    free(cfg->rpo);
    free(cfg->rpo_num);
    free(cfg->idom);
    free(cfg->ipdom);
    free(cfg->loop_of);
    free(cfg->irreducible);
    free(cfg->dom_pre);
    free(cfg->dom_post);
    free(cfg->pdom_pre);
    free(cfg->pdom_post);
    ml_ptrmap_free(&cfg->index);
    memset(cfg, 0, sizeof(*cfg));
    ml_ptrmap_init(&cfg->index);
}

int ml_cfg_index(const struct ml_cfg *cfg, LLVMBasicBlockRef bb)
{
    uintptr_t v = (uintptr_t)ml_ptrmap_get(&cfg->index, bb);
    return v ? (int)(v - 1) : -1;
}

int ml_cfg_dominates(const struct ml_cfg *cfg, unsigned a, unsigned b)
{
    if (a >= cfg->n || b >= cfg->n || !reachable(cfg, a) || !reachable(cfg, b))
        return 0;
    return cfg->dom_pre[a] <= cfg->dom_pre[b] && cfg->dom_post[b] <= cfg->dom_post[a];
}

int ml_cfg_postdominates(const struct ml_cfg *cfg, unsigned a, unsigned b)
{
    if (a > cfg->n || b > cfg->n || (a < cfg->n && !reachable(cfg, a)) ||
        (b < cfg->n && !reachable(cfg, b)))
        return 0;
    return cfg->pdom_pre[a] <= cfg->pdom_pre[b] && cfg->pdom_post[b] <= cfg->pdom_post[a];
}

/*
 * Walks the post-dominator chain c = ipd[a], ipd[c], ... (local indices into
 * blocks[], stopping at sink) and gives a's class to each block in a's
 * innermost loop. The walk stops at the first block a does not dominate: a is
 * on no cycle of the iteration graph, so if a dominates a block higher up the
 * chain it dominates every block in between.
 */
static void absorb_chain(const struct ml_cfg *cfg, const int *ipd, const unsigned *blocks, int sink,
                         int loc_a, int *leader)
{
    unsigned a = blocks[loc_a];

    for (int c = ipd[loc_a]; c >= 0 && c != sink; c = ipd[c]) {
        unsigned cb = blocks[c];
        if (!ml_cfg_dominates(cfg, a, cb))
            break;
        if (cfg->loop_of[cb] == cfg->loop_of[a] && !cfg->irreducible[cb] && leader[cb] < 0)
            leader[cb] = (int)a;
    }
}

/*
 * Classes inside loop l: post-dominators of the iteration graph of l (its
 * blocks, with back edges to the header and exit edges redirected to a sink),
 * then a chain walk from each block whose innermost loop is l, in RPO order.
 */
static int loop_classes(const struct ml_cfg *cfg, unsigned li, int *loc, int *leader)
{
    const struct ml_loop *l = &cfg->loops[li];
    unsigned k = l->nblocks, ne = 0, cnt, nmine = 0;
    unsigned *edges = NULL, *order = malloc(sizeof(*order) * (k + 1));
    unsigned *mine = malloc(sizeof(*mine) * k);
    int *num = malloc(sizeof(*num) * (k + 1)), *ipd = malloc(sizeof(*ipd) * (k + 1));
    struct owned_graph og = {0};
    int ret = -ENOMEM;

    if (!order || !mine || !num || !ipd)
        goto out;
    for (unsigned i = 0; i < k; i++) {
        unsigned b = l->blocks[i];
        loc[b] = (int)i;
        ne += cfg->succ_off[b + 1] - cfg->succ_off[b];
    }
    edges = malloc(sizeof(*edges) * 2 * (ne + 1));
    if (!edges)
        goto out;
    ne = 0;
    for (unsigned i = 0; i < k; i++) {
        unsigned b = l->blocks[i];
        for (unsigned e = cfg->succ_off[b]; e < cfg->succ_off[b + 1]; e++) {
            unsigned s = cfg->succ[e];
            /* Reverse graph: an edge b -> s becomes s -> b, and sink -> b for back/exit edges. */
            edges[2 * ne] = (s == l->header || loc[s] < 0) ? k : (unsigned)loc[s];
            edges[2 * ne + 1] = i;
            ne++;
        }
        if (cfg->loop_of[b] == (int)li && !cfg->irreducible[b])
            mine[nmine++] = (unsigned)cfg->rpo_num[b];
    }
    if (owned_graph_build(&og, k + 1, edges, ne) || rpo_compute(&og.g, k, order, &cnt, num))
        goto out;
    dom_solve(&og.g, k, order, cnt, num, ipd);
    qsort(mine, nmine, sizeof(*mine), cmp_unsigned);
    for (unsigned i = 0; i < nmine; i++) {
        unsigned a = cfg->rpo[mine[i]];
        if (leader[a] >= 0)
            continue;
        leader[a] = (int)a;
        absorb_chain(cfg, ipd, l->blocks, (int)k, loc[a], leader);
    }
    ret = 0;
out:
    for (unsigned i = 0; i < k; i++)
        loc[l->blocks[i]] = -1;
    owned_graph_free(&og);
    free(edges);
    free(order);
    free(mine);
    free(num);
    free(ipd);
    return ret;
}

int ml_cfg_equiv_classes(const struct ml_cfg *cfg, int *class_of, unsigned *leader_of_class)
{
    unsigned n = cfg->n, *ident = malloc(sizeof(*ident) * (n + 1));
    int *leader = malloc(sizeof(*leader) * n), *loc = malloc(sizeof(*loc) * n);
    int ret = -ENOMEM;

    if (!ident || !leader || !loc)
        goto out;
    for (unsigned b = 0; b < n; b++) {
        leader[b] = loc[b] = -1;
        ident[b] = b;
    }
    ident[n] = n;
    /* Outside loops the iteration graph is the whole CFG with its virtual exit. */
    for (unsigned i = 0; i < cfg->nrpo; i++) {
        unsigned a = cfg->rpo[i];
        if (cfg->loop_of[a] >= 0 || cfg->irreducible[a] || leader[a] >= 0)
            continue;
        leader[a] = (int)a;
        absorb_chain(cfg, cfg->ipdom, ident, (int)n, (int)a, leader);
    }
    for (unsigned li = 0; li < cfg->nloops; li++)
        if (loop_classes(cfg, li, loc, leader))
            goto out;
    ret = 0;
    for (unsigned b = 0; b < n; b++)
        class_of[b] = -1;
    /* A leader strictly dominates its members, so it comes first in RPO. */
    for (unsigned i = 0; i < cfg->nrpo; i++) {
        unsigned b = cfg->rpo[i];
        if (leader[b] < 0 || leader[b] == (int)b) {
            class_of[b] = ret;
            leader_of_class[ret++] = b;
        } else {
            class_of[b] = class_of[leader[b]];
        }
    }
out:
    free(ident);
    free(leader);
    free(loc);
    return ret;
}
