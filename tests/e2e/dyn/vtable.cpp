// Virtual calls: the vtable's targets count for the region open at run time (region-dyn.sh).
#include <memlens.h>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

struct Codec {
    virtual ~Codec() = default;
    virtual void run(std::vector<long> &v) = 0;
};
// 16 bytes per element read and written through the vector's heap storage.
struct Inc : Codec {
    __attribute__((noinline)) void run(std::vector<long> &v) override
    {
        for (long &x : v)
            x += 3;
    }
};
struct Neg : Codec {
    __attribute__((noinline)) void run(std::vector<long> &v) override
    {
        for (long &x : v)
            x = -x;
    }
};

__attribute__((noinline)) Codec *make(int k)
{
    if (k)
        return new Neg;
    return new Inc;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? std::atol(argv[1]) : 10000, k = argc > 2 ? std::atol(argv[2]) : 3;
    std::vector<long> v(n, 1);
    std::unique_ptr<Codec> c[2] = {std::unique_ptr<Codec>(make(0)),
                                   std::unique_ptr<Codec>(make(1))};
    MEMLENS_ROI_BEGIN("virtual");
    for (long r = 0; r < k; r++)
        c[r & 1]->run(v);
    MEMLENS_ROI_END("virtual");
    std::printf("%ld\n", v[n - 1]);
    std::fprintf(stderr, "%p\n", (void *)v.data());
    return 0;
}
