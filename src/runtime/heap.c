/* Heap events for event profiling: the malloc family, interposed, tells the queue what it did. */
#include "format/events.h"
#include "format/qtables.h"
#include "format/queue.h"

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/*
 * The program's malloc, calloc, realloc, reallocarray, free, posix_memalign,
 * aligned_alloc, memalign, valloc and pvalloc are these (weak aliases, so
 * that a program with an allocator of its own keeps it, and a -static link
 * keeps the C library's: ml_q_heap_usable tells). They forward to the C library's own entry points
 * (__libc_malloc, ...), so no dlsym is needed and calloc works before
 * anything is set up; libraries' calls reach them too (glibc routes its own
 * allocations through the interposable names), and so do C++ new and delete,
 * which libstdc++ builds on malloc, aligned_alloc and free.
 *
 * This file is an archive of its own (libmemlens-heap.a), linked after the
 * runtime but not whole: only a program with a unit built for a module that
 * wants heap events pulls it in, because that unit's constructor registers
 * through __memlens_q_register_heap (src/instrument/ir/sink-queue.c). Other
 * programs keep the C library's malloc untouched (and an LD_PRELOAD'ed
 * allocator works as usual). Events flow once such a unit has registered and
 * the process feeds a backend (heap_on). Records (format/events.h): ALLOC,
 * word 0 id = size (capped at 2^48 - 1), aux = ML_EV_HEAP_* flags, word 1 =
 * address; FREE and REALLOC, word 1 = the address of the block that ends.
 * A thread inside the queue's slow path, the runtime's own allocations and a
 * thread after its queue slot is given back send nothing
 * (__memlens_q_quiet): that also ends the recursion malloc -> queue ->
 * pthread_atfork -> malloc.
 */
static int heap_on;
extern __thread int __memlens_q_quiet;
int __memlens_q_attached(void);
void __memlens_q_register(struct ml_ev_module *m);
void __memlens_q_blob(uint64_t tag, const void *data, uint64_t len);

extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t n);
extern void __libc_free(void *p);
extern void *__libc_memalign(size_t align, size_t n);
extern void *__libc_valloc(size_t n);
extern void *__libc_pvalloc(size_t n);

static inline int sending(void)
{
    return __builtin_expect(__atomic_load_n(&heap_on, __ATOMIC_RELAXED), 0) && !__memlens_q_quiet;
}

static void send(unsigned kind, unsigned aux, uint64_t size, const void *p)
{
    int saved = errno;

    __memlens_q_quiet = 1;
    ml_q_put(ML_Q_W0(kind, 0, aux, size > ML_Q_ID_MAX ? ML_Q_ID_MAX : size),
             (uint64_t)(uintptr_t)p);
    __memlens_q_quiet = 0;
    errno = saved;
}

static inline void *made(void *p, size_t n, unsigned aux)
{
    if (p && sending())
        send(ML_EV_ALLOC, aux, n, p);
    return p;
}

static void *ml_heap_malloc(size_t n)
{
    return made(__libc_malloc(n), n, 0);
}

static void *ml_heap_calloc(size_t n, size_t size)
{
    return made(__libc_calloc(n, size), n * size, ML_EV_HEAP_ZERO);
}

static void ml_heap_free(void *p)
{
    if (p && sending())
        send(ML_EV_FREE, 0, 0, p);
    __libc_free(p);
}

static void *ml_heap_realloc(void *p, size_t n)
{
    void *q = __libc_realloc(p, n);

    if (!p)
        return made(q, n, 0);
    if (!q && n)
        return NULL; /* failed: p lives on unchanged */
    if (sending())
        send(q ? ML_EV_REALLOC : ML_EV_FREE, 0, 0, p); /* realloc(p, 0) freed p */
    return made(q, n, ML_EV_HEAP_REALLOC);
}

static void *ml_heap_reallocarray(void *p, size_t n, size_t size)
{
    size_t bytes;

    if (__builtin_mul_overflow(n, size, &bytes)) {
        errno = ENOMEM;
        return NULL;
    }
    return ml_heap_realloc(p, bytes);
}

static void *ml_heap_memalign(size_t align, size_t n)
{
    return made(__libc_memalign(align, n), n, 0);
}

static void *ml_heap_aligned_alloc(size_t align, size_t n)
{
    return made(__libc_memalign(align, n), n, 0);
}

static int ml_heap_posix_memalign(void **out, size_t align, size_t n)
{
    void *p;

    if (!align || align % sizeof(void *) || (align & (align - 1)))
        return EINVAL;
    p = __libc_memalign(align, n);
    if (!p)
        return ENOMEM;
    *out = made(p, n, 0);
    return 0;
}

static void *ml_heap_valloc(size_t n)
{
    return made(__libc_valloc(n), n, 0);
}

static void *ml_heap_pvalloc(size_t n)
{
    return made(__libc_pvalloc(n), n, 0);
}

#define HEAP_API(ret, name, params)                                                                \
    ret name params __attribute__((weak, alias("ml_heap_" #name), visibility("default")))

HEAP_API(void *, malloc, (size_t));
HEAP_API(void *, calloc, (size_t, size_t));
HEAP_API(void, free, (void *));
HEAP_API(void *, realloc, (void *, size_t));
HEAP_API(void *, reallocarray, (void *, size_t, size_t));
HEAP_API(void *, memalign, (size_t, size_t));
HEAP_API(void *, aligned_alloc, (size_t, size_t));
HEAP_API(int, posix_memalign, (void **, size_t, size_t));
HEAP_API(void *, valloc, (size_t));
HEAP_API(void *, pvalloc, (size_t));

/*
 * Whether the program's malloc family is these functions, every one: a
 * -static link keeps the C library's, a program may bring its own allocator.
 * Half of the family would give wrong answers (blocks whose frees are never
 * seen), so heap events are sent only when all of it is ours.
 */
static int usable(void)
{
    return malloc == ml_heap_malloc && calloc == ml_heap_calloc && free == ml_heap_free &&
           realloc == ml_heap_realloc && reallocarray == ml_heap_reallocarray &&
           memalign == ml_heap_memalign && aligned_alloc == ml_heap_aligned_alloc &&
           posix_memalign == ml_heap_posix_memalign && valloc == ml_heap_valloc &&
           pvalloc == ml_heap_pvalloc;
}

static void heap_child(void)
{
    heap_on = 0; /* a forked child sends nothing */
}

/*
 * The registration of a unit built for heap events (instead of
 * __memlens_q_register): its tables, then heap events on, or, when the
 * malloc family is not all ours, a note to the backend instead.
 */
__attribute__((visibility("default"))) void __memlens_q_register_heap(struct ml_ev_module *m)
{
    static int once;

    __memlens_q_register(m);
    if (!__memlens_q_attached() || __atomic_load_n(&heap_on, __ATOMIC_RELAXED))
        return;
    if (!usable()) {
        if (!__atomic_exchange_n(&once, 1, __ATOMIC_RELAXED))
            __memlens_q_blob(ML_QT_TAG_NOHEAP, "", 0);
        return;
    }
    if (!__atomic_exchange_n(&once, 1, __ATOMIC_RELAXED)) {
        __memlens_q_quiet = 1;
        pthread_atfork(NULL, NULL, heap_child);
        __memlens_q_quiet = 0;
    }
    __atomic_store_n(&heap_on, 1, __ATOMIC_RELAXED);
}
