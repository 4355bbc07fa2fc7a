/* memlens instrument: bitcode in, instrumented bitcode out (used by 'memlens cc', handy for
 * debugging). */
#include "cli/cc-exec.h"
#include "cli/cli.h"
#include "instrument/ir/instrument.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char instrument_usage[] =
    "usage: memlens instrument [-o <out.bc>] <in.bc>...\n"
    "\n"
    "Instruments LLVM 14 bitcode for region profiling. Several inputs are linked\n"
    "into one module first (whole-program mode).\n"
    "\n"
    "    -o <file>   output bitcode (default: a.ml.bc)\n"
    "    --exact     also report every access with its address (slow; for checking)\n"
    "    --all       count every function, not only region code\n"
    "    --trace     instrument for memory traces instead (as memlens cc --trace)\n"
    "    --trace-functions, --trace-loops   with function or loop markers\n"
    "    --events=MODS   instrument for event profiling instead (as memlens cc --events=MODS);\n"
    "                    'llvm-dis-14 out.bc' shows which events and values each module costs\n";

static void print_warning(void *ctx, const char *msg)
{
    (void)ctx;
    warning("%s", msg);
}

int cmd_instrument(int argc, char **argv)
{
    const char *out = "a.ml.bc";
    struct ml_ir_input in[argc];
    struct ml_ir_opts o = {.warn = print_warning};
    LLVMMemoryBufferRef bc;
    struct ml_cc_buf same;
    char err[512];
    int n = 0, rc;

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(instrument_usage, stdout);
            return 0;
        } else if (!strcmp(argv[i], "--exact")) {
            o.exact = 1;
        } else if (!strcmp(argv[i], "--all")) {
            o.all = 1;
        } else if (!strcmp(argv[i], "--trace")) {
            o.trace = 1;
        } else if (!strcmp(argv[i], "--trace-functions")) {
            o.trace = o.trace_functions = 1;
        } else if (!strcmp(argv[i], "--trace-loops")) {
            o.trace = o.trace_loops = 1;
        } else if (!strncmp(argv[i], "--events=", 9)) {
            ml_cli_events(argv[i] + 9, &o.events, &o.event_fields);
        } else if (!strcmp(argv[i], "-o") && i + 1 < argc) {
            out = argv[++i];
        } else if (argv[i][0] == '-') {
            error("unknown option '%s'", argv[i]);
            usage(instrument_usage);
        } else {
            in[n++] = (struct ml_ir_input){.path = argv[i]};
        }
    }
    if (!n)
        usage(instrument_usage);
    if (o.events && o.trace)
        die("--events and --trace build for different tools; choose one");
    if (ml_ir_instrument_bitcode(in, n, &o, &bc, err, sizeof(err)))
        die("%s", err);
    if (bc) {
        rc = ml_cc_write(out, LLVMGetBufferStart(bc), LLVMGetBufferSize(bc));
        LLVMDisposeMemoryBuffer(bc);
    } else if (!(rc = ml_cc_read(in[0].path, &same))) {
        /* nothing to instrument: the input as it is */
        rc = ml_cc_write(out, same.data, same.len);
        free(same.data);
    }
    if (rc) {
        error("cannot write '%s': %s", out, strerror(-rc));
        return 1;
    }
    return 0;
}
