/* libFuzzer target: the assembly parser, llvm-mc encoding reader, decoder and per-block selection.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "instrument/asm/asm.h"

/*
 * The input is an assembly file, optionally followed by a NUL byte and
 * llvm-mc's --show-encoding output for its units. Without that part the units
 * get their bytes from the input itself, so that the decoder and the analysis
 * see arbitrary instructions too.
 */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data, *mc = memchr(data, 0, size);
    size_t tn = mc ? (size_t)(mc - text) : size;
    struct ml_asm_file f;
    struct ml_asm_units u;
    struct ml_asm_stats st;
    struct ml_asm_opts o = {.params = {.omega = 0.25, .chunk = 64, .mode = ML_ASM_AIA},
                            .name = "fuzz"};
    char err[256];
    FILE *out, *ex;

    if (ml_asm_parse(text, tn, &f, err, sizeof(err)))
        return 0;
    if (ml_asm_units(&f, &u)) {
        ml_asm_file_free(&f);
        return 0;
    }
    if (mc) {
        mc++;
        if (ml_asm_read_encodings(mc, size - (size_t)(mc - text), &u, err, sizeof(err)))
            goto out;
    } else {
        for (int k = 0; k < u.n; k++) {
            size_t at = (size_t)k * 7 % (size ? size : 1), n = size - at < 15 ? size - at : 15;

            u.code[k] = malloc(n ? n : 1);
            if (!u.code[k])
                goto out;
            memcpy(u.code[k], data + at, n);
            u.len[k] = (int)n;
        }
    }
    ml_asm_default_scores(ML_ASM_AIA, o.params.score);
    out = fopen("/dev/null", "w");
    ex = fopen("/dev/null", "w");
    o.explain = ex;
    if (out && ex)
        ml_asm_rewrite(&f, &u, &o, out, &st, err, sizeof(err));
    if (out)
        fclose(out);
    if (ex)
        fclose(ex);
out:
    ml_asm_units_free(&u);
    ml_asm_file_free(&f);
    return 0;
}
