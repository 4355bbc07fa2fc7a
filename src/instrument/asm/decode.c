/* Operand semantics of one x86-64 instruction from Zydis: memory accesses, registers, flags, flow.
 */
#include "instrument/asm/asm.h"

#include <Zydis/Zydis.h>
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

const char *ml_asm_reg_name(int reg)
{
    static const char *const names[] = {"rax", "rcx", "rdx", "rbx", "rsp", "rbp",
                                        "rsi", "rdi", "r8",  "r9",  "r10", "r11",
                                        "r12", "r13", "r14", "r15", "rip", "vec"};

    if (reg >= 0 && reg < (int)(sizeof(names) / sizeof(names[0])))
        return names[reg];
    return "-";
}

/* General register number of any part of a general register, or -1. */
static int gpr(ZydisRegister r)
{
    ZydisRegister big;

    switch (ZydisRegisterGetClass(r)) {
    case ZYDIS_REGCLASS_GPR8:
    case ZYDIS_REGCLASS_GPR16:
    case ZYDIS_REGCLASS_GPR32:
    case ZYDIS_REGCLASS_GPR64:
        break;
    default:
        return -1;
    }
    big = ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, r);
    if (big < ZYDIS_REGISTER_RAX || big > ZYDIS_REGISTER_R15)
        return -1;
    return big - ZYDIS_REGISTER_RAX;
}

static int is_gpr64(ZydisRegister r)
{
    return r >= ZYDIS_REGISTER_RAX && r <= ZYDIS_REGISTER_R15;
}

int ml_asm_parse_disp(const char *op, size_t n, const char **sym, size_t *symlen, int64_t *disp)
{
    const char *s = op, *e = op + n, *paren = NULL, *colon;
    int64_t total = 0;
    int nsym = 0;

    *sym = NULL;
    *symlen = 0;
    *disp = 0;
    while (s < e && (isspace((unsigned char)*s) || *s == '*'))
        s++;
    while (e > s && isspace((unsigned char)e[-1]))
        e--;
    if (s < e && *s == '%') {
        /* %fs:8, %fs:x@TPOFF, %fs:(%rax): a segment; any other register is no memory operand. */
        colon = memchr(s, ':', e - s);
        if (!colon)
            return -EINVAL;
        s = colon + 1;
    } else if (s < e && *s == '$') {
        return -EINVAL;
    }
    /* The register group is the last parenthesised part, if it holds a register. */
    if (e > s && e[-1] == ')') {
        for (const char *q = e - 1; q >= s; q--)
            if (*q == '(') {
                paren = q;
                break;
            }
        if (paren && memchr(paren, '%', e - paren))
            e = paren;
    }
    while (e > s && isspace((unsigned char)e[-1]))
        e--;
    if (s == e)
        return 0;
    /* [sym][(+|-)number]... or number[+sym]; anything else is kept whole as a symbol. */
    for (const char *p = s; p < e;) {
        int neg = 0;

        if (p > s) {
            if (*p != '+' && *p != '-')
                goto whole;
            neg = *p++ == '-';
        } else if (*p == '-') {
            neg = 1, p++;
        }
        if (p < e && isdigit((unsigned char)*p)) {
            char num[32], *q;
            size_t k = 0;

            while (p + k < e && isalnum((unsigned char)p[k]) && k + 1 < sizeof(num))
                num[k] = p[k], k++;
            num[k] = 0;
            long long v = strtoll(num, &q, 0);

            if (*q)
                goto whole;
            total += neg ? -v : v;
            p += k;
        } else {
            const char *b = p;

            if (neg || nsym++)
                goto whole;
            while (p < e && *p != '+' && *p != '-')
                p++;
            *sym = b;
            *symlen = p - b;
        }
    }
    *disp = total;
    return 0;
whole:
    *sym = s;
    *symlen = e - s;
    *disp = 0;
    return 0;
}

/* The span of the one memory operand among the operands (decorations cut), or 0. */
static size_t memory_operand(const char *ops, const char **start)
{
    int depth = 0;
    const char *b = ops;

    for (const char *p = ops;; p++) {
        if (*p == '(' || *p == '{')
            depth++;
        else if (*p == ')' || *p == '}')
            depth--;
        if ((*p == ',' && !depth) || !*p) {
            const char *e = memchr(b, '{', p - b);
            const char *t = b;

            if (!e)
                e = p;
            while (t < e && (isspace((unsigned char)*t) || *t == '*'))
                t++;
            if (t < e && *t != '$' && (*t != '%' || memchr(t, ':', e - t))) {
                *start = t;
                return e - t;
            }
            if (!*p)
                return 0;
            b = p + 1;
        }
    }
}

static int is_stop(ZydisMnemonic m)
{
    return m == ZYDIS_MNEMONIC_UD0 || m == ZYDIS_MNEMONIC_UD1 || m == ZYDIS_MNEMONIC_UD2 ||
           m == ZYDIS_MNEMONIC_HLT || m == ZYDIS_MNEMONIC_INT3 || m == ZYDIS_MNEMONIC_INT ||
           m == ZYDIS_MNEMONIC_INT1 || m == ZYDIS_MNEMONIC_INTO || m == ZYDIS_MNEMONIC_IRET ||
           m == ZYDIS_MNEMONIC_IRETD || m == ZYDIS_MNEMONIC_IRETQ || m == ZYDIS_MNEMONIC_SYSRET ||
           m == ZYDIS_MNEMONIC_SYSEXIT;
}

static int flow_of(const ZydisDecodedInstruction *in, const ZydisDecodedOperand *op)
{
    int direct = in->operand_count_visible > 0 && op[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE;

    switch (in->meta.category) {
    case ZYDIS_CATEGORY_CALL:
        return ML_ASM_FLOW_CALL;
    case ZYDIS_CATEGORY_RET:
        return ML_ASM_FLOW_RET;
    case ZYDIS_CATEGORY_UNCOND_BR:
        return direct ? ML_ASM_FLOW_JUMP : ML_ASM_FLOW_IJUMP;
    case ZYDIS_CATEGORY_COND_BR:
        return ML_ASM_FLOW_CJUMP;
    default:
        break;
    }
    if (in->mnemonic == ZYDIS_MNEMONIC_XBEGIN)
        return ML_ASM_FLOW_CJUMP;
    return is_stop(in->mnemonic) ? ML_ASM_FLOW_STOP : ML_ASM_FLOW_NONE;
}

/* Instructions whose memory operand is no data access: hints, cache control, NOPs. */
static int no_access(const ZydisDecodedInstruction *in)
{
    switch (in->meta.category) {
    case ZYDIS_CATEGORY_PREFETCH:
    case ZYDIS_CATEGORY_PREFETCHWT1:
    case ZYDIS_CATEGORY_NOP:
    case ZYDIS_CATEGORY_WIDENOP:
    case ZYDIS_CATEGORY_CLFLUSHOPT:
    case ZYDIS_CATEGORY_CLWB:
    case ZYDIS_CATEGORY_CLDEMOTE:
        return 1;
    default:
        return in->mnemonic == ZYDIS_MNEMONIC_CLFLUSH;
    }
}

static int is_string_op(const ZydisDecodedInstruction *in)
{
    return in->meta.category == ZYDIS_CATEGORY_STRINGOP ||
           in->meta.category == ZYDIS_CATEGORY_IOSTRINGOP;
}

static void add_linear(struct ml_asm_insn *o, int dst, int src, int64_t add)
{
    if (o->nlinear < ML_ASM_MAXLIN)
        o->lin[o->nlinear++] = (struct ml_asm_linear){(uint8_t)dst, (uint8_t)src, 0, add, NULL};
}

/* dst = &sym + disp, from the text of the first operand: "sym+8(%rip)" or "$sym+8". */
static void add_symbol_address(struct ml_asm_insn *o, int dst, const char *operands, int imm)
{
    const char *t = operands, *comma;
    const char *sym;
    size_t symlen;
    int64_t disp;

    if (!operands)
        return;
    while (isspace((unsigned char)*t))
        t++;
    if (imm != (*t == '$'))
        return;
    t += imm;
    comma = strrchr(t, ',');
    if (!comma || ml_asm_parse_disp(t, comma - t, &sym, &symlen, &disp) || !sym ||
        symlen >= 0xffff || o->nlinear >= ML_ASM_MAXLIN)
        return;
    o->lin[o->nlinear++] =
        (struct ml_asm_linear){(uint8_t)dst, ML_ASM_RIP, (uint16_t)symlen, disp, sym};
}

/* Registers set to another register plus a constant, which the analysis folds. */
static void linear_forms(struct ml_asm_insn *o, const ZydisDecodedInstruction *in,
                         const ZydisDecodedOperand *op, int stack_size, const char *operands)
{
    const ZydisDecodedOperand *d = &op[0], *s = &op[1];
    int two = in->operand_count_visible >= 2;

    switch (in->mnemonic) {
    case ZYDIS_MNEMONIC_PUSH:
    case ZYDIS_MNEMONIC_PUSHF:
    case ZYDIS_MNEMONIC_PUSHFD:
    case ZYDIS_MNEMONIC_PUSHFQ:
        add_linear(o, ML_ASM_RSP, ML_ASM_RSP, -stack_size);
        return;
    case ZYDIS_MNEMONIC_POP:
        if (d->type == ZYDIS_OPERAND_TYPE_REGISTER && gpr(d->reg.value) == ML_ASM_RSP)
            return; /* pop %rsp: loaded */
        /* fall through */
    case ZYDIS_MNEMONIC_POPF:
    case ZYDIS_MNEMONIC_POPFD:
    case ZYDIS_MNEMONIC_POPFQ:
        add_linear(o, ML_ASM_RSP, ML_ASM_RSP, stack_size);
        return;
    case ZYDIS_MNEMONIC_RET:
        add_linear(o, ML_ASM_RSP, ML_ASM_RSP,
                   stack_size + (d->type == ZYDIS_OPERAND_TYPE_IMMEDIATE ? d->imm.value.u : 0));
        return;
    case ZYDIS_MNEMONIC_CALL:
        add_linear(o, ML_ASM_RSP, ML_ASM_RSP, 0); /* as the caller sees it after the return */
        return;
    case ZYDIS_MNEMONIC_LEAVE:
        add_linear(o, ML_ASM_RSP, ML_ASM_RBP, stack_size);
        return;
    default:
        break;
    }
    if (d->type != ZYDIS_OPERAND_TYPE_REGISTER || gpr(d->reg.value) < 0)
        return;
    int dst = gpr(d->reg.value);

    /* movl $sym, %ecx zero-extends a small-code-model address: as exact as the 64-bit form. */
    if (in->mnemonic == ZYDIS_MNEMONIC_MOV && two && s->type == ZYDIS_OPERAND_TYPE_IMMEDIATE &&
        (is_gpr64(d->reg.value) || ZydisRegisterGetClass(d->reg.value) == ZYDIS_REGCLASS_GPR32)) {
        add_symbol_address(o, dst, operands, 1);
        return;
    }
    if (!is_gpr64(d->reg.value))
        return;
    switch (in->mnemonic) {
    case ZYDIS_MNEMONIC_MOV:
        if (two && s->type == ZYDIS_OPERAND_TYPE_REGISTER && is_gpr64(s->reg.value))
            add_linear(o, dst, gpr(s->reg.value), 0);
        return;
    case ZYDIS_MNEMONIC_LEA:
        if (!two || s->type != ZYDIS_OPERAND_TYPE_MEMORY || s->mem.index != ZYDIS_REGISTER_NONE ||
            s->mem.segment == ZYDIS_REGISTER_FS || s->mem.segment == ZYDIS_REGISTER_GS)
            return;
        if (is_gpr64(s->mem.base))
            add_linear(o, dst, gpr(s->mem.base), s->mem.disp.value);
        else if (s->mem.base == ZYDIS_REGISTER_RIP)
            add_symbol_address(o, dst, operands, 0);
        return;
    case ZYDIS_MNEMONIC_ADD:
    case ZYDIS_MNEMONIC_SUB:
        if (two && s->type == ZYDIS_OPERAND_TYPE_IMMEDIATE)
            add_linear(o, dst, dst,
                       in->mnemonic == ZYDIS_MNEMONIC_ADD ? s->imm.value.s : -s->imm.value.s);
        return;
    case ZYDIS_MNEMONIC_INC:
        add_linear(o, dst, dst, 1);
        return;
    case ZYDIS_MNEMONIC_DEC:
        add_linear(o, dst, dst, -1);
        return;
    default:
        return;
    }
}

/* Registers the System V ABI lets a callee change: a call writes them all. */
#define CALLER_SAVED                                                                               \
    ((1u << 0) | (1u << 1) | (1u << 2) | (1u << 6) | (1u << 7) | (1u << 8) | (1u << 9) |           \
     (1u << 10) | (1u << 11))

static int add_access(struct ml_asm_insn *o, const ZydisDecodedInstruction *in,
                      const ZydisDecodedOperand *op, const ZydisDecodedOperand *all,
                      const char *operands)
{
    struct ml_asm_access *a;
    const char *t;
    size_t tn;
    int opaque = 0;

    if (o->naccess >= ML_ASM_MAXACC)
        return -E2BIG;
    a = &o->acc[o->naccess];
    memset(a, 0, sizeof(*a));
    if (op->actions & (ZYDIS_OPERAND_ACTION_READ | ZYDIS_OPERAND_ACTION_CONDREAD))
        a->dir |= ML_ASM_LOAD;
    if (op->actions & (ZYDIS_OPERAND_ACTION_WRITE | ZYDIS_OPERAND_ACTION_CONDWRITE))
        a->dir |= ML_ASM_STORE;
    if (!a->dir)
        return 0;
    a->implicit = op->visibility != ZYDIS_OPERAND_VISIBILITY_EXPLICIT;
    a->seg = op->mem.segment == ZYDIS_REGISTER_FS   ? ML_ASM_SEG_FS
             : op->mem.segment == ZYDIS_REGISTER_GS ? ML_ASM_SEG_GS
                                                    : ML_ASM_SEG_NONE;
    a->size = op->size / 8;
    a->elems = 1;
    a->disp = op->mem.disp.value;
    a->scale = 1;
    if (op->mem.base == ZYDIS_REGISTER_NONE)
        a->base = ML_ASM_NOREG;
    else if (op->mem.base == ZYDIS_REGISTER_RIP)
        a->base = ML_ASM_RIP;
    else if (is_gpr64(op->mem.base))
        a->base = (uint8_t)gpr(op->mem.base);
    else
        opaque = 1; /* a 32-bit address */
    if (op->mem.index == ZYDIS_REGISTER_NONE) {
        a->index = ML_ASM_NOREG;
    } else if (op->mem.type == ZYDIS_MEMOP_TYPE_VSIB) {
        const char *mn = ZydisMnemonicGetString(in->mnemonic), *g = strstr(mn, "gather");

        if (!g)
            g = strstr(mn, "scatter") ? strstr(mn, "scatter") + 1 : mn;
        a->index = ML_ASM_VREG;
        a->scale = op->mem.scale;
        a->vindex =
            (uint8_t)(op->mem.index - (ZydisRegisterGetClass(op->mem.index) == ZYDIS_REGCLASS_ZMM
                                           ? ZYDIS_REGISTER_ZMM0
                                       : ZydisRegisterGetClass(op->mem.index) == ZYDIS_REGCLASS_YMM
                                           ? ZYDIS_REGISTER_YMM0
                                           : ZYDIS_REGISTER_XMM0));
        /* vpgatherdq, vgatherqps, vscatterdpd...: the letter after gather/scatter is the index's */
        a->vsize = g[6] == 'q' ? 8 : 4;
    } else if (is_gpr64(op->mem.index)) {
        a->index = (uint8_t)gpr(op->mem.index);
        a->scale = op->mem.scale;
    } else {
        opaque = 1;
    }
    if (op->mem.type == ZYDIS_MEMOP_TYPE_VSIB) {
        /* One element per lane of the data register (the widest vector operand). */
        int bytes = 0;

        for (int k = 0; k < in->operand_count; k++)
            if (all[k].type == ZYDIS_OPERAND_TYPE_REGISTER &&
                ZydisRegisterGetClass(all[k].reg.value) >= ZYDIS_REGCLASS_XMM &&
                ZydisRegisterGetClass(all[k].reg.value) <= ZYDIS_REGCLASS_ZMM &&
                all[k].size / 8 > bytes)
                bytes = all[k].size / 8;
        a->count = ML_ASM_VSIB;
        a->elems = (uint16_t)(a->size ? bytes / a->size : 0);
        /* The data register is as wide as the elements the index selects, or wider. */
        for (int k = 0; k < in->operand_count; k++)
            if (all[k].type == ZYDIS_OPERAND_TYPE_REGISTER && all[k].reg.value == op->mem.index &&
                all[k].element_count && all[k].element_count < a->elems)
                a->elems = all[k].element_count;
    } else if (is_string_op(in) && (in->attributes & (ZYDIS_ATTRIB_HAS_REP | ZYDIS_ATTRIB_HAS_REPE |
                                                      ZYDIS_ATTRIB_HAS_REPNE))) {
        a->count = ML_ASM_REP;
    }
    /* Zydis names the stack slot of push/call by the updated %rsp: the store is below it. */
    if (a->implicit && a->base == ML_ASM_RSP && (a->dir & ML_ASM_STORE))
        a->disp = -(int64_t)a->size;
    if (in->mnemonic == ZYDIS_MNEMONIC_XLAT)
        opaque = 1; /* %rbx + %al */
    /* The symbol of a displacement is only in the text. */
    if (!a->implicit && operands && (tn = memory_operand(operands, &t))) {
        const char *sym;
        size_t symlen;
        int64_t disp;

        if (!ml_asm_parse_disp(t, tn, &sym, &symlen, &disp) && sym && symlen < 0xffff) {
            a->sym = sym;
            a->symlen = (uint16_t)symlen;
            a->disp = disp;
        }
    }
    /* Relative to the instruction's own address; %gs has no user-visible base to add. */
    if ((a->base == ML_ASM_RIP && !a->sym) || opaque || a->seg == ML_ASM_SEG_GS) {
        o->untraced++;
        return 0;
    }
    o->naccess++;
    return 0;
}

int ml_asm_decode(const uint8_t *code, size_t n, const char *operands, struct ml_asm_insn *o)
{
    ZydisDecoder dec;
    ZydisDecodedInstruction in;
    ZydisDecodedOperand op[ZYDIS_MAX_OPERAND_COUNT];
    int stack_size = 8, rc;

    memset(o, 0, sizeof(*o));
    if (!ZYAN_SUCCESS(ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64)) ||
        !n || !ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, code, n, &in, op)) || in.length != n) {
        o->opaque = 1;
        o->reg_written = 0xffff;
        return -EINVAL;
    }
    o->len = in.length;
    o->flow = (uint8_t)flow_of(&in, op);
    if (in.cpu_flags) {
        o->flags_read = in.cpu_flags->tested;
        o->flags_written = in.cpu_flags->modified | in.cpu_flags->set_0 | in.cpu_flags->set_1 |
                           in.cpu_flags->undefined;
    }
    /* A shift or rotate by %cl leaves the flags alone when %cl is 0: no sure write. */
    if (in.meta.category == ZYDIS_CATEGORY_SHIFT || in.meta.category == ZYDIS_CATEGORY_ROTATE)
        for (int k = 0; k < in.operand_count_visible; k++)
            if (op[k].type == ZYDIS_OPERAND_TYPE_REGISTER && op[k].reg.value == ZYDIS_REGISTER_CL)
                o->flags_written = 0;
    for (int k = 0; k < in.operand_count; k++) {
        const ZydisDecodedOperand *p = &op[k];
        int r;

        if (p->type == ZYDIS_OPERAND_TYPE_REGISTER && (r = gpr(p->reg.value)) >= 0) {
            if (p->actions & (ZYDIS_OPERAND_ACTION_READ | ZYDIS_OPERAND_ACTION_CONDREAD))
                o->reg_read |= 1u << r;
            if (p->actions & (ZYDIS_OPERAND_ACTION_WRITE | ZYDIS_OPERAND_ACTION_CONDWRITE))
                o->reg_written |= 1u << r;
            if (p->actions == ZYDIS_OPERAND_ACTION_WRITE &&
                (ZydisRegisterGetClass(p->reg.value) == ZYDIS_REGCLASS_GPR64 ||
                 ZydisRegisterGetClass(p->reg.value) == ZYDIS_REGCLASS_GPR32))
                o->reg_killed |= 1u << r;
        } else if (p->type == ZYDIS_OPERAND_TYPE_MEMORY) {
            if ((r = gpr(p->mem.base)) >= 0)
                o->reg_read |= 1u << r;
            if ((r = gpr(p->mem.index)) >= 0)
                o->reg_read |= 1u << r;
            if (p->visibility == ZYDIS_OPERAND_VISIBILITY_HIDDEN &&
                p->mem.base == ZYDIS_REGISTER_RSP)
                stack_size = p->size / 8;
            if ((p->mem.type == ZYDIS_MEMOP_TYPE_MEM || p->mem.type == ZYDIS_MEMOP_TYPE_VSIB) &&
                !no_access(&in) && (rc = add_access(o, &in, p, op, operands)))
                goto opaque;
        }
    }
    o->reg_killed &= ~o->reg_read;
    if (o->flow == ML_ASM_FLOW_CALL)
        o->reg_written |= CALLER_SAVED;
    if (in.mnemonic == ZYDIS_MNEMONIC_SYSCALL)
        o->reg_written |= 1u << 0; /* the result, in %rax */
    linear_forms(o, &in, op, stack_size, operands);
    return 0;
opaque:
    memset(o, 0, sizeof(*o));
    o->opaque = 1;
    o->reg_written = 0xffff;
    return rc;
}
