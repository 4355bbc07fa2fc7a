/* Value profile of one load: distinct values with counts, per-thread progressions, the class. */
#include "backend/vprof.h"
#include "format/queue.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double as_double(uint64_t v, unsigned type)
{
    if (type == ML_Q_VAL_FLOAT) {
        uint32_t b = (uint32_t)v;
        float f;
        memcpy(&f, &b, sizeof(f));
        return f;
    }
    double d;
    memcpy(&d, &v, sizeof(d));
    return d;
}

static int is_float(unsigned type)
{
    return type == ML_Q_VAL_FLOAT || type == ML_Q_VAL_DOUBLE;
}

/* v sign-extended from size bytes. */
static int64_t sext(uint64_t v, unsigned size)
{
    unsigned sh = size && size < 8 ? 64 - 8 * size : 0;

    return (int64_t)(v << sh) >> sh;
}

/*
 * The step from a to b: integers and pointers modulo 2^(8 size), sign-extended
 * (so -1 steps stay -1 across zero); floats as a double's bits; 0 when there
 * is no non-zero step (equal values, NaN).
 */
static uint64_t step(uint64_t a, uint64_t b, unsigned type, unsigned size)
{
    if (is_float(type)) {
        double d = as_double(b, type) - as_double(a, type);
        uint64_t bits;
        if (!(d != 0)) /* also NaN */
            return 0;
        memcpy(&bits, &d, sizeof(bits));
        return bits;
    }
    return (uint64_t)sext(b - a, size);
}

static struct ml_vseq *seq_of(struct ml_vprof *p, uint32_t thread)
{
    if (p->hot < p->nseq && p->seq[p->hot].thread == thread)
        return &p->seq[p->hot];
    for (uint32_t i = 0; i < p->nseq; i++)
        if (p->seq[i].thread == thread) {
            p->hot = i;
            return &p->seq[i];
        }
    if (p->nseq == p->capseq) {
        uint32_t cap = p->capseq ? p->capseq * 2 : 2;
        struct ml_vseq *s = realloc(p->seq, (size_t)cap * sizeof(*s));
        if (!s) {
            p->nomem = 1;
            return NULL;
        }
        p->seq = s;
        p->capseq = cap;
    }
    p->hot = p->nseq;
    memset(&p->seq[p->nseq], 0, sizeof(p->seq[0]));
    p->seq[p->nseq].thread = thread;
    return &p->seq[p->nseq++];
}

static void count_value(struct ml_vprof *p, uint64_t v, uint64_t n)
{
    for (uint32_t i = 0; i < p->nvals; i++)
        if (p->val[i] == v) {
            p->cnt[i] += n;
            return;
        }
    if (p->nvals == ML_VPROF_SET_MAX) {
        p->overflow = 1;
        return;
    }
    p->val[p->nvals] = v;
    p->cnt[p->nvals++] = n;
}

void ml_vprof_add_slow(struct ml_vprof *p, uint32_t thread, uint64_t v, unsigned type,
                       unsigned size)
{
    struct ml_vseq *s;

    if (!p->n) {
        p->type = type;
        p->size = size;
    }
    p->n++;
    /* the common case of a set: the value the thread loaded last */
    if (!p->overflow)
        count_value(p, v, 1);
    if (!(s = seq_of(p, thread)))
        return;
    switch (s->state) {
    case 0:
        s->first = v;
        s->state = ML_VSEQ_ONE;
        break;
    case ML_VSEQ_ONE:
        s->stride = step(s->last, v, p->type, p->size);
        s->state = s->stride ? ML_VSEQ_STRIDED : ML_VSEQ_BROKEN;
        break;
    case ML_VSEQ_STRIDED:
        if (step(s->last, v, p->type, p->size) != s->stride)
            s->state = ML_VSEQ_BROKEN;
        break;
    }
    s->last = v;
}

void ml_vprof_merge(struct ml_vprof *into, const struct ml_vprof *from)
{
    if (!into->n && !into->novalue) {
        into->type = from->type;
        into->size = from->size;
    }
    into->n += from->n;
    into->novalue += from->novalue;
    into->overflow |= from->overflow;
    for (uint32_t i = 0; i < from->nvals && !into->overflow; i++)
        count_value(into, from->val[i], from->cnt[i]);
    into->nomem |= from->nomem;
    for (uint32_t i = 0; i < from->nseq; i++) {
        const struct ml_vseq *f = &from->seq[i];
        int fresh = 1;
        struct ml_vseq *s;
        for (uint32_t k = 0; k < into->nseq; k++)
            fresh &= into->seq[k].thread != f->thread;
        if (!(s = seq_of(into, f->thread)))
            return;
        if (fresh) {
            *s = *f;
            continue;
        }
        if (f->first < s->first)
            s->first = f->first;
        if (s->state == ML_VSEQ_ONE && f->state == ML_VSEQ_STRIDED)
            s->stride = f->stride;
        else if (s->state == ML_VSEQ_ONE && f->state == ML_VSEQ_ONE)
            s->stride = 0;
        if (f->state == ML_VSEQ_BROKEN || s->state == ML_VSEQ_BROKEN ||
            (f->state == ML_VSEQ_STRIDED && s->state == ML_VSEQ_STRIDED && f->stride != s->stride))
            s->state = ML_VSEQ_BROKEN;
        else if (f->state == ML_VSEQ_STRIDED || s->state == ML_VSEQ_STRIDED)
            s->state = ML_VSEQ_STRIDED;
    }
}

void ml_vprof_fini(struct ml_vprof *p)
{
    free(p->seq);
    p->seq = NULL;
    p->nseq = p->capseq = 0;
}

enum ml_vkind ml_vprof_class(const struct ml_vprof *p, uint64_t *value, uint64_t *stride)
{
    uint32_t strided = 0, broken = 0, lowest = UINT32_MAX, best = 0;

    *value = *stride = 0;
    if (!p->n)
        return ML_VK_NONE;
    if (p->nvals == 1 && !p->overflow) {
        *value = p->val[0];
        return ML_VK_CONSTANT;
    }
    for (uint32_t i = 0; i < p->nseq; i++) {
        const struct ml_vseq *s = &p->seq[i];
        if (s->state == ML_VSEQ_BROKEN ||
            (s->state == ML_VSEQ_STRIDED && strided && s->stride != *stride))
            broken = 1;
        else if (s->state == ML_VSEQ_STRIDED && !strided++)
            *stride = s->stride;
        if (s->thread < lowest) {
            lowest = s->thread;
            *value = s->first;
        }
    }
    if (strided && !broken && !p->nomem)
        return ML_VK_STRIDED;
    *stride = 0;
    if (p->overflow || p->nomem) {
        *value = 0;
        return ML_VK_VARIED;
    }
    for (uint32_t i = 1; i < p->nvals; i++)
        if (p->cnt[i] > p->cnt[best] || (p->cnt[i] == p->cnt[best] && p->val[i] < p->val[best]))
            best = i;
    *value = p->val[best];
    return ML_VK_SET;
}

const char *ml_vkind_name(enum ml_vkind k)
{
    static const char *const names[] = {"none", "constant", "strided", "set", "varied"};

    return k <= ML_VK_VARIED ? names[k] : "?";
}

const char *ml_vprof_fmt(const struct ml_vprof *p, uint64_t v, int as_stride, char *buf,
                         unsigned len)
{
    if (is_float(p->type))
        snprintf(buf, len, "%.*g", p->type == ML_Q_VAL_FLOAT && !as_stride ? 9 : 17,
                 as_stride ? as_double(v, ML_Q_VAL_DOUBLE) : as_double(v, p->type));
    else if (p->type == ML_Q_VAL_PTR && !as_stride)
        snprintf(buf, len, "0x%" PRIx64, v);
    else
        snprintf(buf, len, "%" PRId64, sext(v, as_stride ? 8 : p->size));
    return buf;
}
