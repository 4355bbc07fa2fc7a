/* Pointer hash map: linear probing, power-of-two capacity, load factor at most 1/2. */
#include "instrument/ir/ptrmap.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

static size_t slot(const void *key, size_t cap)
{
    uint64_t h = (uint64_t)(uintptr_t)key;

    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return (size_t)h & (cap - 1);
}

void ml_ptrmap_init(struct ml_ptrmap *m)
{
    m->keys = m->vals = NULL;
    m->cap = m->len = 0;
}

void ml_ptrmap_free(struct ml_ptrmap *m)
{
    free(m->keys);
    free(m->vals);
    ml_ptrmap_init(m);
}

static int grow(struct ml_ptrmap *m)
{
    size_t cap = m->cap ? m->cap * 2 : 64;
    void **keys = calloc(cap, sizeof(*keys));
    void **vals = calloc(cap, sizeof(*vals));

    if (!keys || !vals) {
        free(keys);
        free(vals);
        return -ENOMEM;
    }
    for (size_t i = 0; i < m->cap; i++) {
        size_t j;
        if (!m->keys[i])
            continue;
        for (j = slot(m->keys[i], cap); keys[j]; j = (j + 1) & (cap - 1))
            ;
        keys[j] = m->keys[i];
        vals[j] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = cap;
    return 0;
}

int ml_ptrmap_put(struct ml_ptrmap *m, const void *key, void *val)
{
    size_t j;

    if ((m->len + 1) * 2 > m->cap && grow(m))
        return -ENOMEM;
    for (j = slot(key, m->cap); m->keys[j]; j = (j + 1) & (m->cap - 1)) {
        if (m->keys[j] == key) {
            m->vals[j] = val;
            return 0;
        }
    }
    m->keys[j] = (void *)key;
    m->vals[j] = val;
    m->len++;
    return 0;
}

void *ml_ptrmap_get(const struct ml_ptrmap *m, const void *key)
{
    if (!m->cap)
        return NULL;
    for (size_t j = slot(key, m->cap); m->keys[j]; j = (j + 1) & (m->cap - 1))
        if (m->keys[j] == key)
            return m->vals[j];
    return NULL;
}
