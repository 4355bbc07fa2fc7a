/* Loop-body regions whose unmarked loops stay scalar (indirect accesses, floating-point
   reductions, pointer chasing): built with and without markers, their loads, stores and bytes
   must be equal (tests/e2e/region-markers.sh). OPAQUE_MARKERS builds the markers as opaque
   calls, as before memlens cc made them annotations. */
#ifdef OPAQUE_MARKERS
#undef __MEMLENS_CC__
#endif
#ifdef UNMARKED
#define MEMLENS_ROI_BEGIN(n) ((void)0)
#define MEMLENS_ROI_END(n)   ((void)0)
#else
#include <memlens.h>
#endif
#include <stdio.h>
#include <stdlib.h>

struct acc {
    double *v;
    long n;
    double sum;
};

struct node {
    struct node *next;
    long val;
};

/* A loop-invariant pointer (scale) and an indirect read: the marked loop must not reload it. */
__attribute__((noinline)) double gather(const double *a, const int *idx, long n,
                                        const double *scale)
{
    double s = 0;
    for (long i = 0; i < n; i++) {
        MEMLENS_ROI_BEGIN("gather");
        s += a[idx[i]] * *scale;
        MEMLENS_ROI_END("gather");
    }
    return s;
}

/* A reduction into memory (acc->sum) that the optimiser keeps in a register. */
__attribute__((noinline)) void accumulate(struct acc *acc)
{
    for (long i = 0; i < acc->n; i++) {
        MEMLENS_ROI_BEGIN("accumulate");
        acc->sum += acc->v[i];
        MEMLENS_ROI_END("accumulate");
    }
}

/* One region per hop of a pointer chase, with a counter behind a pointer argument. */
__attribute__((noinline)) long chase(const struct node *p, long *hops)
{
    long s = 0;
    while (p) {
        MEMLENS_ROI_BEGIN("hop");
        s += p->val;
        ++*hops;
        p = p->next;
        MEMLENS_ROI_END("hop");
    }
    return s;
}

/* Breadth-first frontier expansion: one region per frontier vertex, output count behind a pointer.
 */
__attribute__((noinline)) void expand(const long *row, const int *col, const int *front, long nf,
                                      int *dist, int *next, long *nnext, int d)
{
    for (long f = 0; f < nf; f++) {
        MEMLENS_ROI_BEGIN("vertex");
        int u = front[f];
        for (long e = row[u]; e < row[u + 1]; e++) {
            int v = col[e];
            if (dist[v] < 0) {
                dist[v] = d + 1;
                next[(*nnext)++] = v;
            }
        }
        MEMLENS_ROI_END("vertex");
    }
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 10000, deg = 4;
    double *a = malloc(n * sizeof(*a)), scale = 1.5;
    int *idx = malloc(n * sizeof(*idx)), *col = malloc(n * deg * sizeof(*col));
    int *dist = malloc(n * sizeof(*dist)), *front = malloc(n * sizeof(*front));
    int *next = malloc(n * sizeof(*next));
    long *row = malloc((n + 1) * sizeof(*row)), hops = 0, nf = 1, nn;
    struct node *nodes = malloc(n * sizeof(*nodes));
    struct acc acc = {a, n, 0};
    unsigned x = 12345;

    for (long i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        a[i] = (double)(i % 13);
        idx[i] = (int)(x % (unsigned)n);
        nodes[i].val = i;
        nodes[i].next = i + 1 < n ? &nodes[i + 1] : NULL;
        dist[i] = -1;
        row[i] = i * deg;
        for (long k = 0; k < deg; k++)
            col[i * deg + k] = (int)((x >> 4) % (unsigned)n + k) % (int)n;
    }
    row[n] = n * deg;
    printf("gather %g\n", gather(a, idx, n, &scale));
    accumulate(&acc);
    printf("accumulate %g\n", acc.sum);
    printf("chase %ld %ld\n", chase(nodes, &hops), hops);
    front[0] = 0;
    dist[0] = 0;
    for (int d = 0; nf; d++) {
        nn = 0;
        expand(row, col, front, nf, dist, next, &nn, d);
        for (long i = 0; i < nn; i++)
            front[i] = next[i];
        nf = nn;
    }
    long reached = 0;
    for (long i = 0; i < n; i++)
        reached += dist[i] >= 0;
    printf("reached %ld\n", reached);
    return 0;
}
