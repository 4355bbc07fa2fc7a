/* Shadow memory: metadata bytes per byte of the program's memory, mapped lazily. */
#ifndef ML_BACKEND_SHADOW_H
#define ML_BACKEND_SHADOW_H

#include <stddef.h>
#include <stdint.h>

/*
 * The backend runs in its own process, so the program's address space is not
 * mirrored at a fixed offset: a two-level table maps each 64 KiB page of the
 * program's addresses (48-bit user space) to ratio x 64 KiB of metadata,
 * mapped (zero-filled) the first time a byte of that page is written. Pages
 * come from large reserved mappings, so the kernel only backs the parts
 * written: workers that own different 4 KiB blocks of one page (backend.h,
 * ML_BPART_BLOCK_BITS) do not hold copies of each other's metadata.
 *
 * Policy for addresses never announced (no allocation, global or stack
 * object event covered them): they are shadowed like any other address, and
 * their metadata reads as zero until a module writes it, so zero must mean
 * "nothing known" to every module. Addresses at or above 2^48 (kernel,
 * non-canonical) are never shadowed: ml_shadow_at returns NULL and counts
 * them. When the optional limit is reached, pages not yet mapped are not
 * mapped either (NULL, counted): a module then knows its result is partial.
 */
#define ML_SHADOW_PAGE_BITS 16
#define ML_SHADOW_ADDR_BITS 48
#define ML_SHADOW_L2_BITS   (ML_SHADOW_ADDR_BITS - 32)
#define ML_SHADOW_TLB       64 /* pages looked up last, direct-mapped: a few arrays at once hit */

struct ml_shadow {
    uint32_t shift; /* log2(metadata bytes per data byte) */
    struct {
        uint64_t page; /* page number, or UINT64_MAX */
        uint8_t *p;
    } tlb[ML_SHADOW_TLB];
    uint8_t **l1[1u << ML_SHADOW_L2_BITS]; /* by addr >> 32: tables of pages by addr >> 16 */
    uint8_t *pool; /* metadata pages are carved from large mappings: few VMAs */
    uint64_t pool_left;
    struct ml_shadow_pool *pools;
    uint64_t limit;      /* bytes of metadata at most (0: no limit) */
    uint64_t mapped;     /* bytes of metadata mapped */
    uint64_t unshadowed; /* ml_shadow_at calls that returned NULL */
};

/* ratio: metadata bytes per data byte, a power of two from 1 to 64. NULL: bad ratio or no memory.
 */
struct ml_shadow *ml_shadow_new(uint32_t ratio, uint64_t limit);
void ml_shadow_free(struct ml_shadow *s);
uint8_t *ml_shadow_page(struct ml_shadow *s, uint64_t page, int create);

/* The metadata of addr, to read or write (mapped on first use); NULL: see above. */
static inline uint8_t *ml_shadow_at(struct ml_shadow *s, uint64_t addr)
{
    uint64_t page = addr >> ML_SHADOW_PAGE_BITS;
    uint32_t i = (uint32_t)page & (ML_SHADOW_TLB - 1);
    uint8_t *p = page == s->tlb[i].page ? s->tlb[i].p : ml_shadow_page(s, page, 1);

    return p ? p + ((addr & ((1u << ML_SHADOW_PAGE_BITS) - 1)) << s->shift) : NULL;
}

/*
 * A read prefetch that stays: GCC 12 at -O2 deletes a __builtin_prefetch
 * that runs under a condition (as below), and one for writing compiles to
 * nothing on x86-64 without -mprfchw.
 */
static inline void ml_prefetch(const void *p)
{
#if defined(__x86_64__)
    __asm__ volatile("prefetcht0 %0" : : "m"(*(const char *)p));
#else
    __builtin_prefetch(p, 0);
#endif
}

/* Starts fetching the metadata of addr into the cache when its page was looked up lately. */
static inline void ml_shadow_prefetch(const struct ml_shadow *s, uint64_t addr)
{
    uint64_t page = addr >> ML_SHADOW_PAGE_BITS;
    uint32_t i = (uint32_t)page & (ML_SHADOW_TLB - 1);

    if (page == s->tlb[i].page)
        ml_prefetch(s->tlb[i].p + ((addr & ((1u << ML_SHADOW_PAGE_BITS) - 1)) << s->shift));
}

/*
 * The metadata of addr to read: a zero area when never written (never NULL;
 * the caller never writes through it, nor reads past the metadata of 64 data
 * bytes or the end of addr's 64 KiB page).
 */
const uint8_t *ml_shadow_peek(struct ml_shadow *s, uint64_t addr);
/* Zeroes the metadata of [lo, hi) (an object died), giving whole pages back. */
void ml_shadow_clear(struct ml_shadow *s, uint64_t lo, uint64_t hi);

#endif
