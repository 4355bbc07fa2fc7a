/* Registry of profiling modules: one struct ml_module per file in src/backend/modules/. */
#include "backend/backend.h"

#include <string.h>

extern const struct ml_module ml_module_stats;
extern const struct ml_module ml_module_dep;
extern const struct ml_module ml_module_sharing;
extern const struct ml_module ml_module_lifetime;
extern const struct ml_module ml_module_pointsto;
extern const struct ml_module ml_module_value;

const struct ml_module *const ml_modules[] = {
    &ml_module_dep,
    &ml_module_lifetime,
    &ml_module_pointsto,
    &ml_module_sharing,
    &ml_module_stats,
    &ml_module_value,
    NULL,
};

const struct ml_module *ml_module_find(const char *name)
{
    for (size_t i = 0; ml_modules[i]; i++)
        if (!strcmp(ml_modules[i]->name, name))
            return ml_modules[i];
    return NULL;
}
