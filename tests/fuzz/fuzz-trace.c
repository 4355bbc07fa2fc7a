/* libFuzzer target: the trace reader (index, tables, every data chunk's decoder), then the
 * analysis driver with summary (every format) and dump on what it accepts. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "analyze/analyze.h"
#include "format/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void analyze(const uint8_t *data, size_t size)
{
    static FILE *sink;
    const struct ml_analysis *an[2] = {&ml_an_summary, &ml_an_dump};
    struct ml_an_opts o = {.fmt = ML_AN_TABLE};
    void *st[2];
    char path[64], err[256];
    const char *paths[1] = {path};
    int fd = memfd_create("fuzz-trace", 0);

    if (!sink)
        sink = fopen("/dev/null", "w");
    if (fd < 0)
        return;
    if (write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return;
    }
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    o.out = sink;
    for (int i = 0; i < 2; i++)
        st[i] = an[i]->start(&o);
    if (!ml_an_run(paths, 1, an, st, 2, &o, err, sizeof(err)))
        for (int f = ML_AN_TABLE; f <= ML_AN_JSON; f++)
            an[0]->report(st[0], sink, (enum ml_an_format)f);
    for (int i = 0; i < 2; i++)
        an[i]->free(st[i]);
    close(fd);
}

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
    analyze(data, size);
    return 0;
}
