/* Unit tests for the trip-count recogniser and its formula, checked against simulation. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <llvm-c/Analysis.h>
#include <llvm-c/Core.h>
#include <llvm-c/IRReader.h>

#include "instrument/ir/tripcount.h"

struct fixture {
    LLVMContextRef ctx;
    LLVMModuleRef mod;
    struct ml_cfg cfg;
    struct ml_trip t;
};

static void load(struct fixture *f, const char *ir)
{
    char *msg = NULL;
    LLVMValueRef fn;

    memset(f, 0, sizeof(*f));
    f->ctx = LLVMContextCreate();
    if (LLVMParseIRInContext(f->ctx, LLVMCreateMemoryBufferWithMemoryRangeCopy(ir, strlen(ir), "t"),
                             &f->mod, &msg))
        fail_msg("cannot parse ir: %s\n%s", msg ? msg : "?", ir);
    fn = LLVMGetNamedFunction(f->mod, "f");
    assert_non_null(fn);
    assert_int_equal(ml_cfg_build(fn, &f->cfg), 0);
    assert_int_equal(f->cfg.nloops, 1);
    assert_int_equal(ml_loop_tripcount(&f->cfg, 0, &f->t), 0);
}

static void unload(struct fixture *f)
{
    ml_cfg_free(&f->cfg);
    LLVMDisposeModule(f->mod);
    LLVMContextDispose(f->ctx);
}

/* Loop tested in the header: for (i = start; i pred bound; i += step). */
static void top_tested(char *ir, size_t cap, const char *ty, const char *start, const char *pred,
                       const char *bound, const char *step)
{
    snprintf(ir, cap,
             "define void @f(%s %%s, %s %%n) {\n"
             "entry:\n  br label %%h\n"
             "h:\n  %%i = phi %s [ %s, %%entry ], [ %%i.next, %%latch ]\n"
             "  %%c = icmp %s %s %%i, %s\n  br i1 %%c, label %%latch, label %%exit\n"
             "latch:\n  %%i.next = add %s %%i, %s\n  br label %%h\n"
             "exit:\n  ret void\n}\n",
             ty, ty, ty, start, pred, ty, bound, ty, step);
}

/* Rotated loop tested in the latch on the incremented value: do ... while (i.next pred bound). */
static void rotated(char *ir, size_t cap, const char *ty, const char *start, const char *pred,
                    const char *bound, const char *step)
{
    snprintf(ir, cap,
             "define void @f(%s %%s, %s %%n) {\n"
             "entry:\n  br label %%h\n"
             "h:\n  %%i = phi %s [ %s, %%entry ], [ %%i.next, %%h ]\n"
             "  %%i.next = add %s %%i, %s\n"
             "  %%c = icmp %s %s %%i.next, %s\n  br i1 %%c, label %%h, label %%exit\n"
             "exit:\n  ret void\n}\n",
             ty, ty, ty, start, ty, step, pred, ty, bound);
}

static void expect_const(const char *ir, uint64_t count)
{
    struct fixture f;
    load(&f, ir);
    if (f.t.kind != ML_TRIP_CONST || f.t.count != count)
        fail_msg("kind %d count %llu, want const %llu for\n%s", f.t.kind,
                 (unsigned long long)f.t.count, (unsigned long long)count, ir);
    unload(&f);
}

static void expect_unknown(const char *ir)
{
    struct fixture f;
    load(&f, ir);
    if (f.t.kind != ML_TRIP_UNKNOWN)
        fail_msg("kind %d, want unknown for\n%s", f.t.kind, ir);
    unload(&f);
}

static void test_constant_loops(void **state)
{
    char ir[2048];
    (void)state;
    /* for (i = 0; i < 10; i++): the header runs 11 times. */
    top_tested(ir, sizeof(ir), "i32", "0", "slt", "10", "1");
    expect_const(ir, 11);
    /* do i++ while (i + 1 < 10) from 0: the header runs 10 times (i = 0..9). */
    rotated(ir, sizeof(ir), "i32", "0", "slt", "10", "1");
    expect_const(ir, 10);
    /* unsigned <= with step 2: 3, 5, 7, 9, 11 pass, 13 fails. */
    top_tested(ir, sizeof(ir), "i32", "3", "ule", "11", "2");
    expect_const(ir, 6);
    /* != with step 3: 0, 3, 6, 9 pass, 12 fails. */
    top_tested(ir, sizeof(ir), "i64", "0", "ne", "12", "3");
    expect_const(ir, 5);
    /* Counting down, signed >=: 5, 3, 1, -1 pass, -3 fails. */
    top_tested(ir, sizeof(ir), "i16", "5", "sge", "-1", "-2");
    expect_const(ir, 5);
    /* Unsigned counting down to zero: for (i = 4; i > 0; i--). */
    top_tested(ir, sizeof(ir), "i32", "4", "ugt", "0", "-1");
    expect_const(ir, 5);
}

static void test_zero_trip(void **state)
{
    char ir[2048];
    (void)state;
    top_tested(ir, sizeof(ir), "i32", "10", "slt", "5", "1");
    expect_const(ir, 1);
    top_tested(ir, sizeof(ir), "i32", "7", "ne", "7", "1");
    expect_const(ir, 1);
    /* A bottom-tested loop runs its body once even when the test fails at once. */
    rotated(ir, sizeof(ir), "i32", "10", "slt", "5", "1");
    expect_const(ir, 1);
    /* Unsigned: -1 is the largest value, so 0 < -1 holds. */
    top_tested(ir, sizeof(ir), "i8", "0", "ult", "-1", "1");
    expect_const(ir, 256);
}

static void test_wrap_around(void **state)
{
    char ir[2048];
    (void)state;
    /* i8 != wraps: 250 .. 255, 0 .. 3 pass (10), 4 fails. */
    top_tested(ir, sizeof(ir), "i8", "-6", "ne", "4", "1");
    expect_const(ir, 11);
    /* != never met: even steps from an odd start. */
    top_tested(ir, sizeof(ir), "i8", "1", "ne", "4", "2");
    expect_unknown(ir);
    /* i <= 255 on u8 never fails. */
    top_tested(ir, sizeof(ir), "i8", "0", "ule", "-1", "1");
    expect_unknown(ir);
    /* Signed step 3 below 127: 126 + 3 wraps negative, the loop keeps going. */
    top_tested(ir, sizeof(ir), "i8", "0", "slt", "127", "3");
    expect_unknown(ir);
    /* Moving away from the bound ends only by wrapping. */
    top_tested(ir, sizeof(ir), "i32", "0", "slt", "10", "-1");
    expect_unknown(ir);
    /* Same shape that does reach its bound without wrapping: 0, 3, ..., 123 pass. */
    top_tested(ir, sizeof(ir), "i8", "0", "slt", "124", "3");
    expect_const(ir, 43);
}

static void test_recipe(void **state)
{
    char ir[2048];
    struct fixture f;
    (void)state;
    /* for (i = n; i > s; i -= 2) */
    top_tested(ir, sizeof(ir), "i32", "%n", "sgt", "%s", "-2");
    load(&f, ir);
    assert_int_equal(f.t.kind, ML_TRIP_RECIPE);
    assert_ptr_equal(f.t.start, LLVMGetParam(LLVMGetNamedFunction(f.mod, "f"), 1));
    assert_ptr_equal(f.t.bound, LLVMGetParam(LLVMGetNamedFunction(f.mod, "f"), 0));
    assert_int_equal(f.t.rule.pred, LLVMIntSGT);
    assert_int_equal(f.t.rule.step, -2);
    assert_int_equal(f.t.rule.bits, 32);
    assert_int_equal(f.t.rule.tests_next, 0);
    unload(&f);
    rotated(ir, sizeof(ir), "i64", "%s", "ult", "%n", "4");
    load(&f, ir);
    assert_int_equal(f.t.kind, ML_TRIP_RECIPE);
    assert_int_equal(f.t.rule.pred, LLVMIntULT);
    assert_int_equal(f.t.rule.tests_next, 1);
    assert_int_equal(f.t.rule.step, 4);
    unload(&f);
}

static void test_shapes(void **state)
{
    struct fixture f;
    (void)state;
    /* Bound on the left and exit on true: "if (10 <= i) exit" means continue while i < 10. */
    load(&f, "define void @f() {\n"
             "entry:\n  br label %h\n"
             "h:\n  %i = phi i32 [ 0, %entry ], [ %i.next, %latch ]\n"
             "  %c = icmp sle i32 10, %i\n  br i1 %c, label %exit, label %latch\n"
             "latch:\n  %i.next = sub i32 %i, -1\n  br label %h\n"
             "exit:\n  ret void\n}\n");
    assert_int_equal(f.t.kind, ML_TRIP_CONST);
    assert_int_equal(f.t.rule.pred, LLVMIntSLT);
    assert_int_equal(f.t.count, 11);
    unload(&f);
    /* A break makes a second exiting block. */
    expect_unknown("define void @f(i1 %b) {\n"
                   "entry:\n  br label %h\n"
                   "h:\n  %i = phi i32 [ 0, %entry ], [ %i.next, %latch ]\n"
                   "  %c = icmp slt i32 %i, 10\n  br i1 %c, label %body, label %exit\n"
                   "body:\n  br i1 %b, label %exit, label %latch\n"
                   "latch:\n  %i.next = add i32 %i, 1\n  br label %h\n"
                   "exit:\n  ret void\n}\n");
    /* Step not constant. */
    expect_unknown("define void @f(i32 %s) {\n"
                   "entry:\n  br label %h\n"
                   "h:\n  %i = phi i32 [ 0, %entry ], [ %i.next, %latch ]\n"
                   "  %c = icmp slt i32 %i, 10\n  br i1 %c, label %latch, label %exit\n"
                   "latch:\n  %i.next = add i32 %i, %s\n  br label %h\n"
                   "exit:\n  ret void\n}\n");
    /* Bound computed inside the loop. */
    expect_unknown("define void @f(i32 %s) {\n"
                   "entry:\n  br label %h\n"
                   "h:\n  %i = phi i32 [ 0, %entry ], [ %i.next, %latch ]\n"
                   "  %b = mul i32 %i, %s\n"
                   "  %c = icmp slt i32 %i, %b\n  br i1 %c, label %latch, label %exit\n"
                   "latch:\n  %i.next = add i32 %i, 1\n  br label %h\n"
                   "exit:\n  ret void\n}\n");
    /* No preheader: the header has two outside predecessors. */
    expect_unknown("define void @f(i1 %p) {\n"
                   "entry:\n  br i1 %p, label %a, label %h\n"
                   "a:\n  br label %h\n"
                   "h:\n  %i = phi i32 [ 0, %entry ], [ 0, %a ], [ %i.next, %latch ]\n"
                   "  %c = icmp slt i32 %i, 10\n  br i1 %c, label %latch, label %exit\n"
                   "latch:\n  %i.next = add i32 %i, 1\n  br label %h\n"
                   "exit:\n  ret void\n}\n");
}

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static int holds(LLVMIntPredicate p, uint8_t x, uint8_t b)
{
    int8_t sx = (int8_t)x, sb = (int8_t)b;
    switch (p) {
    case LLVMIntEQ:
        return x == b;
    case LLVMIntNE:
        return x != b;
    case LLVMIntULT:
        return x < b;
    case LLVMIntULE:
        return x <= b;
    case LLVMIntUGT:
        return x > b;
    case LLVMIntUGE:
        return x >= b;
    case LLVMIntSLT:
        return sx < sb;
    case LLVMIntSLE:
        return sx <= sb;
    case LLVMIntSGT:
        return sx > sb;
    default:
        return sx >= sb;
    }
}

/*
 * ml_trip_eval against step-by-step simulation in 8 bits. A count given must
 * be exact; a loop that never ends must be unknown; eq/ne must always be
 * answered when the loop ends; ordered predicates must be answered when the
 * test fails before the value wraps.
 */
static void test_eval_matches_simulation(void **state)
{
    static const LLVMIntPredicate preds[] = {LLVMIntEQ,  LLVMIntNE,  LLVMIntULT, LLVMIntULE,
                                             LLVMIntUGT, LLVMIntUGE, LLVMIntSLT, LLVMIntSLE,
                                             LLVMIntSGT, LLVMIntSGE};
    unsigned answered = 0, ended = 0;
    (void)state;

    for (unsigned iter = 0; iter < 200000; iter++) {
        struct ml_trip_rule r = {8, preds[rnd() % 10], (int8_t)rnd(), (int)(rnd() & 1)};
        uint8_t start = (uint8_t)rnd(), bound = (uint8_t)rnd();
        uint8_t x = (uint8_t)(start + (r.tests_next ? r.step : 0));
        int is_signed = r.pred >= LLVMIntSGT, wrapped = 0;
        uint64_t sim = 0, got = 0;
        unsigned k;
        int rc;

        if (!r.step)
            continue;
        for (k = 0; k < 600; k++) {
            int next;
            if (!holds(r.pred, x, bound))
                break;
            next = is_signed ? (int8_t)x + (int)r.step : x + (int)r.step;
            if (is_signed ? next < -128 || next > 127 : next < 0 || next > 255)
                wrapped = 1;
            x = (uint8_t)next;
        }
        rc = ml_trip_eval(&r, start, bound, &got);
        if (k == 600) {
            assert_int_equal(rc, -ERANGE);
            continue;
        }
        sim = k + 1;
        ended++;
        if (!rc) {
            answered++;
            if (got != sim)
                fail_msg("pred %d step %d start %u bound %u next %d: got %llu, want %llu", r.pred,
                         (int)r.step, start, bound, r.tests_next, (unsigned long long)got,
                         (unsigned long long)sim);
        } else if (r.pred == LLVMIntEQ || r.pred == LLVMIntNE || !wrapped) {
            fail_msg("pred %d step %d start %u bound %u: unknown, want %llu", r.pred, (int)r.step,
                     start, bound, (unsigned long long)sim);
        }
    }
    print_message("%u loops ended, %u answered\n", ended, answered);
    assert_true(answered > ended / 2);
}

/* ml_trip_build on constant inputs: the builder folds the recipe into a constant. */
static int built_count(LLVMContextRef ctx, LLVMBuilderRef b, const struct ml_trip_rule *r,
                       uint64_t start, uint64_t bound, uint64_t *out)
{
    LLVMTypeRef ty = LLVMIntTypeInContext(ctx, r->bits), i64 = LLVMInt64TypeInContext(ctx);
    struct ml_trip t = {.kind = ML_TRIP_RECIPE, .rule = *r};
    LLVMValueRef v;

    t.start = LLVMConstInt(ty, start, 0);
    t.bound = LLVMConstInt(ty, bound, 0);
    v = ml_trip_build(b, &t, i64);
    if (!LLVMIsAConstantInt(v))
        return -1;
    *out = LLVMConstIntGetZExtValue(v);
    return 0;
}

/*
 * For every foldable rule (with a constant and with a variable bound), the
 * emitted recipe must give the simulated count of every 8-bit loop that ends:
 * signed and unsigned, <, <=, >, >=, ==, !=, steps of any size and sign,
 * zero-trip loops, and loops whose values wrap.
 */
static void test_build_matches_simulation(void **state)
{
    static const LLVMIntPredicate preds[] = {LLVMIntEQ,  LLVMIntNE,  LLVMIntULT, LLVMIntULE,
                                             LLVMIntUGT, LLVMIntUGE, LLVMIntSLT, LLVMIntSLE,
                                             LLVMIntSGT, LLVMIntSGE};
    LLVMContextRef ctx = LLVMContextCreate();
    LLVMBuilderRef b = LLVMCreateBuilderInContext(ctx);
    unsigned checked = 0, folded[2] = {0, 0}, zero_trip = 0;
    (void)state;

    for (unsigned iter = 0; iter < 200000; iter++) {
        struct ml_trip_rule r = {8, preds[rnd() % 10], (int8_t)rnd(), (int)(rnd() & 1)};
        uint8_t start = (uint8_t)rnd(), bound = (uint8_t)rnd();
        uint64_t b64 = bound, got = 0;
        int var, cst;
        unsigned k;
        uint8_t x;

        if (iter % 4 == 0)
            r.step = (rnd() & 1) ? 1 : -1;
        x = (uint8_t)(start + (r.tests_next ? r.step : 0));
        if (!r.step)
            continue;
        var = ml_trip_foldable(&r, NULL);
        cst = ml_trip_foldable(&r, &b64);
        assert_true(!var || cst); /* a variable bound never qualifies more */
        if (!cst)
            continue;
        for (k = 0; k < 600 && holds(r.pred, x, bound); k++)
            x = (uint8_t)(x + r.step);
        if (k == 600)
            continue; /* never ends: any count is allowed */
        assert_int_equal(built_count(ctx, b, &r, start, bound, &got), 0);
        if (got != k + 1)
            fail_msg("pred %d step %d start %u bound %u next %d: built %llu, want %u", r.pred,
                     (int)r.step, start, bound, r.tests_next, (unsigned long long)got, k + 1);
        checked++;
        folded[var]++;
        zero_trip += k == 0;
    }
    print_message("%u loops checked (%u with a variable bound), %u zero-trip\n", checked, folded[1],
                  zero_trip);
    assert_true(folded[1] > 1000 && folded[0] > 1000 && zero_trip > 1000);
    LLVMDisposeBuilder(b);
    LLVMContextDispose(ctx);
}

/* Which rules qualify for folding, and 64-bit answers. */
static void test_foldable(void **state)
{
    LLVMContextRef ctx = LLVMContextCreate();
    LLVMBuilderRef b = LLVMCreateBuilderInContext(ctx);
    struct ml_trip_rule r = {32, LLVMIntSLT, 1, 0};
    uint64_t c, n;
    (void)state;

    assert_true(ml_trip_foldable(&r, NULL)); /* i < n, i++ */
    r.pred = LLVMIntULE;
    assert_true(ml_trip_foldable(&r, NULL)); /* i <= n: n = UINT_MAX never ends */
    r.step = 4;
    assert_false(ml_trip_foldable(&r, NULL)); /* i <= n, i += 4: may wrap and go on */
    n = 100;
    assert_true(ml_trip_foldable(&r, &n));
    n = UINT32_MAX - 3;
    assert_false(ml_trip_foldable(&r, &n)); /* UINT_MAX - 3 + 4 wraps to 0 */
    n = UINT32_MAX - 4;
    assert_true(ml_trip_foldable(&r, &n));
    r.step = -1;
    assert_false(ml_trip_foldable(&r, NULL)); /* away from the bound: ends only by wrapping */
    r = (struct ml_trip_rule){64, LLVMIntNE, 8, 1};
    assert_true(ml_trip_foldable(&r, NULL)); /* vector loop: index += 8 until == n */
    r = (struct ml_trip_rule){32, LLVMIntSGT, -2, 0};
    n = (uint64_t)INT32_MIN;
    assert_false(ml_trip_foldable(&r, &n)); /* i > INT_MIN, i -= 2 may wrap */
    n = (uint64_t)INT32_MIN + 1;
    assert_true(ml_trip_foldable(&r, &n));
    /* 64-bit signed: from INT64_MIN to 0 by 7, as ml_trip_eval. */
    r = (struct ml_trip_rule){64, LLVMIntSLT, 7, 0};
    n = 0;
    assert_true(ml_trip_foldable(&r, &n));
    assert_int_equal(built_count(ctx, b, &r, (uint64_t)INT64_MIN, 0, &c), 0);
    assert_int_equal(c, (uint64_t)(-(INT64_MIN / 7)) + 2);
    /* 64-bit unsigned i < UINT64_MAX - 1 from 0: 2^64 - 1 header executions. */
    r = (struct ml_trip_rule){64, LLVMIntULT, 1, 0};
    assert_int_equal(built_count(ctx, b, &r, 0, ~0ULL - 1, &c), 0);
    assert_int_equal(c, ~0ULL);
    LLVMDisposeBuilder(b);
    LLVMContextDispose(ctx);
}

/*
 * The recipe emitted on real values verifies, and a guarded rotated loop
 * (if (n > 0) do ... while (++i != n), as clang emits "for (i = 0; i < n; i++)")
 * is recognised with its guard outside the loop.
 */
static void test_build_ir(void **state)
{
    static const char *const preds[] = {"slt", "sle", "ult", "ule", "sgt",
                                        "sge", "ugt", "uge", "ne",  "eq"};
    static const char *const steps[] = {"1", "-1", "3", "-4"};
    char ir[4096];
    (void)state;

    for (unsigned p = 0; p < 10; p++)
        for (unsigned s = 0; s < 4; s++)
            for (unsigned rot = 0; rot < 2; rot++) {
                struct fixture f;
                LLVMBuilderRef b;
                LLVMValueRef fn, v, term;
                (rot ? rotated : top_tested)(ir, sizeof(ir), "i32", "%s", preds[p], "%n", steps[s]);
                load(&f, ir);
                assert_int_equal(f.t.kind, ML_TRIP_RECIPE);
                fn = LLVMGetNamedFunction(f.mod, "f");
                term = LLVMGetBasicBlockTerminator(f.cfg.blocks[f.cfg.loops[0].preheader]);
                b = LLVMCreateBuilderInContext(f.ctx);
                LLVMPositionBuilderBefore(b, term);
                v = ml_trip_build(b, &f.t, LLVMInt64TypeInContext(f.ctx));
                assert_true(LLVMIsAInstruction(v) != NULL);
                if (LLVMVerifyFunction(fn, LLVMReturnStatusAction))
                    fail_msg("recipe does not verify for %s step %s", preds[p], steps[s]);
                LLVMDisposeBuilder(b);
                unload(&f);
            }
    {
        struct fixture g;
        uint64_t c = 0;
        load(&g, "define void @f(i32 %n) {\n"
                 "entry:\n  %g = icmp sgt i32 %n, 0\n  br i1 %g, label %ph, label %exit\n"
                 "ph:\n  br label %h\n"
                 "h:\n  %i = phi i32 [ 0, %ph ], [ %i.next, %h ]\n"
                 "  %i.next = add nuw nsw i32 %i, 1\n"
                 "  %c = icmp eq i32 %i.next, %n\n  br i1 %c, label %exit, label %h\n"
                 "exit:\n  ret void\n}\n");
        assert_int_equal(g.t.kind, ML_TRIP_RECIPE);
        assert_int_equal(g.t.rule.pred, LLVMIntNE);
        assert_int_equal(g.t.rule.tests_next, 1);
        assert_true(ml_trip_foldable(&g.t.rule, NULL));
        assert_int_equal(ml_trip_eval(&g.t.rule, 0, 5, &c), 0);
        assert_int_equal(c, 5);
        unload(&g);
    }
}

static void test_eval_wide(void **state)
{
    struct ml_trip_rule r = {64, LLVMIntNE, 1, 0};
    uint64_t c;
    (void)state;
    /* 0 != -1 step 1 on 64 bits: 2^64 - 1 passing tests, the count does not fit. */
    assert_int_equal(ml_trip_eval(&r, 0, ~0ULL, &c), -ERANGE);
    assert_int_equal(ml_trip_eval(&r, 1, ~0ULL, &c), 0);
    assert_int_equal(c, ~0ULL);
    r = (struct ml_trip_rule){64, LLVMIntSLT, 7, 0};
    assert_int_equal(ml_trip_eval(&r, (uint64_t)INT64_MIN, 0, &c), 0);
    assert_int_equal(c, (uint64_t)(-(INT64_MIN / 7)) + 2);
    r = (struct ml_trip_rule){64, LLVMIntULT, 7, 0};
    assert_int_equal(ml_trip_eval(&r, 0, ~0ULL, &c), -ERANGE);
    r.step = 0;
    assert_int_equal(ml_trip_eval(&r, 0, 5, &c), -ERANGE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_constant_loops), cmocka_unit_test(test_zero_trip),
        cmocka_unit_test(test_wrap_around),    cmocka_unit_test(test_recipe),
        cmocka_unit_test(test_shapes),         cmocka_unit_test(test_eval_matches_simulation),
        cmocka_unit_test(test_eval_wide),      cmocka_unit_test(test_build_matches_simulation),
        cmocka_unit_test(test_foldable),       cmocka_unit_test(test_build_ir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
