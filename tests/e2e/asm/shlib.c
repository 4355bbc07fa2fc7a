/* A -fPIC shared library with its own thread-local state (general-dynamic TLS) and globals. */
__thread long lib_tls;
__thread long lib_calls;
static __thread int table[64];
const int lib_weights[64] = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3,
                             2, 3, 8, 4, 6, 2, 6, 4, 3, 3, 8, 3, 2, 7, 9, 5};

long lib_tls_bump(long by)
{
    lib_tls += by;
    lib_calls++;
    table[lib_calls & 63] += (int)by * lib_weights[lib_calls & 63];
    return lib_tls + table[(lib_calls * 7) & 63];
}
