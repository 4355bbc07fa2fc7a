/* Unit tests of the region instrumenter on hand-written IR: region ends, cloning, errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <llvm-c/Analysis.h>
#include <llvm-c/IRReader.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "instrument/ir/instrument.h"

static const char decls[] = "@.r = private constant [2 x i8] c\"r\\00\"\n"
                            "@.s = private constant [2 x i8] c\"s\\00\"\n"
                            "declare void @__memlens_roi_begin(i8*)\n"
                            "declare void @__memlens_roi_end(i8*)\n"
                            "declare void @ext(i64*)\n"
                            "@name = global i8* null\n";

#define BEGIN(n)                                                                                   \
    "call void @__memlens_roi_begin(i8* getelementptr ([2 x i8], [2 x i8]* @." n                   \
    ", i64 0, i64 0))\n"
#define END(n)                                                                                     \
    "call void @__memlens_roi_end(i8* getelementptr ([2 x i8], [2 x i8]* @." n ", i64 0, i64 "     \
    "0))\n"

struct result {
    int rc;
    char err[256];
    char *ir; /* printed module after instrumentation */
};

static void instrument_text(const char *body, struct result *res)
{
    LLVMContextRef ctx = LLVMContextCreate();
    size_t len = strlen(decls) + strlen(body) + 1;
    char *text = malloc(len);
    LLVMMemoryBufferRef buf;
    LLVMModuleRef m;
    char *msg = NULL;
    struct ml_ir_opts o = {0};

    snprintf(text, len, "%s%s", decls, body);
    buf = LLVMCreateMemoryBufferWithMemoryRangeCopy(text, strlen(text), "t.ll");
    free(text);
    if (LLVMParseIRInContext(ctx, buf, &m, &msg)) {
        fail_msg("bad test IR: %s", msg);
    }
    LLVMSetDataLayout(m, "e-m:e-i64:64-f80:128-n8:16:32:64-S128");
    res->rc = ml_ir_instrument(m, &o, res->err, sizeof(res->err));
    if (res->rc >= 0) {
        assert_int_equal(LLVMVerifyModule(m, LLVMReturnStatusAction, &msg), 0);
        LLVMDisposeMessage(msg);
    }
    msg = LLVMPrintModuleToString(m);
    res->ir = strdup(msg);
    LLVMDisposeMessage(msg);
    LLVMDisposeModule(m);
    LLVMContextDispose(ctx);
}

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* The body of function `name` in the printed module. */
static char *function_body(const char *ir, const char *name)
{
    char head[128];
    const char *p, *e;

    snprintf(head, sizeof(head), "@%s(", name);
    for (p = strstr(ir, "define "); p; p = strstr(p + 1, "define ")) {
        const char *nl = strchr(p, '\n');
        const char *h = strstr(p, head);
        if (h && h < nl)
            break;
    }
    if (!p)
        return strdup("");
    e = strstr(p, "\n}\n");
    return strndup(p, e ? (size_t)(e - p) : strlen(p));
}

static void no_markers_leaves_module_alone(void **state)
{
    struct result r;

    (void)state;
    instrument_text("define i64 @f(i64* %p) {\n  %v = load i64, i64* %p\n  ret i64 %v\n}\n", &r);
    assert_int_equal(r.rc, 1);
    assert_null(strstr(r.ir, "__memlens_register"));
    assert_null(strstr(r.ir, "__memlens_ctr"));
    free(r.ir);
}

static void loop_region_is_counted_and_markers_replaced(void **state)
{
    struct result r;
    char *f;

    (void)state;
    instrument_text("define void @f(i64* %p, i64 %n) {\n"
                    "entry:\n  %pre = load i64, i64* %p\n  " BEGIN(
                        "r") "  br label %loop\n"
                             "loop:\n  %i = phi i64 [0, %entry], [%i1, %loop]\n"
                             "  %q = getelementptr i64, i64* %p, i64 %i\n  store i64 %i, i64* %q\n"
                             "  %i1 = add i64 %i, 1\n  %c = icmp ult i64 %i1, %n\n"
                             "  br i1 %c, label %loop, label %done\n"
                             "done:\n  " END("r") "  ret void\n}\n",
                    &r);
    assert_int_equal(r.rc, 0);
    f = function_body(r.ir, "f");
    assert_int_equal(count(f, "__memlens_roi_"), 0);
    /* BEGIN is in the shared entry block: one enter, whose result picks the copy; the loop, the
       copy, and the inline paths of BEGIN and of both ENDs branch (the loop in each copy) */
    assert_int_equal(count(f, "call i32 @__memlens_enter("), 1);
    assert_int_equal(count(f, "br i1 %"), 2 + 1 + 1 + 2);
    /* END in the instrumented and in the plain copy */
    assert_int_equal(count(f, "call void @__memlens_exit"), 2);
    /* entry tail and loop body (load and store of each increment name the counters); the
       load before BEGIN, the code after END and the plain copy are not counted */
    assert_int_equal(count(f, "store i64 %"), 2 + 1 + 2); /* + the store of each copy */
    /* the stores go through the argument %p, whose class its address decides: one test of it,
       in the entry block, selects the heap or the stack unit of a pair (the third store) */
    assert_int_equal(count(f, "ptrtoint i64* %p"), 1);
    assert_non_null(strstr(r.ir, "thread_local"));
    assert_non_null(strstr(r.ir, "@llvm.global_ctors"));
    free(f);
    free(r.ir);
}

static void return_inside_region_ends_it(void **state)
{
    struct result r;
    char *f;

    (void)state;
    instrument_text("define i64 @f(i64 %x) {\n"
                    "entry:\n  " BEGIN("r") "  %c = icmp eq i64 %x, 0\n"
                                            "  br i1 %c, label %early, label %late\n"
                                            "early:\n  ret i64 1\n"
                                            "late:\n  " END("r") "  ret i64 2\n}\n",
                    &r);
    assert_int_equal(r.rc, 0);
    f = function_body(r.ir, "f");
    /* one exit for END, one implicit before the early return, in each copy */
    assert_int_equal(count(f, "call void @__memlens_exit"), 2 * 2);
    free(f);
    free(r.ir);
}

static void break_out_of_region_splits_the_edge(void **state)
{
    struct result r;
    char *f;

    (void)state;
    /* for (...) { BEGIN; if (c) break; END; } : the break edge leaves the region */
    instrument_text(
        "define void @f(i64 %n) {\n"
        "entry:\n  br label %head\n"
        "head:\n  %i = phi i64 [0, %entry], [%i1, %latch]\n"
        "  %go = icmp ult i64 %i, %n\n  br i1 %go, label %body, label %exit\n"
        "body:\n  " BEGIN(
            "r") "  %c = icmp eq i64 %i, 7\n"
                 "  br i1 %c, label %exit, label %latch\n"
                 "latch:\n  " END(
                     "r") "  %i1 = add i64 %i, 1\n  br label %head\n"
                          "exit:\n  %v = phi i64 [0, %head], [1, %body]\n  ret void\n}\n",
        &r);
    assert_int_equal(r.rc, 0);
    f = function_body(r.ir, "f");
    assert_non_null(strstr(f, "memlens.exit:"));
    /* END and the break edge, in each copy; BEGIN sites in both copies pick the copy */
    assert_int_equal(count(f, "call void @__memlens_exit"), 2 * 2);
    assert_int_equal(count(f, "call i32 @__memlens_enter("), 2);
    /* the exit block's phi no longer names the block that breaks out */
    assert_null(strstr(f, "[ 1, %body ]"));
    free(f);
    free(r.ir);
}

static void callees_are_cloned_per_region_set(void **state)
{
    struct result r;
    char *g;

    (void)state;
    instrument_text(
        "define i64 @g(i64* %p) {\n  %v = load i64, i64* %p\n  ret i64 %v\n}\n"
        "define i64 @f(i64* %p) {\n"
        "  " BEGIN("r") "  %a = call i64 @g(i64* %p)\n  " END("r") "  " BEGIN(
            "s") "  %b = call i64 @g(i64* %p)\n  call void @ext(i64* %p)\n"
                 "  " END("s") "  %c = call i64 @g(i64* %p)\n"
                               "  %s = add i64 %a, %b\n  %t = add i64 %s, %c\n  ret i64 %t\n}\n",
        &r);
    assert_int_equal(r.rc, 0);
    /* two clones (regions r and s) and, g being external, a copy counted under the dynamic
       context; the original has no counters (only the test of the context at its entry) and is
       still called */
    assert_int_equal(count(r.ir, "define internal i64 @g.memlens."), 3);
    g = function_body(r.ir, "g");
    assert_null(strstr(g, "__memlens_ctr"));
    assert_non_null(strstr(g, "@__memlens_dctx"));
    free(g);
    assert_non_null(strstr(r.ir, "call i64 @g(i64* %p)"));
    /* the external call is recorded by name for the report */
    assert_non_null(strstr(r.ir, "c\"ext\\00\""));
    free(r.ir);
}

static void non_literal_name_is_an_error(void **state)
{
    struct result r;

    (void)state;
    instrument_text("define void @f() {\n  %n = load i8*, i8** @name\n"
                    "  call void @__memlens_roi_begin(i8* %n)\n  ret void\n}\n",
                    &r);
    assert_int_equal(r.rc, -EINVAL);
    assert_non_null(strstr(r.err, "not a string literal"));
    free(r.ir);
}

/* "" is a zeroinitializer in IR: reported, not a crash. */
static void empty_name_is_an_error(void **state)
{
    struct result r;

    (void)state;
    instrument_text("@.e = private constant [1 x i8] zeroinitializer\n"
                    "define void @f() {\n"
                    "  call void @__memlens_roi_begin(i8* getelementptr ([1 x i8], [1 x i8]* @.e, "
                    "i64 0, i64 0))\n  ret void\n}\n",
                    &r);
    assert_int_equal(r.rc, -EINVAL);
    assert_string_equal(r.err, "function 'f': region name is empty");
    free(r.ir);
}

static void non_string_constant_is_an_error(void **state)
{
    struct result r;

    (void)state;
    instrument_text("@.k = private constant [2 x i32] [i32 1, i32 2]\n"
                    "define void @f() {\n"
                    "  call void @__memlens_roi_begin(i8* bitcast ([2 x i32]* @.k to i8*))\n"
                    "  ret void\n}\n",
                    &r);
    assert_int_equal(r.rc, -EINVAL);
    assert_string_equal(r.err, "function 'f': region name is not a string literal");
    free(r.ir);
    instrument_text("@.z = private constant [3 x i8] c\"a\\00b\"\n"
                    "define void @g() {\n"
                    "  call void @__memlens_roi_begin(i8* getelementptr ([3 x i8], [3 x i8]* @.z, "
                    "i64 0, i64 0))\n  ret void\n}\n",
                    &r);
    assert_int_equal(r.rc, -EINVAL);
    assert_string_equal(r.err, "function 'g': region name holds a NUL byte");
    free(r.ir);
}

/* An END whose region the function never begins ends nothing: a misspelt name. */
static void end_without_begin_is_an_error(void **state)
{
    struct result r;

    (void)state;
    instrument_text("define void @f() {\n  " BEGIN("r") "  " END("s") "  ret void\n}\n", &r);
    assert_int_equal(r.rc, -EINVAL);
    assert_string_equal(r.err, "function 'f': MEMLENS_ROI_END(\"s\") without a "
                               "MEMLENS_ROI_BEGIN(\"s\") in the same function");
    free(r.ir);
    /* a BEGIN without an END is fine: the region ends when the function returns */
    instrument_text("define void @f() {\n  " BEGIN("r") "  ret void\n}\n", &r);
    assert_int_equal(r.rc, 0);
    free(r.ir);
}

static void variable_memcpy_gets_a_bytes_unit(void **state)
{
    struct result r;
    char *f;

    (void)state;
    instrument_text(
        "declare void @llvm.memcpy.p0i8.p0i8.i64(i8*, i8*, i64, i1)\n"
        "define void @f(i8* %d, i8* %s, i64 %n) {\n  " BEGIN(
            "r") "  call void @llvm.memcpy.p0i8.p0i8.i64(i8* %d, i8* %s, i64 %n, i1 false)\n"
                 "  " END("r") "  ret void\n}\n",
        &r);
    assert_int_equal(r.rc, 0);
    f = function_body(r.ir, "f");
    /* one block unit (+1) and, for the destination and the source, whose class their
       addresses decide, a pair of bytes units of which one gets + %n */
    assert_int_equal(count(f, "zext i64 %n") + count(f, ", %n\n"), 2);
    assert_int_equal(count(f, "ptrtoint i8* %d"), 1);
    assert_int_equal(count(f, "ptrtoint i8* %s"), 1);
    free(f);
    free(r.ir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(no_markers_leaves_module_alone),
        cmocka_unit_test(loop_region_is_counted_and_markers_replaced),
        cmocka_unit_test(return_inside_region_ends_it),
        cmocka_unit_test(break_out_of_region_splits_the_edge),
        cmocka_unit_test(callees_are_cloned_per_region_set),
        cmocka_unit_test(non_literal_name_is_an_error),
        cmocka_unit_test(empty_name_is_an_error),
        cmocka_unit_test(non_string_constant_is_an_error),
        cmocka_unit_test(end_without_begin_is_an_error),
        cmocka_unit_test(variable_memcpy_gets_a_bytes_unit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
