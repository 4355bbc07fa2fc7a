/* Helpers shared by the analyses: rows of counters per (thread, key), output tables, hashing. */
#ifndef ML_ANALYZE_UTIL_H
#define ML_ANALYZE_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "analyze/analyze.h"
#include "format/json.h" /* ml_json_str */

/* ---- Rows: a vector of `width` counters per (gthread, key), created on first use ---- */

#define ML_ROWS_BLOCK 256 /* rows per block: row pointers stay valid as rows are added */

struct ml_rows {
    uint32_t width;
    uint32_t n, cap; /* rows, and room in blocks */
    uint64_t **blocks;
    uint32_t *thread, *key; /* [cap] */
    uint32_t **map;         /* [gthread][key]: row + 1 */
    uint32_t *mapcap;
    uint32_t nthr;
};

int ml_rows_init(struct ml_rows *r, uint32_t width);
void ml_rows_free(struct ml_rows *r);
/* Slow path of ml_rows_at: adds the row (zeroed); NULL when out of memory. */
uint64_t *ml_rows_add(struct ml_rows *r, uint32_t gthread, uint32_t key);

static inline uint64_t *ml_rows_row(const struct ml_rows *r, uint32_t i)
{
    return r->blocks[i / ML_ROWS_BLOCK] + (size_t)(i % ML_ROWS_BLOCK) * r->width;
}

/* The counters of (gthread, key); valid for the life of r. NULL when out of memory. */
static inline uint64_t *ml_rows_at(struct ml_rows *r, uint32_t gthread, uint32_t key)
{
    uint32_t i;

    if (gthread < r->nthr && key < r->mapcap[gthread] && (i = r->map[gthread][key]))
        return ml_rows_row(r, i - 1);
    return ml_rows_add(r, gthread, key);
}

/* The index of (gthread, key)'s row, created on first use; UINT32_MAX when out of memory. */
static inline uint32_t ml_rows_id(struct ml_rows *r, uint32_t gthread, uint32_t key)
{
    uint32_t i;

    if (gthread < r->nthr && key < r->mapcap[gthread] && (i = r->map[gthread][key]))
        return i - 1;
    return ml_rows_add(r, gthread, key) ? r->map[gthread][key] - 1 : UINT32_MAX;
}

/*
 * Visits the rows for a report, per trace: each thread's rows by key (only
 * with a --by breakdown), then the thread's total (key ML_ALL); then the
 * trace's rows over all its threads (gthread ML_ALL) by key, and its total.
 * Totals and sums are computed by adding counters. trace is the trace index.
 * Stops at the first non-zero return of fn and returns it.
 */
typedef int (*ml_rows_fn)(void *arg, int trace, uint32_t gthread, uint32_t key, const uint64_t *c);
int ml_rows_visit(const struct ml_rows *r, const struct ml_an_run *run, ml_rows_fn fn, void *arg);

/* ---- Output tables: printed as an aligned table, CSV or a JSON array of objects ---- */

struct ml_tab;

/*
 * cols: space-separated "name:type", type s (string), u (unsigned), i
 * (signed), f (float, printed with %.6g), p (float, 4 decimals). Cells are
 * added row by row in column order; a missing cell is empty (CSV) or null
 * (JSON).
 */
struct ml_tab *ml_tab_new(const char *name, const char *title, const char *cols);
void ml_tab_free(struct ml_tab *t);
int ml_tab_str(struct ml_tab *t, const char *s);
int ml_tab_u64(struct ml_tab *t, uint64_t v);
int ml_tab_i64(struct ml_tab *t, int64_t v);
int ml_tab_f64(struct ml_tab *t, double v);
int ml_tab_null(struct ml_tab *t);
size_t ml_tab_rows(const struct ml_tab *t);
/* The pid, thread, tid and marker cells that start most rows (from a ml_rows_visit callback). */
int ml_tab_who(struct ml_tab *t, const struct ml_an_run *run, int trace, uint32_t gthread,
               uint32_t key);

/*
 * Prints an analysis's tables: table format all of them with their titles;
 * CSV the first one only (the one whose columns scripts rely on); JSON one
 * object with a member per table, then `extra` (already formatted members,
 * "\"k\": v, ..." or NULL). Frees the tables. 0 or -EIO.
 */
int ml_tab_print(FILE *out, enum ml_an_format fmt, struct ml_tab **tabs, int ntabs,
                 const char *extra);

/* Human-readable byte count ("1.5 MiB"). */
const char *ml_fmt_bytes(char *buf, size_t n, double bytes);

/* ---- Hashing ---- */

/*
 * Move-to-front in a short array: v[0..i - 1] one place back, x at v[0]. A
 * plain loop: these arrays hold a few entries and memmove is a call.
 */
static inline void ml_to_front(uint64_t *v, uint32_t i, uint64_t x)
{
    for (; i; i--)
        v[i] = v[i - 1];
    v[0] = x;
}

/*
 * A move-to-front list of at most ML_MTF_MAX keys at O(1) per access, for
 * the short recency lists the analyses keep in front of their hash tables.
 * Keys stay in fixed slots, each with a tag byte from the caller's hash of
 * the key; the recency order is one word of 4-bit slot numbers, rank 0 in
 * the low nibble. A lookup compares the 16 tags a word at a time (SWAR) and
 * checks the key of each matching slot, the rank is the place of the slot's
 * nibble, and moving to the front is a few masks and shifts: no scan that
 * depends on the rank and no moving of keys.
 */
#define ML_MTF_MAX 16

struct ml_mtf {
    uint64_t key[ML_MTF_MAX];
    uint64_t tag[2]; /* slot s's tag: byte s % 8 of tag[s / 8] */
    uint64_t ord;    /* nibble r: the slot at rank r (ranks < n are meaningful) */
    uint32_t n, cap; /* keys held, at most cap (1..ML_MTF_MAX) */
};

/* A tag for a key when the caller has no hash of it (multiplicative: one multiply). */
static inline uint8_t ml_mtf_tag(uint64_t key)
{
    return (uint8_t)((key * 0x9e3779b97f4a7c15ull) >> 56);
}

static inline void ml_mtf_init(struct ml_mtf *m, uint32_t cap)
{
    memset(m, 0, sizeof(*m));
    m->cap = cap < 1 ? 1 : cap > ML_MTF_MAX ? ML_MTF_MAX : cap;
}

/* Bit s set: slot s (< n) has the tag (its key is then compared). */
static inline uint32_t ml_mtf_match(const struct ml_mtf *m, uint8_t tag)
{
    const uint64_t ones = 0x0101010101010101ull, low7 = 0x7f7f7f7f7f7f7f7full,
                   gather = 0x0102040810204080ull;
    uint64_t x0 = m->tag[0] ^ (ones * tag), x1 = m->tag[1] ^ (ones * tag);
    /* The high bit of each byte: that byte of x is zero (the tags are equal), then 8 bits. */
    uint64_t z0 = ~(((x0 & low7) + low7) | x0 | low7), z1 = ~(((x1 & low7) + low7) | x1 | low7);
    uint32_t bits = (uint32_t)(((z0 >> 7) * gather) >> 56) | (uint32_t)(((z1 >> 7) * gather) >> 56)
                                                                 << 8;

    return bits & (uint32_t)((1ull << m->n) - 1);
}

/* The rank of key (0: most recent), or -1 when absent. */
static inline int ml_mtf_find(const struct ml_mtf *m, uint64_t key, uint8_t tag)
{
    const uint64_t nib = 0x1111111111111111ull, low3 = 0x7777777777777777ull, o = m->ord;
    uint32_t bits;

    /* Most hits are among the few most recent keys: try them in order first. */
    if (m->n >= 3) {
        if (m->key[o & 15] == key)
            return 0;
        if (m->key[(o >> 4) & 15] == key)
            return 1;
        if (m->key[(o >> 8) & 15] == key)
            return 2;
    }
    for (bits = ml_mtf_match(m, tag); bits; bits &= bits - 1) {
        unsigned s = (unsigned)__builtin_ctz(bits);
        if (m->key[s] == key) {
            /* The same for nibbles of ord: the lowest rank holding slot s. */
            uint64_t y = o ^ (nib * s);
            y = ~(((y & low3) + low3) | y | low3);
            return (int)((unsigned)__builtin_ctzll(y) >> 2);
        }
    }
    return -1;
}

/* Moves the key at rank r (< n) to the front. */
static inline void ml_mtf_touch(struct ml_mtf *m, int r)
{
    uint64_t o = m->ord, s = (o >> (4 * r)) & 15, below, above;

    if (!r)
        return;
    below = o & ((1ull << (4 * r)) - 1);
    above = r < ML_MTF_MAX - 1 ? o & ~((1ull << (4 * r + 4)) - 1) : 0;
    m->ord = above | below << 4 | s;
}

/*
 * Puts an absent key at the front; when the list was full, its least recent
 * key leaves: returns 1 with it in *old, else 0.
 */
static inline int ml_mtf_push(struct ml_mtf *m, uint64_t key, uint8_t tag, uint64_t *old)
{
    unsigned s;
    int full = m->n == m->cap;

    if (full) {
        s = (unsigned)(m->ord >> (4 * (m->cap - 1))) & 15;
        *old = m->key[s];
    } else {
        s = m->n++;
    }
    m->key[s] = key;
    m->tag[s / 8] = (m->tag[s / 8] & ~(0xffull << (8 * (s % 8)))) | (uint64_t)tag << (8 * (s % 8));
    m->ord = m->ord << 4 | s;
    return full;
}

static inline uint64_t ml_hash64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

/* Open-addressing map from a non-zero-able 64-bit key to a 64-bit value (keys stored + 1). */
struct ml_map {
    uint64_t *keys, *vals;
    uint64_t mask;
    uint64_t n;
};

int ml_map_init(struct ml_map *m, uint64_t cap);
void ml_map_free(struct ml_map *m);
int ml_map_grow(struct ml_map *m);

/* Slot of key (inserted with value 0 when absent); NULL when out of memory. */
static inline uint64_t *ml_map_slot(struct ml_map *m, uint64_t key)
{
    uint64_t k = key + 1, i;

    if (k == 0)
        k = 1; /* UINT64_MAX shares a slot with 0: callers never use it */
    for (;;) {
        i = ml_hash64(k) & m->mask;
        while (m->keys[i]) {
            if (m->keys[i] == k)
                return &m->vals[i];
            i = (i + 1) & m->mask;
        }
        if ((m->n + 1) * 4 <= (m->mask + 1) * 3)
            break;
        if (ml_map_grow(m))
            return NULL;
    }
    m->keys[i] = k;
    m->vals[i] = 0;
    m->n++;
    return &m->vals[i];
}

/* Value of key or NULL. */
static inline uint64_t *ml_map_find(const struct ml_map *m, uint64_t key)
{
    uint64_t k = key + 1 ? key + 1 : 1, i = ml_hash64(k) & m->mask;

    while (m->keys[i]) {
        if (m->keys[i] == k)
            return &m->vals[i];
        i = (i + 1) & m->mask;
    }
    return NULL;
}

#define ml_map_each(m, i)                                                                          \
    for (uint64_t i = 0; i <= (m)->mask; i++)                                                      \
        if ((m)->keys[i])
#define ml_map_key(m, i) ((m)->keys[i] - 1)

/* Removes key if present (backward-shift deletion). */
void ml_map_del(struct ml_map *m, uint64_t key);

/* ---- Output files: created beside the target, mode 0600, renamed into place at the end ---- */

struct ml_outfile {
    char *path, *tmp;
    int fd;
    FILE *f;
};

/* Creates path's temporary file; -EEXIST when path exists and !force (err says so). */
int ml_outfile_open(struct ml_outfile *o, const char *path, int force, char *err, size_t errlen);
/* Flushes, closes and renames into place (never over an existing file unless force). */
int ml_outfile_commit(struct ml_outfile *o, int force, char *err, size_t errlen);
void ml_outfile_abort(struct ml_outfile *o);

/* ---- HTML page pieces (html.c): tables and SVG charts, self-contained ---- */

/* Writes s with <, >, & and " escaped. */
void ml_html_esc(FILE *out, const char *s);
int ml_tab_html(FILE *out, const struct ml_tab *t);
/* The same with at most max rows (a last row says how many were left out). */
int ml_tab_html_rows(FILE *out, const struct ml_tab *t, size_t max);
/* Every analysis's section of the page, in order (driver.c). */
int ml_an_html_sections(struct ml_an_run *run, FILE *out);
/* A bar chart of n values with a label each. */
int ml_svg_bars(FILE *out, const char *title, const char *xlabel, const char *ylabel,
                const char *const *labels, const double *v, size_t n);
/* A time range to shade behind a series chart (x in the chart's units), per thread. */
struct ml_band {
    double x0, x1;
    const char *label;
    uint32_t thread;
};
/* Line chart of ns series over x[n] (NAN: no point), with bands behind. */
int ml_svg_series(FILE *out, const char *title, const char *xlabel, const char *ylabel,
                  const double *x, const double *const *ys, const char *const *names, int ns,
                  size_t n, const struct ml_band *bands, size_t nbands);
/* Heat map of rows x cols cells (row labels; columns are time bins of col_ns each). */
int ml_svg_heat(FILE *out, const char *title, const char *const *rowlabels, size_t rows,
                size_t cols, const double *cells, const char *xlabel, double col_ns);

/* ---- Time axis: bins of a fixed number of ns over a trace ---- */

/* An interval of 1, 2 or 5 x 10^k ns giving about `want` bins over span_ns (at least 1 us). */
uint64_t ml_auto_interval(double span_ns, unsigned want);
/* "1us", "20ms", ... */
const char *ml_fmt_interval(char *buf, size_t n, uint64_t ns);

#endif
