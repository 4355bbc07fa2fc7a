/* Unit tests of the context manager (src/backend/context.c): interning, stacks, repair, merge. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "backend/context.h"

/* The same chain gets the same id; another chain another id; ids are dense. */
static void test_intern(void **state)
{
    struct ml_ctx *c = ml_ctx_new();
    uint32_t a, b, a2, ab, parent, kind;
    uint64_t id;

    (void)state;
    assert_non_null(c);
    a = ml_ctx_child(c, ML_CTX_ROOT, ML_CTX_FUNC, 7);
    b = ml_ctx_child(c, ML_CTX_ROOT, ML_CTX_LOOP, 7); /* same id, other kind */
    a2 = ml_ctx_child(c, ML_CTX_ROOT, ML_CTX_FUNC, 7);
    ab = ml_ctx_child(c, a, ML_CTX_LOOP, 7);
    assert_int_equal(a, 1);
    assert_int_equal(b, 2);
    assert_int_equal(a2, a);
    assert_int_equal(ab, 3);
    assert_int_equal(ml_ctx_count(c), 4);
    assert_int_equal(ml_ctx_depth(c, ab), 2);
    assert_int_equal(ml_ctx_depth(c, ML_CTX_ROOT), 0);
    assert_int_equal(ml_ctx_get(c, ab, &parent, &kind, &id), 0);
    assert_int_equal(parent, a);
    assert_int_equal(kind, ML_CTX_LOOP);
    assert_int_equal(id, 7);
    assert_int_equal(ml_ctx_get(c, ML_CTX_ROOT, &parent, &kind, &id), -1);
    assert_int_equal(ml_ctx_get(c, 99, &parent, &kind, &id), -1);
    ml_ctx_free(c);
}

/* Many contexts (table growth): every one found again, all distinct. */
static void test_many(void **state)
{
    struct ml_ctx *c = ml_ctx_new();
    enum { N = 20000 };
    uint32_t *ids = malloc(N * sizeof(*ids));

    (void)state;
    for (uint32_t i = 0; i < N; i++)
        ids[i] = ml_ctx_child(c, i % 3 ? ML_CTX_ROOT : 1, ML_CTX_FUNC, i);
    for (uint32_t i = 0; i < N; i++)
        assert_int_equal(ml_ctx_child(c, i % 3 ? ML_CTX_ROOT : 1, ML_CTX_FUNC, i), ids[i]);
    assert_int_equal(ml_ctx_count(c), N + 1);
    free(ids);
    ml_ctx_free(c);
}

/* Calls and loops: contexts, stamps per push, iteration counts per invocation. */
static void test_stack(void **state)
{
    struct ml_ctx *c = ml_ctx_new();
    struct ml_cstack *s = ml_cstack_new(c);
    uint32_t main_ctx, loop_ctx, f_in_loop;

    (void)state;
    assert_int_equal(ml_cstack_ctx(s), ML_CTX_ROOT);
    assert_int_equal(ml_cstack_push(s, ML_CTX_FUNC, 1), 0); /* main */
    main_ctx = ml_cstack_ctx(s);
    assert_int_equal(ml_cstack_push(s, ML_CTX_LOOP, 10), 0);
    loop_ctx = ml_cstack_ctx(s);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(s->f[1].iter, (uint64_t)i);
        assert_int_equal(ml_cstack_push(s, ML_CTX_FUNC, 2), 0); /* f called in the body */
        f_in_loop = ml_cstack_ctx(s);
        assert_int_equal(s->f[2].stamp, 3 + (uint64_t)i); /* a new stamp per call */
        assert_int_equal(ml_cstack_pop(s, ML_CTX_FUNC, 2), 0);
        assert_int_equal(ml_cstack_ctx(s), loop_ctx);
        assert_int_equal(ml_cstack_iter(s, 10), 0);
    }
    assert_int_equal(s->f[1].iter, 5);
    assert_int_equal(ml_cstack_pop(s, ML_CTX_LOOP, 10), 0);
    assert_int_equal(ml_cstack_ctx(s), main_ctx);
    /* the loop again: a new invocation, iterations from 0, the same context */
    assert_int_equal(ml_cstack_push(s, ML_CTX_LOOP, 10), 0);
    assert_int_equal(ml_cstack_ctx(s), loop_ctx);
    assert_int_equal(s->f[1].iter, 0);
    assert_int_not_equal(s->f[1].stamp, 2);
    assert_int_equal(ml_ctx_depth(c, f_in_loop), 3);
    ml_cstack_free(s);
    ml_ctx_free(c);
}

/* longjmp / exceptions: an exit pops the frames above; unknown exits are counted, ignored. */
static void test_repair(void **state)
{
    struct ml_ctx *c = ml_ctx_new();
    struct ml_cstack *s = ml_cstack_new(c);
    uint32_t outer;

    (void)state;
    ml_cstack_push(s, ML_CTX_FUNC, 1);
    outer = ml_cstack_ctx(s);
    ml_cstack_push(s, ML_CTX_LOOP, 5);
    ml_cstack_push(s, ML_CTX_FUNC, 2);
    ml_cstack_push(s, ML_CTX_LOOP, 6);
    /* function 1 returns (its callee longjmp'd out of the loops) */
    assert_int_equal(ml_cstack_pop(s, ML_CTX_FUNC, 1), 0);
    assert_int_equal(s->depth, 0);
    assert_int_equal(ml_cstack_pop(s, ML_CTX_FUNC, 1), -ENOENT);
    assert_int_equal(ml_cstack_iter(s, 5), -ENOENT);
    assert_int_equal(s->unmatched, 2);
    ml_cstack_push(s, ML_CTX_FUNC, 1);
    assert_int_equal(ml_cstack_ctx(s), outer);
    /* iterating an outer loop closes the frames opened in its body */
    ml_cstack_push(s, ML_CTX_LOOP, 5);
    ml_cstack_push(s, ML_CTX_FUNC, 3);
    assert_int_equal(ml_cstack_iter(s, 5), 0);
    assert_int_equal(s->depth, 2);
    assert_int_equal(s->f[1].iter, 1);
    /* recursion: the innermost frame of the function is the one closed */
    ml_cstack_push(s, ML_CTX_FUNC, 9);
    ml_cstack_push(s, ML_CTX_FUNC, 9);
    assert_int_equal(ml_cstack_pop(s, ML_CTX_FUNC, 9), 0);
    assert_int_equal(s->depth, 3);
    ml_cstack_free(s);
    ml_ctx_free(c);
}

/* Frames beyond ML_CSTACK_MAX are counted, not interned, and close first. */
static void test_deep(void **state)
{
    struct ml_ctx *c = ml_ctx_new();
    struct ml_cstack *s = ml_cstack_new(c);

    (void)state;
    for (uint32_t i = 0; i < ML_CSTACK_MAX + 10; i++)
        assert_int_equal(ml_cstack_push(s, ML_CTX_FUNC, 4), 0);
    assert_int_equal(s->depth, ML_CSTACK_MAX);
    assert_int_equal(s->over, 10);
    assert_int_equal(ml_ctx_count(c), ML_CSTACK_MAX + 1);
    for (uint32_t i = 0; i < 10; i++)
        ml_cstack_pop(s, ML_CTX_FUNC, 4);
    assert_int_equal(s->over, 0);
    assert_int_equal(s->depth, ML_CSTACK_MAX);
    ml_cstack_pop(s, ML_CTX_FUNC, 4);
    assert_int_equal(s->depth, ML_CSTACK_MAX - 1);
    ml_cstack_free(s);
    ml_ctx_free(c);
}

/* Two workers' interners: merge maps every context of one onto the same chain in the other. */
static void test_merge(void **state)
{
    struct ml_ctx *a = ml_ctx_new(), *b = ml_ctx_new();
    uint32_t a1, a2, b_other, b1, b2, *map;

    (void)state;
    a1 = ml_ctx_child(a, ML_CTX_ROOT, ML_CTX_FUNC, 1);
    a2 = ml_ctx_child(a, a1, ML_CTX_LOOP, 2);
    b_other = ml_ctx_child(b, ML_CTX_ROOT, ML_CTX_FUNC, 99); /* ids differ between workers */
    b1 = ml_ctx_child(b, ML_CTX_ROOT, ML_CTX_FUNC, 1);
    b2 = ml_ctx_child(b, b1, ML_CTX_LOOP, 2);
    map = ml_ctx_merge(a, b);
    assert_non_null(map);
    assert_int_equal(map[ML_CTX_ROOT], ML_CTX_ROOT);
    assert_int_equal(map[b1], a1);
    assert_int_equal(map[b2], a2);
    assert_int_equal(map[b_other], 3);
    assert_int_equal(ml_ctx_count(a), 4);
    free(map);
    ml_ctx_free(a);
    ml_ctx_free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_intern), cmocka_unit_test(test_many), cmocka_unit_test(test_stack),
        cmocka_unit_test(test_repair), cmocka_unit_test(test_deep), cmocka_unit_test(test_merge),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
