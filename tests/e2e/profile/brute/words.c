/* Word frequencies of generated text (tests/e2e/profile-dep-brute.sh): words.c makes the text
 * and splits it, table.c counts the words; the top ten and a checksum are printed. */
#include "words.h"

#include <stdio.h>
#include <stdlib.h>

static const char *const syllables[] = {"ka", "lo", "mi", "ne", "su", "ta", "ri", "po"};

/* Text of about n bytes: words of 1-3 syllables from a skewed distribution, separated by blanks
 * and punctuation. */
static char *make_text(size_t n, unsigned long seed, size_t *len)
{
    char *s = malloc(n + 8);
    size_t at = 0;

    if (!s)
        return NULL;
    while (at + 7 < n) {
        seed = seed * 6364136223846793005ul + 1442695040888963407ul;
        unsigned r = (unsigned)(seed >> 33);
        unsigned nsyl = 1 + r % 3;
        for (unsigned i = 0; i < nsyl; i++) {
            const char *y = syllables[(r >> (3 + 3 * i)) % 8 & ((r >> 12) % 4 ? 3 : 7)];
            s[at++] = y[0];
            s[at++] = y[1];
        }
        s[at++] = (r >> 20) % 9 ? ' ' : (r >> 24) % 2 ? ',' : '.';
    }
    *len = at;
    return s;
}

static int is_letter(char c)
{
    return c >= 'a' && c <= 'z';
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? (size_t)atol(argv[1]) : 20000, len, start = 0;
    int rounds = argc > 2 ? atoi(argv[2]) : 2;
    struct table t;
    struct word *top[10];
    unsigned long check = 0;

    if (table_init(&t, 8))
        return 1;
    for (int r = 0; r < rounds; r++) {
        char *text = make_text(n, 42 + (unsigned long)r, &len);
        if (!text)
            return 1;
        for (size_t i = 0; i <= len; i++) {
            if (i < len && is_letter(text[i]))
                continue;
            if (i > start && table_add(&t, text + start, i - start))
                return 1;
            start = i + 1;
        }
        start = 0;
        release(text);
    }
    size_t k = table_top(&t, top, 10);
    for (size_t i = 0; i < k; i++) {
        printf("%s %ld\n", top[i]->text, top[i]->count);
        check = check * 31 + (unsigned long)top[i]->count;
    }
    printf("%zu words, %lu\n", t.nwords, check);
    table_free(&t);
    return 0;
}
