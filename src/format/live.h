/* Live-view publication (/dev/shm/memlens.<pid>.<token>): where a profiled process keeps its
 * counters. */
#ifndef ML_FORMAT_LIVE_H
#define ML_FORMAT_LIVE_H

#include <stdint.h>

/*
 * A profiled process publishes, when its runtime starts, one small file
 * ML_LIVE_DIR "/memlens.<pid>.<token>" (<token>: the process's start token,
 * 16 lowercase hex digits; created O_EXCL | O_NOFOLLOW through a temporary
 * name and renamed without replacing anything, mode 0600, removed at exit)
 * holding a struct ml_live_header: nothing more. The counters stay where they are, in the
 * process's own memory; `memlens top` reads them with process_vm_readv, which
 * needs the same permission as ptrace. The header says where the runtime's
 * state is and how its structs are laid out (field offsets), so that a
 * memlens top built from another revision reads them without knowing the
 * runtime's C declarations.
 *
 * /dev/shm is world-writable, so a reader trusts a file only when it is a
 * regular file owned by the process's uid (or root), its name's token is the
 * header's, and the header's pid and start_time are those of the process in
 * /proc/<pid>/stat. The same header also lives in the process's memory at
 * self_addr; a reader compares the two: a file left behind by a killed process
 * whose pid was reused, or by a process that has since called exec, does not
 * match.
 *
 * Version rule: bump ML_LIVE_VERSION when the meaning of a field or the type
 * of a published struct field changes (u32 counts, u64 ticks, 64-bit
 * pointers, as documented beside enum ml_live_field). Adding a field to the
 * end of enum ml_live_field does not bump it: nfields tells readers how many
 * offsets follow, and they require only those they use.
 */
#define ML_LIVE_DIR     "/dev/shm"
#define ML_LIVE_MAGIC   "MLLIVE\0\n"
#define ML_LIVE_VERSION 2 /* 2: token and start_time; the name carries the token */

/* Offsets published in ml_live_header.off[], one per struct field the reader follows. */
enum ml_live_field {
    /* struct ml_rt (src/runtime/rt.h) */
    ML_LF_RT_MODS,     /* pointer to the first module */
    ML_LF_RT_NMODS,    /* u32 */
    ML_LF_RT_NUNITS,   /* u32: units of all modules */
    ML_LF_RT_NAMES,    /* array of char pointers, region names by global id */
    ML_LF_RT_NREGIONS, /* u32 */
    ML_LF_RT_THREADS,  /* pointer to the first thread record */
    ML_LF_RT_TICK0,    /* u64: region clock at start */
    ML_LF_RT_MONO0,    /* u64: CLOCK_MONOTONIC ns at start */
    /* struct ml_rt_module (src/runtime/abi.h) */
    ML_LF_MOD_NEXT,       /* pointer */
    ML_LF_MOD_NUNITS,     /* u32 */
    ML_LF_MOD_NREGSET,    /* u32: words of regsets */
    ML_LF_MOD_NREGIONS,   /* u32 */
    ML_LF_MOD_REGSETS,    /* pointer to u32 words: n, local ids..., n, ... */
    ML_LF_MOD_UNITS,      /* pointer to struct ml_rt_unit[nunits] */
    ML_LF_MOD_REGION_IDS, /* pointer to u32[nregions]: local -> global id */
    /* struct ml_rt_unit */
    ML_LF_UNIT_SIZE,   /* sizeof */
    ML_LF_UNIT_KIND,   /* u32, enum ml_unit_kind */
    ML_LF_UNIT_REGSET, /* u32: word offset into the module's regsets */
    ML_LF_UNIT_FACTS,  /* u64[nfacts], enum ml_fact order */
    /* struct ml_thread_rec (src/runtime/rt.h) */
    ML_LF_THR_NEXT,  /* pointer */
    ML_LF_THR_TID,   /* u32 */
    ML_LF_THR_INDEX, /* u32 */
    ML_LF_THR_DONE,  /* int: the thread exited; its counts are in snap */
    ML_LF_THR_NMODS, /* u32: modules whose tls[] entry is set */
    ML_LF_THR_TLS,   /* pointer to pointers: per module, the live u64 counters */
    ML_LF_THR_SNAP,  /* pointer to u64[snap_units]: all modules' counts at thread exit */
    ML_LF_THR_SNAPN, /* u32 */
    ML_LF_THR_RS,    /* pointer to struct ml_rstate[max_regions], or NULL */
    /* struct ml_rstate */
    ML_LF_RS_SIZE,    /* sizeof */
    ML_LF_RS_ENTRIES, /* u64: completed outermost executions */
    ML_LF_RS_TICKS,   /* u64: ticks of those executions */
    ML_LF_RS_START,   /* u64: tick of the open execution's entry */
    ML_LF_RS_DEPTH,   /* u32: nesting depth, 0 = not open */
    /* struct ml_rt, continued */
    ML_LF_RT_SAMPLE, /* u32: MEMLENS_SAMPLE, 1 in N top-level executions measured (0, 1 = all) */
    /*
     * The exited-threads record (a done thread record with tid 0), or NULL:
     * threads that leave the list were folded into it, with all their counts
     * (docs/regions.md, "Threads").
     */
    ML_LF_RT_ACC,     /* pointer */
    ML_LF_RT_NFOLDED, /* u64: exited threads summed in it */
    ML_LF_RT_RECSEQ,  /* u64: odd while a thread record or acc changes (a seqlock) */
    ML_LIVE_NFIELDS
};

struct ml_live_header {
    char magic[8];
    uint32_t version;
    uint32_t header_size; /* bytes of this struct as the runtime knows it */
    uint64_t cookie;      /* random per process; the file and the memory copy must agree */
    uint64_t self_addr;   /* address of this header in the process */
    uint64_t rt_addr;     /* address of the runtime's struct ml_rt */
    uint32_t pid;
    uint32_t clock;       /* enum ml_clock of the region clock */
    uint32_t ptr_size;    /* sizeof(void *) in the process */
    uint32_t nfacts;      /* ML_NFACTS of the runtime */
    uint32_t max_regions; /* entries of each thread's ml_rstate array */
    uint32_t nfields;     /* offsets that follow */
    uint64_t token;       /* the process's start token, as in the file name */
    uint64_t start_time;  /* field 22 of /proc/<pid>/stat: clock ticks after boot */
    uint32_t off[ML_LIVE_NFIELDS];
};

/*
 * Field 22 (starttime) of a /proc/<pid>/stat line, or 0 when the line is not
 * one. The command name (field 2) may hold spaces and parentheses: fields are
 * counted after its last ')'.
 */
static inline uint64_t ml_live_stat_start(const char *line)
{
    const char *p = line, *q;
    uint64_t v = 0;
    int field = 2;

    for (q = line; *q; q++)
        if (*q == ')')
            p = q;
    if (*p != ')')
        return 0;
    for (p++; *p && field < 22; p++)
        if (*p == ' ')
            field++;
    while (*p >= '0' && *p <= '9')
        v = v * 10 + (uint64_t)(*p++ - '0');
    return v;
}

#endif
