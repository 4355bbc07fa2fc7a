/* Basic-block throughput harness: runs an x86-64 block unrolled in a ptrace'd sandbox and times it.
 */
#ifndef ML_BB_H
#define ML_BB_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* Every block ends with exactly one of these; none is ever left unset. */
enum ml_bb_status {
    ML_BB_OK,          /* measured: the quietest timing pair was reproduced min_agree times */
    ML_BB_UNCLEAN,     /* ran, but the quietest pair was reproduced fewer than min_agree times */
    ML_BB_CRASHED,     /* a signal other than a mappable page fault (see signal, detail) */
    ML_BB_UNSUPPORTED, /* syscall, privileged instruction, branch, undecodable, too long */
    ML_BB_TIMEOUT,     /* exceeded the CPU-time limit */
};

enum ml_bb_method {
    ML_BB_METHOD_AUTO, /* pmu when perf_event gives core cycles, else tsc */
    ML_BB_METHOD_TSC,  /* TSC ticks scaled by a ratio calibrated next to the block */
    ML_BB_METHOD_PMU,  /* core cycles from perf_event */
};

/* Flags from the addresses recorded while single-stepping the block after mapping. */
#define ML_BB_FLAG_CROSS_LINE 0x1u /* an access straddles a 64-byte cache line */
#define ML_BB_FLAG_ALIAS      0x2u /* two accesses on different pages share page offsets */

/* Largest block accepted, in bytes: two copies of it must fit the unroll budget. */
#define ML_BB_MAX_LEN      4096
#define ML_BB_MAX_REPS     64
#define ML_BB_MAX_ACCESSES 64
#define ML_BB_MAX_PAGES    256

struct ml_bb_opts {
    unsigned reps;        /* timing pairs (u then U), 1..ML_BB_MAX_REPS (default 32) */
    unsigned min_agree;   /* quietest pairs that must agree, <= reps (default 8) */
    double tolerance;     /* their spread above the quietest pair's total (default 0.01) */
    unsigned u, u2;       /* unroll factors, u < u2; 0 = choose from code_budget */
    unsigned code_budget; /* bytes of unrolled code for the larger factor (default 4096) */
    unsigned max_unroll;  /* cap on the larger automatic factor (default 200) */
    unsigned work;        /* instructions per timing: passes = work / (U * insns) (65536) */
    enum ml_bb_method method;
    unsigned max_faults; /* page faults mapped before giving up (default 256; 0 = no limit) */
    unsigned timeout_ms; /* CPU time of the sandbox per block (default 2000) */
    unsigned attempts;   /* rounds of reps timings until one agrees (default 10) */
    int static_check;    /* refuse branches/syscalls/privileged before running (default 1) */
    int trace;           /* single-step two iterations to record addresses (default 1) */
};

struct ml_bb_access {
    uint64_t addr;
    uint16_t size;
    uint8_t write;
    uint8_t insn; /* index of the instruction in the block */
};

struct ml_bb_result {
    enum ml_bb_status status;
    int signal;      /* for ML_BB_CRASHED; 0 otherwise */
    char detail[96]; /* short reason, e.g. "syscall (seccomp)", "fault limit" */
    enum ml_bb_method method;
    double throughput; /* core cycles per iteration (valid for ok) */
    double ratio;      /* TSC ticks per core cycle (tsc method), 1 for pmu */
    unsigned calib[2]; /* tsc: adds per pass of the calibration chain, matched to u and U */
    unsigned u, u2;
    unsigned clean[2]; /* per factor: clean timings */
    unsigned agree[2]; /* pairs within tolerance of the quietest: block, calibration (tsc) */
    unsigned attempts; /* rounds of timings used */
    unsigned n_insns;
    /* per job (block u/U, then calibration u/U when tsc) and timing: ticks or cycles per
       pass, negative when the timing was not clean */
    unsigned n_jobs;
    double timings[4][ML_BB_MAX_REPS];
    unsigned faults; /* pages mapped */
    uint64_t pages[ML_BB_MAX_PAGES];
    unsigned flags; /* ML_BB_FLAG_* */
    unsigned n_accesses;
    struct ml_bb_access accesses[ML_BB_MAX_ACCESSES];
};

void ml_bb_opts_init(struct ml_bb_opts *o);
const char *ml_bb_status_name(enum ml_bb_status s);
const char *ml_bb_method_name(enum ml_bb_method m);

/*
 * Measures one block. Returns 0 with r->status set for every outcome of the block itself
 * (crashes included); negative errno only when the harness cannot run (fork, memfd, ptrace
 * refused: -EPERM).
 */
int ml_bb_measure(const uint8_t *code, size_t len, const struct ml_bb_opts *o,
                  struct ml_bb_result *r);

/*
 * Kills the sandbox of the measurement in progress, if any (async-signal-safe: for signal
 * handlers of the caller, which then die; the sandbox would also die with its parent).
 */
void ml_bb_abort(void);

/*
 * Decodes the block with Capstone. Returns 0 and the instruction count when it is a
 * runnable basic block, else sets r->status = ML_BB_UNSUPPORTED with a detail and returns
 * 1. Fills r->n_insns either way.
 */
int ml_bb_check(const uint8_t *code, size_t len, struct ml_bb_result *r);

/*
 * Lower envelope of paired timings. a[i] and b[i] were taken back to back (the two unroll
 * factors, or the two calibration factors), so a slow phase of the machine hits both; a
 * negative value marks an unclean timing and drops its pair. Interference only ever adds
 * time, so the pairs with the smallest a+b are the quietest: *ma and *mb are the means of a
 * and b over the k quietest pairs (all clean pairs when fewer). Returns how many clean pairs
 * lie within tol of the smallest sum: the minimum is reproduced when that is at least k.
 */
unsigned ml_bb_envelope(const double *a, const double *b, unsigned n, unsigned k, double tol,
                        double *ma, double *mb);

/* Parses hex bytes (spaces, commas and a 0x prefix allowed). 0, or -EINVAL / -E2BIG. */
int ml_bb_hex_parse(const char *s, uint8_t *buf, size_t cap, size_t *len);
/* Writes the hex form (lowercase, no spaces) of code into out (2*len+1 bytes). */
void ml_bb_hex_format(const uint8_t *code, size_t len, char *out);

enum ml_bb_syntax { ML_BB_ATT, ML_BB_INTEL };
/*
 * Assembles text with 'as' (or 'llvm-mc-14' when use_llvm_mc) and extracts .text.
 * ';' separates instructions. Returns 0, -ENOENT (no assembler), -EINVAL (rejected).
 */
int ml_bb_assemble(const char *text, enum ml_bb_syntax syntax, int use_llvm_mc, uint8_t *buf,
                   size_t cap, size_t *len, char *err, size_t errlen);

/*
 * Runs llvm-mca-14 on the block (disassembled by LLVM) and stores total cycles / iterations
 * in *cycles. mcpu NULL means ml_bb_mca_cpu(). Returns 0, -ENOENT or -EINVAL.
 */
int ml_bb_mca(const uint8_t *code, size_t len, const char *mcpu, double *cycles);

/* The -mcpu given to llvm-mca by default: LLVM's host CPU, or the closest model it knows. */
const char *ml_bb_mca_cpu(void);

/*
 * Batch files. Lines are read with a bound (ML_BB_LINE_MAX bytes, newline included): input
 * and output files may be anything a user points at, and a line without end must not take
 * memory without end.
 */
#define ML_BB_LINE_MAX   16384
#define ML_BB_LINE_TEXT  "16383" /* longest line kept, for messages */
#define ML_BB_CSV_FIELDS 14 /* hex,throughput,u,u2,method,status,detail,signal,... (cmd-bb.c) */

/*
 * Reads the next line of f into buf (at most cap - 1 bytes, NUL-terminated, newline kept);
 * the rest of a longer line is read and dropped, and *cut is set. Returns the bytes in buf,
 * 0 at end of file, -EIO on a read error.
 */
ssize_t ml_bb_line_read(FILE *f, char *buf, size_t cap, int *cut);

/*
 * Field index (from 0) of a CSV line into out: RFC 4180 quotes undone, blanks around an
 * unquoted field trimmed. Returns 0, -ENOENT when the line has fewer fields, -E2BIG when the
 * field was cut to fit cap.
 */
int ml_bb_csv_field(const char *line, unsigned index, char *out, size_t cap);

struct ml_bb_resume {
    long rows;                        /* complete rows after the header */
    long end;                         /* bytes of the header and those rows */
    char last[2 * ML_BB_MAX_LEN + 8]; /* first field of the last complete row */
};

/*
 * Scans an output file of 'memlens bb -o' for resuming: the header line, then complete rows
 * of ML_BB_CSV_FIELDS fields with a known status, then at most a torn row (no newline),
 * which resuming writes again. An empty file has no header and no rows. Returns 0, -EINVAL
 * when the file is not such an output, -EIO on a read error.
 */
int ml_bb_resume_scan(FILE *f, const char *header, struct ml_bb_resume *rs);

/* Record-address analysis (exposed for tests): sets ML_BB_FLAG_* from r->accesses. */
unsigned ml_bb_flags_compute(const struct ml_bb_access *a, unsigned n);

#endif
