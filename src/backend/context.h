/* Context manager: calling and loop contexts as interned ids, one stack per program thread. */
#ifndef ML_BACKEND_CONTEXT_H
#define ML_BACKEND_CONTEXT_H

#include <stdint.h>

/*
 * A context is the chain of function and loop frames open on a thread, from
 * the outermost. Contexts are interned in a tree: the context of a frame is
 * (parent context, kind, id), and the same chain always gets the same id, so
 * that a module can key its maps by context cheaply. Ids are dense, from
 * ML_CTX_ROOT (no frame) upwards, and belong to one interner: each worker
 * has its own (no locks), and ml_ctx_merge maps one worker's ids onto
 * another's when their states are merged.
 */
#define ML_CTX_ROOT 0u
#define ML_CTX_NONE UINT32_MAX /* out of memory */

enum ml_ctx_kind { ML_CTX_FUNC = 1, ML_CTX_LOOP = 2 };

struct ml_ctx;

struct ml_ctx *ml_ctx_new(void);
void ml_ctx_free(struct ml_ctx *c);
/* The interned context parent + (kind, id); ML_CTX_NONE when out of memory. */
uint32_t ml_ctx_child(struct ml_ctx *c, uint32_t parent, uint32_t kind, uint64_t id);
/* The frame that ends context ctx and its parent; -1 for ML_CTX_ROOT or an unknown id. */
int ml_ctx_get(const struct ml_ctx *c, uint32_t ctx, uint32_t *parent, uint32_t *kind,
               uint64_t *id);
/* Number of contexts, root included (ids are 0 .. count-1). */
uint32_t ml_ctx_count(const struct ml_ctx *c);
/* Number of frames in ctx (0 for the root). */
uint32_t ml_ctx_depth(const struct ml_ctx *c, uint32_t ctx);
/*
 * Interns every context of from into into; returns map (malloc'd, count of
 * from entries): map[id in from] = id in into. NULL when out of memory.
 */
uint32_t *ml_ctx_merge(struct ml_ctx *into, const struct ml_ctx *from);

/*
 * One program thread's open frames. Loops count their iterations; every
 * push gets a stamp (a per-stack counter), so that (stamp, iter) of an
 * enclosing loop tells two accesses apart by invocation and by iteration,
 * which is what loop-carried dependence needs.
 *
 * Unbalanced events are repaired, not trusted: an exit pops every frame
 * above the one it names (a longjmp or an exception left them), and an exit
 * or iteration of a frame that is not open is ignored and counted.
 * Recursion deeper than ML_CSTACK_MAX frames is counted, not interned.
 */
#define ML_CSTACK_MAX 65536u

struct ml_cframe {
    uint32_t ctx; /* the context with this frame on top */
    uint32_t kind;
    uint64_t id;
    uint64_t stamp; /* unique per push on this stack */
    uint64_t iter;  /* loops: iteration number in this invocation, from 0 */
};

struct ml_cstack {
    struct ml_ctx *c;
    struct ml_cframe *f;
    uint32_t depth, cap;
    uint32_t over;      /* frames pushed beyond ML_CSTACK_MAX, not recorded */
    uint64_t stamps;    /* pushes so far */
    uint64_t unmatched; /* exits and iterations of frames that were not open */
    uint64_t nomem;     /* pushes lost to allocation failure */
};

struct ml_cstack *ml_cstack_new(struct ml_ctx *c);
void ml_cstack_free(struct ml_cstack *s);
/* Opens a function or loop frame. 0, or -ENOMEM (counted; the frame is not pushed). */
int ml_cstack_push(struct ml_cstack *s, uint32_t kind, uint64_t id);
/* Closes the innermost open frame (kind, id) and every frame above it; -ENOENT if none. */
int ml_cstack_pop(struct ml_cstack *s, uint32_t kind, uint64_t id);
/* Next iteration of the innermost open loop id (frames above it are closed); -ENOENT if none. */
int ml_cstack_iter(struct ml_cstack *s, uint64_t loop);

static inline uint32_t ml_cstack_ctx(const struct ml_cstack *s)
{
    return s->depth ? s->f[s->depth - 1].ctx : ML_CTX_ROOT;
}

#endif
