/* Slow path of --trace=asm records: the whole register state saved around __memlens_trace_flush. */
#include "format/trace-abi.h"

#if defined(__x86_64__)
/*
 * __memlens_asm_flush: called from rewritten assembly (docs/select.md) when a
 * segment would pass __memlens_tb_end, with the segment's word count pushed
 * by the caller (at 8(%rsp) on entry); it replaces that word with the address
 * of room for the segment (filled and committed by the caller). Unlike
 * __memlens_trace_flush it preserves every
 * register, the flags and the x87, SSE, AVX and AVX-512 state (XSAVE of
 * components 0-2 and 5-7, 2688 bytes at most in the standard format), since
 * the rewritten code around it may hold live values anywhere. The caller has
 * already stepped over the red zone; the stack is realigned here.
 */
__asm__(".text\n"
        ".globl __memlens_asm_flush\n"
        ".type __memlens_asm_flush,@function\n"
        ".p2align 4\n"
        "__memlens_asm_flush:\n"
        "\tpushq %rbp\n"
        "\tmovq %rsp, %rbp\n"
        "\tpushq %rax\n"
        "\tpushq %rcx\n"
        "\tpushq %rdx\n"
        "\tpushq %rsi\n"
        "\tpushq %rdi\n"
        "\tpushq %r8\n"
        "\tpushq %r9\n"
        "\tpushq %r10\n"
        "\tpushq %r11\n"
        "\tpushfq\n"
        "\tcld\n"
        "\tandq $-64, %rsp\n"
        "\tsubq $4096, %rsp\n"
        /* XRSTOR wants the header's reserved bytes zero; XSAVE writes only XSTATE_BV. */
        "\tmovq $0, 512(%rsp)\n"
        "\tmovq $0, 520(%rsp)\n"
        "\tmovq $0, 528(%rsp)\n"
        "\tmovq $0, 536(%rsp)\n"
        "\tmovq $0, 544(%rsp)\n"
        "\tmovq $0, 552(%rsp)\n"
        "\tmovq $0, 560(%rsp)\n"
        "\tmovq $0, 568(%rsp)\n"
        "\tmovl $0xe7, %eax\n"
        "\txorl %edx, %edx\n"
        "\txsave (%rsp)\n"
        "\tmovq 16(%rbp), %rdi\n"
        "\tcall __memlens_trace_flush@PLT\n"
        "\tmovq %rax, 16(%rbp)\n"
        "\tmovl $0xe7, %eax\n"
        "\txorl %edx, %edx\n"
        "\txrstor (%rsp)\n"
        "\tleaq -80(%rbp), %rsp\n"
        "\tpopfq\n"
        "\tpopq %r11\n"
        "\tpopq %r10\n"
        "\tpopq %r9\n"
        "\tpopq %r8\n"
        "\tpopq %rdi\n"
        "\tpopq %rsi\n"
        "\tpopq %rdx\n"
        "\tpopq %rcx\n"
        "\tpopq %rax\n"
        "\tpopq %rbp\n"
        "\tret\n"
        ".size __memlens_asm_flush, .-__memlens_asm_flush\n");
#endif
