/* Benchmark kernel: a branchy state machine that tokenizes generated text (words, numbers,
 * punctuation, blank runs) through a global character-class table, reps times. */
#include "memlens.h"

#include <stdio.h>
#include <stdlib.h>

enum { C_ALPHA, C_DIGIT, C_SPACE, C_PUNCT };
unsigned char char_class[256];

int main(int argc, char **argv)
{
    long len = atol(argv[1]), reps = atol(argv[2]);
    unsigned char *text = malloc(len);
    unsigned long seed = 99, words = 0, numbers = 0, punct = 0, value = 0;
    static const char alphabet[] = "abcdefghij0123456789 ,.;  xyz";

    if (!text)
        return 1;
    for (int c = 0; c < 256; c++)
        char_class[c] = c >= '0' && c <= '9'     ? C_DIGIT
                        : (c >= 'a' && c <= 'z') ? C_ALPHA
                        : c == ' '               ? C_SPACE
                                                 : C_PUNCT;
    for (long i = 0; i < len; i++) {
        seed = seed * 6364136223846793005UL + 1442695040888963407UL;
        text[i] = (unsigned char)alphabet[(seed >> 33) % (sizeof(alphabet) - 1)];
    }
    for (long r = 0; r < reps; r++) {
        int state = C_SPACE;
        MEMLENS_ROI_BEGIN("parser");
        for (long i = 0; i < len; i++) {
            unsigned char ch = text[i];
            int cls = char_class[ch];
            switch (state * 4 + cls) {
            case C_SPACE * 4 + C_ALPHA:
            case C_PUNCT * 4 + C_ALPHA:
                words++;
                break;
            case C_SPACE * 4 + C_DIGIT:
            case C_PUNCT * 4 + C_DIGIT:
                numbers++;
                value = ch - '0';
                break;
            case C_DIGIT * 4 + C_DIGIT:
                value = value * 10 + (ch - '0');
                break;
            case C_DIGIT * 4 + C_ALPHA:
                words++;
                value ^= ch;
                break;
            case C_ALPHA * 4 + C_PUNCT:
            case C_DIGIT * 4 + C_PUNCT:
            case C_SPACE * 4 + C_PUNCT:
                punct++;
                break;
            default:
                break;
            }
            state = cls;
        }
        MEMLENS_ROI_END("parser");
        text[r % len] = (unsigned char)('a' + r % 7);
    }
    printf("%lu %lu %lu %lu\n", words, numbers, punct, value);
    return 0;
}
