// C++ loop-body regions (a method using this, a lambda through a template, a range-for over a
// vector): built with and without markers, equal loads, stores and bytes (region-markers.sh).
#ifdef OPAQUE_MARKERS
#undef __MEMLENS_CC__
#endif
#ifdef UNMARKED
#define MEMLENS_ROI_BEGIN(n) ((void)0)
#define MEMLENS_ROI_END(n)   ((void)0)
#else
#include <memlens.h>
#endif
#include <cstdio>
#include <cstdlib>
#include <vector>

struct Grid {
    std::vector<double> v;
    double total = 0;
    long visits = 0;

    __attribute__((noinline)) void sweep(const std::vector<int> &order)
    {
        for (int i : order) {
            MEMLENS_ROI_BEGIN("cell");
            total += v[i];
            visits++;
            MEMLENS_ROI_END("cell");
        }
    }
};

template <class F> __attribute__((noinline)) void each(const int *b, const int *e, F f)
{
    for (; b != e; ++b) {
        MEMLENS_ROI_BEGIN("each");
        f(*b);
        MEMLENS_ROI_END("each");
    }
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? std::atol(argv[1]) : 10000;
    Grid g;
    std::vector<int> order(n);
    unsigned x = 7;
    g.v.resize(n);
    for (long i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        order[i] = (int)(x % (unsigned)n);
        g.v[i] = (double)(i % 11);
    }
    g.sweep(order);
    double s = 0;
    long odd = 0;
    each(order.data(), order.data() + n, [&](int i) {
        s += g.v[i];
        odd += i & 1;
    });
    std::printf("%g %ld %g %ld\n", g.total, g.visits, s, odd);
    return 0;
}
