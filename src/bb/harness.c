/* The basic-block harness: sandboxed child under ptrace, page mapping on faults, timing. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/perf_event.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/rseq.h>
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
enum { CHILD_EPTRACE = 90, CHILD_EMAP, CHILD_EPARENT };

/* The sandbox of the measurement in progress, for ml_bb_abort (0: none). */
static volatile sig_atomic_t sandbox_pid;

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
    struct ml_bb_ctl *ctl;           /* read-only in the child */
    const struct ml_bb_state *state; /* written by the child: numbers, never trusted */
    int datafd, ctlfd, statefd;
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
 * n copies of unit followed by 'jmp *0(%rip)' and the absolute address of job k's return
 * into the stub, after off bytes of int3 that place the entry. RIP-relative displacements are
 * rewritten in every copy so that all copies reach the addresses of the first one, as every
 * iteration of the real block does; otherwise the copies would spread over many pages and misalign
 * their data.
 */
static int job_build(struct job *j, unsigned k, const uint8_t *unit, size_t len, unsigned n,
                     unsigned passes, const struct ml_bb_insn *in, int n_in, unsigned off)
{
    static const char *const backs[ML_BB_MAX_JOBS] = {ml_bb_stub_back0, ml_bb_stub_back1,
                                                      ml_bb_stub_back2, ml_bb_stub_back3};
    uint64_t back = ML_BB_STUB_AT(backs[k]);
    static const uint8_t jmp[6] = {0xff, 0x25, 0, 0, 0, 0};
    uint8_t *p;

    j->off = off;
    j->len = off + len * n + sizeof(jmp) + 8;
    j->code = malloc(j->len);
    if (!j->code)
        return -ENOMEM;
    memset(j->code, 0xcc, off);
    p = j->code + off;
    for (unsigned c = 0; c < n; c++) {
        uint8_t *copy = p + c * len;

        memcpy(copy, unit, len);
        for (int i = 0; i < n_in; i++) {
            int32_t disp;
            int64_t moved;

            if (!in[i].rip_disp_off)
                continue;
            memcpy(&disp, copy + in[i].off + in[i].rip_disp_off, 4);
            moved = (int64_t)disp - (int64_t)c * (int64_t)len;
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

enum { L_NEXT, L_TRAP, L_ALLOW, L_TRACE, L_RUSAGE, L_READ, L_FD, L_COUNT };

struct bpf {
    struct sock_filter *f;
    unsigned n;
    uint8_t jt[ML_BB_MAX_FILTER], jf[ML_BB_MAX_FILTER];
    unsigned at[L_COUNT];
};

static void bpf_op(struct bpf *b, uint16_t code, uint32_t k, uint8_t jt, uint8_t jf)
{
    b->f[b->n] = (struct sock_filter)BPF_JUMP(code, k, 0, 0);
    b->jt[b->n] = jt;
    b->jf[b->n] = jf;
    b->n++;
}

/* Loads the low or high half of a 64-bit field of struct seccomp_data. */
static void bpf_ld(struct bpf *b, size_t off, int high)
{
    bpf_op(b, BPF_LD | BPF_W | BPF_ABS, (uint32_t)off + (high ? 4 : 0), L_NEXT, L_NEXT);
}

/* Falls through when the 64-bit field equals v, else jumps to L_TRAP. */
static void bpf_eq64(struct bpf *b, size_t off, uint64_t v)
{
    bpf_ld(b, off, 0);
    bpf_op(b, BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)v, L_NEXT, L_TRAP);
    bpf_ld(b, off, 1);
    bpf_op(b, BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)(v >> 32), L_NEXT, L_TRAP);
}

#define ARG(i) (offsetof(struct seccomp_data, args) + 8 * (i))

void ml_bb_seccomp_build(struct ml_bb_ctl *ctl, unsigned n_pmu)
{
    uint64_t stub = ML_BB_STUB_ADDR, ru = ML_BB_STATE_ADDR + offsetof(struct ml_bb_state, rusage);
    uint64_t res = ML_BB_STATE_ADDR + offsetof(struct ml_bb_state, res);
    struct bpf b = {.f = ctl->filter};

    bpf_ld(&b, offsetof(struct seccomp_data, arch), 0);
    bpf_op(&b, BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, L_NEXT, L_TRAP);
    /* from the stub's page only: the block's own syscall instructions never get further */
    bpf_ld(&b, offsetof(struct seccomp_data, instruction_pointer), 1);
    bpf_op(&b, BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)(stub >> 32), L_NEXT, L_TRAP);
    bpf_ld(&b, offsetof(struct seccomp_data, instruction_pointer), 0);
    bpf_op(&b, BPF_JMP | BPF_JGE | BPF_K, (uint32_t)stub, L_NEXT, L_TRAP);
    bpf_op(&b, BPF_JMP | BPF_JGE | BPF_K, (uint32_t)(stub + ML_BB_STUB_MAP), L_TRAP, L_NEXT);
    bpf_ld(&b, offsetof(struct seccomp_data, nr), 0);
    bpf_op(&b, BPF_JMP | BPF_JEQ | BPF_K, SYS_mmap, L_TRACE, L_NEXT);
    bpf_op(&b, BPF_JMP | BPF_JEQ | BPF_K, SYS_getrusage, L_RUSAGE, L_NEXT);
    bpf_op(&b, BPF_JMP | BPF_JEQ | BPF_K, SYS_read, L_READ, L_TRAP);
    b.at[L_RUSAGE] = b.n;
    bpf_eq64(&b, ARG(0), RUSAGE_THREAD);
    bpf_eq64(&b, ARG(1), ru);
    bpf_op(&b, BPF_JMP | BPF_JA, 0, L_ALLOW, L_ALLOW);
    b.at[L_READ] = b.n;
    bpf_ld(&b, ARG(0), 1);
    bpf_op(&b, BPF_JMP | BPF_JEQ | BPF_K, 0, L_NEXT, L_TRAP);
    bpf_ld(&b, ARG(0), 0);
    for (unsigned k = 0; k < n_pmu && k < ML_BB_MAX_PMU; k++)
        bpf_op(&b, BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)ctl->pmu_fd[k], L_FD, L_NEXT);
    bpf_op(&b, BPF_JMP | BPF_JA, 0, L_TRAP, L_TRAP);
    b.at[L_FD] = b.n;
    bpf_eq64(&b, ARG(2), 8);
    bpf_ld(&b, ARG(1), 1);
    bpf_op(&b, BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)(res >> 32), L_NEXT, L_TRAP);
    bpf_ld(&b, ARG(1), 0);
    bpf_op(&b, BPF_JMP | BPF_JGE | BPF_K, (uint32_t)res, L_NEXT, L_TRAP);
    bpf_op(&b, BPF_JMP | BPF_JGT | BPF_K,
           (uint32_t)(res + sizeof(((struct ml_bb_state *)0)->res) - 8), L_TRAP, L_ALLOW);
    b.at[L_TRAP] = b.n;
    bpf_op(&b, BPF_RET | BPF_K, SECCOMP_RET_TRAP, L_NEXT, L_NEXT);
    b.at[L_ALLOW] = b.n;
    bpf_op(&b, BPF_RET | BPF_K, SECCOMP_RET_ALLOW, L_NEXT, L_NEXT);
    b.at[L_TRACE] = b.n;
    bpf_op(&b, BPF_RET | BPF_K, SECCOMP_RET_TRACE, L_NEXT, L_NEXT);
    for (unsigned i = 0; i < b.n; i++) {
        if (BPF_CLASS(b.f[i].code) != BPF_JMP)
            continue;
        if (BPF_OP(b.f[i].code) == BPF_JA) { /* unconditional: the offset lives in k */
            b.f[i].k = b.at[b.jt[i]] - i - 1;
            continue;
        }
        b.f[i].jt = b.jt[i] ? (uint8_t)(b.at[b.jt[i]] - i - 1) : 0;
        b.f[i].jf = b.jf[i] ? (uint8_t)(b.at[b.jf[i]] - i - 1) : 0;
    }
    ctl->fprog_len = b.n;
    ctl->fprog_filter = ML_BB_CTL_ADDR + offsetof(struct ml_bb_ctl, filter);
}

static int map_fixed(uint64_t addr, size_t len, int prot, int shared_fd)
{
    void *p;

    if (shared_fd >= 0)
        p = mmap((void *)addr, len, prot, MAP_SHARED | MAP_FIXED_NOREPLACE, shared_fd, 0);
    else
        p = mmap((void *)addr, len, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    return p == (void *)addr ? 0 : -1;
}

/* The address ranges around the harness, which the stub unmaps before it seals itself in. */
static void unmap_plan(struct ml_bb_ctl *ctl, const struct run *x)
{
    uint64_t from = 0, top = (1ull << 47) - 4096;

    ctl->n_unmap = 0;
    for (unsigned j = 0; j <= x->n_jobs; j++) {
        uint64_t at = j ? ML_BB_CODE_ADDR + (j - 1) * ML_BB_CODE_STRIDE : ML_BB_STUB_ADDR;
        uint64_t end = j ? at + ((x->jobs[j - 1].len + 4095) & ~4095ull) : ML_BB_ALIAS_ADDR + 4096;

        ctl->unmap[ctl->n_unmap][0] = from;
        ctl->unmap[ctl->n_unmap][1] = at - from;
        ctl->n_unmap++;
        from = end;
    }
    ctl->unmap[ctl->n_unmap][0] = from;
    ctl->unmap[ctl->n_unmap][1] = top - from;
    ctl->n_unmap++;
}

/* Closes every descriptor but the sorted, distinct keep[0..n). */
static void close_others(const int *keep, unsigned n)
{
    unsigned from = 0;

    for (unsigned i = 0; i <= n; i++) {
        unsigned to = i < n ? (unsigned)keep[i] : ~0u;

        if (to > from && syscall(SYS_close_range, from, to - 1, 0) != 0)
            for (unsigned fd = from; fd < to && fd < 65536; fd++)
                close((int)fd);
        from = to + 1;
    }
}

/*
 * Defence in depth, not the guarantee (the seccomp filter is): as root, become nobody
 * keeping only CAP_SYS_RAWIO, which mapping a page below vm.mmap_min_addr needs; no
 * ambient or inheritable capabilities; no new processes, files or locked memory; CPU time
 * bounded beyond the timer. Best effort: a container may not map nobody's uid.
 */
static void drop_privileges(unsigned timeout_ms)
{
    struct rlimit zero = {0, 0}, cpu;

    if (geteuid() == 0) {
        struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
        struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];

        for (int c = 0; c < 64; c++)
            if (c != CAP_SYS_RAWIO)
                prctl(PR_CAPBSET_DROP, c, 0, 0, 0);
        prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0);
        if (setgroups(0, NULL) == 0 && setresgid(65534, 65534, 65534) == 0)
            setresuid(65534, 65534, 65534);
        memset(d, 0, sizeof(d));
        d[CAP_TO_INDEX(CAP_SYS_RAWIO)].permitted = CAP_TO_MASK(CAP_SYS_RAWIO);
        d[CAP_TO_INDEX(CAP_SYS_RAWIO)].effective = CAP_TO_MASK(CAP_SYS_RAWIO);
        syscall(SYS_capset, &h, d);
    }
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    setrlimit(RLIMIT_NPROC, &zero);
    setrlimit(RLIMIT_NOFILE, &zero);
    setrlimit(RLIMIT_FSIZE, &zero);
    setrlimit(RLIMIT_CORE, &zero);
    setrlimit(RLIMIT_MEMLOCK, &zero);
    setrlimit(RLIMIT_MSGQUEUE, &zero);
    cpu.rlim_cur = 2 + timeout_ms / 1000;
    cpu.rlim_max = cpu.rlim_cur + 1;
    setrlimit(RLIMIT_CPU, &cpu);
}

/* Dies with the harness: also when the harness died before the child could ask for it. */
static void die_with_parent(pid_t parent)
{
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) || getppid() != parent)
        _exit(CHILD_EPARENT);
}

/* The child: builds the harness at fixed addresses, locks itself down, enters the stub. */
static void child_main(struct run *x, pid_t parent)
{
    size_t stub_len = (size_t)(ml_bb_stub_end - ml_bb_stub_start);
    struct itimerval prof = {{0, 0}, {0, 0}}, real = {{0, 0}, {0, 0}};
    int keep[1 + ML_BB_MAX_PMU], n_keep = 0;

    /* the caller's handlers (a cleanup on SIGINT, say) are not the sandbox's to run */
    for (int sig = 1; sig < SIGRTMIN; sig++) {
        struct sigaction sa;

        if (sigaction(sig, NULL, &sa) == 0 && sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN)
            signal(sig, SIG_DFL);
    }
    die_with_parent(parent);
    setpgid(0, 0); /* the terminal's signals are the harness's to handle */
    if (ptrace(PTRACE_TRACEME, 0, 0, 0))
        _exit(CHILD_EPTRACE);
    raise(SIGSTOP);
    /* the control page is read-only here: its memfd is sealed against new writable maps */
    if (map_fixed(ML_BB_STUB_ADDR, ML_BB_STUB_MAP, PROT_READ | PROT_WRITE, -1) ||
        map_fixed(ML_BB_CTL_ADDR, ML_BB_CTL_SIZE, PROT_READ, x->ctlfd) ||
        map_fixed(ML_BB_STATE_ADDR, ML_BB_STATE_SIZE, PROT_READ | PROT_WRITE, x->statefd) ||
        map_fixed(ML_BB_ALIAS_ADDR, 4096, PROT_READ | PROT_WRITE, x->datafd))
        _exit(CHILD_EMAP);
    memcpy((void *)ML_BB_STUB_ADDR, ml_bb_stub_start, stub_len);
    if (mprotect((void *)ML_BB_STUB_ADDR, ML_BB_STUB_MAP, PROT_READ | PROT_EXEC))
        _exit(CHILD_EMAP);
    for (unsigned j = 0; j < x->n_jobs; j++) {
        uint64_t at = ML_BB_CODE_ADDR + j * ML_BB_CODE_STRIDE;
        size_t len = (x->jobs[j].len + 4095) & ~(size_t)4095;

        if (map_fixed(at, len, PROT_READ | PROT_WRITE, -1))
            _exit(CHILD_EMAP);
        memcpy((void *)at, x->jobs[j].code, x->jobs[j].len);
        if (mprotect((void *)at, len, PROT_READ | PROT_EXEC))
            _exit(CHILD_EMAP);
    }
    /* the stub writes its results here: fault every page in now, not inside a timing window
       (a minor fault every 4 KiB of results made one timing in 32 unclean) */
    for (size_t off = 0; off < ML_BB_STATE_SIZE; off += 4096)
        ((volatile uint8_t *)ML_BB_STATE_ADDR)[off] = 0;
    for (size_t off = 0; off < ML_BB_CTL_SIZE; off += 4096)
        (void)((volatile const uint8_t *)ML_BB_CTL_ADDR)[off];
    /* perf counts the process that opens it; each fd goes to the number the filter allows */
    keep[n_keep++] = x->datafd; /* inject_mmap maps it */
    for (unsigned k = 0; k < x->n_pmu; k++) {
        struct perf_event_attr a;
        int want = (int)x->ctl->pmu_fd[k];
        long fd;

        perf_attr(&a, x->pmu_kinds[k]);
        fd = perf_open(&a);
        if (fd < 0 || (fd != want && dup2((int)fd, want) != want))
            _exit(CHILD_EMAP);
        if (fd != want)
            close((int)fd);
        keep[n_keep++] = want;
    }
    for (int i = 1; i < n_keep; i++)
        for (int j = i; j > 0 && keep[j - 1] > keep[j]; j--) {
            int t = keep[j];
            keep[j] = keep[j - 1];
            keep[j - 1] = t;
        }
    /* nothing else: not the caller's pipes, not the output file (they must close with us) */
    close_others(keep, (unsigned)n_keep);
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
    drop_privileges(x->o->timeout_ms);
    die_with_parent(parent); /* a change of credentials cleared the death signal */
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) /* seccomp(2) requires it without privileges */
        _exit(CHILD_EMAP);
    /* CPU time catches spinning blocks; wall time catches anything else that never ends */
    prof.it_value.tv_sec = x->o->timeout_ms / 1000;
    prof.it_value.tv_usec = (x->o->timeout_ms % 1000) * 1000;
    real.it_value.tv_sec = 10 + x->o->timeout_ms / 100;
    setitimer(ITIMER_PROF, &prof, NULL);
    setitimer(ITIMER_REAL, &real, NULL);
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

#define SECCOMP_STOP (SIGTRAP | (PTRACE_EVENT_SECCOMP << 8))

/* The syscall the block attempted, which the filter stopped for the harness: refused. */
static void refuse_syscall(struct run *x, long nr)
{
    x->r->status = ML_BB_UNSUPPORTED;
    snprintf(x->r->detail, sizeof(x->r->detail), "syscall (seccomp): number %ld", nr);
}

/*
 * Maps page onto the shared data page by making the stopped child run mmap at the gadget.
 * The filter stops the child at the call; it runs only when its registers are exactly those
 * set here (they are: the child runs nothing but the gadget in between).
 */
static int inject_mmap(struct run *x, uint64_t page, int *status)
{
    struct user_regs_struct regs, seen;

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
    if (!WIFSTOPPED(*status) || *status >> 8 != SECCOMP_STOP)
        return 1; /* handled by the caller like any other stop */
    if (ptrace(PTRACE_GETREGS, x->pid, 0, &seen))
        return -errno;
    if (seen.orig_rax != SYS_mmap || seen.rip != regs.rip + 2 || seen.rdi != regs.rdi ||
        seen.rsi != regs.rsi || seen.rdx != regs.rdx || seen.r10 != regs.r10 ||
        seen.r8 != regs.r8 || seen.r9 != regs.r9)
        return -EIO;
    if (ptrace(PTRACE_CONT, x->pid, 0, 0))
        return -errno;
    if (wait_stop(x->pid, status) < 0)
        return -ECHILD;
    if (!WIFSTOPPED(*status) || WSTOPSIG(*status) != SIGTRAP || *status >> 16)
        return 1;
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
        if (ptrace(PTRACE_GETSIGINFO, x->pid, 0, &si))
            return -errno;
        refuse_syscall(x, si.si_syscall);
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
                if (status >> 8 == SECCOMP_STOP) { /* not one the harness injected */
                    refuse_syscall(x, (long)regs.orig_rax);
                    return 0;
                }
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
    if (set_rip(x->pid, ML_BB_STUB_AT(ml_bb_stub_trace)) || ptrace(PTRACE_CONT, x->pid, 0, 0) ||
        wait_stop(x->pid, &status) < 0)
        return -ECHILD;
    if (!WIFSTOPPED(status) || WSTOPSIG(status) != SIGTRAP || status >> 16)
        return 0;
    /* the stub stopped with the registers of a pass; the job's code starts from here */
    if (ptrace(PTRACE_GETREGS, x->pid, 0, &g))
        return -errno;
    g.rip = start;
    if (ptrace(PTRACE_SETREGS, x->pid, 0, &g) || ptrace(PTRACE_SINGLESTEP, x->pid, 0, 0) ||
        wait_stop(x->pid, &status) < 0)
        return -ECHILD;
    for (int step = 0; step < 2 * n; step++) {
        uint64_t off, copy;
        int k;

        if (!WIFSTOPPED(status) || WSTOPSIG(status) != SIGTRAP || status >> 16)
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
            const struct ml_bb_slot *s = &x->state->res[i][j];
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
    err = job_build(&x->jobs[0], 0, code, len, r->u, passes, in, n_in, off);
    if (!err)
        err = job_build(&x->jobs[1], 1, code, len, r->u2, passes, in, n_in, off);
    x->n_jobs = 2;
    /* as many passes as the block: matched chains then run timings of the block's length */
    if (!err && r->method == ML_BB_METHOD_TSC) {
        err = job_build(&x->jobs[2], 2, add_chain, 2, CALIB_MAX, passes, NULL, 0, 0);
        if (!err)
            err = job_build(&x->jobs[3], 3, add_chain, 2, CALIB_MAX, passes, NULL, 0, 0);
        x->n_jobs = 4;
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

/* The timings are the child's numbers: n may be anything, NaN included. */
static unsigned calib_clamp(double n)
{
    return !(n >= CALIB_MIN) ? CALIB_MIN : n > CALIB_MAX ? CALIB_MAX : (unsigned)(n + 0.5);
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
            const struct ml_bb_slot *s0 = &x->state->res[i][2 * p];
            const struct ml_bb_slot *s1 = &x->state->res[i][2 * p + 1];
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

/*
 * The three memfds shared with the child: the data page, the control page (sealed against
 * new writable mappings, so the child's read-only mapping can never be made writable) and
 * the state page (read-only here: the harness only reads what the child wrote).
 */
static int sandbox_files(struct run *x)
{
    void *p;

    x->datafd = memfd_create("memlens-bb-data", MFD_CLOEXEC);
    x->ctlfd = memfd_create("memlens-bb-ctl", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    x->statefd = memfd_create("memlens-bb-state", MFD_CLOEXEC);
    if (x->datafd < 0 || x->ctlfd < 0 || x->statefd < 0 || ftruncate(x->datafd, 4096) ||
        ftruncate(x->ctlfd, ML_BB_CTL_SIZE) || ftruncate(x->statefd, ML_BB_STATE_SIZE))
        return -errno;
    p = mmap(NULL, ML_BB_CTL_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, x->ctlfd, 0);
    if (p == MAP_FAILED)
        return -errno;
    x->ctl = p;
    p = mmap(NULL, ML_BB_STATE_SIZE, PROT_READ, MAP_SHARED, x->statefd, 0);
    if (p == MAP_FAILED)
        return -errno;
    x->state = p;
    /* F_SEAL_FUTURE_WRITE needs Linux 5.1; without it the filter still refuses mprotect */
    if (fcntl(x->ctlfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE))
        fcntl(x->ctlfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW);
    return 0;
}

/*
 * Takes the child from its first stop to the stub's first trap: setup done, everything
 * else unmapped, filter installed (the stub's seccomp(2) returned 0 in %rax). No code of
 * the block has run yet, so these registers can be believed.
 */
static int sandbox_start(struct run *x)
{
    struct user_regs_struct regs;
    int status;

    if (wait_stop(x->pid, &status) < 0 || !WIFSTOPPED(status)) {
        int eptrace = WIFEXITED(status) && WEXITSTATUS(status) == CHILD_EPTRACE;

        x->pid = -1;
        return eptrace ? -EPERM : -ECHILD;
    }
    if (ptrace(PTRACE_SETOPTIONS, x->pid, 0, PTRACE_O_EXITKILL | PTRACE_O_TRACESECCOMP))
        return -ENOSYS;
    if (ptrace(PTRACE_CONT, x->pid, 0, 0) || wait_stop(x->pid, &status) < 0)
        return -ECHILD;
    if (WIFEXITED(status)) {
        x->pid = -1;
        return WEXITSTATUS(status) == CHILD_EMAP ? -ENOMEM : -ECHILD;
    }
    if (!WIFSTOPPED(status) || status >> 8 != SIGTRAP || ptrace(PTRACE_GETREGS, x->pid, 0, &regs) ||
        regs.rip != ML_BB_STUB_AT(ml_bb_stub_ready))
        return -ECHILD;
    return regs.rax ? -ENOSYS : 0;
}

int ml_bb_measure(const uint8_t *code, size_t len, const struct ml_bb_opts *o,
                  struct ml_bb_result *r)
{
    struct run x;
    int err = 0, status;
    pid_t parent;

    memset(r, 0, sizeof(*r));
    memset(&x, 0, sizeof(x));
    x.o = o;
    x.r = r;
    x.datafd = x.ctlfd = x.statefd = -1;
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
    err = sandbox_files(&x);
    if (err)
        goto out;
    x.ctl->init = ML_BB_INIT_VALUE;
    x.ctl->mxcsr = ML_BB_MXCSR;
    x.ctl->vec = (uint32_t)vector_level();
    x.ctl->n_jobs = x.n_jobs;
    x.ctl->n_reps = o->reps;
    x.ctl->alias = ML_BB_ALIAS_ADDR;
    for (unsigned j = 0; j < 8; j++) { /* unused entries lead to job 0 */
        unsigned k = j < x.n_jobs ? j : 0;

        x.ctl->job_code[j] = ML_BB_CODE_ADDR + k * ML_BB_CODE_STRIDE + x.jobs[k].off;
        x.ctl->passes[j] = x.jobs[k].passes;
    }
    if (r->method == ML_BB_METHOD_TSC)
        calib_set(&x, CALIB_U, CALIB_U2);
    /* the child moves its perf fds to the first numbers above stdio that are not datafd */
    for (int k = 0, fd = 3; k < (int)x.n_pmu; fd++)
        if (fd != x.datafd)
            x.ctl->pmu_fd[k++] = (uint64_t)fd;
    x.ctl->n_pmu = x.n_pmu;
    unmap_plan(x.ctl, &x);
    ml_bb_seccomp_build(x.ctl, x.n_pmu);

    fflush(NULL);
    parent = getpid();
    x.pid = fork();
    if (x.pid < 0) {
        err = -errno;
        goto out;
    }
    if (x.pid == 0)
        child_main(&x, parent);
    sandbox_pid = x.pid;
    err = sandbox_start(&x);
    if (err)
        goto out;
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
    sandbox_pid = 0; /* before the reaping: ml_bb_abort never signals a recycled pid */
    if (x.pid > 0) {
        kill(x.pid, SIGKILL);
        waitpid(x.pid, &status, __WALL);
    }
    for (unsigned j = 0; j < x.n_jobs; j++)
        free(x.jobs[j].code);
    if (x.ctl)
        munmap(x.ctl, ML_BB_CTL_SIZE);
    if (x.state)
        munmap((void *)x.state, ML_BB_STATE_SIZE);
    if (x.datafd >= 0)
        close(x.datafd);
    if (x.ctlfd >= 0)
        close(x.ctlfd);
    if (x.statefd >= 0)
        close(x.statefd);
    return err;
}

void ml_bb_abort(void)
{
    pid_t pid = sandbox_pid;

    if (pid > 0)
        kill(pid, SIGKILL);
}
