/* All-blocks mode: counts every defined function, and marks function entry units for the report. */
#include "instrument/ir/ir.h"
#include "runtime/abi.h"

#include <string.h>

int ml_all_setup(struct ml_ir *ir)
{
    uint32_t none = 0;

    ir->noregion = ML_NOSET;
    if (!ir->o || !ir->o->all)
        return 0;
    /* Units outside every region name the empty set, so the report can show them by function. */
    return ml_regset_intern(ir, &none, 0, &ir->noregion);
}

static int has_fn_attr(LLVMValueRef fn, const char *name)
{
    unsigned kind = LLVMGetEnumAttributeKindForName(name, strlen(name));

    return LLVMGetEnumAttributeAtIndex(fn, LLVMAttributeFunctionIndex, kind) != NULL;
}

int ml_all_wants(struct ml_ir *ir, LLVMValueRef fn)
{
    if (!ir->o || !ir->o->all || LLVMIsDeclaration(fn) || LLVMGetIntrinsicID(fn) ||
        ml_ptrmap_get(&ir->generated, fn))
        return 0;
    /* Not emitted here: the body that runs belongs to another translation unit. */
    if (LLVMGetLinkage(fn) == LLVMAvailableExternallyLinkage)
        return 0;
    /* A naked function is only inline assembly: there is nowhere to put a counter. */
    if (has_fn_attr(fn, "naked"))
        return 0;
    /* Functions with markers were instrumented in place already, outside-region code included. */
    for (size_t i = 0; i < ir->nwork; i++)
        if (ir->work[i].fn == fn && ir->work[i].ctx == ML_NOSET)
            return 0;
    return 1;
}

void ml_all_mark_entry(struct ml_ir *ir, size_t first_unit)
{
    /* Units are made in block order and a block's own unit before its bytes units. */
    if (first_unit < ir->nunits && ir->units[first_unit].kind == ML_UNIT_BLOCK)
        ir->units[first_unit].flags |= ML_RT_UNIT_ENTRY;
}
