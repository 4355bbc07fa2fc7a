/* Points-to ground truth for tests/e2e/profile-pointsto.sh: two arrays from two allocation sites
 * reached through a function-pointer argument, a list, null, a global and a local array. */
#include <stdio.h>
#include <stdlib.h>

struct node {
    long v;
    struct node *next;
};

static long total;
static long global_arr[16]; /* GLOBAL */

__attribute__((noinline)) static long sum(const long *a, int n) /* SUM */
{
    long s = 0;
    for (int i = 0; i < n; i++)
        s += a[i];
    return s;
}

__attribute__((noinline)) static long apply(long (*f)(const long *, int), const long *p, /* APPLY */
                                            int n)
{
    return f(p, n);
}

/* A local array passed down to a callee: a stack object. */
__attribute__((noinline)) static long with_local(long (*f)(const long *, int))
{
    long local[8]; /* LOCAL */
    for (int i = 0; i < 8; i++)
        local[i] = i * i;
    return apply(f, local, 8);
}

__attribute__((noinline)) static struct node *push(struct node *head, long v) /* PUSH */
{
    struct node *x = malloc(sizeof(*x)); /* NODE */
    x->v = v;
    x->next = head;
    return x;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 100;
    long *a = malloc((size_t)n * sizeof(long)); /* ARRAY_A */
    long *b = calloc((size_t)n, sizeof(long));  /* ARRAY_B */
    long (*volatile f)(const long *, int) = sum;
    struct node *head = NULL;

    for (int i = 0; i < n; i++) {
        a[i] = i;
        b[i] = 2 * i;
    }
    total += apply(f, a, n);
    total += apply(f, b, n);
    total += apply(f, b, n);
    total += apply(f, global_arr, 16);
    total += apply(f, NULL, 0);
    total += with_local(f);
    for (int i = 0; i < 10; i++)
        head = push(head, i);
    for (struct node *x = head; x;) {
        struct node *next = x->next; /* NEXT */
        total += x->v;
        free(x);
        x = next;
    }
    free(a);
    free(b);
    printf("total %ld\n", total);
    return 0;
}
