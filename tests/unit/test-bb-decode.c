/* Unit tests of bb's decoder: what is refused before running, and the memory operands kept. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "bb/bb.h"
#include "bb/sandbox.h"

static int check(const uint8_t *code, size_t len, struct ml_bb_result *r)
{
    memset(r, 0, sizeof(*r));
    return ml_bb_check(code, len, r);
}

static void test_runnable(void **state)
{
    static const uint8_t add_imul[] = {0x48, 0x01, 0xd8, 0x48, 0x0f, 0xaf, 0xc0}; /* add; imul */
    struct ml_bb_result r;

    (void)state;
    assert_int_equal(check(add_imul, sizeof(add_imul), &r), 0);
    assert_int_equal(r.n_insns, 2);
}

static void test_refused(void **state)
{
    static const struct {
        uint8_t code[8];
        size_t len;
        const char *detail;
    } cases[] = {
        {{0x0f, 0x05}, 2, "syscall (decoder) 'syscall'"},
        {{0x90, 0xcd, 0x80}, 3, "interrupt 'int'"},
        {{0xeb, 0xfe}, 2, "branch 'jmp'"},
        {{0x75, 0x00}, 2, "branch 'jne'"},
        {{0xe8, 0, 0, 0, 0}, 5, "branch 'call'"},
        {{0xc3}, 1, "branch 'ret'"},
        {{0xf4}, 1, "privileged instruction 'hlt'"},
        {{0x0f, 0x20, 0xc0}, 3, "privileged instruction 'mov'"}, /* mov %cr0,%rax */
        {{0x0f, 0x30}, 2, "privileged instruction 'wrmsr'"},
        {{0x06}, 1, "undecodable bytes"}, /* push %es: invalid in 64-bit mode */
    };
    struct ml_bb_result r;

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_int_equal(check(cases[i].code, cases[i].len, &r), 1);
        assert_int_equal(r.status, ML_BB_UNSUPPORTED);
        assert_string_equal(r.detail, cases[i].detail);
    }
    assert_int_equal(check(cases[0].code, 0, &r), 1);
    assert_string_equal(r.detail, "empty block");
    assert_true(ml_bb_privileged_at((const uint8_t *)"\xf4", 1));
    assert_false(ml_bb_privileged_at((const uint8_t *)"\x90", 1));
}

static void test_memory_operands(void **state)
{
    /* mov 0x10(%rbx,%rcx,4),%eax; push %rdx; lea (%rax),%rax; mov %rax,0x100(%rip) */
    static const uint8_t code[] = {0x8b, 0x44, 0x8b, 0x10, 0x52, 0x48, 0x8d, 0x00,
                                   0x48, 0x89, 0x05, 0x00, 0x01, 0x00, 0x00};
    struct ml_bb_insn in[8];
    int n = ml_bb_decode(code, sizeof(code), in, 8);

    (void)state;
    assert_int_equal(n, 4);
    assert_int_equal(in[0].n_mem, 1);
    assert_int_equal(in[0].mem[0].base, X86_REG_RBX);
    assert_int_equal(in[0].mem[0].index, X86_REG_RCX);
    assert_int_equal(in[0].mem[0].scale, 4);
    assert_int_equal(in[0].mem[0].disp, 0x10);
    assert_int_equal(in[0].mem[0].size, 4);
    assert_int_equal(in[0].mem[0].write, 0);
    assert_int_equal(in[1].n_mem, 1); /* push writes below the stack pointer */
    assert_int_equal(in[1].mem[0].base, X86_REG_RSP);
    assert_int_equal(in[1].mem[0].disp, -8);
    assert_int_equal(in[1].mem[0].write, 1);
    assert_int_equal(in[2].n_mem, 0); /* lea touches no memory */
    assert_int_equal(in[3].off, 8);
    assert_int_equal(in[3].n_mem, 1);
    assert_int_equal(in[3].mem[0].write, 1);
    assert_int_equal(in[3].rip_disp_off, 3); /* where job_build rewrites the displacement */
    assert_int_equal(in[3].rip_size, 8);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_runnable),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_memory_operands),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
