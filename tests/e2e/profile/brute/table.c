/* The hash table of words.c: FNV-1a hashing, chaining, doubling when the load exceeds 1. */
#include "words.h"

#include <stdlib.h>
#include <string.h>

static unsigned long hash_of(const char *s, size_t len)
{
    unsigned long h = 1469598103934665603ul;

    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ul;
    return h;
}

int table_init(struct table *t, size_t nslots)
{
    t->slot = calloc(nslots, sizeof(*t->slot));
    t->nslots = nslots;
    t->nwords = 0;
    return t->slot ? 0 : -1;
}

static int grow(struct table *t)
{
    size_t n = t->nslots * 2;
    struct word **s = calloc(n, sizeof(*s));

    if (!s)
        return -1;
    for (size_t i = 0; i < t->nslots; i++) {
        struct word *w = t->slot[i], *next;
        for (; w; w = next) {
            next = w->next;
            w->next = s[w->hash % n];
            s[w->hash % n] = w;
        }
    }
    release(t->slot);
    t->slot = s;
    t->nslots = n;
    return 0;
}

static int same(const struct word *w, const char *text, size_t len)
{
    if (w->len != len)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (w->text[i] != text[i])
            return 0;
    return 1;
}

int table_add(struct table *t, const char *text, size_t len)
{
    unsigned long h = hash_of(text, len);
    struct word **p = &t->slot[h % t->nslots], *w;

    for (w = *p; w; w = w->next)
        if (w->hash == h && same(w, text, len)) {
            w->count++;
            return 0;
        }
    if (t->nwords >= t->nslots && grow(t))
        return -1;
    if (!(w = malloc(sizeof(*w) + len + 1)))
        return -1;
    memcpy(w->text, text, len);
    w->text[len] = 0;
    w->len = len;
    w->hash = h;
    w->count = 1;
    p = &t->slot[h % t->nslots];
    w->next = *p;
    *p = w;
    t->nwords++;
    return 0;
}

static int before(const struct word *a, const struct word *b)
{
    if (a->count != b->count)
        return a->count > b->count;
    if (a->len != b->len)
        return a->len < b->len;
    for (size_t i = 0; i < a->len; i++)
        if (a->text[i] != b->text[i])
            return (unsigned char)a->text[i] < (unsigned char)b->text[i];
    return 0;
}

size_t table_top(const struct table *t, struct word **top, size_t k)
{
    size_t n = 0;

    for (size_t i = 0; i < t->nslots; i++)
        for (struct word *w = t->slot[i]; w; w = w->next) {
            size_t j = n < k ? n++ : k;
            if (j == k && !before(w, top[k - 1]))
                continue;
            if (j == k)
                j = k - 1;
            while (j > 0 && before(w, top[j - 1])) {
                top[j] = top[j - 1];
                j--;
            }
            top[j] = w;
        }
    return n;
}

void table_free(struct table *t)
{
    for (size_t i = 0; i < t->nslots; i++) {
        struct word *w = t->slot[i], *next;
        for (; w; w = next) {
            next = w->next;
            release(w);
        }
    }
    release(t->slot);
}
