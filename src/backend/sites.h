/* Sites and markers of the profiled program, read from the tables its modules sent. */
#ifndef ML_BACKEND_SITES_H
#define ML_BACKEND_SITES_H

#include <stddef.h>
#include <stdint.h>

struct ml_bblob;

struct ml_bsite {
    uint32_t kind, size;
    uint32_t marker; /* global marker id, or UINT32_MAX */
    uint32_t line, column;
    char *func, *file;
};

struct ml_bmarker {
    uint32_t kind, line;
    char *name, *file, *func;
};

struct ml_bsites {
    struct ml_bsite *s; /* by global site id; entries never sent are zeroed */
    uint32_t n;
    struct ml_bmarker *m; /* by global marker id */
    uint32_t nm;
    uint32_t bad; /* tables that were malformed and skipped */
};

/*
 * Reads every table blob (format/qtables.h) in blobs. Every length is checked
 * against the blob: a malformed table is skipped and counted in t->bad.
 * 0 or -ENOMEM.
 */
int ml_bsites_load(struct ml_bsites *t, const struct ml_bblob *blobs);
/* One table blob of len bytes (for the fuzz target): 0, -EINVAL (counted) or -ENOMEM. */
int ml_bsites_parse(struct ml_bsites *t, const uint8_t *data, uint64_t len);
void ml_bsites_free(struct ml_bsites *t);
/*
 * For each site id, the smallest id with the same function, file and line
 * (copies of one source instruction made by unrolling or inlining); for each
 * marker id, the smallest with the same kind, file and line. malloc'd arrays
 * of t->n and t->nm entries, NULL when out of memory.
 */
uint32_t *ml_bsites_canon_sites(const struct ml_bsites *t);
uint32_t *ml_bsites_canon_markers(const struct ml_bsites *t);
/* "file:line" of site id ("func" without a file, "?" when unknown) into buf. */
const char *ml_bsites_where(const struct ml_bsites *t, uint64_t id, char *buf, size_t len);
/* The function of site id, "" when unknown. */
const char *ml_bsites_func(const struct ml_bsites *t, uint64_t id);
/* "file:line" of the loop (or function) marker id, "" for UINT32_MAX or unknown ids. */
const char *ml_bsites_marker_where(const struct ml_bsites *t, uint64_t id, char *buf, size_t len);

/*
 * Heap-block sites (lifetime, pointsto): a block is named by a site id, or by
 * ML_BKEY_LIB | the global marker id of the function open when it was made
 * (ML_BKEY_LIB | ML_BKEY_NOFUNC: none), when no call site claimed it.
 */
#define ML_BKEY_LIB    (1ull << 32)
#define ML_BKEY_NOFUNC 0xffffffffu
/* The key with its site or function folded as canon_sites/canon_markers (NULL: unfolded). */
uint64_t ml_bsites_block_canon(const struct ml_bsites *t, const uint32_t *scanon,
                               const uint32_t *mcanon, uint64_t key);
/*
 * What a block key names: "heap", "library", "stack" or "global" (STACK_ALLOC
 * and GLOBAL sites); *name gets a stack or global object's variable name, ""
 * otherwise.
 */
const char *ml_bsites_block_kind(const struct ml_bsites *t, uint64_t key, const char **name);
/* "file:line", or "library in <function>", or "library", into buf; *func gets the function. */
const char *ml_bsites_block_where(const struct ml_bsites *t, uint64_t key, char *buf, size_t len,
                                  const char **func);

#endif
