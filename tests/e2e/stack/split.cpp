// Objects on a caller's stack reached through references, this, lambdas, templates and OpenMP
// shared variables, next to heap data (tests/e2e/region-stack.sh): the default report's heap and
// stack bytes must match exact mode (classified by address) within 1%.
#include <memlens.h>
#include <cstdio>
#include <cstdlib>
#include <vector>

struct Stats {
    double sum = 0;
    long count = 0;
    double hist[8] = {0};

    // this is on the caller's stack
    __attribute__((noinline)) void add(double v)
    {
        sum += v;
        count++;
        hist[(long)v & 7] += 1;
    }
};

template <class T> __attribute__((noinline)) void scale(T &acc, const std::vector<T> &v, T f)
{
    for (const T &x : v)
        acc += x * f; // acc: a reference to the caller's stack
}

__attribute__((noinline)) void relax(const std::vector<int> &adj, std::vector<double> &dist,
                                     double &best, long &visits)
{
    for (size_t i = 0; i < adj.size(); i++) {
        double d = dist[adj[i]] + 1.0;
        if (d < best) // best and visits: references to the caller's stack
            best = d;
        visits++;
        dist[i % dist.size()] = d * 0.5;
    }
}

template <class F> __attribute__((noinline)) void each(const std::vector<double> &v, F f)
{
    for (double x : v)
        f(x);
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? std::atol(argv[1]) : 20000;
    std::vector<double> v(n), dist(n);
    std::vector<int> adj(n);
    for (long i = 0; i < n; i++) {
        v[i] = (double)(i % 17);
        dist[i] = (double)(i % 5);
        adj[i] = (int)((i * 7919) % n);
    }

    MEMLENS_ROI_BEGIN("members");
    Stats st;
    for (long i = 0; i < n; i++)
        st.add(v[i]);
    MEMLENS_ROI_END("members");

    MEMLENS_ROI_BEGIN("template");
    double acc = 0;
    scale(acc, v, 0.5);
    MEMLENS_ROI_END("template");

    MEMLENS_ROI_BEGIN("relax");
    double best = 1e300;
    long visits = 0;
    relax(adj, dist, best, visits);
    MEMLENS_ROI_END("relax");

    MEMLENS_ROI_BEGIN("lambda");
    double lsum = 0;
    long big = 0;
    each(v, [&](double x) {
        lsum += x;
        big += x > 8;
    });
    MEMLENS_ROI_END("lambda");

    MEMLENS_ROI_BEGIN("omp");
    double total = 0;
    long hits = 0;
#pragma omp parallel for reduction(+ : total) shared(v, hits)
    for (long i = 0; i < n; i++) {
        total += v[i];
        if (v[i] > 15) {
#pragma omp atomic
            hits++;
        }
    }
    MEMLENS_ROI_END("omp");

    std::printf("%g %ld %g %g %g %ld %g %ld %g %ld\n", st.sum, st.count, st.hist[3], acc, best,
                visits, lsum, big, total, hits);
    return 0;
}
