/* libFuzzer target: the live-view layout check (src/report/live.c), then the decoding of a unit
 * and a region state copied as the reader copies them, in buffers of exactly the published
 * record sizes (so ASan sees any field read past its record). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "report/live.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ml_live_header h;
    struct ml_prof_unit u;
    unsigned char *unit, *rs;
    uint64_t entries, ticks, start;
    uint32_t regset, depth, usize, rsz;
    char err[256];
    size_t n = size < sizeof(h) ? size : sizeof(h);

    memset(&h, 0, sizeof(h));
    memcpy(&h, data, n);
    if (ml_live_check_layout(&h, err, sizeof(err)))
        return 0;
    usize = h.off[ML_LF_UNIT_SIZE];
    rsz = h.off[ML_LF_RS_SIZE];
    unit = malloc(usize);
    rs = malloc(rsz);
    if (!unit || !rs) {
        free(unit);
        free(rs);
        return 0;
    }
    /* Record contents from the rest of the input, zeros past its end. */
    memset(unit, 0, usize);
    memset(rs, 0, rsz);
    data += n;
    size -= n;
    memcpy(unit, data, size < usize ? size : usize);
    memcpy(rs, data, size < rsz ? size : rsz);
    ml_live_unit(&h, unit, &u, &regset);
    ml_live_rstate(&h, rs, &entries, &ticks, &start, &depth);
    free(unit);
    free(rs);
    return 0;
}
