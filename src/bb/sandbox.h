/* Private layout shared by the sandbox stub (stub.c, assembly) and the harness (harness.c). */
#ifndef ML_BB_SANDBOX_H
#define ML_BB_SANDBOX_H

#include <stddef.h>
#include <stdint.h>

#include <capstone/capstone.h>
#include <linux/filter.h>

#include "bb/bb.h"

/*
 * Fixed addresses in the sandboxed child. They lie far from the data pages the block touches
 * (registers start near ML_BB_INIT_VALUE) and from the places Linux, ASan and LSan put their
 * own mappings in the parent, because the child inherits the parent's address space and
 * maps these with MAP_FIXED_NOREPLACE before unmapping everything else.
 *
 * Trust (docs/bb.md, "Sandbox"): the block may write every writable page it can reach, so
 * what the stub reads to decide where to jump, which syscall to make or which slot to fill
 * comes from the control page, which the child maps read-only (and cannot remap: mmap,
 * mprotect and munmap are refused once the filter is on). The state page holds what the
 * stub must write (loop counters, results); the stub masks every index it reads from it,
 * and the harness reads it back only as numbers.
 */
#define ML_BB_STUB_ADDR   0x4a0000000000ull
#define ML_BB_STUB_MAP    0x1000ull
#define ML_BB_CTL_ADDR    (ML_BB_STUB_ADDR + 0x10000ull) /* the stub addresses it RIP-relative */
#define ML_BB_CTL_SIZE    0x2000ull
#define ML_BB_STATE_ADDR  (ML_BB_STUB_ADDR + 0x40000ull) /* RIP-relative too */
#define ML_BB_STATE_SIZE  0x9000ull
#define ML_BB_ALIAS_ADDR  (ML_BB_STUB_ADDR + 0x60000ull)
#define ML_BB_CODE_ADDR   0x4a1000000000ull
#define ML_BB_CODE_STRIDE 0x1000000ull /* 16 MiB gaps: RIP-relative data lands in free space */
#define ML_BB_MAX_JOBS    4            /* a power of two: the stub masks job indices with it */
#define ML_BB_MAX_PMU     4
#define ML_BB_MAX_UNMAP   (ML_BB_MAX_JOBS + 2) /* the gaps around the harness */
#define ML_BB_MAX_FILTER  64

/* Registers and every 8-byte word of the data page start at this value (BHive's choice). */
#define ML_BB_INIT_VALUE 0x12345600ull
/* MXCSR: all exceptions masked, flush-to-zero (bit 15) and denormals-are-zero (bit 6). */
#define ML_BB_MXCSR 0x9fc0u

/* One timing, written by the stub: TSC and counters before/after the job's code. */
struct ml_bb_slot {
    uint64_t t0, t1;
    uint64_t csw0, csw1; /* voluntary + involuntary context switches (getrusage) */
    uint64_t flt0, flt1; /* minor + major page faults (getrusage) */
    uint64_t pmu0[ML_BB_MAX_PMU], pmu1[ML_BB_MAX_PMU];
    uint64_t pad[2];
};

/*
 * The control page: written by the harness (through a memfd), mapped read-only in the child;
 * offsets are fixed in stub.c.
 */
struct ml_bb_ctl {
    uint64_t init;                               /* 0x00 */
    uint32_t mxcsr;                              /* 0x08 */
    uint32_t vec;                                /* 0x0c: 0 sse, 1 avx, 2 avx-512 */
    uint64_t n_jobs;                             /* 0x10 */
    uint64_t n_reps;                             /* 0x18 */
    uint64_t alias;                              /* 0x20 */
    uint64_t n_unmap;                            /* 0x28 */
    uint64_t n_pmu;                              /* 0x30 */
    uint64_t pad0;                               /* 0x38 */
    uint64_t fprog_len;                          /* 0x40: struct sock_fprog for seccomp(2) */
    uint64_t fprog_filter;                       /* 0x48 */
    uint64_t pad1[2];                            /* 0x50 */
    uint64_t pmu_fd[ML_BB_MAX_PMU];              /* 0x60 */
    uint64_t job_code[8];                        /* 0x80: entry of each job's code */
    uint64_t passes[8];                          /* 0xc0: passes over the job's code per timing */
    struct sock_filter filter[ML_BB_MAX_FILTER]; /* 0x100: the seccomp program */
    uint64_t unmap[ML_BB_MAX_UNMAP][2];          /* 0x300 */
};

/* The state page: written by the stub (and the block, if it likes), read back as numbers. */
struct ml_bb_state {
    uint64_t rep;          /* 0x00 */
    uint64_t job;          /* 0x08 */
    uint64_t pass_left;    /* 0x10 */
    uint64_t pad[29];      /* 0x18 */
    uint8_t rusage[0x100]; /* 0x100: struct rusage written by getrusage */
    uint8_t stack[0x200];  /* 0x200..0x400: a few bytes of stack for popfq */
    struct ml_bb_slot res[ML_BB_MAX_REPS][ML_BB_MAX_JOBS]; /* 0x400 */
};

_Static_assert(sizeof(struct ml_bb_slot) == 128, "stub assumes 128-byte slots");
_Static_assert(offsetof(struct ml_bb_ctl, n_pmu) == 0x30, "stub offsets");
_Static_assert(offsetof(struct ml_bb_ctl, fprog_len) == 0x40, "stub offsets");
_Static_assert(offsetof(struct ml_bb_ctl, pmu_fd) == 0x60, "stub offsets");
_Static_assert(offsetof(struct ml_bb_ctl, job_code) == 0x80, "stub offsets");
_Static_assert(offsetof(struct ml_bb_ctl, passes) == 0xc0, "stub offsets");
_Static_assert(offsetof(struct ml_bb_ctl, filter) == 0x100, "stub offsets");
_Static_assert(offsetof(struct ml_bb_ctl, unmap) == 0x300, "stub offsets");
_Static_assert(sizeof(struct ml_bb_ctl) <= ML_BB_CTL_SIZE, "control page too small");
_Static_assert(offsetof(struct ml_bb_state, rusage) == 0x100, "stub offsets");
_Static_assert(offsetof(struct ml_bb_state, res) == 0x400, "stub offsets");
_Static_assert(ML_BB_MAX_REPS *ML_BB_MAX_JOBS == 256, "stub masks slot indices with 255");
_Static_assert(sizeof(struct ml_bb_state) <= ML_BB_STATE_SIZE, "state page too small");
_Static_assert(ML_BB_STATE_ADDR + ML_BB_STATE_SIZE <= ML_BB_ALIAS_ADDR, "layout");

/*
 * Writes the seccomp program into ctl->filter and ctl->fprog_* (the stub installs it once
 * everything else is unmapped). It is the whole guarantee of the sandbox: whatever the block
 * executes or writes, the child can make only, from the stub's page,
 *   getrusage(RUSAGE_THREAD, <the state page's rusage buffer>),
 *   read(<one of ctl->pmu_fd[0..n_pmu)>, <8 bytes inside the result slots>, 8), and
 *   mmap, which stops the child for the harness (SECCOMP_RET_TRACE): the harness lets it run
 *   only when it is the very call the harness injected, else the block ends.
 * Everything else, i386 entry points included, raises SIGSYS without running
 * (SECCOMP_RET_TRAP), which the harness turns into a status.
 */
void ml_bb_seccomp_build(struct ml_bb_ctl *ctl, unsigned n_pmu);

/* Entry points of the stub (stub.c); the child copies [start, end) to ML_BB_STUB_ADDR. */
extern const char ml_bb_stub_start[], ml_bb_stub_ready[], ml_bb_stub_run[], ml_bb_stub_back0[],
    ml_bb_stub_back1[], ml_bb_stub_back2[], ml_bb_stub_back3[], ml_bb_stub_done[],
    ml_bb_stub_gadget[], ml_bb_stub_trace[], ml_bb_stub_end[];

/* Address of a stub symbol once copied into the child. */
#define ML_BB_STUB_AT(sym) (ML_BB_STUB_ADDR + (uint64_t)((sym)-ml_bb_stub_start))

/* A memory operand of a decoded instruction, kept for computing addresses while tracing. */
struct ml_bb_memop {
    x86_reg seg, base, index;
    int scale;
    int64_t disp;
    uint16_t size;
    uint8_t write;
};

struct ml_bb_insn {
    uint16_t off, size;
    uint8_t n_mem;
    uint8_t rip_disp_off; /* offset of the disp32 of a RIP-relative operand, 0 if none */
    uint16_t rip_size;    /* access size of that operand */
    struct ml_bb_memop mem[3];
};

/*
 * Decodes code into at most cap instructions with their explicit memory operands (push and
 * pop get their implicit stack access). Returns the count, or negative on undecodable bytes.
 */
int ml_bb_decode(const uint8_t *code, size_t len, struct ml_bb_insn *out, unsigned cap);

/* Whether the instruction at the start of code is privileged (the #GP it raised says why). */
int ml_bb_privileged_at(const uint8_t *code, size_t len);

#endif
