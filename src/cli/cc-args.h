/* Clang command lines for memlens cc: string vectors, @file expansion and argument roles. */
#ifndef ML_CC_ARGS_H
#define ML_CC_ARGS_H

#include <stdbool.h>

/* A growable, NULL-terminated vector of strings; strings are borrowed, never freed. */
struct ml_strv {
    char **v;
    int n, cap;
};

void ml_strv_push(struct ml_strv *s, const char *a);
void ml_strv_append(struct ml_strv *s, const struct ml_strv *from);

/* A formatted string, owned by the driver until exit; dies when memory is exhausted. */
char *ml_cc_strfmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * Appends args to out, replacing each "@file" whose file can be read by the
 * arguments it holds (GNU quoting: whitespace separates, '...' and "..."
 * quote, backslash escapes), recursively. Unreadable @files stay as they are,
 * as clang keeps them.
 */
void ml_cc_expand_rsp(struct ml_strv *out, char *const *args, int n);

/* What an argument does; each argument of a clang command line has one role. */
enum ml_cc_role {
    ML_ARG_PLAIN,     /* everything else: code generation, warnings, language */
    ML_ARG_INPUT,     /* an input file */
    ML_ARG_X,         /* -x <lang> (or its value) */
    ML_ARG_OUT,       /* -o <file> (or its value) */
    ML_ARG_PHASE,     /* -c, -S */
    ML_ARG_PP,        /* preprocessor only: -D, -U, -I, -include, -Wp, ... */
    ML_ARG_DEP,       /* dependency files: -MD, -MMD, -MF, -MT, -MQ, -MP, ... */
    ML_ARG_LINK,      /* link only: -l, -L, -Wl, -Xlinker, -shared, -static, ... */
    ML_ARG_LTO,       /* -flto, -flto=..., -fno-lto */
    ML_ARG_SEPARATOR, /* "--": what follows are inputs; never copied by itself */
};

enum ml_cc_kind {
    ML_IN_SRC,   /* C or C++ (also preprocessed): instrumented */
    ML_IN_ASM,   /* assembly: compiled natively */
    ML_IN_OTHER, /* headers, IR, Objective-C, CUDA...: the command passes through */
    ML_IN_LINK,  /* objects, archives, shared libraries, unknown files */
};

struct ml_cc_input {
    int argi;         /* index in args */
    const char *path; /* "-" is standard input */
    const char *lang; /* the -x in effect, or NULL */
    enum ml_cc_kind kind;
    bool cfamily; /* C or C++ source or header, or standard input without -x */
};

enum ml_cc_save {
    ML_SAVE_NONE,
    ML_SAVE_CWD, /* -save-temps, -save-temps=cwd: intermediate files in the current directory */
    ML_SAVE_OBJ, /* -save-temps=obj: next to the output named by -o */
};

enum ml_cc_mode {
    ML_MODE_LINK, /* no -c/-S: compile what needs it, then link */
    ML_MODE_OBJ,  /* -c */
    ML_MODE_ASM,  /* -S */
    ML_MODE_PASS, /* run clang untouched (-E, -M, --version, no inputs, ...) */
};

struct ml_cc_cmd {
    struct ml_strv args; /* clang arguments after @file expansion (no argv[0]) */
    unsigned char *role; /* enum ml_cc_role per argument */
    struct ml_cc_input *in;
    int nin;
    enum ml_cc_mode mode;
    const char *out;     /* value of the last -o, or NULL */
    const char *olevel;  /* the last -O option ("-O2"), or NULL */
    const char *target;  /* the last --target=<triple> or -target <triple>, or NULL */
    bool shared;         /* -shared */
    bool nolibs;         /* -nostdlib, -nodefaultlibs or -r: no runtime is added */
    bool flto;           /* -flto or -flto=... last wins over -fno-lto */
    bool md;             /* -MD, -MMD or -Wp,-MD,...: a .d file is written while compiling */
    bool mf;             /* the .d file is named (-MF, -Wp,-MD,<file>) */
    const char *depfile; /* that name (the last one), or NULL */
    bool mt;             /* the dependency target is named (-MT, -MQ) */
    bool cfamily;        /* some input is C or C++ (source or header): it sees memlens.h */
    enum ml_cc_save save_temps;
};

/* Classifies the arguments already in c->args. Never fails: odd lines pass through to clang. */
void ml_cc_parse(struct ml_cc_cmd *c);

/* Number of inputs of the given kind. */
int ml_cc_count(const struct ml_cc_cmd *c, enum ml_cc_kind kind);

#endif
