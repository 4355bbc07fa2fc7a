/* Live objects by start address (amap.h). */
#include "backend/amap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static uint64_t home(uint64_t addr, uint64_t cap)
{
    uint64_t h = addr * 0x9e3779b97f4a7c15ull;

    return (h ^ (h >> 31)) & (cap - 1);
}

static uint64_t *at(const struct ml_amap *m, uint64_t i)
{
    return (uint64_t *)(void *)(m->tab + i * m->elem);
}

int ml_amap_init(struct ml_amap *m, size_t elem, uint64_t cap)
{
    uint64_t c = 16;

    while (c < cap)
        c *= 2;
    m->tab = calloc(c, elem);
    m->cap = c;
    m->used = 0;
    m->elem = elem;
    return m->tab ? 0 : -ENOMEM;
}

void ml_amap_free(struct ml_amap *m)
{
    free(m->tab);
    m->tab = NULL;
    m->cap = m->used = 0;
}

void *ml_amap_find(const struct ml_amap *m, uint64_t addr)
{
    for (uint64_t i = home(addr, m->cap);; i = (i + 1) & (m->cap - 1)) {
        uint64_t *e = at(m, i);
        if (*e == addr)
            return e;
        if (!*e)
            return NULL;
    }
}

void *ml_amap_insert(struct ml_amap *m, uint64_t addr)
{
    uint64_t i, *e;

    if ((m->used + 1) * 2 > m->cap) {
        struct ml_amap n = {.cap = m->cap * 2, .elem = m->elem, .used = m->used};
        if (!(n.tab = calloc(n.cap, n.elem)))
            return NULL;
        for (uint64_t k = 0; k < m->cap; k++)
            if (*at(m, k)) {
                uint64_t j = home(*at(m, k), n.cap);
                while (*at(&n, j))
                    j = (j + 1) & (n.cap - 1);
                memcpy(at(&n, j), at(m, k), m->elem);
            }
        free(m->tab);
        *m = n;
    }
    for (i = home(addr, m->cap); *at(m, i); i = (i + 1) & (m->cap - 1))
        ;
    m->used++;
    e = at(m, i);
    *e = addr;
    return e;
}

void ml_amap_erase(struct ml_amap *m, void *e)
{
    uint64_t hole = (uint64_t)((uint8_t *)e - m->tab) / m->elem, i = hole;

    for (;;) {
        i = (i + 1) & (m->cap - 1);
        if (!*at(m, i))
            break;
        uint64_t h = home(*at(m, i), m->cap);
        /* Entry i may fill the hole when its home is not in (hole, i]. */
        if ((i > hole && (h <= hole || h > i)) || (i < hole && h <= hole && h > i)) {
            memcpy(at(m, hole), at(m, i), m->elem);
            hole = i;
        }
    }
    *at(m, hole) = 0;
    m->used--;
}
