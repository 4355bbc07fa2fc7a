/* Clang command lines for memlens cc: string vectors, @file expansion and argument roles. */
#include "cli/cc-args.h"
#include "cli/cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ml_strv_push(struct ml_strv *s, const char *a)
{
    if (s->n + 2 > s->cap) {
        int cap = s->cap ? 2 * s->cap : 32;
        char **v = realloc(s->v, cap * sizeof(*v));

        if (!v)
            die("out of memory");
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = (char *)a;
    s->v[s->n] = NULL;
}

void ml_strv_append(struct ml_strv *s, const struct ml_strv *from)
{
    for (int i = 0; i < from->n; i++)
        ml_strv_push(s, from->v[i]);
}

/* Every formatted string stays reachable until exit, so leak checkers stay quiet. */
static struct ml_strv formatted;

char *ml_cc_strfmt(const char *fmt, ...)
{
    va_list ap;
    char *s;
    int n;

    va_start(ap, fmt);
    n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0)
        die("out of memory");
    ml_strv_push(&formatted, s);
    return s;
}

/* Splits a response file's text into arguments, GNU style. */
static void split_rsp(struct ml_strv *out, const char *text, int depth);

static void expand(struct ml_strv *out, char *const *args, int n, int depth)
{
    for (int i = 0; i < n; i++) {
        FILE *f;
        char *text = NULL;
        size_t len = 0;

        /* Depth guards against a response file that names itself. */
        if (args[i][0] != '@' || depth > 20 || !(f = fopen(args[i] + 1, "r"))) {
            ml_strv_push(out, args[i]);
            continue;
        }
        FILE *mem = open_memstream(&text, &len);
        char buf[4096];
        size_t got;

        if (!mem)
            die("out of memory");
        while ((got = fread(buf, 1, sizeof(buf), f)) > 0)
            fwrite(buf, 1, got, mem);
        fclose(f);
        fclose(mem);
        split_rsp(out, text, depth);
        free(text);
    }
}

static void split_rsp(struct ml_strv *out, const char *p, int depth)
{
    struct ml_strv words = {0};

    while (*p) {
        char *w, quote = 0;
        size_t n = 0;

        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
            p++;
        if (!*p)
            break;
        w = malloc(strlen(p) + 1);
        if (!w)
            die("out of memory");
        for (; *p; p++) {
            if (quote) {
                if (*p == quote)
                    quote = 0;
                else if (*p == '\\' && quote == '"' && p[1])
                    w[n++] = *++p;
                else
                    w[n++] = *p;
            } else if (*p == '\'' || *p == '"') {
                quote = *p;
            } else if (*p == '\\' && p[1]) {
                w[n++] = *++p;
            } else if (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') {
                break;
            } else {
                w[n++] = *p;
            }
        }
        w[n] = 0;
        ml_strv_push(&words, w);
    }
    expand(out, words.v, words.n, depth + 1);
    free(words.v);
}

void ml_cc_expand_rsp(struct ml_strv *out, char *const *args, int n)
{
    expand(out, args, n, 0);
}

struct opt {
    const char *name;
    unsigned char role;
    unsigned char flags;
};

enum {
    SEP = 1,    /* "-opt value" takes the next argument */
    JOINED = 2, /* "-optvalue" is the same option */
};

/*
 * Options whose role is not PLAIN, or which take a separate value (so that the
 * value is not mistaken for an input). Longer names come before their prefixes.
 */
static const struct opt opts[] = {
    {"-o", ML_ARG_OUT, SEP | JOINED},
    {"-x", ML_ARG_X, SEP | JOINED},
    {"-c", ML_ARG_PHASE, 0},
    {"-S", ML_ARG_PHASE, 0},
    {"-D", ML_ARG_PP, SEP | JOINED},
    {"-U", ML_ARG_PP, SEP | JOINED},
    {"-I", ML_ARG_PP, SEP | JOINED},
    {"-include-pch", ML_ARG_PP, SEP},
    {"-include", ML_ARG_PP, SEP | JOINED},
    {"-imacros", ML_ARG_PP, SEP | JOINED},
    {"-isystem-after", ML_ARG_PP, SEP | JOINED},
    {"-isystem", ML_ARG_PP, SEP | JOINED},
    {"-isysroot", ML_ARG_PP, SEP | JOINED},
    {"-idirafter", ML_ARG_PP, SEP | JOINED},
    {"-iquote", ML_ARG_PP, SEP | JOINED},
    {"-iprefix", ML_ARG_PP, SEP | JOINED},
    {"-iwithprefixbefore", ML_ARG_PP, SEP | JOINED},
    {"-iwithprefix", ML_ARG_PP, SEP | JOINED},
    {"-iframework", ML_ARG_PP, SEP | JOINED},
    {"-cxx-isystem", ML_ARG_PP, SEP | JOINED},
    {"-ivfsoverlay", ML_ARG_PP, SEP},
    {"-Xpreprocessor", ML_ARG_PP, SEP},
    {"-Wp,", ML_ARG_PP, JOINED},
    {"-MF", ML_ARG_DEP, SEP | JOINED},
    {"-MT", ML_ARG_DEP, SEP | JOINED},
    {"-MQ", ML_ARG_DEP, SEP | JOINED},
    {"-MJ", ML_ARG_DEP, SEP | JOINED},
    {"-MMD", ML_ARG_DEP, 0},
    {"-MD", ML_ARG_DEP, 0},
    {"-MP", ML_ARG_DEP, 0},
    {"-MG", ML_ARG_DEP, 0},
    {"-MV", ML_ARG_DEP, 0},
    {"-l", ML_ARG_LINK, SEP | JOINED},
    {"-L", ML_ARG_LINK, SEP | JOINED},
    {"-Wl,", ML_ARG_LINK, JOINED},
    {"-Xlinker", ML_ARG_LINK, SEP},
    {"-u", ML_ARG_LINK, SEP | JOINED},
    {"-T", ML_ARG_LINK, SEP | JOINED},
    {"-z", ML_ARG_LINK, SEP},
    {"-e", ML_ARG_LINK, SEP},
    {"-shared", ML_ARG_LINK, 0},
    {"-static", ML_ARG_LINK, 0},
    {"-static-libgcc", ML_ARG_LINK, 0},
    {"-static-libstdc++", ML_ARG_LINK, 0},
    {"-shared-libgcc", ML_ARG_LINK, 0},
    {"-static-pie", ML_ARG_LINK, 0},
    {"-rdynamic", ML_ARG_LINK, 0},
    {"-pie", ML_ARG_LINK, 0},
    {"-no-pie", ML_ARG_LINK, 0},
    {"-nopie", ML_ARG_LINK, 0},
    {"-s", ML_ARG_LINK, 0},
    {"-r", ML_ARG_LINK, 0},
    {"-nostdlib", ML_ARG_LINK, 0},
    {"-nodefaultlibs", ML_ARG_LINK, 0},
    {"-nostartfiles", ML_ARG_LINK, 0},
    {"-fuse-ld=", ML_ARG_LINK, JOINED},
    {"--ld-path=", ML_ARG_LINK, JOINED},
    {"-flto=", ML_ARG_LTO, JOINED},
    {"-flto", ML_ARG_LTO, 0},
    {"-fno-lto", ML_ARG_LTO, 0},
    /* Plain options with a separate value. */
    {"-Xclang", ML_ARG_PLAIN, SEP},
    {"-mllvm", ML_ARG_PLAIN, SEP},
    {"-Xassembler", ML_ARG_PLAIN, SEP},
    {"-Xopenmp-target", ML_ARG_PLAIN, SEP},
    {"-target", ML_ARG_PLAIN, SEP},
    {"-arch", ML_ARG_PLAIN, SEP},
    {"-gcc-toolchain", ML_ARG_PLAIN, SEP},
    {"--sysroot", ML_ARG_PLAIN, SEP},
    {"-resource-dir", ML_ARG_PLAIN, SEP},
    {"-working-directory", ML_ARG_PLAIN, SEP},
    {"-serialize-diagnostics", ML_ARG_PLAIN, SEP},
    {"--param", ML_ARG_PLAIN, SEP},
    {"-B", ML_ARG_PLAIN, SEP},
};

/* Options after which clang does something memlens leaves alone. */
static const char *const pass_opts[] = {
    "-E",           "-M",           "-MM",          "-fsyntax-only", "-emit-llvm", "-###",
    "--analyze",    "-precompile",  "-emit-ast",    "--help",        "-help",      "--help-hidden",
    "--version",    "-dumpversion", "-dumpmachine", "-dumpspecs",    "-cc1",       "-cc1as",
    "--precompile",
};

static bool has_ext(const char *path, const char *const *exts)
{
    const char *slash = strrchr(path, '/');
    const char *dot = strrchr(slash ? slash + 1 : path, '.');

    if (!dot)
        return false;
    for (; *exts; exts++)
        if (!strcmp(dot + 1, *exts))
            return true;
    return false;
}

static enum ml_cc_kind kind_of(const char *path, const char *lang)
{
    static const char *const src[] = {"c",   "i",   "cc", "cp", "cpp", "cxx",
                                      "c++", "CPP", "C",  "CC", "ii",  NULL};
    static const char *const as[] = {"s", "S", "sx", NULL};
    static const char *const other[] = {"h",  "hh", "hpp", "hxx", "hp",  "H",         "h++", "tcc",
                                        "m",  "mm", "M",   "mi",  "mii", "cu",        "cui", "cl",
                                        "ll", "bc", "pch", "gch", "pcm", "modulemap", NULL};

    if (lang && strcmp(lang, "none")) {
        if (!strcmp(lang, "c") || !strcmp(lang, "c++") || !strcmp(lang, "cpp-output") ||
            !strcmp(lang, "c++-cpp-output") || !strcmp(lang, "c-cpp-output"))
            return ML_IN_SRC;
        if (!strcmp(lang, "assembler") || !strcmp(lang, "assembler-with-cpp"))
            return ML_IN_ASM;
        return ML_IN_OTHER;
    }
    if (!strcmp(path, "-"))
        return ML_IN_OTHER; /* clang wants -x for standard input and says so */
    if (has_ext(path, src))
        return ML_IN_SRC;
    if (has_ext(path, as))
        return ML_IN_ASM;
    if (has_ext(path, other))
        return ML_IN_OTHER;
    return ML_IN_LINK;
}

/* C or C++ source or header, or standard input without -x (which -E reads as C). */
static bool is_cfamily(const char *path, const char *lang, enum ml_cc_kind kind)
{
    static const char *const headers[] = {"h", "hh", "hpp", "hxx", "hp", "H", "h++", "tcc", NULL};

    if (kind == ML_IN_SRC)
        return true;
    if (lang && strcmp(lang, "none"))
        return !strcmp(lang, "c-header") || !strcmp(lang, "c++-header") ||
               !strcmp(lang, "c-header-cpp-output") || !strcmp(lang, "c++-header-cpp-output");
    return !strcmp(path, "-") || has_ext(path, headers);
}

static void add_input(struct ml_cc_cmd *c, int i, const char *lang)
{
    struct ml_cc_input *in = realloc(c->in, (c->nin + 1) * sizeof(*in));

    if (!in)
        die("out of memory");
    c->in = in;
    in[c->nin].argi = i;
    in[c->nin].path = c->args.v[i];
    in[c->nin].lang = lang && strcmp(lang, "none") ? lang : NULL;
    in[c->nin].kind = kind_of(c->args.v[i], lang);
    in[c->nin].cfamily = is_cfamily(c->args.v[i], lang, in[c->nin].kind);
    c->nin++;
}

int ml_cc_count(const struct ml_cc_cmd *c, enum ml_cc_kind kind)
{
    int n = 0;

    for (int i = 0; i < c->nin; i++)
        n += c->in[i].kind == kind;
    return n;
}

void ml_cc_parse(struct ml_cc_cmd *c)
{
    const char *lang = NULL;
    bool pass = false, obj = false, asm_ = false, only_args = false, cc1 = false;

    c->role = calloc(c->args.n + 1, 1);
    if (!c->role)
        die("out of memory");
    for (int i = 0; i < c->args.n; i++) {
        const char *a = c->args.v[i];
        const struct opt *o = NULL;
        const char *val = NULL;

        if (only_args || a[0] != '-' || !a[1]) {
            c->role[i] = ML_ARG_INPUT;
            add_input(c, i, lang);
            continue;
        }
        if (!strcmp(a, "--")) {
            c->role[i] = ML_ARG_SEPARATOR;
            only_args = true;
            continue;
        }
        for (size_t k = 0; k < sizeof(pass_opts) / sizeof(pass_opts[0]); k++)
            if (!strcmp(a, pass_opts[k]))
                pass = true;
        if (!strncmp(a, "-print-", 7) || !strncmp(a, "--print-", 8))
            pass = true;
        if (!strcmp(a, "-save-temps") || !strcmp(a, "--save-temps") ||
            !strcmp(a, "-save-temps=cwd"))
            c->save_temps = ML_SAVE_CWD;
        else if (!strcmp(a, "-save-temps=obj"))
            c->save_temps = ML_SAVE_OBJ;
        if (!strcmp(a, "-cc1") || !strcmp(a, "-cc1as"))
            cc1 = true;
        for (size_t k = 0; k < sizeof(opts) / sizeof(opts[0]); k++) {
            size_t len = strlen(opts[k].name);

            if ((opts[k].flags & SEP) && !strcmp(a, opts[k].name)) {
                o = &opts[k];
                if (i + 1 < c->args.n) {
                    c->role[i + 1] = o->role;
                    val = c->args.v[i + 1];
                }
                break;
            }
            if (!strcmp(a, opts[k].name) ||
                ((opts[k].flags & JOINED) && !strncmp(a, opts[k].name, len) && a[len])) {
                o = &opts[k];
                val = a + len;
                break;
            }
        }
        c->role[i] = o ? o->role : ML_ARG_PLAIN;
        if (o && (o->flags & SEP) && !strcmp(a, o->name))
            i++; /* the value has its role already */
        if (!o) {
            if (!strncmp(a, "-O", 2))
                c->olevel = a;
            else if (!strncmp(a, "--target=", 9))
                c->target = a + 9;
            continue;
        }
        const char *n = o->name;

        if (!strcmp(n, "-o"))
            c->out = val;
        else if (!strcmp(n, "-x"))
            lang = val;
        else if (!strcmp(n, "-c"))
            obj = true;
        else if (!strcmp(n, "-S"))
            asm_ = true;
        else if (!strcmp(n, "-shared"))
            c->shared = true;
        else if (!strcmp(n, "-nostdlib") || !strcmp(n, "-nodefaultlibs") || !strcmp(n, "-r"))
            c->nolibs = true;
        else if (!strcmp(n, "-flto") || !strcmp(n, "-flto="))
            c->flto = true;
        else if (!strcmp(n, "-fno-lto"))
            c->flto = false;
        else if (!strcmp(n, "-target") && val)
            c->target = val;
        else if (!strcmp(n, "-MD") || !strcmp(n, "-MMD"))
            c->md = true;
        else if (!strcmp(n, "-MF")) {
            c->mf = true;
            c->depfile = val;
        } else if (!strcmp(n, "-MT") || !strcmp(n, "-MQ"))
            c->mt = true;
        else if (!strcmp(n, "-Wp,") && val &&
                 (!strncmp(val, "-MD,", 4) || !strncmp(val, "-MMD,", 5))) {
            c->md = c->mf = true;
            c->depfile = strchr(val, ',') + 1;
        }
    }
    for (int i = 0; i < c->nin && !cc1; i++)
        c->cfamily |= c->in[i].cfamily;
    if (pass || !c->nin || ml_cc_count(c, ML_IN_OTHER))
        c->mode = ML_MODE_PASS;
    else if (asm_)
        c->mode = ML_MODE_ASM;
    else if (obj)
        c->mode = ML_MODE_OBJ;
    else
        c->mode = ML_MODE_LINK;
    /* Several outputs named by one -o: clang's error says it best. */
    if ((c->mode == ML_MODE_OBJ || c->mode == ML_MODE_ASM) && c->out &&
        ml_cc_count(c, ML_IN_SRC) + ml_cc_count(c, ML_IN_ASM) > 1)
        c->mode = ML_MODE_PASS;
    if (c->mode == ML_MODE_ASM && ml_cc_count(c, ML_IN_ASM))
        c->mode = ML_MODE_PASS;
    if (c->mode != ML_MODE_LINK && !ml_cc_count(c, ML_IN_SRC) && !ml_cc_count(c, ML_IN_ASM))
        c->mode = ML_MODE_PASS;
}
