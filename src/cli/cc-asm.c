/* memlens cc --trace=asm: compile through rewritten x86-64 assembly (selective machine-code
 * tracing). */
#include "cli/cc-asm.h"
#include "cli/cc-exec.h"
#include "cli/cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef ML_LLVM_MC
#define ML_LLVM_MC "llvm-mc-14"
#endif

struct ml_cc_asm ml_cc_asm = {
    .params = {.omega = 0.25, .chunk = 4096, .mode = ML_ASM_AIA, .score = {0, 1, 16}},
};

static bool scores_given;

void ml_cc_asm_option(const char *spec)
{
    struct ml_asm_params *p = &ml_cc_asm.params;
    char *copy = ml_cc_strfmt("%s", spec), *save, *w;

    ml_cc_asm.on = true;
    if (*copy && *copy != ',')
        die("unknown trace kind 'asm%s': use --trace=asm[,omega=W][,chunk=C][,mode=ns|ma|aia]",
            copy);
    for (w = strtok_r(copy, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(w, '='), *end;

        if (!eq)
            die("trace option '%s' needs a value (omega=W, chunk=C, mode=M, scores=S1:S2:S3)", w);
        *eq++ = 0;
        errno = 0;
        if (!strcmp(w, "omega")) {
            p->omega = strtod(eq, &end);
            if (end == eq || *end || errno || !(p->omega > 0 && p->omega <= 1))
                die("omega '%s' is not a number in (0, 1]", eq);
        } else if (!strcmp(w, "chunk")) {
            unsigned long c = strtoul(eq, &end, 0);

            if (end == eq || *end || errno || !c || c > (1ul << 30) || (c & (c - 1)))
                die("chunk '%s' is not a power of two up to 1 GiB", eq);
            p->chunk = (uint32_t)c;
        } else if (!strcmp(w, "mode")) {
            if (!strcmp(eq, "ns"))
                p->mode = ML_ASM_NS;
            else if (!strcmp(eq, "ma"))
                p->mode = ML_ASM_MA;
            else if (!strcmp(eq, "aia"))
                p->mode = ML_ASM_AIA;
            else
                die("mode '%s' is not ns, ma or aia", eq);
        } else if (!strcmp(w, "scores")) {
            int n = 0;

            if (sscanf(eq, "%d:%d:%d%n", &p->score[0], &p->score[1], &p->score[2], &n) != 3 ||
                eq[n])
                die("scores '%s' are not S1:S2:S3", eq);
            scores_given = true;
        } else {
            die("unknown trace option '%s' (omega, chunk, mode, scores)", w);
        }
    }
    if (!scores_given)
        ml_asm_default_scores(p->mode, p->score);
}

void ml_cc_asm_take_save_temps(struct ml_strv *args)
{
    int k = 0;

    for (int i = 0; i < args->n; i++) {
        const char *a = args->v[i];

        if (!strcmp(a, "-save-temps") || !strcmp(a, "-save-temps=cwd") ||
            !strcmp(a, "--save-temps")) {
            ml_cc_asm.save_temps = true;
            ml_cc_asm.save_obj = false;
            continue;
        }
        if (!strcmp(a, "-save-temps=obj")) {
            ml_cc_asm.save_temps = ml_cc_asm.save_obj = true;
            continue;
        }
        args->v[k++] = args->v[i];
    }
    args->n = k;
    args->v[k] = NULL;
}

void ml_cc_asm_check(const char *target)
{
    char err[256];

    if (target && strncmp(target, "x86_64", 6) && strncmp(target, "amd64", 5))
        die("--trace=asm needs an x86-64 target, not '%s'", target);
#if !defined(__x86_64__)
    if (!target)
        die("--trace=asm needs an x86-64 target (use --target=x86_64-linux-gnu)");
#endif
    if (ml_asm_params_check(&ml_cc_asm.params, err, sizeof(err)))
        die("bad --trace=asm options: %s", err);
}

static char *slurp(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t cap = 0, n = 0, got;

    if (!f)
        die("cannot open '%s': %s", path, strerror(errno));
    do {
        if (n + 65536 > cap) {
            cap = cap ? 2 * cap : 1 << 20;
            buf = realloc(buf, cap + 1);
            if (!buf)
                die("out of memory");
        }
        got = fread(buf + n, 1, cap - n, f);
        n += got;
    } while (got);
    if (ferror(f))
        die("cannot read '%s': %s", path, strerror(errno));
    fclose(f);
    buf[n] = 0;
    *size = n;
    return buf;
}

/* Copies the file from to path to (through a temporary in the same directory and a rename). */
static void keep_copy(const char *from, const char *to)
{
    size_t n;
    char *text = slurp(from, &n);
    char *tmp = ml_cc_strfmt("%s.tmp%d", to, (int)getpid());
    FILE *f = fopen(tmp, "wbx");

    if (!f || fwrite(text, 1, n, f) != n || fclose(f) || rename(tmp, to)) {
        int e = errno;

        unlink(tmp);
        die("cannot write '%s': %s", to, strerror(e));
    }
    free(text);
}

/* Where -save-temps keeps a file named name: the current directory, or beside the output. */
static const char *saved_name(const char *out, const char *name)
{
    const char *slash = out ? strrchr(out, '/') : NULL;

    if (!ml_cc_asm.save_obj || !slash)
        return name;
    return ml_cc_strfmt("%.*s/%s", (int)(slash - out), out, name);
}

/* Whether the flags make code for a shared library (-fPIC, -fpic: the last of the -f*pic/pie). */
static int is_pic(char *const *plain)
{
    int pic = 0;

    for (char *const *a = plain; *a; a++) {
        if (!strcmp(*a, "-fPIC") || !strcmp(*a, "-fpic"))
            pic = 1;
        else if (!strcmp(*a, "-fno-pic") || !strcmp(*a, "-fno-PIC") || !strcmp(*a, "-fPIE") ||
                 !strcmp(*a, "-fpie") || !strcmp(*a, "-fno-pie") || !strcmp(*a, "-fno-PIE"))
            pic = 0;
    }
    return pic;
}

/* Parses, encodes with llvm-mc, analyses and rewrites the assembly in s into rw. */
static void rewrite(const char *s, const char *rw, const char *stem, const char *what, int pic)
{
    struct ml_asm_file f;
    struct ml_asm_units u;
    struct ml_asm_stats st;
    struct ml_asm_opts o = {.params = ml_cc_asm.params, .name = what, .pic = pic};
    const char *ann = ml_cc_tmp_path(ml_cc_strfmt("%s.enc.s", stem));
    const char *mc = ml_cc_tmp_path(ml_cc_strfmt("%s.mc.txt", stem));
    const char *tool = getenv("MEMLENS_LLVM_MC");
    char err[512];
    size_t n;
    char *text = slurp(s, &n);
    FILE *out;

    if (!tool || !*tool)
        tool = ML_LLVM_MC;
    if (ml_asm_parse(text, n, &f, err, sizeof(err)))
        die("cannot read the assembly of '%s': %s", what, err);
    free(text);
    if (ml_asm_units(&f, &u))
        die("out of memory");
    out = fopen(ann, "w");
    if (!out || ml_asm_annotate(&f, &u, out) || fclose(out))
        die("cannot write '%s': %s", ann, strerror(errno));
    {
        /* Its warnings are clang's own assembler's about clang's output ("inconsistent use of
           MD5 checksums" with -g): clang -c is silent about them, so is memlens. */
        char *argv[] = {(char *)tool,      "-triple=x86_64-unknown-linux-gnu",
                        "--show-encoding", "--no-warn",
                        (char *)ann,       "-o",
                        (char *)mc,        NULL};
        int st = ml_cc_run(argv);

        if (st)
            die("cannot encode the assembly of '%s': %s failed (exit %d)", what, tool, st);
    }
    text = slurp(mc, &n);
    if (ml_asm_read_encodings(text, n, &u, err, sizeof(err)))
        die("cannot encode the assembly of '%s': %s", what, err);
    free(text);
    out = fopen(rw, "w");
    if (!out)
        die("cannot write '%s': %s", rw, strerror(errno));
    if (ml_cc_asm.explain) {
        fflush(stdout);
        o.explain = stdout;
    }
    if (ml_asm_rewrite(&f, &u, &o, out, &st, err, sizeof(err)))
        die("cannot rewrite the assembly of '%s': %s", what, err);
    if (fclose(out))
        die("cannot write '%s': %s", rw, strerror(errno));
    if (o.explain)
        fflush(stdout);
    if (ml_cc_verbose)
        fprintf(stderr,
                "memlens: %s: %d blocks, %d accesses, %d instrumented, static MA %.3f AIA %.3f\n",
                what, st.blocks, st.accesses, st.selected, st.ma, st.aia);
    ml_asm_units_free(&u);
    ml_asm_file_free(&f);
}

int ml_cc_asm_compile(const char *clang, char *const *plain, const char *olevel, const char *bc,
                      const char *stem, const char *what, const char *out, bool assembly)
{
    const char *s = ml_cc_tmp_path(ml_cc_strfmt("%s.s", stem));
    const char *rw = assembly ? out : ml_cc_tmp_path(ml_cc_strfmt("%s.ml.s", stem));
    struct ml_strv v = {0};
    int st;

    /* Code generation without re-optimising, in AT&T syntax whatever -masm says. */
    ml_strv_push(&v, clang);
    for (char *const *a = plain; *a; a++)
        ml_strv_push(&v, *a);
    ml_strv_push(&v, "-Qunused-arguments");
    ml_strv_push(&v, "-Xclang");
    ml_strv_push(&v, "-disable-llvm-passes");
    ml_strv_push(&v, "-masm=att");
    ml_strv_push(&v, "-S");
    ml_strv_push(&v, bc);
    ml_strv_push(&v, "-o");
    ml_strv_push(&v, s);
    st = ml_cc_run(v.v);
    free(v.v);
    if (st)
        return st;
    rewrite(s, rw, stem, what, is_pic(plain));
    if (ml_cc_asm.save_temps) {
        /* -S writes the rewritten assembly as <stem>.s itself: clang's is not kept then. */
        if (!assembly)
            keep_copy(s, saved_name(out, ml_cc_strfmt("%s.s", stem)));
        keep_copy(rw, saved_name(out, ml_cc_strfmt("%s.memlens.s", stem)));
    }
    if (assembly)
        return 0;
    memset(&v, 0, sizeof(v));
    ml_strv_push(&v, clang);
    /* Before the user's flags, so that a -mno-relax-all there wins, as with clang. */
    if (!olevel || !strcmp(olevel, "-O0"))
        ml_strv_push(&v, "-mrelax-all");
    for (char *const *a = plain; *a; a++)
        ml_strv_push(&v, *a);
    ml_strv_push(&v, "-Qunused-arguments");
    ml_strv_push(&v, "-masm=att"); /* -masm also sets the dialect clang assembles .s files in */
    ml_strv_push(&v, "-Wa,--no-warn");
    ml_strv_push(&v, "-c");
    ml_strv_push(&v, "-x");
    ml_strv_push(&v, "assembler");
    ml_strv_push(&v, rw);
    ml_strv_push(&v, "-o");
    ml_strv_push(&v, out);
    st = ml_cc_run(v.v);
    free(v.v);
    return st;
}
