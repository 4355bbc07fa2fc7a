/* memlens bb: steady-state throughput of x86-64 basic blocks (one block, or a CSV batch). */
#include "cli/cli.h"
#include "format/csv.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bb/bb.h"

static const char bb_usage[] =
    "usage: memlens bb [<options>] <hex | assembly | file.csv>\n"
    "\n"
    "Measures the steady-state throughput (core cycles per iteration) of an x86-64 basic\n"
    "block, BHive-style: the block runs unrolled in a ptrace'd child with every page but the\n"
    "harness unmapped; each page it touches is mapped onto one shared page and the run\n"
    "restarts; throughput = (cycles(U) - cycles(u)) / (U - u).\n"
    "\n"
    "Input (detected in this order, or forced with --hex/--asm):\n"
    "  file.csv             batch: one block per line, 'hex[,anything]'; writes CSV\n"
    "                       (a regular file: FIFOs and devices are refused)\n"
    "  hex                  machine code, e.g. 4801d8 or '48 01 d8'\n"
    "  assembly             e.g. 'add %rax, %rbx; imul %rcx, %rcx' (';' separates lines)\n"
    "  --hex, --asm         force the kind of the argument\n"
    "  --intel              assembly is in Intel syntax (default AT&T)\n"
    "  --llvm-mc            assemble with llvm-mc-14 instead of as\n"
    "\n"
    "Measurement:\n"
    "  --reps <n>           timing pairs (u then U, back to back) per round (default 32,\n"
    "                       max 64)\n"
    "  --attempts <n>       rounds of --reps pairs tried until one is ok (default 10)\n"
    "  --min-agree <n>      quietest pairs (smallest u+U) averaged; 'ok' when all lie\n"
    "                       within the tolerance of the quietest one (default 8)\n"
    "  --tolerance <pct>    spread allowed above the quietest pair (default 1)\n"
    "  -u <n>, -U <n>       unroll factors u < U (default: automatic, see next two)\n"
    "  --code-budget <b>    bytes of unrolled code for U (default 4096; L1I must hold it)\n"
    "  --max-unroll <n>     largest automatic U (default 200); u = U/2\n"
    "  --work <n>           instructions per timing; the code is run n/(U*insns) times\n"
    "                       per timing to dwarf the TSC's granularity (default 65536)\n"
    "  --method <m>         auto (default), tsc, or pmu (fails without a PMU)\n"
    "  --max-faults <n>     pages mapped before giving up (default 256, 0 = unlimited)\n"
    "  --timeout <ms>       CPU time allowed per block (default 2000)\n"
    "  --no-static-check    run blocks the decoder would refuse (the sandbox still refuses\n"
    "                       every syscall and stops privileged instructions)\n"
    "  --no-trace           skip single-stepping (no addresses, no cross-line/alias flags)\n"
    "\n"
    "Output:\n"
    "  --csv                one CSV row (with header) instead of the report\n"
    "  -v, --verbose        also list mapped pages and recorded accesses\n"
    "  --compare-mca        also run llvm-mca-14 on the block and print its prediction\n"
    "  --mcpu <cpu>         CPU for llvm-mca (default: the host's, or the closest model\n"
    "                       LLVM 14 knows, e.g. znver3 for newer AMD cores)\n"
    "  -o, --output <file>  batch output (resumes when the file already has rows); blocks\n"
    "                       still unclean at the end are measured once more; a regular\n"
    "                       file, not a symbolic link (created with mode 0600)\n"
    "  --limit <n>          batch: stop after n blocks\n"
    "\n"
    "Status of every block: ok, unclean (quietest timings not reproduced), crashed (with the "
    "signal),\n"
    "unsupported (syscall, privileged, branch, undecodable, too long), timeout.\n"
    "Method: pmu (core cycles from perf_event) or tsc (TSC scaled by a ratio calibrated next\n"
    "to each block on a chain of dependent adds). Exit status: 0 when the block is ok (or a\n"
    "batch completes), 1 for any other block status, 128 when the harness cannot run or an\n"
    "output cannot be written.\n"
    "CSV columns: " /* kept in sync with csv_header */
    "hex,throughput,u,u2,method,status,detail,signal,ratio,clean,agree,pages,flags,mca\n";

static const char csv_header[] =
    "hex,throughput,u,u2,method,status,detail,signal,ratio,clean,agree,pages,flags,mca\n";

struct bb_cli {
    struct ml_bb_opts o;
    int force; /* 0 auto, 'h' hex, 'a' asm */
    enum ml_bb_syntax syntax;
    int llvm_mc, csv, verbose, mca;
    const char *mcpu, *output;
    long limit;
};

static unsigned parse_uint(const char *s, const char *opt)
{
    char *end;
    unsigned long v;

    errno = 0;
    v = strtoul(s, &end, 10);
    if (errno || *end || end == s || v > 100000000ul)
        die("invalid value '%s' for %s: expected a non-negative integer", s, opt);
    return (unsigned)v;
}

/* Every row is flushed and checked: a full disk or a closed pipe must not lose rows unseen. */
static void out_check(FILE *f, const char *name)
{
    if (fflush(f) == EOF || ferror(f))
        die("cannot write %s: %s", name, strerror(errno ? errno : EIO));
}

static void flags_text(unsigned f, char *out, size_t len)
{
    snprintf(out, len, "%s%s%s", f & ML_BB_FLAG_CROSS_LINE ? "cross-line" : "",
             (f & ML_BB_FLAG_CROSS_LINE) && (f & ML_BB_FLAG_ALIAS) ? "|" : "",
             f & ML_BB_FLAG_ALIAS ? "alias" : "");
}

static void measure_or_die(const struct bb_cli *c, const uint8_t *code, size_t len,
                           struct ml_bb_result *r)
{
    int err = ml_bb_measure(code, len, &c->o, r);

    if (err == -EPERM)
        die("cannot trace the sandbox: ptrace not permitted (see kernel.yama.ptrace_scope)");
    if (err == -ENODEV)
        die("no PMU: perf_event cannot count cycles here; use --method tsc or auto");
    if (err == -ENOSYS)
        die("cannot install the seccomp filter of the sandbox: %s", strerror(-err));
    if (err < 0)
        die("cannot run the sandbox: %s", strerror(-err));
}

static void csv_row(FILE *f, const char *hex, const struct ml_bb_result *r, int have_mca,
                    double mca)
{
    char flags[32];

    flags_text(r->flags, flags, sizeof(flags));
    fprintf(f, "%s,", hex);
    if (r->status == ML_BB_OK || r->status == ML_BB_UNCLEAN)
        fprintf(f, "%.4f,%u,%u,%s,", r->throughput, r->u, r->u2, ml_bb_method_name(r->method));
    else
        fprintf(f, ",%u,%u,%s,", r->u, r->u2, r->u ? ml_bb_method_name(r->method) : "");
    fprintf(f, "%s,", ml_bb_status_name(r->status));
    ml_csv_str(f, r->detail);
    fprintf(f, ",%d,", r->signal);
    if (r->status == ML_BB_OK || r->status == ML_BB_UNCLEAN)
        fprintf(f, "%.4f,%u/%u,%u/%u,", r->ratio, r->clean[0], r->clean[1], r->agree[0],
                r->agree[1]);
    else
        fputs(",,,", f);
    fprintf(f, "%u,%s,", r->faults, flags);
    if (have_mca)
        fprintf(f, "%.2f", mca);
    fputc('\n', f);
}

static void report(const struct bb_cli *c, const uint8_t *code, size_t len,
                   const struct ml_bb_result *r, int have_mca, double mca)
{
    char hex[2 * ML_BB_MAX_LEN + 1], flags[32];

    ml_bb_hex_format(code, len, hex);
    printf("block     %s (%u instruction%s, %zu bytes)\n", hex, r->n_insns,
           r->n_insns == 1 ? "" : "s", len);
    printf("status    %s", ml_bb_status_name(r->status));
    if (r->status == ML_BB_CRASHED && r->signal && strncmp(r->detail, "SIG", 3))
        printf(" (SIG%s)", sigabbrev_np(r->signal) ? sigabbrev_np(r->signal) : "?");
    if (r->detail[0])
        printf(": %s", r->detail);
    putchar('\n');
    if (r->status == ML_BB_OK || r->status == ML_BB_UNCLEAN) {
        printf("cycles    %.3f per iteration\n", r->throughput);
        if (r->method == ML_BB_METHOD_TSC)
            printf("method    tsc (%.4f tsc ticks per core cycle, from a dependent add chain of"
                   " %u and %u adds per pass, matched to the block)\n",
                   r->ratio, r->calib[0], r->calib[1]);
        else
            printf("method    pmu (core cycles from perf_event)\n");
        printf("unroll    u=%u U=%u; clean timings %u and %u of %u, quiet pairs %u and %u"
               " (attempt %u)\n",
               r->u, r->u2, r->clean[0], r->clean[1], c->o.reps, r->agree[0], r->agree[1],
               r->attempts);
    }
    if (r->status != ML_BB_UNSUPPORTED || r->faults) {
        printf("pages     %u mapped", r->faults);
        if (c->verbose)
            for (unsigned i = 0; i < r->faults && i < ML_BB_MAX_PAGES; i++)
                printf(" 0x%llx", (unsigned long long)r->pages[i]);
        putchar('\n');
    }
    if (r->status == ML_BB_OK || r->status == ML_BB_UNCLEAN) {
        flags_text(r->flags, flags, sizeof(flags));
        printf("flags     %s\n", flags[0] ? flags : "none");
    }
    for (unsigned j = 0; c->verbose && j < r->n_jobs; j++) {
        static const char *const jobs[] = {"block u", "block U", "calib u", "calib U"};

        printf("timings   %s:", jobs[j]);
        for (unsigned i = 0; i < c->o.reps; i++)
            printf(r->timings[j][i] < 0 ? " (%.1f)" : " %.1f",
                   r->timings[j][i] < 0 ? -r->timings[j][i] : r->timings[j][i]);
        putchar('\n');
    }
    if (c->verbose)
        for (unsigned i = 0; i < r->n_accesses; i++)
            printf("access    insn %u %s %u bytes at 0x%llx\n", r->accesses[i].insn,
                   r->accesses[i].write ? "write" : "read", r->accesses[i].size,
                   (unsigned long long)r->accesses[i].addr);
    if (c->mca) {
        if (have_mca)
            printf("llvm-mca  %.3f cycles per iteration (-mcpu=%s)\n", mca,
                   c->mcpu ? c->mcpu : ml_bb_mca_cpu());
        else
            printf("llvm-mca  no prediction (llvm-mca-14 missing or rejected the block)\n");
    }
}

static int run_one(const struct bb_cli *c, const char *arg)
{
    uint8_t code[ML_BB_MAX_LEN];
    size_t len = 0;
    struct ml_bb_result r;
    double mca = 0;
    int have_mca = 0, err = -EINVAL;

    if (c->force != 'a')
        err = ml_bb_hex_parse(arg, code, sizeof(code), &len);
    if (err == -E2BIG)
        die("block '%.20s...' is longer than %d bytes", arg, ML_BB_MAX_LEN);
    if (err && c->force == 'h')
        die("invalid hex block '%s': expected pairs of hex digits", arg);
    if (err) {
        char msg[256];

        err =
            ml_bb_assemble(arg, c->syntax, c->llvm_mc, code, sizeof(code), &len, msg, sizeof(msg));
        if (err == -ENOENT)
            die("cannot assemble: '%s' not found; install binutils or llvm-14",
                c->llvm_mc ? "llvm-mc-14" : "as");
        if (err)
            die("cannot assemble '%s': %s", arg, msg[0] ? msg : strerror(-err));
    }
    measure_or_die(c, code, len, &r);
    if (c->mca)
        have_mca = ml_bb_mca(code, len, c->mcpu, &mca) == 0;
    if (c->csv) {
        char hex[2 * ML_BB_MAX_LEN + 1];

        ml_bb_hex_format(code, len, hex);
        fputs(csv_header, stdout);
        csv_row(stdout, hex, &r, have_mca, mca);
    } else
        report(c, code, len, &r, have_mca, mca);
    out_check(stdout, "to standard output");
    return r.status == ML_BB_OK ? 0 : 1;
}

/* The temporary output of retry_unclean, removed when a signal ends the run. */
static char *volatile tmp_path;

/*
 * SIGINT, SIGTERM, SIGHUP: the sandbox and the temporary file go with us (the sandbox would
 * die with its parent anyway: this only makes it immediate). The signal then ends memlens
 * as it would have.
 */
static void on_signal(int sig)
{
    char *tmp = tmp_path;

    ml_bb_abort();
    if (tmp)
        unlink(tmp);
    raise(sig); /* SA_RESETHAND restored the default action; delivered on return */
}

static void catch_signals(void)
{
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    struct sigaction sa, old;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN) /* nohup */
            sigaction(sigs[i], &sa, NULL);
}

/*
 * Opens a file named on the command line as a regular file: a FIFO, a device or a socket
 * would block or never end (/dev/zero has no last line), so they are refused before any
 * read; opening never blocks (O_NONBLOCK, cleared after the check).
 */
static FILE *open_regular(const char *path, int flags, const char *mode)
{
    struct stat st;
    FILE *f;
    int fd = open(path, flags | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0600);

    if (fd < 0 && errno == ELOOP && (flags & O_NOFOLLOW))
        die("'%s' is a symbolic link: name the file itself", path);
    if (fd < 0)
        die("cannot open '%s': %s", path, strerror(errno));
    if (fstat(fd, &st))
        die("cannot stat '%s': %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        die("'%s' is not a regular file: batch input and output must be files", path);
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK))
        die("cannot use '%s': %s", path, strerror(errno));
    f = fdopen(fd, mode);
    if (!f)
        die("cannot open '%s': %s", path, strerror(errno));
    return f;
}

/*
 * Resuming: rows are written in input order and flushed one by one, so the rows already in
 * the output are a prefix of the input. A torn last row (no newline) is cut off. Leaves f
 * positioned at the end of the good rows, ready for appending.
 */
static long resume_rows(FILE *f, const char *path, char *last_hex, size_t len)
{
    struct ml_bb_resume *rs = malloc(sizeof(*rs));
    long rows;
    int err;

    if (!rs)
        die("out of memory");
    err = ml_bb_resume_scan(f, csv_header, rs);
    if (err == -EINVAL)
        die("'%s' is not a memlens bb output (header or rows differ); choose a new file", path);
    if (err)
        die("cannot read '%s': %s", path, strerror(-err));
    if (ftruncate(fileno(f), rs->end) || fseek(f, rs->end, SEEK_SET))
        die("cannot truncate '%s': %s", path, strerror(errno));
    snprintf(last_hex, len, "%s", rs->last);
    rows = rs->rows;
    free(rs);
    return rows;
}

static void progress(long done, long total, long ok)
{
    int width = 40, fill = total ? (int)(done * width / total) : 0;

    fprintf(stderr, "\r[%.*s%*s] %ld/%ld ok %ld", fill, "########################################",
            width - fill, "", done, total, ok);
    if (done == total)
        fputc('\n', stderr);
    fflush(stderr);
}

/*
 * Noise on a shared host comes in bursts of up to seconds, longer than a block's attempts:
 * of 55 blocks unclean in one full run, 49 were ok when measured again a minute later. So
 * the rows still unclean at the end of a batch are measured once more, and the output is
 * rewritten atomically (a new temporary file, created exclusively next to it, renamed over
 * it). Idempotent: an interrupted pass leaves the complete first-pass rows, and a resumed
 * batch runs the pass again.
 */
static void retry_unclean(const struct bb_cli *c)
{
    char *tmp, hex[2 * ML_BB_MAX_LEN + 8], status[16], mca[64];
    char *line = malloc(ML_BB_LINE_MAX);
    FILE *in = open_regular(c->output, O_RDONLY | O_NOFOLLOW, "r"), *out;
    struct stat st;
    long n = 0, fixed = 0;
    ssize_t len_line;
    int fd, cut;

    if (!line || asprintf(&tmp, "%s.XXXXXX", c->output) < 0)
        die("out of memory");
    fd = mkostemp(tmp, O_CLOEXEC); /* O_EXCL, mode 0600: never another file */
    if (fd < 0)
        die("cannot create a temporary file next to '%s': %s", c->output, strerror(errno));
    tmp_path = tmp;
    if (fstat(fileno(in), &st) == 0)
        fchmod(fd, st.st_mode & 07777);
    out = fdopen(fd, "w");
    if (!out)
        die("cannot write '%s': %s", tmp, strerror(errno));
    while ((len_line = ml_bb_line_read(in, line, ML_BB_LINE_MAX, &cut)) > 0) {
        uint8_t code[ML_BB_MAX_LEN];
        struct ml_bb_result r;
        size_t len;

        if (ml_bb_csv_field(line, 5, status, sizeof(status)) || strcmp(status, "unclean") ||
            ml_bb_csv_field(line, 0, hex, sizeof(hex)) ||
            ml_bb_hex_parse(hex, code, sizeof(code), &len)) {
            fputs(line, out);
            continue;
        }
        n++;
        measure_or_die(c, code, len, &r);
        fixed += r.status == ML_BB_OK;
        if (ml_bb_csv_field(line, ML_BB_CSV_FIELDS - 1, mca, sizeof(mca)))
            mca[0] = 0;
        csv_row(out, hex, &r, mca[0] != 0, mca[0] ? strtod(mca, NULL) : 0);
    }
    if (len_line < 0)
        die("cannot read '%s': %s", c->output, strerror(-(int)len_line));
    free(line);
    fclose(in);
    if (fflush(out) == EOF || ferror(out))
        die("cannot write '%s': %s", tmp, strerror(errno ? errno : EIO));
    if (fsync(fileno(out)) || fclose(out) || rename(tmp, c->output))
        die("cannot replace '%s': %s", c->output, strerror(errno));
    tmp_path = NULL;
    free(tmp);
    if (n)
        fprintf(stderr, "memlens: measured %ld unclean block%s again: %ld now ok\n", n,
                n == 1 ? "" : "s", fixed);
}

static int run_batch(const struct bb_cli *c, const char *path)
{
    FILE *in = open_regular(path, O_RDONLY, "r"), *out = stdout;
    char *line = malloc(ML_BB_LINE_MAX), hex[2 * ML_BB_MAX_LEN + 8], last[2 * ML_BB_MAX_LEN + 8];
    const char *out_name = "to standard output";
    char *quoted = NULL;
    long lineno = 0, block = 0, skip = 0, total = 0, done = 0, ok = 0;
    int tty = isatty(2), cut;
    ssize_t n;

    if (!line)
        die("out of memory");
    /* count blocks first, for the progress bar */
    while ((n = ml_bb_line_read(in, line, ML_BB_LINE_MAX, &cut)) > 0) {
        ml_bb_csv_field(line, 0, hex, sizeof(hex));
        if ((hex[0] && hex[0] != '#') || cut || strlen(line) != (size_t)n)
            total++;
    }
    if (n < 0)
        die("cannot read '%s': %s", path, strerror(-(int)n));
    rewind(in);
    if (c->output) {
        out = open_regular(c->output, O_RDWR | O_CREAT | O_NOFOLLOW, "r+");
        if (asprintf(&quoted, "'%s'", c->output) < 0)
            die("out of memory");
        out_name = quoted;
        skip = resume_rows(out, c->output, last, sizeof(last));
        if (ftell(out) == 0)
            fputs(csv_header, out);
        if (skip)
            fprintf(stderr, "memlens: resuming '%s' after %ld blocks\n", c->output, skip);
    } else
        fputs(csv_header, out);
    out_check(out, out_name);
    while ((n = ml_bb_line_read(in, line, ML_BB_LINE_MAX, &cut)) > 0) {
        uint8_t code[ML_BB_MAX_LEN];
        size_t len = 0;
        struct ml_bb_result r;
        double mca = 0;
        int have_mca = 0, err;
        const char *bad;

        lineno++;
        ml_bb_csv_field(line, 0, hex, sizeof(hex));
        bad = cut                         ? "longer than " ML_BB_LINE_TEXT " bytes"
              : strlen(line) != (size_t)n ? "holds a NUL byte"
                                          : NULL;
        if (!bad && (!hex[0] || hex[0] == '#'))
            continue;
        err = ml_bb_hex_parse(hex, code, sizeof(code), &len);
        if (err && !bad && lineno == 1) { /* a header line */
            total--;
            continue;
        }
        block++;
        if (c->limit && block > c->limit)
            break;
        if (block <= skip) {
            if (block == skip && strcmp(hex, last))
                die("'%s' does not continue '%s' (row %ld differs); choose a new output", c->output,
                    path, skip);
            done++;
            continue;
        }
        memset(&r, 0, sizeof(r));
        if (err || bad) {
            r.status = ML_BB_UNSUPPORTED;
            if (bad)
                snprintf(r.detail, sizeof(r.detail), "line %ld %s", lineno, bad);
            else
                snprintf(r.detail, sizeof(r.detail), "not hex (line %ld)", lineno);
        } else {
            measure_or_die(c, code, len, &r);
            if (c->mca)
                have_mca = ml_bb_mca(code, len, c->mcpu, &mca) == 0;
        }
        csv_row(out, hex, &r, have_mca, mca);
        out_check(out, out_name);
        done++;
        ok += r.status == ML_BB_OK;
        if (tty)
            progress(done, c->limit && c->limit < total ? c->limit : total, ok);
    }
    if (n < 0)
        die("cannot read '%s': %s", path, strerror(-(int)n));
    free(line);
    fclose(in);
    if (out != stdout) {
        out_check(out, out_name);
        if (fclose(out))
            die("cannot write %s: %s", out_name, strerror(errno));
        retry_unclean(c);
    }
    free(quoted);
    return 0;
}

int cmd_bb(int argc, char **argv)
{
    enum {
        O_HEX = 256,
        O_ASM,
        O_INTEL,
        O_LLVM_MC,
        O_REPS,
        O_AGREE,
        O_TOL,
        O_METHOD,
        O_FAULTS,
        O_ATTEMPTS,
        O_BUDGET,
        O_MAXU,
        O_WORK,
        O_TIMEOUT,
        O_NOCHECK,
        O_NOTRACE,
        O_CSV,
        O_MCA,
        O_MCPU,
        O_LIMIT
    };
    static const struct option longopts[] = {{"help", no_argument, 0, 'h'},
                                             {"hex", no_argument, 0, O_HEX},
                                             {"asm", no_argument, 0, O_ASM},
                                             {"intel", no_argument, 0, O_INTEL},
                                             {"llvm-mc", no_argument, 0, O_LLVM_MC},
                                             {"reps", required_argument, 0, O_REPS},
                                             {"min-agree", required_argument, 0, O_AGREE},
                                             {"tolerance", required_argument, 0, O_TOL},
                                             {"method", required_argument, 0, O_METHOD},
                                             {"max-faults", required_argument, 0, O_FAULTS},
                                             {"timeout", required_argument, 0, O_TIMEOUT},
                                             {"attempts", required_argument, 0, O_ATTEMPTS},
                                             {"code-budget", required_argument, 0, O_BUDGET},
                                             {"max-unroll", required_argument, 0, O_MAXU},
                                             {"work", required_argument, 0, O_WORK},
                                             {"no-static-check", no_argument, 0, O_NOCHECK},
                                             {"no-trace", no_argument, 0, O_NOTRACE},
                                             {"csv", no_argument, 0, O_CSV},
                                             {"verbose", no_argument, 0, 'v'},
                                             {"compare-mca", no_argument, 0, O_MCA},
                                             {"mcpu", required_argument, 0, O_MCPU},
                                             {"output", required_argument, 0, 'o'},
                                             {"limit", required_argument, 0, O_LIMIT},
                                             {0, 0, 0, 0}};
    struct bb_cli c;
    struct stat st;
    int opt;

    memset(&c, 0, sizeof(c));
    ml_bb_opts_init(&c.o);
    optind = 1;
    while ((opt = getopt_long(argc, argv, "hu:U:vo:", longopts, NULL)) != -1) {
        switch (opt) {
        case 'h':
            fputs(bb_usage, stdout);
            return 0;
        case O_HEX:
            c.force = 'h';
            break;
        case O_ASM:
            c.force = 'a';
            break;
        case O_INTEL:
            c.syntax = ML_BB_INTEL;
            break;
        case O_LLVM_MC:
            c.llvm_mc = 1;
            break;
        case O_REPS:
            c.o.reps = parse_uint(optarg, "--reps");
            break;
        case O_AGREE:
            c.o.min_agree = parse_uint(optarg, "--min-agree");
            break;
        case O_TOL: {
            char *end;
            c.o.tolerance = strtod(optarg, &end) / 100;
            if (*end || end == optarg || c.o.tolerance < 0 || c.o.tolerance > 1)
                die("invalid value '%s' for --tolerance: expected a percentage 0..100", optarg);
            break;
        }
        case 'u':
            c.o.u = parse_uint(optarg, "-u");
            break;
        case 'U':
            c.o.u2 = parse_uint(optarg, "-U");
            break;
        case O_METHOD:
            if (!strcmp(optarg, "auto"))
                c.o.method = ML_BB_METHOD_AUTO;
            else if (!strcmp(optarg, "tsc"))
                c.o.method = ML_BB_METHOD_TSC;
            else if (!strcmp(optarg, "pmu"))
                c.o.method = ML_BB_METHOD_PMU;
            else
                die("invalid method '%s': expected auto, tsc or pmu", optarg);
            break;
        case O_FAULTS:
            c.o.max_faults = parse_uint(optarg, "--max-faults");
            break;
        case O_ATTEMPTS:
            c.o.attempts = parse_uint(optarg, "--attempts");
            break;
        case O_BUDGET:
            c.o.code_budget = parse_uint(optarg, "--code-budget");
            break;
        case O_MAXU:
            c.o.max_unroll = parse_uint(optarg, "--max-unroll");
            break;
        case O_WORK:
            c.o.work = parse_uint(optarg, "--work");
            break;
        case O_TIMEOUT:
            c.o.timeout_ms = parse_uint(optarg, "--timeout");
            break;
        case O_NOCHECK:
            c.o.static_check = 0;
            break;
        case O_NOTRACE:
            c.o.trace = 0;
            break;
        case O_CSV:
            c.csv = 1;
            break;
        case 'v':
            c.verbose = 1;
            break;
        case O_MCA:
            c.mca = 1;
            break;
        case O_MCPU:
            c.mcpu = optarg;
            break;
        case 'o':
            c.output = optarg;
            break;
        case O_LIMIT:
            c.limit = parse_uint(optarg, "--limit");
            break;
        default:
            usage(bb_usage);
        }
    }
    if (optind != argc - 1)
        usage(bb_usage);
    if (c.o.reps == 0 || c.o.reps > ML_BB_MAX_REPS)
        die("invalid value %u for --reps: expected 1..%d", c.o.reps, ML_BB_MAX_REPS);
    if (c.o.min_agree > c.o.reps)
        die("--min-agree %u exceeds --reps %u", c.o.min_agree, c.o.reps);
    if ((c.o.u || c.o.u2) && !(c.o.u && c.o.u2 && c.o.u < c.o.u2))
        die("unroll factors need both -u and -U with u < U (got %u and %u)", c.o.u, c.o.u2);
    if (c.o.timeout_ms == 0)
        die("invalid value 0 for --timeout: expected milliseconds > 0");
    catch_signals();
    /* a file names a batch; a FIFO or a device would never end, a directory is no block */
    if (!c.force && stat(argv[optind], &st) == 0 && !S_ISDIR(st.st_mode))
        return run_batch(&c, argv[optind]);
    if (c.output)
        die("--output applies to batch runs: '%s' is not a file", argv[optind]);
    return run_one(&c, argv[optind]);
}
