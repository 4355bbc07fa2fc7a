/* Unit tests for selective machine-code tracing: operands, BID expressions, incarnations,
 * selection. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "instrument/asm/asm.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Encodings from llvm-mc-14 --show-encoding (relocated fields as zero). */
static const struct {
    const char *text, *hex;
} enc[] = {
    {"movq 8(%rax), %rbx", "48 8b 58 08"},
    {"movl %eax, -8(%rbp)", "89 45 f8"},
    {"addl %eax, (%rdi)", "01 07"},
    {"movl a(,%rax,4), %ecx", "8b 0c 85 00 00 00 00"},
    {"movl a+4(,%rax,4), %ecx", "8b 0c 85 00 00 00 00"},
    {"movq foo(%rip), %rax", "48 8b 05 00 00 00 00"},
    {"movq foo+8(%rip), %rax", "48 8b 05 00 00 00 00"},
    {"movq bar(%rip), %rax", "48 8b 05 00 00 00 00"},
    {"movl %eax, %fs:8", "64 89 04 25 08 00 00 00"},
    {"movl %fs:x@TPOFF, %eax", "64 8b 04 25 00 00 00 00"},
    {"movq foo@GOTPCREL(%rip), %rax", "48 8b 05 00 00 00 00"},
    {"vmovdqu64 %zmm1, (%rdi) {%k1}", "62 f1 fe 49 7f 0f"},
    {"vmovups (%rdi,%rax,4), %zmm2 {%k2} {z}", "62 f1 7c ca 10 14 87"},
    {"vpgatherdd %ymm1, (%rdi,%ymm2,4), %ymm3", "c4 e2 75 90 1c 97"},
    {"vpscatterdd %zmm3, (%rdi,%zmm2,4) {%k1}", "62 f2 7d 49 a0 1c 97"},
    {"vpgatherqd %xmm1, (%rdi,%ymm2,4), %xmm3", "c4 e2 75 91 1c 97"},
    {"vaddps (%rdi){1to16}, %zmm1, %zmm2", "62 f1 74 58 58 17"},
    {"pushq %rbx", "53"},
    {"pushq %r14", "41 56"},
    {"pushq 8(%rax)", "ff 70 08"},
    {"popq %rbx", "5b"},
    {"popq %r14", "41 5e"},
    {"callq *16(%rax)", "ff 50 10"},
    {"callq f", "e8 00 00 00 00"},
    {"retq", "c3"},
    {"movsb", "a4"},
    {"rep movsq", "f3 48 a5"},
    {"rep stosb", "f3 aa"},
    {"xchgq %rax, (%rdi)", "48 87 07"},
    {"lock cmpxchgq %rcx, (%rdi)", "f0 48 0f b1 0f"},
    {"leave", "c9"},
    {"leaq 8(%rdi), %rax", "48 8d 47 08"},
    {"leaq 16(%rdi), %rax", "48 8d 47 10"},
    {"leaq a(%rip), %rcx", "48 8d 0d 00 00 00 00"},
    {"prefetcht0 (%rdi)", "0f 18 0f"},
    {"nopw (%rax,%rax)", "66 0f 1f 04 00"},
    {"xlatb", "d7"},
    {"cmovel (%rdi), %eax", "0f 44 07"},
    {"vmaskmovps %ymm1, %ymm2, (%rdi)", "c4 e2 6d 2e 0f"},
    {"divq %rcx", "48 f7 f1"},
    {"cpuid", "0f a2"},
    {"syscall", "0f 05"},
    {"movb $1, %ah", "b4 01"},
    {"movw $1, %ax", "66 b8 01 00"},
    {"movb $1, %dil", "40 b7 01"},
    {"movl $a, %ecx", "b9 00 00 00 00"},
    {"movq (%rsp), %rax", "48 8b 04 24"},
    {"movq %rax, (%rsp)", "48 89 04 24"},
    {"movq %rax, 8(%rsp)", "48 89 44 24 08"},
    {"movq (%rax), %rcx", "48 8b 08"},
    {"movq (%rcx), %rax", "48 8b 01"},
    {"movq (%rdx), %rax", "48 8b 02"},
    {"movq (%rsi), %rax", "48 8b 06"},
    {"movq (%rbx), %rax", "48 8b 03"},
    {"movq (%r11), %rax", "49 8b 03"},
    {"movq (%rdi), %rax", "48 8b 07"},
    {"movq (%rdi), %rdx", "48 8b 17"},
    {"movq 8(%rdi), %rax", "48 8b 47 08"},
    {"movq 16(%rdi), %rdx", "48 8b 57 10"},
    {"movq 100(%rdi), %rax", "48 8b 47 64"},
    {"movq 200(%rdi), %rax", "48 8b 87 c8 00 00 00"},
    {"movq 1000(%rdi), %rax", "48 8b 87 e8 03 00 00"},
    {"movq (%rdi,%rsi,8), %rax", "48 8b 04 f7"},
    {"movq 8(%rdi,%rsi,8), %rax", "48 8b 44 f7 08"},
    {"movq 8(%rdi,%rsi,4), %rax", "48 8b 44 b7 08"},
    {"movq 8(%rsi,%rdi,8), %rax", "48 8b 44 fe 08"},
    {"movq 8(%rdi,%rbx,8), %rax", "48 8b 44 df 08"},
    {"movl (%rcx,%rax,4), %edx", "8b 14 81"},
    {"movq -16(%rbp,%rax,8), %rax", "48 8b 44 c5 f0"},
    {"movq (%rsi), %rdx", "48 8b 16"},
    {"addq $8, %rdi", "48 83 c7 08"},
    {"addl $8, %edi", "83 c7 08"},
    {"subq $24, %rsp", "48 83 ec 18"},
    {"incq %rdi", "48 ff c7"},
    {"decq %rdi", "48 ff cf"},
    {"movq %rdi, %rsi", "48 89 fe"},
    {"movl %edi, %esi", "89 fe"},
    {"jmp f", "eb 00"},
    {"jne f", "75 00"},
    {"jmpq *%rax", "ff e0"},
    {"jmpq *.LJTI0_0(,%rax,8)", "ff 24 c5 00 00 00 00"},
    {"ud2", "0f 0b"},
    {"fstpl 8(%rdi)", "dd 5f 08"},
    {"vmovdqu (%rdi), %ymm0", "c5 fe 6f 07"},
    {"movsbl (%rdi,%rsi), %eax", "0f be 04 37"},
    {"xorl %eax, %eax", "31 c0"},
    {"cmpl $3, (%rdi)", "83 3f 03"},
};

/* Operand texts live as long as the test program: the analysis points into them. */
static struct ml_asm_file files[512];
static int nfiles;

/* Decodes one instruction of the table as ml_asm_rewrite would (operands parsed from the text). */
static void insn_of(const char *text, struct ml_asm_insn *in)
{
    char line[256], err[128];
    uint8_t code[16];
    size_t n = 0;
    struct ml_asm_file *f;
    const char *hex = NULL;

    for (size_t i = 0; i < COUNT(enc); i++)
        if (!strcmp(enc[i].text, text))
            hex = enc[i].hex;
    if (!hex)
        fail_msg("no encoding for '%s'", text);
    for (const char *p = hex; *p; p += p[2] ? 3 : 2)
        code[n++] = (uint8_t)strtoul(p, NULL, 16);
    snprintf(line, sizeof(line), "\t%s\n", text);
    assert_true(nfiles < (int)COUNT(files));
    f = &files[nfiles++];
    assert_int_equal(ml_asm_parse(line, strlen(line), f, err, sizeof(err)), 0);
    assert_int_equal(f->line[0].kind, ML_ASM_INSN);
    assert_int_equal(ml_asm_decode(code, n, f->line[0].operands, in), 0);
}

static struct ml_asm_insn block[64];

/* Decodes a block given as instruction texts ending in NULL; returns its length. */
static int block_of(const char *const *text)
{
    int n = 0;

    for (; text[n]; n++)
        insn_of(text[n], &block[n]);
    return n;
}

static struct ml_asm_pick *bids(const char *const *text, int want)
{
    struct ml_asm_pick *p;
    int n = block_of(text);

    assert_int_equal(ml_asm_bids(block, n, &p), want);
    return p;
}

static int symeq(const char *sym, int len, const char *want)
{
    return want ? sym && (int)strlen(want) == len && !strncmp(sym, want, len) : !sym;
}

/* ---- displacements of every addressing form ---- */

static void check_disp(const char *op, int rc, const char *sym, int64_t disp)
{
    const char *s;
    size_t n;
    int64_t d;

    assert_int_equal(ml_asm_parse_disp(op, strlen(op), &s, &n, &d), rc);
    if (rc)
        return;
    if (!symeq(s, (int)n, sym))
        fail_msg("'%s': symbol '%.*s', want '%s'", op, (int)n, s ? s : "", sym ? sym : "(none)");
    assert_int_equal(d, disp);
}

static void test_parse_disp(void **state)
{
    (void)state;
    check_disp("(%rax)", 0, NULL, 0);
    check_disp("8(%rax)", 0, NULL, 8);
    check_disp("-8(%rbp)", 0, NULL, -8);
    check_disp("0x10(%rax,%rbx,4)", 0, NULL, 16);
    check_disp("(,%rax,8)", 0, NULL, 0);
    check_disp("-16(%rbp,%rax,8)", 0, NULL, -16);
    check_disp("a(,%rax,4)", 0, "a", 0);
    check_disp("a+8(,%rax,4)", 0, "a", 8);
    check_disp("a-8(%rip)", 0, "a", -8);
    check_disp("8+a(%rip)", 0, "a", 8);
    check_disp(".LCPI0_0(%rip)", 0, ".LCPI0_0", 0);
    check_disp("foo@GOTPCREL(%rip)", 0, "foo@GOTPCREL", 0);
    check_disp("%fs:x@TPOFF", 0, "x@TPOFF", 0);
    check_disp("%fs:x@TPOFF+12", 0, "x@TPOFF", 12);
    check_disp("%fs:8", 0, NULL, 8);
    check_disp("%fs:(%rax)", 0, NULL, 0);
    check_disp("%gs:0x28", 0, NULL, 40);
    check_disp("*16(%rax)", 0, NULL, 16);
    check_disp("*foo(%rip)", 0, "foo", 0);
    check_disp("0x1234", 0, NULL, 0x1234);
    check_disp("a", 0, "a", 0);
    check_disp("a-b(%rip)", 0, "a-b", 0); /* kept whole */
    check_disp("a+b+4(%rip)", 0, "a+b+4", 0);
    check_disp("$5", -22, NULL, 0);
    check_disp("%rax", -22, NULL, 0);
    check_disp("$a", -22, NULL, 0);
}

/* ---- operand semantics from Zydis ---- */

static const struct ml_asm_access *one(const char *text, int naccess, int k)
{
    static struct ml_asm_insn in;

    insn_of(text, &in);
    if (in.naccess != naccess)
        fail_msg("'%s': %d accesses, want %d", text, in.naccess, naccess);
    return &in.acc[k];
}

static void check_acc(const char *text, int naccess, int k, int dir, int base, int index, int scale,
                      int64_t disp, const char *sym, int size, int implicit, int count)
{
    const struct ml_asm_access *a = one(text, naccess, k);

    if (a->dir != dir || a->base != base || a->index != index || a->scale != scale ||
        a->disp != disp || !symeq(a->sym, a->symlen, sym) || a->size != size ||
        a->implicit != implicit || a->count != count)
        fail_msg("'%s' access %d: dir %d base %d index %d scale %d disp %lld sym %.*s size %d "
                 "implicit %d count %d",
                 text, k, a->dir, a->base, a->index, a->scale, (long long)a->disp, (int)a->symlen,
                 a->sym ? a->sym : "-", a->size, a->implicit, a->count);
}

#define L      ML_ASM_LOAD
#define S      ML_ASM_STORE
#define RW     (ML_ASM_LOAD | ML_ASM_STORE)
#define NO     ML_ASM_NOREG
#define RAX    0
#define RCX    1
#define RDX    2
#define RBX    3
#define RSP    4
#define RBP    5
#define RSI    6
#define RDI    7
#define R11    11
#define R14    14
#define BIT(r) (1u << (r))

static void test_decode_accesses(void **state)
{
    (void)state;
    /* explicit forms: base, base+disp, index*scale, symbol, RIP-relative, segment */
    check_acc("movq 8(%rax), %rbx", 1, 0, L, RAX, NO, 1, 8, NULL, 8, 0, ML_ASM_ONCE);
    check_acc("movl %eax, -8(%rbp)", 1, 0, S, RBP, NO, 1, -8, NULL, 4, 0, ML_ASM_ONCE);
    check_acc("addl %eax, (%rdi)", 1, 0, RW, RDI, NO, 1, 0, NULL, 4, 0, ML_ASM_ONCE);
    check_acc("cmpl $3, (%rdi)", 1, 0, L, RDI, NO, 1, 0, NULL, 4, 0, ML_ASM_ONCE);
    check_acc("movl a(,%rax,4), %ecx", 1, 0, L, NO, RAX, 4, 0, "a", 4, 0, ML_ASM_ONCE);
    check_acc("movl a+4(,%rax,4), %ecx", 1, 0, L, NO, RAX, 4, 4, "a", 4, 0, ML_ASM_ONCE);
    check_acc("movq -16(%rbp,%rax,8), %rax", 1, 0, L, RBP, RAX, 8, -16, NULL, 8, 0, ML_ASM_ONCE);
    check_acc("movsbl (%rdi,%rsi), %eax", 1, 0, L, RDI, RSI, 1, 0, NULL, 1, 0, ML_ASM_ONCE);
    check_acc("movq foo(%rip), %rax", 1, 0, L, ML_ASM_RIP, NO, 1, 0, "foo", 8, 0, ML_ASM_ONCE);
    check_acc("movq foo@GOTPCREL(%rip), %rax", 1, 0, L, ML_ASM_RIP, NO, 1, 0, "foo@GOTPCREL", 8, 0,
              ML_ASM_ONCE);
    check_acc("movl %eax, %fs:8", 1, 0, S, NO, NO, 1, 8, NULL, 4, 0, ML_ASM_ONCE);
    assert_int_equal(one("movl %eax, %fs:8", 1, 0)->seg, ML_ASM_SEG_FS);
    check_acc("movl %fs:x@TPOFF, %eax", 1, 0, L, NO, NO, 1, 0, "x@TPOFF", 4, 0, ML_ASM_ONCE);
    check_acc("jmpq *.LJTI0_0(,%rax,8)", 1, 0, L, NO, RAX, 8, 0, ".LJTI0_0", 8, 0, ML_ASM_ONCE);
    check_acc("cmovel (%rdi), %eax", 1, 0, L, RDI, NO, 1, 0, NULL, 4, 0, ML_ASM_ONCE);
    check_acc("fstpl 8(%rdi)", 1, 0, S, RDI, NO, 1, 8, NULL, 8, 0, ML_ASM_ONCE);
    check_acc("xchgq %rax, (%rdi)", 1, 0, RW, RDI, NO, 1, 0, NULL, 8, 0, ML_ASM_ONCE);
    check_acc("lock cmpxchgq %rcx, (%rdi)", 1, 0, RW, RDI, NO, 1, 0, NULL, 8, 0, ML_ASM_ONCE);
    /* vector: AVX2, AVX-512 masked loads and stores, broadcast, gathers and scatters */
    check_acc("vmovdqu (%rdi), %ymm0", 1, 0, L, RDI, NO, 1, 0, NULL, 32, 0, ML_ASM_ONCE);
    check_acc("vmovdqu64 %zmm1, (%rdi) {%k1}", 1, 0, S, RDI, NO, 1, 0, NULL, 64, 0, ML_ASM_ONCE);
    check_acc("vmovups (%rdi,%rax,4), %zmm2 {%k2} {z}", 1, 0, L, RDI, RAX, 4, 0, NULL, 64, 0,
              ML_ASM_ONCE);
    check_acc("vmaskmovps %ymm1, %ymm2, (%rdi)", 1, 0, S, RDI, NO, 1, 0, NULL, 32, 0, ML_ASM_ONCE);
    check_acc("vaddps (%rdi){1to16}, %zmm1, %zmm2", 1, 0, L, RDI, NO, 1, 0, NULL, 4, 0,
              ML_ASM_ONCE);
    check_acc("vpgatherdd %ymm1, (%rdi,%ymm2,4), %ymm3", 1, 0, L, RDI, ML_ASM_VREG, 4, 0, NULL, 4,
              0, ML_ASM_VSIB);
    assert_int_equal(one("vpgatherdd %ymm1, (%rdi,%ymm2,4), %ymm3", 1, 0)->elems, 8);
    check_acc("vpgatherqd %xmm1, (%rdi,%ymm2,4), %xmm3", 1, 0, L, RDI, ML_ASM_VREG, 4, 0, NULL, 4,
              0, ML_ASM_VSIB);
    assert_int_equal(one("vpgatherqd %xmm1, (%rdi,%ymm2,4), %xmm3", 1, 0)->elems, 4);
    check_acc("vpscatterdd %zmm3, (%rdi,%zmm2,4) {%k1}", 1, 0, S, RDI, ML_ASM_VREG, 4, 0, NULL, 4,
              0, ML_ASM_VSIB);
    assert_int_equal(one("vpscatterdd %zmm3, (%rdi,%zmm2,4) {%k1}", 1, 0)->elems, 16);
    /* implicit: the stack of push, pop, call, ret, leave; string operations */
    check_acc("pushq %rbx", 1, 0, S, RSP, NO, 1, -8, NULL, 8, 1, ML_ASM_ONCE);
    check_acc("pushq 8(%rax)", 2, 0, L, RAX, NO, 1, 8, NULL, 8, 0, ML_ASM_ONCE);
    check_acc("pushq 8(%rax)", 2, 1, S, RSP, NO, 1, -8, NULL, 8, 1, ML_ASM_ONCE);
    check_acc("popq %rbx", 1, 0, L, RSP, NO, 1, 0, NULL, 8, 1, ML_ASM_ONCE);
    check_acc("callq *16(%rax)", 2, 0, L, RAX, NO, 1, 16, NULL, 8, 0, ML_ASM_ONCE);
    check_acc("callq *16(%rax)", 2, 1, S, RSP, NO, 1, -8, NULL, 8, 1, ML_ASM_ONCE);
    check_acc("callq f", 1, 0, S, RSP, NO, 1, -8, NULL, 8, 1, ML_ASM_ONCE);
    check_acc("retq", 1, 0, L, RSP, NO, 1, 0, NULL, 8, 1, ML_ASM_ONCE);
    check_acc("leave", 1, 0, L, RBP, NO, 1, 0, NULL, 8, 1, ML_ASM_ONCE);
    check_acc("movsb", 2, 0, S, RDI, NO, 1, 0, NULL, 1, 1, ML_ASM_ONCE);
    check_acc("movsb", 2, 1, L, RSI, NO, 1, 0, NULL, 1, 1, ML_ASM_ONCE);
    check_acc("rep movsq", 2, 0, S, RDI, NO, 1, 0, NULL, 8, 1, ML_ASM_REP);
    check_acc("rep movsq", 2, 1, L, RSI, NO, 1, 0, NULL, 8, 1, ML_ASM_REP);
    check_acc("rep stosb", 1, 0, S, RDI, NO, 1, 0, NULL, 1, 1, ML_ASM_REP);
    /* left out: an address no expression holds */
    struct ml_asm_insn x;

    insn_of("xlatb", &x);
    assert_int_equal(x.naccess, 0);
    assert_int_equal(x.untraced, 1);
    /* no data access: address generation, prefetch, multi-byte nop */
    one("leaq 8(%rdi), %rax", 0, 0);
    one("prefetcht0 (%rdi)", 0, 0);
    one("nopw (%rax,%rax)", 0, 0);
}

static void check_regs(const char *text, unsigned written, int flow)
{
    struct ml_asm_insn in;

    insn_of(text, &in);
    if ((in.reg_written & written) != written || in.flow != flow)
        fail_msg("'%s': written %#x (want %#x among them), flow %d (want %d)", text, in.reg_written,
                 written, in.flow, flow);
}

static void test_decode_registers(void **state)
{
    (void)state;
    check_regs("divq %rcx", BIT(RAX) | BIT(RDX), ML_ASM_FLOW_NONE);
    check_regs("cpuid", BIT(RAX) | BIT(RBX) | BIT(RCX) | BIT(RDX), ML_ASM_FLOW_NONE);
    check_regs("syscall", BIT(RAX) | BIT(RCX) | BIT(R11), ML_ASM_FLOW_NONE);
    check_regs("callq f", BIT(RAX) | BIT(RCX) | BIT(RDX) | BIT(RSI) | BIT(RDI) | 0xf00 | BIT(RSP),
               ML_ASM_FLOW_CALL);
    check_regs("movb $1, %ah", BIT(RAX), ML_ASM_FLOW_NONE);
    check_regs("movw $1, %ax", BIT(RAX), ML_ASM_FLOW_NONE);
    check_regs("movb $1, %dil", BIT(RDI), ML_ASM_FLOW_NONE);
    check_regs("pushq %rbx", BIT(RSP), ML_ASM_FLOW_NONE);
    check_regs("popq %rbx", BIT(RSP) | BIT(RBX), ML_ASM_FLOW_NONE);
    check_regs("rep movsq", BIT(RSI) | BIT(RDI) | BIT(RCX), ML_ASM_FLOW_NONE);
    check_regs("lock cmpxchgq %rcx, (%rdi)", BIT(RAX), ML_ASM_FLOW_NONE);
    check_regs("jmp f", 0, ML_ASM_FLOW_JUMP);
    check_regs("jne f", 0, ML_ASM_FLOW_CJUMP);
    check_regs("jmpq *%rax", 0, ML_ASM_FLOW_IJUMP);
    check_regs("jmpq *.LJTI0_0(,%rax,8)", 0, ML_ASM_FLOW_IJUMP);
    check_regs("retq", BIT(RSP), ML_ASM_FLOW_RET);
    check_regs("ud2", 0, ML_ASM_FLOW_STOP);
    /* flags: what the emitter must preserve */
    struct ml_asm_insn in;

    insn_of("cmpl $3, (%rdi)", &in);
    assert_true(in.flags_written != 0);
    insn_of("cmovel (%rdi), %eax", &in);
    assert_true(in.flags_read != 0);
    insn_of("movq 8(%rax), %rbx", &in);
    assert_int_equal(in.flags_read | in.flags_written, 0);
}

/* ---- incarnations ---- */

static void check_bid(const struct ml_asm_pick *p, int base_inc, int64_t d)
{
    if (p->bid.base_inc != base_inc || p->bid.d != d)
        fail_msg("base %%%s#%d d %lld, want #%d d %lld", ml_asm_reg_name(p->bid.base),
                 p->bid.base_inc, (long long)p->bid.d, base_inc, (long long)d);
}

static void test_incarnation_subregister(void **state)
{
    const char *b[] = {"movq 8(%rax), %rbx", "movb $1, %ah",       "movq 8(%rax), %rbx",
                       "movw $1, %ax",       "movq 8(%rax), %rbx", NULL};
    struct ml_asm_pick *p = bids(b, 3);

    (void)state;
    check_bid(&p[0], 0, 8);
    check_bid(&p[1], 1, 8);
    check_bid(&p[2], 2, 8);
    assert_false(ml_asm_same_class(&p[0].bid, &p[1].bid));
    assert_false(ml_asm_same_class(&p[1].bid, &p[2].bid));
    assert_int_equal(p[0].bid.tmpl, 'R');
    free(p);
}

static void test_incarnation_stack(void **state)
{
    const char *b[] = {"pushq %rbx",
                       "pushq %r14",
                       "movq %rax, 8(%rsp)",
                       "movq (%rsp), %rax",
                       "popq %r14",
                       "popq %rbx",
                       "retq",
                       NULL};
    struct ml_asm_pick *p = bids(b, 7);
    static const int inc[] = {0, 1, 2, 2, 2, 3, 4};
    static const int64_t d[] = {-8, -16, -8, -16, -16, -8, 0};

    (void)state;
    for (int i = 0; i < 7; i++) {
        check_bid(&p[i], inc[i], d[i]);
        assert_true(ml_asm_same_class(&p[0].bid, &p[i].bid));
    }
    assert_int_equal(ml_asm_distance(&p[0].bid, &p[2].bid, 64), 1);
    assert_int_equal(ml_asm_distance(&p[1].bid, &p[4].bid, 64), 1);
    assert_int_equal(ml_asm_distance(&p[0].bid, &p[6].bid, 64), 2);
    free(p);
}

static void test_incarnation_clobbers(void **state)
{
    const char *div[] = {"movq (%rdx), %rax", "divq %rcx", "movq (%rdx), %rax", "movq (%rcx), %rax",
                         NULL};
    const char *cpuid[] = {"movq (%rbx), %rax", "cpuid", "movq (%rbx), %rax", "movq (%rsi), %rax",
                           NULL};
    const char *sys[] = {"movq (%r11), %rax", "movq (%rsi), %rdx", "syscall",
                         "movq (%r11), %rax", "movq (%rsi), %rdx", NULL};
    const char *call[] = {"movq (%rsi), %rax", "movq (%rbx), %rax", "callq f",
                          "movq (%rsi), %rax", "movq (%rbx), %rax", NULL};
    struct ml_asm_pick *p;

    (void)state;
    p = bids(div, 3);
    check_bid(&p[0], 0, 0);
    check_bid(&p[1], 1, 0); /* div writes %rdx */
    check_bid(&p[2], 0, 0); /* but not %rcx */
    free(p);
    p = bids(cpuid, 3);
    check_bid(&p[1], 1, 0);
    check_bid(&p[2], 0, 0);
    free(p);
    p = bids(sys, 4);
    check_bid(&p[2], 1, 0); /* syscall writes %r11 */
    check_bid(&p[3], 0, 0); /* not %rsi */
    free(p);
    p = bids(call, 5);
    check_bid(&p[2], 0, -8); /* the call's own push */
    check_bid(&p[3], 1, 0);  /* %rsi is caller-saved */
    check_bid(&p[4], 0, 0);  /* %rbx is callee-saved */
    assert_true(ml_asm_same_class(&p[1].bid, &p[4].bid));
    assert_false(ml_asm_same_class(&p[0].bid, &p[3].bid));
    free(p);
}

static void test_incarnation_linear(void **state)
{
    const char *b[] = {"leaq 16(%rdi), %rax", "movq (%rax), %rcx",
                       "movq 16(%rdi), %rdx", "addq $8, %rdi",
                       "movq (%rdi), %rdx",   "movq 8(%rdi), %rax",
                       "incq %rdi",           "decq %rdi",
                       "movq (%rdi), %rax",   "movq %rdi, %rsi",
                       "movq (%rsi), %rax",   "addl $8, %edi",
                       "movq (%rdi), %rax",   NULL};
    struct ml_asm_pick *p = bids(b, 7);
    static const int64_t d[] = {16, 16, 8, 16, 8, 8, 0};

    (void)state;
    for (int i = 0; i < 7; i++) {
        assert_int_equal(p[i].bid.d, d[i]);
        if (i < 6)
            assert_true(ml_asm_same_class(&p[0].bid, &p[i].bid));
    }
    assert_int_equal(p[0].bid.base, RAX);
    assert_int_equal(p[0].bid.base_inc, 1);
    assert_int_equal(ml_asm_distance(&p[0].bid, &p[1].bid, 64), 1);
    assert_int_equal(ml_asm_distance(&p[2].bid, &p[4].bid, 64), 1);
    assert_int_equal(ml_asm_distance(&p[3].bid, &p[5].bid, 16), 2);
    assert_false(ml_asm_same_class(&p[0].bid, &p[6].bid)); /* a 32-bit add is not folded */
    free(p);
}

static void test_bid_symbols(void **state)
{
    const char *b[] = {"leaq a(%rip), %rcx",
                       "movl (%rcx,%rax,4), %edx",
                       "movl a+4(,%rax,4), %ecx",
                       "movl a(,%rax,4), %ecx",
                       "movq foo(%rip), %rax",
                       "movq foo+8(%rip), %rax",
                       "movq bar(%rip), %rax",
                       "movl a(,%rax,4), %ecx",
                       "movl $a, %ecx",
                       "movl (%rcx,%rax,4), %edx",
                       "movl %eax, %fs:8",
                       "movl %fs:x@TPOFF, %eax",
                       NULL};
    struct ml_asm_pick *p = bids(b, 10);

    (void)state;
    /* lea a(%rip), %rcx; (%rcx,%rax,4) is a(,%rax,4): template IRR, symbol a */
    assert_int_equal(p[0].bid.tmpl, 'I');
    assert_true(symeq(p[0].bid.sym, p[0].bid.symlen, "a"));
    assert_int_equal(p[0].bid.base, NO);
    assert_int_equal(p[0].bid.index, RAX);
    assert_int_equal(ml_asm_distance(&p[0].bid, &p[1].bid, 64), 2);
    assert_int_equal(ml_asm_distance(&p[0].bid, &p[2].bid, 64), 1);
    /* RIP-relative: the symbol and offset, the instruction's address folded away */
    assert_int_equal(ml_asm_distance(&p[3].bid, &p[4].bid, 64), 2);
    assert_int_equal(p[4].bid.d, 8);
    assert_int_equal(ml_asm_distance(&p[3].bid, &p[5].bid, 4096), 3);
    /* %rax changed: another class; movl $a, %ecx gives the same expression again */
    assert_false(ml_asm_same_class(&p[0].bid, &p[6].bid));
    assert_int_equal(ml_asm_distance(&p[6].bid, &p[7].bid, 64), 1);
    /* absolute and TLS */
    assert_int_equal(p[8].bid.tmpl, 'I');
    assert_int_equal(p[8].bid.seg, ML_ASM_SEG_FS);
    assert_int_equal(p[8].bid.d, 8);
    assert_int_equal(ml_asm_distance(&p[8].bid, &p[9].bid, 4096), 3);
    free(p);
}

/* ---- distances at C = 16, 64, 4096 ---- */

static void test_distance(void **state)
{
    static const struct {
        int64_t delta;
        int level[3];
    } t[] = {
        {0, {1, 1, 1}},    {8, {2, 2, 2}},    {15, {2, 2, 2}},    {16, {3, 2, 2}},
        {-16, {3, 2, 2}},  {63, {3, 2, 2}},   {64, {3, 3, 2}},    {-100, {3, 3, 2}},
        {4095, {3, 3, 2}}, {4096, {3, 3, 3}}, {-4096, {3, 3, 3}}, {1 << 20, {3, 3, 3}},
    };
    static const uint32_t chunk[3] = {16, 64, 4096};
    struct ml_asm_bid a = {.tmpl = 'R',
                           .base = RDI,
                           .base_root = RDI,
                           .index = RSI,
                           .index_root = RSI,
                           .scale = 8,
                           .d = 24};

    (void)state;
    for (size_t i = 0; i < COUNT(t); i++)
        for (int c = 0; c < 3; c++) {
            struct ml_asm_bid b = a;

            b.d = a.d + t[i].delta;
            if (ml_asm_distance(&a, &b, chunk[c]) != t[i].level[c])
                fail_msg("delta %lld at C %u: level %d, want %d", (long long)t[i].delta, chunk[c],
                         ml_asm_distance(&a, &b, chunk[c]), t[i].level[c]);
            assert_int_equal(ml_asm_distance(&b, &a, chunk[c]), t[i].level[c]);
        }
    /* another class whatever the distance: base, index, scale, symbol, segment, template */
    struct ml_asm_bid b = a;

    b.base_root = 99;
    assert_int_equal(ml_asm_distance(&a, &b, 4096), 3);
    b = a, b.index_root = 99;
    assert_int_equal(ml_asm_distance(&a, &b, 4096), 3);
    b = a, b.scale = 4;
    assert_int_equal(ml_asm_distance(&a, &b, 4096), 3);
    b = a, b.seg = ML_ASM_SEG_FS;
    assert_int_equal(ml_asm_distance(&a, &b, 4096), 3);
    b = a, b.tmpl = 'I';
    assert_int_equal(ml_asm_distance(&a, &b, 4096), 3);
    b = a, b.unstable = 1;
    assert_int_equal(ml_asm_distance(&b, &b, 4096), 3);
    struct ml_asm_bid s1 = {.tmpl = 'I',
                            .sym = "arr",
                            .symlen = 3,
                            .base = NO,
                            .base_root = -1,
                            .index = NO,
                            .index_root = -1,
                            .scale = 1};
    struct ml_asm_bid s2 = s1;

    s2.symlen = 2; /* "ar" */
    assert_int_equal(ml_asm_distance(&s1, &s2, 4096), 3);
    s2 = s1, s2.sym = "arrX", s2.d = 8; /* the same three bytes, another string in memory */
    assert_int_equal(ml_asm_distance(&s1, &s2, 4096), 2);
    /* from decoded instructions: index scale and role matter */
    const char *blk[] = {"movq (%rdi,%rsi,8), %rax",  "movq 8(%rdi,%rsi,8), %rax",
                         "movq 8(%rdi,%rsi,4), %rax", "movq 8(%rsi,%rdi,8), %rax",
                         "movq 8(%rdi,%rbx,8), %rax", NULL};
    struct ml_asm_pick *p = bids(blk, 5);

    assert_int_equal(ml_asm_distance(&p[0].bid, &p[1].bid, 16), 2);
    for (int i = 2; i < 5; i++)
        assert_int_equal(ml_asm_distance(&p[1].bid, &p[i].bid, 4096), 3);
    free(p);
}

/* ---- parameters ---- */

static void test_params(void **state)
{
    struct ml_asm_params p = {.omega = 0.25, .chunk = 64, .mode = ML_ASM_AIA};
    char err[128];
    static const int bad[][3] = {{1, 1, 3}, {0, 2, 2}, {1, 2, 3}, {2, 1, 4}, {-1, 1, 3}, {2, 3, 5}};
    static const int good[][3] = {{0, 1, 2}, {1, 2, 4}, {0, 1, 16}, {0, 2, 4}, {2, 3, 6}};

    (void)state;
    for (size_t i = 0; i < COUNT(bad); i++) {
        memcpy(p.score, bad[i], sizeof(p.score));
        assert_int_equal(ml_asm_params_check(&p, err, sizeof(err)), -22);
    }
    for (size_t i = 0; i < COUNT(good); i++) {
        memcpy(p.score, good[i], sizeof(p.score));
        assert_int_equal(ml_asm_params_check(&p, err, sizeof(err)), 0);
    }
    ml_asm_default_scores(ML_ASM_MA, p.score);
    assert_int_equal(ml_asm_params_check(&p, err, sizeof(err)), 0);
    ml_asm_default_scores(ML_ASM_AIA, p.score);
    assert_int_equal(ml_asm_params_check(&p, err, sizeof(err)), 0);
    p.chunk = 48;
    assert_int_equal(ml_asm_params_check(&p, err, sizeof(err)), -22);
    p.chunk = 64, p.omega = 0;
    assert_int_equal(ml_asm_params_check(&p, err, sizeof(err)), -22);
    p.omega = 1.5;
    assert_int_equal(ml_asm_params_check(&p, err, sizeof(err)), -22);
}

/* ---- selection: steps A-C on hand-made blocks ---- */

static void select_block(const char *const *text, double omega, uint32_t chunk, int mode,
                         const int *score, struct ml_asm_result *r)
{
    struct ml_asm_params p = {.omega = omega, .chunk = chunk, .mode = mode};
    char err[128];
    int n = block_of(text);

    if (score)
        memcpy(p.score, score, sizeof(p.score));
    else
        ml_asm_default_scores(mode, p.score);
    assert_int_equal(ml_asm_params_check(&p, err, sizeof(err)), 0);
    assert_int_equal(ml_asm_select(block, n, &p, r), 0);
}

static void check_sel(const struct ml_asm_result *r, const int *selected, int n)
{
    int got = 0, weight = 0;

    for (int i = 0; i < r->m; i++) {
        int want = 0;

        for (int k = 0; k < n; k++)
            want |= selected[k] == i;
        if (r->pick[i].selected != want)
            fail_msg("access %d selected %d, want %d", i, r->pick[i].selected, want);
        got += want;
        if (r->pick[i].selected)
            weight += r->pick[i].weight;
        else
            assert_true(r->pick[r->pick[i].rep].selected);
    }
    assert_int_equal(r->nsel, got);
    assert_int_equal(weight, r->m); /* every access counted exactly once */
}

#define NEAR(a, b) assert_true((a) > (b)-1e-9 && (a) < (b) + 1e-9)

/* rdi: d = 0, 0, 8, 100, 100, 100, 200; rsi: d = 0 */
static const char *const eight[] = {
    "movq (%rdi), %rax",    "movq (%rdi), %rdx",    "movq 8(%rdi), %rax",
    "movq 100(%rdi), %rax", "movq 100(%rdi), %rax", "movq 100(%rdi), %rax",
    "movq 200(%rdi), %rax", "movq (%rsi), %rdx",    NULL};

static void test_select_steps(void **state)
{
    struct ml_asm_result r;

    (void)state;
    /* C = 64, aia scores 0:1:16. Step A: classes {rdi}, {rsi}; clusters {0,0,8}, {100 x3},
       {200}, {rsi 0}. Step B: values 47 (rep: the pair at 0), 48, 16, 16; refining 8: 1.
       Step C: W = ceil(0.25 * 8) = 2 takes 48 and 47. */
    select_block(eight, 0.25, 64, ML_ASM_AIA, NULL, &r);
    assert_int_equal(r.m, 8);
    assert_int_equal(r.budget, 2);
    assert_int_equal(r.nclass, 2);
    assert_int_equal(r.ncluster, 4);
    check_sel(&r, (int[]){0, 3}, 2);
    assert_int_equal(r.pick[3].value, 48);
    assert_int_equal(r.pick[0].value, 47);
    assert_int_equal(r.pick[0].why, ML_ASM_WHY_CLUSTER);
    assert_int_equal(r.pick[1].rep, 0);
    assert_int_equal(r.pick[1].level, 1);
    assert_int_equal(r.pick[2].rep, 0);
    assert_int_equal(r.pick[2].level, 2);
    assert_int_equal(r.pick[6].rep, 3); /* nearest in its class, 100 B away: a chunk off */
    assert_int_equal(r.pick[6].level, 3);
    assert_int_equal(r.pick[7].rep, 0); /* no representative in its class: the anchor */
    assert_int_equal(r.pick[7].level, 3);
    assert_int_equal(r.pick[0].weight, 4);
    assert_int_equal(r.pick[3].weight, 4);
    NEAR(r.aia, 6.0 / 8);
    NEAR(r.ma, (5 + (1 - 8.0 / 64)) / 8);
    ml_asm_result_free(&r);
    /* W = 4: the two singletons (ties by position) */
    select_block(eight, 0.5, 64, ML_ASM_AIA, NULL, &r);
    check_sel(&r, (int[]){0, 3, 6, 7}, 4);
    NEAR(r.aia, 1);
    NEAR(r.ma, (7 + (1 - 8.0 / 64)) / 8);
    ml_asm_result_free(&r);
    /* W = 5: the refinement */
    select_block(eight, 0.625, 64, ML_ASM_AIA, NULL, &r);
    check_sel(&r, (int[]){0, 2, 3, 6, 7}, 5);
    assert_int_equal(r.pick[2].why, ML_ASM_WHY_REFINE);
    assert_int_equal(r.pick[2].value, 1);
    NEAR(r.ma, 1);
    ml_asm_result_free(&r);
    /* W = 8 but only 5 items: duplicates add nothing */
    select_block(eight, 1, 64, ML_ASM_AIA, NULL, &r);
    assert_int_equal(r.budget, 8);
    check_sel(&r, (int[]){0, 2, 3, 6, 7}, 5);
    ml_asm_result_free(&r);
    /* C = 16: the same clusters; the near access is right half the time */
    select_block(eight, 0.25, 16, ML_ASM_AIA, NULL, &r);
    check_sel(&r, (int[]){0, 3}, 2);
    NEAR(r.ma, (5 + 0.5) / 8);
    ml_asm_result_free(&r);
    /* C = 4096: one cluster of 7 around the three at 100 (value 3*16 + 4*15), then rsi */
    select_block(eight, 0.25, 4096, ML_ASM_AIA, NULL, &r);
    assert_int_equal(r.ncluster, 2);
    check_sel(&r, (int[]){3, 7}, 2);
    assert_int_equal(r.pick[3].value, 108);
    assert_int_equal(r.pick[3].weight, 7);
    NEAR(r.aia, 1);
    NEAR(r.ma, (8 - (100 + 100 + 92 + 100) / 4096.0) / 8);
    ml_asm_result_free(&r);
    /* ma scores 0:2:4 order the same items the same way here */
    select_block(eight, 0.25, 64, ML_ASM_MA, NULL, &r);
    check_sel(&r, (int[]){0, 3}, 2);
    assert_int_equal(r.pick[0].value, 10);
    assert_int_equal(r.pick[3].value, 12);
    ml_asm_result_free(&r);
}

static void test_select_refine_first(void **state)
{
    /* rdi: three at 0, three at 8; rsi: one. */
    static const char *const b[] = {
        "movq (%rdi), %rax",  "movq (%rdi), %rdx",  "movq (%rdi), %rax", "movq 8(%rdi), %rax",
        "movq 8(%rdi), %rax", "movq 8(%rdi), %rax", "movq (%rsi), %rdx", NULL};
    struct ml_asm_result r;

    (void)state;
    /* ma (0:2:4): cluster 3*4 + 3*2 = 18, refining the three at 8 is worth 6 > rsi's 4 */
    select_block(b, 0.25, 64, ML_ASM_MA, NULL, &r);
    assert_int_equal(r.budget, 2);
    check_sel(&r, (int[]){0, 3}, 2);
    assert_int_equal(r.pick[3].why, ML_ASM_WHY_REFINE);
    assert_int_equal(r.pick[3].value, 6);
    NEAR(r.ma, 6.0 / 7);
    NEAR(r.aia, 6.0 / 7);
    ml_asm_result_free(&r);
    /* aia (0:1:16): covering rsi (16) beats refining (3) */
    select_block(b, 0.25, 64, ML_ASM_AIA, NULL, &r);
    check_sel(&r, (int[]){0, 6}, 2);
    NEAR(r.aia, 1);
    NEAR(r.ma, (4 + 3 * (1 - 8.0 / 64)) / 7);
    ml_asm_result_free(&r);
    /* scores 1:2:4 (s1 > 0): cluster 3*3 + 3*2 = 15, refining 3*(2-1) = 3, rsi 3: ties go to
       clusters */
    select_block(b, 0.25, 64, ML_ASM_MA, (int[]){1, 2, 4}, &r);
    check_sel(&r, (int[]){0, 6}, 2);
    assert_int_equal(r.pick[0].value, 15);
    ml_asm_result_free(&r);
}

static void test_select_forced_and_ns(void **state)
{
    static const char *const b[] = {"rep movsq", "movq (%rdi), %rax", "movq 8(%rdi), %rax",
                                    "rep stosb", NULL};
    struct ml_asm_result r;

    (void)state;
    /* 5 accesses, 3 forced (outside the budget); W = 2 takes the cluster and its refinement */
    select_block(b, 0.25, 64, ML_ASM_AIA, NULL, &r);
    assert_int_equal(r.m, 5);
    assert_int_equal(r.budget, 2);
    check_sel(&r, (int[]){0, 1, 2, 3, 4}, 5);
    assert_int_equal(r.pick[0].why, ML_ASM_WHY_FORCED);
    assert_int_equal(r.pick[4].why, ML_ASM_WHY_FORCED);
    assert_int_equal(r.pick[2].why, ML_ASM_WHY_CLUSTER);
    ml_asm_result_free(&r);
    select_block(b, 0.1, 64, ML_ASM_AIA, NULL, &r);
    check_sel(&r, (int[]){0, 1, 2, 4}, 4);
    assert_int_equal(r.pick[3].rep, 2);
    assert_int_equal(r.pick[3].level, 2);
    ml_asm_result_free(&r);
    select_block(b, 0.1, 64, ML_ASM_NS, NULL, &r);
    check_sel(&r, (int[]){0, 1, 2, 3, 4}, 5);
    NEAR(r.ma, 1);
    NEAR(r.aia, 1);
    ml_asm_result_free(&r);
    /* a block without accesses */
    select_block((const char *const[]){"xorl %eax, %eax", NULL}, 0.25, 64, ML_ASM_AIA, NULL, &r);
    assert_int_equal(r.m, 0);
    ml_asm_result_free(&r);
}

/* ---- files: lines, units, encodings, blocks ---- */

static const char file_text[] =
    "\t.text\n"
    "\t.file\t\"t.c\"\n"
    "\t.globl\tf                # -- Begin function f\n"
    "\t.type\tf,@function\n"
    "f:                              # @f\n"
    "\t.cfi_startproc\n"
    "\tmovq\t(%rdi), %rax\n"             /* unit 0, block 0 (f) */
    "\txorl\t%eax, %eax   # a comment\n" /* unit 1 */
    "\tjne\t.LBB0_2\n"                   /* unit 2 */
    "# %bb.1:\n"
    "\tmovq\t8(%rdi), %rax\n" /* unit 3, block 1: after a jump */
    ".Ltmp0:\n"
    "\tcallq\tf\n"             /* unit 4, block 2: .Ltmp0 is in the except table */
    "\tmovq\t16(%rdi), %rax\n" /* unit 5, block 3: after a call */
    ".LBB0_2:\n"
    "\tmovq\t24(%rdi), %rax\n" /* unit 6, block 4: a jump target */
    ".Ltmp1:\n"
    "\t#APP\n"
    "\tnop\n"
    "\t#NO_APP\n"
    "\tdata16\n"
    "\tleaq\tx@TLSGD(%rip), %rdi\n" /* unit 7, block 5: after inline assembly */
    "\tdata16\n"
    "\tdata16\n"
    "\trex64\n"
    "\tcallq\t__tls_get_addr@PLT\n" /* unit 8 */
    "\trep movsq\n"                 /* unit 9, block 6 */
    "\tretq\n"                      /* unit 10 */
    ".Lfunc_end0:\n"
    "\t.size\tf, .Lfunc_end0-f\n"
    "\t.cfi_endproc\n"
    "\t.section\t.rodata,\"a\",@progbits\n"
    "\t.quad\t.LBB0_2\n"
    "\t.section\t.debug_info,\"\",@progbits\n"
    "\t.quad\t.Ltmp1\n"
    "\t.section\t.gcc_except_table,\"a\",@progbits\n"
    "\t.uleb128 .Ltmp0-f\n"
    "\t.section\t.text.unlikely.,\"ax\",@progbits\n"
    "\t.type\tg,@function\n"
    "\"g\":\n"
    "\tretq\n"; /* unit 11, block 7 */

static const char *const unit_hex[] = {
    "0x48,0x8b,0x07",
    "0x31,0xc0",
    "0x75,A",
    "0x48,0x8b,0x47,0x08",
    "0xe8,A,A,A,A",
    "0x48,0x8b,0x47,0x10",
    "0x48,0x8b,0x47,0x18",
    "0x66]\n\tleaq x@TLSGD(%rip), %rdi # encoding: [0x48,0x8d,0x3d,A,A,A,A",
    "0x66]\n\tdata16 # encoding: [0x66]\n\trex64 # encoding: [0x48]\n"
    "\tcallq __tls_get_addr@PLT # encoding: [0xe8,A,A,A,A]\n"
    "                #   fixup A - offset: 1, value: __tls_get_addr@PLT-4, kind: FK_PCRel_4\n"
    "\tx # encoding: [",
    "0xf3,0x48,0xa5",
    "0xc3",
    "0xc3"};

/* llvm-mc's output for the annotated file: labels, directives and encoded instructions. */
static char *fake_mc(int skip)
{
    static char buf[8192];
    size_t n = 0;

    n += snprintf(buf + n, sizeof(buf) - n, "\t.text\nf:\n");
    for (int k = 0; k < (int)COUNT(unit_hex); k++) {
        if (k == skip)
            continue;
        n += snprintf(buf + n, sizeof(buf) - n, ".Lmemlens_e%d:\n\tinsn # encoding: [%s]\n", k,
                      unit_hex[k]);
        if (k == 2)
            n += snprintf(buf + n, sizeof(buf) - n, "\t.cfi_def_cfa_offset 16\n.LBB0_2:\n");
    }
    return buf;
}

static void test_file(void **state)
{
    struct ml_asm_file f;
    struct ml_asm_units u;
    struct ml_asm_insn insn[16];
    struct ml_asm_block *b;
    char err[256], *mc;
    static const int first[] = {0, 3, 4, 5, 6, 7, 9, 11}, label[] = {1, 0, 1, 0, 1, 0, 0, 1};
    FILE *out;
    char *text = NULL;
    size_t size = 0;

    (void)state;
    assert_int_equal(ml_asm_parse(file_text, strlen(file_text), &f, err, sizeof(err)), 0);
    assert_int_equal(f.nfunc, 2);
    assert_string_equal(f.func[0].name, "f");
    assert_string_equal(f.func[1].name, "g");
    assert_true(ml_asm_is_referenced(&f, ".LBB0_2"));
    assert_true(ml_asm_is_referenced(&f, ".Ltmp0"));
    assert_false(ml_asm_is_referenced(&f, ".Ltmp1")); /* only in a debug section */
    assert_int_equal(ml_asm_units(&f, &u), 0);
    assert_int_equal(u.n, 12);
    assert_string_equal(f.line[u.first[7]].name, "data16");
    assert_string_equal(f.line[u.last[7]].name, "leaq");
    assert_string_equal(f.line[u.last[9]].operands, "");
    assert_string_equal(f.line[u.last[1]].operands, "%eax, %eax");
    /* the annotated file labels every unit */
    out = open_memstream(&text, &size);
    assert_int_equal(ml_asm_annotate(&f, &u, out), 0);
    fclose(out);
    assert_non_null(strstr(text, ".Lmemlens_e7:\n\tdata16\n\tleaq"));
    assert_non_null(strstr(text, ".Lmemlens_e11:\n\tretq"));
    free(text);
    /* a missing unit is an error with the count */
    mc = fake_mc(5);
    assert_int_equal(ml_asm_read_encodings(mc, strlen(mc), &u, err, sizeof(err)), -22);
    assert_non_null(strstr(err, "11 of 12"));
    ml_asm_units_free(&u);
    assert_int_equal(ml_asm_units(&f, &u), 0);
    mc = fake_mc(-1);
    assert_int_equal(ml_asm_read_encodings(mc, strlen(mc), &u, err, sizeof(err)), 0);
    assert_int_equal(u.len[7], 8); /* data16 + leaq */
    assert_int_equal(u.len[8], 8); /* data16 data16 rex64 call */
    assert_int_equal(u.code[8][3], 0xe8);
    for (int k = 0; k < u.n; k++)
        assert_int_equal(ml_asm_decode(u.code[k], u.len[k], f.line[u.last[k]].operands, &insn[k]),
                         0);
    assert_int_equal(insn[8].flow, ML_ASM_FLOW_CALL);
    assert_int_equal(insn[9].acc[0].count, ML_ASM_REP);
    assert_int_equal(ml_asm_blocks(&f, &u, insn, &b), (int)COUNT(first));
    for (int i = 0; i < (int)COUNT(first); i++) {
        assert_int_equal(b[i].first, first[i]);
        assert_int_equal(b[i].end, i + 1 < (int)COUNT(first) ? first[i + 1] : u.n);
        assert_int_equal(b[i].label_line >= 0, label[i]);
    }
    assert_int_equal(b[7].func, 1);
    assert_true(b[3].after_call && b[6].after_call);
    assert_false(b[1].after_call || b[2].after_call || b[4].after_call || b[5].after_call);
    /* chains: the blocks after "callq f" and after the TLS call join their calls' blocks */
    static const int chained[] = {0, 3, 4, 6, 7, 11};
    assert_int_equal(ml_asm_chain_calls(&f, &u, b, (int)COUNT(first)), (int)COUNT(chained));
    for (int i = 0; i < (int)COUNT(chained); i++)
        assert_int_equal(b[i].first, chained[i]);
    assert_int_equal(b[2].end, 6);
    free(b);
    /* the whole file: explanation and unchanged output */
    struct ml_asm_opts o = {.params = {.omega = 0.25, .chunk = 64, .mode = ML_ASM_AIA},
                            .name = "t.c"};
    struct ml_asm_stats st;
    char *ex = NULL;
    size_t exn = 0;

    ml_asm_default_scores(ML_ASM_AIA, o.params.score);
    o.explain = open_memstream(&ex, &exn);
    out = open_memstream(&text, &size);
    assert_int_equal(ml_asm_rewrite(&f, &u, &o, out, &st, err, sizeof(err)), 0);
    fclose(out);
    fclose(o.explain);
    /* every line of the input, in order, with record sequences and tables added */
    const char *at = text;

    for (const char *l = file_text; *l;) {
        const char *e = strchr(l, '\n');
        char line[256];

        snprintf(line, sizeof(line), "%.*s\n", (int)(e - l), l);
        at = strstr(at, line);
        if (!at)
            fail_msg("line '%.*s' missing or out of order", (int)(e - l), l);
        at += strlen(line);
        l = e + 1;
    }
    assert_non_null(strstr(text, "\tcall\t*__memlens_asm_flush@GOTPCREL(%rip)\n"));
    assert_non_null(strstr(text, "\tjmpq\t*__memlens_trace_register@GOTPCREL(%rip)\n"));
    assert_non_null(strstr(text, ".init_array"));
    /* the TLS sequence stays whole; the rep string operation records its count */
    assert_non_null(strstr(text, "\tdata16\n\tleaq\tx@TLSGD(%rip), %rdi\n\tdata16\n\tdata16\n"
                                 "\trex64\n\tcallq\t__tls_get_addr@PLT\n"));
    assert_non_null(strstr(text, "\tmovq\t%rcx, -40(%"));
    assert_non_null(strstr(text, "\tmovq\t%rdi, -56(%"));
    assert_non_null(strstr(text, "\tmovq\t%rsi, -24(%"));
    assert_int_equal(st.blocks, 6); /* selection units: two call chains joined */
    assert_int_equal(st.tls, 2);
    assert_int_equal(st.forced, 2);
    assert_non_null(strstr(ex, "function f\n"));
    assert_non_null(strstr(ex, "TLS sequence: left alone"));
    assert_non_null(strstr(ex, "block 3 .LBB0_2"));
    free(ex);
    free(text);
    ml_asm_units_free(&u);
    ml_asm_file_free(&f);
}

/* Parses text (whose units have the encodings hex[]) with its encodings. */
static void load_text(const char *text, const char *const *hex, int nhex, struct ml_asm_file *f,
                      struct ml_asm_units *u)
{
    char err[256], mc[2048];
    size_t n = 0;

    assert_int_equal(ml_asm_parse(text, strlen(text), f, err, sizeof(err)), 0);
    assert_int_equal(ml_asm_units(f, u), 0);
    assert_int_equal(u->n, nhex);
    n += snprintf(mc + n, sizeof(mc) - n, "\t.text\nh:\n");
    for (int k = 0; k < nhex; k++)
        n += snprintf(mc + n, sizeof(mc) - n, ".Lmemlens_e%d:\n\tinsn # encoding: [%s]\n", k,
                      hex[k]);
    assert_int_equal(ml_asm_read_encodings(mc, n, u, err, sizeof(err)), 0);
}

/* The text of a file holding one function h of the given body. */
static void h_text(char *out, size_t n, const char *body)
{
    snprintf(out, n,
             "\t.text\n\t.globl\th\n\t.type\th,@function\nh:\n\t.cfi_startproc\n%s"
             ".Lfunc_end2:\n\t.size\th, .Lfunc_end2-h\n\t.cfi_endproc\n",
             body);
}

/* Rewrites text (load_text) with params p and returns the rewritten assembly. */
static char *rewrite_text(const char *body, const char *const *hex, int nhex,
                          const struct ml_asm_params *p, char **explain)
{
    struct ml_asm_file f;
    struct ml_asm_units u;
    struct ml_asm_opts o = {.params = *p, .name = "t.c"};
    struct ml_asm_stats st;
    char err[256], *text = NULL;
    size_t size = 0, esize = 0;
    FILE *out;

    load_text(body, hex, nhex, &f, &u);
    if (explain)
        o.explain = open_memstream(explain, &esize);
    out = open_memstream(&text, &size);
    assert_int_equal(ml_asm_rewrite(&f, &u, &o, out, &st, err, sizeof(err)), 0);
    fclose(out);
    if (explain)
        fclose(o.explain);
    ml_asm_units_free(&u);
    ml_asm_file_free(&f);
    return text;
}

/* Rewrites function h (load_h) with params p and returns the rewritten assembly. */
static char *rewrite_h(const char *body, const char *const *hex, int nhex,
                       const struct ml_asm_params *p, char **explain)
{
    char text_in[1024];

    h_text(text_in, sizeof(text_in), body);
    return rewrite_text(text_in, hex, nhex, p, explain);
}

/* Rewrites function h in ns mode. */
static char *rewrite_ns(const char *body, const char *const *hex, int nhex)
{
    struct ml_asm_params p = {.omega = 1, .chunk = 64, .mode = ML_ASM_NS};

    ml_asm_default_scores(ML_ASM_NS, p.score);
    return rewrite_h(body, hex, nhex, &p, NULL);
}

/*
 * spmv's inner loop: x[col[j]]'s address is known only after col[j]'s load,
 * while val[j] and col[j] keep their registers there: one segment, placed
 * before the third access, records all three.
 */
static void test_segment_moves_down(void **state)
{
    static const char body[] = ".LBB2_1:\n"
                               "\tmovsd\t(%rbx,%rdx,8), %xmm2\n"
                               "\tmovslq\t(%r13,%rdx,4), %rax\n"
                               "\tmulsd\t(%rbp,%rax,8), %xmm2\n"
                               "\taddq\t$1, %rdx\n"
                               "\tjne\t.LBB2_1\n"
                               "\tretq\n";
    static const char *const hex[] = {"0xf2,0x0f,0x10,0x14,0xd3",
                                      "0x49,0x63,0x44,0x95,0x00",
                                      "0xf2,0x0f,0x59,0x54,0xc5,0x00",
                                      "0x48,0x83,0xc2,0x01",
                                      "0x75,A",
                                      "0xc3"};
    char *text = rewrite_ns(body, hex, (int)COUNT(hex));
    const char *seg, *load, *next;

    (void)state;
    /* the loop block: one segment of three addresses, after the index load */
    load = strstr(text, "\tmovslq\t(%r13,%rdx,4), %rax\n");
    seg = strstr(text, "# memlens record {");
    assert_non_null(load);
    assert_non_null(seg);
    assert_true(seg > load);
    next = strstr(seg + 1, "# memlens record {");
    assert_true(!next || next > strstr(text, "\tjne\t.LBB2_1"));
    assert_non_null(strstr(seg, "leaq\t0(%rbx,%rdx,8), %"));
    assert_non_null(strstr(seg, "leaq\t0(%r13,%rdx,4), %"));
    assert_non_null(strstr(seg, "leaq\t0(%rbp,%rax,8), %"));
    assert_true(strstr(seg, "leaq\t0(%rbp,%rax,8), %") < strstr(text, "\tmulsd\t"));
    free(text);
}

/*
 * The common path of a leaf's record with dead scratch registers and dead
 * flags: no red-zone step (the slow path takes it), the words filled below
 * the segment's end, an address that is a register's value stored as it is,
 * and the commit one store (docs/select.md, "The sequence").
 */
static void test_record_sequence(void **state)
{
    static const char body[] = "\tmovq\t(%rdi), %rax\n"
                               "\taddq\t8(%rdi), %rax\n"
                               "\tretq\n";
    static const char *const hex[] = {"0x48,0x8b,0x07", "0x48,0x03,0x47,0x08", "0xc3"};
    static const char common[] = ".Lmemlens_ok0:\n"
                                 "\tleaq\t.Lmemlens_segs+0(%rip), %rax\n"
                                 "\tmovq\t%rax, -32(%rcx)\n"
                                 "\tmovq\t%rdi, -24(%rcx)\n"
                                 "\tleaq\t8(%rdi), %rax\n"
                                 "\tmovq\t%rax, -16(%rcx)\n"
                                 "\tmovq\t%rsp, -8(%rcx)\n"
                                 "\tmovq\t%rcx, %fs:__memlens_tb_ptr@TPOFF\n"
                                 "# memlens record }\n"
                                 "\tmovq\t(%rdi), %rax\n";
    static const char check[] = "# memlens record {\n"
                                "\tmovq\t%fs:__memlens_tb_ptr@TPOFF, %rax\n"
                                "\tleaq\t32(%rax), %rcx\n"
                                "\tcmpq\t%fs:__memlens_tb_end@TPOFF, %rcx\n"
                                "\tjbe\t.Lmemlens_ok0\n"
                                "\tleaq\t-128(%rsp), %rsp\n"
                                "\t.cfi_adjust_cfa_offset 128\n"
                                "\tpushq\t$4\n";
    static const char slow_end[] = "\tpopq\t%rax\n"
                                   "\t.cfi_adjust_cfa_offset -8\n"
                                   "\tleaq\t128(%rsp), %rsp\n"
                                   "\t.cfi_adjust_cfa_offset -128\n"
                                   "\tleaq\t32(%rax), %rcx\n"
                                   ".Lmemlens_ok0:\n";
    char *text = rewrite_ns(body, hex, (int)COUNT(hex));

    (void)state;
    assert_non_null(strstr(text, check));
    assert_non_null(strstr(text, slow_end));
    assert_non_null(strstr(text, common));
    assert_null(strstr(strstr(text, common) + 1, "# memlens record {"));
    free(text);
}

/*
 * A tail call ("jmp g") enters another function: flags and the registers that
 * are neither arguments nor callee-saved are dead there, so the record before
 * it saves nothing; a jump to a block of the same function keeps the flags
 * live (the jne after it reads them), so the record before it saves them.
 */
static void test_tail_call(void **state)
{
    static const char body[] = "\taddq\t$32, %rsp\n"
                               "\tpopq\t%rbx\n"
                               "\tjmp\tg\n"
                               ".LBB0_2:\n"
                               "\taddq\t$1, %rax\n"
                               "\tmovq\t(%rdi), %rcx\n"
                               "\tjmp\t.LBB0_1\n"
                               ".LBB0_1:\n"
                               "\tjne\t.LBB0_2\n"
                               "\tretq\n";
    static const char *const hex[] = {
        "0x48,0x83,0xc4,0x20", "0x5b",   "0xe9,A,A,A,A", "0x48,0x83,0xc0,0x01",
        "0x48,0x8b,0x0f",      "0xeb,A", "0x75,A",       "0xc3"};
    char *text = rewrite_ns(body, hex, (int)COUNT(hex));
    const char *tail = strstr(text, "# memlens record {"), *pop = strstr(text, "\tpopq\t%rbx\n");
    const char *local = strstr(pop, "# memlens record {"), *load = strstr(text, "\tmovq\t(%rdi)");

    (void)state;
    assert_non_null(tail);
    assert_non_null(local);
    assert_true(tail < pop && local < load);
    assert_true(strstr(tail, "pushfq") > pop); /* none before the tail call */
    assert_true(strstr(tail, "\tpushq\t%") > pop);
    assert_true(strstr(local, "pushfq") < load);
    free(text);
}

/*
 * The classes of control-equivalent blocks of text (load_text), with the
 * callees folded into their callers when callees: leader per block.
 */
static int fold_text(const char *text, const char *const *hex, int nhex, struct ml_asm_fold *fold,
                     int callees)
{
    struct ml_asm_file f;
    struct ml_asm_units u;
    struct ml_asm_insn insn[32];
    struct ml_asm_block *b;
    int nb;

    load_text(text, hex, nhex, &f, &u);
    for (int k = 0; k < u.n; k++)
        assert_int_equal(ml_asm_decode(u.code[k], u.len[k], f.line[u.last[k]].operands, &insn[k]),
                         0);
    nb = ml_asm_chain_calls(&f, &u, b, ml_asm_blocks(&f, &u, insn, &b));
    assert_int_equal(ml_asm_fold_equivalent(&f, &u, insn, b, nb, fold), 0);
    if (callees)
        assert_int_equal(ml_asm_fold_callees(&f, &u, insn, b, nb, fold), 0);
    free(b);
    ml_asm_units_free(&u);
    ml_asm_file_free(&f);
    return nb;
}

/* The classes of control-equivalent blocks of function h (load_h): leader per block. */
static int fold_h(const char *body, const char *const *hex, int nhex, struct ml_asm_fold *fold)
{
    char text_in[1024];

    h_text(text_in, sizeof(text_in), body);
    return fold_text(text_in, hex, nhex, fold, 0);
}

/*
 * Control equivalence on hand-made graphs: a loop whose body is a diamond
 * (header and latch run equally often, as do the entry and the exit; the two
 * arms do not), a do-while loop (its body runs more often than the block
 * that dominates it), and a function with an indirect jump (nothing folded).
 */
static void test_fold_equivalent(void **state)
{
    static const char diamond[] = "\tmovq\t(%rdi), %rax\n"
                                  ".LBB2_1:\n"
                                  "\tmovq\t(%rsi), %rcx\n"
                                  "\ttestq\t%rcx, %rcx\n"
                                  "\tje\t.LBB2_3\n"
                                  "\tmovq\t8(%rsi), %rdx\n"
                                  "\tjmp\t.LBB2_4\n"
                                  ".LBB2_3:\n"
                                  "\tmovq\t16(%rsi), %rdx\n"
                                  ".LBB2_4:\n"
                                  "\tmovq\t%rdx, (%rdi)\n"
                                  "\taddq\t$24, %rsi\n"
                                  "\tdecq\t%r8\n"
                                  "\tjne\t.LBB2_1\n"
                                  "\tmovq\t%rax, 8(%rdi)\n"
                                  "\tretq\n";
    static const char *const diamond_hex[] = {"0x48,0x8b,0x07",
                                              "0x48,0x8b,0x0e",
                                              "0x48,0x85,0xc9",
                                              "0x74,A",
                                              "0x48,0x8b,0x56,0x08",
                                              "0xeb,A",
                                              "0x48,0x8b,0x56,0x10",
                                              "0x48,0x89,0x17",
                                              "0x48,0x83,0xc6,0x18",
                                              "0x49,0xff,0xc8",
                                              "0x75,A",
                                              "0x48,0x89,0x47,0x08",
                                              "0xc3"};
    static const int diamond_leader[] = {0, 1, 2, 3, 1, 0};
    static const char dowhile[] = "\tmovq\t(%rdi), %rax\n"
                                  ".LBB2_1:\n"
                                  "\tmovq\t(%rsi), %rcx\n"
                                  "\tdecq\t%r8\n"
                                  "\tjne\t.LBB2_1\n"
                                  "\tmovq\t%rcx, (%rdi)\n";
    static const char *const dowhile_hex[] = {"0x48,0x8b,0x07", "0x48,0x8b,0x0e", "0x49,0xff,0xc8",
                                              "0x75,A",         "0x48,0x89,0x0f", "0xc3"};
    static const char *const ijump_hex[] = {"0x48,0x8b,0x07", "0x48,0x8b,0x0e", "0x49,0xff,0xc8",
                                            "0x75,A",         "0x48,0x89,0x0f", "0xff,0xe0"};
    struct ml_asm_fold fold[8];
    struct ml_asm_params p = {.omega = 0.1, .chunk = 64, .mode = ML_ASM_AIA};
    char body[512], *ex, *text;
    int segs = 0;

    (void)state;
    assert_int_equal(fold_h(diamond, diamond_hex, (int)COUNT(diamond_hex), fold), 6);
    for (int i = 0; i < 6; i++)
        assert_int_equal(fold[i].leader, diamond_leader[i]);
    assert_true(fold[1].depth < fold[4].depth && fold[0].depth < fold[5].depth);
    /* between header and latch only the arms write (%rdx); between entry and exit the loop */
    assert_int_equal(fold[4].clobber, 1u << 2);
    assert_int_equal(fold[5].clobber, (1u << 1) | (1u << 2) | (1u << 6) | (1u << 8));
    snprintf(body, sizeof(body), "%s\t%s\n", dowhile, "retq");
    assert_int_equal(fold_h(body, dowhile_hex, (int)COUNT(dowhile_hex), fold), 3);
    assert_int_equal(fold[0].leader, 0);
    assert_int_equal(fold[1].leader, 1);
    assert_int_equal(fold[2].leader, 0);
    snprintf(body, sizeof(body), "%s\t%s\n", dowhile, "jmpq\t*%rax");
    assert_int_equal(fold_h(body, ijump_hex, (int)COUNT(ijump_hex), fold), 3);
    for (int i = 0; i < 3; i++)
        assert_int_equal(fold[i].leader, i);
    /*
     * Selection over a class: one budget (W = 1 of 2 accesses) and one segment
     * for the entry and the exit, whose (%rdi) keeps its value across the loop
     * (8 B away), and for header and latch: 4 segments for 6 blocks.
     */
    ml_asm_default_scores(ML_ASM_AIA, p.score);
    text = rewrite_h(diamond, diamond_hex, (int)COUNT(diamond_hex), &p, &ex);
    for (const char *t = text; (t = strstr(t, "# memlens record {")); t++)
        segs++;
    assert_int_equal(segs, 4);
    assert_non_null(strstr(ex, "control-equivalent block .LBB2_4"));
    assert_non_null(strstr(ex, "(8 B away)"));
    assert_non_null(strstr(ex, "W 1, 2 classes"));
    assert_non_null(strstr(ex, "weight 2"));
    assert_null(strstr(ex, "block 4"));
    free(ex);
    free(text);
    /*
     * Liveness over the flow: every record finds scratch registers dead
     * after its block (%r9-%r11, %rcx, %rdx before their writes) and saves
     * nothing; in and after the loop never %rax, %rsi, %rdi or %r8, live there.
     */
    text = rewrite_ns(diamond, diamond_hex, (int)COUNT(diamond_hex));
    assert_null(strstr(text, "\tpushq\t%"));
    segs = 0;
    for (const char *t = strstr(text, ".LBB2_1:"); (t = strstr(t, "__memlens_tb_ptr@TPOFF, %"));
         t++, segs++)
        for (int r = 0; r < 4; r++)
            assert_false(strncmp(t + 25, (const char *[]){"rax", "rsi", "rdi", "r8\n"}[r], 3) == 0);
    assert_int_equal(segs, 5); /* one per block with accesses after the entry */
    free(text);
}

/*
 * Callees folded into their caller's unit: get (called once) and put (tail
 * called once) join h's unit, one budget over the 11 accesses; taken (address
 * taken), twice (called twice) and glob (global) keep their own.
 */
static void test_fold_callees(void **state)
{
    static const char text[] = "\t.text\n\t.globl\th\n\t.type\th,@function\nh:\n"
                               "\tpushq\t%rbx\n\tmovq\t%rdi, %rbx\n\tcallq\tget\n"
                               "\tmovq\t%rax, 8(%rbx)\n\tleaq\ttaken(%rip), %rcx\n"
                               "\tcallq\ttwice\n\tcallq\ttwice\n\tcallq\tglob\n"
                               "\tpopq\t%rbx\n\tjmp\tput # TAILCALL\n"
                               ".Lfunc_end0:\n\t.size\th, .Lfunc_end0-h\n"
                               "\t.type\tget,@function\nget:\n\tmovq\t(%rdi), %rax\n\tretq\n"
                               "\t.type\tput,@function\nput:\n\tmovq\t%rax, 16(%rdi)\n\tretq\n"
                               "\t.type\ttaken,@function\ntaken:\n\tmovq\t24(%rdi), %rax\n\tretq\n"
                               "\t.type\ttwice,@function\ntwice:\n\tmovq\t32(%rdi), %rax\n\tretq\n"
                               "\t.globl\tglob\n\t.type\tglob,@function\nglob:\n"
                               "\tmovq\t40(%rdi), %rax\n\tretq\n";
    static const char *const hex[] = {"0x53",
                                      "0x48,0x89,0xfb",
                                      "0xe8,A,A,A,A",
                                      "0x48,0x89,0x43,0x08",
                                      "0x48,0x8d,0x0d,A,A,A,A",
                                      "0xe8,A,A,A,A",
                                      "0xe8,A,A,A,A",
                                      "0xe8,A,A,A,A",
                                      "0x5b",
                                      "0xeb,A",
                                      "0x48,0x8b,0x07",
                                      "0xc3",
                                      "0x48,0x89,0x47,0x10",
                                      "0xc3",
                                      "0x48,0x8b,0x47,0x18",
                                      "0xc3",
                                      "0x48,0x8b,0x47,0x20",
                                      "0xc3",
                                      "0x48,0x8b,0x47,0x28",
                                      "0xc3"};
    static const int leader[] = {0, 0, 0, 3, 4, 5}, site[] = {-1, 2, 9, -1, -1, -1};
    static const char *const want[] = {"11 accesses, W 2",
                                       "callee get (line 19): called from line 7 only",
                                       "callee put (line 23): called from line 14 only",
                                       "function taken",
                                       "function twice",
                                       "function glob"};
    struct ml_asm_params p = {.omega = 0.1, .chunk = 64, .mode = ML_ASM_AIA};
    struct ml_asm_fold fold[8];
    char *ex, *out;

    (void)state;
    assert_int_equal(fold_text(text, hex, (int)COUNT(hex), fold, 1), 6);
    for (int i = 0; i < 6; i++) {
        assert_int_equal(fold[i].leader, leader[i]);
        assert_int_equal(fold[i].site, site[i]);
    }
    /* one unit of h, get and put: W = ceil(0.1 * 11) */
    ml_asm_default_scores(ML_ASM_AIA, p.score);
    out = rewrite_text(text, hex, (int)COUNT(hex), &p, &ex);
    for (size_t i = 0; i < COUNT(want); i++)
        assert_non_null(strstr(ex, want[i]));
    assert_null(strstr(ex, "function get"));
    free(ex);
    free(out);
}

static void test_parse_errors(void **state)
{
    struct ml_asm_file f;
    char err[128];
    const char *t = "f:\n\tretq\nlabel: movq %rax, %rbx\n";

    (void)state;
    assert_int_equal(ml_asm_parse(t, strlen(t), &f, err, sizeof(err)), -22);
    assert_non_null(strstr(err, "line 3"));
    t = "\t.section .rodata\n\tmovq %rax, %rbx\n\t.text\n\tmovq %rax, %rbx\n";
    assert_int_equal(ml_asm_parse(t, strlen(t), &f, err, sizeof(err)), 0);
    assert_false(f.line[1].exec);
    assert_true(f.line[3].exec);
    ml_asm_file_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_disp),
        cmocka_unit_test(test_decode_accesses),
        cmocka_unit_test(test_decode_registers),
        cmocka_unit_test(test_incarnation_subregister),
        cmocka_unit_test(test_incarnation_stack),
        cmocka_unit_test(test_incarnation_clobbers),
        cmocka_unit_test(test_incarnation_linear),
        cmocka_unit_test(test_bid_symbols),
        cmocka_unit_test(test_distance),
        cmocka_unit_test(test_params),
        cmocka_unit_test(test_select_steps),
        cmocka_unit_test(test_select_refine_first),
        cmocka_unit_test(test_select_forced_and_ns),
        cmocka_unit_test(test_file),
        cmocka_unit_test(test_segment_moves_down),
        cmocka_unit_test(test_record_sequence),
        cmocka_unit_test(test_tail_call),
        cmocka_unit_test(test_fold_equivalent),
        cmocka_unit_test(test_fold_callees),
        cmocka_unit_test(test_parse_errors),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);

    for (int i = 0; i < nfiles; i++)
        ml_asm_file_free(&files[i]);
    return rc;
}
