/*
 * Unit tests of the 'sharing' module (src/backend/modules/sharing.c): random
 * loads, stores and atomics of four threads over a few cache lines (aligned
 * and not, across lines and a 64 KiB page, up to 100 bytes) must give exactly
 * the rows of a brute-force model that keeps the last store of every byte and
 * the owner of every line, with one worker and with the address range split
 * over two workers and merged.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend/backend.h"
#include "format/events.h"
#include "format/qtables.h"
#include "format/queue.h"

#define NSITES  7
#define NTHR    4
#define BASE    0x7f00000ff000ull /* the region crosses a 64 KiB page at BASE + 0x1000 */
#define SPAN    0x8000u
#define MAXROWS (1u << 18) /* a power of two: the model's rows are a hash table */

/* ---- the brute-force model ---- */

struct row {
    uint64_t line;
    uint32_t src, dst, ta, tb, kind;
    uint64_t count;
};

static struct {
    uint32_t site[SPAN], thr[SPAN];             /* + 1; 0: never stored */
    uint32_t lthr[SPAN / 64], lsite[SPAN / 64]; /* line owner + 1, its last site */
    uint64_t lmask[SPAN / 64];                  /* bytes it stored since it took it */
    struct row rows[MAXROWS];                   /* count 0: free */
    uint32_t nrows;
} ref;

static void ref_pair(uint64_t line, uint32_t src, uint32_t dst, uint32_t ta, uint32_t tb,
                     uint32_t kind)
{
    uint64_t h = (line / 64 * 31 + src) * 31 + dst;
    uint32_t i = (uint32_t)(((h * 31 + ta) * 31 + tb) * 2 + kind) & (MAXROWS - 1);

    for (;; i = (i + 1) & (MAXROWS - 1)) {
        struct row *r = &ref.rows[i];
        if (!r->count) {
            assert_true(++ref.nrows < MAXROWS / 2);
            *r = (struct row){line, src, dst, ta, tb, kind, 1};
            return;
        }
        if (r->line == line && r->src == src && r->dst == dst && r->ta == ta && r->tb == tb &&
            r->kind == kind) {
            r->count++;
            return;
        }
    }
}

/* The module's rules, byte by byte. */
static void ref_access(unsigned kind, uint64_t a, uint64_t len, uint32_t site, uint32_t thread)
{
    uint32_t me = thread + 1, last_src = 0, last_thr = 0;

    if (kind != ML_EV_STORE)
        for (uint64_t p = a; p < a + len; p++) {
            uint32_t i = (uint32_t)(p - BASE);
            if (ref.thr[i] && ref.thr[i] != me &&
                (ref.site[i] != last_src || ref.thr[i] != last_thr)) {
                last_src = ref.site[i];
                last_thr = ref.thr[i];
                ref_pair(p & ~63ull, ref.site[i] - 1, site, ref.thr[i] - 1, thread, 1);
            }
        }
    if (kind == ML_EV_LOAD)
        return;
    for (uint64_t p = a; p < a + len; p++) {
        uint32_t i = (uint32_t)(p - BASE), l = i / 64;
        uint64_t bit = 1ull << (p & 63);
        if (p == a || (p & 63) == 0) { /* first byte of the access in this line */
            uint64_t m = 0;
            for (uint64_t q = p; q < a + len && (q & ~63ull) == (p & ~63ull); q++)
                m |= 1ull << (q & 63);
            if (ref.lthr[l] && ref.lthr[l] != me) {
                ref_pair(p & ~63ull, ref.lsite[l], site, ref.lthr[l] - 1, thread,
                         (ref.lmask[l] & m) != 0);
                ref.lmask[l] = 0;
            }
            ref.lthr[l] = me;
            ref.lsite[l] = site;
        }
        ref.lmask[l] |= bit;
        ref.site[i] = site + 1;
        ref.thr[i] = me;
    }
}

/* ---- the module ---- */

static const struct ml_module *mod(void)
{
    const struct ml_module *m = ml_module_find("sharing");

    assert_non_null(m);
    return m;
}

#define ROWS_HEADER "line_addr"
#include "bmodule.h"

/*
 * n random accesses, mostly a thread working on "its" lines (the fast path)
 * with some touching others' lines; workers 1 or 2 (split by address as the
 * driver does, then merged). The first solo accesses are thread 1's alone (a
 * serial phase, whose loads the module skips until a second thread stores),
 * over all the lines.
 */
static void check_random(uint32_t workers, uint32_t n, uint32_t lines, uint32_t solo)
{
    static const unsigned sizes[] = {1, 2, 4, 8, 8, 8, 16, 64, 100};
    struct ml_bworker w[2] = {{.index = 0, .n = workers}, {.index = 1, .n = workers}};
    void *st[2] = {NULL, NULL};
    struct ml_bblob *blob = sites_blob();
    char *text = NULL, **got, want[160];
    uint32_t ngot, prev = 0;

    memset(&ref, 0, sizeof(ref));
    for (uint32_t i = 0; i < workers; i++)
        assert_non_null(st[i] = mod()->init(&w[i]));
    for (uint32_t i = 0; i < n; i++) {
        /* runs of one thread's events, as in a chunk */
        uint32_t thread = i < solo ? 1 : next() % 4 ? prev : (uint32_t)(next() % NTHR);
        uint32_t site = (uint32_t)(next() % NSITES);
        unsigned kind = (unsigned)(next() % 8), size = sizes[next() % 9];
        /* each thread mostly uses its own quarter of the lines, 1 in 8 anywhere */
        uint64_t line = next() % 8 && i >= solo ? thread * (lines / NTHR) + next() % (lines / NTHR)
                                                : next() % lines;
        uint64_t a = BASE + 0x1000 - (lines < 64 ? lines / 2 : 32) * 64 + line * 64, rec[4];
        kind = kind < 4 ? ML_EV_LOAD : kind < 7 ? ML_EV_STORE : ML_EV_RMW;
        if (next() % 4 == 0)
            a += next() % 64; /* unaligned, maybe across lines */
        else
            a += (next() % 8) * 8 % (64 - (size > 64 ? 0 : size) + 1);
        if (a + size > BASE + SPAN)
            a = BASE + SPAN - size;
        /* the driver gives an access to the worker of its first byte: keep them in a block */
        if (workers > 1 && ((a ^ (a + size - 1)) & ~4095ull))
            a = (a + size - 1) & ~4095ull;
        rec[0] = ML_Q_W0(kind, size < 64 ? 0 : 1, size < 64 ? size : 0, site);
        rec[1] = a;
        rec[2] = size;
        rec[3] = 0;
        ref_access(kind, a, size, site, thread);
        prev = thread;
        feed(st, w, workers, thread, rec);
    }
    got = report_rows(st, w, workers, blob, &text, &ngot);
    {
        char **exp = calloc(MAXROWS, sizeof(*exp));
        uint32_t ne = 0;
        for (uint32_t i = 0; i < MAXROWS; i++) {
            const struct row *r = &ref.rows[i];
            if (!r->count)
                continue;
            snprintf(want, sizeof(want), "0x%llx,t.c:%u,t.c:%u,%u-%u,%s,%llu",
                     (unsigned long long)r->line, 100 + r->src, 100 + r->dst, r->ta, r->tb,
                     r->kind ? "true" : "false", (unsigned long long)r->count);
            exp[ne++] = strdup(want);
        }
        assert_true(ref.nrows > 10); /* the case shares something */
        same_rows(exp, ne, got, ngot);
    }
    free(text);
    free(blob);
}

static void test_one_worker(void **state)
{
    (void)state;
    check_random(1, 200000, 16, 0);
}

static void test_many_lines(void **state)
{
    (void)state;
    check_random(1, 100000, 96, 0);
}

static void test_two_workers(void **state)
{
    (void)state;
    check_random(2, 100000, 400, 0); /* 7 blocks of 4 KiB */
}

static void test_serial_phase(void **state)
{
    (void)state;
    check_random(1, 100000, 96, 30000);
    check_random(2, 100000, 400, 30000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_worker),
        cmocka_unit_test(test_many_lines),
        cmocka_unit_test(test_two_workers),
        cmocka_unit_test(test_serial_phase),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
