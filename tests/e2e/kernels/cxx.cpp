// C++ in regions: a region inside a method of a class template, function templates called from
// a region for two element types, and an exception thrown and caught inside a region.
#include "memlens.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

template <typename T> class Series
{
  public:
    Series(const T *data, long n) : data_(data), n_(n)
    {
    }

    // Fields go to locals first: the region reads only the elements.
    T total() const
    {
        const T *d = data_;
        long n = n_;
        T s = 0;

        MEMLENS_ROI_BEGIN("method");
        for (long i = 0; i < n; i++)
            s += d[i];
        MEMLENS_ROI_END("method");
        return s;
    }

  private:
    const T *data_;
    long n_;
};

template <typename T> static void axpy(T a, const T *x, T *y, long n)
{
    for (long i = 0; i < n; i++)
        y[i] += a * x[i];
}

// Throws the position of the first negative element.
template <typename T> static void scan(const T *x, long n)
{
    for (long i = 0; i < n; i++)
        if (x[i] < 0)
            throw i;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? std::atol(argv[1]) : 1000;
    long pos = argc > 2 ? std::atol(argv[2]) : 10;
    if (n < 1 || pos < 0 || pos >= n)
        return 2;
    std::vector<double> xd(n), yd(n);
    std::vector<float> xf(n), yf(n);
    std::vector<long> xl(n), yl(n);
    for (long i = 0; i < n; i++) {
        xd[i] = (double)(i % 11);
        yd[i] = 1;
        xf[i] = (float)(i % 5);
        yf[i] = 2;
        xl[i] = i % 9;
        yl[i] = 3;
    }
    xd[pos] = -1;
    double *pxd = xd.data(), *pyd = yd.data();
    float *pxf = xf.data(), *pyf = yf.data();
    long *pxl = xl.data(), *pyl = yl.data();
    double chk = 0;

    Series<double> s(pxd, n);
    chk += s.total();

    MEMLENS_ROI_BEGIN("templates");
    axpy(2.5f, pxf, pyf, n);
    axpy(3L, pxl, pyl, n);
    MEMLENS_ROI_END("templates");

    MEMLENS_ROI_BEGIN("exception");
    try {
        scan(pxd, n);
    } catch (long where) {
        chk += (double)where;
    }
    MEMLENS_ROI_END("exception");

    for (long i = 0; i < n; i++)
        chk += (double)pyf[i] + (double)pyl[i] + pyd[i];
    std::printf("%.17g\n", chk);
    return 0;
}
