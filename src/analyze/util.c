/* Helpers shared by the analyses: rows of counters, output tables, maps, output files, time bins.
 */
#include "analyze/util.h"
#include "format/csv.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- rows ---- */

int ml_rows_init(struct ml_rows *r, uint32_t width)
{
    memset(r, 0, sizeof(*r));
    r->width = width;
    return 0;
}

void ml_rows_free(struct ml_rows *r)
{
    for (uint32_t b = 0; b < r->cap / ML_ROWS_BLOCK; b++)
        free(r->blocks[b]);
    free(r->blocks);
    free(r->thread);
    free(r->key);
    for (uint32_t i = 0; i < r->nthr; i++)
        free(r->map[i]);
    free(r->map);
    free(r->mapcap);
    memset(r, 0, sizeof(*r));
}

uint64_t *ml_rows_add(struct ml_rows *r, uint32_t g, uint32_t k)
{
    if (g >= r->nthr) {
        uint32_t n = g + 1;
        uint32_t **m = realloc(r->map, (size_t)n * sizeof(*m));
        uint32_t *c;
        if (!m)
            return NULL;
        r->map = m;
        c = realloc(r->mapcap, (size_t)n * sizeof(*c));
        if (!c)
            return NULL;
        r->mapcap = c;
        memset(m + r->nthr, 0, (size_t)(n - r->nthr) * sizeof(*m));
        memset(c + r->nthr, 0, (size_t)(n - r->nthr) * sizeof(*c));
        r->nthr = n;
    }
    if (k >= r->mapcap[g]) {
        uint32_t n = r->mapcap[g] ? r->mapcap[g] : 16;
        uint32_t *m;
        while (n <= k)
            n *= 2;
        m = realloc(r->map[g], (size_t)n * sizeof(*m));
        if (!m)
            return NULL;
        memset(m + r->mapcap[g], 0, (size_t)(n - r->mapcap[g]) * sizeof(*m));
        r->map[g] = m;
        r->mapcap[g] = n;
    }
    if (r->map[g][k])
        return ml_rows_row(r, r->map[g][k] - 1);
    if (r->n == r->cap) {
        uint32_t nb = r->cap / ML_ROWS_BLOCK + 1, cap = nb * ML_ROWS_BLOCK;
        uint64_t **b = realloc(r->blocks, (size_t)nb * sizeof(*b));
        uint32_t *t, *kk;
        if (!b)
            return NULL;
        r->blocks = b;
        t = realloc(r->thread, (size_t)cap * sizeof(*t));
        if (!t)
            return NULL;
        r->thread = t;
        kk = realloc(r->key, (size_t)cap * sizeof(*kk));
        if (!kk)
            return NULL;
        r->key = kk;
        b[nb - 1] = calloc((size_t)ML_ROWS_BLOCK * (r->width ? r->width : 1), sizeof(uint64_t));
        if (!b[nb - 1])
            return NULL;
        r->cap = cap;
    }
    r->thread[r->n] = g;
    r->key[r->n] = k;
    r->map[g][k] = ++r->n;
    return ml_rows_row(r, r->n - 1);
}

static void add_to(uint64_t *d, const uint64_t *s, uint32_t w)
{
    for (uint32_t i = 0; i < w; i++)
        d[i] += s[i];
}

int ml_rows_visit(const struct ml_rows *r, const struct ml_an_run *run, ml_rows_fn fn, void *arg)
{
    const struct ml_an_opts *o = ml_an_options(run);
    uint32_t nkeys = ml_an_nkeys(run), w = r->width;
    int ntr = ml_an_ntraces(run), rc = 0;
    uint64_t *tot = calloc((size_t)(nkeys + 1) * w + 1, sizeof(*tot));
    uint64_t *thr = calloc((size_t)w + 1, sizeof(*thr));
    uint8_t *used = calloc(nkeys + 1, 1);

    if (!tot || !thr || !used) {
        rc = -ENOMEM;
        goto out;
    }
    for (int tr = 0; tr < ntr && !rc; tr++) {
        int any = 0;
        memset(tot, 0, (size_t)(nkeys + 1) * w * sizeof(*tot));
        memset(used, 0, nkeys + 1);
        for (uint32_t g = 0; g < r->nthr && !rc; g++) {
            int have = 0;
            if (ml_an_thread_trace(run, g) != tr)
                continue;
            memset(thr, 0, (size_t)w * sizeof(*thr));
            for (uint32_t k = 0; k < r->mapcap[g] && !rc; k++) {
                const uint64_t *c;
                if (!r->map[g][k])
                    continue;
                c = ml_rows_row(r, r->map[g][k] - 1);
                have = any = 1;
                used[k] = 1;
                add_to(thr, c, w);
                add_to(tot + (size_t)k * w, c, w);
                if (o->by != ML_BY_THREAD)
                    rc = fn(arg, tr, g, k, c);
            }
            if (have && !rc)
                rc = fn(arg, tr, g, ML_ALL, thr);
        }
        if (!any)
            continue;
        memset(thr, 0, (size_t)w * sizeof(*thr));
        for (uint32_t k = 0; k < nkeys && !rc; k++) {
            if (!used[k])
                continue;
            add_to(thr, tot + (size_t)k * w, w);
            if (o->by != ML_BY_THREAD)
                rc = fn(arg, tr, ML_ALL, k, tot + (size_t)k * w);
        }
        if (!rc)
            rc = fn(arg, tr, ML_ALL, ML_ALL, thr);
    }
out:
    free(tot);
    free(thr);
    free(used);
    return rc;
}

/* ---- output tables ---- */

struct cell {
    int null;
    union {
        char *s;
        uint64_t u;
        int64_t i;
        double f;
    };
};

struct ml_tab {
    char *name, *title;
    int ncols;
    char **cols;
    char *types;
    struct cell *cells;
    size_t ncells, cap;
    int nomem;
};

struct ml_tab *ml_tab_new(const char *name, const char *title, const char *cols)
{
    struct ml_tab *t = calloc(1, sizeof(*t));
    char *spec, *tok, *save = NULL;

    if (!t)
        return NULL;
    t->name = strdup(name);
    t->title = strdup(title ? title : "");
    spec = strdup(cols);
    t->cols = calloc(strlen(cols) / 2 + 2, sizeof(*t->cols));
    t->types = calloc(strlen(cols) / 2 + 2, 1);
    if (!t->name || !t->title || !spec || !t->cols || !t->types) {
        free(spec);
        ml_tab_free(t);
        return NULL;
    }
    for (tok = strtok_r(spec, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
        char *colon = strchr(tok, ':');
        t->types[t->ncols] = colon ? colon[1] : 's';
        if (colon)
            *colon = 0;
        t->cols[t->ncols++] = strdup(tok);
    }
    free(spec);
    return t;
}

void ml_tab_free(struct ml_tab *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->ncells; i++)
        if (t->types[i % t->ncols] == 's' && !t->cells[i].null)
            free(t->cells[i].s);
    for (int i = 0; i < t->ncols; i++)
        free(t->cols[i]);
    free(t->cols);
    free(t->types);
    free(t->cells);
    free(t->name);
    free(t->title);
    free(t);
}

static struct cell *next_cell(struct ml_tab *t)
{
    if (!t || t->nomem)
        return NULL;
    if (t->ncells == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 256;
        struct cell *c = realloc(t->cells, cap * sizeof(*c));
        if (!c) {
            t->nomem = 1;
            return NULL;
        }
        t->cells = c;
        t->cap = cap;
    }
    memset(&t->cells[t->ncells], 0, sizeof(struct cell));
    return &t->cells[t->ncells++];
}

int ml_tab_str(struct ml_tab *t, const char *s)
{
    struct cell *c = next_cell(t);

    if (!c)
        return -ENOMEM;
    if (!(c->s = strdup(s ? s : ""))) {
        c->null = 1;
        t->nomem = 1;
        return -ENOMEM;
    }
    return 0;
}

int ml_tab_u64(struct ml_tab *t, uint64_t v)
{
    struct cell *c = next_cell(t);

    if (!c)
        return -ENOMEM;
    c->u = v;
    return 0;
}

int ml_tab_i64(struct ml_tab *t, int64_t v)
{
    struct cell *c = next_cell(t);

    if (!c)
        return -ENOMEM;
    c->i = v;
    return 0;
}

int ml_tab_f64(struct ml_tab *t, double v)
{
    struct cell *c = next_cell(t);

    if (!c)
        return -ENOMEM;
    c->f = v;
    c->null = !isfinite(v);
    return 0;
}

int ml_tab_null(struct ml_tab *t)
{
    struct cell *c = next_cell(t);

    if (!c)
        return -ENOMEM;
    c->null = 1;
    return 0;
}

size_t ml_tab_rows(const struct ml_tab *t)
{
    return t->ncells / (size_t)t->ncols;
}

int ml_tab_who(struct ml_tab *t, const struct ml_an_run *run, int trace, uint32_t g, uint32_t key)
{
    char buf[32];
    int rc = ml_tab_u64(t, ml_an_trace_pid(run, trace));

    if (g == ML_ALL) {
        rc |= ml_tab_str(t, "all");
        rc |= ml_tab_null(t);
    } else {
        snprintf(buf, sizeof(buf), "%u", ml_an_thread_index(run, g));
        rc |= ml_tab_str(t, buf);
        rc |= ml_tab_u64(t, ml_an_thread_tid(run, g));
    }
    rc |= ml_tab_str(t, key == ML_ALL ? "all" : ml_an_key_name(run, key));
    return rc ? -ENOMEM : 0;
}

static int fmt_cell(char *buf, size_t n, char type, const struct cell *c)
{
    if (c->null)
        return snprintf(buf, n, "-");
    switch (type) {
    case 'u':
        return snprintf(buf, n, "%llu", (unsigned long long)c->u);
    case 'i':
        return snprintf(buf, n, "%lld", (long long)c->i);
    case 'f':
        return snprintf(buf, n, "%.6g", c->f);
    case 'p':
        return snprintf(buf, n, "%.4f", c->f);
    default:
        return snprintf(buf, n, "%s", c->s);
    }
}

static void print_table(FILE *out, const struct ml_tab *t)
{
    size_t rows = ml_tab_rows(t);
    int *w = calloc((size_t)t->ncols, sizeof(*w));
    char buf[512];

    if (!w)
        return;
    if (*t->title)
        fprintf(out, "%s\n", t->title);
    for (int c = 0; c < t->ncols; c++)
        w[c] = (int)strlen(t->cols[c]);
    for (size_t i = 0; i < rows * (size_t)t->ncols; i++) {
        int len = fmt_cell(buf, sizeof(buf), t->types[i % t->ncols], &t->cells[i]);
        if (len > (int)sizeof(buf) - 1)
            len = (int)sizeof(buf) - 1;
        if (len > w[i % t->ncols])
            w[i % t->ncols] = len;
    }
    for (int c = 0; c < t->ncols; c++)
        fprintf(out, "%s%*s%s", c ? "  " : "", t->types[c] == 's' ? -w[c] : w[c], t->cols[c],
                c + 1 == t->ncols ? "\n" : "");
    for (size_t r = 0; r < rows; r++)
        for (int c = 0; c < t->ncols; c++) {
            fmt_cell(buf, sizeof(buf), t->types[c], &t->cells[r * (size_t)t->ncols + (size_t)c]);
            if (t->types[c] == 's' && c + 1 == t->ncols)
                fprintf(out, "%s%s\n", c ? "  " : "", buf);
            else
                fprintf(out, "%s%*s%s", c ? "  " : "", t->types[c] == 's' ? -w[c] : w[c], buf,
                        c + 1 == t->ncols ? "\n" : "");
        }
    free(w);
}

static void print_csv(FILE *out, const struct ml_tab *t)
{
    size_t rows = ml_tab_rows(t);
    char buf[512];

    for (int c = 0; c < t->ncols; c++)
        fprintf(out, "%s%s", c ? "," : "", t->cols[c]);
    fputc('\n', out);
    for (size_t r = 0; r < rows; r++)
        for (int c = 0; c < t->ncols; c++) {
            const struct cell *x = &t->cells[r * (size_t)t->ncols + (size_t)c];
            if (c)
                fputc(',', out);
            if (x->null)
                ;
            else if (t->types[c] == 's')
                ml_csv_str(out, x->s);
            else {
                fmt_cell(buf, sizeof(buf), t->types[c], x);
                fputs(buf, out);
            }
            if (c + 1 == t->ncols)
                fputc('\n', out);
        }
}

static void print_json(FILE *out, const struct ml_tab *t)
{
    size_t rows = ml_tab_rows(t);
    char buf[512];

    ml_json_str(out, t->name);
    fputs(": [", out);
    for (size_t r = 0; r < rows; r++) {
        fprintf(out, "%s\n  {", r ? "," : "");
        for (int c = 0; c < t->ncols; c++) {
            const struct cell *x = &t->cells[r * (size_t)t->ncols + (size_t)c];
            if (c)
                fputs(", ", out);
            ml_json_str(out, t->cols[c]);
            fputs(": ", out);
            if (x->null)
                fputs("null", out);
            else if (t->types[c] == 's')
                ml_json_str(out, x->s);
            else {
                fmt_cell(buf, sizeof(buf), t->types[c], x);
                fputs(buf, out);
            }
        }
        fputc('}', out);
    }
    fputs(rows ? "\n]" : "]", out);
}

int ml_tab_print(FILE *out, enum ml_an_format fmt, struct ml_tab **tabs, int ntabs,
                 const char *extra)
{
    int rc = 0;

    for (int i = 0; i < ntabs; i++)
        if (!tabs[i] || tabs[i]->nomem)
            rc = -ENOMEM;
    if (!rc && fmt == ML_AN_CSV && ntabs) {
        print_csv(out, tabs[0]);
    } else if (!rc && fmt == ML_AN_JSON) {
        fputc('{', out);
        for (int i = 0; i < ntabs; i++) {
            fputs(i ? ",\n" : "\n", out);
            print_json(out, tabs[i]);
        }
        if (extra && *extra)
            fprintf(out, "%s\n%s", ntabs ? "," : "", extra);
        fputs("\n}\n", out);
    } else if (!rc) {
        for (int i = 0; i < ntabs; i++) {
            if (i)
                fputc('\n', out);
            print_table(out, tabs[i]);
        }
    }
    for (int i = 0; i < ntabs; i++)
        ml_tab_free(tabs[i]);
    if (rc)
        return rc;
    return ferror(out) ? -EIO : 0;
}

void ml_html_esc(FILE *out, const char *s)
{
    for (; *s; s++)
        if (*s == '<')
            fputs("&lt;", out);
        else if (*s == '>')
            fputs("&gt;", out);
        else if (*s == '&')
            fputs("&amp;", out);
        else if (*s == '"')
            fputs("&quot;", out);
        else
            fputc(*s, out);
}

int ml_tab_html_rows(FILE *out, const struct ml_tab *t, size_t max)
{
    size_t rows = ml_tab_rows(t);
    char buf[512];

    fputs("<table>", out);
    if (*t->title) {
        fputs("<caption>", out);
        ml_html_esc(out, t->title);
        fputs("</caption>", out);
    }
    fputs("\n<tr>", out);
    for (int c = 0; c < t->ncols; c++) {
        fputs("<th>", out);
        ml_html_esc(out, t->cols[c]);
        fputs("</th>", out);
    }
    fputs("</tr>\n", out);
    for (size_t r = 0; r < rows && r < max; r++) {
        fputs("<tr>", out);
        for (int c = 0; c < t->ncols; c++) {
            fmt_cell(buf, sizeof(buf), t->types[c], &t->cells[r * (size_t)t->ncols + (size_t)c]);
            fputs(t->types[c] == 's' ? "<td>" : "<td class=\"n\">", out);
            ml_html_esc(out, buf);
            fputs("</td>", out);
        }
        fputs("</tr>\n", out);
    }
    if (rows > max)
        fprintf(out,
                "<tr><td colspan=\"%d\">%zu more rows (--csv or --json lists them)</td></tr>\n",
                t->ncols, rows - max);
    fputs("</table>\n", out);
    return ferror(out) ? -EIO : 0;
}

const char *ml_fmt_bytes(char *buf, size_t n, double b)
{
    static const char *const u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;

    while (b >= 1024 && i < 4) {
        b /= 1024;
        i++;
    }
    snprintf(buf, n, i ? "%.1f %s" : "%.0f %s", b, u[i]);
    return buf;
}

/* ---- maps ---- */

int ml_map_init(struct ml_map *m, uint64_t cap)
{
    uint64_t n = 16;

    while (n < cap * 2)
        n *= 2;
    m->keys = calloc(n, sizeof(*m->keys));
    m->vals = malloc(n * sizeof(*m->vals));
    m->mask = n - 1;
    m->n = 0;
    if (!m->keys || !m->vals) {
        ml_map_free(m);
        return -ENOMEM;
    }
    return 0;
}

void ml_map_free(struct ml_map *m)
{
    free(m->keys);
    free(m->vals);
    m->keys = m->vals = NULL;
    m->mask = 0;
    m->n = 0;
}

int ml_map_grow(struct ml_map *m)
{
    struct ml_map g;

    if (ml_map_init(&g, m->mask + 1))
        return -ENOMEM;
    for (uint64_t i = 0; i <= m->mask; i++) {
        uint64_t j;
        if (!m->keys[i])
            continue;
        j = ml_hash64(m->keys[i]) & g.mask;
        while (g.keys[j])
            j = (j + 1) & g.mask;
        g.keys[j] = m->keys[i];
        g.vals[j] = m->vals[i];
    }
    g.n = m->n;
    ml_map_free(m);
    *m = g;
    return 0;
}

void ml_map_del(struct ml_map *m, uint64_t key)
{
    uint64_t k = key + 1 ? key + 1 : 1, i = ml_hash64(k) & m->mask, j;

    while (m->keys[i] && m->keys[i] != k)
        i = (i + 1) & m->mask;
    if (!m->keys[i])
        return;
    /* Shift back the entries of the cluster that would no longer be found. */
    for (j = i;;) {
        uint64_t h;
        m->keys[i] = 0;
        for (;;) {
            j = (j + 1) & m->mask;
            if (!m->keys[j]) {
                m->n--;
                return;
            }
            h = ml_hash64(m->keys[j]) & m->mask;
            /* Entry j may move to i when its home h is not cyclically in (i, j]. */
            if (i <= j ? (h <= i || h > j) : (h <= i && h > j))
                break;
        }
        m->keys[i] = m->keys[j];
        m->vals[i] = m->vals[j];
        i = j;
    }
}

/* ---- output files ---- */

static int ofail(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int ofail(char *err, size_t errlen, int code, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return code;
}

int ml_outfile_open(struct ml_outfile *o, const char *path, int force, char *err, size_t errlen)
{
    memset(o, 0, sizeof(*o));
    o->fd = -1;
    if (!force && access(path, F_OK) == 0)
        return ofail(err, errlen, -EEXIST,
                     "'%s' exists; remove it, choose another name or pass --force", path);
    o->path = strdup(path);
    if (!o->path || asprintf(&o->tmp, "%s.XXXXXX.tmp", path) < 0) {
        o->tmp = NULL;
        ml_outfile_abort(o);
        return ofail(err, errlen, -ENOMEM, "out of memory");
    }
    /* mkostemps: O_CREAT | O_EXCL (no link followed), mode 0600. */
    o->fd = mkostemps(o->tmp, 4, O_CLOEXEC);
    if (o->fd < 0) {
        int e = errno;
        free(o->tmp);
        o->tmp = NULL;
        ml_outfile_abort(o);
        return ofail(err, errlen, -e, "cannot create '%s': %s", path, strerror(e));
    }
    o->f = fdopen(o->fd, "w");
    if (!o->f) {
        int e = errno;
        ml_outfile_abort(o);
        return ofail(err, errlen, -e, "cannot create '%s': %s", path, strerror(e));
    }
    return 0;
}

int ml_outfile_commit(struct ml_outfile *o, int force, char *err, size_t errlen)
{
    int rc = 0, e, keep = 0;

    if (o->f && (fflush(o->f) || ferror(o->f))) {
        e = errno ? errno : EIO;
        rc = ofail(err, errlen, -e, "cannot write '%s': %s", o->path, strerror(e));
    }
    if (!rc && force && rename(o->tmp, o->path)) {
        e = errno;
        rc = ofail(err, errlen, -e, "cannot write '%s': %s", o->path, strerror(e));
    } else if (!rc && !force && renameat2(AT_FDCWD, o->tmp, AT_FDCWD, o->path, RENAME_NOREPLACE)) {
        e = errno;
        /* File systems without RENAME_NOREPLACE: a new link fails on an existing name too. */
        if ((e == EINVAL || e == ENOSYS) && !link(o->tmp, o->path))
            unlink(o->tmp);
        else if (e == EEXIST)
            rc = ofail(err, errlen, -e, "'%s' appeared while it was written; the output is in '%s'",
                       o->path, o->tmp),
            keep = 1;
        else
            rc = ofail(err, errlen, -e, "cannot write '%s': %s", o->path, strerror(e));
    }
    if (o->f)
        fclose(o->f);
    o->f = NULL;
    o->fd = -1;
    if (!rc || keep) { /* renamed, or kept for the user */
        free(o->tmp);
        o->tmp = NULL;
    }
    ml_outfile_abort(o);
    return rc;
}

void ml_outfile_abort(struct ml_outfile *o)
{
    if (o->f)
        fclose(o->f);
    else if (o->fd >= 0)
        close(o->fd);
    if (o->tmp)
        unlink(o->tmp);
    free(o->tmp);
    free(o->path);
    memset(o, 0, sizeof(*o));
    o->fd = -1;
}

/* ---- time bins ---- */

uint64_t ml_auto_interval(double span_ns, unsigned want)
{
    static const uint64_t steps[] = {1, 2, 5};
    uint64_t best = 1000;

    for (uint64_t p = 1000; p <= 1000000000000ull; p *= 10)
        for (int i = 0; i < 3; i++) {
            uint64_t v = p * steps[i];
            if (span_ns / (double)v >= want)
                best = v;
        }
    return best;
}

const char *ml_fmt_interval(char *buf, size_t n, uint64_t ns)
{
    if (ns % 1000000000ull == 0)
        snprintf(buf, n, "%llus", (unsigned long long)(ns / 1000000000ull));
    else if (ns % 1000000ull == 0)
        snprintf(buf, n, "%llums", (unsigned long long)(ns / 1000000ull));
    else if (ns % 1000ull == 0)
        snprintf(buf, n, "%lluus", (unsigned long long)(ns / 1000ull));
    else
        snprintf(buf, n, "%lluns", (unsigned long long)ns);
    return buf;
}
