/* A -fPIC shared library with its own thread-local state (general-dynamic TLS) and globals. */
__thread long lib_tls;
long lib_calls;
static int table[64];

long lib_tls_bump(long by)
{
    lib_tls += by;
    lib_calls++;
    table[lib_calls & 63] += (int)by;
    return lib_tls + table[(lib_calls * 7) & 63];
}
