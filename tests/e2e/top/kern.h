/* A kernel in a header: inlined into its caller at -O1 and above. */
static inline double kern(const double *a, long n)
{
    double s = 0;
    for (long i = 0; i < n; i++)
        s += a[i] * a[i];
    return s;
}
