/* Fuzz target: the backend's reader of module table blobs (format/qtables.h, backend/sites.c). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "backend/sites.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ml_bsites t = {0};
    char buf[128];

    /* Two tables from one input: the second may overwrite or extend the first. */
    ml_bsites_parse(&t, data, size);
    ml_bsites_parse(&t, data + size / 2, size - size / 2);
    for (uint32_t i = 0; i < t.n + 2; i++) {
        ml_bsites_where(&t, i, buf, sizeof(buf));
        ml_bsites_func(&t, i);
    }
    for (uint32_t i = 0; i < t.nm + 2; i++)
        ml_bsites_marker_where(&t, i, buf, sizeof(buf));
    free(ml_bsites_canon_sites(&t));
    free(ml_bsites_canon_markers(&t));
    ml_bsites_free(&t);
    return 0;
}
