// C++ exceptions thrown through instrumented frames with destructors to run.
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

static long destroyed;

struct guard {
    std::vector<int> v;
    explicit guard(int n) : v(n, n) {}
    ~guard() { destroyed += (long)v.size(); }
};

__attribute__((noinline)) static int level(int n, int fail)
{
    guard g(n + 1);

    if (n == fail)
        throw std::runtime_error("fail at " + std::to_string(n));
    if (n == 0)
        return g.v[0];
    return level(n - 1, fail) + g.v.back();
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? std::atoi(argv[1]) : 200;
    long ok = 0, caught = 0;

    for (int r = 0; r < reps; r++) {
        try {
            ok += level(8, r % 11);
        } catch (const std::exception &e) {
            caught += (long)std::string(e.what()).size();
        }
    }
    std::printf("%ld %ld %ld\n", ok, caught, destroyed);
    return 0;
}
