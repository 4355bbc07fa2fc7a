/* Page faults for traces: the kernel's software page-fault event per thread, frames from pagemap.
 */
#include "runtime/clock.h"
#include "runtime/rt.h"
#include "runtime/trace-rt.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Data pages of each thread's sample ring (a power of two): room for about 2000 faults. */
#define RING_PAGES 16

struct ml_tr_pf {
    int fd;
    struct perf_event_mmap_page *page;
    uint8_t *data;
    uint64_t size; /* data bytes */
    size_t maplen;
    uint64_t tail;
};

static int faults_on, pfn_on;
/*
 * The probe's event, kept open for the probing thread's own ring: the first
 * page-fault event of a process costs 5-15 ms in a VM (the kernel enables the
 * software event's static key), and closing the probe before the thread's
 * open made every traced process pay that twice.
 */
static int probe_fd = -1;
static uint32_t probe_tid;
static int pagemap_fd = -1;
static pid_t pagemap_pid;
static long page_size;

static void attr_init(struct perf_event_attr *a)
{
    memset(a, 0, sizeof(*a));
    a->size = sizeof(*a);
    a->type = PERF_TYPE_SOFTWARE;
    a->config = PERF_COUNT_SW_PAGE_FAULTS;
    a->sample_period = 1;
    a->sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ADDR;
    a->exclude_kernel = 1; /* faults of user accesses; allowed at perf_event_paranoid 2 */
    a->exclude_hv = 1;
    /* Times in CLOCK_MONOTONIC, converted to the runtime's ticks (to_ticks). */
    a->use_clockid = 1;
    a->clockid = CLOCK_MONOTONIC;
}

static int perf_open(struct perf_event_attr *a)
{
    return (int)syscall(SYS_perf_event_open, a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

static void paranoid(char *buf, size_t n)
{
    int fd = open("/proc/sys/kernel/perf_event_paranoid", O_RDONLY | O_CLOEXEC);
    ssize_t r = fd >= 0 ? read(fd, buf, n - 1) : -1;

    if (fd >= 0)
        close(fd);
    buf[r > 0 ? r : 0] = 0;
    for (char *p = buf; *p; p++)
        if (*p == '\n')
            *p = 0;
}

static uint64_t pagemap_entry(uint64_t addr, int *ok)
{
    uint64_t e = 0;

    *ok = 0;
    if (pagemap_fd < 0 || pagemap_pid != getpid()) {
        if (pagemap_fd >= 0)
            close(pagemap_fd);
        pagemap_fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
        pagemap_pid = getpid();
    }
    if (pagemap_fd < 0)
        return 0;
    if (pread(pagemap_fd, &e, 8, (off_t)(addr / (uint64_t)page_size * 8)) == 8)
        *ok = 1;
    return e;
}

void ml_tr_pf_probe(int want_faults, int want_pfn, char *faults_why, size_t n1, char *pfn_why,
                    size_t n2)
{
    struct perf_event_attr a;
    char par[32];
    int fd, ok;
    volatile uint64_t probe = 1;
    uint64_t e;

    page_size = sysconf(_SC_PAGESIZE);
    faults_on = pfn_on = 0;
    if (!want_faults) {
        snprintf(faults_why, n1, "off (no-faults)");
    } else {
        attr_init(&a);
        fd = perf_open(&a);
        if (fd < 0) {
            int err = errno;
            paranoid(par, sizeof(par));
            snprintf(faults_why, n1,
                     "unavailable: perf_event_open of the software page-fault event failed: %s "
                     "(kernel.perf_event_paranoid=%s)",
                     strerror(err), par[0] ? par : "?");
        } else {
            faults_on = 1;
            fd = __atomic_exchange_n(&probe_fd, fd, __ATOMIC_ACQ_REL);
            if (fd >= 0)
                close(fd);
            probe_tid = (uint32_t)ml_rt_gettid();
            snprintf(faults_why, n1, "recorded (software page-fault event, user space)");
        }
    }
    if (!want_pfn) {
        snprintf(pfn_why, n2, "off (no-pfn)");
        return;
    }
    if (!faults_on) {
        snprintf(pfn_why, n2, "not recorded: page faults are not recorded");
        return;
    }
    e = pagemap_entry((uint64_t)(uintptr_t)&probe, &ok);
    if (!ok)
        snprintf(pfn_why, n2, "unavailable: cannot read /proc/self/pagemap");
    else if ((e >> 63) && !(e & ((1ull << 55) - 1)))
        snprintf(pfn_why, n2,
                 "unavailable: /proc/self/pagemap hides frame numbers (needs CAP_SYS_ADMIN)");
    else {
        pfn_on = 1;
        snprintf(pfn_why, n2, "recorded at page faults (/proc/self/pagemap)");
    }
}

int ml_tr_pf_faults_on(void)
{
    return faults_on;
}

int ml_tr_pf_pfn_on(void)
{
    return pfn_on;
}

struct ml_tr_pf *ml_tr_pf_open(void)
{
    struct perf_event_attr a;
    struct ml_tr_pf *pf;
    void *map;

    if (!faults_on)
        return NULL;
    pf = calloc(1, sizeof(*pf));
    if (!pf)
        return NULL;
    attr_init(&a);
    pf->fd = -1;
    if ((uint32_t)ml_rt_gettid() == probe_tid)
        pf->fd = __atomic_exchange_n(&probe_fd, -1, __ATOMIC_ACQ_REL);
    if (pf->fd < 0) {
        int old;
        pf->fd = perf_open(&a);
        /* Another thread (or a fork child) opened its own: the probe's is not needed. */
        if (pf->fd >= 0 && (old = __atomic_exchange_n(&probe_fd, -1, __ATOMIC_ACQ_REL)) >= 0)
            close(old);
    }
    if (pf->fd < 0) {
        free(pf);
        return NULL;
    }
    pf->maplen = (size_t)(1 + RING_PAGES) * (size_t)page_size;
    map = mmap(NULL, pf->maplen, PROT_READ | PROT_WRITE, MAP_SHARED, pf->fd, 0);
    if (map == MAP_FAILED) { /* e.g. over the perf_event_mlock_kb budget: no faults here */
        close(pf->fd);
        free(pf);
        return NULL;
    }
    pf->page = map;
    pf->data = (uint8_t *)map + page_size;
    pf->size = (uint64_t)RING_PAGES * (uint64_t)page_size;
    return pf;
}

void ml_tr_pf_close(struct ml_tr_pf *pf)
{
    if (!pf)
        return;
    munmap(pf->page, pf->maplen);
    close(pf->fd);
    free(pf);
}

static uint64_t clk_tick0, clk_ns0;

void ml_tr_pf_clock(uint64_t tick0, uint64_t ns0)
{
    clk_tick0 = tick0;
    clk_ns0 = ns0;
}

/*
 * A CLOCK_MONOTONIC time in the runtime's ticks: on the line through the
 * runtime's start and a pair of readings taken now (the longer the run, the
 * closer the rate; a fraction of a microsecond a few milliseconds in).
 */
static uint64_t to_ticks(uint64_t t)
{
    uint64_t now_t = ml_rt_ticks(), now_ns = ml_rt_mono_ns();
    double rate;

    if (ML_RT_CLOCK == ML_CLOCK_MONOTONIC)
        return t;
    if (now_ns <= clk_ns0 || now_t <= clk_tick0)
        return clk_tick0;
    rate = (double)(now_t - clk_tick0) / (double)(now_ns - clk_ns0);
    if (t <= clk_ns0)
        return clk_tick0;
    return clk_tick0 + (uint64_t)((double)(t - clk_ns0) * rate);
}

static void ring_copy(const struct ml_tr_pf *pf, uint64_t off, void *dst, size_t n)
{
    uint64_t at = off & (pf->size - 1);
    size_t first = (size_t)(pf->size - at) < n ? (size_t)(pf->size - at) : n;

    memcpy(dst, pf->data + at, first);
    memcpy((uint8_t *)dst + first, pf->data, n - first);
}

void ml_tr_pf_read(struct ml_tr_pf *pf, uint64_t upto,
                   void (*fn)(void *ctx, uint64_t tick, uint64_t addr), void *ctx, uint64_t *lost)
{
    uint64_t head;

    if (!pf)
        return;
    head = __atomic_load_n(&pf->page->data_head, __ATOMIC_ACQUIRE);
    while (pf->tail + sizeof(struct perf_event_header) <= head) {
        struct perf_event_header h;
        uint64_t rec[4];
        ring_copy(pf, pf->tail, &h, sizeof(h));
        if (h.size < sizeof(h) || pf->tail + h.size > head)
            break;
        if (h.type == PERF_RECORD_SAMPLE && h.size >= sizeof(h) + 24) {
            uint64_t tick;
            ring_copy(pf, pf->tail + sizeof(h), rec, 24); /* pid/tid, time, addr */
            tick = to_ticks(rec[1]);
            if (tick > upto)
                break;
            fn(ctx, tick, rec[2]);
        } else if (h.type == PERF_RECORD_LOST && h.size >= sizeof(h) + 16) {
            ring_copy(pf, pf->tail + sizeof(h), rec, 16);
            *lost += rec[1];
        }
        pf->tail += h.size;
        __atomic_store_n(&pf->page->data_tail, pf->tail, __ATOMIC_RELEASE);
    }
}

uint64_t ml_tr_pf_peek(struct ml_tr_pf *pf)
{
    uint64_t head, tail;

    if (!pf)
        return UINT64_MAX;
    head = __atomic_load_n(&pf->page->data_head, __ATOMIC_ACQUIRE);
    for (tail = pf->tail; tail + sizeof(struct perf_event_header) <= head;) {
        struct perf_event_header h;
        uint64_t rec[2];
        ring_copy(pf, tail, &h, sizeof(h));
        if (h.size < sizeof(h) || tail + h.size > head)
            break;
        if (h.type == PERF_RECORD_SAMPLE && h.size >= sizeof(h) + 24) {
            ring_copy(pf, tail + sizeof(h), rec, 16);
            return to_ticks(rec[1]);
        }
        tail += h.size;
    }
    return UINT64_MAX;
}

uint64_t ml_tr_pfn(uint64_t addr, uint32_t *flags)
{
    int ok;
    uint64_t e = pagemap_entry(addr, &ok);

    *flags = 0;
    if (!ok)
        return 0;
    if (e >> 63)
        *flags |= 1;
    if ((e >> 62) & 1)
        *flags |= 2;
    return (e >> 63) ? e & ((1ull << 55) - 1) : 0;
}
