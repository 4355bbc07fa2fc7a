// Template kernels of tests/e2e/top-inline.sh (C++): inlined into Solver::run unless built with
// -DML_NOINLINE.
#ifdef ML_NOINLINE
#define KERNEL __attribute__((noinline))
#else
#define KERNEL inline
#endif

// y += a x over n elements: 2n sizeof(T) read, n sizeof(T) written.
template <typename T> KERNEL void axpy(T *y, const T *x, long n, T a)
{
    for (long i = 0; i < n; i++)
        y[i] += a * x[i];
}
