/* Shadow memory: a two-level table of lazily mapped, zero-filled metadata pages. */
#include "backend/shadow.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define PAGE  (1ull << ML_SHADOW_PAGE_BITS)
#define L2_N  (1u << (32 - ML_SHADOW_PAGE_BITS))
#define ZEROS 4096 /* the largest metadata a peek may read past addr: 64 bytes x ratio 64 */
#define POOL  (1ull << 30)

struct ml_shadow_pool {
    struct ml_shadow_pool *next;
    void *base;
    uint64_t size;
};

static const uint8_t zeros[ZEROS];

struct ml_shadow *ml_shadow_new(uint32_t ratio, uint64_t limit)
{
    struct ml_shadow *s;
    uint32_t shift = 0;

    if (!ratio || ratio > 64 || (ratio & (ratio - 1)))
        return NULL;
    while ((1u << shift) < ratio)
        shift++;
    /* the l1 array is large but calloc'd memory is only touched where used */
    if (!(s = calloc(1, sizeof(*s))))
        return NULL;
    s->shift = shift;
    s->limit = limit;
    for (uint32_t i = 0; i < ML_SHADOW_TLB; i++)
        s->tlb[i].page = UINT64_MAX;
    return s;
}

void ml_shadow_free(struct ml_shadow *s)
{
    if (!s)
        return;
    for (uint32_t i = 0; i < (1u << ML_SHADOW_L2_BITS); i++)
        free(s->l1[i]);
    while (s->pools) {
        struct ml_shadow_pool *p = s->pools;
        s->pools = p->next;
        munmap(p->base, p->size);
        free(p);
    }
    free(s);
}

/* A new reserved mapping to carve pages from (its untouched parts cost nothing). */
static int pool_new(struct ml_shadow *s, uint64_t bytes)
{
    uint64_t size = bytes > POOL ? bytes : POOL;
    struct ml_shadow_pool *p = malloc(sizeof(*p));
    void *m;

    if (!p)
        return -1;
    m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
             0);
    if (m == MAP_FAILED) {
        free(p);
        return -1;
    }
    p->base = m;
    p->size = size;
    p->next = s->pools;
    s->pools = p;
    s->pool = m;
    s->pool_left = size;
    return 0;
}

uint8_t *ml_shadow_page(struct ml_shadow *s, uint64_t page, int create)
{
    uint64_t hi = page >> (32 - ML_SHADOW_PAGE_BITS);
    uint8_t **l2, *p;
    size_t bytes = (size_t)(PAGE << s->shift);

    if (hi >= (1u << ML_SHADOW_L2_BITS)) {
        s->unshadowed += create;
        return NULL;
    }
    l2 = s->l1[hi];
    if (!l2) {
        if (!create || !(l2 = calloc(L2_N, sizeof(*l2)))) {
            s->unshadowed += create;
            return NULL;
        }
        s->l1[hi] = l2;
    }
    p = l2[page & (L2_N - 1)];
    if (!p && create) {
        if (s->limit && s->mapped + bytes > s->limit) {
            s->unshadowed++;
            return NULL;
        }
        if (s->pool_left < bytes && pool_new(s, bytes)) {
            s->unshadowed++;
            return NULL;
        }
        p = s->pool;
        s->pool += bytes;
        s->pool_left -= bytes;
        s->mapped += bytes;
        l2[page & (L2_N - 1)] = p;
    }
    if (p) {
        s->tlb[page & (ML_SHADOW_TLB - 1)].page = page;
        s->tlb[page & (ML_SHADOW_TLB - 1)].p = p;
    }
    return p;
}

const uint8_t *ml_shadow_peek(struct ml_shadow *s, uint64_t addr)
{
    uint64_t page = addr >> ML_SHADOW_PAGE_BITS;
    uint32_t i = (uint32_t)page & (ML_SHADOW_TLB - 1);
    uint8_t *p = page == s->tlb[i].page ? s->tlb[i].p : ml_shadow_page(s, page, 0);

    return p ? p + ((addr & (PAGE - 1)) << s->shift) : zeros;
}

void ml_shadow_clear(struct ml_shadow *s, uint64_t lo, uint64_t hi)
{
    while (lo < hi) {
        uint64_t page = lo >> ML_SHADOW_PAGE_BITS, end = (page + 1) << ML_SHADOW_PAGE_BITS;
        uint64_t n = (hi < end ? hi : end) - lo;
        uint8_t *p = ml_shadow_page(s, page, 0);
        if (p) {
            if (n == PAGE) /* a whole page: give its memory back, it reads as zero again */
                madvise(p, (size_t)(PAGE << s->shift), MADV_DONTNEED);
            else
                memset(p + ((lo & (PAGE - 1)) << s->shift), 0, (size_t)(n << s->shift));
        }
        if (end < lo)
            break; /* wrapped at the top of the address space */
        lo = end;
    }
}
