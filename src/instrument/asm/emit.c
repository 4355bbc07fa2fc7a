/* Emitter of --trace=asm: record sequences before selected accesses, site, segment and block
 * tables. */
#include "instrument/asm/asm.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "format/events.h"
#include "format/trace-abi.h"

#define STATUS_FLAGS ML_ASM_STATUS_FLAGS
/* Sites per segment: well under the ABI's 255 sites and ML_TB_MAX_SEG words. */
#define SEG_SITES 64
/* The red zone: 128 bytes below %rsp that leaf functions may use without moving %rsp. */
#define RED_ZONE 128

struct buf {
    char *s;
    size_t n, cap;
};

static int bprintf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int bprintf(struct buf *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    for (;;) {
        va_start(ap, fmt);
        n = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (n < 0)
            return -EINVAL;
        if (b->s && b->n + n < b->cap) {
            b->n += n;
            return 0;
        }
        size_t cap = b->cap ? 2 * b->cap : 256;

        while (cap < b->n + n + 1)
            cap *= 2;
        char *s = realloc(b->s, cap);

        if (!s)
            return -ENOMEM;
        b->s = s;
        b->cap = cap;
    }
}

struct esite {
    uint32_t kind, size, weight, marker, line, column;
    int func, file; /* function index, file number (-1: none) */
    int text;       /* unit whose instruction text it is */
};

struct emarker {
    uint32_t line;
    int func, file;
    char *name;
};

struct loc {
    int file, line, col;
};

struct ml_asm_emit {
    const struct ml_asm_file *f;
    const struct ml_asm_units *u;
    const struct ml_asm_insn *insn;
    int mode;
    int pic; /* reach the runtime's TLS through the GOT (initial exec): shared libraries */
    uint32_t chunk;
    const char *name;   /* the source, first part of block names */
    struct buf *before; /* per unit: the code to insert before it */
    uint8_t *cfa_rsp;   /* per unit: the CFA is %rsp-based there (CFI must follow our pushes) */
    uint8_t *leaf;      /* per unit: in a function without calls, which may use the red zone */
    struct loc *loc;    /* per unit: the last .loc before it */
    char **files;       /* .file number -> path */
    int nfiles;
    struct esite *site;
    int nsite, capsite;
    uint32_t *segw;
    int nsegw, capsegw;
    struct emarker *mk;
    int nmk, capmk;
    int nlabel;
};

static int grow(void **p, int *cap, int need, size_t size)
{
    void *q;
    int c = *cap ? *cap : 64;

    if (need <= *cap)
        return 0;
    while (c < need)
        c *= 2;
    q = realloc(*p, (size_t)c * size);
    if (!q)
        return -ENOMEM;
    *p = q;
    *cap = c;
    return 0;
}

/* The quoted strings of a .file directive: ".file N "dir" "name" [md5 ...]" or ".file N "name"". */
static int note_file(struct ml_asm_emit *e, const char *args)
{
    char *end, *q[2] = {0};
    long n = strtol(args, &end, 10);
    int k = 0;

    if (end == args || n < 0 || n > 100000)
        return 0;
    for (const char *p = end; *p && k < 2; p++) {
        if (*p != '"')
            continue;
        const char *b = ++p;

        while (*p && *p != '"')
            p += *p == '\\' && p[1] ? 2 : 1;
        q[k] = strndup(b, p - b);
        if (!q[k++])
            return -ENOMEM;
        if (!*p)
            break;
    }
    if (!k)
        return 0;
    if (n >= e->nfiles) {
        char **v = realloc(e->files, (n + 1) * sizeof(*v));

        if (!v) {
            free(q[0]);
            free(q[1]);
            return -ENOMEM;
        }
        memset(v + e->nfiles, 0, (n + 1 - e->nfiles) * sizeof(*v));
        e->files = v;
        e->nfiles = (int)n + 1;
    }
    free(e->files[n]);
    if (k == 2 && q[1][0] != '/') {
        e->files[n] = malloc(strlen(q[0]) + strlen(q[1]) + 2);
        if (e->files[n])
            sprintf(e->files[n], "%s/%s", q[0], q[1]);
        free(q[0]);
        free(q[1]);
    } else {
        e->files[n] = k == 2 ? q[1] : q[0];
        if (k == 2)
            free(q[0]);
    }
    return e->files[n] ? 0 : -ENOMEM;
}

struct ml_asm_emit *ml_asm_emit_new(const struct ml_asm_file *f, const struct ml_asm_units *u,
                                    const struct ml_asm_insn *insn, int mode, uint32_t chunk,
                                    const char *name, int pic)
{
    struct ml_asm_emit *e = calloc(1, sizeof(*e));
    int stack[32], depth = 0, cfi = 0, rsp = 1, k = 0;
    struct loc cur = {-1, 0, 0};

    if (!e)
        return NULL;
    e->f = f;
    e->u = u;
    e->insn = insn;
    e->mode = mode;
    e->chunk = chunk;
    e->name = name;
    e->pic = pic;
    e->before = calloc(u->n + 1, sizeof(*e->before));
    e->cfa_rsp = calloc(u->n + 1, 1);
    e->loc = calloc(u->n + 1, sizeof(*e->loc));
    e->leaf = malloc(u->n + 1);
    if (!e->before || !e->cfa_rsp || !e->loc || !e->leaf) {
        ml_asm_emit_free(e);
        return NULL;
    }
    /*
     * LLVM keeps data in the red zone only in functions that make no call;
     * elsewhere nothing lives below %rsp and the records need not step over it.
     * Code outside a known function counts as a leaf.
     */
    {
        uint8_t *calls = calloc(f->nfunc + 1, 1);

        if (!calls) {
            ml_asm_emit_free(e);
            return NULL;
        }
        for (int j = 0; j < u->n; j++) {
            int fn = f->line[u->first[j]].func;

            if (fn >= 0 && insn[j].flow == ML_ASM_FLOW_CALL)
                calls[fn] = 1;
        }
        for (int j = 0; j < u->n; j++) {
            int fn = f->line[u->first[j]].func;

            e->leaf[j] = fn < 0 || !calls[fn];
        }
        free(calls);
    }
    /* CFI and line state, in text order (which is address order within a section). */
    for (int i = 0; i < f->nline; i++) {
        const struct ml_asm_line *l = &f->line[i];

        if (k < u->n && u->first[k] == i) {
            e->cfa_rsp[k] = cfi && rsp;
            e->loc[k] = cur;
            k++;
        }
        if (l->kind != ML_ASM_DIRECTIVE)
            continue;
        if (!strcmp(l->name, ".cfi_startproc")) {
            cfi = 1, rsp = 1, depth = 0;
        } else if (!strcmp(l->name, ".cfi_endproc")) {
            cfi = 0;
        } else if (!strcmp(l->name, ".cfi_def_cfa_register") || !strcmp(l->name, ".cfi_def_cfa")) {
            rsp = !strncmp(l->operands, "%rsp", 4) && (!l->operands[4] || l->operands[4] == ',' ||
                                                       isspace((unsigned char)l->operands[4]));
        } else if (!strcmp(l->name, ".cfi_remember_state")) {
            if (depth < 32)
                stack[depth] = rsp;
            depth++;
        } else if (!strcmp(l->name, ".cfi_restore_state")) {
            if (depth > 0 && --depth < 32)
                rsp = stack[depth];
        } else if (!strcmp(l->name, ".loc")) {
            struct loc n = {-1, 0, 0};

            if (sscanf(l->operands, "%d %d %d", &n.file, &n.line, &n.col) >= 2)
                cur = n;
        } else if (!strcmp(l->name, ".file")) {
            if (note_file(e, l->operands)) {
                ml_asm_emit_free(e);
                return NULL;
            }
        }
    }
    return e;
}

void ml_asm_emit_free(struct ml_asm_emit *e)
{
    if (!e)
        return;
    for (int k = 0; e->before && k < e->u->n; k++)
        free(e->before[k].s);
    for (int i = 0; i < e->nfiles; i++)
        free(e->files[i]);
    for (int i = 0; i < e->nmk; i++)
        free(e->mk[i].name);
    free(e->files);
    free(e->before);
    free(e->cfa_rsp);
    free(e->leaf);
    free(e->loc);
    free(e->site);
    free(e->segw);
    free(e->mk);
    free(e);
}

static const char *const reg64[ML_ASM_NGPR] = {"rax", "rcx", "rdx", "rbx", "rsp", "rbp",
                                               "rsi", "rdi", "r8",  "r9",  "r10", "r11",
                                               "r12", "r13", "r14", "r15"};
static const char *const reg32[ML_ASM_NGPR] = {"eax",  "ecx",  "edx",  "ebx", "esp",  "ebp",
                                               "esi",  "edi",  "r8d",  "r9d", "r10d", "r11d",
                                               "r12d", "r13d", "r14d", "r15d"};

/* General registers an access's address reads (the vector index of a gather is not one). */
static unsigned addr_regs(const struct ml_asm_access *a)
{
    unsigned m = 0;

    if (a->base < ML_ASM_NGPR)
        m |= 1u << a->base;
    if (a->index < ML_ASM_NGPR)
        m |= 1u << a->index;
    if (a->count == ML_ASM_REP)
        m |= (1u << 1) | (1u << 6) | (1u << 7); /* %rcx, %rsi, %rdi */
    return m;
}

/*
 * How one record sequence works at unit k: scratch registers %A (the buffer
 * pointer, then addresses) and %B (the end of the segment's words), which of
 * them it must save (not dead there), whether it saves the flags, the red zone
 * it steps over on the common path (rz) and on the slow path only (rzslow),
 * and whether CFI must follow %rsp.
 */
struct rec {
    int A, B, saveA, saveB, flags, rz, rzslow, cfa;
};

/*
 * Picks two scratch registers outside used (nor %rsp), preferring registers
 * dead at the point (written before being read again): those need no save.
 */
static int scratch(unsigned used, unsigned dead, struct rec *r)
{
    static const int pref[] = {0, 2, 1, 6, 7, 8, 9, 10, 11, 3, 12, 13, 14, 15, 5};
    int got[2], n = 0;

    used |= 1u << ML_ASM_RSP;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < sizeof(pref) / sizeof(pref[0]) && n < 2; i++) {
            unsigned bit = 1u << pref[i];

            if (!(used & bit) && (pass || (dead & bit)) && (!n || got[0] != pref[i]))
                got[n++] = pref[i];
        }
    if (n < 2)
        return -ENOSPC;
    r->A = got[0], r->B = got[1];
    r->saveA = !(dead & (1u << r->A));
    r->saveB = !(dead & (1u << r->B));
    return 0;
}

static void cfa(struct buf *b, int on, int delta)
{
    if (on)
        bprintf(b, "\t.cfi_adjust_cfa_offset %d\n", delta);
}

/* "sym+disp" or "disp" or "sym" for an operand. */
static void disp_text(struct buf *b, const char *sym, int symlen, int64_t disp)
{
    if (sym) {
        bprintf(b, "%.*s", symlen, sym);
        if (disp)
            bprintf(b, "%+" PRId64, disp);
    } else {
        bprintf(b, "%" PRId64, disp);
    }
}

/*
 * Code computing into %B the address of access a of the instruction at block
 * position j, emitted at position k (the registers' values at k, in st), with
 * %rsp lowered by shift bytes since. Returns the register that holds the
 * address: %B, or the base itself when the address is just its value (no code).
 */
static int address(struct buf *b, const struct ml_asm_access *a, const struct ml_asm_regval *st,
                   int k, int j, int shift, int B)
{
    int64_t disp = a->disp;
    const char *rb = a->base < ML_ASM_NGPR ? reg64[a->base] : NULL;

    if (a->base < ML_ASM_NGPR) {
        disp += st[j * ML_ASM_NGPR + a->base].off - st[k * ML_ASM_NGPR + a->base].off;
        if (a->base == ML_ASM_RSP)
            disp += shift;
    }
    if (a->index < ML_ASM_NGPR)
        disp += (int64_t)a->scale *
                (st[j * ML_ASM_NGPR + a->index].off - st[k * ML_ASM_NGPR + a->index].off);
    if (a->base < ML_ASM_NGPR && a->index == ML_ASM_NOREG && !a->sym && !disp &&
        a->seg != ML_ASM_SEG_FS && a->count != ML_ASM_VSIB)
        return a->base;
    if (a->count == ML_ASM_VSIB) {
        /* The first lane's address. */
        if (a->vsize == 8) {
            bprintf(b, "\tvmovq\t%%xmm%d, %%%s\n", a->vindex, reg64[B]);
        } else {
            bprintf(b, "\tvmovd\t%%xmm%d, %%%s\n", a->vindex, reg32[B]);
            bprintf(b, "\tmovslq\t%%%s, %%%s\n", reg32[B], reg64[B]);
        }
        bprintf(b, "\tleaq\t");
        disp_text(b, a->sym, a->symlen, disp);
        bprintf(b, "(%s%s,%%%s,%d), %%%s\n", rb ? "%" : "", rb ? rb : "", reg64[B], a->scale,
                reg64[B]);
    } else if (a->base == ML_ASM_RIP) {
        bprintf(b, "\tleaq\t");
        disp_text(b, a->sym, a->symlen, disp);
        bprintf(b, "(%%rip), %%%s\n", reg64[B]);
    } else if (!rb && a->index == ML_ASM_NOREG && !a->sym) {
        bprintf(b, "\tmovabsq\t$%" PRId64 ", %%%s\n", disp, reg64[B]);
    } else {
        bprintf(b, "\tleaq\t");
        disp_text(b, a->sym, a->symlen, disp);
        if (rb || a->index != ML_ASM_NOREG) {
            bprintf(b, "(%s%s", rb ? "%" : "", rb ? rb : "");
            if (a->index != ML_ASM_NOREG)
                bprintf(b, ",%%%s,%d", reg64[a->index], a->scale);
            bprintf(b, ")");
        }
        bprintf(b, ", %%%s\n", reg64[B]);
    }
    if (a->seg == ML_ASM_SEG_FS)
        bprintf(b, "\taddq\t%%fs:0, %%%s\n", reg64[B]); /* %fs:0 holds the thread block's address */
    return B;
}

/* Steps %rsp over the red zone (delta < 0) or back, keeping CFI in step. */
static void red_zone(struct buf *b, int c, int delta)
{
    bprintf(b, "\tleaq\t%d(%%rsp), %%rsp\n", delta);
    cfa(b, c, -delta);
}

/*
 * Register saves, the room check for W words and the slow path; leaves
 * p + 8W in %B, and %A free. The words are filled next, at -8W(%B) up, and
 * committed last (epilogue), as the trace buffer ABI wants: the runtime never
 * sees a half-written segment.
 */
static void prologue(struct ml_asm_emit *e, struct buf *b, const struct rec *r, int W)
{
    int c = r->cfa, n = e->nlabel++, A = r->A, B = r->B;

    bprintf(b, "# memlens record {\n");
    if (r->rz)
        red_zone(b, c, -r->rz);
    if (r->saveA) {
        bprintf(b, "\tpushq\t%%%s\n", reg64[A]);
        cfa(b, c, 8);
    }
    if (r->saveB) {
        bprintf(b, "\tpushq\t%%%s\n", reg64[B]);
        cfa(b, c, 8);
    }
    if (r->flags) {
        bprintf(b, "\tpushfq\n");
        cfa(b, c, 8);
    }
    if (e->pic) {
        /* initial exec through the GOT: the variables live in the executable's runtime */
        bprintf(b, "\tmovq\t" ML_TB_SYM_PTR "@GOTTPOFF(%%rip), %%%s\n", reg64[B]);
        bprintf(b, "\tmovq\t%%fs:(%%%s), %%%s\n", reg64[B], reg64[A]);
        bprintf(b, "\tmovq\t" ML_TB_SYM_END "@GOTTPOFF(%%rip), %%%s\n", reg64[B]);
        bprintf(b, "\tmovq\t%%fs:(%%%s), %%%s\n", reg64[B], reg64[B]);
        /* end - p < W words: p never passes end, and a new thread's are both NULL */
        bprintf(b, "\tsubq\t%%%s, %%%s\n", reg64[A], reg64[B]);
        bprintf(b, "\tcmpq\t$%d, %%%s\n", 8 * W, reg64[B]);
        bprintf(b, "\tjae\t.Lmemlens_ok%d\n", n);
    } else {
        /* local exec: an executable, linked with the runtime; p + W > end, unsigned */
        bprintf(b, "\tmovq\t%%fs:" ML_TB_SYM_PTR "@TPOFF, %%%s\n", reg64[A]);
        bprintf(b, "\tleaq\t%d(%%%s), %%%s\n", 8 * W, reg64[A], reg64[B]);
        bprintf(b, "\tcmpq\t%%fs:" ML_TB_SYM_END "@TPOFF, %%%s\n", reg64[B]);
        bprintf(b, "\tjbe\t.Lmemlens_ok%d\n", n);
    }
    /* The flush's call writes below %rsp: a leaf's red zone, when not stepped over yet. */
    if (r->rzslow)
        red_zone(b, c, -RED_ZONE);
    bprintf(b, "\tpushq\t$%d\n", W);
    cfa(b, c, 8);
    bprintf(b, "\tcall\t*__memlens_asm_flush@GOTPCREL(%%rip)\n");
    bprintf(b, "\tpopq\t%%%s\n", reg64[A]);
    cfa(b, c, -8);
    if (r->rzslow)
        red_zone(b, c, RED_ZONE);
    if (!e->pic)
        bprintf(b, "\tleaq\t%d(%%%s), %%%s\n", 8 * W, reg64[A], reg64[B]);
    bprintf(b, ".Lmemlens_ok%d:\n", n);
    if (e->pic)
        bprintf(b, "\tleaq\t%d(%%%s), %%%s\n", 8 * W, reg64[A], reg64[B]);
}

/* Commits the words up to %B, then restores what the prologue saved. */
static void epilogue(struct ml_asm_emit *e, struct buf *b, const struct rec *r)
{
    int c = r->cfa;

    if (e->pic) {
        bprintf(b, "\tmovq\t" ML_TB_SYM_PTR "@GOTTPOFF(%%rip), %%%s\n", reg64[r->A]);
        bprintf(b, "\tmovq\t%%%s, %%fs:(%%%s)\n", reg64[r->B], reg64[r->A]);
    } else {
        bprintf(b, "\tmovq\t%%%s, %%fs:" ML_TB_SYM_PTR "@TPOFF\n", reg64[r->B]);
    }
    if (r->flags) {
        bprintf(b, "\tpopfq\n");
        cfa(b, c, -8);
    }
    if (r->saveB) {
        bprintf(b, "\tpopq\t%%%s\n", reg64[r->B]);
        cfa(b, c, -8);
    }
    if (r->saveA) {
        bprintf(b, "\tpopq\t%%%s\n", reg64[r->A]);
        cfa(b, c, -8);
    }
    if (r->rz)
        red_zone(b, c, r->rz);
    bprintf(b, "# memlens record }\n");
}

/* The sequence's choices at block position k; -ENOSPC without two scratch registers. */
static int plan(const struct ml_asm_emit *e, const struct ml_asm_block *blk, int k, unsigned used,
                unsigned dead, int flags, struct rec *r)
{
    int unit = blk->first + k;

    r->flags = flags;
    r->cfa = e->cfa_rsp[unit];
    if (scratch(used, dead, r))
        return -ENOSPC;
    /*
     * Saves and the slow path's call write below %rsp: a leaf's red zone is
     * stepped over around the whole sequence when it saves anything, else on
     * the slow path only.
     */
    r->rz = e->leaf[unit] && (r->saveA || r->saveB || r->flags) ? RED_ZONE : 0;
    r->rzslow = e->leaf[unit] && !r->rz;
    return 0;
}

/* How far %rsp moved from the instruction's own to the record code's. */
static int shift_of(const struct rec *r)
{
    return r->rz + 8 * (r->saveA + r->saveB) + (r->flags ? 8 : 0);
}

/* Whether the registers regs hold the same values (value numbers) before instructions x and y. */
static int same_values(const struct ml_asm_regval *st, int x, int y, unsigned regs)
{
    for (int reg = 0; reg < ML_ASM_NGPR; reg++)
        if ((regs & (1u << reg)) &&
            st[x * ML_ASM_NGPR + reg].root != st[y * ML_ASM_NGPR + reg].root)
            return 0;
    return 1;
}

/* A segment of descriptor-described records: sites[0..n) of the accesses at (unit[i], acc[i]). */
static int emit_segment(struct ml_asm_emit *e, const struct ml_asm_block *blk,
                        const struct ml_asm_regval *st, int k, const int *pj, const int *pa,
                        const int *sites, int n, unsigned used, unsigned dead, int flags)
{
    struct buf *b = &e->before[blk->first + k];
    int seg = e->nsegw, words = 1 + n + ((1 + n) & 1), A, B;
    struct rec r;

    if (plan(e, blk, k, used, dead, flags, &r))
        return -ENOSPC;
    A = r.A, B = r.B;
    if (grow((void **)&e->segw, &e->capsegw, e->nsegw + words, sizeof(uint32_t)))
        return -ENOMEM;
    e->segw[e->nsegw] = (uint32_t)n;
    for (int i = 0; i < n; i++)
        e->segw[e->nsegw + 1 + i] = (uint32_t)sites[i];
    if ((1 + n) & 1)
        e->segw[e->nsegw + 1 + n] = 0;
    e->nsegw += words;
    prologue(e, b, &r, 1 + n);
    bprintf(b, "\tleaq\t.Lmemlens_segs+%d(%%rip), %%%s\n", 4 * seg, reg64[A]);
    bprintf(b, "\tmovq\t%%%s, %d(%%%s)\n", reg64[A], -8 * (1 + n), reg64[B]);
    for (int i = 0; i < n; i++) {
        int x = address(b, &e->insn[blk->first + pj[i]].acc[pa[i]], st, k, pj[i], shift_of(&r), A);

        bprintf(b, "\tmovq\t%%%s, %d(%%%s)\n", reg64[x], 8 * (i - n), reg64[B]);
    }
    epilogue(e, b, &r);
    return b->s ? 0 : -ENOMEM;
}

/*
 * A rep string operation: one explicit-access record per access (tag 2, with
 * the element size and the count in %rcx as its weight), since its count is
 * known only at run time.
 */
static int emit_rep(struct ml_asm_emit *e, const struct ml_asm_block *blk, int k, const int *sites,
                    int n, unsigned dead, int flags)
{
    struct buf *b = &e->before[blk->first + k];
    const struct ml_asm_insn *in = &e->insn[blk->first + k];
    unsigned used = 0;
    int A, B;
    struct rec r;

    for (int i = 0; i < in->naccess; i++)
        used |= addr_regs(&in->acc[i]);
    if (plan(e, blk, k, used, dead, flags, &r))
        return -ENOSPC;
    A = r.A, B = r.B;
    prologue(e, b, &r, 4 * n);
    for (int i = 0; i < n; i++) {
        const struct ml_asm_access *a = &in->acc[i];
        int at = 32 * (i - n);

        bprintf(b, "\tmovl\t.Lmemlens_module+%zu(%%rip), %%%s\n",
                offsetof(struct ml_ev_module, site_base), reg32[A]);
        bprintf(b, "\taddq\t$%d, %%%s\n", sites[i], reg64[A]);
        bprintf(b, "\tshlq\t$8, %%%s\n", reg64[A]);
        bprintf(b, "\torq\t$%u, %%%s\n", (3u << 3) | ML_TB_TAG_ACCESS, reg64[A]);
        bprintf(b, "\tmovq\t%%%s, %d(%%%s)\n", reg64[A], at, reg64[B]);
        bprintf(b, "\tmovq\t%%%s, %d(%%%s)\n", reg64[a->base], at + 8, reg64[B]);
        bprintf(b, "\tmovq\t$%u, %d(%%%s)\n", a->size, at + 16, reg64[B]);
        bprintf(b, "\tmovq\t%%rcx, %d(%%%s)\n", at + 24, reg64[B]);
    }
    epilogue(e, b, &r);
    return b->s ? 0 : -ENOMEM;
}

static int add_site(struct ml_asm_emit *e, const struct ml_asm_block *blk, int unit,
                    const struct ml_asm_access *a, int weight, int marker)
{
    struct esite *s;

    if (grow((void **)&e->site, &e->capsite, e->nsite + 1, sizeof(*e->site)))
        return -ENOMEM;
    s = &e->site[e->nsite];
    s->kind = a->dir == (ML_ASM_LOAD | ML_ASM_STORE) ? ML_EV_RMW
              : a->dir == ML_ASM_STORE               ? ML_EV_STORE
                                                     : ML_EV_LOAD;
    s->size = a->size;
    s->weight = (uint32_t)weight * (a->count == ML_ASM_VSIB ? a->elems : 1);
    s->marker = (uint32_t)marker;
    s->line = e->loc[unit].line > 0 ? (uint32_t)e->loc[unit].line : 0;
    s->column = e->loc[unit].col > 0 ? (uint32_t)e->loc[unit].col : 0;
    s->file = e->loc[unit].file;
    s->func = blk->func;
    s->text = unit;
    return e->nsite++;
}

int ml_asm_emit_marker(struct ml_asm_emit *e, const struct ml_asm_block *blk, int bno,
                       const struct ml_asm_insn *in, const struct ml_asm_result *r)
{
    int l = 0, s = 0, rmw = 0;
    const char *fn = blk->func >= 0 ? e->f->func[blk->func].name : "?";
    struct emarker *m;
    char *name;

    if (!r->m)
        return -1;
    for (int i = 0; i < r->m; i++) {
        int dir = in[r->pick[i].insn].acc[r->pick[i].acc].dir;

        rmw += dir == (ML_ASM_LOAD | ML_ASM_STORE);
        l += dir == ML_ASM_LOAD;
        s += dir == ML_ASM_STORE;
    }
    if (asprintf(&name, "%s:%s:%d m=%d l=%d s=%d r=%d ma=%.4f aia=%.4f C=%u", e->name, fn, bno,
                 r->m, l, s, rmw, r->ma, r->aia, e->chunk) < 0)
        return -ENOMEM;
    if (grow((void **)&e->mk, &e->capmk, e->nmk + 1, sizeof(*e->mk))) {
        free(name);
        return -ENOMEM;
    }
    m = &e->mk[e->nmk];
    m->name = name;
    m->func = blk->func;
    m->file = e->loc[blk->first].file;
    m->line = e->loc[blk->first].line > 0 ? (uint32_t)e->loc[blk->first].line : 0;
    return e->nmk++;
}

/*
 * Whether unit k is a tail call: a jump to a symbol, which clang's code only
 * ever does to enter another function ("jmp f", "jmpq *f@GOTPCREL(%rip)");
 * its blocks jump to .L labels, jump tables through registers. After it, as
 * at a function's entry, the flags are dead and only the argument and
 * callee-saved registers are live.
 */
static int tail_call(const struct ml_asm_emit *e, int k)
{
    const char *t = e->f->line[e->u->last[k]].operands;

    if (e->insn[k].flow != ML_ASM_FLOW_JUMP && e->insn[k].flow != ML_ASM_FLOW_IJUMP)
        return 0;
    while (isspace((unsigned char)*t))
        t++;
    if (e->insn[k].flow == ML_ASM_FLOW_IJUMP) {
        if (*t != '*' || !strstr(t, "@GOTPCREL(%rip)"))
            return 0;
        t++;
    }
    return (isalpha((unsigned char)*t) || *t == '_' || *t == '"') && strncmp(t, ".L", 2);
}

int ml_asm_emit_block(struct ml_asm_emit *e, const struct ml_asm_block *blk, int marker,
                      const struct ml_asm_result *r)
{
    const struct ml_asm_insn *in = e->insn + blk->first;
    int n = blk->end - blk->first, rc = 0, ns = 0, tail;
    struct ml_asm_regval *st = NULL;
    unsigned *live = NULL, *gpr = NULL;
    int *sel = NULL, *site = NULL, *pj = NULL, *pa = NULL;

    for (int i = 0; i < r->m; i++)
        ns += r->pick[i].selected;
    if (!ns)
        return 0;
    ns = 0;
    st = malloc((size_t)(n + 1) * ML_ASM_NGPR * sizeof(*st));
    live = malloc((size_t)(n + 1) * sizeof(*live));
    gpr = malloc((size_t)(n + 1) * sizeof(*gpr));
    sel = malloc((size_t)r->m * sizeof(int));
    site = malloc((size_t)r->m * sizeof(int));
    pj = malloc((size_t)r->m * sizeof(int));
    pa = malloc((size_t)r->m * sizeof(int));
    if (!st || !live || !gpr || !sel || !site || !pj || !pa) {
        rc = -ENOMEM;
        goto out;
    }
    ml_asm_states(in, n, st);
    /*
     * Flags and general registers live before each instruction, backwards
     * from the block's end: what the function's flow says is live there when
     * it is known (ml_asm_fold_equivalent), else the block's own rule (after a
     * call, a return or a tail call: the ABI's; elsewhere everything).
     */
    tail = tail_call(e, blk->first + n - 1);
    ml_asm_block_out(blk, &in[n - 1], tail, &gpr[n], &live[n]);
    for (int k = n - 1; k >= 0; k--) {
        live[k] = ml_asm_flags_before(&in[k], live[k + 1]);
        gpr[k] = ml_asm_gpr_before(&in[k], gpr[k + 1]);
    }
    for (int i = 0; i < r->m; i++) {
        if (!r->pick[i].selected)
            continue;
        sel[ns] = i;
        site[ns] =
            add_site(e, blk, blk->first + r->pick[i].insn, &in[r->pick[i].insn].acc[r->pick[i].acc],
                     e->mode == ML_ASM_NS ? 1 : r->pick[i].weight, marker);
        if (site[ns] < 0) {
            rc = site[ns];
            goto out;
        }
        ns++;
    }
    /*
     * Segments: a run of selected accesses recorded at the first one's
     * instruction, as long as the registers of their addresses keep their
     * value numbers up to there (constant steps are added back), two scratch
     * registers stay free, and none counts at run time.
     */
    for (int i = 0; i < ns;) {
        const struct ml_asm_pick *p = &r->pick[sel[i]];
        const struct ml_asm_access *a = &in[p->insn].acc[p->acc];
        int k = p->insn, cnt = 0;
        unsigned used = addr_regs(a);

        if (a->count == ML_ASM_REP) {
            /* Every access of the instruction in one reservation. */
            int j = i;

            while (j < ns && r->pick[sel[j]].insn == k)
                j++;
            rc = emit_rep(e, blk, k, site + i, j - i, ~gpr[k] & 0xffff, live[k] != 0);
            if (rc)
                goto out;
            i = j;
            continue;
        }
        pj[cnt] = k, pa[cnt] = p->acc, cnt++;
        int j = i + 1;

        for (; a->count == ML_ASM_ONCE && j < ns && cnt < SEG_SITES; j++) {
            const struct ml_asm_pick *q = &r->pick[sel[j]];
            const struct ml_asm_access *b = &in[q->insn].acc[q->acc];
            unsigned need = addr_regs(b), all = used | need | (1u << ML_ASM_RSP);
            int ok = b->count == ML_ASM_ONCE && __builtin_popcount(all) <= ML_ASM_NGPR - 2;

            /* not past a call (in a chain of blocks): its callee's records come first */
            for (int x = k; ok && x < q->insn; x++)
                ok = !in[x].opaque && in[x].flow != ML_ASM_FLOW_CALL;
            if (!ok)
                break;
            if (same_values(st, k, q->insn, need)) {
                used |= need;
                pj[cnt] = q->insn, pa[cnt] = q->acc, cnt++;
                continue;
            }
            /*
             * Its address is not known yet at k (a load defined a register of
             * it, as x[col[j]] after col[j]): the segment moves down to it when
             * the earlier accesses' registers still hold their values there and
             * no call comes between (its callee's records would come first).
             */
            for (int c = 0; ok && c < cnt; c++)
                ok = same_values(st, pj[c], q->insn, addr_regs(&in[pj[c]].acc[pa[c]]));
            for (int x = pj[0]; ok && x < q->insn; x++)
                ok = in[x].flow != ML_ASM_FLOW_CALL;
            if (!ok)
                break;
            k = q->insn;
            used |= need;
            pj[cnt] = q->insn, pa[cnt] = q->acc, cnt++;
        }
        rc = emit_segment(e, blk, st, k, pj, pa, site + i, cnt, used, ~gpr[k] & 0xffff,
                          live[k] != 0);
        if (rc)
            goto out;
        i = j;
    }
out:
    free(st);
    free(live);
    free(gpr);
    free(sel);
    free(site);
    free(pj);
    free(pa);
    return rc;
}

/* A string literal for the assembler. */
static void put_string(FILE *out, const char *s, int n)
{
    fputs("\t.asciz\t\"", out);
    for (int i = 0; i < n && s[i]; i++) {
        unsigned char c = (unsigned char)s[i];

        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c < 32 || c >= 127)
            fprintf(out, "\\%03o", c);
        else
            fputc(c, out);
    }
    fputs("\"\n", out);
}

/* The instruction text of a unit: its mnemonic and operands, as written. */
static void unit_text(FILE *out, const struct ml_asm_emit *e, int k)
{
    const struct ml_asm_line *l = &e->f->line[e->u->last[k]];
    char buf[512];
    int n = snprintf(buf, sizeof(buf), "%s%s%s", l->name, *l->operands ? " " : "", l->operands);

    put_string(out, buf, n < (int)sizeof(buf) ? n : (int)sizeof(buf) - 1);
}

int ml_asm_emit_write(struct ml_asm_emit *e, FILE *out, const char *name)
{
    const struct ml_asm_file *f = e->f;
    int k = 0;

    for (int i = 0; i < f->nline; i++) {
        if (k < e->u->n && e->u->first[k] == i) {
            if (e->before[k].n)
                fwrite(e->before[k].s, 1, e->before[k].n, out);
            k++;
        }
        fwrite(f->line[i].start, 1, f->line[i].len, out);
        fputc('\n', out);
    }
    if (!e->nsite)
        return ferror(out) ? -EIO : 0;
    /* Strings: the module, functions, files, instruction texts and block names. */
    fprintf(out, "# memlens tables: sites, segment descriptors, blocks, registration\n");
    fprintf(out, "\t.section\t.rodata.str1.1,\"aMS\",@progbits,1\n");
    fprintf(out, ".Lmemlens_name:\n");
    put_string(out, name, (int)strlen(name));
    fprintf(out, ".Lmemlens_nofile:\n");
    put_string(out, "", 0);
    for (int i = 0; i < f->nfunc; i++) {
        fprintf(out, ".Lmemlens_fn%d:\n", i);
        put_string(out, f->func[i].name, (int)strlen(f->func[i].name));
    }
    for (int i = 0; i < e->nfiles; i++)
        if (e->files[i]) {
            fprintf(out, ".Lmemlens_file%d:\n", i);
            put_string(out, e->files[i], (int)strlen(e->files[i]));
        }
    for (int i = 0; i < e->nsite; i++) {
        fprintf(out, ".Lmemlens_text%d:\n", i);
        unit_text(out, e, e->site[i].text);
    }
    for (int i = 0; i < e->nmk; i++) {
        fprintf(out, ".Lmemlens_block%d:\n", i);
        put_string(out, e->mk[i].name, (int)strlen(e->mk[i].name));
    }
    fprintf(out, "\t.section\t.data.rel.ro,\"aw\",@progbits\n\t.p2align\t3\n.Lmemlens_sites:\n");
    for (int i = 0; i < e->nsite; i++) {
        const struct esite *s = &e->site[i];
        int file = s->file >= 0 && s->file < e->nfiles && e->files[s->file] ? s->file : -1;

        fprintf(out, "\t.long\t%u, %u, %u, %u, %u, %u\n", s->kind, s->size, s->weight, s->marker,
                s->line, s->column);
        if (s->func >= 0)
            fprintf(out, "\t.quad\t.Lmemlens_fn%d\n", s->func);
        else
            fprintf(out, "\t.quad\t.Lmemlens_nofile\n");
        if (file >= 0)
            fprintf(out, "\t.quad\t.Lmemlens_file%d, .Lmemlens_text%d\n", file, i);
        else
            fprintf(out, "\t.quad\t.Lmemlens_nofile, .Lmemlens_text%d\n", i);
    }
    fprintf(out, ".Lmemlens_markers:\n");
    for (int i = 0; i < e->nmk; i++) {
        const struct emarker *m = &e->mk[i];
        int file = m->file >= 0 && m->file < e->nfiles && e->files[m->file] ? m->file : -1;

        fprintf(out, "\t.long\t%u, %u\n", (unsigned)ML_MK_BLOCK, m->line);
        fprintf(out, "\t.quad\t.Lmemlens_block%d, ", i);
        if (file >= 0)
            fprintf(out, ".Lmemlens_file%d, ", file);
        else
            fprintf(out, ".Lmemlens_nofile, ");
        if (m->func >= 0)
            fprintf(out, ".Lmemlens_fn%d\n", m->func);
        else
            fprintf(out, ".Lmemlens_nofile\n");
    }
    fprintf(out, "\t.p2align\t3\n.Lmemlens_segs:\n");
    for (int i = 0; i < e->nsegw; i++)
        fprintf(out, "\t.long\t%u\n", e->segw[i]);
    /* The module descriptor: the runtime fills site_base, marker_base and next. */
    fprintf(out, "\t.data\n\t.p2align\t3\n.Lmemlens_module:\n");
    fprintf(out, "\t.long\t%d, %d, %d, %d, 0, 0\n", ML_EV_ABI, e->nsite, e->nmk, e->nsegw);
    fprintf(out, "\t.quad\t.Lmemlens_name, .Lmemlens_sites, .Lmemlens_markers, "
                 ".Lmemlens_segs\n");
    /* An impossible site base until registration: records of code run before are dropped. */
    fprintf(out, "\t.long\t0x7f000000, 0\n\t.quad\t0\n");
    fprintf(out, "\t.text\n\t.p2align\t4\n.Lmemlens_ctor:\n");
    fprintf(out, "\tleaq\t.Lmemlens_module(%%rip), %%rdi\n");
    fprintf(out, "\tjmpq\t*" ML_TB_SYM_REGISTER "@GOTPCREL(%%rip)\n");
    fprintf(out, "\t.section\t.init_array,\"aw\",@init_array\n\t.p2align\t3\n");
    fprintf(out, "\t.quad\t.Lmemlens_ctor\n");
    return ferror(out) ? -EIO : 0;
}

_Static_assert(offsetof(struct ml_ev_site, func) == 24 && sizeof(struct ml_ev_site) == 48,
               "the site table written above follows struct ml_ev_site");
_Static_assert(offsetof(struct ml_ev_marker, name) == 8 && sizeof(struct ml_ev_marker) == 32,
               "the marker table written above follows struct ml_ev_marker");
_Static_assert(offsetof(struct ml_ev_module, name) == 24 &&
                   offsetof(struct ml_ev_module, site_base) == 56 &&
                   sizeof(struct ml_ev_module) == 72,
               "the module written above follows struct ml_ev_module");
