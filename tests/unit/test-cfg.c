/* Unit tests for the CFG analyses: hand-derived answers on small IR, brute force on real code. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <llvm-c/Core.h>
#include <llvm-c/IRReader.h>

#include "instrument/ir/cfg.h"

#define NONE     -1
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

struct fixture {
    LLVMContextRef ctx;
    LLVMModuleRef mod;
    struct ml_cfg cfg;
};

static void parse_buffer(struct fixture *f, LLVMMemoryBufferRef buf)
{
    char *msg = NULL;

    f->ctx = LLVMContextCreate();
    /* LLVMParseIRInContext takes ownership of buf, even on failure. */
    if (LLVMParseIRInContext(f->ctx, buf, &f->mod, &msg)) {
        fail_msg("cannot parse ir: %s", msg ? msg : "?");
    }
}

/* Parses ir and builds the CFG of @f. */
static void load(struct fixture *f, const char *ir)
{
    LLVMValueRef fn;

    memset(f, 0, sizeof(*f));
    parse_buffer(f, LLVMCreateMemoryBufferWithMemoryRangeCopy(ir, strlen(ir), "test"));
    fn = LLVMGetNamedFunction(f->mod, "f");
    assert_non_null(fn);
    assert_int_equal(ml_cfg_build(fn, &f->cfg), 0);
}

static void unload(struct fixture *f)
{
    ml_cfg_free(&f->cfg);
    LLVMDisposeModule(f->mod);
    LLVMContextDispose(f->ctx);
}

static void check_list(const unsigned *got, unsigned ngot, const int *want, unsigned nwant)
{
    assert_int_equal(ngot, nwant);
    for (unsigned i = 0; i < nwant; i++)
        assert_int_equal(got[i], want[i]);
}

/* Lists are given as int arrays ending in NONE. */
static unsigned len(const int *l)
{
    unsigned n = 0;
    while (l[n] != NONE)
        n++;
    return n;
}

static void check_succ(const struct ml_cfg *c, unsigned b, const int *want)
{
    check_list(c->succ + c->succ_off[b], c->succ_off[b + 1] - c->succ_off[b], want, len(want));
}

static void check_pred(const struct ml_cfg *c, unsigned b, const int *want)
{
    check_list(c->pred + c->pred_off[b], c->pred_off[b + 1] - c->pred_off[b], want, len(want));
}

static void check_ints(const int *got, const int *want, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        if (got[i] != want[i])
            fail_msg("index %u: got %d, want %d", i, got[i], want[i]);
    }
}

/* want[b] is the leader of b's class (NONE for unreachable blocks). */
static void check_classes(const struct ml_cfg *c, const int *want)
{
    int *cls = malloc(sizeof(int) * c->n);
    unsigned *lead = malloc(sizeof(unsigned) * c->n);
    int nc = ml_cfg_equiv_classes(c, cls, lead);
    int *got = malloc(sizeof(int) * c->n);

    assert_true(nc > 0);
    for (unsigned b = 0; b < c->n; b++)
        got[b] = cls[b] < 0 ? NONE : (int)lead[cls[b]];
    check_ints(got, want, c->n);
    assert_int_equal(cls[0], 0);
    free(cls);
    free(lead);
    free(got);
}

static void check_loop(const struct ml_cfg *c, unsigned li, unsigned header, int parent,
                       unsigned depth, int preheader, const int *blocks, const int *latches,
                       const int *exits)
{
    const struct ml_loop *l;

    assert_true(li < c->nloops);
    l = &c->loops[li];
    assert_int_equal(l->header, header);
    assert_int_equal(l->parent, parent);
    assert_int_equal(l->depth, depth);
    assert_int_equal(l->preheader, preheader);
    check_list(l->blocks, l->nblocks, blocks, len(blocks));
    check_list(l->latches, l->nlatches, latches, len(latches));
    check_list(l->exits, l->nexits, exits, len(exits));
}

static void test_straight_line(void **state)
{
    struct fixture f;
    (void)state;
    load(&f, "define void @f() {\n"
             "entry:\n  br label %a\n"
             "a:\n  br label %b\n"
             "b:\n  ret void\n}\n");
    struct ml_cfg *c = &f.cfg;
    assert_int_equal(c->n, 3);
    check_succ(c, 0, (int[]){1, NONE});
    check_succ(c, 2, (int[]){NONE});
    check_pred(c, 2, (int[]){1, NONE});
    check_ints(c->idom, (int[]){-1, 0, 1}, 3);
    check_ints(c->ipdom, (int[]){1, 2, 3}, 3);
    assert_int_equal(c->nloops, 0);
    check_classes(c, (int[]){0, 0, 0});
    assert_int_equal(ml_cfg_index(c, LLVMGetEntryBasicBlock(c->fn)), 0);
    assert_int_equal(ml_cfg_index(c, NULL), -1);
    assert_true(ml_cfg_dominates(c, 0, 2));
    assert_false(ml_cfg_dominates(c, 2, 0));
    assert_true(ml_cfg_postdominates(c, 2, 0));
    assert_true(ml_cfg_postdominates(c, 3, 0));
    unload(&f);
}

static void test_diamond(void **state)
{
    struct fixture f;
    (void)state;
    load(&f, "define i32 @f(i1 %c) {\n"
             "entry:\n  br i1 %c, label %t, label %e\n"
             "t:\n  br label %j\n"
             "e:\n  br label %j\n"
             "j:\n  %r = phi i32 [ 1, %t ], [ 2, %e ]\n  ret i32 %r\n}\n");
    struct ml_cfg *c = &f.cfg;
    check_succ(c, 0, (int[]){1, 2, NONE});
    check_pred(c, 3, (int[]){1, 2, NONE});
    check_ints(c->idom, (int[]){-1, 0, 0, 0}, 4);
    check_ints(c->ipdom, (int[]){3, 3, 3, 4}, 4);
    assert_false(ml_cfg_dominates(c, 1, 3));
    assert_false(ml_cfg_postdominates(c, 1, 0));
    check_classes(c, (int[]){0, 1, 2, 0});
    unload(&f);
}

static const char nested_ir[] =
    "define void @f(i32 %n) {\n"
    "entry:\n  br label %oh\n"
    "oh:\n  %i = phi i32 [ 0, %entry ], [ %i1, %olatch ]\n"
    "  %c = icmp slt i32 %i, %n\n  br i1 %c, label %ihpre, label %exit\n"
    "ihpre:\n  br label %ih\n"
    "ih:\n  %j = phi i32 [ 0, %ihpre ], [ %j1, %ib ]\n"
    "  %cj = icmp slt i32 %j, %n\n  br i1 %cj, label %ib, label %olatch\n"
    "ib:\n  %j1 = add i32 %j, 1\n  br label %ih\n"
    "olatch:\n  %i1 = add i32 %i, 1\n  br label %oh\n"
    "exit:\n  ret void\n}\n";

static void test_nested_loops(void **state)
{
    struct fixture f;
    (void)state;
    load(&f, nested_ir);
    struct ml_cfg *c = &f.cfg;
    check_ints(c->idom, (int[]){-1, 0, 1, 2, 3, 3, 1}, 7);
    check_ints(c->ipdom, (int[]){1, 6, 3, 5, 3, 1, 7}, 7);
    assert_int_equal(c->nloops, 2);
    check_loop(c, 0, 1, -1, 1, 0, (int[]){1, 2, 3, 4, 5, NONE}, (int[]){5, NONE}, (int[]){6, NONE});
    check_loop(c, 1, 3, 0, 2, 2, (int[]){3, 4, NONE}, (int[]){4, NONE}, (int[]){5, NONE});
    check_ints(c->loop_of, (int[]){-1, 0, 0, 1, 1, 0, -1}, 7);
    /* entry and exit once; ihpre and olatch once per outer iteration; headers one more. */
    check_classes(c, (int[]){0, 1, 2, 3, 4, 2, 0});
    unload(&f);
}

static void test_break_and_return(void **state)
{
    struct fixture f;
    (void)state;
    load(&f, "define i32 @f(i32 %n) {\n"
             "entry:\n  br label %h\n"
             "h:\n  %i = phi i32 [ 0, %entry ], [ %i1, %latch ]\n"
             "  %c = icmp slt i32 %i, %n\n  br i1 %c, label %body, label %done\n"
             "body:\n  %x = icmp eq i32 %i, 5\n  br i1 %x, label %brk, label %b2\n"
             "b2:\n  %y = icmp eq i32 %i, 7\n  br i1 %y, label %ret1, label %latch\n"
             "latch:\n  %i1 = add i32 %i, 1\n  br label %h\n"
             "brk:\n  br label %done\n"
             "ret1:\n  ret i32 1\n"
             "done:\n  ret i32 0\n}\n");
    struct ml_cfg *c = &f.cfg;
    check_ints(c->idom, (int[]){-1, 0, 1, 2, 3, 2, 3, 1}, 8);
    check_ints(c->ipdom, (int[]){1, 8, 8, 8, 1, 7, 8, 8}, 8);
    assert_int_equal(c->nloops, 1);
    check_loop(c, 0, 1, -1, 1, 0, (int[]){1, 2, 3, 4, NONE}, (int[]){4, NONE},
               (int[]){5, 6, 7, NONE});
    /* Every early exit makes the counts differ: all singletons. */
    check_classes(c, (int[]){0, 1, 2, 3, 4, 5, 6, 7});
    unload(&f);
}

/*
 * Two latches, the loop exit only after the second: a dominates b, b
 * post-dominates a and both sit in the same innermost loop, yet a runs more
 * often (a -> h -> a cycles skip b). h and a do run equally often.
 */
static void test_two_latches(void **state)
{
    struct fixture f;
    (void)state;
    load(&f, "define void @f(i1 %p, i1 %q) {\n"
             "entry:\n  br label %h\n"
             "h:\n  br label %a\n"
             "a:\n  br i1 %p, label %h, label %b\n"
             "b:\n  br i1 %q, label %h, label %x\n"
             "x:\n  ret void\n}\n");
    struct ml_cfg *c = &f.cfg;
    check_ints(c->idom, (int[]){-1, 0, 1, 2, 3}, 5);
    check_ints(c->ipdom, (int[]){1, 2, 3, 4, 5}, 5);
    check_loop(c, 0, 1, -1, 1, 0, (int[]){1, 2, 3, NONE}, (int[]){2, 3, NONE}, (int[]){4, NONE});
    check_classes(c, (int[]){0, 1, 1, 3, 0});
    unload(&f);
}

static void test_switch_duplicates(void **state)
{
    struct fixture f;
    (void)state;
    load(&f, "define i32 @f(i32 %x) {\n"
             "entry:\n  switch i32 %x, label %d [ i32 0, label %a\n"
             "    i32 1, label %a\n    i32 2, label %b\n    i32 3, label %d ]\n"
             "a:\n  br label %j\n"
             "b:\n  br label %j\n"
             "d:\n  br label %j\n"
             "j:\n  %r = phi i32 [ 1, %a ], [ 2, %b ], [ 3, %d ]\n  ret i32 %r\n}\n");
    struct ml_cfg *c = &f.cfg;
    check_succ(c, 0, (int[]){3, 1, 2, NONE}); /* default first, duplicates dropped */
    check_pred(c, 1, (int[]){0, NONE});
    check_pred(c, 3, (int[]){0, NONE});
    check_pred(c, 4, (int[]){1, 2, 3, NONE});
    check_ints(c->idom, (int[]){-1, 0, 0, 0, 0}, 5);
    check_ints(c->ipdom, (int[]){4, 4, 4, 4, 5}, 5);
    check_classes(c, (int[]){0, 1, 2, 3, 0});
    unload(&f);
}

static void test_infinite_loop(void **state)
{
    struct fixture f;
    (void)state;
    load(&f, "define void @f(i1 %c) {\n"
             "entry:\n  br label %h\n"
             "h:\n  br i1 %c, label %a, label %b\n"
             "a:\n  br label %l\n"
             "b:\n  br label %l\n"
             "l:\n  br label %h\n}\n");
    struct ml_cfg *c = &f.cfg;
    /* The latch stands in for the missing exit. */
    check_ints(c->ipdom, (int[]){1, 4, 4, 4, 5}, 5);
    check_ints(c->idom, (int[]){-1, 0, 1, 1, 1}, 5);
    check_loop(c, 0, 1, -1, 1, 0, (int[]){1, 2, 3, 4, NONE}, (int[]){4, NONE}, (int[]){NONE});
    check_classes(c, (int[]){0, 1, 2, 3, 1});
    unload(&f);
}

/* An exitless outer loop: only its latch is linked to the exit, inner post-dominance stays. */
static void test_infinite_nested(void **state)
{
    struct fixture f;
    (void)state;
    load(&f, "define void @f(i1 %c) {\n"
             "entry:\n  br label %h\n"
             "h:\n  br label %ih\n"
             "ih:\n  br i1 %c, label %ih, label %l\n"
             "l:\n  br label %h\n}\n");
    struct ml_cfg *c = &f.cfg;
    check_ints(c->ipdom, (int[]){1, 2, 3, 4}, 4);
    assert_int_equal(c->nloops, 2);
    check_loop(c, 0, 1, -1, 1, 0, (int[]){1, 2, 3, NONE}, (int[]){3, NONE}, (int[]){NONE});
    check_loop(c, 1, 2, 0, 2, 1, (int[]){2, NONE}, (int[]){2, NONE}, (int[]){3, NONE});
    check_classes(c, (int[]){0, 1, 2, 1});
    unload(&f);
}

static void test_unreachable(void **state)
{
    struct fixture f;
    (void)state;
    load(&f, "define void @f(i1 %c) {\n"
             "entry:\n  br label %a\n"
             "dead:\n  br label %a\n"
             "a:\n  br i1 %c, label %x, label %y\n"
             "x:\n  unreachable\n"
             "y:\n  ret void\n"
             "dead2:\n  br label %dead2\n}\n");
    struct ml_cfg *c = &f.cfg;
    check_pred(c, 2, (int[]){0, 1, NONE});
    check_pred(c, 5, (int[]){5, NONE});
    assert_int_equal(c->nrpo, 4);
    assert_int_equal(c->rpo_num[1], -1);
    assert_int_equal(c->rpo_num[5], -1);
    check_ints(c->idom, (int[]){-1, -1, 0, 2, 2, -1}, 6);
    check_ints(c->ipdom, (int[]){2, -1, 6, 6, 6, -1}, 6);
    assert_int_equal(c->nloops, 0);
    check_ints(c->loop_of, (int[]){-1, -1, -1, -1, -1, -1}, 6);
    assert_false(ml_cfg_dominates(c, 1, 2));
    assert_false(ml_cfg_dominates(c, 0, 1));
    assert_false(ml_cfg_postdominates(c, 2, 1));
    assert_false(ml_cfg_postdominates(c, 6, 5));
    check_classes(c, (int[]){0, NONE, 0, 3, 4, NONE});
    unload(&f);
}

static void test_invoke(void **state)
{
    struct fixture f;
    (void)state;
    load(&f, "declare void @g()\n"
             "declare i32 @__gxx_personality_v0(...)\n"
             "define void @f() personality i32 (...)* @__gxx_personality_v0 {\n"
             "entry:\n  invoke void @g() to label %cont unwind label %lpad\n"
             "cont:\n  invoke void @g() to label %done unwind label %lpad\n"
             "lpad:\n  %lp = landingpad { i8*, i32 } cleanup\n"
             "  resume { i8*, i32 } %lp\n"
             "done:\n  ret void\n}\n");
    struct ml_cfg *c = &f.cfg;
    check_succ(c, 0, (int[]){1, 2, NONE});
    check_succ(c, 1, (int[]){3, 2, NONE});
    check_pred(c, 2, (int[]){0, 1, NONE});
    check_ints(c->idom, (int[]){-1, 0, 0, 1}, 4);
    check_ints(c->ipdom, (int[]){4, 4, 4, 4}, 4);
    check_classes(c, (int[]){0, 1, 2, 3});
    unload(&f);
}

/*
 * x and y form a cycle entered at both: no natural loop, both irreducible.
 * entry dominates out and out post-dominates entry, but x may run many times.
 */
static void test_irreducible(void **state)
{
    struct fixture f;
    (void)state;
    load(&f, "define void @f(i1 %c, i1 %d) {\n"
             "entry:\n  br i1 %c, label %x, label %y\n"
             "x:\n  br i1 %d, label %y, label %out\n"
             "y:\n  br label %x\n"
             "out:\n  ret void\n}\n");
    struct ml_cfg *c = &f.cfg;
    check_ints(c->idom, (int[]){-1, 0, 0, 1}, 4);
    check_ints(c->ipdom, (int[]){1, 3, 1, 4}, 4);
    assert_int_equal(c->nloops, 0);
    assert_int_equal(c->irreducible[0], 0);
    assert_int_equal(c->irreducible[1], 1);
    assert_int_equal(c->irreducible[2], 1);
    assert_int_equal(c->irreducible[3], 0);
    check_classes(c, (int[]){0, 1, 2, 0});
    unload(&f);
}

/* ---- property test on real code ---- */

static const char prop_c[] =
    "#include <stdlib.h>\n"
    "int g(int);\n"
    "int loops(int n, int *a) { int s = 0;\n"
    "  for (int i = 0; i < n; i++) { if (a[i] < 0) break; if (a[i] == 7) return -1;\n"
    "    for (int j = i; j < n; j += 2) { if (a[j] & 1) continue; s += a[j]; } }\n"
    "  do { s--; } while (s > 100);\n  return s; }\n"
    "int sw(int x) { switch (x) { case 0: case 1: return g(1); case 2: x++; case 3: x *= 2;\n"
    "  break; case 9: while (x < 100) x = g(x); break; default: x = 0; } return x; }\n"
    "int irr(int a, int b) { if (a) goto l2; l1: b++; if (b > 9) return b; l2: b += g(b);\n"
    "  if (b & 1) goto l1; return a; }\n"
    "void forever(int *p) { for (;;) { if (*p) g(1); else g(2); if (*p == 42) exit(1); } }\n"
    "int mix(int n) { int r = 0; while (n) { if (n & 1) { r++; if (r > 5) goto out; }\n"
    "  else if (n & 2) { r += g(n); } n >>= 1; } out: for (int i = 0; i < r; i++)\n"
    "  r += g(i) ? 1 : 0; return r; }\n";

static const char prop_cxx[] =
    "int g(int);\n"
    "struct D { ~D(); };\n"
    "int tc(int n) { int s = 0; for (int i = 0; i < n; i++) { D d; try { s += g(i); }\n"
    "  catch (int e) { s -= e; if (e > 3) break; } } return s; }\n";

static int blocked_bfs(const struct ml_cfg *c, int removed, int reverse, const unsigned char *roots,
                       unsigned char *seen, unsigned *stack)
{
    unsigned top = 0;
    memset(seen, 0, c->n);
    for (unsigned b = 0; b < c->n; b++)
        if (roots[b] && (int)b != removed && c->rpo_num[b] >= 0) {
            seen[b] = 1;
            stack[top++] = b;
        }
    while (top) {
        unsigned v = stack[--top];
        const unsigned *off = reverse ? c->pred_off : c->succ_off;
        const unsigned *adj = reverse ? c->pred : c->succ;
        for (unsigned k = off[v]; k < off[v + 1]; k++) {
            unsigned w = adj[k];
            if ((int)w != removed && !seen[w] && c->rpo_num[w] >= 0) {
                seen[w] = 1;
                stack[top++] = w;
            }
        }
    }
    return 0;
}

static uint64_t rng = 88172645463325252ULL;

static unsigned rnd(unsigned m)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)(rng % m);
}

/* Checks a function's analyses against their definitions; returns the number of walks that ended.
 */
static unsigned check_function(const struct ml_cfg *c, unsigned walks, unsigned max_steps)
{
    unsigned n = c->n, ended = 0;
    unsigned char *entry = calloc(n, 1), *exits = calloc(n, 1), *seen = malloc(n);
    unsigned char *toexit = malloc(n);
    unsigned *stack = malloc(sizeof(unsigned) * n), *cnt = malloc(sizeof(unsigned) * n);
    unsigned *lead = malloc(sizeof(unsigned) * n);
    int *cls = malloc(sizeof(int) * n), all_exit = 1;

    entry[0] = 1;
    for (unsigned b = 0; b < n; b++)
        exits[b] = c->succ_off[b] == c->succ_off[b + 1];
    blocked_bfs(c, -1, 1, exits, toexit, stack);
    for (unsigned b = 0; b < n; b++)
        if (c->rpo_num[b] >= 0 && !toexit[b])
            all_exit = 0;
    for (unsigned a = 0; a < n; a++) {
        if (c->rpo_num[a] < 0)
            continue;
        /* a dominates b iff b is unreachable from the entry once a is removed. */
        blocked_bfs(c, (int)a, 0, entry, seen, stack);
        for (unsigned b = 0; b < n; b++)
            if (c->rpo_num[b] >= 0 && ml_cfg_dominates(c, a, b) != (a == b || !seen[b]))
                fail_msg("dominates(%u, %u) wrong", a, b);
        /*
         * a post-dominates b iff b cannot reach an exit once a is removed. Exact
         * when every block reaches a real exit; otherwise the virtual edges of
         * exitless loops may only remove post-dominance.
         */
        blocked_bfs(c, (int)a, 1, exits, seen, stack);
        for (unsigned b = 0; b < n; b++) {
            int want = a == b || !seen[b];
            if (c->rpo_num[b] < 0 || !toexit[b])
                continue;
            if (all_exit ? ml_cfg_postdominates(c, a, b) != want
                         : ml_cfg_postdominates(c, a, b) && !want)
                fail_msg("postdominates(%u, %u) wrong", a, b);
        }
    }
    for (unsigned li = 0; li < c->nloops; li++) {
        const struct ml_loop *l = &c->loops[li];
        for (unsigned i = 0; i < l->nblocks; i++) {
            assert_true(ml_cfg_dominates(c, l->header, l->blocks[i]));
            assert_true(c->loop_of[l->blocks[i]] >= (int)li);
        }
        assert_true(l->parent < (int)li);
        assert_true(l->nlatches > 0);
    }
    /* Random walks: every complete path must give equal counts within a class. */
    assert_true(ml_cfg_equiv_classes(c, cls, lead) > 0);
    for (unsigned w = 0; w < walks; w++) {
        unsigned b = 0, steps;
        memset(cnt, 0, sizeof(unsigned) * n);
        for (steps = 0; steps < max_steps; steps++) {
            unsigned ns = c->succ_off[b + 1] - c->succ_off[b];
            cnt[b]++;
            if (!ns)
                break;
            b = c->succ[c->succ_off[b] + rnd(ns)];
        }
        if (steps == max_steps)
            continue;
        ended++;
        for (unsigned v = 0; v < n; v++)
            if (cls[v] >= 0 && cnt[v] != cnt[lead[cls[v]]])
                fail_msg("block %u ran %u times, its leader %u ran %u", v, cnt[v], lead[cls[v]],
                         cnt[lead[cls[v]]]);
    }
    free(entry);
    free(exits);
    free(seen);
    free(toexit);
    free(stack);
    free(cnt);
    free(lead);
    free(cls);
    return ended;
}

static int compile(const char *dir, const char *name, const char *src, const char *flags)
{
    char path[512], cmd[1200];
    FILE *fp;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    fp = fopen(path, "w");
    if (!fp)
        return -1;
    fputs(src, fp);
    fclose(fp);
    snprintf(cmd, sizeof(cmd), "clang-14 %s -emit-llvm -c -o %s/out.bc %s 2>&1", flags, dir, path);
    return system(cmd);
}

static void test_property_real_code(void **state)
{
    static const struct {
        const char *name, *src, *flags;
    } cases[] = {
        {"p.c", prop_c, "-O0"},
        {"p.c", prop_c, "-O2"},
        {"p.c", prop_c, "-O1 -fno-unroll-loops"},
        {"p.cc", prop_cxx, "-O0 -fexceptions"},
        {"p.cc", prop_cxx, "-O2 -fexceptions"},
    };
    char dir[] = "/tmp/ml-test-cfg-XXXXXX", bc[600];
    unsigned nfn = 0, ended = 0, nloops = 0, nirr = 0;
    (void)state;

    if (system("command -v clang-14 >/dev/null 2>&1"))
        skip();
    assert_non_null(mkdtemp(dir));
    snprintf(bc, sizeof(bc), "%s/out.bc", dir);
    for (unsigned i = 0; i < COUNT(cases); i++) {
        struct fixture f;
        LLVMMemoryBufferRef buf;
        char *msg = NULL;

        memset(&f, 0, sizeof(f));
        assert_int_equal(compile(dir, cases[i].name, cases[i].src, cases[i].flags), 0);
        assert_int_equal(LLVMCreateMemoryBufferWithContentsOfFile(bc, &buf, &msg), 0);
        parse_buffer(&f, buf);
        for (LLVMValueRef fn = LLVMGetFirstFunction(f.mod); fn; fn = LLVMGetNextFunction(fn)) {
            if (LLVMIsDeclaration(fn))
                continue;
            assert_int_equal(ml_cfg_build(fn, &f.cfg), 0);
            ended += check_function(&f.cfg, 300, 100000);
            nloops += f.cfg.nloops;
            for (unsigned b = 0; b < f.cfg.n; b++)
                nirr += f.cfg.irreducible[b];
            nfn++;
            ml_cfg_free(&f.cfg);
        }
        LLVMDisposeModule(f.mod);
        LLVMContextDispose(f.ctx);
        remove(bc);
    }
    print_message("%u functions, %u loops, %u irreducible blocks, %u complete walks\n", nfn, nloops,
                  nirr, ended);
    assert_true(nloops > 5);
    assert_true(nirr > 0);
    assert_true(ended > 1000);
    {
        char cmd[700];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        assert_int_equal(system(cmd), 0);
    }
}

/* Appends a random function @f with nb blocks of br, conditional br, switch and ret. */
static void random_ir(char *ir, size_t cap, unsigned nb)
{
    size_t o = 0;

    o += (size_t)snprintf(ir + o, cap - o, "define void @f(i1 %%c, i32 %%x) {\n");
    for (unsigned b = 0; b < nb; b++) {
        unsigned kind = rnd(20), t1 = 1 + rnd(nb - 1), t2 = 1 + rnd(nb - 1), t3 = 1 + rnd(nb - 1);
        o += (size_t)snprintf(ir + o, cap - o, "b%u:\n", b);
        if (kind < 2 && b)
            o += (size_t)snprintf(ir + o, cap - o, "  ret void\n");
        else if (kind < 3 && b)
            o += (size_t)snprintf(ir + o, cap - o, "  unreachable\n");
        else if (kind < 9)
            o += (size_t)snprintf(ir + o, cap - o, "  br label %%b%u\n", t1);
        else if (kind < 17)
            o += (size_t)snprintf(ir + o, cap - o, "  br i1 %%c, label %%b%u, label %%b%u\n", t1,
                                  t2);
        else
            o += (size_t)snprintf(ir + o, cap - o,
                                  "  switch i32 %%x, label %%b%u [ i32 0, label %%b%u\n"
                                  "    i32 1, label %%b%u  i32 2, label %%b%u ]\n",
                                  t1, t2, t3, t1);
    }
    snprintf(ir + o, cap - o, "}\n");
}

/*
 * Random CFGs: arbitrary nesting, several latches, irreducible cycles,
 * unreachable and exitless parts, all checked against brute force and walks.
 */
static void test_property_random_cfg(void **state)
{
    static char ir[16384];
    unsigned ended = 0, nloops = 0, nirr = 0, nmerged = 0;
    (void)state;

    for (unsigned i = 0; i < 400; i++) {
        struct fixture f;
        random_ir(ir, sizeof(ir), 2 + rnd(24));
        load(&f, ir);
        ended += check_function(&f.cfg, 60, 4000);
        nloops += f.cfg.nloops;
        for (unsigned b = 0; b < f.cfg.n; b++)
            nirr += f.cfg.irreducible[b];
        {
            int *cls = malloc(sizeof(int) * f.cfg.n);
            unsigned *lead = malloc(sizeof(unsigned) * f.cfg.n);
            nmerged += f.cfg.nrpo - (unsigned)ml_cfg_equiv_classes(&f.cfg, cls, lead);
            free(cls);
            free(lead);
        }
        unload(&f);
    }
    print_message("%u loops, %u irreducible blocks, %u blocks merged, %u complete walks\n", nloops,
                  nirr, nmerged, ended);
    assert_true(ended > 1000);
    assert_true(nirr > 0);
    assert_true(nmerged > 100);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_straight_line),       cmocka_unit_test(test_diamond),
        cmocka_unit_test(test_nested_loops),        cmocka_unit_test(test_break_and_return),
        cmocka_unit_test(test_two_latches),         cmocka_unit_test(test_switch_duplicates),
        cmocka_unit_test(test_infinite_loop),       cmocka_unit_test(test_infinite_nested),
        cmocka_unit_test(test_unreachable),         cmocka_unit_test(test_invoke),
        cmocka_unit_test(test_irreducible),         cmocka_unit_test(test_property_real_code),
        cmocka_unit_test(test_property_random_cfg),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
