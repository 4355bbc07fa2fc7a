/* Sites and markers of the profiled program: the reader of the queue's table blobs. */
#include "backend/sites.h"
#include "backend/backend.h"
#include "format/events.h"
#include "format/qtables.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Sites or markers of one program at most (about 170 MiB of table). */
#define ML_BSITES_MAX (1u << 22)

struct rd {
    const uint8_t *p;
    uint64_t left;
    int bad;
};

static uint32_t get32(struct rd *r)
{
    uint32_t v = 0;

    if (r->left < 4) {
        r->bad = 1;
        return 0;
    }
    memcpy(&v, r->p, 4);
    r->p += 4;
    r->left -= 4;
    return v;
}

/* A copy of the next n bytes as a string; NULL when short (r->bad) or out of memory. */
static char *getstr(struct rd *r, uint32_t n)
{
    char *s;

    if (r->left < n) {
        r->bad = 1;
        return NULL;
    }
    s = malloc((size_t)n + 1);
    if (s) {
        memcpy(s, r->p, n);
        s[n] = 0;
    }
    r->p += n;
    r->left -= n;
    return s;
}

static int grow(void **v, uint32_t *n, uint64_t need, size_t elem)
{
    void *x;

    if (need <= *n)
        return 0;
    /* Global ids are dense from 0: a base far beyond them is hostile, not a big program. */
    if (need > ML_BSITES_MAX)
        return -EINVAL;
    x = realloc(*v, (size_t)need * elem);
    if (!x)
        return -ENOMEM;
    memset((char *)x + (size_t)*n * elem, 0, (size_t)(need - *n) * elem);
    *v = x;
    *n = (uint32_t)need;
    return 0;
}

int ml_bsites_parse(struct ml_bsites *t, const uint8_t *data, uint64_t len)
{
    struct rd r = {data, len, 0};
    uint32_t sbase, ns, mbase, nm, nlen;
    int rc;

    if (get32(&r) != ML_QT_MAGIC || get32(&r) != ML_QT_VERSION)
        goto bad;
    sbase = get32(&r);
    ns = get32(&r);
    mbase = get32(&r);
    nm = get32(&r);
    nlen = get32(&r);
    free(getstr(&r, nlen));
    /* Each site takes 28 bytes and each marker 20 at least: bounds before allocating. */
    if (r.bad || (uint64_t)ns * 28 + (uint64_t)nm * 20 > r.left)
        goto bad;
    rc = grow((void **)&t->s, &t->n, (uint64_t)sbase + ns, sizeof(*t->s));
    if (!rc)
        rc = grow((void **)&t->m, &t->nm, (uint64_t)mbase + nm, sizeof(*t->m));
    if (rc == -EINVAL)
        goto bad;
    if (rc)
        return rc;
    for (uint32_t i = 0; i < ns && !r.bad; i++) {
        struct ml_bsite *x = &t->s[sbase + i];
        uint32_t fl, il, mk;
        free(x->func);
        free(x->file);
        x->kind = get32(&r);
        x->size = get32(&r);
        mk = get32(&r);
        x->marker = mk == ML_EV_NOID ? UINT32_MAX : mbase + mk;
        x->line = get32(&r);
        x->column = get32(&r);
        fl = get32(&r);
        il = get32(&r);
        x->func = getstr(&r, fl);
        x->file = getstr(&r, il);
    }
    for (uint32_t i = 0; i < nm && !r.bad; i++) {
        struct ml_bmarker *x = &t->m[mbase + i];
        uint32_t a, b, c;
        free(x->name);
        free(x->file);
        free(x->func);
        x->kind = get32(&r);
        x->line = get32(&r);
        a = get32(&r);
        b = get32(&r);
        c = get32(&r);
        x->name = getstr(&r, a);
        x->file = getstr(&r, b);
        x->func = getstr(&r, c);
    }
    if (!r.bad)
        return 0;
bad:
    t->bad++;
    return -EINVAL;
}

int ml_bsites_load(struct ml_bsites *t, const struct ml_bblob *blobs)
{
    for (const struct ml_bblob *b = blobs; b; b = b->next)
        if (b->tag == ML_QT_TAG && ml_bsites_parse(t, b->data, b->len) == -ENOMEM)
            return -ENOMEM;
    return 0;
}

void ml_bsites_free(struct ml_bsites *t)
{
    for (uint32_t i = 0; i < t->n; i++) {
        free(t->s[i].func);
        free(t->s[i].file);
    }
    for (uint32_t i = 0; i < t->nm; i++) {
        free(t->m[i].name);
        free(t->m[i].file);
        free(t->m[i].func);
    }
    free(t->s);
    free(t->m);
    memset(t, 0, sizeof(*t));
}

const char *ml_bsites_where(const struct ml_bsites *t, uint64_t id, char *buf, size_t len)
{
    const struct ml_bsite *x = id < t->n ? &t->s[id] : NULL;

    if (!x || !x->func)
        snprintf(buf, len, "?");
    else if (x->file && *x->file)
        snprintf(buf, len, "%s:%u", x->file, x->line);
    else
        snprintf(buf, len, "%s", x->func);
    return buf;
}

const char *ml_bsites_func(const struct ml_bsites *t, uint64_t id)
{
    return id < t->n && t->s[id].func ? t->s[id].func : "";
}

const char *ml_bsites_marker_where(const struct ml_bsites *t, uint64_t id, char *buf, size_t len)
{
    const struct ml_bmarker *x = id < t->nm ? &t->m[id] : NULL;

    if (!x || !x->name)
        snprintf(buf, len, "%s", "");
    else if (x->file && *x->file)
        snprintf(buf, len, "%s:%u", x->file, x->line);
    else
        snprintf(buf, len, "%s", x->name);
    return buf;
}

static const struct ml_bsites *cmp_t;

static int str_cmp(const char *a, const char *b)
{
    return strcmp(a ? a : "", b ? b : "");
}

/* Stack and global objects fold only with each other: a variable is not the call on its line. */
static int is_object(const struct ml_bsite *s)
{
    return s->kind == ML_EV_STACK_ALLOC || s->kind == ML_EV_GLOBAL;
}

static int site_cmp(const void *x, const void *y)
{
    const struct ml_bsite *a = &cmp_t->s[*(const uint32_t *)x],
                          *b = &cmp_t->s[*(const uint32_t *)y];
    int c = str_cmp(a->file, b->file);

    if (!c)
        c = a->line < b->line ? -1 : a->line > b->line;
    if (!c)
        c = str_cmp(a->func, b->func);
    if (!c)
        c = is_object(a) - is_object(b);
    if (!c)
        c = *(const uint32_t *)x < *(const uint32_t *)y ? -1 : 1;
    return c;
}

static int marker_cmp(const void *x, const void *y)
{
    const struct ml_bmarker *a = &cmp_t->m[*(const uint32_t *)x],
                            *b = &cmp_t->m[*(const uint32_t *)y];
    int c = str_cmp(a->file, b->file);

    if (!c)
        c = a->line < b->line ? -1 : a->line > b->line;
    if (!c)
        c = a->kind < b->kind ? -1 : a->kind > b->kind;
    if (!c)
        c = *(const uint32_t *)x < *(const uint32_t *)y ? -1 : 1;
    return c;
}

static int same_site(const struct ml_bsites *t, uint32_t x, uint32_t y)
{
    const struct ml_bsite *a = &t->s[x], *b = &t->s[y];

    return !str_cmp(a->file, b->file) && a->line == b->line && !str_cmp(a->func, b->func) &&
           is_object(a) == is_object(b);
}

static int same_marker(const struct ml_bsites *t, uint32_t x, uint32_t y)
{
    const struct ml_bmarker *a = &t->m[x], *b = &t->m[y];

    return !str_cmp(a->file, b->file) && a->line == b->line && a->kind == b->kind;
}

/*
 * Sorts ids 0..n-1 by cmp (equal entries by id) and maps each to the first
 * of its run of entries that eq says are the same. Reports run on one thread:
 * qsort's comparison reads the table from cmp_t.
 */
static uint32_t *canon(const struct ml_bsites *t, uint32_t n,
                       int (*cmp)(const void *, const void *),
                       int (*eq)(const struct ml_bsites *, uint32_t, uint32_t))
{
    uint32_t *ord = malloc(((size_t)n + 1) * sizeof(*ord)), *map = malloc(((size_t)n + 1) * 4);

    if (!ord || !map) {
        free(ord);
        free(map);
        return NULL;
    }
    for (uint32_t i = 0; i < n; i++)
        ord[i] = i;
    cmp_t = t;
    qsort(ord, n, sizeof(*ord), cmp);
    for (uint32_t i = 0, rep = 0; i < n; i++) {
        if (!i || !eq(t, ord[i - 1], ord[i]))
            rep = ord[i];
        map[ord[i]] = rep;
    }
    free(ord);
    return map;
}

uint32_t *ml_bsites_canon_sites(const struct ml_bsites *t)
{
    return canon(t, t->n, site_cmp, same_site);
}

uint32_t *ml_bsites_canon_markers(const struct ml_bsites *t)
{
    return canon(t, t->nm, marker_cmp, same_marker);
}

uint64_t ml_bsites_block_canon(const struct ml_bsites *t, const uint32_t *scanon,
                               const uint32_t *mcanon, uint64_t key)
{
    uint64_t id = key & 0xffffffffu;

    if (key & ML_BKEY_LIB)
        return mcanon && id < t->nm ? ML_BKEY_LIB | mcanon[id] : key;
    return scanon && id < t->n ? scanon[id] : key;
}

const char *ml_bsites_block_kind(const struct ml_bsites *t, uint64_t key, const char **name)
{
    uint64_t id = key & 0xffffffffu;
    const struct ml_bsite *s = !(key & ML_BKEY_LIB) && id < t->n ? &t->s[id] : NULL;

    *name = "";
    if (key & ML_BKEY_LIB)
        return "library";
    if (!s || (s->kind != ML_EV_STACK_ALLOC && s->kind != ML_EV_GLOBAL))
        return "heap";
    if (s->marker < t->nm && t->m[s->marker].name)
        *name = t->m[s->marker].name;
    return s->kind == ML_EV_GLOBAL ? "global" : "stack";
}

const char *ml_bsites_block_where(const struct ml_bsites *t, uint64_t key, char *buf, size_t len,
                                  const char **func)
{
    uint64_t id = key & 0xffffffffu;

    if (key & ML_BKEY_LIB) {
        const char *fn = id < t->nm && t->m[id].name ? t->m[id].name : "";
        snprintf(buf, len, *fn ? "library in %s" : "library", fn);
        *func = fn;
        return buf;
    }
    *func = ml_bsites_func(t, id);
    return ml_bsites_where(t, id, buf, len);
}
