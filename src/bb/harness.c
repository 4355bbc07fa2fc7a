/* The basic-block harness: sandboxed child under ptrace, page mapping on faults, timing. */
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/perf_event.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/rseq.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bb/sandbox.h"

/*
 * Calibration: a chain of dependent 'add %eax,%eax' (1 cycle each on every x86-64 core).
 * On this kind of VM the ticks per cycle a chain shows depend on how long each pass runs
 * (a 2-imul chain read 5.73-5.98 cycles against 200/400-add passes, 5.99-6.01 against
 * 600/1200), so after a short probe the chain's lengths are matched to the block's busy
 * cycles per pass. The code holds CALIB_MAX adds; a job enters it where the wanted count
 * remains, so the parent changes the length through the control page alone.
 */
#define CALIB_U    200
#define CALIB_U2   400
#define CALIB_MIN  16
#define CALIB_MAX  4096
#define PROBE_REPS 4

/* Exit codes of the child when its setup fails, before the harness takes control. */
enum { CHILD_EPTRACE = 90, CHILD_EMAP, CHILD_EMAPS, CHILD_ESECCOMP };

struct job {
    uint8_t *code;
    size_t len;
    unsigned off;    /* entry offset in the first page */
    unsigned iters;  /* copies of the measured unit */
    unsigned passes; /* runs of the code per timing */
};

struct run {
    const struct ml_bb_opts *o;
    struct ml_bb_result *r;
    struct ml_bb_ctl *ctl;
    int datafd, ctlfd;
    pid_t pid;
    struct job jobs[ML_BB_MAX_JOBS];
    unsigned n_jobs;
    int pmu_kinds[ML_BB_MAX_PMU];
    unsigned n_pmu;
    unsigned calib[2]; /* adds per pass of the calibration jobs (2 and 3) */
};

void ml_bb_opts_init(struct ml_bb_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->reps = 32;
    o->min_agree = 8;
    o->tolerance = 0.01;
    o->code_budget = 4096;
    o->max_unroll = 200;
    o->work = 65536;
    o->method = ML_BB_METHOD_AUTO;
    o->max_faults = 256;
    o->attempts = 10;
    o->timeout_ms = 2000;
    o->static_check = 1;
    o->trace = 1;
}

const char *ml_bb_status_name(enum ml_bb_status s)
{
    static const char *const names[] = {"ok", "unclean", "crashed", "unsupported", "timeout"};
    return (unsigned)s < 5 ? names[s] : "?";
}

const char *ml_bb_method_name(enum ml_bb_method m)
{
    return m == ML_BB_METHOD_PMU ? "pmu" : m == ML_BB_METHOD_TSC ? "tsc" : "auto";
}

/*
 * n copies of unit followed by 'jmp *0(%rip)' and the absolute address of the stub's return,
 * after off bytes of int3 that place the entry. RIP-relative displacements are rewritten in
 * every copy so that all copies reach the addresses of the first one, as every iteration of
 * the real block does; otherwise the copies would spread over many pages and misalign their
 * data.
 */
static int job_build(struct job *j, const uint8_t *unit, size_t len, unsigned n, unsigned passes,
                     const struct ml_bb_insn *in, int n_in, unsigned off)
{
    uint64_t back = ML_BB_STUB_AT(ml_bb_stub_back);
    static const uint8_t jmp[6] = {0xff, 0x25, 0, 0, 0, 0};
    uint8_t *p;

    j->off = off;
    j->len = off + len * n + sizeof(jmp) + 8;
    j->code = malloc(j->len);
    if (!j->code)
        return -ENOMEM;
    memset(j->code, 0xcc, off);
    p = j->code + off;
    for (unsigned k = 0; k < n; k++) {
        uint8_t *copy = p + k * len;

        memcpy(copy, unit, len);
        for (int i = 0; i < n_in; i++) {
            int32_t disp;
            int64_t moved;

            if (!in[i].rip_disp_off)
                continue;
            memcpy(&disp, copy + in[i].off + in[i].rip_disp_off, 4);
            moved = (int64_t)disp - (int64_t)k * (int64_t)len;
            if (moved < INT32_MIN)
                continue;
            disp = (int32_t)moved;
            memcpy(copy + in[i].off + in[i].rip_disp_off, &disp, 4);
        }
    }
    memcpy(p + len * n, jmp, sizeof(jmp));
    memcpy(p + len * n + sizeof(jmp), &back, 8);
    j->iters = n;
    j->passes = passes;
    return 0;
}

/*
 * Where the code starts in its page: so that the widest RIP-relative access is aligned to
 * its size (up to 64), as the compiler aligned it in the real program (movaps needs it).
 */
static unsigned code_offset(const uint8_t *code, const struct ml_bb_insn *in, int n)
{
    unsigned best = 0, off = 0;

    for (int i = 0; i < n; i++) {
        unsigned align = 1;
        int32_t disp;
        int64_t end;

        if (!in[i].rip_disp_off || in[i].rip_size <= best)
            continue;
        while (align < in[i].rip_size && align < 64)
            align <<= 1;
        memcpy(&disp, code + in[i].off + in[i].rip_disp_off, 4);
        end = (int64_t)in[i].off + in[i].size + disp;
        off = (unsigned)(-end & (int64_t)(align - 1));
        best = in[i].rip_size;
    }
    return off;
}

static long perf_open(struct perf_event_attr *a)
{
    return syscall(SYS_perf_event_open, a, 0, -1, -1, 0);
}

static void perf_attr(struct perf_event_attr *a, int kind)
{
    memset(a, 0, sizeof(*a));
    a->size = sizeof(*a);
    a->exclude_kernel = 1;
    a->exclude_hv = 1;
    if (kind == 0) {
        a->type = PERF_TYPE_HARDWARE;
        a->config = PERF_COUNT_HW_CPU_CYCLES;
        return;
    }
    a->type = PERF_TYPE_HW_CACHE;
    if (kind == 1) /* L1D read misses */
        a->config = PERF_COUNT_HW_CACHE_L1D | (PERF_COUNT_HW_CACHE_OP_READ << 8) |
                    (PERF_COUNT_HW_CACHE_RESULT_MISS << 16);
    else if (kind == 2) /* L1D write misses */
        a->config = PERF_COUNT_HW_CACHE_L1D | (PERF_COUNT_HW_CACHE_OP_WRITE << 8) |
                    (PERF_COUNT_HW_CACHE_RESULT_MISS << 16);
    else /* L1I read misses */
        a->config = PERF_COUNT_HW_CACHE_L1I | (PERF_COUNT_HW_CACHE_OP_READ << 8) |
                    (PERF_COUNT_HW_CACHE_RESULT_MISS << 16);
}

/* Which counters this host gives: cycles first (required for the pmu method), then misses. */
static void pmu_probe(struct run *x)
{
    struct perf_event_attr a;

    x->n_pmu = 0;
    for (int kind = 0; kind < ML_BB_MAX_PMU; kind++) {
        long fd;

        perf_attr(&a, kind);
        fd = perf_open(&a);
        if (fd < 0) {
            if (kind == 0)
                return;
            continue;
        }
        close((int)fd);
        x->pmu_kinds[x->n_pmu++] = kind;
    }
}

static int seccomp_install(void)
{
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, instruction_pointer) + 4),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)(ML_BB_STUB_ADDR >> 32), 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, instruction_pointer)),
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, (uint32_t)ML_BB_STUB_ADDR, 0, 1),
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, (uint32_t)(ML_BB_STUB_ADDR + ML_BB_STUB_MAP), 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = sizeof(f) / sizeof(f[0]), .filter = f};

    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
        return -1;
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
}

static int map_fixed(uint64_t addr, size_t len, int shared_fd)
{
    void *p;

    if (shared_fd >= 0)
        p = mmap((void *)addr, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED_NOREPLACE,
                 shared_fd, 0);
    else
        p = mmap((void *)addr, len, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    return p == (void *)addr ? 0 : -1;
}

/* Lists every mapping outside the harness for the stub to unmap. */
static int unmap_list(struct ml_bb_ctl *ctl)
{
    FILE *f = fopen("/proc/self/maps", "r");
    unsigned long lo, hi;
    char line[512];

    if (!f)
        return -1;
    ctl->n_unmap = 0;
    while (fgets(line, sizeof(line), f)) {
        if (sscanf(line, "%lx-%lx", &lo, &hi) != 2)
            continue;
        if (lo >= 0x800000000000ul) /* vsyscall: cannot be unmapped */
            continue;
        if (lo >= ML_BB_STUB_ADDR && lo < ML_BB_CODE_ADDR + ML_BB_MAX_JOBS * ML_BB_CODE_STRIDE)
            continue;
        if (ctl->n_unmap >= ML_BB_MAX_UNMAP) {
            fclose(f);
            return -1;
        }
        ctl->unmap[ctl->n_unmap][0] = lo;
        ctl->unmap[ctl->n_unmap][1] = hi - lo;
        ctl->n_unmap++;
    }
    fclose(f);
    return 0;
}

/* The child: builds the harness at fixed addresses, locks itself down, enters the stub. */
static void child_main(struct run *x)
{
    size_t stub_len = (size_t)(ml_bb_stub_end - ml_bb_stub_start);
    struct ml_bb_ctl *ctl;
    struct itimerval prof = {{0, 0}, {0, 0}}, real = {{0, 0}, {0, 0}};

    if (ptrace(PTRACE_TRACEME, 0, 0, 0))
        _exit(CHILD_EPTRACE);
    raise(SIGSTOP);
    if (map_fixed(ML_BB_STUB_ADDR, ML_BB_STUB_MAP, -1) ||
        map_fixed(ML_BB_CTL_ADDR, ML_BB_CTL_SIZE, x->ctlfd) ||
        map_fixed(ML_BB_ALIAS_ADDR, 4096, x->datafd))
        _exit(CHILD_EMAP);
    memcpy((void *)ML_BB_STUB_ADDR, ml_bb_stub_start, stub_len);
    if (mprotect((void *)ML_BB_STUB_ADDR, ML_BB_STUB_MAP, PROT_READ | PROT_EXEC))
        _exit(CHILD_EMAP);
    for (unsigned j = 0; j < x->n_jobs; j++) {
        uint64_t at = ML_BB_CODE_ADDR + j * ML_BB_CODE_STRIDE;
        size_t len = (x->jobs[j].len + 4095) & ~(size_t)4095;

        if (map_fixed(at, len, -1))
            _exit(CHILD_EMAP);
        memcpy((void *)at, x->jobs[j].code, x->jobs[j].len);
        if (mprotect((void *)at, len, PROT_READ | PROT_EXEC))
            _exit(CHILD_EMAP);
    }
    ctl = (struct ml_bb_ctl *)ML_BB_CTL_ADDR;
    /* the stub writes its results here: fault every page in now, not inside a timing window
       (a minor fault every 4 KiB of results made one timing in 32 unclean) */
    for (size_t off = 0; off < ML_BB_CTL_SIZE; off += 4096)
        ((volatile uint8_t *)ctl)[off] = ((volatile uint8_t *)ctl)[off];
    for (unsigned k = 0; k < x->n_pmu; k++) {
        struct perf_event_attr a;
        long fd;

        perf_attr(&a, x->pmu_kinds[k]);
        fd = perf_open(&a);
        if (fd < 0)
            _exit(CHILD_EMAP);
        ctl->pmu_fd[k] = (uint64_t)fd;
    }
    ctl->n_pmu = x->n_pmu;
    /*
     * glibc registers an rseq area in the thread's TLS; once that is unmapped, the kernel
     * would fail to update it on the next preemption and kill the child with SIGSEGV.
     */
    if (__rseq_size &&
        syscall(SYS_rseq, (char *)__builtin_thread_pointer() + __rseq_offset, __rseq_size,
                RSEQ_FLAG_UNREGISTER, RSEQ_SIG) &&
        syscall(SYS_rseq, (char *)__builtin_thread_pointer() + __rseq_offset, 32,
                RSEQ_FLAG_UNREGISTER, RSEQ_SIG))
        _exit(CHILD_EMAP);
    if (unmap_list(ctl))
        _exit(CHILD_EMAPS);
    /* CPU time catches spinning blocks; wall time catches anything else that never ends */
    prof.it_value.tv_sec = x->o->timeout_ms / 1000;
    prof.it_value.tv_usec = (x->o->timeout_ms % 1000) * 1000;
    real.it_value.tv_sec = 10 + x->o->timeout_ms / 100;
    setitimer(ITIMER_PROF, &prof, NULL);
    setitimer(ITIMER_REAL, &real, NULL);
    if (seccomp_install())
        _exit(CHILD_ESECCOMP);
    __asm__ volatile("jmp *%0" : : "r"(ML_BB_STUB_ADDR) : "memory");
    __builtin_unreachable();
}

static int wait_stop(pid_t pid, int *status)
{
    while (waitpid(pid, status, __WALL) < 0)
        if (errno != EINTR)
            return -errno;
    return 0;
}

static void crash(struct ml_bb_result *r, int sig, const char *detail)
{
    r->status = ML_BB_CRASHED;
    r->signal = sig;
    snprintf(r->detail, sizeof(r->detail), "%s", detail);
}

/* Maps page onto the shared data page by making the stopped child run mmap at the gadget. */
static int inject_mmap(struct run *x, uint64_t page, int *status)
{
    struct user_regs_struct regs;

    if (ptrace(PTRACE_GETREGS, x->pid, 0, &regs))
        return -errno;
    regs.rip = ML_BB_STUB_AT(ml_bb_stub_gadget);
    regs.orig_rax = (unsigned long long)-1;
    regs.rax = SYS_mmap;
    regs.rdi = page;
    regs.rsi = 4096;
    regs.rdx = PROT_READ | PROT_WRITE;
    regs.r10 = MAP_SHARED | MAP_FIXED;
    regs.r8 = (unsigned long long)x->datafd;
    regs.r9 = 0;
    if (ptrace(PTRACE_SETREGS, x->pid, 0, &regs) || ptrace(PTRACE_CONT, x->pid, 0, 0))
        return -errno;
    if (wait_stop(x->pid, status) < 0)
        return -ECHILD;
    if (!WIFSTOPPED(*status) || WSTOPSIG(*status) != SIGTRAP)
        return 1; /* handled by the caller like any other stop */
    if (ptrace(PTRACE_GETREGS, x->pid, 0, &regs))
        return -errno;
    return regs.rax == page ? 0 : -ENOMEM;
}

static int set_rip(pid_t pid, uint64_t rip)
{
    struct user_regs_struct regs;

    if (ptrace(PTRACE_GETREGS, pid, 0, &regs))
        return -errno;
    regs.rip = rip;
    regs.orig_rax = (unsigned long long)-1;
    /* the old TLS is gone: %fs/%gs-relative accesses go near the other data instead */
    regs.fs_base = ML_BB_INIT_VALUE;
    regs.gs_base = ML_BB_INIT_VALUE;
    return ptrace(PTRACE_SETREGS, pid, 0, &regs) ? -errno : 0;
}

/* The harness's own pages; RIP-relative data between the jobs' code is mappable. */
static int in_harness(const struct run *x, uint64_t a)
{
    if (a >= ML_BB_STUB_ADDR && a < ML_BB_ALIAS_ADDR + 4096)
        return 1;
    for (unsigned j = 0; j < x->n_jobs; j++) {
        uint64_t at = ML_BB_CODE_ADDR + j * ML_BB_CODE_STRIDE;

        if (a >= at && a < at + ((x->jobs[j].len + 4095) & ~(size_t)4095))
            return 1;
    }
    return 0;
}

/* Whether the child stopped on a privileged instruction of a job's code (never executed). */
static int privileged_stop(const struct run *x)
{
    struct user_regs_struct g;

    if (ptrace(PTRACE_GETREGS, x->pid, 0, &g))
        return 0;
    for (unsigned j = 0; j < x->n_jobs; j++) {
        uint64_t at = ML_BB_CODE_ADDR + j * ML_BB_CODE_STRIDE;

        if (g.rip >= at && g.rip < at + x->jobs[j].len)
            return ml_bb_privileged_at(x->jobs[j].code + (g.rip - at), at + x->jobs[j].len - g.rip);
    }
    return 0;
}

/*
 * Classifies a stop that is not the end of the run. Returns 1 when the run must restart
 * (a page was mapped), 0 when r->status is final, negative on harness failure.
 */
static int handle_stop(struct run *x, int status)
{
    struct ml_bb_result *r = x->r;
    int sig = WSTOPSIG(status);
    siginfo_t si;
    uint64_t addr, page;
    char buf[64];
    int err;

    if (sig == SIGPROF || sig == SIGALRM) {
        r->status = ML_BB_TIMEOUT;
        snprintf(r->detail, sizeof(r->detail), "over %u ms of cpu time", x->o->timeout_ms);
        return 0;
    }
    if (sig == SIGSYS) {
        r->status = ML_BB_UNSUPPORTED;
        snprintf(r->detail, sizeof(r->detail), "syscall (seccomp)");
        return 0;
    }
    if (sig != SIGSEGV) {
        snprintf(buf, sizeof(buf), "SIG%s", sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
        crash(r, sig, buf);
        return 0;
    }
    if (ptrace(PTRACE_GETSIGINFO, x->pid, 0, &si))
        return -errno;
    addr = (uint64_t)(uintptr_t)si.si_addr;
    page = addr & ~4095ull;
    if (si.si_code != SEGV_MAPERR) {
        if (si.si_code == SI_KERNEL && privileged_stop(x)) {
            r->status = ML_BB_UNSUPPORTED;
            snprintf(r->detail, sizeof(r->detail), "privileged instruction (trapped)");
        } else if (si.si_code == SI_KERNEL)
            crash(r, SIGSEGV, "general protection (non-canonical address, alignment)");
        else {
            snprintf(buf, sizeof(buf), "access violation at 0x%llx", (unsigned long long)addr);
            crash(r, SIGSEGV, buf);
        }
        return 0;
    }
    /* below vm.mmap_min_addr, mmap succeeds only with CAP_SYS_RAWIO; the injection tells */
    if (addr >= 0x800000000000ull || in_harness(x, addr)) {
        snprintf(buf, sizeof(buf), "unmappable address 0x%llx", (unsigned long long)addr);
        crash(r, SIGSEGV, buf);
        return 0;
    }
    if (x->o->max_faults && r->faults >= x->o->max_faults) {
        snprintf(buf, sizeof(buf), "fault limit (%u pages)", x->o->max_faults);
        crash(r, SIGSEGV, buf);
        return 0;
    }
    err = inject_mmap(x, page, &status);
    if (err == 1)
        return handle_stop(x, status);
    if (err < 0) {
        snprintf(buf, sizeof(buf), "cannot map page 0x%llx", (unsigned long long)page);
        crash(r, SIGSEGV, buf);
        return 0;
    }
    if (r->faults < ML_BB_MAX_PAGES)
        r->pages[r->faults] = page;
    r->faults++;
    return 1;
}

/* Runs the stub from the start until it completes every timing, mapping pages on the way. */
static int run_all(struct run *x)
{
    int status, err;

    for (;;) {
        err = set_rip(x->pid, ML_BB_STUB_AT(ml_bb_stub_run));
        if (err < 0)
            return err;
        for (;;) {
            struct user_regs_struct regs;

            if (ptrace(PTRACE_CONT, x->pid, 0, 0))
                return -errno;
            if (wait_stop(x->pid, &status) < 0)
                return -ECHILD;
            if (!WIFSTOPPED(status)) {
                crash(x->r, WIFSIGNALED(status) ? WTERMSIG(status) : 0, "sandbox died");
                return 0;
            }
            if (WSTOPSIG(status) == SIGTRAP) {
                if (ptrace(PTRACE_GETREGS, x->pid, 0, &regs))
                    return -errno;
                if (regs.rip == ML_BB_STUB_AT(ml_bb_stub_done))
                    return 1;
            }
            err = handle_stop(x, status);
            if (err <= 0)
                return err;
            break; /* restart from the beginning with the new page */
        }
    }
}

static uint64_t reg_value(const struct user_regs_struct *g, x86_reg reg, uint64_t next_rip)
{
    switch (reg) {
    case X86_REG_RAX:
        return g->rax;
    case X86_REG_RBX:
        return g->rbx;
    case X86_REG_RCX:
        return g->rcx;
    case X86_REG_RDX:
        return g->rdx;
    case X86_REG_RSI:
        return g->rsi;
    case X86_REG_RDI:
        return g->rdi;
    case X86_REG_RBP:
        return g->rbp;
    case X86_REG_RSP:
        return g->rsp;
    case X86_REG_R8:
        return g->r8;
    case X86_REG_R9:
        return g->r9;
    case X86_REG_R10:
        return g->r10;
    case X86_REG_R11:
        return g->r11;
    case X86_REG_R12:
        return g->r12;
    case X86_REG_R13:
        return g->r13;
    case X86_REG_R14:
        return g->r14;
    case X86_REG_R15:
        return g->r15;
    case X86_REG_RIP:
        return next_rip;
    case X86_REG_EAX:
        return (uint32_t)g->rax;
    case X86_REG_EBX:
        return (uint32_t)g->rbx;
    case X86_REG_ECX:
        return (uint32_t)g->rcx;
    case X86_REG_EDX:
        return (uint32_t)g->rdx;
    case X86_REG_ESI:
        return (uint32_t)g->rsi;
    case X86_REG_EDI:
        return (uint32_t)g->rdi;
    case X86_REG_EBP:
        return (uint32_t)g->rbp;
    case X86_REG_ESP:
        return (uint32_t)g->rsp;
    case X86_REG_R8D:
        return (uint32_t)g->r8;
    case X86_REG_R9D:
        return (uint32_t)g->r9;
    case X86_REG_R10D:
        return (uint32_t)g->r10;
    case X86_REG_R11D:
        return (uint32_t)g->r11;
    case X86_REG_R12D:
        return (uint32_t)g->r12;
    case X86_REG_R13D:
        return (uint32_t)g->r13;
    case X86_REG_R14D:
        return (uint32_t)g->r14;
    case X86_REG_R15D:
        return (uint32_t)g->r15;
    case X86_REG_EIP:
        return (uint32_t)next_rip;
    case X86_REG_FS:
        return g->fs_base;
    case X86_REG_GS:
        return g->gs_base;
    default:
        return 0;
    }
}

/*
 * Single-steps the first two iterations of the u-factor code and records the address of
 * every explicit memory operand (and push/pop), computed from the registers before each
 * instruction. Vector gathers and string instructions' implicit operands are not covered.
 */
static int trace_accesses(struct run *x, const uint8_t *code, size_t len)
{
    struct ml_bb_insn insns[512];
    struct ml_bb_result *r = x->r;
    uint64_t start = ML_BB_CODE_ADDR + x->jobs[0].off;
    int n = ml_bb_decode(code, len, insns, 512), status;
    struct user_regs_struct g;

    if (n <= 0)
        return 0;
    x->ctl->cur_code = start;
    if (set_rip(x->pid, ML_BB_STUB_AT(ml_bb_stub_trace)) || ptrace(PTRACE_CONT, x->pid, 0, 0) ||
        wait_stop(x->pid, &status) < 0)
        return -ECHILD;
    if (!WIFSTOPPED(status) || WSTOPSIG(status) != SIGTRAP)
        return 0;
    if (ptrace(PTRACE_SINGLESTEP, x->pid, 0, 0) || wait_stop(x->pid, &status) < 0)
        return -ECHILD;
    for (int step = 0; step < 2 * n; step++) {
        uint64_t off, copy;
        int k;

        if (!WIFSTOPPED(status) || WSTOPSIG(status) != SIGTRAP)
            break;
        if (ptrace(PTRACE_GETREGS, x->pid, 0, &g))
            return -errno;
        if (g.rip < start || g.rip >= start + 2 * len)
            break;
        copy = (g.rip - start) / len;
        off = (g.rip - start) % len;
        for (k = 0; k < n && insns[k].off != off; k++)
            ;
        if (k == n)
            break;
        for (int m = 0; m < insns[k].n_mem && r->n_accesses < ML_BB_MAX_ACCESSES; m++) {
            const struct ml_bb_memop *op = &insns[k].mem[m];
            uint64_t next = g.rip + insns[k].size;
            uint64_t a = reg_value(&g, op->base, next) +
                         reg_value(&g, op->index, next) * (uint64_t)op->scale + (uint64_t)op->disp;
            struct ml_bb_access *acc = &r->accesses[r->n_accesses++];

            if (op->base == X86_REG_RIP && insns[k].rip_disp_off) /* see job_build */
                a -= copy * len;
            if (op->seg == X86_REG_FS || op->seg == X86_REG_GS)
                a += reg_value(&g, op->seg, next);
            acc->addr = a;
            acc->size = op->size;
            acc->write = op->write;
            acc->insn = (uint8_t)k;
        }
        if (ptrace(PTRACE_SINGLESTEP, x->pid, 0, 0) || wait_stop(x->pid, &status) < 0)
            return -ECHILD;
    }
    r->flags |= ml_bb_flags_compute(r->accesses, r->n_accesses);
    return 0;
}

static uint64_t slot_value(const struct run *x, const struct ml_bb_slot *s)
{
    if (x->r->method == ML_BB_METHOD_PMU)
        return s->pmu1[0] - s->pmu0[0];
    return s->t1 - s->t0;
}

static int slot_clean(const struct run *x, const struct ml_bb_slot *s)
{
    if (s->csw1 != s->csw0 || s->flt1 != s->flt0)
        return 0;
    for (unsigned k = 1; k < x->n_pmu; k++) /* L1 misses taint a timing (BHive's rule) */
        if (s->pmu1[k] != s->pmu0[k])
            return 0;
    return 1;
}

/*
 * Turns the timings into the throughput; sets ok or unclean. The stub times u, U (and the
 * calibration's u, U) back to back in every round, so each round gives a pair whose members
 * saw the same state of the machine (a busy SMT sibling slows a block by up to half, in
 * bursts). Interference only adds time: the estimate is the lower envelope, the mean over
 * the min_agree rounds with the smallest total, and the block is ok when those rounds all lie
 * within the tolerance of the quietest one (the minimum is reproduced, not a lucky outlier).
 */
static void evaluate(struct run *x)
{
    struct ml_bb_result *r = x->r;
    double val[ML_BB_MAX_JOBS];
    unsigned k = x->o->min_agree;
    int good = 1;

    for (unsigned j = 0; j < x->n_jobs; j++) {
        unsigned n = 0;

        for (unsigned i = 0; i < x->o->reps; i++) {
            const struct ml_bb_slot *s = &x->ctl->res[i][j];
            double t = (double)slot_value(x, s) / x->jobs[j].passes;

            r->timings[j][i] = slot_clean(x, s) ? t : -t;
            n += slot_clean(x, s);
        }
        if (j < 2)
            r->clean[j] = n;
    }
    for (unsigned j = 0; j + 1 < x->n_jobs; j += 2) {
        unsigned within = ml_bb_envelope(r->timings[j], r->timings[j + 1], x->o->reps, k,
                                         x->o->tolerance, &val[j], &val[j + 1]);

        r->agree[j / 2] = within;
        if (within < k || within == 0)
            good = 0;
    }
    if (x->n_jobs == 2)
        r->agree[1] = r->agree[0];
    r->n_jobs = x->n_jobs;
    r->ratio = 1;
    if (r->method == ML_BB_METHOD_TSC)
        r->ratio = (val[3] - val[2]) / (x->calib[1] - x->calib[0]);
    r->throughput = (val[1] - val[0]) / (double)(r->u2 - r->u) / r->ratio;
    if (good && r->ratio > 0) {
        r->status = ML_BB_OK;
        r->detail[0] = 0;
    } else {
        r->status = ML_BB_UNCLEAN;
        snprintf(r->detail, sizeof(r->detail), "quietest timing pair reproduced below %u times", k);
    }
}

/* Jobs 0 and 1 are the block at u and U (first, so that restarts after faults are cheap);
   with the tsc method, jobs 2 and 3 are the calibration chain. */
static int plan(struct run *x, const uint8_t *code, size_t len)
{
    const struct ml_bb_opts *o = x->o;
    struct ml_bb_result *r = x->r;
    static const uint8_t add_chain[2] = {0x01, 0xc0}; /* add %eax,%eax */
    struct ml_bb_insn *in;
    unsigned passes, off;
    int n_in, err;

    r->u = o->u;
    r->u2 = o->u2;
    if (!r->u2) {
        r->u2 = o->code_budget / (unsigned)len;
        if (r->u2 > o->max_unroll)
            r->u2 = o->max_unroll;
        r->u = r->u2 / 2;
    }
    if (r->u2 < 2 || r->u >= r->u2 || r->u == 0) {
        r->status = ML_BB_UNSUPPORTED;
        snprintf(r->detail, sizeof(r->detail), "too long to unroll within %u bytes",
                 o->code_budget);
        return 1;
    }
    in = calloc(len, sizeof(*in));
    if (!in)
        return -ENOMEM;
    n_in = ml_bb_decode(code, len, in, (unsigned)len);
    if (n_in < 0)
        n_in = 0;
    off = code_offset(code, in, n_in);
    passes = o->work / (r->u2 * (r->n_insns ? r->n_insns : 1));
    if (passes == 0)
        passes = 1;
    x->n_jobs = 0;
    err = job_build(&x->jobs[x->n_jobs++], code, len, r->u, passes, in, n_in, off);
    if (!err)
        err = job_build(&x->jobs[x->n_jobs++], code, len, r->u2, passes, in, n_in, off);
    /* as many passes as the block: matched chains then run timings of the block's length */
    if (!err && r->method == ML_BB_METHOD_TSC) {
        err = job_build(&x->jobs[x->n_jobs++], add_chain, 2, CALIB_MAX, passes, NULL, 0, 0);
        if (!err)
            err = job_build(&x->jobs[x->n_jobs++], add_chain, 2, CALIB_MAX, passes, NULL, 0, 0);
    }
    free(in);
    return err;
}

/* Points the calibration jobs at the last cu and cU adds of their chains. */
static void calib_set(struct run *x, unsigned cu, unsigned cU)
{
    for (unsigned k = 0; k < 2; k++) {
        unsigned n = k ? cU : cu;

        x->calib[k] = n;
        x->ctl->job_code[2 + k] = ML_BB_CODE_ADDR + (2 + k) * ML_BB_CODE_STRIDE +
                                  x->jobs[2 + k].off + 2 * (CALIB_MAX - n);
    }
    x->r->calib[0] = cu;
    x->r->calib[1] = cU;
}

static unsigned calib_clamp(double n)
{
    return n < CALIB_MIN ? CALIB_MIN : n > CALIB_MAX ? CALIB_MAX : (unsigned)(n + 0.5);
}

/*
 * After a probe of a few rounds: the block's busy cycles per pass at u and U (its pass time
 * in cycles less the pass overhead, which the calibration gives), as the chain's lengths.
 */
static void calib_match(struct run *x, unsigned reps)
{
    double best[2] = {0, 0}, b[2] = {0, 0}, c[2] = {0, 0}, ratio, over;
    unsigned cu, cU;

    for (unsigned i = 0; i < reps; i++) {
        for (unsigned p = 0; p < 2; p++) {
            const struct ml_bb_slot *s0 = &x->ctl->res[i][2 * p], *s1 = &x->ctl->res[i][2 * p + 1];
            double t0 = (double)(s0->t1 - s0->t0) / x->jobs[2 * p].passes;
            double t1 = (double)(s1->t1 - s1->t0) / x->jobs[2 * p + 1].passes;
            double *dst = p ? c : b;

            if (!slot_clean(x, s0) || !slot_clean(x, s1) || (best[p] && t0 + t1 >= best[p]))
                continue;
            best[p] = t0 + t1;
            dst[0] = t0;
            dst[1] = t1;
        }
    }
    if (!best[0] || !best[1] || c[1] <= c[0])
        return;
    ratio = (c[1] - c[0]) / (x->calib[1] - x->calib[0]);
    over = c[0] / ratio - x->calib[0];
    if (over < 0)
        over = 0;
    cu = calib_clamp(b[0] / ratio - over);
    cU = calib_clamp(b[1] / ratio - over);
    if (cU < cu + CALIB_MIN)
        cU = cu + CALIB_MIN > CALIB_MAX ? CALIB_MAX : cu + CALIB_MIN;
    if (cu >= cU)
        cu = cU - CALIB_MIN;
    calib_set(x, cu, cU);
}

static int vector_level(void)
{
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        return 2;
    return __builtin_cpu_supports("avx") ? 1 : 0;
}

int ml_bb_measure(const uint8_t *code, size_t len, const struct ml_bb_opts *o,
                  struct ml_bb_result *r)
{
    struct run x;
    int err = 0, status;

    memset(r, 0, sizeof(*r));
    memset(&x, 0, sizeof(x));
    x.o = o;
    x.r = r;
    x.datafd = x.ctlfd = -1;
    x.pid = -1;
    if (o->reps == 0 || o->reps > ML_BB_MAX_REPS || o->min_agree > o->reps)
        return -EINVAL;
    if (o->static_check ? ml_bb_check(code, len, r) : 0)
        return 0;
    if (!o->static_check) {
        struct ml_bb_result tmp;
        ml_bb_check(code, len, &tmp);
        r->n_insns = tmp.n_insns;
    }
    if (len == 0 || len > ML_BB_MAX_LEN) {
        r->status = ML_BB_UNSUPPORTED;
        snprintf(r->detail, sizeof(r->detail), "block length %zu out of range", len);
        return 0;
    }
    if (o->method != ML_BB_METHOD_TSC)
        pmu_probe(&x);
    if (o->method == ML_BB_METHOD_PMU && x.n_pmu == 0)
        return -ENODEV;
    r->method = x.n_pmu ? ML_BB_METHOD_PMU : ML_BB_METHOD_TSC;
    if (r->method == ML_BB_METHOD_TSC)
        x.n_pmu = 0;
    err = plan(&x, code, len);
    if (err) {
        err = err > 0 ? 0 : err;
        goto out;
    }
    x.datafd = memfd_create("memlens-bb-data", MFD_CLOEXEC);
    x.ctlfd = memfd_create("memlens-bb-ctl", MFD_CLOEXEC);
    if (x.datafd < 0 || x.ctlfd < 0 || ftruncate(x.datafd, 4096) ||
        ftruncate(x.ctlfd, ML_BB_CTL_SIZE)) {
        err = -errno;
        goto out;
    }
    x.ctl = mmap(NULL, ML_BB_CTL_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, x.ctlfd, 0);
    if (x.ctl == MAP_FAILED) {
        x.ctl = NULL;
        err = -errno;
        goto out;
    }
    x.ctl->init = ML_BB_INIT_VALUE;
    x.ctl->mxcsr = ML_BB_MXCSR;
    x.ctl->vec = (uint32_t)vector_level();
    x.ctl->n_jobs = x.n_jobs;
    x.ctl->n_reps = o->reps;
    x.ctl->alias = ML_BB_ALIAS_ADDR;
    for (unsigned j = 0; j < x.n_jobs; j++) {
        x.ctl->job_code[j] = ML_BB_CODE_ADDR + j * ML_BB_CODE_STRIDE + x.jobs[j].off;
        x.ctl->passes[j] = x.jobs[j].passes;
    }
    if (r->method == ML_BB_METHOD_TSC)
        calib_set(&x, CALIB_U, CALIB_U2);

    fflush(NULL);
    x.pid = fork();
    if (x.pid < 0) {
        err = -errno;
        goto out;
    }
    if (x.pid == 0)
        child_main(&x);
    if (wait_stop(x.pid, &status) < 0 || !WIFSTOPPED(status)) {
        err = WIFEXITED(status) && WEXITSTATUS(status) == CHILD_EPTRACE ? -EPERM : -ECHILD;
        x.pid = -1;
        goto out;
    }
    ptrace(PTRACE_SETOPTIONS, x.pid, 0, PTRACE_O_EXITKILL);
    if (ptrace(PTRACE_CONT, x.pid, 0, 0) || wait_stop(x.pid, &status) < 0) {
        err = -ECHILD;
        goto out;
    }
    if (!WIFSTOPPED(status) || WSTOPSIG(status) != SIGTRAP) {
        if (WIFEXITED(status)) {
            x.pid = -1;
            err = WEXITSTATUS(status) == CHILD_ESECCOMP ? -ENOSYS : -ENOMEM;
        } else
            err = -ECHILD;
        goto out;
    }
    /* a short probe (which also maps the block's pages) sizes the calibration chains */
    err = 1;
    if (r->method == ML_BB_METHOD_TSC) {
        x.ctl->n_reps = o->reps < PROBE_REPS ? o->reps : PROBE_REPS;
        err = run_all(&x);
        x.ctl->n_reps = o->reps;
        if (err == 1)
            calib_match(&x, o->reps < PROBE_REPS ? o->reps : PROBE_REPS);
    }
    /*
     * Noise comes in bursts (other tenants, interrupts): an unclean run is retried afresh,
     * after a pause that doubles from 1 ms up to 50 ms, so that a burst of some tens of
     * milliseconds does not spoil every attempt (blocks unclean after 10 back-to-back
     * attempts were all ok when run again a few seconds later).
     */
    for (unsigned a = 0; err == 1 && a < (o->attempts ? o->attempts : 1); a++) {
        if (a) {
            unsigned ms = a < 6 ? 1u << (a - 1) : 50;
            struct timespec ts = {0, (long)ms * 1000000L};

            nanosleep(&ts, NULL);
        }
        err = run_all(&x);
        if (err != 1)
            break;
        r->attempts = a + 1;
        evaluate(&x);
        if (r->status == ML_BB_OK)
            break;
    }
    if (err == 1) {
        err = 0;
        if (o->trace)
            err = trace_accesses(&x, code, len);
    }
out:
    if (x.pid > 0) {
        kill(x.pid, SIGKILL);
        waitpid(x.pid, &status, __WALL);
    }
    for (unsigned j = 0; j < x.n_jobs; j++)
        free(x.jobs[j].code);
    if (x.ctl)
        munmap(x.ctl, ML_BB_CTL_SIZE);
    if (x.datafd >= 0)
        close(x.datafd);
    if (x.ctlfd >= 0)
        close(x.ctlfd);
    return err;
}
