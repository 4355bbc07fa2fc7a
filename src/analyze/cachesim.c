/* Cache hierarchy simulator (membus, bandwidth --memory, export): sets in MRU order, LRU,
 * write-back. */
#include "analyze/cachesim.h"
#include "analyze/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define HUGE ((size_t)2 << 20) /* a huge page */

int ml_an_parse_level(const char *s, struct ml_an_level *l)
{
    char *end;
    unsigned long long size, ways;

    if (!strcmp(s, "none")) {
        l->size = 0;
        l->ways = 0;
        return 0;
    }
    size = strtoull(s, &end, 10);
    if (end == s)
        return -EINVAL;
    switch (*end) {
    case 'k':
    case 'K':
        size <<= 10;
        end++;
        break;
    case 'm':
    case 'M':
        size <<= 20;
        end++;
        break;
    case 'g':
    case 'G':
        size <<= 30;
        end++;
        break;
    default:
        break;
    }
    if (*end != ':')
        return -EINVAL;
    ways = strtoull(end + 1, &end, 10);
    if (*end || !size || !ways || ways > 1024 || size > (1ull << 40))
        return -EINVAL;
    l->size = size;
    l->ways = (uint32_t)ways;
    return 0;
}

/* Sysfs size strings: "32K", "1024K", "32768K". */
static uint64_t read_size(const char *dir, const char *name)
{
    char path[256], buf[64], *end;
    FILE *f;
    unsigned long long v;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    if (!(f = fopen(path, "r")))
        return 0;
    if (!fgets(buf, sizeof(buf), f))
        buf[0] = 0;
    fclose(f);
    v = strtoull(buf, &end, 10);
    if (*end == 'K')
        v <<= 10;
    else if (*end == 'M')
        v <<= 20;
    return v;
}

int ml_an_sysfs_caches(struct ml_an_opts *o)
{
    int found = 0;

    for (int i = 0; i < 16; i++) {
        char dir[128], type[32] = "", path[160];
        FILE *f;
        uint64_t level, size, ways, line;
        snprintf(dir, sizeof(dir), "/sys/devices/system/cpu/cpu0/cache/index%d", i);
        snprintf(path, sizeof(path), "%s/type", dir);
        if (!(f = fopen(path, "r")))
            break;
        if (!fgets(type, sizeof(type), f))
            type[0] = 0;
        fclose(f);
        if (!strncmp(type, "Instruction", 11))
            continue;
        level = read_size(dir, "level");
        size = read_size(dir, "size");
        ways = read_size(dir, "ways_of_associativity");
        line = read_size(dir, "coherency_line_size");
        if (!size || !ways || ways > 1024)
            continue;
        if (level == 1)
            o->l1 = (struct ml_an_level){size, (uint32_t)ways};
        else if (level == 2)
            o->l2 = (struct ml_an_level){size, (uint32_t)ways};
        else if (level == 3)
            o->llc = (struct ml_an_level){size, (uint32_t)ways};
        else
            continue;
        if (line >= 16 && line <= 4096 && !(line & (line - 1)))
            o->line = (uint32_t)line;
        found++;
    }
    return found ? 0 : -ENOENT;
}

static int cache_init(struct ml_cache *c, const struct ml_an_level *g, uint32_t line)
{
    uint64_t lines = g->size / line;
    size_t bytes;

    memset(c, 0, sizeof(*c));
    if (!g->size)
        return 0;
    if (lines < g->ways || lines % g->ways)
        return -EINVAL;
    c->ways = g->ways;
    c->sets = lines / g->ways;
    c->pow2 = !(c->sets & (c->sets - 1));
    c->mask = c->sets - 1;
    /* Sets on cache-line boundaries: an 8-way set is one host line, a 16-way set two. A large
     * array (the llc's: 4 MiB for 32 MiB) is read at random: huge pages spare a TLB miss. */
    bytes = (lines * sizeof(*c->tags) + 63) & ~(size_t)63;
    if (bytes >= HUGE) {
        bytes = (bytes + HUGE - 1) & ~(HUGE - 1);
        c->tags = aligned_alloc(HUGE, bytes);
        if (c->tags)
            madvise(c->tags, bytes, MADV_HUGEPAGE);
    } else {
        c->tags = aligned_alloc(64, bytes);
    }
    if (!c->tags)
        return -ENOMEM;
    memset(c->tags, 0xff, lines * sizeof(*c->tags));
    return 0;
}

static void cache_clear(struct ml_cache *c)
{
    if (c->tags)
        memset(c->tags, 0xff, c->sets * c->ways * sizeof(*c->tags));
}

static inline uint64_t *set_of(const struct ml_cache *c, uint64_t line)
{
    return c->tags + (c->pow2 ? line & c->mask : line % c->sets) * c->ways;
}

int ml_csim_init(struct ml_csim *s, const struct ml_an_opts *o, int record_mem)
{
    int rc;

    memset(s, 0, sizeof(*s));
    s->geom[0] = o->l1;
    s->geom[1] = o->l2;
    s->geom[2] = o->llc;
    if (!o->line || (o->line & (o->line - 1)) || !o->l1.size)
        return -EINVAL;
    while ((1u << s->line_shift) < o->line)
        s->line_shift++;
    for (int i = 0; i < 3; i++)
        if (s->geom[i].size &&
            (s->geom[i].size % o->line || s->geom[i].size / o->line < s->geom[i].ways ||
             (s->geom[i].size / o->line) % s->geom[i].ways))
            return -EINVAL;
    if ((rc = cache_init(&s->llc, &o->llc, o->line)))
        return rc;
    s->q[0] = malloc(ML_CS_QUEUE * sizeof(*s->q[0]));
    s->q[1] = malloc(2 * ML_CS_QUEUE * sizeof(*s->q[1]));
    if (record_mem) {
        s->capmem = 64;
        s->mem = malloc(s->capmem * sizeof(*s->mem));
    }
    if (!s->q[0] || !s->q[1] || (record_mem && !s->mem)) {
        ml_csim_free(s); /* callers that fail here need not free it */
        return -ENOMEM;
    }
    return 0;
}

static void thr_free(struct ml_csim_thr *t)
{
    if (!t)
        return;
    free(t->priv[0].tags);
    free(t->priv[1].tags);
    free(t);
}

void ml_csim_free(struct ml_csim *s)
{
    for (uint32_t i = 0; i < s->nthr; i++)
        thr_free(s->thr[i]);
    free(s->thr);
    free(s->llc.tags);
    free(s->mem);
    free(s->q[0]);
    free(s->q[1]);
    memset(s, 0, sizeof(*s));
}

void ml_csim_reset(struct ml_csim *s)
{
    for (uint32_t i = 0; i < s->nthr; i++)
        thr_free(s->thr[i]);
    free(s->thr);
    s->thr = NULL;
    s->nthr = 0;
    cache_clear(&s->llc);
    s->nmem = 0;
    s->nq = 0;
}

const char *ml_csim_describe(const struct ml_csim *s, char *buf, size_t n)
{
    static const char *const names[] = {"l1", "l2", "llc"};
    size_t len = 0;

    buf[0] = 0;
    for (int i = 0; i < 3 && len < n; i++) {
        char b[32];
        if (!s->geom[i].size)
            continue;
        len += (size_t)snprintf(buf + len, n - len, "%s%s %s %u-way%s", len ? ", " : "", names[i],
                                ml_fmt_bytes(b, sizeof(b), (double)s->geom[i].size),
                                s->geom[i].ways, i < 2 ? " per thread" : " shared");
    }
    if (len < n)
        snprintf(buf + len, n - len, ", %u-byte lines", 1u << s->line_shift);
    return buf;
}

static struct ml_csim_thr *thread_of(struct ml_csim *s, uint32_t thread)
{
    struct ml_csim_thr *t;

    if (thread >= s->nthr) {
        uint32_t n = thread + 1;
        struct ml_csim_thr **v = realloc(s->thr, (size_t)n * sizeof(*v));
        if (!v)
            return NULL;
        memset(v + s->nthr, 0, (size_t)(n - s->nthr) * sizeof(*v));
        s->thr = v;
        s->nthr = n;
    }
    if (s->thr[thread])
        return s->thr[thread];
    t = calloc(1, sizeof(*t));
    if (!t || cache_init(&t->priv[0], &s->geom[0], 1u << s->line_shift) ||
        cache_init(&t->priv[1], &s->geom[1], 1u << s->line_shift)) {
        thr_free(t);
        return NULL;
    }
    return s->thr[thread] = t;
}

/* Moves set[0, n) to set[1, n]: sets up to 16 ways inline (a memmove call costs more). */
static inline void shift_up(uint64_t *set, uint32_t n)
{
    switch (n) {
    case 15:
        set[15] = set[14]; /* fall through */
    case 14:
        set[14] = set[13]; /* fall through */
    case 13:
        set[13] = set[12]; /* fall through */
    case 12:
        set[12] = set[11]; /* fall through */
    case 11:
        set[11] = set[10]; /* fall through */
    case 10:
        set[10] = set[9]; /* fall through */
    case 9:
        set[9] = set[8]; /* fall through */
    case 8:
        set[8] = set[7]; /* fall through */
    case 7:
        set[7] = set[6]; /* fall through */
    case 6:
        set[6] = set[5]; /* fall through */
    case 5:
        set[5] = set[4]; /* fall through */
    case 4:
        set[4] = set[3]; /* fall through */
    case 3:
        set[3] = set[2]; /* fall through */
    case 2:
        set[2] = set[1]; /* fall through */
    case 1:
        set[1] = set[0]; /* fall through */
    case 0:
        break;
    default:
        memmove(set + 1, set, n * sizeof(*set));
    }
}

/* Looks line up; a hit moves it to the front. Returns its tag or NULL. */
static inline uint64_t *lookup(const struct ml_cache *c, uint64_t line)
{
    uint64_t *set = set_of(c, line), tag;

    for (uint32_t w = 0; w < c->ways; w++)
        if ((set[w] >> 1) == line) {
            tag = set[w];
            shift_up(set, w);
            set[0] = tag;
            return set;
        }
    return NULL;
}

/* Installs line at the front; returns the victim's tag (ML_CS_EMPTY: none). */
static inline uint64_t install(const struct ml_cache *c, uint64_t line, int dirty, uint64_t **at)
{
    uint64_t *set = set_of(c, line), victim = set[c->ways - 1];

    shift_up(set, c->ways - 1);
    set[0] = line << 1 | (uint64_t)dirty;
    *at = set;
    return victim;
}

static int mem_event(struct ml_csim *s, uint64_t line, int write)
{
    if (!s->mem)
        return 0;
    if (s->nmem == s->capmem) {
        uint32_t cap = 2 * s->capmem;
        struct ml_cs_mem *m = realloc(s->mem, cap * sizeof(*m));
        if (!m)
            return -ENOMEM;
        s->mem = m;
        s->capmem = cap;
    }
    s->mem[s->nmem++] = (struct ml_cs_mem){line, write};
    return 0;
}

/* Looks line up without changing recency (a write-back): its tag or NULL. */
static inline uint64_t *find(const struct ml_cache *c, uint64_t line)
{
    uint64_t *set = set_of(c, line);

    for (uint32_t w = 0; w < c->ways; w++)
        if ((set[w] >> 1) == line)
            return set + w;
    return NULL;
}

static inline void prefetch_set(const struct ml_cache *c, uint64_t line)
{
    const char *set = (const char *)set_of(c, line);

    for (uint32_t b = 0; b < c->ways * sizeof(uint64_t); b += 64)
        __builtin_prefetch(set + b);
}

/* Requests looked ahead when prefetching a level's sets. */
#define PREFETCH_AHEAD 12

/*
 * Runs n requests in order through level `which` (1: the thread's l2, 2: the llc). What
 * misses, and the dirty victims, go to `out` in order, or with out NULL to memory. Order
 * is what keeps this exact: a level's state depends only on the requests it sees, so
 * running l1 for many accesses, then l2 for their misses, then llc, gives each level the
 * sequence it sees when every access goes down the whole hierarchy at once.
 */
static int stage(struct ml_csim *s, int which, const struct ml_cs_req *in, uint32_t n,
                 struct ml_cs_req *out, uint32_t *nout)
{
    static const int acc[] = {0, ML_CS_L2_ACC, ML_CS_LLC_ACC},
                     miss[] = {0, ML_CS_L2_MISS, ML_CS_LLC_MISS},
                     wbc[] = {0, ML_CS_L2_WB, ML_CS_LLC_WB};
    uint32_t no = 0;
    int rc;

    for (uint32_t i = 0; i < n; i++) {
        const struct ml_cs_req *e = &in[i];
        const struct ml_cache *c = which == 1 ? &e->t->priv[1] : &s->llc;
        uint64_t line = e->line >> 1, victim, *at;
        if (i + PREFETCH_AHEAD < n) {
            const struct ml_cs_req *f = &in[i + PREFETCH_AHEAD];
            prefetch_set(which == 1 ? &f->t->priv[1] : &s->llc, f->line >> 1);
        }
        if (e->line & 1) {
            /* A write-back: the line turns dirty where it is, recency unchanged. */
            if ((at = find(c, line)))
                *at |= 1;
            else if (out)
                out[no++] = *e;
            else if ((e->c[ML_CS_MEM_WR]++, rc = mem_event(s, line, 1)))
                return rc;
            continue;
        }
        e->c[acc[which]]++;
        if (lookup(c, line))
            continue;
        e->c[miss[which]]++;
        if (out)
            out[no++] = *e;
        else if ((e->c[ML_CS_MEM_RD]++, rc = mem_event(s, line, 0)))
            return rc;
        victim = install(c, line, 0, &at);
        if (victim == ML_CS_EMPTY || !(victim & 1))
            continue;
        e->c[wbc[which]]++;
        if (out)
            out[no++] = (struct ml_cs_req){victim, e->c, e->t};
        else if ((e->c[ML_CS_MEM_WR]++, rc = mem_event(s, victim >> 1, 1)))
            return rc;
    }
    if (nout)
        *nout = no;
    return 0;
}

int ml_csim_flush(struct ml_csim *s)
{
    uint32_t n = s->nq;
    const struct ml_cs_req *in = s->q[0];
    int rc;

    s->nq = 0;
    if (s->geom[1].size) {
        if ((rc = stage(s, 1, in, n, s->geom[2].size ? s->q[1] : NULL, &n)))
            return rc;
        in = s->q[1];
    }
    return s->geom[2].size ? stage(s, 2, in, n, NULL, NULL) : 0;
}

/* Sends a request below l1: to the queue, or to memory when l1 is the only level. */
static inline int below(struct ml_csim *s, struct ml_csim_thr *t, uint64_t req, uint64_t *c)
{
    if (s->geom[1].size || s->geom[2].size) {
        s->q[0][s->nq++] = (struct ml_cs_req){req, c, t};
        return 0;
    }
    c[req & 1 ? ML_CS_MEM_WR : ML_CS_MEM_RD]++;
    return mem_event(s, req >> 1, (int)(req & 1));
}

int ml_csim_line(struct ml_csim *s, uint32_t thread, uint64_t line, int write, uint64_t *c)
{
    struct ml_csim_thr *t =
        thread < s->nthr && s->thr[thread] ? s->thr[thread] : thread_of(s, thread);
    uint64_t *at, victim;
    int rc;

    if (!t)
        return -ENOMEM;
    if ((at = lookup(&t->priv[0], line))) {
        *at |= (uint64_t)write;
    } else {
        c[ML_CS_L1_MISS]++;
        if ((rc = below(s, t, line << 1, c)))
            return rc;
        victim = install(&t->priv[0], line, write, &at);
        if (victim != ML_CS_EMPTY && (victim & 1)) {
            c[ML_CS_L1_WB]++;
            if ((rc = below(s, t, victim, c)))
                return rc;
        }
    }
    t->last = line;
    t->last_tag = at;
    return !s->batch || s->nq > ML_CS_QUEUE - 2 ? ml_csim_flush(s) : 0;
}
