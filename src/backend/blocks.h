/* Live heap blocks ordered by address: the block that holds an address (points-to). */
#ifndef ML_BACKEND_BLOCKS_H
#define ML_BACKEND_BLOCKS_H

#include <stdint.h>

/*
 * A treap keyed by start address: add, remove and find by start in expected
 * O(log n), and the block holding an address (the last start at or below it,
 * if the address lies before its end) likewise. Blocks never overlap in a
 * program; a block added where another starts replaces it. One per worker:
 * no locks.
 */
struct ml_block {
    uint64_t addr, size;
    uint64_t key;    /* the module's: what names the block */
    uint32_t thread; /* program thread that made it */
    uint32_t named;  /* the module's: a call site claimed it */
};

struct ml_blocks;

struct ml_blocks *ml_blocks_new(void);
void ml_blocks_free(struct ml_blocks *b);
/* A zeroed block at addr (addr and size set), replacing one that starts there; NULL: no memory. */
struct ml_block *ml_blocks_add(struct ml_blocks *b, uint64_t addr, uint64_t size);
/* Removes the block starting at addr; -ENOENT when there is none. */
int ml_blocks_remove(struct ml_blocks *b, uint64_t addr);
/* The block starting at addr, NULL when none. */
struct ml_block *ml_blocks_at(const struct ml_blocks *b, uint64_t addr);
/* The block with addr <= a < addr + size (a zero-size block holds its start), NULL when none. */
struct ml_block *ml_blocks_holding(const struct ml_blocks *b, uint64_t a);
uint64_t ml_blocks_count(const struct ml_blocks *b);

#endif
