// Exact-mode check: templates, exceptions and a region inside a method.
#include <cstdio>
#include <vector>
#include <stdexcept>
#include "memlens.h"
template <typename T> T dot(const std::vector<T> &a, const std::vector<T> &b) {
    T s = 0; for (size_t i = 0; i < a.size(); i++) s += a[i] * b[i]; return s;
}
struct Solver {
    std::vector<double> x, y;
    Solver(size_t n) : x(n, 1.0), y(n, 2.0) {}
    double run(int k) {
        MEMLENS_ROI_BEGIN("solve");
        double r = 0;
        for (int i = 0; i < k; i++) {
            r += dot(x, y);
            if (i == 3) { try { if (r > 0) throw std::runtime_error("x"); } catch (const std::exception &e) { r += 1; } }
            if (r > 1e12) return r;
        }
        MEMLENS_ROI_END("solve");
        return r;
    }
};
// The solver lives on the heap: a `this` pointing into main's stack would count as heap
// statically (a pointer argument) but as stack by address.
int main() {
    Solver *s = new Solver(1000);
    std::printf("%g\n", s->run(10));
    delete s;
    return 0;
}
