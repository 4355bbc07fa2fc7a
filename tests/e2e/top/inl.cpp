// tests/e2e/top-inline.sh: a method whose region calls a template kernel (inl-kern.hpp) for
// double and float, which the compiler inlines.
//   inl N REPS: per rep, axpy<double> (16N read, 8N written), axpy<float> (8N, 4N), and the
//   method's own sum (8N read).
#include "memlens.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "inl-kern.hpp"

struct Solver {
    std::vector<double> x, y;
    std::vector<float> fx, fy;
    explicit Solver(long n) : x(n, 1.0), y(n, 2.0), fx(n, 1.0f), fy(n, 2.0f)
    {
    }
    double run(long reps)
    {
        long n = (long)x.size();
        double *px = x.data(), *py = y.data(), s = 0;
        float *qx = fx.data(), *qy = fy.data();
        for (long r = 0; r < reps; r++) {
            MEMLENS_ROI_BEGIN("solve");
            axpy<double>(py, px, n, 0.5);
            axpy<float>(qy, qx, n, 0.5f);
            for (long i = 0; i < n; i++)
                s += px[i];
            MEMLENS_ROI_END("solve");
        }
        return s + y[n - 1] + fy[n - 1];
    }
};

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    Solver sv(std::atol(argv[1]));
    std::printf("%g\n", sv.run(std::atol(argv[2])));
    return 0;
}
