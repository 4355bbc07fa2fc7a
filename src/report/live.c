/* Live reader: a running profiled process's counters, read with process_vm_readv, as profiles. */
#include "report/live.h"
#include "format/live.h"
#include "runtime/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

/* Bounds on what a process can publish; anything larger is taken for corruption. */
#define MAX_MODS    (1u << 16)
#define MAX_UNITS   (1u << 24)
#define MAX_WORDS   (1u << 26)
#define MAX_THREADS (1u << 20)
#define MAX_NAME    256
#define MAX_RECORD  4096u      /* bytes of a unit or region state (both copied here) */
#define MAX_OFFSET  (1u << 20) /* of a field in the runtime's structs (read in place) */
#define MAX_REGIONS (1u << 16)
#define MAX_RAW     (1ull << 30) /* bytes of one module's units copied at once */
#define MAX_TRIES   1000         /* reads of a record that a thread update overlapped */

static const char *const field_names[ML_LIVE_NFIELDS] = {
    [ML_LF_RT_MODS] = "rt.mods",
    [ML_LF_RT_NMODS] = "rt.nmods",
    [ML_LF_RT_NUNITS] = "rt.nunits",
    [ML_LF_RT_NAMES] = "rt.names",
    [ML_LF_RT_NREGIONS] = "rt.nregions",
    [ML_LF_RT_THREADS] = "rt.threads",
    [ML_LF_RT_TICK0] = "rt.tick0",
    [ML_LF_RT_MONO0] = "rt.mono0",
    [ML_LF_MOD_NEXT] = "module.next",
    [ML_LF_MOD_NUNITS] = "module.nunits",
    [ML_LF_MOD_NREGSET] = "module.nregset",
    [ML_LF_MOD_NREGIONS] = "module.nregions",
    [ML_LF_MOD_REGSETS] = "module.regsets",
    [ML_LF_MOD_UNITS] = "module.units",
    [ML_LF_MOD_REGION_IDS] = "module.region_ids",
    [ML_LF_UNIT_SIZE] = "unit size",
    [ML_LF_UNIT_KIND] = "unit.kind",
    [ML_LF_UNIT_REGSET] = "unit.regset",
    [ML_LF_UNIT_FACTS] = "unit.facts",
    [ML_LF_THR_NEXT] = "thread.next",
    [ML_LF_THR_TID] = "thread.tid",
    [ML_LF_THR_INDEX] = "thread.index",
    [ML_LF_THR_DONE] = "thread.done",
    [ML_LF_THR_NMODS] = "thread.nmods",
    [ML_LF_THR_TLS] = "thread.tls",
    [ML_LF_THR_SNAP] = "thread.snap",
    [ML_LF_THR_SNAPN] = "thread.snapn",
    [ML_LF_THR_RS] = "thread.rs",
    [ML_LF_RS_SIZE] = "region state size",
    [ML_LF_RS_ENTRIES] = "region_state.entries",
    [ML_LF_RS_TICKS] = "region_state.ticks",
    [ML_LF_RS_START] = "region_state.start",
    [ML_LF_RS_DEPTH] = "region_state.depth",
    [ML_LF_RT_SAMPLE] = "rt.sample",
    [ML_LF_RT_ACC] = "rt.acc",
    [ML_LF_RT_NFOLDED] = "rt.nfolded",
    [ML_LF_RT_RECSEQ] = "rt.recseq",
};

/* Whether field f (n bytes) lies inside a record of size bytes; else says so in err. */
static int field_in(const struct ml_live_header *h, enum ml_live_field f, uint64_t n, uint32_t size,
                    char *err, size_t errlen)
{
    if (h->off[f] + n <= size)
        return 1;
    snprintf(err, errlen, "%s: %llu bytes at offset %u of a %u-byte record", field_names[f],
             (unsigned long long)n, h->off[f], size);
    return 0;
}

int ml_live_check_layout(const struct ml_live_header *h, char *err, size_t errlen)
{
    uint32_t usize = h->off[ML_LF_UNIT_SIZE], rsz = h->off[ML_LF_RS_SIZE];

    for (int f = 0; f < ML_LIVE_NFIELDS; f++)
        if (f != ML_LF_UNIT_SIZE && f != ML_LF_RS_SIZE && h->off[f] > MAX_OFFSET) {
            snprintf(err, errlen, "%s at offset %u", field_names[f], h->off[f]);
            return -EPROTO;
        }
    if (!usize || usize > MAX_RECORD || !rsz || rsz > MAX_RECORD) {
        snprintf(err, errlen, "records of %u and %u bytes", usize, rsz);
        return -EPROTO;
    }
    if (!h->max_regions || h->max_regions > MAX_REGIONS) {
        snprintf(err, errlen, "%u regions at most", h->max_regions);
        return -EPROTO;
    }
    /* Records are copied here whole and their fields read from the copy: all must fit. */
    if (!field_in(h, ML_LF_UNIT_KIND, 4, usize, err, errlen) ||
        !field_in(h, ML_LF_UNIT_REGSET, 4, usize, err, errlen) ||
        !field_in(h, ML_LF_UNIT_FACTS, 8ull * h->nfacts, usize, err, errlen) ||
        !field_in(h, ML_LF_RS_ENTRIES, 8, rsz, err, errlen) ||
        !field_in(h, ML_LF_RS_TICKS, 8, rsz, err, errlen) ||
        !field_in(h, ML_LF_RS_START, 8, rsz, err, errlen) ||
        !field_in(h, ML_LF_RS_DEPTH, 4, rsz, err, errlen))
        return -EPROTO;
    return 0;
}

void ml_live_unit(const struct ml_live_header *h, const unsigned char *rec, struct ml_prof_unit *u,
                  uint32_t *regset)
{
    const uint32_t *o = h->off;

    memset(u->facts, 0, sizeof(u->facts));
    memcpy(&u->kind, rec + o[ML_LF_UNIT_KIND], 4);
    memcpy(regset, rec + o[ML_LF_UNIT_REGSET], 4);
    memcpy(u->facts, rec + o[ML_LF_UNIT_FACTS],
           8ull * (h->nfacts < ML_NFACTS ? h->nfacts : ML_NFACTS));
}

void ml_live_rstate(const struct ml_live_header *h, const unsigned char *rec, uint64_t *entries,
                    uint64_t *ticks, uint64_t *start, uint32_t *depth)
{
    const uint32_t *o = h->off;

    memcpy(entries, rec + o[ML_LF_RS_ENTRIES], 8);
    memcpy(ticks, rec + o[ML_LF_RS_TICKS], 8);
    memcpy(start, rec + o[ML_LF_RS_START], 8);
    memcpy(depth, rec + o[ML_LF_RS_DEPTH], 4);
}

struct ml_live {
    pid_t pid;
    char path[64]; /* the live-view file */
    struct ml_live_header h;
    uint64_t tick0, mono0;
    /* Tables in profile form; rebuilt when modules are added, extended when regions are. */
    uint32_t nmods;
    uint32_t *mod_nunits; /* [nmods] */
    uint64_t nunits;
    struct ml_prof_unit *units;
    uint32_t *regsets;
    uint64_t nregset_words;
    uint32_t nregions;
    uint32_t *region_off; /* [nregions]: name offsets in strtab */
    char *strtab;
    uint64_t strtab_len;
    /* Every thread record ever seen, by address: records are never freed, only moved. */
    uint64_t *recs;
    uint32_t nrecs, caprecs;
};

static int peek(const struct ml_live *l, uint64_t addr, void *buf, size_t n)
{
    struct iovec lo = {buf, n}, re = {(void *)(uintptr_t)addr, n};
    ssize_t r;

    if (!n)
        return 0;
    r = process_vm_readv(l->pid, &lo, 1, &re, 1, 0);
    if (r == (ssize_t)n)
        return 0;
    return r < 0 ? -errno : -EFAULT;
}

static int peek_u32(const struct ml_live *l, uint64_t base, enum ml_live_field f, uint32_t *v)
{
    return peek(l, base + l->h.off[f], v, sizeof(*v));
}

static int peek_u64(const struct ml_live *l, uint64_t base, enum ml_live_field f, uint64_t *v)
{
    return peek(l, base + l->h.off[f], v, sizeof(*v));
}

/* Pointers are published as 64-bit (ptr_size is checked at open). */
static int peek_ptr(const struct ml_live *l, uint64_t base, enum ml_live_field f, uint64_t *v)
{
    return peek_u64(l, base, f, v);
}

/* A NUL-terminated string, read in pieces that never cross a page the process may not have. */
static int peek_str(const struct ml_live *l, uint64_t addr, char *buf, size_t cap)
{
    size_t len = 0;

    while (len < cap - 1) {
        size_t n = 64 - (addr + len) % 64, k;
        int rc;
        if (n > cap - 1 - len)
            n = cap - 1 - len;
        rc = peek(l, addr + len, buf + len, n);
        if (rc)
            return rc;
        for (k = 0; k < n; k++)
            if (!buf[len + k]) {
                return 0;
            }
        len += n;
    }
    buf[len] = 0;
    return 0;
}

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
    va_list ap;

    if (errlen) {
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

/* Message for an error of process_vm_readv on the attached process. */
static int read_failed(const struct ml_live *l, int rc, char *err, size_t errlen)
{
    if (rc == -EPERM || rc == -EACCES)
        return fail(err, errlen, -EPERM, "cannot read process %d: permission denied", (int)l->pid);
    if (rc == -ESRCH)
        return fail(err, errlen, -ESRCH, "process %d exited", (int)l->pid);
    if (rc == -ENOMEM)
        return fail(err, errlen, rc, "out of memory");
    return fail(err, errlen, -EPROTO, "process %d: its memlens state cannot be read (%s)",
                (int)l->pid, strerror(-rc));
}

/* The copy in the process's memory must match the file: else the file is not this process's. */
static int check_cookie(const struct ml_live *l, char *err, size_t errlen)
{
    struct ml_live_header mem;
    int rc = peek(l, l->h.self_addr, &mem, sizeof(mem));

    if (rc == -EFAULT || (!rc && memcmp(&mem, &l->h, sizeof(mem))))
        return fail(err, errlen, -ESTALE,
                    "process %d is not profiled by memlens ('%s' is stale: "
                    "left by an earlier process with that pid)",
                    (int)l->pid, l->path);
    return rc ? read_failed(l, rc, err, errlen) : 0;
}

int ml_live_open(pid_t pid, struct ml_live **out, char *err, size_t errlen)
{
    char why[128];
    struct ml_live *l = NULL;
    ssize_t n;
    int rc;

    *out = NULL;
    l = calloc(1, sizeof(*l));
    if (!l)
        return fail(err, errlen, -ENOMEM, "out of memory");
    l->pid = pid;
    rc = ml_live_find(pid, &l->h, &n, l->path, sizeof(l->path), err, errlen);
    if (rc)
        goto out;
    if (l->h.nfields < ML_LIVE_NFIELDS || n < (ssize_t)sizeof(l->h) || l->h.ptr_size != 8) {
        rc = fail(err, errlen, -EPROTO,
                  "process %d was built with an incompatible memlens (live layout version %u, "
                  "%u fields; this memlens reads version %u)",
                  (int)pid, l->h.version, l->h.nfields, ML_LIVE_VERSION);
        goto out;
    }
    if (l->h.clock != ML_RT_CLOCK) {
        rc = fail(err, errlen, -EPROTO, "process %d uses another region clock than this memlens",
                  (int)pid);
        goto out;
    }
    if (ml_live_check_layout(&l->h, why, sizeof(why))) {
        rc = fail(err, errlen, -EPROTO, "'%s' describes an impossible struct layout (%s)", l->path,
                  why);
        goto out;
    }
    rc = check_cookie(l, err, errlen);
    if (rc)
        goto out;
    rc = peek_u64(l, l->h.rt_addr, ML_LF_RT_TICK0, &l->tick0);
    if (!rc)
        rc = peek_u64(l, l->h.rt_addr, ML_LF_RT_MONO0, &l->mono0);
    if (rc) {
        rc = read_failed(l, rc, err, errlen);
        goto out;
    }
    l->strtab = calloc(1, 1);
    l->strtab_len = 1;
    if (!l->strtab) {
        rc = fail(err, errlen, -ENOMEM, "out of memory");
        goto out;
    }
    *out = l;
    l = NULL;
out:
    ml_live_close(l);
    return rc;
}

void ml_live_close(struct ml_live *l)
{
    if (!l)
        return;
    free(l->mod_nunits);
    free(l->units);
    free(l->regsets);
    free(l->region_off);
    free(l->strtab);
    free(l->recs);
    free(l);
}

/* Names of regions registered since the last read; ids are never reused. */
static int read_names(struct ml_live *l, uint32_t nregions, char *err, size_t errlen)
{
    uint32_t *off;
    char name[MAX_NAME];
    int rc;

    if (nregions <= l->nregions)
        return 0;
    if (nregions > l->h.max_regions)
        return fail(err, errlen, -EPROTO, "process %d: %u regions (at most %u)", (int)l->pid,
                    nregions, l->h.max_regions);
    off = realloc(l->region_off, nregions * sizeof(*off));
    if (!off)
        return fail(err, errlen, -ENOMEM, "out of memory");
    l->region_off = off;
    for (uint32_t i = l->nregions; i < nregions; i++) {
        uint64_t p;
        size_t len;
        char *s;
        rc = peek(l, l->h.rt_addr + l->h.off[ML_LF_RT_NAMES] + 8ull * i, &p, sizeof(p));
        if (!rc)
            rc = peek_str(l, p, name, sizeof(name));
        if (rc)
            return read_failed(l, rc, err, errlen);
        len = strlen(name) + 1;
        s = realloc(l->strtab, l->strtab_len + len);
        if (!s)
            return fail(err, errlen, -ENOMEM, "out of memory");
        memcpy(s + l->strtab_len, name, len);
        l->strtab = s;
        off[i] = (uint32_t)l->strtab_len;
        l->strtab_len += len;
        l->nregions = i + 1;
    }
    return 0;
}

struct mod_desc {
    uint32_t nunits, nwords, nregions;
    uint64_t regsets, units, region_ids;
};

/*
 * Units and region sets of every module, in registration order, with local
 * region ids made global as the profile writer does. Every length, offset and
 * id is checked: the process's memory is not trusted.
 */
static int read_modules(struct ml_live *l, uint32_t nmods, char *err, size_t errlen)
{
    const uint32_t *o = l->h.off;
    struct mod_desc *md = NULL;
    struct ml_prof_unit *units = NULL;
    uint32_t *words = NULL, *ids = NULL, *nu = NULL;
    unsigned char *raw = NULL;
    uint64_t addr, nunits = 0, nwords = 0, ub = 0, wb = 0;
    uint32_t usize = o[ML_LF_UNIT_SIZE];
    int rc;

    if (nmods > MAX_MODS)
        return fail(err, errlen, -EPROTO, "process %d: %u modules", (int)l->pid, nmods);
    md = calloc(nmods + 1, sizeof(*md));
    nu = calloc(nmods + 1, sizeof(*nu));
    if (!md || !nu) {
        rc = fail(err, errlen, -ENOMEM, "out of memory");
        goto out;
    }
    rc = peek_ptr(l, l->h.rt_addr, ML_LF_RT_MODS, &addr);
    for (uint32_t k = 0; !rc && k < nmods; k++) {
        if (!addr) {
            rc = fail(err, errlen, -EPROTO, "process %d: module list ends before %u modules",
                      (int)l->pid, nmods);
            goto out;
        }
        rc = peek_u32(l, addr, ML_LF_MOD_NUNITS, &md[k].nunits);
        if (!rc)
            rc = peek_u32(l, addr, ML_LF_MOD_NREGSET, &md[k].nwords);
        if (!rc)
            rc = peek_u32(l, addr, ML_LF_MOD_NREGIONS, &md[k].nregions);
        if (!rc)
            rc = peek_ptr(l, addr, ML_LF_MOD_REGSETS, &md[k].regsets);
        if (!rc)
            rc = peek_ptr(l, addr, ML_LF_MOD_UNITS, &md[k].units);
        if (!rc)
            rc = peek_ptr(l, addr, ML_LF_MOD_REGION_IDS, &md[k].region_ids);
        if (!rc)
            rc = peek_ptr(l, addr, ML_LF_MOD_NEXT, &addr);
        nunits += md[k].nunits;
        nwords += md[k].nwords;
        nu[k] = md[k].nunits;
    }
    if (rc) {
        rc = read_failed(l, rc, err, errlen);
        goto out;
    }
    if (nunits > MAX_UNITS || nwords > MAX_WORDS) {
        rc = fail(err, errlen, -EPROTO, "process %d: %llu units, %llu region set words",
                  (int)l->pid, (unsigned long long)nunits, (unsigned long long)nwords);
        goto out;
    }
    units = calloc(nunits + 1, sizeof(*units));
    words = calloc(nwords + 1, sizeof(*words));
    if (!units || !words) {
        rc = fail(err, errlen, -ENOMEM, "out of memory");
        goto out;
    }
    for (uint32_t k = 0; k < nmods; k++) {
        const struct mod_desc *m = &md[k];
        uint32_t *w = words + wb;

        free(raw);
        free(ids);
        raw = NULL;
        ids = NULL;
        if ((uint64_t)m->nunits * usize > MAX_RAW) {
            rc = fail(err, errlen, -EPROTO, "process %d: module %u has %u units of %u bytes",
                      (int)l->pid, k, m->nunits, usize);
            goto out;
        }
        raw = malloc((size_t)m->nunits * usize + 1);
        ids = malloc((size_t)m->nregions * 4 + 4);
        if (!raw || !ids) {
            rc = fail(err, errlen, -ENOMEM, "out of memory");
            goto out;
        }
        rc = peek(l, m->regsets, w, m->nwords * 4ull);
        if (!rc)
            rc = peek(l, m->region_ids, ids, m->nregions * 4ull);
        if (!rc)
            rc = peek(l, m->units, raw, (size_t)m->nunits * usize);
        if (rc) {
            rc = read_failed(l, rc, err, errlen);
            goto out;
        }
        for (uint32_t i = 0; i < m->nwords;) {
            uint32_t n = w[i];
            if (n >= m->nwords - i) {
                rc = fail(err, errlen, -EPROTO, "process %d: region set at word %u overruns",
                          (int)l->pid, i);
                goto out;
            }
            for (uint32_t j = 1; j <= n; j++) {
                if (w[i + j] >= m->nregions || ids[w[i + j]] >= l->nregions) {
                    rc = fail(err, errlen, -EPROTO, "process %d: bad region id in set at word %u",
                              (int)l->pid, i);
                    goto out;
                }
                w[i + j] = ids[w[i + j]];
            }
            i += n + 1;
        }
        for (uint32_t i = 0; i < m->nunits; i++) {
            const unsigned char *r = raw + (size_t)i * usize;
            struct ml_prof_unit *u = &units[ub + i];
            uint32_t rs;
            ml_live_unit(&l->h, r, u, &rs);
            /* The reader indexes by these ids: the unit's own set must hold only region ids. */
            if (rs >= m->nwords || w[rs] >= m->nwords - rs) {
                rc = fail(err, errlen, -EPROTO, "process %d: unit %u has no region set",
                          (int)l->pid, i);
                goto out;
            }
            for (uint32_t j = 1; j <= w[rs]; j++)
                if (w[rs + j] >= l->nregions) {
                    rc = fail(err, errlen, -EPROTO, "process %d: unit %u has a bad region set",
                              (int)l->pid, i);
                    goto out;
                }
            u->module = k;
            u->regset = (uint32_t)(wb + rs);
        }
        ub += m->nunits;
        wb += m->nwords;
    }
    free(l->units);
    free(l->regsets);
    free(l->mod_nunits);
    l->units = units;
    l->regsets = words;
    l->mod_nunits = nu;
    l->nunits = nunits;
    l->nregset_words = nwords;
    l->nmods = nmods;
    units = NULL;
    words = NULL;
    nu = NULL;
    rc = 0;
out:
    free(md);
    free(nu);
    free(units);
    free(words);
    free(ids);
    free(raw);
    return rc;
}

static uint64_t align8(uint64_t n)
{
    return (n + 7) & ~7ull;
}

/* A profile with room for the given tables and threads, all in one owned block. */
static struct ml_profile *prof_new(uint64_t strtab_len, uint64_t nregions, uint64_t nwords,
                                   uint64_t nunits, uint64_t nthreads)
{
    struct ml_profile *p = calloc(1, sizeof(*p));
    uint64_t o_reg = align8(strtab_len), o_words = o_reg + align8(nregions * 4);
    uint64_t o_units = o_words + align8(nwords * 4);
    uint64_t o_counts = o_units + nunits * sizeof(struct ml_prof_unit);
    uint64_t o_rs = o_counts + nthreads * nunits * 8;
    uint64_t size = o_rs + nthreads * nregions * sizeof(struct ml_prof_rstat);
    unsigned char *d;

    if (!p)
        return NULL;
    p->data = calloc(1, size + 8);
    p->threads = calloc(nthreads + 1, sizeof(*p->threads));
    if (!p->data || !p->threads) {
        ml_profile_free(p);
        return NULL;
    }
    d = p->data;
    p->strtab = (const char *)d;
    p->strtab_len = strtab_len;
    p->regions = (const uint32_t *)(d + o_reg);
    p->nregions = nregions;
    p->regsets = (const uint32_t *)(d + o_words);
    p->nregset_words = nwords;
    p->units = (const struct ml_prof_unit *)(d + o_units);
    p->nunits = nunits;
    p->nthreads = nthreads;
    for (uint64_t t = 0; t < nthreads; t++) {
        p->threads[t].counts = (const uint64_t *)(d + o_counts) + t * nunits;
        p->threads[t].rstats = (const struct ml_prof_rstat *)(d + o_rs) + t * nregions;
    }
    p->size = size;
    return p;
}

/* Tables of a profile made by prof_new are writable: they live in its own data block. */
static void prof_fill_tables(struct ml_profile *p, const char *strtab, const uint32_t *regions,
                             const uint32_t *words, const struct ml_prof_unit *units)
{
    memcpy((void *)p->strtab, strtab, p->strtab_len);
    memcpy((void *)p->regions, regions, p->nregions * 4);
    memcpy((void *)p->regsets, words, p->nregset_words * 4);
    memcpy((void *)p->units, units, p->nunits * sizeof(*units));
}

/*
 * Reads n pieces in as few process_vm_readv calls as possible, so that they
 * are copied within microseconds of each other: a thread's counters and its
 * region statistics then describe nearly the same moment. A piece that cannot
 * be read (an array freed under us) reads as zero.
 */
static int peek_many(const struct ml_live *l, struct iovec *lo, struct iovec *re, size_t n)
{
    for (size_t i = 0; i < n;) {
        size_t k = n - i < IOV_MAX ? n - i : IOV_MAX, want = 0;
        ssize_t r;
        for (size_t j = 0; j < k; j++)
            want += lo[i + j].iov_len;
        r = process_vm_readv(l->pid, lo + i, k, re + i, k, 0);
        if (r < 0 && (errno == EPERM || errno == ESRCH || errno == ENOMEM))
            return -errno;
        if (r != (ssize_t)want)
            for (size_t j = 0; j < k; j++)
                if (peek(l, (uint64_t)(uintptr_t)re[i + j].iov_base, lo[i + j].iov_base,
                         lo[i + j].iov_len))
                    memset(lo[i + j].iov_base, 0, lo[i + j].iov_len);
        i += k;
    }
    return 0;
}

/*
 * One thread's counts and region statistics. A live thread's counters are
 * its thread-local arrays, one per module; once it has exited (done), they
 * are in snap. done is read again after the live arrays, since a thread that
 * exits meanwhile frees them: then the snapshot is read instead. iov holds
 * nmods + 1 entries of each of lo and re.
 */
static int read_thread(struct ml_live *l, uint64_t rec, struct ml_profile_thread *pt,
                       unsigned char *rsbuf, struct iovec *lo, struct iovec *re, uint64_t *ptrs)
{
    uint64_t *counts = (uint64_t *)pt->counts, tls, snap, rsp, base = 0, now;
    struct ml_prof_rstat *out = (struct ml_prof_rstat *)pt->rstats;
    const uint32_t *o = l->h.off;
    uint32_t done, tmods, snapn, nreg = l->nregions, rsz = o[ML_LF_RS_SIZE];
    size_t n;
    int rc;

    rc = peek_u32(l, rec, ML_LF_THR_TID, &pt->tid);
    if (!rc)
        rc = peek_u32(l, rec, ML_LF_THR_INDEX, &pt->index);
    if (!rc)
        rc = peek_u32(l, rec, ML_LF_THR_DONE, &done);
    if (!rc)
        rc = peek_ptr(l, rec, ML_LF_THR_RS, &rsp);
    if (!rc && !done)
        rc = peek_u32(l, rec, ML_LF_THR_NMODS, &tmods);
    if (!rc && !done)
        rc = peek_ptr(l, rec, ML_LF_THR_TLS, &tls);
    if (!rc && done)
        rc = peek_ptr(l, rec, ML_LF_THR_SNAP, &snap);
    if (!rc && done)
        rc = peek_u32(l, rec, ML_LF_THR_SNAPN, &snapn);
    if (rc)
        return rc;
    n = 0;
    if (!done) {
        if (tmods > l->nmods)
            tmods = l->nmods;
        if (tmods && peek(l, tls, ptrs, 8ull * tmods))
            tmods = 0;
        for (uint32_t k = 0; k < tmods; k++) {
            if (ptrs[k] && l->mod_nunits[k]) {
                lo[n] = (struct iovec){counts + base, 8ull * l->mod_nunits[k]};
                re[n++] = (struct iovec){(void *)(uintptr_t)ptrs[k], 8ull * l->mod_nunits[k]};
            }
            base += l->mod_nunits[k];
        }
    } else if (snap && snapn) {
        lo[n] = (struct iovec){counts, 8ull * (snapn < l->nunits ? snapn : l->nunits)};
        re[n++] = (struct iovec){(void *)(uintptr_t)snap, lo[0].iov_len};
    }
    if (rsp && nreg) {
        lo[n] = (struct iovec){rsbuf, (size_t)nreg * rsz};
        re[n++] = (struct iovec){(void *)(uintptr_t)rsp, (size_t)nreg * rsz};
    } else {
        memset(rsbuf, 0, (size_t)nreg * rsz);
    }
    rc = peek_many(l, lo, re, n);
    /* After the read: an execution that started during it began before now. */
    now = ml_rt_ticks();
    if (!rc && !done) {
        uint32_t again;
        rc = peek_u32(l, rec, ML_LF_THR_DONE, &again);
        if (!rc && again) /* it exited while we read: its arrays may be gone, snap is not */
            return read_thread(l, rec, pt, rsbuf, lo, re, ptrs);
    }
    if (rc)
        return rc;
    for (uint32_t g = 0; g < nreg; g++) {
        uint64_t start;
        uint32_t depth;
        ml_live_rstate(&l->h, rsbuf + (size_t)g * rsz, &out[g].entries, &out[g].ticks, &start,
                       &depth);
        if (depth && !done && now > start) { /* open: count it up to now, as the writer does */
            out[g].entries++;
            out[g].ticks += now - start;
        }
    }
    return 0;
}

/*
 * Reads record rec into pt while no thread record is set up, folded or
 * reused: the runtime's recseq is even, and the same after the read. A read
 * overlapping a reuse could see the old thread's index with the new thread's
 * (reset) counts, or the exited-threads record half summed. After MAX_TRIES
 * (a process stopped mid-update) the last read is kept. With folded, also
 * reads how many threads the exited-threads record sums.
 */
static int read_stable(struct ml_live *l, uint64_t rec, struct ml_profile_thread *pt,
                       uint64_t *folded, unsigned char *rsbuf, struct iovec *lo, struct iovec *re,
                       uint64_t *ptrs)
{
    uint64_t s1, s2;
    int rc;

    for (int tries = 0;; tries++) {
        if (tries)
            sched_yield();
        rc = peek_u64(l, l->h.rt_addr, ML_LF_RT_RECSEQ, &s1);
        if (!rc && (s1 & 1) && tries < MAX_TRIES)
            continue;
        if (!rc)
            rc = read_thread(l, rec, pt, rsbuf, lo, re, ptrs);
        if (!rc && folded)
            rc = peek_u64(l, l->h.rt_addr, ML_LF_RT_NFOLDED, folded);
        if (!rc)
            rc = peek_u64(l, l->h.rt_addr, ML_LF_RT_RECSEQ, &s2);
        if (rc || s1 == s2 || tries >= MAX_TRIES)
            return rc;
    }
}

static int addr_known(const struct ml_live *l, uint64_t a, uint32_t *at)
{
    uint32_t lo = 0, hi = l->nrecs;

    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (l->recs[mid] < a)
            lo = mid + 1;
        else
            hi = mid;
    }
    *at = lo;
    return lo < l->nrecs && l->recs[lo] == a;
}

/* Adds thread record a to the known ones; 0, -ENOMEM, or -EPROTO when there are too many. */
static int known_add(struct ml_live *l, uint64_t a)
{
    uint32_t at;

    if (addr_known(l, a, &at))
        return 0;
    if (l->nrecs == l->caprecs) {
        uint32_t cap = l->caprecs ? 2 * l->caprecs : 16;
        uint64_t *r;
        if (cap > MAX_THREADS)
            return -EPROTO;
        r = realloc(l->recs, cap * sizeof(*r));
        if (!r)
            return -ENOMEM;
        l->recs = r;
        l->caprecs = cap;
    }
    memmove(l->recs + at + 1, l->recs + at, (l->nrecs - at) * sizeof(*l->recs));
    l->recs[at] = a;
    l->nrecs++;
    return 0;
}

static int by_index(const void *a, const void *b)
{
    uint32_t x = ((const struct ml_profile_thread *)a)->index;
    uint32_t y = ((const struct ml_profile_thread *)b)->index;

    return x < y ? -1 : x > y;
}

int ml_live_read(struct ml_live *l, struct ml_profile **out, char *err, size_t errlen)
{
    struct ml_profile *p = NULL;
    uint64_t addr, acc = 0, now, mono, folded = 0;
    uint32_t nmods, nregions, nthreads, steps = 0, t = 0, sample;
    unsigned char *rsbuf = NULL;
    struct iovec *lo = NULL, *re = NULL;
    uint64_t *ptrs = NULL;
    int rc;

    *out = NULL;
    rc = check_cookie(l, err, errlen);
    if (rc)
        return rc == -ESTALE ? fail(err, errlen, -ESRCH, "process %d exited", (int)l->pid) : rc;
    /* nmods first: a module it counts has its regions registered, so nregions covers them. */
    rc = peek_u32(l, l->h.rt_addr, ML_LF_RT_NMODS, &nmods);
    if (!rc)
        rc = peek_u32(l, l->h.rt_addr, ML_LF_RT_NREGIONS, &nregions);
    if (rc)
        return read_failed(l, rc, err, errlen);
    rc = read_names(l, nregions, err, errlen);
    if (!rc && nmods != l->nmods)
        rc = read_modules(l, nmods, err, errlen);
    if (rc)
        return rc;

    /*
     * The list only tells which records exist: one moved to its end while we
     * pass it ends the walk early or shows twice. Records are never freed, so
     * every record seen before is read again, each once.
     */
    rc = peek_ptr(l, l->h.rt_addr, ML_LF_RT_THREADS, &addr);
    while (!rc && addr) {
        if (++steps > MAX_THREADS || (rc = known_add(l, addr)) == -EPROTO) {
            rc = fail(err, errlen, -EPROTO, "process %d: thread list does not end", (int)l->pid);
            goto out;
        }
        if (rc) {
            rc = fail(err, errlen, -ENOMEM, "out of memory");
            goto out;
        }
        rc = peek_ptr(l, addr, ML_LF_THR_NEXT, &addr);
    }
    if (!rc && !peek_ptr(l, l->h.rt_addr, ML_LF_RT_ACC, &acc) && acc && known_add(l, acc))
        acc = 0;
    if (rc) {
        rc = read_failed(l, rc, err, errlen);
        goto out;
    }
    nthreads = l->nrecs;
    p = prof_new(l->strtab_len, l->nregions, l->nregset_words, l->nunits, nthreads);
    rsbuf = malloc((size_t)l->nregions * l->h.off[ML_LF_RS_SIZE] + 1);
    lo = calloc(l->nmods + 2, sizeof(*lo));
    re = calloc(l->nmods + 2, sizeof(*re));
    ptrs = calloc(l->nmods + 1, sizeof(*ptrs));
    if (!p || !rsbuf || !lo || !re || !ptrs) {
        rc = fail(err, errlen, -ENOMEM, "out of memory");
        goto out;
    }
    prof_fill_tables(p, l->strtab, l->region_off, l->regsets, l->units);
    /*
     * The exited-threads record first: a thread folded into it while the
     * others are read is then missing from both, never in both, and
     * ml_live_diff makes up for a missing one (the next read has it).
     */
    if (acc) {
        rc = read_stable(l, acc, &p->threads[t], &folded, rsbuf, lo, re, ptrs);
        p->threads[t++].exited = folded ? folded : 1;
    }
    for (uint32_t i = 0; !rc && i < nthreads; i++)
        if (l->recs[i] != acc)
            rc = read_stable(l, l->recs[i], &p->threads[t++], NULL, rsbuf, lo, re, ptrs);
    if (rc) {
        rc = read_failed(l, rc, err, errlen);
        goto out;
    }
    qsort(p->threads, nthreads, sizeof(*p->threads), by_index);
    now = ml_rt_ticks();
    mono = ml_rt_mono_ns();
    memcpy(p->hdr.magic, ML_PROF_MAGIC, sizeof(p->hdr.magic));
    p->hdr.version = ML_PROF_VERSION;
    p->hdr.header_size = sizeof(p->hdr);
    p->hdr.pid = (uint32_t)l->pid;
    p->hdr.clock = l->h.clock;
    if (peek_u32(l, l->h.rt_addr, ML_LF_RT_SAMPLE, &sample) || sample < 1)
        sample = 1;
    p->hdr.sample = sample;
    p->hdr.wall_ns = mono - l->mono0;
    if (l->h.clock == ML_CLOCK_MONOTONIC)
        p->hdr.tsc_hz = 1000000000ull;
    else if (mono > l->mono0 && now > l->tick0)
        p->hdr.tsc_hz = (uint64_t)((double)(now - l->tick0) * 1e9 / (double)(mono - l->mono0));
    *out = p;
    p = NULL;
out:
    ml_profile_free(p);
    free(rsbuf);
    free(lo);
    free(re);
    free(ptrs);
    return rc;
}

static const struct ml_profile_thread *thread_by_index(const struct ml_profile *p, uint32_t index)
{
    if (index < p->nthreads && p->threads[index].index == index)
        return &p->threads[index];
    for (uint64_t t = 0; t < p->nthreads; t++)
        if (p->threads[t].index == index)
            return &p->threads[t];
    return NULL;
}

/* d = c - b, after raising c to b (counters only grow; a lower value is a racy read). */
static uint64_t grow_diff(uint64_t *c, uint64_t b)
{
    if (*c < b)
        *c = b;
    return *c - b;
}

/* Takes up to v off *d; what it could not take is added to *c. */
static void take_off(uint64_t *d, uint64_t *c, uint64_t v)
{
    uint64_t k = *d < v ? *d : v;

    *d -= k;
    *c += v - k;
}

/*
 * A thread of prev that is gone from cur was folded, all its counts at once,
 * into the exited-threads record: that record's difference holds them, but
 * prev's counts were shown under the thread's own row before, so they come
 * off again. Only the growth since prev stays. The record is read before the
 * others (ml_live_read), so a thread folded during a read is missing from
 * both: what the record's difference lacks is added to cur's record, which
 * the next read's holds; dropping it would count it again then.
 */
static void unfold(const struct ml_profile *prev, struct ml_profile *cur, struct ml_profile *d)
{
    uint64_t x = 0, nu = prev->nunits < cur->nunits ? prev->nunits : cur->nunits;
    uint64_t nr = prev->nregions < cur->nregions ? prev->nregions : cur->nregions;
    uint64_t *dc, *cc;
    struct ml_prof_rstat *dr, *cr;

    while (x < cur->nthreads && !cur->threads[x].exited)
        x++;
    if (x == cur->nthreads)
        return;
    dc = (uint64_t *)d->threads[x].counts;
    dr = (struct ml_prof_rstat *)d->threads[x].rstats;
    cc = (uint64_t *)cur->threads[x].counts;
    cr = (struct ml_prof_rstat *)cur->threads[x].rstats;
    for (uint64_t t = 0; t < prev->nthreads; t++) {
        const struct ml_profile_thread *pt = &prev->threads[t];
        if (pt->exited || thread_by_index(cur, pt->index))
            continue;
        for (uint64_t u = 0; u < nu; u++)
            take_off(&dc[u], &cc[u], pt->counts[u]);
        for (uint64_t g = 0; g < nr; g++) {
            take_off(&dr[g].entries, &cr[g].entries, pt->rstats[g].entries);
            take_off(&dr[g].ticks, &cr[g].ticks, pt->rstats[g].ticks);
        }
    }
}

int ml_live_diff(const struct ml_profile *prev, struct ml_profile *cur, struct ml_profile **out)
{
    struct ml_profile *d;

    *out = NULL;
    d = prof_new(cur->strtab_len, cur->nregions, cur->nregset_words, cur->nunits, cur->nthreads);
    if (!d)
        return -ENOMEM;
    prof_fill_tables(d, cur->strtab, cur->regions, cur->regsets, cur->units);
    d->hdr = cur->hdr;
    d->hdr.wall_ns = cur->hdr.wall_ns -
                     (prev->hdr.wall_ns < cur->hdr.wall_ns ? prev->hdr.wall_ns : cur->hdr.wall_ns);
    for (uint64_t t = 0; t < cur->nthreads; t++) {
        /* cur is ours to repair: its arrays live in its own data block. */
        uint64_t *cc = (uint64_t *)cur->threads[t].counts, *dc = (uint64_t *)d->threads[t].counts;
        struct ml_prof_rstat *cr = (struct ml_prof_rstat *)cur->threads[t].rstats;
        struct ml_prof_rstat *dr = (struct ml_prof_rstat *)d->threads[t].rstats;
        const struct ml_profile_thread *pt = thread_by_index(prev, cur->threads[t].index);
        /* Modules and regions are only ever appended: the first ones keep their numbers. */
        uint64_t nu = pt ? (prev->nunits < cur->nunits ? prev->nunits : cur->nunits) : 0;
        uint64_t nr = pt ? (prev->nregions < cur->nregions ? prev->nregions : cur->nregions) : 0;

        d->threads[t].tid = cur->threads[t].tid;
        d->threads[t].index = cur->threads[t].index;
        d->threads[t].exited = cur->threads[t].exited;
        for (uint64_t u = 0; u < cur->nunits; u++)
            dc[u] = u < nu ? grow_diff(&cc[u], pt->counts[u]) : cc[u];
        for (uint64_t g = 0; g < cur->nregions; g++) {
            if (g < nr) {
                dr[g].entries = grow_diff(&cr[g].entries, pt->rstats[g].entries);
                dr[g].ticks = grow_diff(&cr[g].ticks, pt->rstats[g].ticks);
            } else {
                dr[g] = cr[g];
            }
        }
    }
    unfold(prev, cur, d);
    *out = d;
    return 0;
}
