/* Exact mode: per-access byte accounting classified by address, a check on the static facts. */
#include "runtime/rt.h"

#include <link.h>
#include <pthread.h>
#include <stdlib.h>

#define ML_EXPORT  __attribute__((visibility("default")))
#define MAX_RANGES 512

/* Loaded segments of every object at first use: addresses inside them are "global". */
static struct {
    uintptr_t lo, hi;
} ranges[MAX_RANGES];
static int nranges = -1;
static pthread_once_t ranges_once = PTHREAD_ONCE_INIT;

static int add_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    (void)arg;
    for (int i = 0; i < info->dlpi_phnum && nranges < MAX_RANGES; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        ranges[nranges].lo = info->dlpi_addr + ph->p_vaddr;
        ranges[nranges].hi = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
        nranges++;
    }
    return 0;
}

static void load_ranges(void)
{
    nranges = 0;
    dl_iterate_phdr(add_object, NULL);
}

static int classify(const struct ml_thread_rec *t, uintptr_t a)
{
    if (a >= t->stack_lo && a < t->stack_hi)
        return 2;
    for (int i = 0; i < nranges; i++)
        if (a >= ranges[i].lo && a < ranges[i].hi)
            return 1;
    return 0;
}

/* The thread's record knows its stack from its creation (region.c). */
static struct ml_thread_rec *exact_thread(void)
{
    return ml_rt_self();
}

static uint64_t *exact_slots(struct ml_thread_rec *t, struct ml_rt_module *m)
{
    if (m->index >= t->exact_cap) {
        uint32_t cap = m->index * 2 + 8;
        uint64_t **p = realloc(t->exact, cap * sizeof(*p));
        if (!p)
            return NULL;
        for (uint32_t i = t->exact_cap; i < cap; i++)
            p[i] = NULL;
        t->exact = p;
        t->exact_cap = cap;
    }
    if (!t->exact[m->index])
        t->exact[m->index] = calloc((size_t)m->nunits * ML_NCLASS, sizeof(uint64_t));
    return t->exact[m->index];
}

ML_EXPORT void __memlens_access(struct ml_rt_module *m, uint32_t unit, const void *p, uint64_t n,
                                uint32_t flags)
{
    struct ml_thread_rec *t = exact_thread();
    uint64_t *slots;
    int c;

    pthread_once(&ranges_once, load_ranges);
    if (!t || unit >= m->nunits || !(slots = exact_slots(t, m)))
        return;
    c = classify(t, (uintptr_t)p);
    if (flags & 1)
        slots[(size_t)unit * ML_NCLASS + ML_C_RD_HEAP + c] += n;
    if (flags & 2)
        slots[(size_t)unit * ML_NCLASS + ML_C_WR_HEAP + c] += n;
}
