// C++ kernel for tests/e2e/profile-dep.sh: a loop-carried dependence through std::vector.
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char **argv)
{
    int n = argc > 1 ? std::atoi(argv[1]) : 1000, k = argc > 2 ? std::atoi(argv[2]) : 3;
    std::vector<long> v(n);
    for (int i = k; i < n; i++) // CARRIEDLOOP
        v[i] = v[i - k] + 1;    // CARRIED
    std::printf("%ld\n", v[n - 1]);
    return 0;
}
