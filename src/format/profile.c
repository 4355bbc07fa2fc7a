/* Region profile format: buffered writer for the runtime and validating reader for tools. */
#include "format/profile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The runtime may call the writer from a signal handler: only write(2) here. */
static void pw_flush(struct ml_pw *w)
{
    size_t off = 0;

    while (off < w->len && !w->err) {
        ssize_t n = write(w->fd, w->buf + off, w->len - off);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            w->err = -errno;
        } else {
            off += (size_t)n;
        }
    }
    w->len = 0;
}

void ml_pw_init(struct ml_pw *w, int fd, void *buf, size_t cap)
{
    w->fd = fd;
    w->err = 0;
    w->buf = buf;
    w->cap = cap;
    w->len = 0;
}

void ml_pw_bytes(struct ml_pw *w, const void *p, size_t n)
{
    const unsigned char *s = p;

    while (n && !w->err) {
        size_t room = w->cap - w->len;
        size_t k = n < room ? n : room;
        memcpy(w->buf + w->len, s, k);
        w->len += k;
        s += k;
        n -= k;
        if (w->len == w->cap)
            pw_flush(w);
    }
}

void ml_pw_section(struct ml_pw *w, uint32_t type, uint64_t length)
{
    struct ml_prof_section s = {.type = type, .reserved = 0, .length = length};
    ml_pw_bytes(w, &s, sizeof(s));
}

int ml_pw_finish(struct ml_pw *w)
{
    pw_flush(w);
    return w->err;
}

size_t ml_tl_halve(void *buf, size_t len, uint64_t *nsnaps)
{
    unsigned char *b = buf;
    size_t rd = 0, wr = 0;
    uint64_t n = *nsnaps, kept = 0;

    for (uint64_t i = 0; i < n && rd < len; i++) {
        struct ml_prof_tl_snap s;
        size_t sz;

        memcpy(&s, b + rd, sizeof(s));
        sz = sizeof(s) + s.npoints * sizeof(struct ml_prof_tl_point);
        if (i % 2 == 0 || i == n - 1) {
            memmove(b + wr, b + rd, sz);
            wr += sz;
            kept++;
        }
        rd += sz;
    }
    *nsnaps = kept;
    return wr;
}

/* ---- reader ---- */

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (errlen) {
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}

static const char *sec_name(uint32_t type)
{
    static const char *const names[] = {"end",      "strtab", "meta",   "regions", "regsets",
                                        "units",    "calls",  "thread", "modules", "exact",
                                        "timeline", "events", "calib",  "entries", "exited",
                                        "unitinfo", "timed",  "rflags", "inlined"};
    return type < sizeof(names) / sizeof(names[0]) ? names[type] : "unknown";
}

static int str_ok(const struct ml_profile *p, uint32_t off)
{
    return off < p->strtab_len;
}

static int regset_ok(const struct ml_profile *p, uint32_t off)
{
    uint64_t n;

    if (off >= p->nregset_words)
        return 0;
    n = p->regsets[off];
    if (n > p->nregset_words - off - 1)
        return 0;
    for (uint64_t i = 0; i < n; i++)
        if (p->regsets[off + 1 + i] >= p->nregions)
            return 0;
    return 1;
}

/* Checks cross-references once every section is known. */
/* Entry units exist, are block units (a count of bytes is no count of calls) and ascend. */
static int check_entries(const struct ml_profile *p, char *err, size_t errlen)
{
    for (uint64_t i = 0; i < p->nentries; i++) {
        uint32_t u = p->entries[i];
        if (u >= p->nunits || p->units[u].kind != ML_UNIT_BLOCK)
            return fail(err, errlen, "entry %llu names unit %u, which is not a block unit",
                        (unsigned long long)i, u);
        if (i && u <= p->entries[i - 1])
            return fail(err, errlen, "entry %llu (unit %u) is not above the previous one",
                        (unsigned long long)i, u);
    }
    return 0;
}

static int check_refs(struct ml_profile *p, char *err, size_t errlen)
{
    for (uint64_t i = 0; i < p->nmeta * 2; i++)
        if (!str_ok(p, p->meta[i]))
            return fail(err, errlen, "meta entry %llu names string %u outside the string table",
                        (unsigned long long)i / 2, p->meta[i]);
    for (uint64_t i = 0; i < p->nregions; i++)
        if (!str_ok(p, p->regions[i]))
            return fail(err, errlen, "region %llu names string %u outside the string table",
                        (unsigned long long)i, p->regions[i]);
    for (uint64_t i = 0; i < p->nmodules; i++) {
        const struct ml_prof_module *m = &p->modules[i];
        if (!str_ok(p, m->name) || m->first_unit > p->nunits ||
            m->nunits > p->nunits - m->first_unit)
            return fail(err, errlen, "module %llu has a bad name or unit range",
                        (unsigned long long)i);
    }
    for (uint64_t i = 0; i < p->nunits; i++) {
        const struct ml_prof_unit *u = &p->units[i];
        if (u->kind != ML_UNIT_BLOCK && u->kind != ML_UNIT_BYTES)
            return fail(err, errlen, "unit %llu has unknown kind %u", (unsigned long long)i,
                        u->kind);
        if (!str_ok(p, u->func) || !str_ok(p, u->file))
            return fail(err, errlen, "unit %llu names a string outside the string table",
                        (unsigned long long)i);
        if (u->module >= p->nmodules && p->nmodules)
            return fail(err, errlen, "unit %llu names module %u of %llu", (unsigned long long)i,
                        u->module, (unsigned long long)p->nmodules);
        if (!regset_ok(p, u->regset))
            return fail(err, errlen, "unit %llu has a bad region set at word %u",
                        (unsigned long long)i, u->regset);
    }
    for (uint64_t i = 0; i < p->ncalls; i++)
        if (p->calls[i].unit >= p->nunits || !str_ok(p, p->calls[i].callee))
            return fail(err, errlen, "call record %llu names a bad unit or string",
                        (unsigned long long)i);
    for (uint64_t i = 0; i < p->nuinfo; i++)
        if (p->uinfo[i].unit >= p->nunits || !str_ok(p, p->uinfo[i].name) ||
            p->units[p->uinfo[i].unit].kind != ML_UNIT_BYTES)
            return fail(err, errlen, "unit info %llu names a bad unit or string",
                        (unsigned long long)i);
    for (uint64_t i = 0; i < p->ninl; i++)
        if (p->inl[i].unit >= p->nunits || p->inl[i].host >= p->nunits ||
            p->units[p->inl[i].unit].kind != ML_UNIT_BYTES)
            return fail(err, errlen, "inlined record %llu names a bad unit", (unsigned long long)i);
    for (uint64_t i = 0; p->timeline && i < p->timeline->nsnaps; i++) {
        const struct ml_profile_snap *sn = &p->snaps[i];
        for (uint64_t k = 0; k < sn->npoints; k++) {
            const struct ml_prof_tl_point *pt = &sn->points[k];
            if (pt->region >= p->nregions || ml_profile_thread_pos(p, pt->thread) < 0)
                return fail(err, errlen,
                            "timeline snapshot %llu point %llu names thread %u and region %u, "
                            "which do not exist",
                            (unsigned long long)i, (unsigned long long)k, pt->thread, pt->region);
        }
    }
    return check_entries(p, err, errlen);
}

/*
 * Sizes the snapshots of a TIMELINE section (cross-references are checked
 * once every section is known): the lengths must add up exactly, ticks must
 * not decrease and points must be sorted by (thread, region) within a snapshot.
 */
static int add_timeline(struct ml_profile *p, const unsigned char *q, uint64_t len, uint64_t off,
                        char *err, size_t errlen)
{
    const struct ml_prof_timeline *tl = (const struct ml_prof_timeline *)q;
    uint64_t pos = sizeof(*tl), prev_tick = 0;

    if (len < sizeof(*tl))
        return fail(err, errlen, "timeline at offset %llu is too short", (unsigned long long)off);
    if (tl->nsnaps > (len - sizeof(*tl)) / sizeof(struct ml_prof_tl_snap))
        return fail(err, errlen, "timeline at offset %llu claims %llu snapshots in %llu bytes",
                    (unsigned long long)off, (unsigned long long)tl->nsnaps,
                    (unsigned long long)len);
    p->snaps = calloc(tl->nsnaps + 1, sizeof(*p->snaps));
    if (!p->snaps) {
        if (errlen)
            snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    for (uint64_t i = 0; i < tl->nsnaps; i++) {
        const struct ml_prof_tl_snap *sn;
        const struct ml_prof_tl_point *pts;

        if (len - pos < sizeof(*sn))
            return fail(err, errlen, "timeline at offset %llu: snapshot %llu is cut short",
                        (unsigned long long)off, (unsigned long long)i);
        sn = (const struct ml_prof_tl_snap *)(q + pos);
        pos += sizeof(*sn);
        if (sn->npoints > (len - pos) / sizeof(*pts))
            return fail(err, errlen,
                        "timeline at offset %llu: snapshot %llu claims %llu points, "
                        "only %llu bytes remain",
                        (unsigned long long)off, (unsigned long long)i,
                        (unsigned long long)sn->npoints, (unsigned long long)(len - pos));
        if (sn->tick < prev_tick)
            return fail(err, errlen, "timeline at offset %llu: snapshot %llu goes back in time",
                        (unsigned long long)off, (unsigned long long)i);
        pts = (const struct ml_prof_tl_point *)(q + pos);
        for (uint64_t k = 1; k < sn->npoints; k++)
            if (pts[k].thread < pts[k - 1].thread ||
                (pts[k].thread == pts[k - 1].thread && pts[k].region <= pts[k - 1].region))
                return fail(err, errlen,
                            "timeline at offset %llu: snapshot %llu point %llu is out of order",
                            (unsigned long long)off, (unsigned long long)i, (unsigned long long)k);
        p->snaps[i].tick = prev_tick = sn->tick;
        p->snaps[i].npoints = sn->npoints;
        p->snaps[i].points = pts;
        pos += sn->npoints * sizeof(*pts);
    }
    if (pos != len)
        return fail(err, errlen, "timeline at offset %llu has %llu bytes after its last snapshot",
                    (unsigned long long)off, (unsigned long long)(len - pos));
    p->timeline = tl;
    return 0;
}

/* A TIMED block: after its THREAD record, one per thread, sized by REGIONS. */
static int add_timed(struct ml_profile *p, const unsigned char *q, uint64_t len, uint64_t off,
                     char *err, size_t errlen)
{
    const struct ml_prof_timed *h = (const struct ml_prof_timed *)q;
    int pos;

    if (len < sizeof(*h) || h->nregions != p->nregions || len != sizeof(*h) + 16ull * h->nregions)
        return fail(err, errlen, "timed section at offset %llu does not match %llu regions",
                    (unsigned long long)off, (unsigned long long)p->nregions);
    pos = ml_profile_thread_pos(p, h->index);
    if (pos < 0 || p->threads[pos].timed)
        return fail(err, errlen,
                    "timed section at offset %llu names thread %u, which has no "
                    "earlier record or has one already",
                    (unsigned long long)off, h->index);
    p->threads[pos].timed = (const uint64_t *)(q + sizeof(*h));
    p->threads[pos].timed_ticks = p->threads[pos].timed + h->nregions;
    return 0;
}

static int add_thread(struct ml_profile *p, const unsigned char *q, uint64_t len, uint64_t off,
                      char *err, size_t errlen)
{
    struct ml_prof_thread t;
    struct ml_profile_thread *nt;

    if (len < sizeof(t))
        return fail(err, errlen, "thread record at offset %llu is too short",
                    (unsigned long long)off);
    memcpy(&t, q, sizeof(t));
    if (t.nunits != p->nunits || t.nregions != p->nregions)
        return fail(err, errlen,
                    "thread record at offset %llu has %llu counters and %llu regions, "
                    "expected %llu and %llu",
                    (unsigned long long)off, (unsigned long long)t.nunits,
                    (unsigned long long)t.nregions, (unsigned long long)p->nunits,
                    (unsigned long long)p->nregions);
    if (len != sizeof(t) + t.nunits * 8 + t.nregions * sizeof(struct ml_prof_rstat))
        return fail(err, errlen, "thread record at offset %llu has length %llu, expected %llu",
                    (unsigned long long)off, (unsigned long long)len,
                    (unsigned long long)(sizeof(t) + t.nunits * 8 +
                                         t.nregions * sizeof(struct ml_prof_rstat)));
    for (uint64_t r = 0; r < t.nregions; r++) {
        struct ml_prof_rstat rs;
        memcpy(&rs, q + sizeof(t) + t.nunits * 8 + r * sizeof(rs), sizeof(rs));
        if (rs.measured > rs.entries)
            return fail(err, errlen,
                        "thread record at offset %llu: region %llu has %llu measured of %llu "
                        "executions",
                        (unsigned long long)off, (unsigned long long)r,
                        (unsigned long long)rs.measured, (unsigned long long)rs.entries);
    }
    nt = realloc(p->threads, (p->nthreads + 1) * sizeof(*nt));
    if (!nt) {
        if (errlen)
            snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    p->threads = nt;
    memset(&nt[p->nthreads], 0, sizeof(*nt));
    nt[p->nthreads].tid = t.tid;
    nt[p->nthreads].index = t.index;
    nt[p->nthreads].counts = (const uint64_t *)(q + sizeof(t));
    nt[p->nthreads].rstats = (const struct ml_prof_rstat *)(q + sizeof(t) + t.nunits * 8);
    p->nthreads++;
    return 0;
}

/*
 * EXACT (exact mode): a thread header, then nunits x ML_NCLASS byte counts. It
 * comes right after the THREAD record of its thread (the runtime writes them in
 * pairs), so it is matched in constant time; its nregions field is not used.
 */
static int add_exact(struct ml_profile *p, const unsigned char *q, uint64_t len, uint64_t off,
                     char *err, size_t errlen)
{
    struct ml_profile_thread *last = p->nthreads ? &p->threads[p->nthreads - 1] : NULL;
    struct ml_prof_thread t;

    if (len < sizeof(t))
        return fail(err, errlen, "exact record at offset %llu is too short",
                    (unsigned long long)off);
    memcpy(&t, q, sizeof(t));
    if (t.nunits != p->nunits || len != sizeof(t) + t.nunits * 8 * ML_NCLASS)
        return fail(err, errlen,
                    "exact record at offset %llu has %llu units in %llu bytes, expected %llu "
                    "units",
                    (unsigned long long)off, (unsigned long long)t.nunits, (unsigned long long)len,
                    (unsigned long long)p->nunits);
    if (!last || last->index != t.index || last->exact)
        return fail(err, errlen,
                    "exact record at offset %llu names thread index %u, not the thread record "
                    "just before it",
                    (unsigned long long)off, t.index);
    last->exact = (const uint64_t *)(q + sizeof(t));
    p->exact = 1;
    return 0;
}

/*
 * EVENTS: the header, nevents names, then per thread an ml_prof_evthread and
 * nregions * nevents sums. Threads are matched by index once every THREAD
 * record is known (the runtime writes EVENTS last, but nothing requires it).
 */
static int parse_events(struct ml_profile *p, const unsigned char *q, uint64_t len, uint64_t off,
                        char *err, size_t errlen)
{
    struct ml_prof_events e;
    uint64_t block, need;

    if (len < sizeof(e))
        return fail(err, errlen, "events section at offset %llu is too short",
                    (unsigned long long)off);
    memcpy(&e, q, sizeof(e));
    if (e.nevents == 0 || e.nevents > ML_MAX_EVENTS)
        return fail(err, errlen, "events section at offset %llu has %u events, expected 1 to %d",
                    (unsigned long long)off, e.nevents, ML_MAX_EVENTS);
    if (e.nregions != p->nregions)
        return fail(err, errlen, "events section at offset %llu has %llu regions, expected %llu",
                    (unsigned long long)off, (unsigned long long)e.nregions,
                    (unsigned long long)p->nregions);
    block = sizeof(struct ml_prof_evthread) + e.nregions * e.nevents * 8;
    need = sizeof(e) + (uint64_t)e.nevents * ML_EVENT_NAME;
    if (len < need || (len - need) / block < e.nthreads || len != need + e.nthreads * block)
        return fail(err, errlen, "events section at offset %llu has length %llu, expected %llu",
                    (unsigned long long)off, (unsigned long long)len,
                    (unsigned long long)(need + (uint64_t)e.nthreads * block));
    for (uint32_t i = 0; i < e.nevents; i++)
        if (!memchr(q + sizeof(e) + i * ML_EVENT_NAME, 0, ML_EVENT_NAME))
            return fail(err, errlen, "event name %u at offset %llu is not NUL-terminated", i,
                        (unsigned long long)off);
    p->nevents = e.nevents;
    p->event_names = (const char(*)[ML_EVENT_NAME])(q + sizeof(e));
    p->ev_raw = q + need;
    p->ev_nthreads = e.nthreads;
    return 0;
}

/* Points each thread at its event sums; a block naming no thread, or one twice, is corrupt. */
static int link_events(struct ml_profile *p, char *err, size_t errlen)
{
    uint64_t block = sizeof(struct ml_prof_evthread) + p->nregions * p->nevents * 8;

    for (uint32_t i = 0; i < p->ev_nthreads; i++) {
        const unsigned char *q = p->ev_raw + i * block;
        struct ml_prof_evthread et;
        uint64_t t;

        memcpy(&et, q, sizeof(et));
        for (t = 0; t < p->nthreads && p->threads[t].index != et.index; t++)
            ;
        if (t == p->nthreads)
            return fail(err, errlen, "event sums %u name thread index %u, which has no record", i,
                        et.index);
        if (p->threads[t].events)
            return fail(err, errlen, "event sums %u repeat thread index %u", i, et.index);
        p->threads[t].events = (const uint64_t *)(q + sizeof(et));
    }
    return 0;
}

/*
 * Sections must come in dependency order so that threads can be sized on sight:
 * each table section appears at most once, and REGIONS and UNITS precede every
 * THREAD. Payloads are copied from buf into p->data at 8-byte aligned offsets
 * (the writer does not pad, e.g. after the string table) so that records can
 * be read in place without misaligned accesses.
 */
static int parse_sections(struct ml_profile *p, const unsigned char *buf, size_t len, char *err,
                          size_t errlen)
{
    unsigned char *dst = (unsigned char *)p->data + sizeof(struct ml_prof_header);
    uint64_t off = p->hdr.header_size;
    uint32_t seen = 0;
    int saw_end = 0, rc;

    while (off < len) {
        struct ml_prof_section s;
        unsigned char *q;

        if (len - off < sizeof(s))
            return fail(err, errlen, "truncated section header at offset %llu",
                        (unsigned long long)off);
        memcpy(&s, buf + off, sizeof(s));
        if (s.length > len - off - sizeof(s))
            return fail(err, errlen,
                        "section '%s' at offset %llu claims %llu bytes, only %llu remain",
                        sec_name(s.type), (unsigned long long)off, (unsigned long long)s.length,
                        (unsigned long long)(len - off - sizeof(s)));
        /* Only the tables must be unique; per-thread and unknown sections may repeat. */
        if ((s.type >= ML_SEC_STRTAB && s.type <= ML_SEC_MODULES && s.type != ML_SEC_THREAD) ||
            s.type == ML_SEC_TIMELINE) {
            if (seen & (1u << s.type))
                return fail(err, errlen, "section '%s' at offset %llu appears twice",
                            sec_name(s.type), (unsigned long long)off);
            if ((s.type == ML_SEC_UNITS || s.type == ML_SEC_REGIONS) &&
                (seen & (1u << ML_SEC_THREAD)))
                return fail(err, errlen, "section '%s' at offset %llu comes after a thread record",
                            sec_name(s.type), (unsigned long long)off);
        }
        if ((s.type == ML_SEC_EVENTS || s.type == ML_SEC_CALIB || s.type == ML_SEC_ENTRIES ||
             s.type == ML_SEC_EXITED || s.type == ML_SEC_UNITINFO || s.type == ML_SEC_RFLAGS ||
             s.type == ML_SEC_INLINED) &&
            (seen & (1u << s.type)))
            return fail(err, errlen, "section '%s' at offset %llu appears twice", sec_name(s.type),
                        (unsigned long long)off);
        if (s.type == ML_SEC_EVENTS && !(seen & (1u << ML_SEC_REGIONS)))
            return fail(err, errlen, "section 'events' at offset %llu comes before the regions",
                        (unsigned long long)off);
        if (s.type < 32)
            seen |= 1u << s.type;
        q = dst;
        memcpy(q, buf + off + sizeof(s), s.length);
        dst += (s.length + 7) & ~(uint64_t)7;
        switch (s.type) {
        case ML_SEC_END:
            saw_end = 1;
            break;
        case ML_SEC_STRTAB:
            if (s.length == 0 || q[s.length - 1] != 0)
                return fail(err, errlen, "string table at offset %llu is not NUL-terminated",
                            (unsigned long long)off);
            p->strtab = (const char *)q;
            p->strtab_len = s.length;
            break;
        case ML_SEC_META:
        case ML_SEC_REGIONS:
        case ML_SEC_REGSETS: {
            uint64_t unit = s.type == ML_SEC_META ? 8 : 4;
            if (s.length % unit)
                return fail(err, errlen, "section '%s' at offset %llu has odd length %llu",
                            sec_name(s.type), (unsigned long long)off,
                            (unsigned long long)s.length);
            if (s.type == ML_SEC_META) {
                p->meta = (const uint32_t *)q;
                p->nmeta = s.length / 8;
            } else if (s.type == ML_SEC_REGIONS) {
                p->regions = (const uint32_t *)q;
                p->nregions = s.length / 4;
            } else {
                p->regsets = (const uint32_t *)q;
                p->nregset_words = s.length / 4;
            }
            break;
        }
        case ML_SEC_UNITS:
            if (s.length % sizeof(struct ml_prof_unit))
                return fail(err, errlen, "unit section at offset %llu has odd length %llu",
                            (unsigned long long)off, (unsigned long long)s.length);
            p->units = (const struct ml_prof_unit *)q;
            p->nunits = s.length / sizeof(struct ml_prof_unit);
            break;
        case ML_SEC_CALLS:
            if (s.length % sizeof(struct ml_prof_call))
                return fail(err, errlen, "call section at offset %llu has odd length %llu",
                            (unsigned long long)off, (unsigned long long)s.length);
            p->calls = (const struct ml_prof_call *)q;
            p->ncalls = s.length / sizeof(struct ml_prof_call);
            break;
        case ML_SEC_MODULES:
            if (s.length % sizeof(struct ml_prof_module))
                return fail(err, errlen, "module section at offset %llu has odd length %llu",
                            (unsigned long long)off, (unsigned long long)s.length);
            p->modules = (const struct ml_prof_module *)q;
            p->nmodules = s.length / sizeof(struct ml_prof_module);
            break;
        case ML_SEC_ENTRIES:
            if (s.length % 4)
                return fail(err, errlen, "entry section at offset %llu has odd length %llu",
                            (unsigned long long)off, (unsigned long long)s.length);
            p->entries = (const uint32_t *)q;
            p->nentries = s.length / 4;
            break;
        case ML_SEC_THREAD:
            rc = add_thread(p, q, s.length, off, err, errlen);
            if (rc)
                return rc;
            break;
        case ML_SEC_EXACT:
            rc = add_exact(p, q, s.length, off, err, errlen);
            if (rc)
                return rc;
            break;
        case ML_SEC_EVENTS:
            rc = parse_events(p, q, s.length, off, err, errlen);
            if (rc)
                return rc;
            break;
        case ML_SEC_CALIB:
            if (s.length != sizeof(struct ml_prof_calib))
                return fail(err, errlen,
                            "calib section at offset %llu has length %llu, expected %zu",
                            (unsigned long long)off, (unsigned long long)s.length,
                            sizeof(struct ml_prof_calib));
            p->calib = (const struct ml_prof_calib *)q;
            break;
        case ML_SEC_EXITED:
            if (s.length != sizeof(struct ml_prof_exited))
                return fail(err, errlen,
                            "exited section at offset %llu has length %llu, expected %zu",
                            (unsigned long long)off, (unsigned long long)s.length,
                            sizeof(struct ml_prof_exited));
            p->exited = (const struct ml_prof_exited *)q;
            break;
        case ML_SEC_TIMELINE:
            rc = add_timeline(p, q, s.length, off, err, errlen);
            if (rc)
                return rc;
            break;
        case ML_SEC_UNITINFO:
            if (s.length % sizeof(struct ml_prof_unitinfo))
                return fail(err, errlen, "unit info section at offset %llu has odd length %llu",
                            (unsigned long long)off, (unsigned long long)s.length);
            p->uinfo = (const struct ml_prof_unitinfo *)q;
            p->nuinfo = s.length / sizeof(struct ml_prof_unitinfo);
            break;
        case ML_SEC_INLINED:
            if (s.length % sizeof(struct ml_prof_inlined))
                return fail(err, errlen, "inlined section at offset %llu has odd length %llu",
                            (unsigned long long)off, (unsigned long long)s.length);
            p->inl = (const struct ml_prof_inlined *)q;
            p->ninl = s.length / sizeof(struct ml_prof_inlined);
            break;
        case ML_SEC_TIMED:
            rc = add_timed(p, q, s.length, off, err, errlen);
            if (rc)
                return rc;
            break;
        case ML_SEC_RFLAGS:
            if (!(seen & (1u << ML_SEC_REGIONS)) || s.length != p->nregions * 4)
                return fail(err, errlen, "region flags at offset %llu: %llu bytes for %llu regions",
                            (unsigned long long)off, (unsigned long long)s.length,
                            (unsigned long long)p->nregions);
            p->rflags = (const uint32_t *)q;
            break;
        default:
            break; /* newer section kinds are skipped, see the version rule */
        }
        off += sizeof(s) + s.length;
        if (saw_end)
            break;
    }
    if (!saw_end)
        return fail(err, errlen, "no end record: the file was cut short at %llu bytes",
                    (unsigned long long)len);
    if (!p->strtab)
        return fail(err, errlen, "no string table");
    rc = link_events(p, err, errlen);
    if (rc)
        return rc;
    if (p->exited) {
        int64_t t = ml_profile_thread_pos(p, p->exited->index);
        if (t < 0 || !p->exited->nthreads)
            return fail(err, errlen, "exited section names thread index %u, which has no record",
                        p->exited->index);
        p->threads[t].exited = p->exited->nthreads;
    }
    return check_refs(p, err, errlen);
}

/*
 * The fixed header: magic, version and size, checked before anything else is
 * read. buf holds the file's first len bytes; *hsize gets the header's size
 * for the file's version.
 */
static int check_header(const void *buf, size_t len, size_t *hsize, char *err, size_t errlen)
{
    struct ml_prof_header h;

    if (len < ML_PROF_HEADER_V2)
        return fail(err, errlen, "file is %zu bytes, shorter than a profile header", len);
    memcpy(&h, buf, ML_PROF_HEADER_V2);
    if (memcmp(h.magic, ML_PROF_MAGIC, sizeof(h.magic)) != 0)
        return fail(err, errlen, "not a memlens profile (bad magic)");
    if (h.version < ML_PROF_VERSION_MIN || h.version > ML_PROF_VERSION)
        return fail(err, errlen, "profile version %u, this memlens reads versions %d to %d",
                    h.version, ML_PROF_VERSION_MIN, ML_PROF_VERSION);
    *hsize = h.version == 2 ? ML_PROF_HEADER_V2 : sizeof(struct ml_prof_header);
    if (h.header_size != *hsize)
        return fail(err, errlen, "header size %u, expected %zu for version %u", h.header_size,
                    *hsize, h.version);
    if (len < *hsize)
        return fail(err, errlen, "file is %zu bytes, shorter than a profile header", len);
    return 0;
}

int ml_profile_parse(const void *buf, size_t len, struct ml_profile **out, char *err, size_t errlen)
{
    struct ml_profile *p;
    size_t cap, hsize;
    int rc;

    *out = NULL;
    rc = check_header(buf, len, &hsize, err, errlen);
    if (rc)
        return rc;
    p = calloc(1, sizeof(*p));
    if (!p)
        goto nomem;
    /* Room for every payload rounded up to 8 bytes: a section costs at least 16 bytes. */
    cap = sizeof(struct ml_prof_header) + len + (len / sizeof(struct ml_prof_section) + 1) * 8;
    p->data = malloc(cap);
    if (!p->data) {
        free(p);
        goto nomem;
    }
    p->size = len;
    /* Fields of a later version than the file's read as 0. */
    memcpy(&p->hdr, buf, hsize);
    memcpy(p->data, &p->hdr, sizeof(p->hdr));
    rc = parse_sections(p, buf, len, err, errlen);
    if (rc) {
        ml_profile_free(p);
        return rc;
    }
    *out = p;
    return 0;
nomem:
    if (errlen)
        snprintf(err, errlen, "out of memory");
    return -ENOMEM;
}

/* Reads exactly n bytes at buf; -errno, or -EIO when the file ends first (it shrank). */
static int read_full(int fd, void *buf, size_t n, char *err, size_t errlen)
{
    size_t got = 0;

    while (got < n) {
        ssize_t k = read(fd, (char *)buf + got, n - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            snprintf(err, errlen, "%s", k < 0 ? strerror(errno) : "file shrank while reading");
            return k < 0 ? -errno : -EIO;
        }
        got += (size_t)k;
    }
    return 0;
}

/*
 * Reads the file's sections after its header, as far as the END record:
 * each section header is checked against the file size before its payload
 * is read, so a corrupt length costs nothing. Reads are large (the buffer
 * doubles, up to the file size), so at most about twice what the sections
 * declare is read. Returns the bytes that make up the profile in *len, or
 * fails with the reason. On entry *len bytes (the header, hsize bytes, and
 * maybe more) are in *bufp.
 */
static int read_sections(int fd, uint64_t size, size_t hsize, unsigned char **bufp, size_t *len,
                         char *err, size_t errlen)
{
    unsigned char *buf = *bufp;
    uint64_t have = *len, walk = hsize, cap = have;

    for (;;) {
        uint64_t want;
        unsigned char *nb;
        int rc;

        while (have >= walk && have - walk >= sizeof(struct ml_prof_section)) {
            struct ml_prof_section s;
            memcpy(&s, buf + walk, sizeof(s));
            if (s.length > size - walk - sizeof(s))
                return fail(
                    err, errlen, "section '%s' at offset %llu claims %llu bytes, only %llu remain",
                    sec_name(s.type), (unsigned long long)walk, (unsigned long long)s.length,
                    (unsigned long long)(size - walk - sizeof(s)));
            walk += sizeof(s) + s.length;
            if (s.type == ML_SEC_END) {
                *len = (size_t)walk;
                return 0;
            }
        }
        /* Whatever comes next (a payload or a section header) ends before the file does. */
        want = (walk > have ? walk : have) + sizeof(struct ml_prof_section);
        if (want > size)
            want = size;
        if (want <= have) {
            *len = (size_t)have; /* no END: the parser says where the file was cut */
            return 0;
        }
        if (want > cap) {
            cap = cap * 2 > want ? cap * 2 : want;
            if (cap > size)
                cap = size;
            if ((size_t)cap != cap)
                return fail(err, errlen, "file too large for this machine");
            nb = realloc(buf, (size_t)cap);
            if (!nb) {
                snprintf(err, errlen, "out of memory");
                return -ENOMEM;
            }
            *bufp = buf = nb;
        }
        /* Read on to the end of the buffer: one large read serves many small sections. */
        rc = read_full(fd, buf + have, (size_t)(cap - have), err, errlen);
        if (rc)
            return rc;
        have = cap;
    }
}

int ml_profile_read(const char *path, int flags, struct ml_profile **out, char *err, size_t errlen)
{
    struct stat st;
    unsigned char *buf = NULL;
    size_t len = 0, hsize = 0;
    int fd, rc, fl;

    *out = NULL;
    /* O_NONBLOCK: opening a FIFO or a device must not wait; it is refused below. */
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK |
                        (flags & ML_PROF_NOFOLLOW ? O_NOFOLLOW : 0));
    if (fd < 0) {
        rc = -errno;
        if (rc == -ELOOP && (flags & ML_PROF_NOFOLLOW))
            return fail(err, errlen, "a symbolic link (links inside a directory are not followed)");
        snprintf(err, errlen, "%s", strerror(errno));
        return rc;
    }
    if (fstat(fd, &st) < 0) {
        rc = -errno;
        snprintf(err, errlen, "%s", strerror(errno));
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = fail(err, errlen, "not a regular file");
        goto out;
    }
    fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
        rc = -errno;
        snprintf(err, errlen, "%s", strerror(errno));
        goto out;
    }
    /* The header first: a file that is no profile costs 80 bytes, whatever its size. */
    buf = malloc(sizeof(struct ml_prof_header));
    if (!buf) {
        rc = -ENOMEM;
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    len = (uint64_t)st.st_size < sizeof(struct ml_prof_header) ? (size_t)st.st_size
                                                               : sizeof(struct ml_prof_header);
    rc = read_full(fd, buf, len, err, errlen);
    if (!rc)
        rc = check_header(buf, len, &hsize, err, errlen);
    if (!rc)
        rc = read_sections(fd, (uint64_t)st.st_size, hsize, &buf, &len, err, errlen);
    if (!rc)
        rc = ml_profile_parse(buf, len, out, err, errlen);
    if (!rc) {
        (*out)->path = strdup(path);
        if (!(*out)->path) {
            ml_profile_free(*out);
            *out = NULL;
            rc = -ENOMEM;
        }
    }
out:
    free(buf);
    close(fd);
    return rc;
}

void ml_profile_free(struct ml_profile *p)
{
    if (!p)
        return;
    free(p->threads);
    free(p->snaps);
    free(p->data);
    free(p->path);
    free(p);
}

int64_t ml_profile_thread_pos(const struct ml_profile *p, uint32_t index)
{
    if (index < p->nthreads && p->threads[index].index == index)
        return index;
    for (uint64_t i = 0; i < p->nthreads; i++)
        if (p->threads[i].index == index)
            return (int64_t)i;
    return -1;
}

const char *ml_profile_str(const struct ml_profile *p, uint32_t off)
{
    return off < p->strtab_len ? p->strtab + off : "?";
}

const uint32_t *ml_profile_regset(const struct ml_profile *p, uint32_t off, uint32_t *n)
{
    if (off >= p->nregset_words) {
        *n = 0;
        return NULL;
    }
    *n = p->regsets[off];
    return p->regsets + off + 1;
}

const char *ml_profile_meta(const struct ml_profile *p, const char *key)
{
    for (uint64_t i = 0; i < p->nmeta; i++)
        if (strcmp(ml_profile_str(p, p->meta[2 * i]), key) == 0)
            return ml_profile_str(p, p->meta[2 * i + 1]);
    return NULL;
}
