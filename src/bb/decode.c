/* Capstone decoding of blocks: refusal of what is not a runnable basic block, memory operands. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "bb/sandbox.h"

static int open_cs(csh *h)
{
    if (cs_open(CS_ARCH_X86, CS_MODE_64, h) != CS_ERR_OK)
        return -ENOMEM;
    cs_option(*h, CS_OPT_DETAIL, CS_OPT_ON);
    return 0;
}

/* Privileged or kernel-only instructions Capstone may not group as privileged. */
static int is_privileged(csh h, const cs_insn *i)
{
    switch (i->id) {
    case X86_INS_HLT:
    case X86_INS_CLI:
    case X86_INS_STI:
    case X86_INS_IN:
    case X86_INS_OUT:
    case X86_INS_INSB:
    case X86_INS_INSW:
    case X86_INS_INSD:
    case X86_INS_OUTSB:
    case X86_INS_OUTSW:
    case X86_INS_OUTSD:
    case X86_INS_RDMSR:
    case X86_INS_WRMSR:
    case X86_INS_RDPMC:
    case X86_INS_LGDT:
    case X86_INS_LIDT:
    case X86_INS_LLDT:
    case X86_INS_LTR:
    case X86_INS_LMSW:
    case X86_INS_CLTS:
    case X86_INS_INVD:
    case X86_INS_WBINVD:
    case X86_INS_INVLPG:
    case X86_INS_INVLPGA:
    case X86_INS_INVPCID:
    case X86_INS_SWAPGS:
    case X86_INS_SYSRET:
    case X86_INS_SYSEXIT:
    case X86_INS_MONITOR:
    case X86_INS_MWAIT:
    case X86_INS_XSETBV:
    case X86_INS_VMCALL:
    case X86_INS_VMMCALL:
        return 1;
    default:
        break;
    }
    if (cs_insn_group(h, i, CS_GRP_PRIVILEGE))
        return 1;
    /* mov to or from control and debug registers */
    for (int k = 0; k < i->detail->x86.op_count; k++) {
        const cs_x86_op *op = &i->detail->x86.operands[k];
        if (op->type == X86_OP_REG && ((op->reg >= X86_REG_CR0 && op->reg <= X86_REG_CR15) ||
                                       (op->reg >= X86_REG_DR0 && op->reg <= X86_REG_DR15)))
            return 1;
    }
    return 0;
}

static int is_syscall(const cs_insn *i)
{
    return i->id == X86_INS_SYSCALL || i->id == X86_INS_SYSENTER || i->id == X86_INS_INT ||
           i->id == X86_INS_INT3 || i->id == X86_INS_INTO || i->id == X86_INS_INT1;
}

static int is_branch(csh h, const cs_insn *i)
{
    return cs_insn_group(h, i, CS_GRP_JUMP) || cs_insn_group(h, i, CS_GRP_CALL) ||
           cs_insn_group(h, i, CS_GRP_RET) || cs_insn_group(h, i, CS_GRP_IRET) ||
           cs_insn_group(h, i, CS_GRP_BRANCH_RELATIVE) || i->id == X86_INS_XBEGIN ||
           i->id == X86_INS_XABORT || i->id == X86_INS_XEND;
}

static void refuse(struct ml_bb_result *r, const char *what, const cs_insn *i)
{
    r->status = ML_BB_UNSUPPORTED;
    if (i)
        snprintf(r->detail, sizeof(r->detail), "%s '%s'", what, i->mnemonic);
    else
        snprintf(r->detail, sizeof(r->detail), "%s", what);
}

int ml_bb_check(const uint8_t *code, size_t len, struct ml_bb_result *r)
{
    csh h;
    cs_insn *insn = NULL;
    size_t off = 0;
    unsigned n = 0;
    int bad = 0;

    r->n_insns = 0;
    if (len == 0) {
        refuse(r, "empty block", NULL);
        return 1;
    }
    if (len > ML_BB_MAX_LEN) {
        refuse(r, "block longer than 4096 bytes", NULL);
        return 1;
    }
    if (open_cs(&h) < 0) {
        refuse(r, "capstone unavailable", NULL);
        return 1;
    }
    insn = cs_malloc(h);
    while (off < len) {
        const uint8_t *p = code + off;
        size_t left = len - off;
        uint64_t addr = off;

        if (!cs_disasm_iter(h, &p, &left, &addr, insn)) {
            refuse(r, "undecodable bytes", NULL);
            bad = 1;
            break;
        }
        n++;
        off = (size_t)addr;
        if (is_syscall(insn)) {
            refuse(r,
                   insn->id == X86_INS_SYSCALL || insn->id == X86_INS_SYSENTER ? "syscall (decoder)"
                                                                               : "interrupt",
                   insn);
            bad = 1;
            break;
        }
        if (is_branch(h, insn)) {
            refuse(r, "branch", insn);
            bad = 1;
            break;
        }
        if (is_privileged(h, insn)) {
            refuse(r, "privileged instruction", insn);
            bad = 1;
            break;
        }
    }
    r->n_insns = n;
    cs_free(insn, 1);
    cs_close(&h);
    return bad;
}

int ml_bb_decode(const uint8_t *code, size_t len, struct ml_bb_insn *out, unsigned cap)
{
    csh h;
    cs_insn *insn;
    size_t off = 0;
    int n = 0, err;

    err = open_cs(&h);
    if (err < 0)
        return err;
    insn = cs_malloc(h);
    while (off < len && (unsigned)n < cap) {
        const uint8_t *p = code + off;
        size_t left = len - off;
        uint64_t addr = off;
        struct ml_bb_insn *d = &out[n];
        const cs_x86 *x;

        if (!cs_disasm_iter(h, &p, &left, &addr, insn)) {
            n = -EINVAL;
            goto out;
        }
        memset(d, 0, sizeof(*d));
        d->off = (uint16_t)off;
        d->size = insn->size;
        x = &insn->detail->x86;
        /* lea and nop name memory without touching it */
        if (insn->id != X86_INS_LEA && insn->id != X86_INS_NOP) {
            for (int k = 0; k < x->op_count && d->n_mem < 3; k++) {
                const cs_x86_op *op = &x->operands[k];
                struct ml_bb_memop *m;

                if (op->type != X86_OP_MEM)
                    continue;
                m = &d->mem[d->n_mem++];
                m->seg = op->mem.segment;
                m->base = op->mem.base;
                m->index = op->mem.index;
                m->scale = op->mem.scale;
                m->disp = op->mem.disp;
                m->size = op->size;
                m->write = (op->access & CS_AC_WRITE) != 0;
            }
        }
        for (int k = 0; k < x->op_count; k++)
            if (x->operands[k].type == X86_OP_MEM && x->operands[k].mem.base == X86_REG_RIP &&
                x->encoding.disp_size == 4) {
                d->rip_disp_off = x->encoding.disp_offset;
                d->rip_size = x->operands[k].size;
            }
        if ((insn->id == X86_INS_PUSH || insn->id == X86_INS_POP) && d->n_mem < 3) {
            struct ml_bb_memop *m = &d->mem[d->n_mem++];

            memset(m, 0, sizeof(*m));
            m->base = X86_REG_RSP;
            m->scale = 1;
            m->size = 8;
            m->write = insn->id == X86_INS_PUSH;
            m->disp = insn->id == X86_INS_PUSH ? -8 : 0;
        }
        off = (size_t)addr;
        n++;
    }
out:
    cs_free(insn, 1);
    cs_close(&h);
    return n;
}

int ml_bb_privileged_at(const uint8_t *code, size_t len)
{
    csh h;
    cs_insn *insn;
    const uint8_t *p = code;
    uint64_t addr = 0;
    int priv = 0;

    if (open_cs(&h) < 0)
        return 0;
    insn = cs_malloc(h);
    if (cs_disasm_iter(h, &p, &len, &addr, insn))
        priv = is_privileged(h, insn);
    cs_free(insn, 1);
    cs_close(&h);
    return priv;
}
