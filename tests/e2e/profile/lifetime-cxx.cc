// C++ heap kernels for tests/e2e/profile-lifetime.sh: new/delete, new[]/delete[], aligned new.
#include <cstdio>
#include <cstdlib>

struct Node {
    long v;
    Node *next;
};

struct alignas(64) Wide {
    char c[64];
};

static long sum;
static void *volatile sink;

// A local with a destructor: the calls below are invokes (their value exists on the normal edge).
struct Guard {
    long n;
    ~Guard() { sum += n; }
};

__attribute__((noinline)) static void k_invoke(int n)
{
    Guard g{n};
    for (int i = 0; i < n; i++) {
        long *p = new long[4]; // INVOKE
        sink = p;
        p[0] = i;
        sum += p[0];
        delete[] p;
    }
}

__attribute__((noinline)) static void k_new(int n)
{
    for (int i = 0; i < n; i++) {
        Node *x = new Node{i, nullptr}; // NEW
        sink = x;
        sum += x->v;
        delete x;
    }
}

__attribute__((noinline)) static int *k_array(int n)
{
    int *a = new int[n]; // NEW_ARRAY
    for (int i = 0; i < n; i++)
        a[i] = i;
    return a;
}

__attribute__((noinline)) static void k_wide(int n)
{
    Wide **w = new Wide *[n]; // WIDE_ARRAY
    for (int i = 0; i < n; i++) {
        w[i] = new Wide; // WIDE
        w[i]->c[0] = (char)i;
    }
    for (int i = 0; i < n; i++) {
        sum += w[i]->c[0];
        delete w[i];
    }
    delete[] w;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? std::atoi(argv[1]) : 100;
    k_new(n);
    int *a = k_array(n);
    for (int i = 0; i < n; i++)
        sum += a[i];
    delete[] a;
    k_wide(n / 4);
    k_invoke(n);
    std::printf("sum %ld\n", sum);
    return 0;
}
