/* Runtime profile writer: one .mlp per process, written atomically, signal-safe (no malloc, no
 * stdio). */
#include "runtime/rt.h"
#include "runtime/clock.h"
#include "runtime/pmu.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#ifndef ML_VERSION
#define ML_VERSION "0.1.0"
#endif

static unsigned char wbuf[1 << 16];
static char host[256];

static size_t slen(const char *s)
{
    return s ? strlen(s) + 1 : 1;
}

/* Appends s (NUL-terminated) to the string table, or "" for NULL. */
static void put_str(struct ml_pw *w, const char *s)
{
    if (s)
        ml_pw_bytes(w, s, strlen(s) + 1);
    else
        ml_pw_bytes(w, "", 1);
}

static const char *const meta_keys[] = {"program", "cmdline", "hostname", "memlens"};
#define NMETA 4

static const char *meta_value(int i)
{
    const char *v[NMETA] = {ml_rt_id.exe, ml_rt_id.cmdline, host, ML_VERSION};
    return v[i];
}

/*
 * A module unloaded while memory ran out kept its counts but lost its facts
 * (detach_facts in region.c): its units, calls and region sets read as empty.
 */
static const struct ml_rt_unit hollow_unit = {.kind = ML_UNIT_BLOCK};
static const struct ml_rt_call hollow_call;

static const struct ml_rt_unit *unit_of(const struct ml_rt_module *m, uint32_t i)
{
    return m->units ? &m->units[i] : &hollow_unit;
}

static const struct ml_rt_call *call_of(const struct ml_rt_module *m, uint32_t i)
{
    return m->calls ? &m->calls[i] : &hollow_call;
}

/*
 * Dynamic attribution: after the modules' own units, the profile lists, for
 * each (module, set) pair some thread counted code under (ml_rt.pairs, as of
 * the start of the write: npairs), a copy of the module's DYN units whose
 * region set is that global set; their counts come from the threads' blocks.
 */
static uint32_t npairs;

static int is_dyn(const struct ml_rt_module *m, uint32_t i)
{
    return (unit_of(m, i)->flags & ML_RT_UNIT_DYN) != 0;
}

static uint32_t dyn_units(const struct ml_rt_module *m)
{
    uint32_t n = 0;

    for (uint32_t i = 0; m && i < m->nunits; i++)
        n += is_dyn(m, i);
    return n;
}

/* Units of the profile: the modules' own, then the copies per pair. */
static uint64_t total_units(void)
{
    uint64_t n = ml_rt.nunits;

    for (uint32_t p = 0; p < npairs; p++)
        n += dyn_units(ml_rt_module_at(ml_rt.pairs[p].mod));
    return n;
}

/* Id of the first copy of pair p's units. */
static uint32_t pair_first_unit(uint32_t p)
{
    uint32_t n = ml_rt.nunits;

    for (uint32_t q = 0; q < p; q++)
        n += dyn_units(ml_rt_module_at(ml_rt.pairs[q].mod));
    return n;
}

/* Rank of unit u among m's DYN units. */
static uint32_t dyn_rank(const struct ml_rt_module *m, uint32_t u)
{
    uint32_t r = 0;

    for (uint32_t i = 0; i < u; i++)
        r += is_dyn(m, i);
    return r;
}

/*
 * The string table is laid out in a fixed order (meta, regions, modules,
 * units, calls) so that each section can recompute its strings' offsets by
 * walking the same lists instead of keeping a table in memory.
 */
struct str_bases {
    uint32_t meta, regions, modules, units, calls, uinfo, end;
};

static void str_layout(struct str_bases *b)
{
    struct ml_rt_module *m;
    uint32_t off = 1; /* offset 0 is "" */

    b->meta = off;
    for (int i = 0; i < NMETA; i++)
        off += slen(meta_keys[i]) + slen(meta_value(i));
    b->regions = off;
    for (uint32_t i = 0; i < ml_rt.nregions; i++)
        off += slen(ml_rt.region_names[i]);
    b->modules = off;
    for (m = ml_rt.mods; m; m = m->next)
        off += slen(m->name);
    b->units = off;
    for (m = ml_rt.mods; m; m = m->next)
        for (uint32_t i = 0; i < m->nunits; i++)
            off += slen(unit_of(m, i)->func) + slen(unit_of(m, i)->file);
    b->calls = off;
    for (m = ml_rt.mods; m; m = m->next)
        for (uint32_t i = 0; i < m->ncalls; i++)
            off += slen(call_of(m, i)->callee);
    b->uinfo = off;
    for (m = ml_rt.mods; m; m = m->next)
        for (uint32_t i = 0; m->uinfo && i < m->nuinfo; i++)
            off += slen(m->uinfo[i].name);
    b->end = off;
}

static void write_strtab(struct ml_pw *w, const struct str_bases *b)
{
    struct ml_rt_module *m;

    ml_pw_section(w, ML_SEC_STRTAB, b->end);
    ml_pw_bytes(w, "", 1);
    for (int i = 0; i < NMETA; i++) {
        put_str(w, meta_keys[i]);
        put_str(w, meta_value(i));
    }
    for (uint32_t i = 0; i < ml_rt.nregions; i++)
        put_str(w, ml_rt.region_names[i]);
    for (m = ml_rt.mods; m; m = m->next)
        put_str(w, m->name);
    for (m = ml_rt.mods; m; m = m->next)
        for (uint32_t i = 0; i < m->nunits; i++) {
            put_str(w, unit_of(m, i)->func);
            put_str(w, unit_of(m, i)->file);
        }
    for (m = ml_rt.mods; m; m = m->next)
        for (uint32_t i = 0; i < m->ncalls; i++)
            put_str(w, call_of(m, i)->callee);
    for (m = ml_rt.mods; m; m = m->next)
        for (uint32_t i = 0; m->uinfo && i < m->nuinfo; i++)
            put_str(w, m->uinfo[i].name);
}

/* Unit infos of kind ML_UI_INLINED and _HOST go to the INLINED section, not UNITINFO. */
static int is_inl(uint32_t kind)
{
    return kind == ML_UI_INLINED || kind == ML_UI_INLINED_HOST;
}

/* Is m->uinfo[i] an inlined share followed by its host (the instrumenter's pairs)? */
static int inl_pair(const struct ml_rt_module *m, uint32_t i)
{
    return m->uinfo[i].kind == ML_UI_INLINED && i + 1 < m->nuinfo &&
           m->uinfo[i + 1].kind == ML_UI_INLINED_HOST && m->uinfo[i].unit < m->nunits &&
           m->uinfo[i + 1].unit < m->nunits;
}

/*
 * Units whose count is not executions (UNITINFO), or with inl the pairs of an
 * inlined share and its host (INLINED): the modules' own, then those among
 * each dynamic pair's copies (a share is DYN exactly when its host is).
 */
static void write_uinfo(struct ml_pw *w, const struct str_bases *b, int inl)
{
    struct ml_rt_module *m;
    uint64_t n = 0;
    uint32_t off, base = 0, mi;

    for (int pass = 0; pass < 2; pass++) {
        if (pass) {
            if (!n)
                return;
            if (inl)
                ml_pw_section(w, ML_SEC_INLINED, n * sizeof(struct ml_prof_inlined));
            else
                ml_pw_section(w, ML_SEC_UNITINFO, n * sizeof(struct ml_prof_unitinfo));
        }
        off = b->uinfo;
        base = 0;
        for (m = ml_rt.mods; m; m = m->next) {
            for (uint32_t i = 0; m->uinfo && i < m->nuinfo; i++) {
                off += slen(m->uinfo[i].name);
                if (inl ? !inl_pair(m, i) : is_inl(m->uinfo[i].kind))
                    continue;
                n += !pass;
                if (pass && inl) {
                    struct ml_prof_inlined r = {base + m->uinfo[i].unit,
                                                base + m->uinfo[i + 1].unit};
                    ml_pw_bytes(w, &r, sizeof(r));
                } else if (pass) {
                    struct ml_prof_unitinfo ui = {base + m->uinfo[i].unit, m->uinfo[i].kind,
                                                  off - slen(m->uinfo[i].name), 0};
                    ml_pw_bytes(w, &ui, sizeof(ui));
                }
            }
            base += m->nunits;
        }
        for (uint32_t p = 0; p < npairs; p++) {
            uint32_t first = pair_first_unit(p);
            off = b->uinfo;
            mi = 0;
            for (m = ml_rt.mods; m && mi < ml_rt.pairs[p].mod; m = m->next, mi++)
                for (uint32_t i = 0; m->uinfo && i < m->nuinfo; i++)
                    off += slen(m->uinfo[i].name);
            for (uint32_t i = 0; m && m->uinfo && i < m->nuinfo; i++) {
                uint32_t u = m->uinfo[i].unit;
                off += slen(m->uinfo[i].name);
                if (u >= m->nunits || !is_dyn(m, u) ||
                    (inl ? !inl_pair(m, i) || !is_dyn(m, m->uinfo[i + 1].unit)
                         : is_inl(m->uinfo[i].kind)))
                    continue;
                n += !pass;
                if (pass && inl) {
                    struct ml_prof_inlined r = {first + dyn_rank(m, u),
                                                first + dyn_rank(m, m->uinfo[i + 1].unit)};
                    ml_pw_bytes(w, &r, sizeof(r));
                } else if (pass) {
                    struct ml_prof_unitinfo ui = {first + dyn_rank(m, u), m->uinfo[i].kind,
                                                  off - slen(m->uinfo[i].name), 0};
                    ml_pw_bytes(w, &ui, sizeof(ui));
                }
            }
        }
    }
}

/* Region flags (RFLAGS): each region's ML_RFLAG_* from every module that has it. */
static void write_rflags(struct ml_pw *w)
{
    static uint32_t fl[ML_RT_MAX_REGIONS];

    memset(fl, 0, sizeof(fl));
    for (struct ml_rt_module *m = ml_rt.mods; m; m = m->next)
        for (uint32_t r = 0; m->rflags && m->region_ids && r < m->nregions; r++)
            if (m->region_ids[r] < ML_RT_MAX_REGIONS)
                fl[m->region_ids[r]] |= m->rflags[r];
    ml_pw_section(w, ML_SEC_RFLAGS, ml_rt.nregions * 4ull);
    ml_pw_bytes(w, fl, ml_rt.nregions * 4ull);
}

/* The clock sampling's figures of thread t (TIMED): timed executions and their raw ticks. */
static void write_timed(struct ml_pw *w, const struct ml_thread_rec *t)
{
    struct ml_prof_timed h = {.index = t->index, .nregions = ml_rt.nregions};
    static const uint64_t zero;

    ml_pw_section(w, ML_SEC_TIMED, sizeof(h) + 16ull * ml_rt.nregions);
    ml_pw_bytes(w, &h, sizeof(h));
    for (int k = 0; k < 2; k++)
        for (uint32_t g = 0; g < ml_rt.nregions; g++)
            ml_pw_bytes(w, t->rs ? (k ? &t->rs[g].ticks : &t->rs[g].timed) : &zero, 8);
}

/* Offset of the first unit string of module mi (units' func and file, in module order). */
static uint32_t unit_strings_of(const struct str_bases *b, uint32_t mi)
{
    uint32_t off = b->units, i = 0;

    for (struct ml_rt_module *m = ml_rt.mods; m && i < mi; m = m->next, i++)
        for (uint32_t u = 0; u < m->nunits; u++)
            off += slen(unit_of(m, u)->func) + slen(unit_of(m, u)->file);
    return off;
}

/* The copies of each pair's units, after the modules' own (word_base: module set words). */
static void write_dyn_units(struct ml_pw *w, const struct str_bases *b, uint32_t word_base)
{
    for (uint32_t p = 0; p < npairs; p++) {
        const struct ml_dynpair *pr = &ml_rt.pairs[p];
        const struct ml_rt_module *m = ml_rt_module_at(pr->mod);
        uint32_t off = unit_strings_of(b, pr->mod);

        for (uint32_t i = 0; m && i < m->nunits; i++) {
            const struct ml_rt_unit *u = unit_of(m, i);
            if (is_dyn(m, i)) {
                struct ml_prof_unit pu = {.kind = u->kind,
                                          .module = pr->mod,
                                          .func = off,
                                          .file = off + (uint32_t)slen(u->func),
                                          .line = u->line,
                                          .regset = word_base + ml_rt.set_off[pr->set - 1]};
                memcpy(pu.facts, u->facts, sizeof(pu.facts));
                ml_pw_bytes(w, &pu, sizeof(pu));
            }
            off += slen(u->func) + slen(u->file);
        }
    }
}

static uint32_t dyn_calls(void)
{
    uint32_t n = 0;

    for (uint32_t p = 0; p < npairs; p++) {
        const struct ml_rt_module *m = ml_rt_module_at(ml_rt.pairs[p].mod);
        for (uint32_t i = 0; m && i < m->ncalls; i++)
            n += call_of(m, i)->unit < m->nunits && is_dyn(m, call_of(m, i)->unit);
    }
    return n;
}

/* Calls from the copies' units: the same callees, counted under each pair's set. */
static void write_dyn_calls(struct ml_pw *w, const struct str_bases *b)
{
    for (uint32_t p = 0; p < npairs; p++) {
        const struct ml_rt_module *m = ml_rt_module_at(ml_rt.pairs[p].mod), *k;
        uint32_t off = b->calls, first = pair_first_unit(p);

        for (k = ml_rt.mods; k && k != m; k = k->next)
            for (uint32_t i = 0; i < k->ncalls; i++)
                off += slen(call_of(k, i)->callee);
        for (uint32_t i = 0; m && i < m->ncalls; i++) {
            const struct ml_rt_call *c = call_of(m, i);
            if (c->unit < m->nunits && is_dyn(m, c->unit)) {
                struct ml_prof_call pc = {
                    .unit = first + dyn_rank(m, c->unit), .callee = off, .per_exec = c->per_exec};
                ml_pw_bytes(w, &pc, sizeof(pc));
            }
            off += slen(c->callee);
        }
    }
}

static void write_tables(struct ml_pw *w, const struct str_bases *b)
{
    struct ml_rt_module *m;
    uint32_t off, unit_base, word_base, mi;

    ml_pw_section(w, ML_SEC_META, NMETA * 8);
    off = b->meta;
    for (int i = 0; i < NMETA; i++) {
        uint32_t kv[2] = {off, off + (uint32_t)slen(meta_keys[i])};
        ml_pw_bytes(w, kv, sizeof(kv));
        off += slen(meta_keys[i]) + slen(meta_value(i));
    }

    ml_pw_section(w, ML_SEC_REGIONS, ml_rt.nregions * 4ull);
    off = b->regions;
    for (uint32_t i = 0; i < ml_rt.nregions; i++) {
        ml_pw_bytes(w, &off, 4);
        off += slen(ml_rt.region_names[i]);
    }

    /* Module-local region ids become process-wide ids; set lengths are unchanged. The global
       sets of dynamic attribution follow. */
    ml_pw_section(w, ML_SEC_REGSETS, (ml_rt.nregset_words + (uint64_t)ml_rt.nset_words) * 4ull);
    for (m = ml_rt.mods; m; m = m->next) {
        for (uint32_t i = 0; i < m->nregset_words;) {
            uint32_t n = m->regsets ? m->regsets[i] : 0;
            ml_pw_bytes(w, &n, 4);
            for (uint32_t k = 1; k <= n && i + k < m->nregset_words; k++) {
                uint32_t g = m->region_ids[m->regsets[i + k]];
                ml_pw_bytes(w, &g, 4);
            }
            i += n + 1;
        }
    }
    ml_pw_bytes(w, ml_rt.set_words, ml_rt.nset_words * 4ull);

    ml_pw_section(w, ML_SEC_MODULES, ml_rt.nmods * (uint64_t)sizeof(struct ml_prof_module));
    off = b->modules;
    unit_base = 0;
    for (m = ml_rt.mods; m; m = m->next) {
        struct ml_prof_module pm = {.name = off, .first_unit = unit_base, .nunits = m->nunits};
        ml_pw_bytes(w, &pm, sizeof(pm));
        off += slen(m->name);
        unit_base += m->nunits;
    }

    ml_pw_section(w, ML_SEC_UNITS, total_units() * (uint64_t)sizeof(struct ml_prof_unit));
    off = b->units;
    word_base = 0;
    mi = 0;
    for (m = ml_rt.mods; m; m = m->next, mi++) {
        for (uint32_t i = 0; i < m->nunits; i++) {
            const struct ml_rt_unit *u = unit_of(m, i);
            struct ml_prof_unit pu = {.kind = u->kind,
                                      .module = mi,
                                      .func = off,
                                      .file = off + (uint32_t)slen(u->func),
                                      .line = u->line,
                                      .regset = word_base + u->regset};
            memcpy(pu.facts, u->facts, sizeof(pu.facts));
            ml_pw_bytes(w, &pu, sizeof(pu));
            off += slen(u->func) + slen(u->file);
        }
        word_base += m->nregset_words;
    }
    write_dyn_units(w, b, word_base);

    ml_pw_section(w, ML_SEC_CALLS,
                  (ml_rt.ncalls + dyn_calls()) * (uint64_t)sizeof(struct ml_prof_call));
    off = b->calls;
    unit_base = 0;
    for (m = ml_rt.mods; m; m = m->next) {
        for (uint32_t i = 0; i < m->ncalls; i++) {
            const struct ml_rt_call *c = call_of(m, i);
            struct ml_prof_call pc = {
                .unit = unit_base + c->unit, .callee = off, .per_exec = c->per_exec};
            ml_pw_bytes(w, &pc, sizeof(pc));
            off += slen(c->callee);
        }
        unit_base += m->nunits;
    }
    write_dyn_calls(w, b);
}

/* Function entry units, so that the report can count calls (section 13, ascending ids). */
static void write_entries(struct ml_pw *w)
{
    struct ml_rt_module *m;
    uint32_t base = 0;
    uint64_t n = 0;

    for (m = ml_rt.mods; m; m = m->next)
        for (uint32_t i = 0; i < m->nunits; i++)
            n += (unit_of(m, i)->flags & ML_RT_UNIT_ENTRY) != 0;
    for (uint32_t p = 0; p < npairs; p++) {
        m = ml_rt_module_at(ml_rt.pairs[p].mod);
        for (uint32_t i = 0; m && i < m->nunits; i++)
            n += is_dyn(m, i) && (unit_of(m, i)->flags & ML_RT_UNIT_ENTRY);
    }
    if (!n)
        return;
    ml_pw_section(w, ML_SEC_ENTRIES, n * 4);
    for (m = ml_rt.mods; m; m = m->next) {
        for (uint32_t i = 0; i < m->nunits; i++) {
            uint32_t id = base + i;
            if (unit_of(m, i)->flags & ML_RT_UNIT_ENTRY)
                ml_pw_bytes(w, &id, 4);
        }
        base += m->nunits;
    }
    for (uint32_t p = 0; p < npairs; p++) {
        m = ml_rt_module_at(ml_rt.pairs[p].mod);
        for (uint32_t i = 0; m && i < m->nunits; i++) {
            if (!is_dyn(m, i))
                continue;
            if (unit_of(m, i)->flags & ML_RT_UNIT_ENTRY)
                ml_pw_bytes(w, &base, 4);
            base++;
        }
    }
}

/* A live thread's counters are read in place: aligned 64-bit loads, at worst one increment stale.
 */
static void write_thread(struct ml_pw *w, struct ml_thread_rec *t, uint64_t now)
{
    struct ml_prof_thread pt = {
        .tid = t->tid, .index = t->index, .nunits = total_units(), .nregions = ml_rt.nregions};
    struct ml_rt_module *m;
    uint32_t off = 0, mi = 0;
    static const uint64_t zero[64];
    static uint64_t pending[ML_RT_MAX_REGIONS]; /* no malloc here: the writer runs in signals */

    ml_pw_section(w, ML_SEC_THREAD,
                  sizeof(pt) + pt.nunits * 8ull +
                      ml_rt.nregions * (uint64_t)sizeof(struct ml_prof_rstat));
    ml_pw_bytes(w, &pt, sizeof(pt));
    for (m = ml_rt.mods; m; m = m->next, mi++) {
        const uint64_t *src = NULL;
        if (t->done && t->snap && off + m->nunits <= t->snap_units)
            src = t->snap + off;
        else if (!t->done && mi < t->nmods)
            src = t->tls[mi];
        if (src) {
            ml_pw_bytes(w, src, m->nunits * 8ull);
        } else {
            for (uint32_t left = m->nunits; left;) {
                uint32_t k = left < 64 ? left : 64;
                ml_pw_bytes(w, zero, k * 8ull);
                left -= k;
            }
        }
        off += m->nunits;
    }
    for (uint32_t p = 0; p < npairs; p++) {
        const uint64_t *c = ml_rt_dyn_counts(t, p);
        m = ml_rt_module_at(ml_rt.pairs[p].mod);
        for (uint32_t i = 0; m && i < m->nunits; i++)
            if (is_dyn(m, i))
                ml_pw_bytes(w, c ? &c[i] : zero, 8);
    }
    ml_rt_fast_pending(t, pending);
    for (uint32_t g = 0; g < ml_rt.nregions; g++) {
        struct ml_prof_rstat rs;
        ml_rt_region_stat(t, g, pending, now, &rs);
        ml_pw_bytes(w, &rs, sizeof(rs));
    }
}

/* Exact mode: bytes by address class per unit, for threads that made any access. */
static void write_exact(struct ml_pw *w, struct ml_thread_rec *t)
{
    struct ml_prof_thread pt = {.tid = t->tid, .index = t->index, .nunits = total_units()};
    static const uint64_t zero[ML_NCLASS];

    if (!t->exact)
        return;
    ml_pw_section(w, ML_SEC_EXACT, sizeof(pt) + pt.nunits * 8ull * ML_NCLASS);
    ml_pw_bytes(w, &pt, sizeof(pt));
    for (struct ml_rt_module *m = ml_rt.mods; m; m = m->next) {
        const uint64_t *src = m->index < t->exact_cap ? t->exact[m->index] : NULL;
        if (src)
            ml_pw_bytes(w, src, m->nunits * 8ull * ML_NCLASS);
        else
            for (uint32_t i = 0; i < m->nunits; i++)
                ml_pw_bytes(w, zero, sizeof(zero));
    }
    for (uint64_t u = ml_rt.nunits; u < pt.nunits; u++) /* copies: no exact mode there */
        ml_pw_bytes(w, zero, sizeof(zero));
}

/* Hardware counter sums per thread and region (MEMLENS_EVENTS); threads without counters write 0.
 */
static void write_events(struct ml_pw *w)
{
    struct ml_prof_events e = {.nevents = ml_pmu_nevents(), .nregions = ml_rt.nregions};
    static const uint64_t zero[ML_MAX_EVENTS];
    struct ml_thread_rec *t;

    if (!e.nevents)
        return;
    for (t = ml_rt.threads; t; t = t->next)
        e.nthreads++;
    ml_pw_section(w, ML_SEC_EVENTS,
                  sizeof(e) + e.nevents * (uint64_t)ML_EVENT_NAME +
                      e.nthreads *
                          (sizeof(struct ml_prof_evthread) + e.nregions * e.nevents * 8ull));
    ml_pw_bytes(w, &e, sizeof(e));
    for (uint32_t i = 0; i < e.nevents; i++) {
        char name[ML_EVENT_NAME] = {0};
        strncpy(name, ml_pmu_name(i), sizeof(name) - 1);
        ml_pw_bytes(w, name, sizeof(name));
    }
    for (t = ml_rt.threads; t; t = t->next) {
        struct ml_prof_evthread et = {.index = t->index, .tid = t->tid};
        const uint64_t *sums = ml_pmu_sums(t);
        ml_pw_bytes(w, &et, sizeof(et));
        for (uint32_t g = 0; g < e.nregions; g++)
            ml_pw_bytes(w, sums ? sums + (uint64_t)g * ML_MAX_EVENTS : zero, e.nevents * 8ull);
    }
}

/* Ticks per second over the whole run; a short run is stretched to 2 ms for a usable ratio. */
static uint64_t clock_hz(uint64_t *now_ticks, uint64_t *now_mono)
{
    uint64_t t, ns;

    if (ML_RT_CLOCK == ML_CLOCK_MONOTONIC) {
        *now_ticks = *now_mono = ml_rt_mono_ns();
        return 1000000000ull;
    }
    do {
        t = ml_rt_ticks();
        ns = ml_rt_mono_ns();
    } while (ns - ml_rt.mono0 < 2000000);
    *now_ticks = t;
    *now_mono = ns;
#if defined(__aarch64__)
    {
        uint64_t f;
        __asm__ volatile("mrs %0, cntfrq_el0" : "=r"(f));
        if (f)
            return f;
    }
#endif
    return (uint64_t)((double)(t - ml_rt.tick0) * 1e9 / (double)(ns - ml_rt.mono0));
}

void ml_rt_write_profile(int from_signal)
{
    char name[256] = "", tmp[256] = "";
    struct ml_prof_header h;
    struct str_bases b;
    struct ml_thread_rec *t;
    struct ml_pw w;
    struct utsname un;
    uint64_t now, mono;
    int dirfd, fd, locked, rc;

    if (__atomic_exchange_n(&ml_rt.written, 1, __ATOMIC_SEQ_CST) || !ml_rt.nmods)
        return;
    /* A signal may arrive while the lock is held: then read without it rather than hang. */
    locked = from_signal ? pthread_mutex_trylock(&ml_rt.lock) == 0
                         : pthread_mutex_lock(&ml_rt.lock) == 0;

    host[0] = 0;
    if (uname(&un) == 0) {
        strncpy(host, un.nodename, sizeof(host) - 1);
        host[sizeof(host) - 1] = 0;
    }
    dirfd = ml_rt_out_dir("profile");
    if (dirfd < 0)
        goto out;
    fd = ml_rt_out_create(dirfd, ".mlp", name, tmp, sizeof(name));
    if (fd < 0) {
        ml_rt_say_file("profile", tmp[0] ? tmp : name, fd);
        goto out;
    }
    memset(&h, 0, sizeof(h));
    memcpy(h.magic, ML_PROF_MAGIC, 8);
    h.version = ML_PROF_VERSION;
    h.header_size = sizeof(h);
    h.tsc_hz = clock_hz(&now, &mono);
    h.start_ns = ml_rt.real0;
    h.wall_ns = mono - ml_rt.mono0;
    h.pid = (uint32_t)getpid();
    h.ppid = (uint32_t)getppid();
    h.clock = ML_RT_CLOCK;
    h.flags = (from_signal ? ML_PROF_F_SIGNAL : 0) | (ml_rt_id.has_rank ? ML_PROF_F_RANK : 0);
    h.sample = ml_rt.sample ? ml_rt.sample : 1;
    h.token = ml_rt_id.token;
    h.rank = ml_rt_id.rank;
    h.nranks = ml_rt_id.nranks;

    ml_pw_init(&w, fd, wbuf, sizeof(wbuf));
    ml_pw_bytes(&w, &h, sizeof(h));
    npairs = __atomic_load_n(&ml_rt.npairs, __ATOMIC_ACQUIRE);
    str_layout(&b);
    write_strtab(&w, &b);
    write_tables(&w, &b);
    write_entries(&w);
    write_uinfo(&w, &b, 0);
    write_uinfo(&w, &b, 1);
    write_rflags(&w);
    /* Before the threads: threads still running then keep counting, so the final snapshot
       never exceeds the THREAD records. */
    ml_rt_timeline_write(&w, locked, now);
    if (ml_rt.acc) {
        struct ml_prof_exited ex = {.index = ml_rt.acc->index, .nthreads = ml_rt.nfolded};
        ml_pw_section(&w, ML_SEC_EXITED, sizeof(ex));
        ml_pw_bytes(&w, &ex, sizeof(ex));
    }
    for (t = ml_rt.threads; t; t = t->next) {
        write_thread(&w, t, now);
        write_timed(&w, t);
        write_exact(&w, t);
    }
    write_events(&w);
    ml_pw_section(&w, ML_SEC_CALIB, sizeof(ml_rt.calib));
    ml_pw_bytes(&w, &ml_rt.calib, sizeof(ml_rt.calib));
    ml_pw_section(&w, ML_SEC_END, 0);
    rc = ml_pw_finish(&w);
    if (close(fd) && !rc)
        rc = -errno;
    if (rc) {
        ml_rt_say_file("profile", tmp, rc);
        unlinkat(dirfd, tmp, 0);
        goto out;
    }
    rc = ml_rt_out_commit(dirfd, ".mlp", tmp, name, sizeof(name));
    if (rc) {
        ml_rt_say_file("profile", name, rc);
        unlinkat(dirfd, tmp, 0);
    }
out:
    if (locked)
        pthread_mutex_unlock(&ml_rt.lock);
}
