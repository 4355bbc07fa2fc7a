/* Live objects by start address, for modules that see an object's size only when it begins. */
#ifndef ML_BACKEND_AMAP_H
#define ML_BACKEND_AMAP_H

#include <stddef.h>
#include <stdint.h>

/*
 * Open addressing with linear probing and backward-shift erase (no tombstones,
 * so a churn of allocations never slows lookups). Entries are elem bytes and
 * begin with their uint64_t address; address 0 marks a free slot.
 */
struct ml_amap {
    uint8_t *tab;
    uint64_t cap, used; /* cap: a power of two, at least twice used */
    size_t elem;
};

/* 0 or -ENOMEM; cap is rounded up to a power of two. */
int ml_amap_init(struct ml_amap *m, size_t elem, uint64_t cap);
void ml_amap_free(struct ml_amap *m);
/* The entry of addr (not 0), or NULL. */
void *ml_amap_find(const struct ml_amap *m, uint64_t addr);
/* A new entry for addr, which must not be present: its address set, the rest for the caller to
 * fill. NULL when the table cannot grow. */
void *ml_amap_insert(struct ml_amap *m, uint64_t addr);
/* Removes an entry returned by find or insert. */
void ml_amap_erase(struct ml_amap *m, void *e);

#endif
