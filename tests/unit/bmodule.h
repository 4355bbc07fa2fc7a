/*
 * Shared by the unit tests of backend modules (test-sharing.c, test-dep.c):
 * feeding records to a module as the driver hands chunks, a site table blob,
 * the CSV's rows sorted, a random generator. The includer defines mod() (the
 * module), NSITES (sites in the table: t.c, line 100 + i, function f),
 * MAXROWS (rows at most) and ROWS_HEADER (the CSV header's first column).
 */
#ifndef ML_TESTS_UNIT_BMODULE_H
#define ML_TESTS_UNIT_BMODULE_H

/*
 * Appends one record of thread to the pending run of that thread; a run is
 * handed to the module (as the driver hands a chunk, to every worker) when
 * the thread changes or at the end (rec NULL).
 */
static void feed(void **st, struct ml_bworker *w, uint32_t workers, uint32_t thread,
                 const uint64_t *rec)
{
    static uint64_t run[4 * 4096];
    static uint32_t len, cur;

    if (len && (!rec || thread != cur || len + 32 > sizeof(run))) {
        for (uint32_t i = 0; i < workers; i++) {
            uint64_t n = 0;
            assert_int_equal(mod()->chunk(st[i], &w[i], cur, (const uint8_t *)run, len, &n), len);
            assert_true(n >= 1);
        }
        len = 0;
    }
    if (!rec)
        return;
    cur = thread;
    memcpy((uint8_t *)run + len, rec, 16 * (1 + ML_Q_EXTRA(rec[0])));
    len += 16 * (1 + ML_Q_EXTRA(rec[0]));
}

static void put32(uint8_t **p, uint32_t v)
{
    memcpy(*p, &v, 4);
    *p += 4;
}

/* A site table: site i is t.c, line 100 + i. */
static struct ml_bblob *sites_blob(void)
{
    struct ml_bblob *b = calloc(1, sizeof(*b) + 1024);
    uint8_t *p;

    assert_non_null(b);
    p = b->data;
    put32(&p, ML_QT_MAGIC);
    put32(&p, ML_QT_VERSION);
    put32(&p, 0);
    put32(&p, NSITES);
    put32(&p, 0);
    put32(&p, 0);
    put32(&p, 0);
    for (uint32_t i = 0; i < NSITES; i++) {
        put32(&p, ML_EV_STORE);
        put32(&p, 8);
        put32(&p, ML_EV_NOID);
        put32(&p, 100 + i);
        put32(&p, 1);
        put32(&p, 1);
        put32(&p, 3);
        memcpy(p, "f", 1);
        memcpy(p + 1, "t.c", 3);
        p += 4;
    }
    b->tag = ML_QT_TAG;
    b->len = (uint64_t)(p - b->data);
    return b;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The CSV's rows (header dropped), sorted; *n of them. */
static char **sorted_rows(char *text, uint32_t *n)
{
    char **v = calloc(MAXROWS, sizeof(*v)), *save, *line;

    *n = 0;
    for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
        if (strncmp(line, ROWS_HEADER, sizeof(ROWS_HEADER) - 1)) {
            assert_true(*n < MAXROWS);
            v[(*n)++] = line;
        }
    qsort(v, *n, sizeof(*v), cmp_str);
    return v;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Ends the run: worker 1 merged into 0, the report written, the state freed; the CSV's rows. */
static char **report_rows(void **st, struct ml_bworker *w, uint32_t workers,
                          const struct ml_bblob *blob, char **text, uint32_t *n)
{
    struct ml_brun run = {0};
    struct ml_bout o = {0};
    size_t size = 0;

    feed(st, w, workers, 0, NULL);
    if (workers == 2)
        assert_int_equal(mod()->merge(st[0], st[1]), 0);
    o.csv = open_memstream(text, &size);
    o.json = fopen("/dev/null", "w");
    o.run = &run;
    o.blobs = blob;
    assert_int_equal(mod()->report(st[0], &o), 0);
    fclose(o.csv);
    fclose(o.json);
    mod()->fini(st[0]);
    return sorted_rows(*text, n);
}

/* The rows got (sorted) must be the ne rows exp, in any order; frees both lists. */
static void same_rows(char **exp, uint32_t ne, char **got, uint32_t ngot)
{
    qsort(exp, ne, sizeof(*exp), cmp_str);
    for (uint32_t i = 0; i < ne && i < ngot; i++)
        assert_string_equal(got[i], exp[i]);
    assert_int_equal(ngot, ne);
    for (uint32_t i = 0; i < ne; i++)
        free(exp[i]);
    free(exp);
    free(got);
}

#endif
