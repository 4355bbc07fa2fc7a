/* memlens cc: a drop-in for clang-14 / clang++-14 that instruments each translation unit. */
#include "backend/backend.h"
#include "cli/cc-args.h"
#include "cli/cc-asm.h"
#include "cli/cc-exec.h"
#include "cli/cc-link.h"
#include "cli/cli.h"
#include "format/events.h"
#include "instrument/ir/instrument.h"

#include <errno.h>
#include <llvm-c/Core.h>
#include <llvm-c/ErrorHandling.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef ML_CLANG
#define ML_CLANG "clang-14"
#endif
#ifndef ML_CLANGXX
#define ML_CLANGXX "clang++-14"
#endif

/* The target the tool itself was built for: <prefix>/lib/libmemlens-rt.a is for this one. */
#if defined(__x86_64__)
#define HOST_TARGET "x86_64-linux-gnu"
#elif defined(__aarch64__)
#define HOST_TARGET "aarch64-linux-gnu"
#else
#define HOST_TARGET ""
#endif

static const char cc_usage[] =
    "usage: memlens cc [<memlens options>] [--] <clang arguments>...\n"
    "       memlens-cc  [--ml-<option>...] <clang arguments>...\n"
    "       memlens-c++ [--ml-<option>...] <clang++ arguments>...\n"
    "\n"
    "Compiles C and C++ like clang-14 / clang++-14 and instruments every translation\n"
    "unit for region profiling (MEMLENS_ROI_BEGIN/END from <memlens.h>); links the\n"
    "memlens runtime into executables. Use it as CC=memlens-cc CXX=memlens-c++.\n"
    "\n"
    "memlens options (for memlens-cc / memlens-c++ spell them --ml-<option>; they\n"
    "are also read, in either spelling, from the environment variable MEMLENS_CCFLAGS):\n"
    "    --whole-program   instrument the whole program at link time: '-c' emits\n"
    "                      optimised bitcode objects, the link merges all bitcode\n"
    "                      (also bitcode members of archives named on the command\n"
    "                      line), instruments it once and compiles it to one object;\n"
    "                      implied by -flto\n"
    "    --exact           also report every access of region code with its address\n"
    "                      (slow; a check of the byte counts, see docs/regions.md)\n"
    "    --all             count every function, not only regions (find the code\n"
    "                      worth a region with 'memlens report --top N')\n"
    "    --trace           build for memory traces instead: record every load and\n"
    "                      store with markers (see 'memlens trace --help')\n"
    "    --trace-functions with --trace, also record function entries and exits\n"
    "    --trace-loops     with --trace, also record loop entries, iterations and exits\n"
    "    --events=MODS     build for event profiling instead ('memlens profile'):\n"
    "                      only the events the profiling modules MODS need, e.g.\n"
    "                      --events=dep,sharing (see 'memlens profile --list-modules')\n"
    "    --trace=asm[,omega=W][,chunk=C][,mode=ns|ma|aia][,scores=S1:S2:S3]\n"
    "                      selective machine-code tracing: rewrite the x86-64\n"
    "                      assembly of each unit so that per basic block about W of\n"
    "                      its memory accesses (default 0.25) record their address\n"
    "                      and stand for the others at granularity C bytes (default\n"
    "                      4096); mode ns records every access (docs/select.md)\n"
    "    --explain         with --trace=asm: print per function and block what was\n"
    "                      selected and why\n"
    "    --verbose         print every command memlens runs\n"
    "    --keep-temps      keep the temporary directory and print its name\n"
    "    --c++             use clang++ (memlens cc only; memlens-c++ always does)\n"
    "    --print-include-dir  print the directory of memlens.h and exit (the header\n"
    "                      also works without memlens: vendor it, see docs/cc.md)\n"
    "    --help            this text ('memlens-cc --help' shows clang's help)\n"
    "\n"
    "Environment: MEMLENS_CLANG, MEMLENS_CLANGXX name the compilers (default clang-14,\n"
    "clang++-14); TMPDIR holds temporary files (default /tmp).\n"
    "\n"
    "Passed to clang without instrumenting (with -D__MEMLENS__ and memlens.h on the\n"
    "include path, as for compiling): -E, -M, -MM, -fsyntax-only, -emit-llvm, -###,\n"
    "--version, -print-*, -dump*, commands without inputs and commands with header,\n"
    "IR, Objective-C or CUDA inputs. -save-temps also keeps the instrumented\n"
    "bitcode <stem>.ml.bc. -nostdlib links get no runtime; -shared links\n"
    "(also with -nostdlib) get the shared runtime (libmemlens-rt.so) as needed, so\n"
    "that instrumented libraries and plugins also profile in programs built without\n"
    "memlens.\n"
    "--target=aarch64-linux-gnu links the AArch64 runtime that make builds when\n"
    "Debian's arm64 cross libc is installed.\n"
    "See docs/cc.md.\n";

static struct {
    bool cxx, whole_program, compiled, exact, all, trace, trace_functions, trace_loops;
    bool events_set;       /* --events given */
    uint64_t events;       /* event kinds the chosen profiling modules need */
    unsigned event_fields; /* and their fields (ML_EVF_*) */
    bool direct; /* clang writes its outputs itself (-save-temps, side files named after -o) */
    const char *clang;
    struct ml_strv raw; /* clang arguments as given, memlens options removed */
    struct ml_cc_cmd cmd;
    const char **obj; /* per input: the object or bitcode it became, or NULL */
    const char *incdir, *rtlib;
} g;

/*
 * <prefix>/<sub>, where the executable is <prefix>/bin/memlens or (run by the
 * light bin/memlens, see main.c) <prefix>/libexec/memlens/memlens-llvm.
 */
static const char *dirs(const char *sub)
{
    char *prefix = ml_cc_strfmt("%s", ml_self_dir());
    size_t n = strlen(prefix), tail = strlen("/libexec/memlens");
    char *slash;

    if (n > tail && !strcmp(prefix + n - tail, "/libexec/memlens"))
        prefix[n - tail] = 0;
    else if ((slash = strrchr(prefix, '/')) && slash != prefix)
        *slash = 0;
    return ml_cc_strfmt("%s/%s", prefix, sub);
}

void ml_cli_events(const char *list, uint64_t *kinds, unsigned *fields)
{
    char *copy = ml_cc_strfmt("%s", list), *save = NULL;
    int any = 0, shared_loads = 1;
    uint64_t everywhere = 0, func = (1ull << ML_EV_FUNC_ENTRY) | (1ull << ML_EV_FUNC_EXIT),
             loop =
                 (1ull << ML_EV_LOOP_ENTRY) | (1ull << ML_EV_LOOP_ITER) | (1ull << ML_EV_LOOP_EXIT);

    for (char *w = strtok_r(copy, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
        const struct ml_module *m = ml_module_find(w);
        if (!m)
            die("unknown profiling module '%s' in --events; 'memlens profile --list-modules' "
                "lists them",
                w);
        *kinds |= m->ev_kinds;
        *fields |= m->ev_fields;
        everywhere |= m->ev_kinds & ~m->ev_objs_only;
        shared_loads &= m->ev_shared_loads;
        any = 1;
    }
    free(copy);
    /* Function or loop events only where objects are made when no module needs them elsewhere. */
    if ((*kinds & func) && !(everywhere & func))
        *fields |= ML_EVF_FUNC_OBJS;
    if ((*kinds & loop) && !(everywhere & loop))
        *fields |= ML_EVF_LOOP_OBJS;
    if (any && shared_loads)
        *fields |= ML_EVF_SHARED_LOADS;
    if (!any)
        die("--events needs a list of profiling modules, such as --events=dep,sharing");
}

static bool set_option(const char *name)
{
    if (!strcmp(name, "whole-program"))
        g.whole_program = true;
    else if (!strcmp(name, "exact"))
        g.exact = true;
    else if (!strcmp(name, "all"))
        g.all = true;
    else if (!strcmp(name, "trace") || !strcmp(name, "trace=ir"))
        g.trace = true;
    else if (!strcmp(name, "trace-functions"))
        g.trace_functions = true;
    else if (!strcmp(name, "trace-loops"))
        g.trace_loops = true;
    else if (!strncmp(name, "events=", 7))
        ml_cli_events(name + 7, &g.events, &g.event_fields), g.events_set = true;
    else if (!strncmp(name, "trace=asm", 9))
        ml_cc_asm_option(name + 9);
    else if (!strcmp(name, "explain"))
        ml_cc_asm.explain = true;
    else if (!strcmp(name, "verbose"))
        ml_cc_verbose = true;
    else if (!strcmp(name, "keep-temps"))
        ml_cc_keep_temps = true;
    else if (!strcmp(name, "c++"))
        g.cxx = true;
    else if (!strcmp(name, "print-include-dir")) {
        printf("%s\n", dirs("include"));
        exit(0);
    } else if (!strcmp(name, "help")) {
        fputs(cc_usage, stdout);
        exit(0);
    } else
        return false;
    return true;
}

static void env_options(void)
{
    const char *env = getenv("MEMLENS_CCFLAGS");
    char *copy, *save, *w;

    if (!env)
        return;
    copy = ml_cc_strfmt("%s", env);
    for (w = strtok_r(copy, " \t\n", &save); w; w = strtok_r(NULL, " \t\n", &save)) {
        const char *name = !strncmp(w, "--ml-", 5) ? w + 5 : !strncmp(w, "--", 2) ? w + 2 : "";

        if (!set_option(name))
            die("unknown option '%s' in MEMLENS_CCFLAGS; see 'memlens cc --help'", w);
    }
    free(copy);
}

/* The last path component without its extension, as clang names default outputs. */
static char *stem(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *s = ml_cc_strfmt("%s", slash ? slash + 1 : path);
    char *dot = strrchr(s, '.');

    if (dot)
        *dot = 0;
    return s;
}

/* path with the extension of its last component replaced by ext (llvm::sys::path style). */
static char *replace_ext(const char *path, const char *ext)
{
    char *s = ml_cc_strfmt("%s", path);
    char *base = strrchr(s, '/');
    char *dot;

    base = base ? base + 1 : s;
    dot = strrchr(base, '.');
    if (dot && strcmp(base, ".") && strcmp(base, ".."))
        *dot = 0;
    return ml_cc_strfmt("%s.%s", s, ext);
}

#define KEEP(role) (1u << (role))

static void push_args(struct ml_strv *v, unsigned keep)
{
    for (int i = 0; i < g.cmd.args.n; i++)
        if (keep & KEEP(g.cmd.role[i]))
            ml_strv_push(v, g.cmd.args.v[i]);
}

/* The user's raw command with extra arguments added before any "--". */
static void push_raw(struct ml_strv *v, const char *const *extra)
{
    int i = 0;

    ml_strv_push(v, g.clang);
    for (; i < g.raw.n && strcmp(g.raw.v[i], "--"); i++)
        ml_strv_push(v, g.raw.v[i]);
    for (; extra && *extra; extra++)
        ml_strv_push(v, *extra);
    for (; i < g.raw.n; i++)
        ml_strv_push(v, g.raw.v[i]);
}

static int run_free(struct ml_strv *v)
{
    int st = ml_cc_run(v->v);

    free(v->v);
    return st;
}

/* A write that failed (full disk, no permission): one line with the reason, exit 1. */
static noreturn void io_fail(const char *what, const char *path, int rc)
{
    error("cannot %s '%s': %s", what, path, strerror(-rc));
    exit(1);
}

static void write_or_fail(const char *path, const void *data, size_t len)
{
    int rc = ml_cc_write(path, data, len);

    if (rc)
        io_fail("write", path, rc);
}

/* Where -save-temps keeps <stem>.<ext>: the current directory, or the output's (=obj). */
static const char *save_path(const char *s, const char *ext)
{
    const char *slash = g.cmd.out ? strrchr(g.cmd.out, '/') : NULL;

    if (g.cmd.save_temps == ML_SAVE_OBJ && slash)
        return ml_cc_strfmt("%.*s/%s.%s", (int)(slash - g.cmd.out), g.cmd.out, s, ext);
    return ml_cc_strfmt("%s.%s", s, ext);
}

/* A temporary file for <stem>.<ext>, or the kept one with -save-temps. */
static const char *temp_for(const char *s, const char *ext)
{
    if (g.cmd.save_temps)
        return save_path(s, ext);
    return ml_cc_tmp_path(ml_cc_strfmt("%s.%s", s, ext));
}

static void push_memlens_defs(struct ml_strv *v)
{
    ml_strv_push(v, "-D__MEMLENS__");
    ml_strv_push(v, "-D__MEMLENS_CC__");
    ml_strv_push(v, "-I");
    ml_strv_push(v, g.incdir);
}

/* The dependency file of this input: named by -MF or -Wp,-MD,<file>, else as clang names it. */
static const char *dep_path(const struct ml_cc_input *in)
{
    if (g.cmd.depfile)
        return g.cmd.depfile;
    return g.cmd.out ? replace_ext(g.cmd.out, "d") : ml_cc_strfmt("%s.d", stem(in->path));
}

/* Does the input go through the preprocessor (so that -MD writes a dependency file)? */
static bool preprocessed(const struct ml_cc_input *in)
{
    const char *dot = strrchr(in->path, '.');

    if (in->kind != ML_IN_ASM)
        return true;
    if (in->lang)
        return !strcmp(in->lang, "assembler-with-cpp");
    return dot && (!strcmp(dot, ".S") || !strcmp(dot, ".sx"));
}

/* clang writes the dependency file of in to a pipe and memlens writes it (see run_out). */
static bool deps_piped(const struct ml_cc_input *in)
{
    return g.cmd.md && !g.direct && preprocessed(in);
}

/*
 * The user's arguments of the given roles, and the dependency file and target
 * clang would use for this input: compiling to a temporary must not change
 * them (clang derives both from -o or the input). With piped dependencies the
 * file is /dev/fd/3, so -MF and -Wp,-M[M]D,<file> make way.
 */
static void push_args_deps(struct ml_strv *v, unsigned keep, const struct ml_cc_input *in)
{
    bool deps = (keep & KEEP(ML_ARG_DEP)) && g.cmd.md && preprocessed(in);
    bool piped = deps && deps_piped(in);

    for (int i = 0; i < g.cmd.args.n; i++) {
        const char *a = g.cmd.args.v[i];

        if (!(keep & KEEP(g.cmd.role[i])))
            continue;
        if (piped && !strcmp(a, "-MF"))
            i++;
        else if (piped && !strncmp(a, "-Wp,-MD,", 8))
            ml_strv_push(v, "-MD");
        else if (piped && !strncmp(a, "-Wp,-MMD,", 9))
            ml_strv_push(v, "-MMD");
        else if (!piped || strncmp(a, "-MF", 3))
            ml_strv_push(v, a);
    }
    if (!deps)
        return;
    if (piped || !g.cmd.mf) {
        ml_strv_push(v, "-MF");
        ml_strv_push(v, piped ? "/dev/fd/3" : dep_path(in));
    }
    if (!g.cmd.mt) {
        ml_strv_push(v, "-MQ");
        ml_strv_push(v, g.cmd.out ? g.cmd.out : ml_cc_strfmt("%s.o", stem(in->path)));
    }
}

/*
 * Runs v plus "-o <out>". Normally clang writes to a pipe and memlens writes
 * out (and, for dep_in, the dependency file): on a full disk clang would
 * crash with a stack dump, memlens says so in one line. With g.direct clang
 * writes its files itself. With keep, the output also stays in *keep (and out
 * may be NULL: kept only).
 */
static int run_out(struct ml_strv *v, const char *out, struct ml_cc_buf *keep,
                   const struct ml_cc_input *dep_in)
{
    struct ml_cc_buf b, deps;
    bool piped = dep_in && deps_piped(dep_in);
    int st, rc;

    ml_strv_push(v, "-o");
    if (g.direct) {
        ml_strv_push(v, out);
        st = run_free(v);
        if (!st && keep && (rc = ml_cc_read(out, keep)))
            io_fail("read", out, rc);
        return st;
    }
    ml_strv_push(v, "-");
    st = ml_cc_run_capture(v->v, &b, piped ? &deps : NULL, false);
    free(v->v);
    if (!st && piped)
        write_or_fail(dep_path(dep_in), deps.data, deps.len);
    if (piped)
        free(deps.data);
    if (!st && out)
        write_or_fail(out, b.data, b.len);
    if (!st && keep)
        *keep = b;
    else
        free(b.data);
    return st;
}

static void push_input(struct ml_strv *v, const struct ml_cc_input *in)
{
    if (in->lang) {
        ml_strv_push(v, "-x");
        ml_strv_push(v, in->lang);
    }
    ml_strv_push(v, in->path);
}

/* The front end's command: the user's flags, bitcode out, memlens.h on the include path. */
static void push_frontend(struct ml_strv *v, const struct ml_cc_input *in, bool deps)
{
    ml_strv_push(v, g.clang);
    push_args_deps(
        v, KEEP(ML_ARG_PLAIN) | KEEP(ML_ARG_PP) | KEEP(ML_ARG_LTO) | (deps ? KEEP(ML_ARG_DEP) : 0),
        in);
    /* A one-shot build's link flags are unused here, but were not in the user's command. */
    if (g.cmd.mode == ML_MODE_LINK)
        ml_strv_push(v, "-Qunused-arguments");
    ml_strv_push(v, "-c");
    ml_strv_push(v, "-emit-llvm");
    push_memlens_defs(v);
    push_input(v, in);
}

/* Source to bitcode with the user's flags: preprocessing, front end and optimisation. */
static int run_frontend(const struct ml_cc_input *in, const char *bc, struct ml_cc_buf *keep)
{
    struct ml_strv v = {0};

    push_frontend(&v, in, true);
    return run_out(&v, bc, keep, in);
}

/*
 * Instrumented bitcode to an object (or assembly) with the user's code
 * generation flags. The optimisation pipeline already ran on the bitcode and
 * must not run again, so that instrumented code matches uninstrumented code.
 */
/*
 * Code generation of instrumented bitcode. whole: the whole program at the
 * link, whose command often has no -O (many Makefiles link without it): code
 * is then generated at -O2, the level the link's optimisation pipeline uses,
 * not at -O0 (docs/cc.md, whole-program mode).
 */
static int run_codegen(const char *bc, const char *out, bool assembly, bool whole)
{
    struct ml_strv v = {0};

    ml_strv_push(&v, g.clang);
    push_args(&v, KEEP(ML_ARG_PLAIN));
    if (whole && !g.cmd.olevel)
        ml_strv_push(&v, "-O2");
    ml_strv_push(&v, "-Qunused-arguments");
    ml_strv_push(&v, "-Xclang");
    ml_strv_push(&v, "-disable-llvm-passes");
    ml_strv_push(&v, assembly ? "-S" : "-c");
    ml_strv_push(&v, bc);
    return run_out(&v, out, NULL, NULL);
}

static int run_assembler(const struct ml_cc_input *in, const char *out)
{
    struct ml_strv v = {0};

    ml_strv_push(&v, g.clang);
    push_args_deps(&v, KEEP(ML_ARG_PLAIN) | KEEP(ML_ARG_PP) | KEEP(ML_ARG_DEP), in);
    if (g.cmd.mode == ML_MODE_LINK)
        ml_strv_push(&v, "-Qunused-arguments");
    ml_strv_push(&v, "-c");
    push_input(&v, in);
    return run_out(&v, out, NULL, in);
}

/* A message that names its source location ("file:line:col: warning: ...") prints as clang's do. */
static void print_warning(void *ctx, const char *msg)
{
    (void)ctx;
    if (strstr(msg, ": warning: "))
        fprintf(stderr, "%s\n", msg);
    else
        warning("%s", msg);
}

static struct ml_ir_opts ir_opts(void)
{
    if (g.events_set && (g.trace || g.trace_functions || g.trace_loops))
        die("--events and --trace build for different tools; choose one");
    return (struct ml_ir_opts){.warn = print_warning,
                               .exact = g.exact,
                               .all = g.all,
                               .trace = g.trace || g.trace_functions || g.trace_loops,
                               .trace_functions = g.trace_functions,
                               .trace_loops = g.trace_loops,
                               .events = g.events,
                               .event_fields = g.event_fields};
}

/* Length of the "<file>:<line>[:<column>]" that starts msg, or 0. */
static size_t location_len(const char *msg)
{
    const char *sep = strstr(msg, ": ");
    const char *p = sep;

    if (!sep || !strncmp(msg, "function '", 10))
        return 0;
    while (p > msg && p[-1] >= '0' && p[-1] <= '9')
        p--;
    return p < sep && p > msg && p[-1] == ':' ? (size_t)(sep - msg) : 0;
}

/*
 * An error in the markers of a source. Reported like clang's errors, at the
 * marker: without debug information the instrumenter knows only the function,
 * so the front end runs again with line tables (which do not change the
 * optimised code) to find the line.
 */
static int marker_error(const struct ml_cc_input *in, const char *msg)
{
    struct ml_strv v = {0};
    struct ml_cc_buf bc = {0}, none;
    struct ml_ir_opts o = ir_opts();
    LLVMMemoryBufferRef out = NULL;
    char err[512] = "";
    size_t n;

    if (!location_len(msg)) {
        const char *tmp = ml_cc_tmp_path(ml_cc_strfmt("%s.g.bc", stem(in->path)));

        push_frontend(&v, in, false);
        ml_strv_push(&v, "-gline-tables-only");
        ml_strv_push(&v, "-o");
        ml_strv_push(&v, tmp);
        o.warn = NULL;
        if (!ml_cc_run_capture(v.v, &none, NULL, true) && !ml_cc_read(tmp, &bc)) {
            struct ml_ir_input src = {in->path, bc.data, bc.len};

            if (ml_ir_instrument_bitcode(&src, 1, &o, &out, err, sizeof(err)) && location_len(err))
                msg = err;
        }
        free(v.v);
        free(none.data);
        free(bc.data);
        if (out)
            LLVMDisposeMemoryBuffer(out);
    }
    n = location_len(msg);
    fflush(stdout);
    if (n)
        fprintf(stderr, "%.*s: error: %s\n", (int)n, msg, msg + n + 2);
    else
        error("cannot instrument '%s': %s", in->path, msg);
    return 1;
}

/* Instruments the bitcode of one source into ml, the file code generation reads. */
static int instrument_source(const struct ml_cc_input *in, const struct ml_cc_buf *bc,
                             const char *ml)
{
    struct ml_ir_input src = {in->path, bc->data, bc->len};
    struct ml_ir_opts o = ir_opts();
    LLVMMemoryBufferRef out;
    char err[512];
    int rc;

    if (ml_cc_verbose)
        fprintf(stderr, "memlens: instrument %s -> %s\n", in->path, ml);
    rc = ml_ir_instrument_bitcode(&src, 1, &o, &out, err, sizeof(err));
    if (rc == -EINVAL)
        return marker_error(in, err);
    if (rc)
        die("cannot instrument '%s': %s", in->path, err);
    /* Nothing to instrument: the front end's own bytes keep clang's use-list order. */
    if (!out) {
        write_or_fail(ml, bc->data, bc->len);
        return 0;
    }
    write_or_fail(ml, LLVMGetBufferStart(out), LLVMGetBufferSize(out));
    LLVMDisposeMemoryBuffer(out);
    return 0;
}

/* Instruments a whole-program bitcode file; returns the file code generation reads. */
static const char *instrument_file(const char *in, const char *what)
{
    struct ml_ir_input src = {in, NULL, 0};
    struct ml_ir_opts o = ir_opts();
    LLVMMemoryBufferRef out;
    const char *ml = ml_cc_tmp_path("whole-program.ml.bc");
    char err[512];

    if (ml_cc_verbose)
        fprintf(stderr, "memlens: instrument %s -> %s\n", in, ml);
    if (ml_ir_instrument_bitcode(&src, 1, &o, &out, err, sizeof(err)))
        die("cannot instrument '%s': %s", what, err);
    if (!out)
        return in;
    write_or_fail(ml, LLVMGetBufferStart(out), LLVMGetBufferSize(out));
    LLVMDisposeMemoryBuffer(out);
    return ml;
}

/* --trace=asm: bitcode to an object through rewritten assembly (cli/cc-asm.c). */
static int compile_asm(const char *bc, const char *s, const char *what, const char *out,
                       bool assembly)
{
    struct ml_strv plain = {0};
    int st;

    push_args(&plain, KEEP(ML_ARG_PLAIN));
    ml_strv_push(&plain, NULL);
    plain.n--;
    st = ml_cc_asm_compile(g.clang, plain.v, g.cmd.olevel, bc, s, what, out, assembly);
    free(plain.v);
    return st;
}

/* Compiles one source to an instrumented object or assembly file. */
static int compile_source(const struct ml_cc_input *in, const char *out, bool assembly)
{
    char *s = stem(in->path);
    const char *ml = temp_for(s, "ml.bc");
    struct ml_cc_buf bc;
    /* --trace=asm generates code from a file; instrumented IR needs the bitcode in memory. */
    const char *bc_file = ml_cc_asm.on ? temp_for(s, "bc")
                          : g.direct   ? temp_for(s, "opt.bc")
                                       : NULL;
    int st = run_frontend(in, bc_file, ml_cc_asm.on ? NULL : &bc);

    if (st)
        return st;
    if (ml_cc_asm.on)
        return compile_asm(bc_file, s, in->path, out, assembly);
    st = instrument_source(in, &bc, ml);
    free(bc.data);
    if (st)
        return st;
    return run_codegen(ml, out, assembly, false);
}

/* -c and -S: one output per input, named like clang names them. Failures do not stop the rest. */
static int compile_only(void)
{
    bool assembly = g.cmd.mode == ML_MODE_ASM;
    int status = 0;

    for (int i = 0; i < g.cmd.nin; i++) {
        const struct ml_cc_input *in = &g.cmd.in[i];
        const char *out = g.cmd.out;
        int st = 0;

        if (!out)
            out = ml_cc_strfmt("%s.%s", stem(in->path), assembly ? "s" : "o");
        /* Whole-program objects are optimised bitcode, instrumented when linked. */
        if (in->kind == ML_IN_SRC && g.whole_program && !assembly)
            st = run_frontend(in, out, NULL);
        else if (in->kind == ML_IN_SRC)
            st = compile_source(in, out, assembly);
        else if (in->kind == ML_IN_ASM)
            st = run_assembler(in, out);
        if (st && !status)
            status = st;
    }
    return status;
}

/*
 * A target triple as runtime directories are named: <arch>-<os>-<env> without
 * the vendor (clang reads aarch64-linux-gnu and aarch64-unknown-linux-gnu
 * alike), arm64 spelled aarch64, and gnu the environment when Linux names none.
 */
static const char *target_key(const char *triple)
{
    char *c[4] = {0}, *save, *s = ml_cc_strfmt("%s", triple);
    int n = 0;

    for (char *w = strtok_r(s, "-", &save); w && n < 4; w = strtok_r(NULL, "-", &save))
        c[n++] = w;
    if (!n)
        return triple;
    if (n >= 3 && strcmp(c[1], "linux")) {
        c[1] = c[2];
        c[2] = c[3];
    }
    if (!strcmp(c[0], "arm64"))
        c[0] = "aarch64";
    if (c[1] && !strcmp(c[1], "linux") && !c[2])
        c[2] = "gnu";
    return ml_cc_strfmt("%s%s%s%s%s", c[0], c[1] ? "-" : "", c[1] ? c[1] : "", c[2] ? "-" : "",
                        c[2] ? c[2] : "");
}

/* The runtime archive for the target of this command: the host's, or lib/<triple>/. */
static const char *runtime_for_target(const char **key)
{
    *key = g.cmd.target ? target_key(g.cmd.target) : HOST_TARGET;
    if (!strcmp(*key, HOST_TARGET))
        return dirs("lib/libmemlens-rt.a");
    return dirs(ml_cc_strfmt("lib/%s/libmemlens-rt.a", *key));
}

static void push_runtime(struct ml_strv *v)
{
    const char *key, *need;

    /* libtool links C++ libraries -shared -nostdlib, naming every library itself */
    if (g.cmd.nolibs && !g.cmd.shared)
        return;
    g.rtlib = runtime_for_target(&key);
    need = ml_cc_runtime_args(
        v, &g.cmd, g.rtlib,
        g.events & (1ull << ML_EV_ALLOC | 1ull << ML_EV_FREE | 1ull << ML_EV_REALLOC));
    if (!access(need, R_OK))
        ;
    else if (!strcmp(key, HOST_TARGET))
        die("cannot find the memlens runtime '%s' (build it with 'make')", need);
    else if (!strcmp(key, "aarch64-linux-gnu"))
        die("no runtime for target '%s': install libc6-dev-arm64-cross and "
            "binutils-aarch64-linux-gnu, then run make",
            key);
    else
        die("no runtime for target '%s' (no '%s'): memlens builds runtimes for %s and "
            "aarch64-linux-gnu",
            key, need, HOST_TARGET);
}

/*
 * Whole-program mode: merges the bitcode of the program, instruments it once
 * and compiles it to one object. Returns that object, or NULL if there was no
 * bitcode; *first is the input position where it goes on the link line.
 */
static const char *whole_program(int *first)
{
    struct ml_strv objs = {0}, ars = {0};
    const char *merged, *opt, *ml, *obj;
    char err[512];
    int pulled, first_ar = -1, *ar_input = calloc(g.cmd.nin + 1, sizeof(int));
    bool *ar_all_bitcode = calloc(g.cmd.nin + 1, sizeof(bool));

    if (!ar_input || !ar_all_bitcode)
        die("out of memory");
    *first = -1;
    for (int i = 0; i < g.cmd.nin; i++) {
        const struct ml_cc_input *in = &g.cmd.in[i];

        if (in->kind == ML_IN_SRC || (in->kind == ML_IN_LINK && ml_cc_is_bitcode(in->path))) {
            ml_strv_push(&objs, g.obj[i] ? g.obj[i] : in->path);
            g.obj[i] = "";
            if (*first < 0)
                *first = i;
        } else if (in->kind == ML_IN_LINK && ml_cc_is_archive(in->path)) {
            ar_input[ars.n] = i;
            ml_strv_push(&ars, in->path);
            if (first_ar < 0)
                first_ar = i;
        }
    }
    if (!objs.n && !ars.n)
        return NULL;
    merged = ml_cc_tmp_path("whole-program.bc");
    if (ml_cc_verbose)
        fprintf(stderr, "memlens: link %d bitcode file(s) and archive members -> %s\n", objs.n,
                merged);
    pulled =
        ml_cc_merge_bitcode(objs.v, objs.n, ars.v, ars.n, merged, ar_all_bitcode, err, sizeof(err));
    for (int a = 0; pulled >= 0 && a < ars.n; a++)
        if (ar_all_bitcode[a])
            g.obj[ar_input[a]] = ""; /* merged above; ld cannot read bitcode members */
    free(objs.v);
    free(ars.v);
    free(ar_input);
    free(ar_all_bitcode);
    if (pulled < 0 && !objs.n)
        return NULL; /* archives without bitcode members: nothing to do */
    if (pulled < 0)
        die("cannot link the whole program: %s", err);
    if (*first < 0)
        *first = first_ar;
    opt = merged;
    if (g.cmd.flto) {
        /* -flto objects went through the pre-link pipeline only: finish optimising. */
        struct ml_strv v = {0};

        opt = ml_cc_tmp_path("whole-program.opt.bc");
        ml_strv_push(&v, g.clang);
        push_args(&v, KEEP(ML_ARG_PLAIN));
        if (!g.cmd.olevel)
            ml_strv_push(&v, "-O2");
        ml_strv_push(&v, "-Qunused-arguments");
        ml_strv_push(&v, "-c");
        ml_strv_push(&v, "-emit-llvm");
        ml_strv_push(&v, merged);
        int st = run_out(&v, opt, NULL, NULL);

        if (st)
            exit(st);
    }
    obj = ml_cc_tmp_path("whole-program.o");
    int st;

    if (ml_cc_asm.on) {
        st = compile_asm(opt, "whole-program", g.cmd.out ? g.cmd.out : "a.out", obj, false);
    } else {
        ml = instrument_file(opt, g.cmd.out ? g.cmd.out : "a.out");
        st = run_codegen(ml, obj, false, true);
    }

    if (st)
        exit(st);
    return obj;
}

static int compile_and_link(void)
{
    bool wp = g.whole_program || g.cmd.flto;
    const char *wpobj = NULL;
    struct ml_strv v = {0};
    int status = 0, wpfirst = -1, k = 0;

    g.obj = calloc(g.cmd.nin, sizeof(*g.obj));
    if (!g.obj)
        die("out of memory");
    for (int i = 0; i < g.cmd.nin && !wp; i++)
        wp = g.cmd.in[i].kind == ML_IN_LINK && ml_cc_is_bitcode(g.cmd.in[i].path);
    for (int i = 0; i < g.cmd.nin; i++) {
        const struct ml_cc_input *in = &g.cmd.in[i];
        char *s = stem(in->path);
        int st = 0;

        if (in->kind == ML_IN_SRC && wp) {
            g.obj[i] = temp_for(s, "bc");
            st = run_frontend(in, g.obj[i], NULL);
        } else if (in->kind == ML_IN_SRC) {
            g.obj[i] = temp_for(s, "o");
            st = compile_source(in, g.obj[i], false);
        } else if (in->kind == ML_IN_ASM) {
            g.obj[i] = temp_for(s, "o");
            st = run_assembler(in, g.obj[i]);
        }
        g.compiled |= in->kind != ML_IN_LINK;
        if (st && !status)
            status = st;
    }
    if (status)
        return status;
    if (wp)
        wpobj = whole_program(&wpfirst);
    if (!g.compiled && !wpobj) {
        struct ml_strv all = {0};

        push_runtime(&v);
        push_raw(&all, (const char *const *)v.v);
        free(v.v);
        return run_free(&all);
    }
    /* The user's command with every compiled input replaced by its object. */
    ml_strv_push(&v, g.clang);
    for (int i = 0; i < g.cmd.args.n; i++) {
        enum ml_cc_role r = g.cmd.role[i];

        if (r == ML_ARG_X || r == ML_ARG_SEPARATOR)
            continue;
        if (r != ML_ARG_INPUT) {
            ml_strv_push(&v, g.cmd.args.v[i]);
            continue;
        }
        while (k < g.cmd.nin && g.cmd.in[k].argi < i)
            k++;
        if (wpobj && k == wpfirst)
            ml_strv_push(&v, wpobj);
        if (!g.obj[k])
            ml_strv_push(&v, g.cmd.args.v[i]);
        else if (*g.obj[k])
            ml_strv_push(&v, g.obj[k]);
    }
    if (g.compiled || wpobj)
        ml_strv_push(&v, "-Qunused-arguments");
    push_runtime(&v);
    return run_free(&v);
}

/*
 * Options with which clang writes files named after its -o (so -o must be the
 * real name) or prints to standard output (which must not be the pipe).
 */
static const char *const side_file_opts[] = {
    "-gsplit-dwarf", "-ftime-trace", "-fstack-usage",      "--coverage", "-ftest-coverage",
    "-save-stats",   "-fdump-",      "-fproc-stat-report", NULL,
};

static void llvm_fatal(const char *reason)
{
    fflush(stdout);
    fprintf(stderr, "memlens: %s\n", reason);
    exit(1); /* atexit removes the temporary directory */
}

int cmd_cc(int argc, char **argv)
{
    const char *base = strrchr(argv[0], '/');
    bool symlink;
    int i = 1;

    base = base ? base + 1 : argv[0];
    symlink = !strncmp(base, "memlens-c", 9);
    if (symlink) {
        g.cxx = strstr(base, "++") != NULL;
    } else {
        for (; i < argc; i++) {
            const char *a = argv[i];

            if (!strcmp(a, "--")) {
                i++;
                break;
            }
            if (!strcmp(a, "-h"))
                set_option("help");
            if (!strncmp(a, "--ml-", 5) ? !set_option(a + 5)
                                        : strncmp(a, "--", 2) || !set_option(a + 2))
                break;
        }
        if (i >= argc)
            usage(cc_usage);
    }
    for (; i < argc; i++) {
        if (strncmp(argv[i], "--ml-", 5)) {
            ml_strv_push(&g.raw, argv[i]);
        } else if (!set_option(argv[i] + 5)) {
            error("unknown option '%s'", argv[i]);
            usage(cc_usage);
        }
    }
    env_options();
    g.clang = getenv(g.cxx ? "MEMLENS_CLANGXX" : "MEMLENS_CLANG");
    if (!g.clang || !*g.clang)
        g.clang = g.cxx ? ML_CLANGXX : ML_CLANG;
    ml_cc_expand_rsp(&g.cmd.args, g.raw.v, g.raw.n);
    if (ml_cc_asm.explain && !ml_cc_asm.on)
        die("--explain needs --trace=asm");
    if (ml_cc_asm.on)
        ml_cc_asm_take_save_temps(&g.cmd.args);
    ml_cc_parse(&g.cmd);
    if (ml_cc_asm.on && g.cmd.mode != ML_MODE_PASS)
        ml_cc_asm_check(g.cmd.target);

    struct ml_strv v = {0};

    g.incdir = dirs("include");
    /*
     * Untouched commands (and -flto objects: bitcode, instrumented when the
     * program is linked). Whatever preprocesses C or C++ (-E, -M, -fsyntax-only,
     * a precompiled header) sees the macros and include path a compile sees.
     */
    if (g.cmd.mode == ML_MODE_PASS ||
        ((g.cmd.mode == ML_MODE_ASM || g.cmd.mode == ML_MODE_OBJ) && g.cmd.flto)) {
        const char *extra[] = {"-D__MEMLENS__", "-D__MEMLENS_CC__", "-I", g.incdir, NULL};

        push_raw(&v, g.cmd.cfamily ? extra : NULL);
        ml_cc_exec(v.v);
    }
    /* Code generation writes through a pipe unless clang names side files after its -o. */
    g.direct = g.cmd.save_temps != ML_SAVE_NONE;
    for (int k = 0; k < g.cmd.args.n && !g.direct; k++)
        for (const char *const *p = side_file_opts; *p && !g.direct; p++)
            g.direct = g.cmd.role[k] != ML_ARG_INPUT && g.cmd.role[k] != ML_ARG_OUT &&
                       !strncmp(g.cmd.args.v[k], *p, strlen(*p));
    /* LLVM's fatal errors (a failed write, say) end the compile cleanly: one line, exit 1. */
    LLVMInstallFatalErrorHandler(llvm_fatal);
    if (g.cmd.mode == ML_MODE_LINK)
        return compile_and_link();
    return compile_only();
}
