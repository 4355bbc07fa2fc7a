/* Per-block analysis: BID expressions, incarnations, classes, distances, knapsack selection,
 * MA/AIA. */
#include "instrument/asm/asm.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void ml_asm_default_scores(int mode, int score[3])
{
    /* aia: a near access is as good as an exact one for AIA; the 1 only breaks ties. */
    static const int aia[3] = {0, 1, 16};
    /* ma: a near access is right half the time on average (its distance uniform in (0, C)). */
    static const int ma[3] = {0, 2, 4};

    memcpy(score, mode == ML_ASM_MA ? ma : aia, sizeof(aia));
}

int ml_asm_params_check(const struct ml_asm_params *p, char *err, size_t errlen)
{
    const int *s = p->score;

    if (p->mode != ML_ASM_NS && p->mode != ML_ASM_MA && p->mode != ML_ASM_AIA) {
        ml_asm_err(err, errlen, "unknown mode %d", p->mode);
        return -EINVAL;
    }
    if (!(p->omega > 0 && p->omega <= 1)) {
        ml_asm_err(err, errlen, "omega %g is not in (0, 1]", p->omega);
        return -EINVAL;
    }
    if (!p->chunk || (p->chunk & (p->chunk - 1))) {
        ml_asm_err(err, errlen, "chunk %u is not a power of two", p->chunk);
        return -EINVAL;
    }
    if (s[0] < 0 || !(s[0] < s[1] && s[1] < s[2])) {
        ml_asm_err(err, errlen, "scores %d:%d:%d are not 0 <= s1 < s2 < s3", s[0], s[1], s[2]);
        return -EINVAL;
    }
    if (!(s[0] + s[1] < s[2])) {
        ml_asm_err(err, errlen, "scores %d:%d:%d break s1 + s2 < s3", s[0], s[1], s[2]);
        return -EINVAL;
    }
    return 0;
}

/* Value numbers at or above SYMROOT are link-time addresses: symroot[id - SYMROOT]. */
#define SYMROOT  (1 << 24)
#define NSYMROOT 64

/* Value number and constant offset of each general register, and its incarnation. */
struct regstate {
    int root[ML_ASM_NGPR];
    int64_t off[ML_ASM_NGPR];
    int inc[ML_ASM_NGPR];
    int next;
    struct {
        const char *sym;
        uint16_t len;
    } symroot[NSYMROOT];
    int nsym;
};

/* The value number of the address of sym (the same for every mention in the block), or -1. */
static int symbol_root(struct regstate *s, const char *sym, uint16_t len)
{
    for (int i = 0; i < s->nsym; i++)
        if (s->symroot[i].len == len && !memcmp(s->symroot[i].sym, sym, len))
            return SYMROOT + i;
    if (s->nsym == NSYMROOT)
        return -1;
    s->symroot[s->nsym].sym = sym;
    s->symroot[s->nsym].len = len;
    return SYMROOT + s->nsym++;
}

static void fresh(struct regstate *s, int r)
{
    s->root[r] = s->next++;
    s->off[r] = 0;
}

/* Applies the register writes of one instruction (all reads see the old values). */
static void step(struct regstate *s, const struct ml_asm_insn *in)
{
    struct regstate old = *s;
    unsigned written = in->reg_written;

    for (int k = 0; k < in->nlinear; k++)
        written |= 1u << in->lin[k].dst;
    for (int r = 0; r < ML_ASM_NGPR; r++) {
        if (!(written & (1u << r)))
            continue;
        s->inc[r]++;
        fresh(s, r);
    }
    for (int k = 0; k < in->nlinear; k++) {
        const struct ml_asm_linear *l = &in->lin[k];
        int root;

        if (l->src == ML_ASM_RIP) {
            root = symbol_root(s, l->sym, l->symlen);
            if (root >= 0) {
                s->root[l->dst] = root;
                s->off[l->dst] = l->add;
            }
            continue;
        }
        s->root[l->dst] = old.root[l->src];
        s->off[l->dst] = old.off[l->src] + l->add;
    }
}

static void bid_of(const struct regstate *s, const struct ml_asm_access *a, struct ml_asm_bid *b)
{
    memset(b, 0, sizeof(*b));
    b->seg = a->seg;
    b->base = ML_ASM_NOREG;
    b->index = ML_ASM_NOREG;
    b->base_root = b->index_root = -1;
    b->base_inc = b->index_inc = -1;
    b->scale = 1;
    b->sym = a->sym;
    b->symlen = a->symlen;
    b->d = a->disp;
    b->unstable = a->count != ML_ASM_ONCE;
    if (a->base < ML_ASM_NGPR && s->root[a->base] >= SYMROOT && !a->sym) {
        /* The base holds a symbol's address: sym(%r) is the same expression as sym(%rip). */
        b->sym = s->symroot[s->root[a->base] - SYMROOT].sym;
        b->symlen = s->symroot[s->root[a->base] - SYMROOT].len;
        b->d += s->off[a->base];
    } else if (a->base < ML_ASM_NGPR) {
        b->base = a->base;
        b->base_inc = s->inc[a->base];
        b->base_root = s->root[a->base];
        b->d += s->off[a->base];
    }
    if (a->index < ML_ASM_NGPR) {
        b->index = a->index;
        b->scale = a->scale;
        b->index_inc = s->inc[a->index];
        b->index_root = s->root[a->index];
        b->d += (int64_t)a->scale * s->off[a->index];
    } else if (a->index == ML_ASM_VREG) {
        b->index = ML_ASM_VREG;
        b->scale = a->scale;
    }
    /* RRI: an offset from registers; IRR: an address (symbol or absolute) plus registers. */
    b->tmpl = b->base != ML_ASM_NOREG && !b->sym ? 'R' : 'I';
}

int ml_asm_bids(const struct ml_asm_insn *insn, int n, struct ml_asm_pick **pick)
{
    struct regstate s;
    int m = 0, k = 0;

    for (int i = 0; i < n; i++)
        m += insn[i].opaque ? 0 : insn[i].naccess;
    *pick = calloc(m ? m : 1, sizeof(**pick));
    if (!*pick)
        return -ENOMEM;
    memset(&s, 0, sizeof(s));
    for (int r = 0; r < ML_ASM_NGPR; r++)
        s.root[r] = r;
    s.next = ML_ASM_NGPR;
    for (int i = 0; i < n; i++) {
        if (insn[i].opaque) {
            for (int r = 0; r < ML_ASM_NGPR; r++)
                s.inc[r]++, fresh(&s, r);
            continue;
        }
        for (int a = 0; a < insn[i].naccess; a++, k++) {
            (*pick)[k].insn = i;
            (*pick)[k].acc = a;
            bid_of(&s, &insn[i].acc[a], &(*pick)[k].bid);
        }
        step(&s, &insn[i]);
    }
    return m;
}

int ml_asm_states(const struct ml_asm_insn *insn, int n, struct ml_asm_regval *st)
{
    struct regstate s;

    memset(&s, 0, sizeof(s));
    for (int r = 0; r < ML_ASM_NGPR; r++)
        s.root[r] = r;
    s.next = ML_ASM_NGPR;
    for (int i = 0; i <= n; i++) {
        for (int r = 0; r < ML_ASM_NGPR; r++)
            st[i * ML_ASM_NGPR + r] = (struct ml_asm_regval){s.root[r], s.off[r]};
        if (i == n)
            break;
        if (insn[i].opaque) {
            for (int r = 0; r < ML_ASM_NGPR; r++)
                s.inc[r]++, fresh(&s, r);
            continue;
        }
        step(&s, &insn[i]);
    }
    return 0;
}

int ml_asm_same_class(const struct ml_asm_bid *a, const struct ml_asm_bid *b)
{
    if (a->unstable || b->unstable)
        return 0;
    if (a->tmpl != b->tmpl || a->seg != b->seg || a->base_root != b->base_root ||
        a->index_root != b->index_root || (a->index != ML_ASM_NOREG && a->scale != b->scale))
        return 0;
    if (!a->sym != !b->sym)
        return 0;
    return !a->sym || (a->symlen == b->symlen && !memcmp(a->sym, b->sym, a->symlen));
}

static uint64_t absdiff(int64_t a, int64_t b)
{
    return a > b ? (uint64_t)a - (uint64_t)b : (uint64_t)b - (uint64_t)a;
}

int ml_asm_distance(const struct ml_asm_bid *a, const struct ml_asm_bid *b, uint32_t chunk)
{
    uint64_t d;

    if (!ml_asm_same_class(a, b))
        return 3;
    d = absdiff(a->d, b->d);
    return d == 0 ? 1 : d < chunk ? 2 : 3;
}

/* An item of the knapsack: a cluster (its representative) or a refined displacement group. */
struct item {
    int pick;    /* the access instrumented if the item is chosen */
    int refine;  /* 0: a cluster, 1: a refinement of cluster 'cluster' */
    int cluster; /* cluster number */
    long value;
};

static int cmp_item(const void *pa, const void *pb)
{
    const struct item *a = pa, *b = pb;

    if (a->value != b->value)
        return a->value > b->value ? -1 : 1;
    if (a->refine != b->refine)
        return a->refine - b->refine;
    return a->pick - b->pick;
}

/* Members of one class sorted by displacement, then by position. */
static int cmp_by_d(const void *pa, const void *pb, void *ctx)
{
    const struct ml_asm_pick *pick = ctx;
    int a = *(const int *)pa, b = *(const int *)pb;
    int64_t da = pick[a].bid.d, db = pick[b].bid.d;

    if (da != db)
        return da < db ? -1 : 1;
    return a - b;
}

/*
 * Step A and B for one class: cuts its members (sorted by displacement, in
 * mem[0..n)) into clusters of span < chunk, picks each cluster's representative
 * (the largest group at one displacement, then the one closest to the others,
 * then the earliest) and appends the cluster and its refinements as items.
 */
static void clusters_of(struct ml_asm_pick *pick, const int *mem, int n,
                        const struct ml_asm_params *p, int *ncluster, struct item *items,
                        int *nitem)
{
    const int *s = p->score;

    for (int b = 0; b < n;) {
        int e = b, best = -1, bestn = 0;
        uint64_t bestsum = 0;
        long value = 0;

        while (e < n && absdiff(pick[mem[e]].bid.d, pick[mem[b]].bid.d) < p->chunk)
            e++;
        /* Displacement groups are runs of equal d in [b, e). */
        for (int g = b; g < e;) {
            int h = g;
            uint64_t sum = 0;

            while (h < e && pick[mem[h]].bid.d == pick[mem[g]].bid.d)
                h++;
            for (int k = b; k < e; k++)
                sum += absdiff(pick[mem[k]].bid.d, pick[mem[g]].bid.d);
            if (h - g > bestn || (h - g == bestn && sum < bestsum)) {
                best = g;
                bestn = h - g;
                bestsum = sum;
            }
            g = h;
        }
        /* Within a group, mem[] is in block order: its first member is the earliest. */
        int rep = mem[best];

        for (int k = b; k < e; k++)
            value += s[2] - s[pick[mem[k]].bid.d == pick[rep].bid.d ? 0 : 1];
        items[*nitem] = (struct item){rep, 0, *ncluster, value};
        (*nitem)++;
        for (int k = b; k < e; k++) {
            pick[mem[k]].cluster = *ncluster;
            pick[mem[k]].value = value;
        }
        for (int g = b; g < e;) {
            int h = g;

            while (h < e && pick[mem[h]].bid.d == pick[mem[g]].bid.d)
                h++;
            if (g != best) {
                long v = (long)(h - g) * (s[1] - s[0]);

                items[(*nitem)++] = (struct item){mem[g], 1, *ncluster, v};
                for (int k = g; k < h; k++)
                    pick[mem[k]].value = v;
            }
            g = h;
        }
        (*ncluster)++;
        b = e;
    }
}

void ml_asm_result_free(struct ml_asm_result *r)
{
    free(r->pick);
    memset(r, 0, sizeof(*r));
}

int ml_asm_select(const struct ml_asm_insn *insn, int n, const struct ml_asm_params *p,
                  struct ml_asm_result *r)
{
    struct ml_asm_pick *pick;
    struct item *items = NULL;
    int *cls_first = NULL, *mem = NULL;
    int m, nitem = 0, left, anchor = -1;
    double ma = 0, aia = 0;

    memset(r, 0, sizeof(*r));
    m = ml_asm_bids(insn, n, &pick);
    if (m < 0)
        return m;
    r->m = m;
    r->pick = pick;
    if (!m)
        return 0;
    if (p->mode == ML_ASM_NS) {
        for (int i = 0; i < m; i++) {
            pick[i].selected = 1;
            pick[i].why = ML_ASM_WHY_ALL;
            pick[i].level = 1;
            pick[i].rep = i;
            pick[i].weight = 1;
            pick[i].cls = pick[i].cluster = i;
        }
        r->budget = r->nsel = r->nclass = r->ncluster = m;
        r->ma = r->aia = 1;
        return 0;
    }
    items = malloc(m * sizeof(*items));
    cls_first = malloc(m * sizeof(int));
    mem = malloc(m * sizeof(int));
    if (!items || !cls_first || !mem) {
        free(items);
        free(cls_first);
        free(mem);
        ml_asm_result_free(r);
        return -ENOMEM;
    }
    r->budget = (int)ceil(p->omega * m - 1e-9);
    if (r->budget < 1)
        r->budget = 1;
    if (r->budget > m)
        r->budget = m;
    left = r->budget;
    /*
     * Step A: equivalence classes. Accesses whose count is known only at run
     * time (rep string operations, gathers, scatters) are forced, outside the
     * budget, and stand only for themselves.
     */
    for (int i = 0; i < m; i++) {
        int c = 0;

        pick[i].rep = -1;
        for (; c < r->nclass; c++)
            if (ml_asm_same_class(&pick[cls_first[c]].bid, &pick[i].bid))
                break;
        if (c == r->nclass)
            cls_first[r->nclass++] = i;
        pick[i].cls = c;
        if (insn[pick[i].insn].acc[pick[i].acc].count != ML_ASM_ONCE) {
            pick[i].selected = 1;
            pick[i].why = ML_ASM_WHY_FORCED;
            pick[i].cluster = -1;
        }
    }
    /* Step A (cont.) and B: clusters at granularity C, their values and refinements. */
    for (int c = 0; c < r->nclass; c++) {
        int k = 0;

        for (int i = 0; i < m; i++)
            if (pick[i].cls == c && pick[i].why != ML_ASM_WHY_FORCED)
                mem[k++] = i;
        if (!k)
            continue;
        qsort_r(mem, k, sizeof(int), cmp_by_d, pick);
        clusters_of(pick, mem, k, p, &r->ncluster, items, &nitem);
    }
    for (int i = 0; i < m; i++)
        if (pick[i].why == ML_ASM_WHY_FORCED)
            pick[i].cluster = r->ncluster++;
    /*
     * Step C: a 0/1 knapsack of capacity W over the items with equal weights
     * (one instrumented access each): taking the most valuable items is
     * optimal. A refinement is worth less than its own cluster, so it never
     * comes before it.
     */
    qsort(items, nitem, sizeof(*items), cmp_item);
    for (int k = 0; k < nitem && left > 0; k++, left--) {
        pick[items[k].pick].selected = 1;
        pick[items[k].pick].why = items[k].refine ? ML_ASM_WHY_REFINE : ML_ASM_WHY_CLUSTER;
        pick[items[k].pick].value = items[k].value;
    }
    /*
     * Representatives: the nearest selected access of the class, else the
     * block's first selected access of fixed count (the anchor).
     */
    for (int i = 0; i < m; i++) {
        if (pick[i].selected) {
            pick[i].rep = i;
            pick[i].weight = 1;
            pick[i].level = 1;
            r->nsel++;
            if (anchor < 0 && pick[i].why != ML_ASM_WHY_FORCED)
                anchor = i;
        } else {
            pick[i].why = ML_ASM_WHY_NO;
        }
    }
    for (int i = 0; i < m; i++) {
        uint64_t best = UINT64_MAX;

        if (pick[i].selected)
            continue;
        for (int j = 0; j < m; j++)
            if (pick[j].selected && pick[j].cls == pick[i].cls &&
                ml_asm_same_class(&pick[i].bid, &pick[j].bid) &&
                absdiff(pick[i].bid.d, pick[j].bid.d) < best) {
                best = absdiff(pick[i].bid.d, pick[j].bid.d);
                pick[i].rep = j;
            }
        if (pick[i].rep < 0) {
            pick[i].rep = anchor;
            pick[i].level = 3;
        } else {
            pick[i].level =
                (uint8_t)ml_asm_distance(&pick[i].bid, &pick[pick[i].rep].bid, p->chunk);
        }
        pick[pick[i].rep].weight++;
    }
    for (int i = 0; i < m; i++) {
        const struct ml_asm_pick *q = &pick[i];

        if (q->selected) {
            ma += 1, aia += 1;
        } else if (q->level < 3) {
            ma += 1 - (double)absdiff(q->bid.d, pick[q->rep].bid.d) / p->chunk;
            aia += 1;
        }
    }
    r->ma = ma / m;
    r->aia = aia / m;
    free(items);
    free(cls_first);
    free(mem);
    return 0;
}
