/* Instruction units of a parsed file and their encodings, read back from llvm-mc --show-encoding.
 */
#include "instrument/asm/asm.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define UNIT_LABEL ".Lmemlens_e"

int ml_asm_units(const struct ml_asm_file *f, struct ml_asm_units *u)
{
    int cap = 0, open = -1;

    memset(u, 0, sizeof(*u));
    for (int i = 0; i < f->nline; i++)
        cap += f->line[i].kind == ML_ASM_INSN;
    u->first = malloc((cap + 1) * sizeof(int));
    u->last = malloc((cap + 1) * sizeof(int));
    u->code = calloc(cap + 1, sizeof(*u->code));
    u->len = calloc(cap + 1, sizeof(int));
    if (!u->first || !u->last || !u->code || !u->len) {
        ml_asm_units_free(u);
        return -ENOMEM;
    }
    for (int i = 0; i < f->nline; i++) {
        const struct ml_asm_line *l = &f->line[i];

        if (l->kind == ML_ASM_BLANK)
            continue;
        if (l->kind != ML_ASM_INSN || !l->exec) {
            /* Prefixes followed by no instruction: a unit of their own (decoded as opaque). */
            if (open >= 0) {
                u->first[u->n] = open;
                u->last[u->n++] = open;
                open = -1;
            }
            continue;
        }
        if (open < 0)
            open = i;
        if (l->prefix)
            continue;
        u->first[u->n] = open;
        u->last[u->n++] = i;
        open = -1;
    }
    if (open >= 0) {
        u->first[u->n] = open;
        u->last[u->n++] = open;
    }
    return 0;
}

void ml_asm_units_free(struct ml_asm_units *u)
{
    for (int k = 0; u->code && k < u->n; k++)
        free(u->code[k]);
    free(u->code);
    free(u->len);
    free(u->first);
    free(u->last);
    memset(u, 0, sizeof(*u));
}

int ml_asm_annotate(const struct ml_asm_file *f, const struct ml_asm_units *u, FILE *out)
{
    int k = 0;

    for (int i = 0; i < f->nline; i++) {
        if (k < u->n && u->first[k] == i)
            fprintf(out, UNIT_LABEL "%d:\n", k++);
        /* llvm-mc drops the #APP comments: a label keeps inline assembly out of the unit before. */
        if (f->line[i].kind == ML_ASM_APP && (!i || f->line[i - 1].kind != ML_ASM_APP))
            fprintf(out, ".Lmemlens_app%d:\n", i);
        fwrite(f->line[i].start, 1, f->line[i].len, out);
        fputc('\n', out);
    }
    return ferror(out) ? -EIO : 0;
}

/*
 * The number in base 10 or 16 at p, read no further than end (llvm-mc's output
 * is a buffer, not a string); NULL when there is no digit or it exceeds max.
 */
static const char *read_num(const char *p, const char *end, int base, unsigned long max,
                            unsigned long *v)
{
    const char *b = p;

    for (*v = 0; p < end; p++) {
        int d = isdigit((unsigned char)*p)                  ? *p - '0'
                : base == 16 && isxdigit((unsigned char)*p) ? tolower((unsigned char)*p) - 'a' + 10
                                                            : -1;
        if (d < 0)
            break;
        if (*v > (max - (unsigned long)d) / (unsigned long)base)
            return NULL;
        *v = *v * (unsigned long)base + (unsigned long)d;
    }
    return p > b ? p : NULL;
}

/* Appends the bytes of "# encoding: [0x48,A,...]" to buf; fixup letters read as 0. */
static int read_bytes(const char *p, const char *end, uint8_t *buf, int *n, int cap)
{
    while (p < end && *p != ']') {
        if (*p == '0' && p + 1 < end && (p[1] == 'x' || p[1] == 'X')) {
            unsigned long v;
            const char *q = read_num(p + 2, end, 16, 0xff, &v);

            if (!q || *n >= cap)
                return -EINVAL;
            buf[(*n)++] = (uint8_t)v;
            p = q;
        } else if (isupper((unsigned char)*p)) {
            if (*n >= cap)
                return -EINVAL;
            buf[(*n)++] = 0;
            p++;
        } else {
            p++;
        }
    }
    return p < end ? 0 : -EINVAL;
}

/* The first occurrence of what in [s, e), or NULL. */
static const char *strstr_n(const char *s, const char *e, const char *what)
{
    size_t n = strlen(what);

    for (; s + n <= e; s++)
        if (!memcmp(s, what, n))
            return s;
    return NULL;
}

/* Stores the bytes gathered for unit k. */
static int finish(struct ml_asm_units *u, int k, const uint8_t *buf, int n)
{
    u->code[k] = malloc(n ? n : 1);
    if (!u->code[k])
        return -ENOMEM;
    memcpy(u->code[k], buf, n);
    u->len[k] = n;
    return 0;
}

int ml_asm_read_encodings(const char *mc, size_t size, struct ml_asm_units *u, char *err,
                          size_t errlen)
{
    const size_t ll = strlen(UNIT_LABEL);
    const char *p = mc, *end = mc + size;
    int cur = -1, found = 0, n = 0, rc;
    uint8_t buf[64];

    for (; p < end; p++) {
        const char *e = memchr(p, '\n', end - p), *s = p, *enc;

        if (!e)
            e = end;
        while (s < e && isspace((unsigned char)*s))
            s++;
        enc = strstr_n(s, e, "# encoding: [");
        if (cur >= 0 && enc) {
            if (read_bytes(enc + 13, e, buf, &n, (int)sizeof(buf))) {
                ml_asm_err(err, errlen, "unreadable encoding in llvm-mc output: '%.*s'",
                           (int)(e - s), s);
                return -EINVAL;
            }
        } else if (cur >= 0 && s < e && *s != '#') {
            /* The unit ended: a label, a directive or anything else follows. */
            if ((rc = finish(u, cur, buf, n)))
                return rc;
            found++;
            cur = -1;
        }
        if ((size_t)(e - s) > ll && !strncmp(s, UNIT_LABEL, ll)) {
            unsigned long k;
            const char *q = read_num(s + ll, e, 10, INT_MAX, &k);

            if (!q || q >= e || *q != ':' || k >= (unsigned long)u->n || u->code[k]) {
                ml_asm_err(err, errlen, "unexpected llvm-mc output: '%.*s'", (int)(e - s), s);
                return -EINVAL;
            }
            cur = (int)k;
            n = 0;
        }
        p = e;
    }
    if (cur >= 0) {
        if ((rc = finish(u, cur, buf, n)))
            return rc;
        found++;
    }
    if (found != u->n) {
        ml_asm_err(err, errlen, "llvm-mc output has %d of %d instructions", found, u->n);
        return -EINVAL;
    }
    return 0;
}
