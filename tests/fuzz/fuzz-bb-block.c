/* libFuzzer target: bb's input parsers (hex text) and static block checks on arbitrary bytes. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bb/bb.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t code[4096];
    size_t len = 0;
    char *text = malloc(size + 1);
    struct ml_bb_result r;

    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = 0;
    if (ml_bb_hex_parse(text, code, sizeof(code), &len) == 0) {
        char *hex = malloc(len * 2 + 1);
        if (hex) {
            ml_bb_hex_format(code, len, hex);
            free(hex);
        }
    }
    free(text);
    /* The raw bytes as a block: decoding and the static checks must never crash. */
    memset(&r, 0, sizeof(r));
    ml_bb_check(data, size < sizeof(code) ? size : sizeof(code), &r);
    return 0;
}
