/* Test helper: builds synthetic region profiles (.mlp) in memory with the ml_pw writer. */
#ifndef ML_TESTS_MLP_BUILD_H
#define ML_TESTS_MLP_BUILD_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format/profile.h"

#define MLB_MAX 64

struct mlb_thread {
    struct ml_prof_thread t;
    uint64_t counts[MLB_MAX];
    struct ml_prof_rstat rs[MLB_MAX];
    int has_exact; /* an EXACT record follows the THREAD record */
    uint64_t exact[MLB_MAX][ML_NCLASS];
};

/* A profile under construction; counts and rstats are filled in directly. */
struct mlb {
    struct ml_prof_header hdr;
    char str[8192];
    uint32_t nstr;
    uint32_t meta[2 * MLB_MAX], nmeta;
    uint32_t regions[MLB_MAX], nregions;
    uint32_t regsets[4 * MLB_MAX], nregset_words;
    struct ml_prof_unit units[MLB_MAX];
    uint32_t nunits;
    struct ml_prof_call calls[MLB_MAX];
    uint32_t ncalls;
    struct ml_prof_module modules[8];
    uint32_t nmodules;
    struct mlb_thread threads[8];
    uint32_t nthreads;
    struct ml_prof_calib calib; /* written when has_calib */
    int has_calib;
    struct ml_prof_exited exited; /* written before the threads when nthreads is set */
    /* TIMELINE payload after its header, written after the threads when has_tl is set. */
    int has_tl;
    struct ml_prof_timeline tl;
    unsigned char tlbuf[8192];
    size_t ntl, tl_snap; /* bytes used; offset of the current snapshot header */
};

static inline struct mlb *mlb_new(uint64_t tsc_hz)
{
    struct mlb *b = calloc(1, sizeof(*b));

    memcpy(b->hdr.magic, ML_PROF_MAGIC, 8);
    b->hdr.version = ML_PROF_VERSION;
    b->hdr.header_size = sizeof(b->hdr);
    b->hdr.tsc_hz = tsc_hz;
    b->hdr.wall_ns = 1500000000;
    b->hdr.pid = 4242;
    b->hdr.ppid = 1;
    b->hdr.clock = ML_CLOCK_TSC;
    b->hdr.sample = 1;
    b->nstr = 1; /* offset 0 is "" */
    return b;
}

/* Appends s to the string table (no sharing, so equal strings get distinct offsets). */
static inline uint32_t mlb_str(struct mlb *b, const char *s)
{
    uint32_t off = b->nstr;

    memcpy(b->str + off, s, strlen(s) + 1);
    b->nstr += (uint32_t)strlen(s) + 1;
    return off;
}

static inline void mlb_meta(struct mlb *b, const char *k, const char *v)
{
    b->meta[2 * b->nmeta] = mlb_str(b, k);
    b->meta[2 * b->nmeta + 1] = mlb_str(b, v);
    b->nmeta++;
}

static inline uint32_t mlb_region(struct mlb *b, const char *name)
{
    b->regions[b->nregions] = mlb_str(b, name);
    return b->nregions++;
}

/* Region set of n ids; returns its word offset. */
static inline uint32_t mlb_regset(struct mlb *b, uint32_t n, ...)
{
    uint32_t off = b->nregset_words;
    va_list ap;

    b->regsets[b->nregset_words++] = n;
    va_start(ap, n);
    for (uint32_t i = 0; i < n; i++)
        b->regsets[b->nregset_words++] = va_arg(ap, uint32_t);
    va_end(ap);
    return off;
}

/* One (fact, value) argument pair of mlb_unit. */
#define MLB_F(f, v) (int)(f), (uint64_t)(v)

/* Unit with facts given as MLB_F(fact, value) pairs ending with -1. */
static inline uint32_t mlb_unit(struct mlb *b, uint32_t kind, const char *func, const char *file,
                                uint32_t line, uint32_t regset, ...)
{
    struct ml_prof_unit *u = &b->units[b->nunits];
    va_list ap;
    int f;

    u->kind = kind;
    u->func = mlb_str(b, func);
    u->file = mlb_str(b, file);
    u->line = line;
    u->regset = regset;
    va_start(ap, regset);
    while ((f = va_arg(ap, int)) >= 0)
        u->facts[f] = va_arg(ap, uint64_t);
    va_end(ap);
    return b->nunits++;
}

static inline void mlb_call(struct mlb *b, uint32_t unit, const char *callee, uint64_t per_exec)
{
    b->calls[b->ncalls].unit = unit;
    b->calls[b->ncalls].callee = mlb_str(b, callee);
    b->calls[b->ncalls].per_exec = per_exec;
    b->ncalls++;
}

static inline uint32_t mlb_thread(struct mlb *b, uint32_t tid)
{
    b->threads[b->nthreads].t.tid = tid;
    b->threads[b->nthreads].t.index = b->nthreads;
    return b->nthreads++;
}

/* Starts a snapshot at tick; mlb_tl_point adds its points. */
static inline void mlb_tl_snap(struct mlb *b, uint64_t tick)
{
    struct ml_prof_tl_snap sn = {.tick = tick, .npoints = 0};

    if (!b->has_tl) {
        b->has_tl = 1;
        b->tl.interval_ns = b->tl.requested_ns = 100000000;
    }
    b->tl_snap = b->ntl;
    memcpy(b->tlbuf + b->ntl, &sn, sizeof(sn));
    b->ntl += sizeof(sn);
    b->tl.nsnaps++;
}

static inline void mlb_tl_point(struct mlb *b, uint32_t thread, uint32_t region, uint64_t entries,
                                uint64_t ticks, uint64_t rd, uint64_t wr, uint64_t instr)
{
    struct ml_prof_tl_point pt = {thread, region, entries, ticks, rd, wr, instr};
    struct ml_prof_tl_snap sn;

    memcpy(b->tlbuf + b->ntl, &pt, sizeof(pt));
    b->ntl += sizeof(pt);
    memcpy(&sn, b->tlbuf + b->tl_snap, sizeof(sn));
    sn.npoints++;
    memcpy(b->tlbuf + b->tl_snap, &sn, sizeof(sn));
}

static inline void mlb_sec(struct ml_pw *w, uint32_t type, const void *p, uint64_t len)
{
    ml_pw_section(w, type, len);
    ml_pw_bytes(w, p, len);
}

/*
 * Serialises b in the runtime's order (string table first, threads last) through
 * a small writer buffer so that flushing mid-record is exercised. Returns a
 * malloc'd buffer of *len bytes.
 */
static inline unsigned char *mlb_write(struct mlb *b, size_t *len)
{
    FILE *f = tmpfile();
    unsigned char wbuf[40], *out;
    struct ml_pw w;
    long n;

    ml_pw_init(&w, fileno(f), wbuf, sizeof(wbuf));
    ml_pw_bytes(&w, &b->hdr, sizeof(b->hdr));
    mlb_sec(&w, ML_SEC_STRTAB, b->str, b->nstr);
    mlb_sec(&w, ML_SEC_META, b->meta, 8ull * b->nmeta);
    mlb_sec(&w, ML_SEC_REGIONS, b->regions, 4ull * b->nregions);
    mlb_sec(&w, ML_SEC_REGSETS, b->regsets, 4ull * b->nregset_words);
    mlb_sec(&w, ML_SEC_UNITS, b->units, sizeof(b->units[0]) * b->nunits);
    mlb_sec(&w, ML_SEC_CALLS, b->calls, sizeof(b->calls[0]) * b->ncalls);
    if (b->nmodules)
        mlb_sec(&w, ML_SEC_MODULES, b->modules, sizeof(b->modules[0]) * b->nmodules);
    if (b->exited.nthreads)
        mlb_sec(&w, ML_SEC_EXITED, &b->exited, sizeof(b->exited));
    for (uint32_t t = 0; t < b->nthreads; t++) {
        struct mlb_thread *th = &b->threads[t];
        th->t.nunits = b->nunits;
        th->t.nregions = b->nregions;
        ml_pw_section(&w, ML_SEC_THREAD,
                      sizeof(th->t) + 8ull * b->nunits + sizeof(th->rs[0]) * b->nregions);
        ml_pw_bytes(&w, &th->t, sizeof(th->t));
        ml_pw_bytes(&w, th->counts, 8ull * b->nunits);
        ml_pw_bytes(&w, th->rs, sizeof(th->rs[0]) * b->nregions);
        if (th->has_exact) {
            struct ml_prof_thread xt = {.tid = th->t.tid, .index = th->t.index, .nunits = b->nunits};
            ml_pw_section(&w, ML_SEC_EXACT, sizeof(xt) + 8ull * ML_NCLASS * b->nunits);
            ml_pw_bytes(&w, &xt, sizeof(xt));
            ml_pw_bytes(&w, th->exact, 8ull * ML_NCLASS * b->nunits);
        }
    }
    if (b->has_calib)
        mlb_sec(&w, ML_SEC_CALIB, &b->calib, sizeof(b->calib));
    if (b->has_tl) {
        ml_pw_section(&w, ML_SEC_TIMELINE, sizeof(b->tl) + b->ntl);
        ml_pw_bytes(&w, &b->tl, sizeof(b->tl));
        ml_pw_bytes(&w, b->tlbuf, b->ntl);
    }
    ml_pw_section(&w, ML_SEC_END, 0);
    if (ml_pw_finish(&w))
        abort();
    n = ftell(f);
    out = malloc((size_t)n);
    rewind(f);
    if (fread(out, 1, (size_t)n, f) != (size_t)n)
        abort();
    fclose(f);
    *len = (size_t)n;
    return out;
}

/* Offset of the payload of the nth section of type in a written profile, or 0. */
static inline size_t mlb_find(const unsigned char *buf, size_t len, uint32_t type, int nth)
{
    size_t off = sizeof(struct ml_prof_header);

    while (off + sizeof(struct ml_prof_section) <= len) {
        struct ml_prof_section s;
        memcpy(&s, buf + off, sizeof(s));
        if (s.type == type && nth-- == 0)
            return off + sizeof(s);
        if (s.type == ML_SEC_END)
            break;
        off += sizeof(s) + s.length;
    }
    return 0;
}

#endif
