/* Open-addressing hash map from pointers to pointers, for LLVM value and block maps. */
#ifndef ML_IR_PTRMAP_H
#define ML_IR_PTRMAP_H

#include <stddef.h>

/* Keys are non-NULL; the map never owns keys or values. */
struct ml_ptrmap {
    void **keys;
    void **vals;
    size_t cap, len;
};

void ml_ptrmap_init(struct ml_ptrmap *m);
void ml_ptrmap_free(struct ml_ptrmap *m);
/* Inserts or replaces; returns 0 or -ENOMEM. */
int ml_ptrmap_put(struct ml_ptrmap *m, const void *key, void *val);
/* Value for key, or NULL when absent. */
void *ml_ptrmap_get(const struct ml_ptrmap *m, const void *key);

#endif
