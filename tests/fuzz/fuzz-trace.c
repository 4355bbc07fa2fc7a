/* libFuzzer target: the trace reader (index, tables, every data chunk's decoder), then the
 * analysis driver with every analysis but export (every format) on what it accepts. */
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
    static const char *const names[] = {"summary", "dump",     "membus",    "reuse",
                                        "streams", "hotpages", "bandwidth", "io"};
    const struct ml_analysis *an[8];
    struct ml_an_opts o = {.fmt = ML_AN_TABLE, .jobs = 2, .line = 64, .top = 3, .lru_pages = 16};
    struct ml_an_run *run;
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
    o.l1 = (struct ml_an_level){4096, 4};
    o.l2 = (struct ml_an_level){16384, 4};
    o.llc = (struct ml_an_level){65536, 8};
    o.by = (enum ml_an_by)(size % 6);
    o.sample = size % 2 ? 0.1 : 0;
    for (int i = 0; i < 8; i++)
        an[i] = ml_analysis_find(names[i]);
    run = ml_an_new(&o, an, 8, err, sizeof(err));
    if (run && !ml_an_read(run, paths, 1, err, sizeof(err)))
        for (int f = ML_AN_TABLE; f <= ML_AN_JSON; f++)
            ml_an_report(run, sink, (enum ml_an_format)f);
    ml_an_free(run);
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
