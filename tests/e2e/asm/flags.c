/* Flags live across memory instructions: carry chains (adc/sbb with memory operands), cmov loads. */
#include <stdio.h>
#include <stdlib.h>

#define N 64

/* a += b over N-limb numbers: the carry flows through loads and stores. */
__attribute__((noinline)) unsigned long long add_limbs(unsigned long long *a,
                                                       const unsigned long long *b, int n)
{
    unsigned long long carry = 0;

    for (int i = 0; i < n; i++)
        a[i] = __builtin_addcll(a[i], b[i], carry, &carry);
    return carry;
}

__attribute__((noinline)) unsigned long long sub_limbs(unsigned long long *a,
                                                       const unsigned long long *b, int n)
{
    unsigned long long borrow = 0;

    for (int i = 0; i < n; i++)
        a[i] = __builtin_subcll(a[i], b[i], borrow, &borrow);
    return borrow;
}

/* A compare whose flags feed a conditional load. */
__attribute__((noinline)) long pick(const long *x, const long *y, int n)
{
    long s = 0;

    for (int i = 0; i < n; i++)
        s += x[i] < y[i] ? x[i] : y[n - 1 - i];
    return s;
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 1000;
    unsigned long long a[N], b[N], c = 0;
    long x[N], y[N];

    for (int i = 0; i < N; i++) {
        a[i] = ~0ull - (unsigned long long)i * 7919;
        b[i] = (unsigned long long)i * 104729 + 1;
        x[i] = (i * 37) % 101 - 50;
        y[i] = (i * 53) % 97 - 48;
    }
    for (int r = 0; r < reps; r++) {
        c += add_limbs(a, b, N);
        c += sub_limbs(b, a, N);
        c += (unsigned long long)pick(x, y, N);
    }
    printf("%llu %llu %llu\n", c, a[N - 1], b[0]);
    return 0;
}
