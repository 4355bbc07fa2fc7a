/* Hardware counter event names and arithmetic: pure code shared by the runtime and its unit test.
 */
#include "runtime/pmu.h"

#include <linux/perf_event.h>
#include <string.h>
#include <strings.h>

struct named {
    const char *name;
    uint32_t type;
    uint64_t config;
};

/* perf's generic names (tools/perf/util/parse-events.c spells the same ones), with its aliases. */
static const struct named generic[] = {
    {"cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES},
    {"cpu-cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES},
    {"instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS},
    {"cache-references", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_REFERENCES},
    {"cache-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES},
    {"branches", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_INSTRUCTIONS},
    {"branch-instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_INSTRUCTIONS},
    {"branch-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_MISSES},
    {"bus-cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BUS_CYCLES},
    {"stalled-cycles-frontend", PERF_TYPE_HARDWARE, PERF_COUNT_HW_STALLED_CYCLES_FRONTEND},
    {"idle-cycles-frontend", PERF_TYPE_HARDWARE, PERF_COUNT_HW_STALLED_CYCLES_FRONTEND},
    {"stalled-cycles-backend", PERF_TYPE_HARDWARE, PERF_COUNT_HW_STALLED_CYCLES_BACKEND},
    {"idle-cycles-backend", PERF_TYPE_HARDWARE, PERF_COUNT_HW_STALLED_CYCLES_BACKEND},
    {"ref-cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_REF_CPU_CYCLES},
    {"cpu-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK},
    {"task-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK},
    {"page-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS},
    {"faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS},
    {"context-switches", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES},
    {"cs", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES},
    {"cpu-migrations", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS},
    {"migrations", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS},
    {"minor-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MIN},
    {"major-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MAJ},
    {"alignment-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_ALIGNMENT_FAULTS},
    {"emulation-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_EMULATION_FAULTS},
};

static const struct {
    const char *name;
    uint32_t id;
} caches[] = {
    {"L1-dcache", PERF_COUNT_HW_CACHE_L1D}, {"L1-icache", PERF_COUNT_HW_CACHE_L1I},
    {"LLC", PERF_COUNT_HW_CACHE_LL},        {"dTLB", PERF_COUNT_HW_CACHE_DTLB},
    {"iTLB", PERF_COUNT_HW_CACHE_ITLB},     {"branch", PERF_COUNT_HW_CACHE_BPU},
    {"node", PERF_COUNT_HW_CACHE_NODE},
};

/* "-<op>s" (accesses) or "-<op>-misses" after a cache name; the plural of prefetch is -es. */
static const struct {
    const char *suffix;
    uint32_t op, result;
} cache_ops[] = {
    {"-loads", PERF_COUNT_HW_CACHE_OP_READ, PERF_COUNT_HW_CACHE_RESULT_ACCESS},
    {"-load-misses", PERF_COUNT_HW_CACHE_OP_READ, PERF_COUNT_HW_CACHE_RESULT_MISS},
    {"-stores", PERF_COUNT_HW_CACHE_OP_WRITE, PERF_COUNT_HW_CACHE_RESULT_ACCESS},
    {"-store-misses", PERF_COUNT_HW_CACHE_OP_WRITE, PERF_COUNT_HW_CACHE_RESULT_MISS},
    {"-prefetches", PERF_COUNT_HW_CACHE_OP_PREFETCH, PERF_COUNT_HW_CACHE_RESULT_ACCESS},
    {"-prefetch-misses", PERF_COUNT_HW_CACHE_OP_PREFETCH, PERF_COUNT_HW_CACHE_RESULT_MISS},
};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* One token (n bytes, no comma) into ev; 0 or -1 when the name is unknown. */
static int parse_one(const char *tok, size_t n, struct ml_pmu_event *ev)
{
    if (n == 0 || n >= ML_EVENT_NAME)
        return -1;
    memcpy(ev->name, tok, n);
    ev->name[n] = 0;
    for (size_t i = 0; i < N_OF(generic); i++)
        if (!strcasecmp(ev->name, generic[i].name)) {
            ev->type = generic[i].type;
            ev->config = generic[i].config;
            return 0;
        }
    if (tok[0] == 'r' && n >= 2 && n <= 17) {
        uint64_t v = 0;
        size_t i;
        for (i = 1; i < n && hexval(tok[i]) >= 0; i++)
            v = v << 4 | (uint64_t)hexval(tok[i]);
        if (i == n) {
            ev->type = PERF_TYPE_RAW;
            ev->config = v;
            return 0;
        }
    }
    for (size_t c = 0; c < N_OF(caches); c++) {
        size_t cl = strlen(caches[c].name);
        if (n <= cl || strncasecmp(ev->name, caches[c].name, cl))
            continue;
        for (size_t o = 0; o < N_OF(cache_ops); o++)
            if (!strcasecmp(ev->name + cl, cache_ops[o].suffix)) {
                ev->type = PERF_TYPE_HW_CACHE;
                ev->config = caches[c].id | (uint64_t)cache_ops[o].op << 8 |
                             (uint64_t)cache_ops[o].result << 16;
                return 0;
            }
    }
    return -1;
}

int ml_pmu_parse(const char *list, struct ml_pmu_event *out, int max, char *bad, size_t badlen)
{
    const char *p = list;
    int n = 0;

    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (n == max || parse_one(p, len, &out[n])) {
            if (badlen) {
                size_t k = len < badlen - 1 ? len : badlen - 1;
                memcpy(bad, p, k);
                bad[k] = 0;
            }
            return n == max ? -2 : -1;
        }
        n++;
        if (!comma)
            return n;
        p = comma + 1;
    }
}

int64_t ml_pmu_sext(uint64_t raw, uint32_t width)
{
    uint32_t shift;

    if (width == 0 || width >= 64)
        return (int64_t)raw;
    shift = 64 - width;
    /* Shift the sign bit to bit 63 and back; unsigned first, so no shift of a negative number. */
    return (int64_t)(raw << shift) >> shift;
}

uint64_t ml_pmu_time_delta(uint64_t cyc, uint16_t shift, uint32_t mult, uint64_t offset)
{
    uint64_t quot = cyc >> shift;
    uint64_t rem = cyc & (((uint64_t)1 << shift) - 1);

    return offset + quot * mult + ((rem * mult) >> shift);
}

uint64_t ml_pmu_scale(uint64_t dv, uint64_t de, uint64_t dr)
{
    if (dr == 0)
        return de == 0 ? dv : 0;
    if (de == dr)
        return dv;
    return (uint64_t)((unsigned __int128)dv * de / dr);
}
