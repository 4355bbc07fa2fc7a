/* Heap events for event profiling: the malloc family, interposed, tells the queue what it did. */
#include "format/events.h"
#include "format/queue.h"

#include <errno.h>
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
 * Events are sent only once a module built with --events for a profiling
 * module that wants heap events has registered (ml_q_heap_on) and the process
 * feeds a backend; otherwise the cost is one load and a branch per call.
 * Records (format/events.h): ALLOC, word 0 id = size (capped at 2^48 - 1), aux
 * = ML_EV_HEAP_* flags, word 1 = address; FREE and REALLOC, word 1 = the
 * address of the block that ends. A thread inside the queue's slow path (or
 * the runtime's own allocations) sends nothing: ml_q_heap_off guards the
 * recursion malloc -> queue -> pthread_atfork -> malloc.
 */
int ml_q_heap_usable(void) __attribute__((visibility("hidden")));
int ml_q_heap_on __attribute__((visibility("hidden")));
__thread int ml_q_heap_off __attribute__((tls_model("initial-exec"), visibility("hidden")));

extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t n);
extern void __libc_free(void *p);
extern void *__libc_memalign(size_t align, size_t n);
extern void *__libc_valloc(size_t n);
extern void *__libc_pvalloc(size_t n);


static inline int sending(void)
{
    return __builtin_expect(__atomic_load_n(&ml_q_heap_on, __ATOMIC_RELAXED), 0) && !ml_q_heap_off;
}

static void send(unsigned kind, unsigned aux, uint64_t size, const void *p)
{
    int saved = errno;

    ml_q_heap_off = 1;
    ml_q_put(ML_Q_W0(kind, 0, aux, size > ML_Q_ID_MAX ? ML_Q_ID_MAX : size),
             (uint64_t)(uintptr_t)p);
    ml_q_heap_off = 0;
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
int ml_q_heap_usable(void)
{
    return malloc == ml_heap_malloc && calloc == ml_heap_calloc && free == ml_heap_free &&
           realloc == ml_heap_realloc && reallocarray == ml_heap_reallocarray &&
           memalign == ml_heap_memalign && aligned_alloc == ml_heap_aligned_alloc &&
           posix_memalign == ml_heap_posix_memalign && valloc == ml_heap_valloc &&
           pvalloc == ml_heap_pvalloc;
}
