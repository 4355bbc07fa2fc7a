/* Parser of clang's x86-64 AT&T assembly output: lines, sections, functions, label references. */
#include "instrument/asm/asm.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ml_asm_err(char *err, size_t n, const char *fmt, ...)
{
    va_list ap;

    if (!err || !n)
        return;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
}

static int is_ident_start(int c)
{
    return isalpha(c) || c == '_' || c == '.' || c == '$';
}

static int is_ident(int c)
{
    return isalnum(c) || c == '_' || c == '.' || c == '$';
}

/* Prefixes that clang prints on a line of their own (the TLS sequences) or before a mnemonic. */
static int is_prefix(const char *w, size_t n)
{
    static const char *const p[] = {"data16",  "data32",   "addr32",   "rex64", "rep",
                                    "repe",    "repz",     "repne",    "repnz", "lock",
                                    "notrack", "xacquire", "xrelease", NULL};

    for (int i = 0; p[i]; i++)
        if (strlen(p[i]) == n && !strncmp(p[i], w, n))
            return 1;
    return 0;
}

/* Length of s up to a '#' comment outside a string. */
static size_t code_len(const char *s, size_t n)
{
    int quote = 0;

    for (size_t i = 0; i < n; i++) {
        if (quote) {
            if (s[i] == '\\' && i + 1 < n)
                i++;
            else if (s[i] == '"')
                quote = 0;
        } else if (s[i] == '"') {
            quote = 1;
        } else if (s[i] == '#') {
            return i;
        }
    }
    return n;
}

static char *dup_trim(const char *s, size_t n)
{
    char *d;

    while (n && isspace((unsigned char)*s))
        s++, n--;
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

struct refs {
    char **v;
    int n, cap;
};

static int add_ref(struct refs *r, const char *s, size_t n)
{
    char *d;

    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 256;
        char **v = realloc(r->v, cap * sizeof(*v));

        if (!v)
            return -ENOMEM;
        r->v = v;
        r->cap = cap;
    }
    d = malloc(n + 1);
    if (!d)
        return -ENOMEM;
    memcpy(d, s, n);
    d[n] = 0;
    r->v[r->n++] = d;
    return 0;
}

/* Adds every symbol named in s[0..n) (registers, numbers and strings skipped). */
static int scan_refs(struct refs *r, const char *s, size_t n)
{
    size_t i = 0;

    while (i < n) {
        int c = (unsigned char)s[i];

        if (c == '"') {
            for (i++; i < n && s[i] != '"'; i++)
                if (s[i] == '\\')
                    i++;
            i++;
        } else if (c == '%') {
            for (i++; i < n && is_ident((unsigned char)s[i]); i++)
                ;
        } else if (isdigit(c)) {
            for (; i < n && is_ident((unsigned char)s[i]); i++)
                ;
        } else if (is_ident_start(c)) {
            size_t b = i;

            for (; i < n && is_ident((unsigned char)s[i]); i++)
                ;
            if (add_ref(r, s + b, i - b))
                return -ENOMEM;
        } else {
            i++;
        }
    }
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int ml_asm_is_referenced(const struct ml_asm_file *f, const char *label)
{
    return f->nref && bsearch(&label, f->ref, f->nref, sizeof(*f->ref), cmp_str) != NULL;
}

/* Section state: name kind of the current section and a stack for .pushsection. */
struct sect {
    uint8_t exec, debug;
};

/* Classifies ".section name[,"flags"[,...]]" or a short form (.text, .data, ...). */
static struct sect section_of(const char *dname, const char *args)
{
    struct sect s = {0, 0};
    char name[256];
    size_t n = 0;

    if (!strcmp(dname, ".text"))
        return (struct sect){1, 0};
    if (strcmp(dname, ".section") && strcmp(dname, ".pushsection"))
        return s; /* .data, .bss, .rodata */
    while (*args && isspace((unsigned char)*args))
        args++;
    if (*args == '"')
        args++;
    while (*args && *args != ',' && *args != '"' && !isspace((unsigned char)*args) &&
           n + 1 < sizeof(name))
        name[n++] = *args++;
    name[n] = 0;
    s.debug = !strncmp(name, ".debug_", 7);
    const char *comma = strchr(args, ',');

    if (comma) {
        const char *q = strchr(comma, '"');
        const char *e = q ? strchr(q + 1, '"') : NULL;

        s.exec = q && e && memchr(q + 1, 'x', e - q - 1);
    } else {
        s.exec =
            !strncmp(name, ".text", 5) || !strncmp(name, ".init", 5) || !strncmp(name, ".fini", 5);
    }
    return s;
}

static int add_func(struct ml_asm_file *f, const char *name, int first)
{
    struct ml_asm_func *v = realloc(f->func, (f->nfunc + 1) * sizeof(*v));

    if (!v)
        return -ENOMEM;
    f->func = v;
    v[f->nfunc].name = strdup(name);
    if (!v[f->nfunc].name)
        return -ENOMEM;
    v[f->nfunc].first = first;
    v[f->nfunc].end = first;
    f->nfunc++;
    return 0;
}

/* Names declared "@function" by .type, so that their labels start functions. */
struct names {
    char **v;
    int n;
};

static int is_function_name(const struct names *fn, const char *name)
{
    for (int i = 0; i < fn->n; i++)
        if (!strcmp(fn->v[i], name))
            return 1;
    return 0;
}

/* ".type name,@function": records name. */
static int note_type(struct names *fn, const char *args)
{
    const char *comma = strchr(args, ',');
    char **v;
    char *name;

    if (!comma || (!strstr(comma, "function") && !strstr(comma, "STT_FUNC")))
        return 0;
    name = dup_trim(args, comma - args);
    if (!name)
        return -ENOMEM;
    v = realloc(fn->v, (fn->n + 1) * sizeof(*v));
    if (!v) {
        free(name);
        return -ENOMEM;
    }
    fn->v = v;
    fn->v[fn->n++] = name;
    return 0;
}

static int parse_line(struct ml_asm_line *l, int *app, char *err, size_t errlen, int lineno)
{
    const char *s = l->start;
    size_t n = l->len, k;

    while (n && isspace((unsigned char)*s))
        s++, n--;
    if (*app || (n >= 4 && !strncmp(s, "#APP", 4))) {
        l->kind = ML_ASM_APP;
        if (n >= 7 && !strncmp(s, "#NO_APP", 7))
            *app = 0;
        else
            *app = 1;
        return 0;
    }
    n = code_len(s, n);
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    if (!n) {
        l->kind = ML_ASM_BLANK;
        return 0;
    }
    /* A label: an identifier or a quoted name, then ':'. */
    k = 0;
    if (s[0] == '"') {
        for (k = 1; k < n && s[k] != '"'; k++)
            ;
        k++;
    } else {
        while (k < n && (is_ident((unsigned char)s[k]) || s[k] == '@'))
            k++;
    }
    if (k && k < n && s[k] == ':') {
        size_t rest = k + 1;

        while (rest < n && isspace((unsigned char)s[rest]))
            rest++;
        if (rest < n) {
            ml_asm_err(err, errlen, "line %d: a statement after a label is not supported", lineno);
            return -EINVAL;
        }
        l->kind = ML_ASM_LABEL;
        l->name = s[0] == '"' ? dup_trim(s + 1, k - 2) : dup_trim(s, k);
        return l->name ? 0 : -ENOMEM;
    }
    for (k = 0; k < n && !isspace((unsigned char)s[k]); k++)
        ;
    l->name = dup_trim(s, k);
    if (!l->name)
        return -ENOMEM;
    if (s[0] == '.') {
        l->kind = ML_ASM_DIRECTIVE;
        l->operands = dup_trim(s + k, n - k);
        return l->operands ? 0 : -ENOMEM;
    }
    l->kind = ML_ASM_INSN;
    /* "rep movsb ...", "lock cmpxchg ...": the operands follow the last mnemonic word. */
    size_t w = 0, wl = k;

    while (is_prefix(s + w, wl)) {
        size_t b = w + wl;

        while (b < n && isspace((unsigned char)s[b]))
            b++;
        if (b >= n) {
            l->prefix = 1;
            break;
        }
        w = b;
        for (wl = 0; w + wl < n && !isspace((unsigned char)s[w + wl]) && s[w + wl] != ';'; wl++)
            ;
    }
    l->operands = dup_trim(s + w + wl, n - w - wl);
    return l->operands ? 0 : -ENOMEM;
}

int ml_asm_parse(const char *text, size_t size, struct ml_asm_file *f, char *err, size_t errlen)
{
    struct sect cur = {1, 0}, prev = {0, 0}, stack[16];
    struct names fn = {0};
    struct refs refs = {0};
    int app = 0, depth = 0, rc = -ENOMEM, curfunc = -1, nl = 0;

    memset(f, 0, sizeof(*f));
    f->text = malloc(size + 1);
    if (!f->text)
        goto fail;
    memcpy(f->text, text, size);
    f->text[size] = 0;
    f->size = size;
    for (size_t i = 0; i < size; i++)
        nl += f->text[i] == '\n';
    f->line = calloc(nl + 1, sizeof(*f->line));
    if (!f->line)
        goto fail;
    for (const char *p = f->text, *end = f->text + size; p < end;) {
        const char *e = memchr(p, '\n', end - p);
        struct ml_asm_line *l = &f->line[f->nline];

        if (!e)
            e = end;
        l->start = p;
        l->len = (int)(e - p);
        rc = parse_line(l, &app, err, errlen, f->nline + 1);
        if (rc) {
            f->nline++; /* its strings are freed with the others */
            goto fail;
        }
        l->exec = cur.exec;
        l->debugref = cur.debug;
        if (l->kind == ML_ASM_DIRECTIVE) {
            const char *d = l->name;

            if (!strcmp(d, ".text") || !strcmp(d, ".data") || !strcmp(d, ".bss") ||
                !strcmp(d, ".section")) {
                prev = cur;
                cur = section_of(d, l->operands);
            } else if (!strcmp(d, ".pushsection")) {
                if (depth < 16)
                    stack[depth] = cur;
                depth++;
                prev = cur;
                cur = section_of(d, l->operands);
            } else if (!strcmp(d, ".popsection")) {
                if (depth > 0 && --depth < 16) {
                    prev = cur;
                    cur = stack[depth];
                }
            } else if (!strcmp(d, ".previous")) {
                struct sect t = cur;

                cur = prev;
                prev = t;
            } else if (!strcmp(d, ".type")) {
                rc = note_type(&fn, l->operands);
                if (rc)
                    goto fail;
            } else if (!strcmp(d, ".size") && curfunc >= 0) {
                size_t len = strlen(f->func[curfunc].name);

                if (!strncmp(l->operands, f->func[curfunc].name, len) &&
                    (l->operands[len] == ',' || isspace((unsigned char)l->operands[len]))) {
                    f->func[curfunc].end = f->nline + 1;
                    curfunc = -1;
                }
            }
            /* Debug sections name every label (line tables, scopes): those are no jump targets. */
            rc = cur.debug ? 0 : scan_refs(&refs, l->operands, strlen(l->operands));
            if (rc)
                goto fail;
        } else if (l->kind == ML_ASM_LABEL && cur.exec && is_function_name(&fn, l->name)) {
            if (curfunc >= 0)
                f->func[curfunc].end = f->nline;
            rc = add_func(f, l->name, f->nline);
            if (rc)
                goto fail;
            curfunc = f->nfunc - 1;
        } else if (l->kind == ML_ASM_INSN) {
            rc = scan_refs(&refs, l->operands, strlen(l->operands));
            if (rc)
                goto fail;
        } else if (l->kind == ML_ASM_APP) {
            /* asm goto names C labels: count every symbol of inline assembly as a reference. */
            rc = scan_refs(&refs, l->start, l->len);
            if (rc)
                goto fail;
        }
        l->func = curfunc;
        f->nline++;
        p = e + 1;
    }
    if (curfunc >= 0)
        f->func[curfunc].end = f->nline;
    if (refs.n)
        qsort(refs.v, refs.n, sizeof(*refs.v), cmp_str);
    f->ref = refs.v;
    for (int i = 0; i < refs.n; i++) {
        if (f->nref && !strcmp(f->ref[f->nref - 1], refs.v[i])) {
            free(refs.v[i]);
            continue;
        }
        refs.v[f->nref++] = refs.v[i];
    }
    for (int i = 0; i < fn.n; i++)
        free(fn.v[i]);
    free(fn.v);
    return 0;
fail:
    if (rc == -ENOMEM)
        ml_asm_err(err, errlen, "out of memory");
    for (int i = 0; i < fn.n; i++)
        free(fn.v[i]);
    free(fn.v);
    for (int i = 0; i < refs.n; i++)
        free(refs.v[i]);
    free(refs.v);
    ml_asm_file_free(f);
    return rc;
}

void ml_asm_file_free(struct ml_asm_file *f)
{
    for (int i = 0; f->line && i < f->nline; i++) {
        free(f->line[i].name);
        free(f->line[i].operands);
    }
    for (int i = 0; i < f->nfunc; i++)
        free(f->func[i].name);
    for (int i = 0; i < f->nref; i++)
        free(f->ref[i]);
    free(f->ref);
    free(f->func);
    free(f->line);
    free(f->text);
    memset(f, 0, sizeof(*f));
}
