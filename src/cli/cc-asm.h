/* memlens cc --trace=asm: compile through rewritten x86-64 assembly (selective machine-code
 * tracing). */
#ifndef ML_CC_ASM_H
#define ML_CC_ASM_H

#include <stdbool.h>

#include "cli/cc-args.h"
#include "instrument/asm/asm.h"

struct ml_cc_asm {
    bool on;         /* --trace=asm given */
    bool explain;    /* --explain: print per function and block what was selected and why */
    bool save_temps; /* -save-temps[=cwd|obj]: keep the generated and the rewritten assembly */
    bool save_obj;   /* -save-temps=obj: next to the output rather than in the current directory */
    struct ml_asm_params params;
};

extern struct ml_cc_asm ml_cc_asm;

/*
 * Reads the value of --trace=asm[,omega=W][,chunk=C][,mode=ns|ma|aia][,scores=S1:S2:S3]
 * (spec is what follows "asm"). Dies with a message on a bad value.
 */
void ml_cc_asm_option(const char *spec);

/* Removes -save-temps[=...] from args and remembers it. Call before ml_cc_parse. */
void ml_cc_asm_take_save_temps(struct ml_strv *args);

/* Checks the options against the command (target, -flto); dies when they cannot work. */
void ml_cc_asm_check(const char *target);

/*
 * Compiles bitcode bc to out: clang generates assembly with the user's code
 * generation flags (plain, NULL-terminated, without the input, -c/-S or -o),
 * memlens rewrites it, and clang assembles it (or out is the rewritten
 * assembly when assembly). what names the source in messages, stem its
 * basename without extension. olevel is the last -O option or NULL: at -O0
 * clang relaxes every instruction when it assembles its own output, and so
 * must the assembler here. Returns the exit status to report (0 on success).
 */
int ml_cc_asm_compile(const char *clang, char *const *plain, const char *olevel, const char *bc,
                      const char *stem, const char *what, const char *out, bool assembly);

#endif
