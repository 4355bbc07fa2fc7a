/*
 * Unit tests of the bb sandbox's guarantee and of its batch readers: the seccomp program run
 * by a small classic-BPF interpreter on every syscall number and on arguments one off the
 * allowed ones; the stub's size; bounded lines, CSV fields, the resume scan.
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>

#include <cmocka.h>

#include "bb/sandbox.h"

/* Classic BPF as seccomp uses it: absolute 32-bit loads, jumps on constants, returns. */
static uint32_t bpf_run(const struct ml_bb_ctl *ctl, const struct seccomp_data *d)
{
    const struct sock_filter *f = ctl->filter;
    uint32_t a = 0;

    for (unsigned pc = 0; pc < ctl->fprog_len;) {
        const struct sock_filter *i = &f[pc];

        switch (i->code) {
        case BPF_LD | BPF_W | BPF_ABS:
            assert_true(i->k + 4 <= sizeof(*d) && i->k % 4 == 0);
            memcpy(&a, (const char *)d + i->k, 4);
            pc++;
            break;
        case BPF_JMP | BPF_JA:
            pc += 1 + i->k;
            break;
        case BPF_JMP | BPF_JEQ | BPF_K:
            pc += 1 + (a == i->k ? i->jt : i->jf);
            break;
        case BPF_JMP | BPF_JGE | BPF_K:
            pc += 1 + (a >= i->k ? i->jt : i->jf);
            break;
        case BPF_JMP | BPF_JGT | BPF_K:
            pc += 1 + (a > i->k ? i->jt : i->jf);
            break;
        case BPF_RET | BPF_K:
            return i->k;
        default:
            fail_msg("unexpected BPF instruction %#x at %u", i->code, pc);
        }
    }
    fail_msg("the program runs off its end");
    return 0;
}

static struct ml_bb_ctl *ctl_with_filter(unsigned n_pmu)
{
    struct ml_bb_ctl *ctl = calloc(1, sizeof(*ctl));

    assert_non_null(ctl);
    for (unsigned k = 0; k < n_pmu; k++)
        ctl->pmu_fd[k] = 3 + k;
    ml_bb_seccomp_build(ctl, n_pmu);
    assert_true(ctl->fprog_len > 0 && ctl->fprog_len <= ML_BB_MAX_FILTER);
    assert_true(ctl->fprog_filter == ML_BB_CTL_ADDR + offsetof(struct ml_bb_ctl, filter));
    return ctl;
}

static struct seccomp_data call(int nr, uint64_t a0, uint64_t a1, uint64_t a2)
{
    struct seccomp_data d;

    memset(&d, 0, sizeof(d));
    d.nr = nr;
    d.arch = AUDIT_ARCH_X86_64;
    d.instruction_pointer = ML_BB_STUB_ADDR + 0x123;
    d.args[0] = a0;
    d.args[1] = a1;
    d.args[2] = a2;
    return d;
}

#define RU  (ML_BB_STATE_ADDR + offsetof(struct ml_bb_state, rusage))
#define RES (ML_BB_STATE_ADDR + offsetof(struct ml_bb_state, res))
#define RES_END                                                                                    \
    (ML_BB_STATE_ADDR + offsetof(struct ml_bb_state, res) + sizeof(((struct ml_bb_state *)0)->res))

static void test_filter_allows_exactly_the_stub_calls(void **state)
{
    struct ml_bb_ctl *ctl = ctl_with_filter(2);
    struct seccomp_data d;

    (void)state;
    d = call(SYS_getrusage, 1, RU, 0);
    assert_int_equal(bpf_run(ctl, &d), SECCOMP_RET_ALLOW);
    d = call(SYS_read, 4, RES, 8);
    assert_int_equal(bpf_run(ctl, &d), SECCOMP_RET_ALLOW);
    d = call(SYS_read, 3, RES_END - 8, 8);
    assert_int_equal(bpf_run(ctl, &d), SECCOMP_RET_ALLOW);
    d = call(SYS_mmap, 0x12345000, 4096, 3); /* the injected call: the harness decides */
    assert_int_equal(bpf_run(ctl, &d), SECCOMP_RET_TRACE);
    free(ctl);
}

static void test_filter_refuses_one_off(void **state)
{
    struct ml_bb_ctl *ctl = ctl_with_filter(2);
    struct seccomp_data d;
    const struct seccomp_data bad[] = {
        call(SYS_getrusage, 0, RU, 0),                /* RUSAGE_SELF */
        call(SYS_getrusage, 1 | (1ull << 32), RU, 0), /* high half */
        call(SYS_getrusage, 1, RU + 8, 0),            /* elsewhere */
        call(SYS_getrusage, 1, RU | (1ull << 63), 0), /* high half */
        call(SYS_read, 5, RES, 8),                    /* not a perf fd */
        call(SYS_read, 3 | (1ull << 32), RES, 8),     /* high half of the fd */
        call(SYS_read, 3, RES - 1, 8),                /* before the slots */
        call(SYS_read, 3, RES_END - 7, 8),            /* past them */
        call(SYS_read, 3, RES + (1ull << 32), 8),     /* high half of the buffer */
        call(SYS_read, 3, RES, 9),                    /* longer */
        call(SYS_read, 3, RES, 8 | (1ull << 32)),     /* high half of the length */
        call(SYS_read | 0x40000000, 3, RES, 8),       /* x32 */
        call(SYS_getrusage | 0x40000000, 1, RU, 0),   /* x32 */
    };

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        d = bad[i];
        if (bpf_run(ctl, &d) != SECCOMP_RET_TRAP)
            fail_msg("call %zu allowed", i);
    }
    /* the right call from anywhere but the stub's page, or through the i386 entry */
    d = call(SYS_getrusage, 1, RU, 0);
    d.instruction_pointer = ML_BB_STUB_ADDR + ML_BB_STUB_MAP;
    assert_int_equal(bpf_run(ctl, &d), SECCOMP_RET_TRAP);
    d.instruction_pointer = ML_BB_STUB_ADDR - 1;
    assert_int_equal(bpf_run(ctl, &d), SECCOMP_RET_TRAP);
    d.instruction_pointer = ML_BB_CODE_ADDR + 2;
    assert_int_equal(bpf_run(ctl, &d), SECCOMP_RET_TRAP);
    d.instruction_pointer = (ML_BB_STUB_ADDR + 0x123) | (1ull << 40);
    assert_int_equal(bpf_run(ctl, &d), SECCOMP_RET_TRAP);
    d = call(SYS_getrusage, 1, RU, 0);
    d.arch = AUDIT_ARCH_I386;
    assert_int_equal(bpf_run(ctl, &d), SECCOMP_RET_TRAP);
    free(ctl);
}

static void test_filter_refuses_every_other_number(void **state)
{
    struct ml_bb_ctl *ctl = ctl_with_filter(4);

    (void)state;
    for (int nr = 0; nr < 1024; nr++) {
        struct seccomp_data d = call(nr, 3, RES, 8);

        if (nr == SYS_read || nr == SYS_mmap)
            continue;
        if (nr == SYS_getrusage) {
            d = call(nr, 1, RU + 1, 0);
        }
        if (bpf_run(ctl, &d) != SECCOMP_RET_TRAP)
            fail_msg("syscall %d allowed", nr);
    }
    free(ctl);
}

static void test_filter_without_pmu_refuses_read(void **state)
{
    struct ml_bb_ctl *ctl = ctl_with_filter(0);
    struct seccomp_data d = call(SYS_read, 0, RES, 8);

    (void)state;
    for (uint64_t fd = 0; fd < 64; fd++) {
        d.args[0] = fd;
        assert_int_equal(bpf_run(ctl, &d), SECCOMP_RET_TRAP);
    }
    free(ctl);
}

static void test_stub_fits_its_page(void **state)
{
    (void)state;
    assert_true(ml_bb_stub_end - ml_bb_stub_start <= (long)ML_BB_STUB_MAP);
    assert_true(ml_bb_stub_gadget - ml_bb_stub_start < ml_bb_stub_end - ml_bb_stub_start);
}

static FILE *mem(const char *text)
{
    FILE *f = fmemopen((void *)text, strlen(text), "r");

    assert_non_null(f);
    return f;
}

static void test_line_read_is_bounded(void **state)
{
    char buf[8];
    int cut;
    FILE *f = mem("abc\n0123456789abcdef\nxy");

    (void)state;
    assert_int_equal(ml_bb_line_read(f, buf, sizeof(buf), &cut), 4);
    assert_string_equal(buf, "abc\n");
    assert_int_equal(cut, 0);
    assert_int_equal(ml_bb_line_read(f, buf, sizeof(buf), &cut), 7);
    assert_string_equal(buf, "0123456");
    assert_int_equal(cut, 1); /* the rest of the line is gone */
    assert_int_equal(ml_bb_line_read(f, buf, sizeof(buf), &cut), 2);
    assert_string_equal(buf, "xy");
    assert_int_equal(cut, 0);
    assert_int_equal(ml_bb_line_read(f, buf, sizeof(buf), &cut), 0);
    fclose(f);
}

static void test_csv_field(void **state)
{
    const char *row = " 4801d8 ,\"a, \"\"b\"\"\",,last\r\n";
    char out[16];

    (void)state;
    assert_int_equal(ml_bb_csv_field(row, 0, out, sizeof(out)), 0);
    assert_string_equal(out, "4801d8");
    assert_int_equal(ml_bb_csv_field(row, 1, out, sizeof(out)), 0);
    assert_string_equal(out, "a, \"b\"");
    assert_int_equal(ml_bb_csv_field(row, 2, out, sizeof(out)), 0);
    assert_string_equal(out, "");
    assert_int_equal(ml_bb_csv_field(row, 3, out, sizeof(out)), 0);
    assert_string_equal(out, "last");
    assert_int_equal(ml_bb_csv_field(row, 4, out, sizeof(out)), -ENOENT);
    assert_int_equal(ml_bb_csv_field(row, 1, out, 4), -E2BIG);
    assert_string_equal(out, "a, ");
}

#define HDR  "hex,throughput,u,u2,method,status,detail,signal,ratio,clean,agree,pages,flags,mca\n"
#define ROW  "4801d8,1.0000,100,200,tsc,ok,,0,0.7,32/32,9/9,0,,\n"
#define ROW2 "90,,0,0,,unsupported,\"not hex, \"\"x\"\"\",0,,,,0,,\n"

static void test_resume_scan(void **state)
{
    struct ml_bb_resume *rs = malloc(sizeof(*rs));
    static const char *const bad[] = {
        "hex\n" ROW,                                      /* another header */
        HDR "4801d8,1.0,100,200,tsc,fine,,0,0.7,,,0,,\n", /* unknown status */
        HDR "4801d8,1.0,100,200,tsc,ok\n",                /* too few fields */
    };
    static const char nul[] = HDR "90,,0,0,,ok,\"x\0y\",0,,,,0,,\n"; /* a NUL in a row */
    FILE *f;

    (void)state;
    assert_non_null(rs);
    f = mem("");
    assert_int_equal(ml_bb_resume_scan(f, HDR, rs), 0);
    assert_int_equal(rs->rows, 0);
    assert_int_equal(rs->end, 0);
    fclose(f);
    f = mem(HDR ROW ROW2 "4801d8,1.0"); /* a torn last row */
    assert_int_equal(ml_bb_resume_scan(f, HDR, rs), 0);
    assert_int_equal(rs->rows, 2);
    assert_int_equal(rs->end, (long)strlen(HDR ROW ROW2));
    assert_string_equal(rs->last, "90");
    fclose(f);
    for (size_t i = 0; i <= sizeof(bad) / sizeof(bad[0]); i++) {
        int nul_row = i == sizeof(bad) / sizeof(bad[0]);

        f = fmemopen((void *)(nul_row ? nul : bad[i]), nul_row ? sizeof(nul) - 1 : strlen(bad[i]),
                     "r");
        assert_non_null(f);
        if (ml_bb_resume_scan(f, HDR, rs) != -EINVAL)
            fail_msg("output %zu accepted", i);
        fclose(f);
    }
    free(rs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_filter_allows_exactly_the_stub_calls),
        cmocka_unit_test(test_filter_refuses_one_off),
        cmocka_unit_test(test_filter_refuses_every_other_number),
        cmocka_unit_test(test_filter_without_pmu_refuses_read),
        cmocka_unit_test(test_stub_fits_its_page),
        cmocka_unit_test(test_line_read_is_bounded),
        cmocka_unit_test(test_csv_field),
        cmocka_unit_test(test_resume_scan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
