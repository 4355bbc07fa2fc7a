/* Basic blocks of a parsed assembly file: leaders at referenced labels and after control transfers.
 */
#include "instrument/asm/asm.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int is_section_directive(const char *d)
{
    return !strcmp(d, ".text") || !strcmp(d, ".data") || !strcmp(d, ".bss") ||
           !strcmp(d, ".section") || !strcmp(d, ".pushsection") || !strcmp(d, ".popsection") ||
           !strcmp(d, ".previous");
}

/*
 * Whether lines (from, to) hold a leader: a label that may be a target (every
 * non-local label, and local ones referenced outside debug sections), inline
 * assembly, or a change of section. *label gets the last such label's line.
 */
static int leader_between(const struct ml_asm_file *f, int from, int to, int *label)
{
    int lead = 0;

    for (int i = from + 1; i < to; i++) {
        const struct ml_asm_line *l = &f->line[i];

        if (l->kind == ML_ASM_LABEL &&
            (strncmp(l->name, ".L", 2) || ml_asm_is_referenced(f, l->name))) {
            lead = 1;
            *label = i;
        } else if (l->kind == ML_ASM_APP ||
                   (l->kind == ML_ASM_DIRECTIVE && is_section_directive(l->name))) {
            lead = 1;
        }
    }
    return lead;
}

int ml_asm_blocks(const struct ml_asm_file *f, const struct ml_asm_units *u,
                  const struct ml_asm_insn *insn, struct ml_asm_block **blocks)
{
    struct ml_asm_block *b = malloc((u->n + 1) * sizeof(*b));
    int nb = 0;

    *blocks = b;
    if (!b)
        return -ENOMEM;
    for (int k = 0; k < u->n; k++) {
        int func = f->line[u->first[k]].func, label = -1, lead, other = 1;

        if (k == 0) {
            lead = 1;
            leader_between(f, -1, u->first[k], &label);
        } else {
            other = leader_between(f, u->last[k - 1], u->first[k], &label) ||
                    func != f->line[u->first[k - 1]].func || insn[k - 1].opaque || insn[k].opaque;
            lead = other || insn[k - 1].flow != ML_ASM_FLOW_NONE;
        }
        if (lead) {
            if (nb)
                b[nb - 1].end = k;
            b[nb++] = (struct ml_asm_block){func, k, k + 1, label,
                                            !other && insn[k - 1].flow == ML_ASM_FLOW_CALL};
        }
    }
    if (nb)
        b[nb - 1].end = u->n;
    return nb;
}

/* Callees that may return twice: the code after their call runs more often than before it. */
static int returns_twice(const char *target)
{
    static const char *const names[] = {"setjmp",      "_setjmp", "__setjmp", "sigsetjmp",
                                        "__sigsetjmp", "savectx", "vfork",    "getcontext",
                                        "__vfork",     "qsetjmp"};
    size_t n = strcspn(target, "@ \t");

    if (*target == '*') /* through the GOT with -fno-plt: the name follows */
        return returns_twice(target + 1);
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strlen(names[i]) == n && !strncmp(target, names[i], n))
            return 1;
    return 0;
}

int ml_asm_chain_calls(const struct ml_asm_file *f, const struct ml_asm_units *u,
                       struct ml_asm_block *blocks, int nb)
{
    int n = 0;

    for (int i = 0; i < nb; i++) {
        const char *target = i ? f->line[u->last[blocks[i].first - 1]].operands : "";

        while (*target == ' ' || *target == '\t')
            target++;
        if (n && blocks[i].after_call && !returns_twice(target))
            blocks[n - 1].end = blocks[i].end;
        else
            blocks[n++] = blocks[i];
    }
    return n;
}
