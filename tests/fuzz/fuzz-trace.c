/* libFuzzer target: the trace reader (index, tables, every data chunk's decoder). */
#include <stdint.h>
#include <stdlib.h>

#include "format/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ml_trace *t;
    struct ml_trace_dec *d;
    char err[256];

    if (ml_trace_open_mem(data, size, &t, err, sizeof(err)))
        return 0;
    d = ml_trace_dec_new(t);
    for (size_t i = 0; d && i < ml_trace_nchunks(t); i++) {
        const struct ml_trace_rec *r;
        size_t n;
        if (ml_trace_decode(d, i, &r, &n, err, sizeof(err)))
            continue;
        for (size_t k = 0; k < n; k++) /* every record names a defined site or none */
            if (r[k].site != ML_EV_NOID && !ml_trace_site(t, r[k].site))
                abort();
    }
    ml_trace_dec_free(d);
    ml_trace_close(t);
    return 0;
}
