/* Word-frequency program for tests/e2e/profile-dep-brute.sh: a chained hash table of words. */
#ifndef WORDS_H
#define WORDS_H

#include <stddef.h>

struct word {
    struct word *next;
    unsigned long hash;
    long count;
    size_t len;
    char text[];
};

struct table {
    struct word **slot;
    size_t nslots, nwords;
};

int table_init(struct table *t, size_t nslots);
/* Counts one occurrence of text[0..len); 0 or -1 when out of memory. */
int table_add(struct table *t, const char *text, size_t len);
/* The k most frequent words into top (ties: shorter, then smaller text first); returns how many. */
size_t table_top(const struct table *t, struct word **top, size_t k);
void table_free(struct table *t);

/*
 * Built with -DKEEP_BLOCKS (by profile-dep-brute.sh) the program frees nothing, so no block's
 * bytes are reused: traces carry no heap events, so the brute force cannot forget a freed
 * block's accesses as 'dep' does (docs/profile-modules.md, "dep").
 */
#ifdef KEEP_BLOCKS
#define release(p) ((void)(p))
#else
#define release(p) free(p)
#endif

#endif
