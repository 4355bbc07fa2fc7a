/* Linking in memlens cc: the runtime's link arguments, and whole-program bitcode merging. */
#include "cli/cc-link.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/BitReader.h>
#include <llvm-c/BitWriter.h>
#include <llvm-c/Core.h>
#include <llvm-c/Linker.h>

/*
 * The runtime's entry points, each by name: gold takes no patterns here. The list is every
 * global symbol of the runtime object; runtime-symbols.sh checks an executable exports them.
 */
static const char *const rt_exports[] = {
#include "rt-exports.h" /* generated from the runtime object by the Makefile */
};

/* -static or -static-pie on the link line: no dynamic linker, so no dlsym. */
static bool static_link(const struct ml_cc_cmd *c)
{
    for (int i = 0; i < c->args.n; i++)
        if (c->role[i] == ML_ARG_LINK &&
            (!strcmp(c->args.v[i], "-static") || !strcmp(c->args.v[i], "-static-pie")))
            return true;
    return false;
}

const char *ml_cc_runtime_args(struct ml_strv *v, const struct ml_cc_cmd *c, const char *archive,
                               bool heap)
{
    size_t n = strlen(archive);
    const char *slash = strrchr(archive, '/');
    char *so, *dir;

    if (c->shared) {
        if (n < 2 || strcmp(archive + n - 2, ".a"))
            return archive;
        so = ml_cc_strfmt("%.*s.so", (int)(n - 2), archive);
        dir = slash ? ml_cc_strfmt("%.*s", (int)(slash - archive), archive) : ".";
        ml_strv_push(v, "-Wl,--push-state,--as-needed");
        ml_strv_push(v, so);
        ml_strv_push(v, "-Wl,--pop-state");
        ml_strv_push(v, ml_cc_strfmt("-Wl,-rpath,%s", dir));
        return so;
    }
    ml_strv_push(v, "-Wl,--whole-archive");
    ml_strv_push(v, archive);
    ml_strv_push(v, "-Wl,--no-whole-archive");
    /*
     * The malloc-family interposers, only for links of programs built for heap events (every
     * program references malloc, so the archive would be pulled into any link it is named in).
     */
    if (heap && n > 15 && !strcmp(archive + n - 15, "libmemlens-rt.a"))
        ml_strv_push(v, ml_cc_strfmt("%.*slibmemlens-heap.a", (int)(n - 15), archive));
    ml_strv_push(v, "-lpthread");
    ml_strv_push(v, "-ldl");
    /*
     * A static program loads no library that could bind to them; and exported
     * thread-local variables (trace buffers, the queue's cursor) would leave TLS relocations
     * that a -static-pie program cannot resolve at start.
     */
    for (size_t i = 0; !static_link(c) && i < sizeof(rt_exports) / sizeof(rt_exports[0]); i++)
        ml_strv_push(v, ml_cc_strfmt("-Wl,--export-dynamic-symbol=%s", rt_exports[i]));
    if (static_link(c))
        ml_strv_push(v, "-Wl,--undefined=__pthread_create_2_1");
    return archive;
}

static bool bitcode_magic(const unsigned char *p, size_t len)
{
    return len >= 4 && ((p[0] == 'B' && p[1] == 'C' && p[2] == 0xc0 && p[3] == 0xde) ||
                        (p[0] == 0xde && p[1] == 0xc0 && p[2] == 0x17 && p[3] == 0x0b));
}

static size_t head(const char *path, unsigned char *buf, size_t len)
{
    FILE *f = fopen(path, "rb");
    size_t n;

    if (!f)
        return 0;
    n = fread(buf, 1, len, f);
    fclose(f);
    return n;
}

bool ml_cc_is_bitcode(const char *path)
{
    unsigned char b[4];

    return bitcode_magic(b, head(path, b, sizeof(b)));
}

bool ml_cc_is_archive(const char *path)
{
    unsigned char b[8];

    return head(path, b, sizeof(b)) == 8 && !memcmp(b, "!<arch>\n", 8);
}

/* An open-addressing set of symbol names. */
struct symset {
    char **k;
    size_t cap, n;
};

static size_t slot(const struct symset *s, const char *name)
{
    uint64_t h = 1469598103934665603ull;

    for (const char *p = name; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    for (size_t i = h & (s->cap - 1);; i = (i + 1) & (s->cap - 1))
        if (!s->k[i] || !strcmp(s->k[i], name))
            return i;
}

static bool set_has(const struct symset *s, const char *name)
{
    return s->cap && s->k[slot(s, name)];
}

static int set_add(struct symset *s, const char *name)
{
    size_t i;

    if (2 * (s->n + 1) > s->cap) {
        struct symset big = {calloc(s->cap ? 2 * s->cap : 256, sizeof(char *)),
                             s->cap ? 2 * s->cap : 256, s->n};

        if (!big.k)
            return -ENOMEM;
        for (size_t j = 0; j < s->cap; j++)
            if (s->k[j])
                big.k[slot(&big, s->k[j])] = s->k[j];
        free(s->k);
        *s = big;
    }
    i = slot(s, name);
    if (s->k[i])
        return 0;
    if (!(s->k[i] = strdup(name)))
        return -ENOMEM;
    s->n++;
    return 0;
}

static void set_free(struct symset *s)
{
    for (size_t i = 0; i < s->cap; i++)
        free(s->k[i]);
    free(s->k);
}

struct merge {
    LLVMContextRef ctx;
    struct symset def, ref;
    char diag[400];
};

static void on_diag(LLVMDiagnosticInfoRef di, void *ctx)
{
    struct merge *m = ctx;
    char *d;

    if (LLVMGetDiagInfoSeverity(di) != LLVMDSError || m->diag[0])
        return;
    d = LLVMGetDiagInfoDescription(di);
    snprintf(m->diag, sizeof(m->diag), "%s", d);
    LLVMDisposeMessage(d);
}

static bool external(LLVMValueRef g)
{
    LLVMLinkage l = LLVMGetLinkage(g);

    return l != LLVMInternalLinkage && l != LLVMPrivateLinkage;
}

/*
 * Calls fn for every external symbol of mod: defined or referenced. Intrinsics
 * are not symbols.
 */
static int each_symbol(LLVMModuleRef mod, int (*fn)(void *ctx, const char *name, bool def),
                       void *ctx)
{
    LLVMValueRef (*first[])(LLVMModuleRef) = {LLVMGetFirstFunction, LLVMGetFirstGlobal,
                                              LLVMGetFirstGlobalAlias};
    LLVMValueRef (*next[])(LLVMValueRef) = {LLVMGetNextFunction, LLVMGetNextGlobal,
                                            LLVMGetNextGlobalAlias};
    int ret;

    for (int k = 0; k < 3; k++)
        for (LLVMValueRef g = first[k](mod); g; g = next[k](g)) {
            size_t len;
            const char *name = LLVMGetValueName2(g, &len);
            bool def = k == 2 || !LLVMIsDeclaration(g);

            if (!len || !strncmp(name, "llvm.", 5) || (def && !external(g)))
                continue;
            if ((ret = fn(ctx, name, def)))
                return ret;
        }
    return 0;
}

static int note_symbol(void *ctx, const char *name, bool def)
{
    struct merge *m = ctx;

    return set_add(def ? &m->def : &m->ref, name);
}

/* Returns 1 when name is defined here and wanted: referenced, defined nowhere yet. */
static int is_wanted(void *ctx, const char *name, bool def)
{
    struct merge *m = ctx;

    return def && set_has(&m->ref, name) && !set_has(&m->def, name);
}

static int parse(struct merge *m, const char *data, size_t len, const char *name,
                 LLVMModuleRef *mod, char *err, size_t errlen)
{
    LLVMMemoryBufferRef buf = LLVMCreateMemoryBufferWithMemoryRange(data, len, name, 0);
    LLVMBool bad = LLVMParseBitcodeInContext2(m->ctx, buf, mod);

    LLVMDisposeMemoryBuffer(buf);
    if (bad) {
        snprintf(err, errlen, "cannot read bitcode '%s': %s", name,
                 m->diag[0] ? m->diag : "invalid bitcode");
        return -1;
    }
    return 0;
}

static int read_all(const char *path, char **data, size_t *len, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    long n;

    if (!f || fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) ||
        !(*data = malloc(n ? n : 1)) || fread(*data, 1, n, f) != (size_t)n) {
        snprintf(err, errlen, "cannot read '%s': %s", path, strerror(errno ? errno : EIO));
        if (f)
            fclose(f);
        return -1;
    }
    fclose(f);
    *len = n;
    return 0;
}

/* Adds a module to the merged one (which it becomes if there is none yet). */
static int link_in(struct merge *m, LLVMModuleRef *dst, LLVMModuleRef mod, const char *name,
                   char *err, size_t errlen)
{
    if (each_symbol(mod, note_symbol, m)) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (!*dst) {
        *dst = mod;
        return 0;
    }
    if (LLVMLinkModules2(*dst, mod)) {
        snprintf(err, errlen, "cannot link bitcode '%s': %s", name,
                 m->diag[0] ? m->diag : "link error");
        return -1;
    }
    return 0;
}

struct member {
    char *name;
    LLVMModuleRef mod; /* NULL once merged */
};

/* Reads a space-padded decimal field of an ar header. */
static size_t decimal(const char *p, int width)
{
    size_t v = 0;

    for (int i = 0; i < width && p[i] >= '0' && p[i] <= '9'; i++)
        v = 10 * v + (p[i] - '0');
    return v;
}

/* Parses the bitcode members of an ar archive (GNU or BSD long names); counts the others. */
static int archive_members(struct merge *m, const char *path, const char *data, size_t len,
                           struct member **out, int *nout, int *native, char *err, size_t errlen)
{
    const char *longnames = NULL;
    size_t longlen = 0, off = 8;

    while (off + 60 <= len) {
        const char *hdr = data + off, *body = data + off + 60;
        size_t size = decimal(hdr + 48, 10);
        char name[256];
        int nl = 0;

        if (size > len - off - 60) {
            snprintf(err, errlen, "archive '%s' is truncated at offset %zu", path, off);
            return -1;
        }
        off += 60 + size + (size & 1);
        if (!memcmp(hdr, "// ", 3)) {
            longnames = body;
            longlen = size;
            continue;
        }
        if (hdr[0] == '/' && hdr[1] >= '0' && hdr[1] <= '9' && longnames) {
            size_t at = decimal(hdr + 1, 15);

            while (at + nl < longlen && longnames[at + nl] != '/' && longnames[at + nl] != '\n' &&
                   nl < 255)
                nl++;
            memcpy(name, longnames + at, nl);
        } else if (!memcmp(hdr, "#1/", 3)) {
            size_t bl = decimal(hdr + 3, 13);

            if (bl > size)
                continue;
            nl = bl < 255 ? bl : 255;
            memcpy(name, body, nl);
            body += bl;
            size -= bl;
        } else if (hdr[0] == '/') {
            continue; /* symbol table */
        } else {
            while (nl < 16 && hdr[nl] != '/' && hdr[nl] != ' ')
                nl++;
            memcpy(name, hdr, nl);
        }
        name[nl] = 0;
        if (!bitcode_magic((const unsigned char *)body, size)) {
            (*native)++;
            continue;
        }
        struct member *v = realloc(*out, (*nout + 1) * sizeof(*v));

        if (!v) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        *out = v;
        v[*nout].mod = NULL;
        if (asprintf(&v[*nout].name, "%s(%s)", path, name) < 0) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        (*nout)++;
        if (parse(m, body, size, v[*nout - 1].name, &v[*nout - 1].mod, err, errlen))
            return -1;
    }
    return 0;
}

/* Symbols defined in module-level asm are invisible to the symbol scan: always pull them. */
static bool has_module_asm(LLVMModuleRef mod)
{
    size_t len = 0;

    LLVMGetModuleInlineAsm(mod, &len);
    return len > 0;
}

int ml_cc_merge_bitcode(char *const *objs, int nobj, char *const *ars, int nar, const char *out,
                        bool *ar_all_bitcode, char *err, size_t errlen)
{
    struct merge m = {.ctx = LLVMContextCreate()};
    LLVMModuleRef dst = NULL, mod;
    struct member *mem = NULL;
    int nmem = 0, pulled = 0, ret = -1;
    char *data = NULL;
    size_t len;

    LLVMContextSetDiagnosticHandler(m.ctx, on_diag, &m);
    for (int i = 0; i < nobj; i++) {
        if (read_all(objs[i], &data, &len, err, errlen) ||
            parse(&m, data, len, objs[i], &mod, err, errlen))
            goto out;
        free(data);
        data = NULL;
        if (link_in(&m, &dst, mod, objs[i], err, errlen))
            goto out;
    }
    for (int a = 0; a < nar; a++) {
        int first = nmem, native = 0;
        bool more = true;

        if (read_all(ars[a], &data, &len, err, errlen) ||
            archive_members(&m, ars[a], data, len, &mem, &nmem, &native, err, errlen))
            goto out;
        ar_all_bitcode[a] = !native && nmem > first;
        free(data);
        data = NULL;
        while (more) {
            more = false;
            for (int i = first; i < nmem; i++) {
                if (!mem[i].mod ||
                    (each_symbol(mem[i].mod, is_wanted, &m) != 1 && !has_module_asm(mem[i].mod)))
                    continue;
                mod = mem[i].mod;
                mem[i].mod = NULL;
                if (link_in(&m, &dst, mod, mem[i].name, err, errlen))
                    goto out;
                pulled++;
                more = true;
            }
        }
    }
    if (!dst) {
        snprintf(err, errlen, "no bitcode to link");
        goto out;
    }
    if (LLVMWriteBitcodeToFile(dst, out)) {
        snprintf(err, errlen, "cannot write bitcode '%s'", out);
        goto out;
    }
    ret = pulled;
out:
    free(data);
    for (int i = 0; i < nmem; i++) {
        if (mem[i].mod)
            LLVMDisposeModule(mem[i].mod);
        free(mem[i].name);
    }
    free(mem);
    if (dst)
        LLVMDisposeModule(dst);
    set_free(&m.def);
    set_free(&m.ref);
    LLVMContextDispose(m.ctx);
    return ret;
}
