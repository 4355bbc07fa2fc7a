/* Loads with known values for tests/e2e/profile-value.sh (lines are named by tags). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static int n, *konst, *stride3, *set3, *square;
static unsigned char *bytes;
static short *shorts;
static long long *down7;
static double *halves;
static float *alt;
static int *target, **ptrs;

static __attribute__((noinline)) long k_const(const int *p)
{
    long s = 0;
    for (int i = 0; i < n; i++)
        s += p[i]; /* CONST */
    return s;
}

static __attribute__((noinline)) long k_stride(const int *p)
{
    long s = 0;
    for (int i = 0; i < n; i++)
        s += p[i]; /* STRIDE */
    return s;
}

static __attribute__((noinline)) long k_set(const int *p)
{
    long s = 0;
    for (int i = 0; i < n; i++)
        s += p[i]; /* SET */
    return s;
}

static __attribute__((noinline)) long k_varied(const int *p)
{
    long s = 0;
    for (int i = 0; i < n; i++)
        s += p[i]; /* VARIED */
    return s;
}

static __attribute__((noinline)) long k_u8(const unsigned char *p)
{
    long s = 0;
    for (int i = 0; i < n; i++)
        s += p[i]; /* U8 */
    return s;
}

static __attribute__((noinline)) long k_i16(const short *p)
{
    long s = 0;
    for (int i = 0; i < n; i++)
        s += p[i]; /* I16 */
    return s;
}

static __attribute__((noinline)) long long k_i64(const long long *p)
{
    long long s = 0;
    for (int i = 0; i < n; i++)
        s += p[i]; /* I64 */
    return s;
}

static __attribute__((noinline)) double k_double(const double *p)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += p[i]; /* DOUBLE */
    return s;
}

static __attribute__((noinline)) double k_float(const float *p)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += p[i]; /* FLOAT */
    return s;
}

static __attribute__((noinline)) long k_ptr(int *const *p)
{
    long s = 0;
    for (int i = 0; i < n; i++)
        s += *p[i]; /* PTR */
    return s;
}

static void *run(void *out)
{
    double *r = out;

    r[0] = (double)k_const(konst);
    r[1] = (double)k_stride(stride3);
    r[2] = (double)k_set(set3);
    r[3] = (double)k_varied(square);
    r[4] = (double)k_u8(bytes);
    r[5] = (double)k_i16(shorts);
    r[6] = (double)k_i64(down7);
    r[7] = k_double(halves);
    r[8] = k_float(alt);
    r[9] = (double)k_ptr(ptrs);
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = argc > 2 ? atoi(argv[2]) : 0, k = argc > 3 ? atoi(argv[3]) : 7;
    static const int three[3] = {10, 20, 40};
    static const float two[2] = {1.5f, -2.25f};
    double r[3][10];
    pthread_t t[2];

    n = argc > 1 ? atoi(argv[1]) : 1000;
    if (n < 1 || threads < 0 || threads > 2)
        return 2;
    konst = malloc(n * sizeof(int));
    stride3 = malloc(n * sizeof(int));
    set3 = malloc(n * sizeof(int));
    square = malloc(n * sizeof(int));
    bytes = malloc(n);
    shorts = malloc(n * sizeof(short));
    down7 = malloc(n * sizeof(long long));
    halves = malloc(n * sizeof(double));
    alt = malloc(n * sizeof(float));
    ptrs = malloc(n * sizeof(int *));
    target = malloc(n * sizeof(int));
    for (int i = 0; i < n; i++) {
        konst[i] = k;
        stride3[i] = 5 + 3 * i;
        set3[i] = three[i % 3];
        square[i] = i * i;
        bytes[i] = (unsigned char)i; /* wraps at 256: still a stride of 1 modulo 2^8 */
        shorts[i] = -2;
        down7[i] = 1000000000000LL - 7LL * i;
        halves[i] = 0.5 * i;
        alt[i] = two[i % 2];
        target[i] = i & 1;
        ptrs[i] = &target[i];
    }
    run(r[0]);
    for (int i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, run, r[i + 1]);
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i <= threads; i++)
        for (int j = 0; j < 10; j++)
            printf("%.1f%c", r[i][j], j == 9 ? '\n' : ' ');
    return 0;
}
