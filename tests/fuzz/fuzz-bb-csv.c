/* libFuzzer target: the bb batch readers (bounded lines, CSV fields, the resume scan). */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/bb.h"

static const char header[] =
    "hex,throughput,u,u2,method,status,detail,signal,ratio,clean,agree,pages,flags,mca\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ml_bb_resume *rs = malloc(sizeof(*rs));
    char line[96], field[24], hex[2 * ML_BB_MAX_LEN + 8];
    uint8_t code[ML_BB_MAX_LEN];
    FILE *f;
    ssize_t n;
    int cut;

    if (!rs || size == 0) {
        free(rs);
        return 0;
    }
    f = fmemopen((void *)data, size, "r");
    if (!f) {
        free(rs);
        return 0;
    }
    /* as the resume of an output file: the scanned end never passes the data */
    if (ml_bb_resume_scan(f, header, rs) == 0 &&
        (rs->end < 0 || (size_t)rs->end > size || rs->rows < 0 ||
         strlen(rs->last) >= sizeof(rs->last)))
        abort();
    rewind(f);
    /* as batch input, with a small line bound so that cut lines are common */
    while ((n = ml_bb_line_read(f, line, sizeof(line), &cut)) > 0) {
        size_t len;

        if ((size_t)n >= sizeof(line) || line[n] != 0)
            abort();
        for (unsigned k = 0; k < ML_BB_CSV_FIELDS + 2; k++)
            if (ml_bb_csv_field(line, k, field, sizeof(field)) != -E2BIG &&
                strlen(field) >= sizeof(field))
                abort();
        if (ml_bb_csv_field(line, 0, hex, sizeof(hex)) == 0)
            ml_bb_hex_parse(hex, code, sizeof(code), &len);
    }
    fclose(f);
    free(rs);
    return 0;
}
