/* Closed-form kernels over page-aligned arrays, for counts against Valgrind lackey (asm-lackey). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *page_alloc(size_t n)
{
    void *p = NULL;

    if (posix_memalign(&p, 4096, n ? n : 1))
        exit(1);
    memset(p, 0, n);
    return p;
}

__attribute__((noinline)) double triad(double *a, const double *b, const double *c, long n)
{
    for (long i = 0; i < n; i++)
        a[i] = b[i] + 3.0 * c[i];
    return a[n / 2];
}

__attribute__((noinline)) long sum_int(const int *a, long n)
{
    long s = 0;

    for (long i = 0; i < n; i++)
        s += a[i];
    return s;
}

__attribute__((noinline)) void copy_char(char *d, const char *s, long n)
{
    for (long i = 0; i < n; i++)
        d[i] = s[i];
}

__attribute__((noinline)) long strided(const long *a, long n, long stride)
{
    long s = 0;

    for (long i = 0; i < n; i += stride)
        s += a[i];
    return s;
}

__attribute__((noinline)) long gather(const int *v, const int *idx, long n)
{
    long s = 0;

    for (long i = 0; i < n; i++)
        s += v[idx[i]];
    return s;
}

__attribute__((noinline)) void histogram(unsigned *h, const unsigned char *x, long n)
{
    for (long i = 0; i < n; i++)
        h[x[i]]++;
}

__attribute__((noinline)) long fib(int n)
{
    return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

struct node {
    struct node *next;
    long v;
};

__attribute__((noinline)) long chase(const struct node *p)
{
    long s = 0;

    for (; p; p = p->next)
        s += p->v;
    return s;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 10000;
    double *a = page_alloc(n * sizeof(double)), *b = page_alloc(n * sizeof(double)),
           *c = page_alloc(n * sizeof(double));
    int *v = page_alloc(n * sizeof(int)), *idx = page_alloc(n * sizeof(int));
    char *d = page_alloc(n), *s = page_alloc(n);
    unsigned *h = page_alloc(256 * sizeof(unsigned));
    long *l = page_alloc(n * sizeof(long));
    struct node *nodes = page_alloc(n * sizeof(struct node));
    double r = 0;
    long t = 0;

    for (long i = 0; i < n; i++) {
        b[i] = (double)i;
        c[i] = (double)(n - i);
        v[i] = (int)(i * 7);
        idx[i] = (int)((i * 7919) % n);
        s[i] = (char)i;
        l[i] = i;
        nodes[i].next = i + 1 < n ? &nodes[(i * 37 + 1) % n > i ? (i * 37 + 1) % n : i + 1] : NULL;
        nodes[i].v = i;
    }
    for (int rep = 0; rep < 3; rep++) {
        r += triad(a, b, c, n);
        t += sum_int(v, n);
        copy_char(d, s, n);
        t += strided(l, n, 1 + rep * 5);
        t += gather(v, idx, n);
        histogram(h, (const unsigned char *)s, n);
        t += chase(nodes);
    }
    t += fib(15);
    printf("%.1f %ld %d %u\n", r, t, d[n - 1], h[7]);
    return 0;
}
