/* Selective machine-code tracing: x86-64 assembly parsing, decoding, blocks and access selection.
 */
#ifndef ML_ASM_H
#define ML_ASM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/*
 * The pipeline (docs/select.md): clang's assembly is parsed into lines
 * (ml_asm_parse), each instruction is given its encoding by assembling an
 * annotated copy with llvm-mc (ml_asm_annotate, ml_asm_read_encodings), decoded
 * with Zydis (ml_asm_decode), cut into basic blocks (ml_asm_blocks), and each
 * block's memory accesses are analysed and selected (ml_asm_select, pure).
 */

/* Formats a reason into err (errlen bytes; nothing when err is NULL). */
void ml_asm_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- registers ---- */

/* General registers by their 64-bit number: rax=0, rcx, rdx, rbx, rsp, rbp, rsi, rdi, r8..r15. */
#define ML_ASM_NGPR  16
#define ML_ASM_RSP   4
#define ML_ASM_RBP   5
#define ML_ASM_RIP   16   /* base of a RIP-relative operand */
#define ML_ASM_VREG  17   /* index of a gather or scatter: a vector register */
#define ML_ASM_NOREG 0xff /* no base or no index */

/* Name of a register number above ("rax", "rip", "vec", "-"). */
const char *ml_asm_reg_name(int reg);

/* ---- decoded instructions ---- */

enum ml_asm_dir {
    ML_ASM_LOAD = 1,
    ML_ASM_STORE = 2, /* LOAD|STORE: read-modify-write of one location */
};

enum ml_asm_seg { ML_ASM_SEG_NONE, ML_ASM_SEG_FS, ML_ASM_SEG_GS };

/* How many accesses one execution of an access makes. */
enum ml_asm_count {
    ML_ASM_ONCE, /* exactly one (also a masked vector access: one access of the full size) */
    ML_ASM_REP,  /* a string operation with a rep prefix: %rcx times, stepping by size */
    ML_ASM_VSIB, /* a gather or scatter: one per active element, addresses in a vector */
};

/* One memory access of an instruction, with its address expression as decoded. */
struct ml_asm_access {
    uint8_t dir;      /* enum ml_asm_dir */
    uint8_t implicit; /* not an operand in the text: stack of push/pop/call/ret, string ops */
    uint8_t seg;      /* enum ml_asm_seg (cs/ds/es/ss are flat in 64-bit mode) */
    uint8_t base;     /* 0..15, ML_ASM_RIP or ML_ASM_NOREG */
    uint8_t index;    /* 0..15, ML_ASM_VREG or ML_ASM_NOREG */
    uint8_t scale;    /* 1, 2, 4 or 8 */
    uint8_t count;    /* enum ml_asm_count */
    uint8_t vindex;   /* ML_ASM_VSIB: the index vector register's number (0-31) */
    uint8_t vsize;    /* ML_ASM_VSIB: bytes of one index element (4 or 8) */
    uint16_t size;    /* bytes of one access (of one element for gathers and scatters) */
    uint16_t elems;   /* gathers and scatters: elements; otherwise 1 */
    uint16_t symlen;  /* length of sym */
    int64_t disp;     /* displacement; with sym, the offset from the symbol */
    const char *sym;  /* link-time address the displacement is relative to (not terminated: it
                         points into the operand text given to ml_asm_decode), or NULL */
};

enum ml_asm_flow {
    ML_ASM_FLOW_NONE,  /* falls through */
    ML_ASM_FLOW_JUMP,  /* unconditional direct jump (also a tail call) */
    ML_ASM_FLOW_CJUMP, /* conditional jump, loop, jrcxz, xbegin */
    ML_ASM_FLOW_IJUMP, /* indirect jump (jump tables, indirect tail calls) */
    ML_ASM_FLOW_CALL,  /* any call: it may not return (exit, longjmp, throw) */
    ML_ASM_FLOW_RET,   /* return */
    ML_ASM_FLOW_STOP,  /* ud2, hlt, int3, ... */
};

#define ML_ASM_MAXACC 3
#define ML_ASM_MAXLIN 2

/*
 * A register set by this instruction to another register plus a constant, as
 * far as the analysis folds them: mov, lea base+disp, add/sub/inc/dec of an
 * immediate (64-bit forms only), and %rsp by push/pop/call/ret/leave. With src
 * ML_ASM_RIP the register is set to the address of sym plus add (lea sym(%rip),
 * mov $sym).
 */
struct ml_asm_linear {
    uint8_t dst, src; /* general register numbers, or src ML_ASM_RIP */
    uint16_t symlen;
    int64_t add;
    const char *sym; /* with src ML_ASM_RIP (points into the operand text) */
};

struct ml_asm_insn {
    int line;             /* line of the instruction in the parsed file (its first prefix) */
    uint8_t len;          /* encoded length in bytes */
    uint8_t flow;         /* enum ml_asm_flow */
    uint8_t opaque;       /* not decoded, or inline assembly: clobbers everything, left alone */
    uint8_t naccess;      /* entries of acc[] */
    uint8_t nlinear;      /* entries of lin[] */
    uint8_t tls_sequence; /* part of a TLS general/local-dynamic sequence the linker may rewrite */
    uint8_t untraced;     /* accesses left out: %gs-relative, or addresses no expression holds
                             (xlat's %rbx + %al, 32-bit addresses, RIP-relative without a symbol) */
    uint16_t reg_read;    /* general registers read (bit per number), explicit or implicit */
    uint16_t reg_written; /* general registers written, any part, explicit or implicit */
    uint16_t reg_killed;  /* general registers written whole (32 or 64 bits) without being read */
    uint32_t flags_read;  /* status flags read (ZYDIS_CPUFLAG_* bits) */
    uint32_t flags_written;
    struct ml_asm_linear lin[ML_ASM_MAXLIN];
    struct ml_asm_access acc[ML_ASM_MAXACC];
};

/*
 * Decodes one instruction from its bytes (code[0..n-1]; relocated fields may
 * be zero) and the operand text as written in AT&T syntax (for the symbol of a
 * displacement, which the bytes do not hold). Returns 0, or -EINVAL when the
 * bytes are not exactly one instruction (*out is then marked opaque).
 */
int ml_asm_decode(const uint8_t *code, size_t n, const char *operands, struct ml_asm_insn *out);

/*
 * Parses the displacement of an AT&T memory operand op[0..n)
 * "[*][%seg:][disp][(base[,index[,scale]])]": disp is a number, a symbol,
 * "symbol+number" or "number+symbol" (symbols may carry @MODIFIER); any other
 * expression is kept whole as the symbol. On success *sym points into op (or
 * is NULL), *symlen is its length and *disp the number. Returns 0, or -EINVAL
 * when op is a register or an immediate.
 */
int ml_asm_parse_disp(const char *op, size_t n, const char **sym, size_t *symlen, int64_t *disp);

/* ---- parsed assembly files ---- */

enum ml_asm_line_kind {
    ML_ASM_BLANK,     /* empty or a comment */
    ML_ASM_LABEL,     /* "name:" (a comment may follow) */
    ML_ASM_DIRECTIVE, /* ".name ..." */
    ML_ASM_INSN,      /* an instruction or a prefix on its own line */
    ML_ASM_APP,       /* inline assembly (#APP ... #NO_APP, markers included) */
};

struct ml_asm_line {
    uint8_t kind;      /* enum ml_asm_line_kind */
    uint8_t exec;      /* in an executable section */
    uint8_t prefix;    /* an instruction line that is a prefix only (data16, rex64, rep, lock) */
    uint8_t debugref;  /* a directive in a debug section (its label references do not count) */
    int func;          /* index of the function it belongs to, or -1 */
    const char *start; /* the line in the file's text */
    int len;
    char *name;     /* LABEL: the label; INSN: the mnemonic */
    char *operands; /* INSN: operands without the comment, or "" */
};

struct ml_asm_func {
    char *name;
    int first, end; /* lines [first, end) */
};

struct ml_asm_file {
    char *text; /* the file, NUL-terminated */
    size_t size;
    struct ml_asm_line *line;
    int nline;
    struct ml_asm_func *func;
    int nfunc;
    /* Labels referenced by instructions or data outside debug sections (sorted, unique). */
    char **ref;
    int nref;
};

/*
 * Parses the assembly text (copied). Functions are the labels declared
 * "@function" up to their .size or .cfi_endproc. Returns 0 or -errno with a
 * reason in err.
 */
int ml_asm_parse(const char *text, size_t size, struct ml_asm_file *f, char *err, size_t errlen);
void ml_asm_file_free(struct ml_asm_file *f);

/* Whether label is referenced outside debug sections (a block may start there). */
int ml_asm_is_referenced(const struct ml_asm_file *f, const char *label);

/*
 * An instruction unit: an instruction line with the prefix lines before it.
 * Units are numbered in file order; unit k starts at line first[k] and its
 * instruction is at line last[k]. Units are only made in executable sections
 * and outside inline assembly.
 */
struct ml_asm_units {
    int n;
    int *first, *last;
    uint8_t **code; /* encoding of unit k (code[k], len[k] bytes), after ml_asm_read_encodings */
    int *len;
};

int ml_asm_units(const struct ml_asm_file *f, struct ml_asm_units *u);
void ml_asm_units_free(struct ml_asm_units *u);

/*
 * Writes f's text to out with a label ".Lml_e<k>:" before each unit, for
 * "llvm-mc --show-encoding". Returns 0 or -errno.
 */
int ml_asm_annotate(const struct ml_asm_file *f, const struct ml_asm_units *u, FILE *out);

/*
 * Reads llvm-mc's --show-encoding output of the annotated file and fills
 * u->code and u->len (fixup bytes read as zero). Returns 0, or -EINVAL with a
 * reason in err when a unit is missing or the text is not llvm-mc's.
 */
int ml_asm_read_encodings(const char *mc, size_t size, struct ml_asm_units *u, char *err,
                          size_t errlen);

/* ---- basic blocks ---- */

struct ml_asm_block {
    int func;         /* function index */
    int first, end;   /* units [first, end) */
    int label_line;   /* line of the label that starts it, or -1 (falls through or entry) */
    int after_call;   /* starts only because the unit before it is a call */
    int out_known;    /* gpr_out and flags_out hold the function's flow (ml_asm_fold_equivalent) */
    unsigned gpr_out; /* general registers live after the block (bit per number) */
    unsigned flags_out; /* status flags live after it (ML_ASM_STATUS_FLAGS bits) */
};

/* Status flags a record sequence changes (add, cmp): CF PF AF ZF SF OF, Zydis bits. */
#define ML_ASM_STATUS_FLAGS 0x8d5u
/* Registers live after a return: results, callee-saved ones, %rsp (System V). */
#define ML_ASM_RET_LIVE 0xf03du
/* Registers a call reads (arguments, %rax for varargs) and the caller-saved ones it writes. */
#define ML_ASM_CALL_ARGS      0x03c7u
#define ML_ASM_CALL_CLOBBERED 0x0fc7u

/* General registers live before instruction in when those in after are live after it. */
unsigned ml_asm_gpr_before(const struct ml_asm_insn *in, unsigned after);
/* Status flags live before in (a call's callee sets them: none). */
unsigned ml_asm_flags_before(const struct ml_asm_insn *in, unsigned after);
/*
 * What is live after block b, whose last instruction is last (tail: a tail
 * call): b's gpr_out/flags_out when known, else by the ABI after a return or
 * a tail call (and, for the flags, a call or a stop), everything elsewhere.
 */
void ml_asm_block_out(const struct ml_asm_block *b, const struct ml_asm_insn *last, int tail,
                      unsigned *gpr, unsigned *flags);

/*
 * Cuts the decoded units of f into basic blocks: a block starts at a function's
 * first instruction, at a label referenced outside debug sections (jump
 * targets, jump-table entries, landing pads) and after any jump, call, return
 * or stop, or inline assembly; opaque units are blocks of their own.
 * *blocks is malloc'ed. Returns the number of blocks or -errno.
 */
int ml_asm_blocks(const struct ml_asm_file *f, const struct ml_asm_units *u,
                  const struct ml_asm_insn *insn, struct ml_asm_block **blocks);

/*
 * Joins each block that starts only because of a call into the block of that
 * call, unless the callee may return twice (setjmp, vfork): the code after a
 * call that returns runs as often as the code before it, so selection may
 * count the accesses of both with the records of either. Returns the new
 * number of blocks (docs/select.md, "Call chains").
 */
int ml_asm_chain_calls(const struct ml_asm_file *f, const struct ml_asm_units *u,
                       struct ml_asm_block *blocks, int nb);

struct ml_asm_fold {
    int leader;       /* the block of the class that dominates the others (itself when alone) */
    int depth;        /* its dominators: members run in this order */
    unsigned clobber; /* general registers that may change from the previous member to it */
    int site;         /* a callee folded into its caller's unit: the unit of its only call, or -1 */
};

/*
 * Control-equivalent blocks (docs/select.md, "Folding"): fold[i] gets block i's
 * class, and the blocks of functions whose flow is known get what is live
 * after them (out_known, gpr_out, flags_out). Blocks
 * A and B are one class when A dominates B, B post-dominates A and no cycle
 * goes through one without the other, so that they run equally often. Only
 * functions whose control flow is known are folded (no indirect jumps but tail
 * calls, no inline assembly or undecoded units, no setjmp-like callees, every
 * block reached from the entry and reaching a return). Returns 0 or -ENOMEM.
 */
int ml_asm_fold_equivalent(const struct ml_asm_file *f, const struct ml_asm_units *u,
                           const struct ml_asm_insn *insn, struct ml_asm_block *blocks, int nb,
                           struct ml_asm_fold *fold);

/*
 * Callees folded into their caller's unit (docs/select.md, "Callees"): a
 * function of one block (after call chains) that is local to the file and
 * named nowhere but in its only call or tail call runs exactly as often as
 * the unit of that call, so its block joins that unit (fold[].leader) with
 * site the calling unit. Applied after ml_asm_fold_equivalent, transitively.
 * Returns 0 or -ENOMEM.
 */
int ml_asm_fold_callees(const struct ml_asm_file *f, const struct ml_asm_units *u,
                        const struct ml_asm_insn *insn, const struct ml_asm_block *blocks, int nb,
                        struct ml_asm_fold *fold);

/* ---- analysis and selection (pure: no I/O) ---- */

enum ml_asm_mode {
    ML_ASM_NS,  /* non-selective: every access instrumented, weight 1 */
    ML_ASM_MA,  /* select for the expected (mean) accuracy */
    ML_ASM_AIA, /* select for the alignment-independent accuracy */
};

struct ml_asm_params {
    double omega; /* budget: W = ceil(omega * m) accesses instrumented per block, 0 < omega <= 1 */
    uint32_t chunk; /* granularity C in bytes, a power of two */
    int mode;       /* enum ml_asm_mode */
    int score[3];   /* distance scores s1 < s2 < s3 with s1 + s2 < s3 (docs/select.md) */
};

/* The default scores of a mode (ML_ASM_MA or ML_ASM_AIA). */
void ml_asm_default_scores(int mode, int score[3]);

/* Checks p; returns 0, or -EINVAL with the reason in err. */
int ml_asm_params_check(const struct ml_asm_params *p, char *err, size_t errlen);

/* The BID expression of an access after folding: base + index*scale + d, in a class. */
struct ml_asm_bid {
    uint8_t tmpl;    /* 'R': RRI (register base), 'I': IRR (immediate base: symbol or absolute) */
    uint8_t seg;     /* enum ml_asm_seg */
    uint8_t base;    /* register number or ML_ASM_NOREG (RIP folded into the symbol) */
    uint8_t index;   /* register number, ML_ASM_VREG or ML_ASM_NOREG */
    uint8_t scale;   /* 1 when there is no index */
    int base_inc;    /* incarnation of the base register at the access */
    int index_inc;   /* incarnation of the index register */
    int base_root;   /* value number of the base (incarnations linked by constant steps share it) */
    int index_root;  /* value number of the index */
    const char *sym; /* symbol of an IRR expression (symlen bytes), or NULL */
    uint16_t symlen;
    int64_t d;        /* displacement with the constant steps of base and index folded in */
    uint8_t unstable; /* never equivalent to another access (gathers, scatters, rep string ops) */
};

enum ml_asm_why {
    ML_ASM_WHY_ALL,     /* ns mode: every access */
    ML_ASM_WHY_FORCED,  /* rep string op, gather or scatter: its count is known only at run time */
    ML_ASM_WHY_CLUSTER, /* representative of its cluster (step C, first kind of item) */
    ML_ASM_WHY_REFINE,  /* displacement group refined inside a selected cluster */
    ML_ASM_WHY_NO,      /* not selected: counted through its representative */
};

/* The result for one access of a block (in block order: by instruction, then operand). */
struct ml_asm_pick {
    int insn;    /* instruction index within the block */
    int acc;     /* access index within the instruction */
    int cls;     /* equivalence class (block-local number) */
    int cluster; /* cluster within the block (block-local number) */
    struct ml_asm_bid bid;
    uint8_t selected;
    uint8_t why;   /* enum ml_asm_why */
    uint8_t level; /* distance to its representative: 1 (s1), 2 (s2) or 3 (s3) */
    int rep;       /* pick index of the access whose record counts this one (itself if selected) */
    int weight;    /* selected: how many accesses its record stands for (itself included) */
    long value;    /* value of the item that selected it, or that it would have had */
};

struct ml_asm_result {
    int m;      /* accesses in the block */
    int budget; /* W = ceil(omega * m) (m in ns mode) */
    int nsel;   /* accesses selected (may exceed W only by forced ones) */
    int nclass, ncluster;
    double ma;  /* expected fraction of accesses attributed to their own chunk */
    double aia; /* fraction attributed to their own chunk or a neighbour whatever the alignment */
    struct ml_asm_pick *pick; /* m entries, malloc'ed */
};

/*
 * Computes the BID expressions of the accesses of insn[0..n-1] (one block):
 * pick[] gets one entry per access, in order, with insn, acc and bid set.
 * Incarnations start at 0 for every register at the block's entry and are
 * bumped after every instruction that writes the register or any part of it;
 * value numbers follow linear steps (ml_asm_linear). Returns the number of
 * accesses, or -ENOMEM.
 */
int ml_asm_bids(const struct ml_asm_insn *insn, int n, struct ml_asm_pick **pick);

/* The value of a register: its value number and a constant added to it. */
struct ml_asm_regval {
    int root;
    int64_t off;
};

/*
 * The values of the general registers before each instruction of a block:
 * st[i * ML_ASM_NGPR + r] for i = 0..n (row n: after the block). Two points
 * where a register has the same root differ by the difference of the offsets.
 */
int ml_asm_states(const struct ml_asm_insn *insn, int n, struct ml_asm_regval *st);

/*
 * Distance level (1, 2 or 3 for s1, s2, s3) between two access expressions at
 * granularity chunk: 1 when they are the same address, 2 when they are in one
 * class less than chunk bytes apart, 3 otherwise.
 */
int ml_asm_distance(const struct ml_asm_bid *a, const struct ml_asm_bid *b, uint32_t chunk);

/* Whether two expressions are in one equivalence class (their difference is a known constant). */
int ml_asm_same_class(const struct ml_asm_bid *a, const struct ml_asm_bid *b);

/*
 * Analyses one block and selects the accesses to instrument (steps A-C of
 * docs/select.md). Returns 0 or -errno; r->pick is malloc'ed (free with
 * ml_asm_result_free).
 */
int ml_asm_select(const struct ml_asm_insn *insn, int n, const struct ml_asm_params *p,
                  struct ml_asm_result *r);
void ml_asm_result_free(struct ml_asm_result *r);

/* ---- the emitter ---- */

/*
 * Collects, block by block, the record sequences to insert before selected
 * accesses and the tables (sites, segment descriptors, block markers) for
 * the trace runtime (format/trace-abi.h), then writes the rewritten file.
 */
struct ml_asm_emit;

struct ml_asm_emit *ml_asm_emit_new(const struct ml_asm_file *f, const struct ml_asm_units *u,
                                    const struct ml_asm_insn *insn, int mode, uint32_t chunk,
                                    const char *name, int pic);
/*
 * The marker of selection unit bno (block b, or the class of control-equivalent
 * blocks led by b), whose accesses are those of r over the instructions in[]
 * r was computed on. Returns its index, -1 when r has no access, or -ENOMEM.
 */
int ml_asm_emit_marker(struct ml_asm_emit *e, const struct ml_asm_block *b, int bno,
                       const struct ml_asm_insn *in, const struct ml_asm_result *r);
/*
 * Block b (units [b->first, b->end)) with its part r of its unit's selection
 * (pick insn indices relative to b->first), its sites in that marker's unit.
 * Returns 0 or -errno.
 */
int ml_asm_emit_block(struct ml_asm_emit *e, const struct ml_asm_block *b, int marker,
                      const struct ml_asm_result *r);
/* The file with the sequences inserted and, when it has sites, the tables and a constructor. */
int ml_asm_emit_write(struct ml_asm_emit *e, FILE *out, const char *name);
void ml_asm_emit_free(struct ml_asm_emit *e);

/* ---- the whole file ---- */

struct ml_asm_opts {
    struct ml_asm_params params;
    FILE *explain;    /* per function and block: what was selected and why; or NULL */
    int pic;          /* position-independent code that may go into a shared library */
    const char *name; /* the source file, for the explanation */
};

/* Totals of one file. MA and AIA are static, the blocks' weighted by their accesses. */
struct ml_asm_stats {
    int functions, blocks, insns, accesses, selected;
    int forced;   /* rep string operations, gathers and scatters */
    int opaque;   /* units not decoded (never instrumented) */
    int tls;      /* units of TLS sequences the linker may rewrite (left alone) */
    int untraced; /* accesses left out (%gs-relative, addresses no expression holds) */
    double ma, aia;
};

/*
 * Decodes the units of f (encodings read), cuts blocks, selects per block and
 * writes the rewritten assembly to out; explains to o->explain. Returns 0 or
 * -errno with a reason in err.
 */
int ml_asm_rewrite(const struct ml_asm_file *f, const struct ml_asm_units *u,
                   const struct ml_asm_opts *o, FILE *out, struct ml_asm_stats *st, char *err,
                   size_t errlen);

#endif
