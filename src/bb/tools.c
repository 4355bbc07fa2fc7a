/* External tools for bb: assembling text with as or llvm-mc-14, predictions from llvm-mca-14. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <llvm-c/Core.h>
#include <llvm-c/Disassembler.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>

#include "bb/bb.h"

/* A private temporary directory holding the files of one tool invocation. */
struct tmp {
    char dir[64];
    char in[128], out[128], err[128]; /* the tool's input, stdout and stderr */
};

static void tmp_path(const struct tmp *t, const char *name, char *out, size_t len)
{
    snprintf(out, len, "%s/%s", t->dir, name);
}

static void tmp_close(struct tmp *t);

/* Makes the directory and opens its input file (in.s) for writing into *f. */
static int tmp_open(struct tmp *t, FILE **f)
{
    const char *base = getenv("TMPDIR");
    int rc;

    snprintf(t->dir, sizeof(t->dir), "%s/memlens-bb-XXXXXX",
             base && strlen(base) < 32 ? base : "/tmp");
    if (!mkdtemp(t->dir))
        return -errno;
    tmp_path(t, "in.s", t->in, sizeof(t->in));
    tmp_path(t, "out.txt", t->out, sizeof(t->out));
    tmp_path(t, "err.txt", t->err, sizeof(t->err));
    *f = fopen(t->in, "w");
    if (*f)
        return 0;
    rc = -errno;
    tmp_close(t);
    return rc;
}

static void tmp_close(struct tmp *t)
{
    static const char *const names[] = {"in.s", "in.o", "in.bin", "out.txt", "err.txt"};
    char p[128];

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        tmp_path(t, names[i], p, sizeof(p));
        unlink(p);
    }
    rmdir(t->dir);
}

/* Runs argv with stdout and stderr sent to files; returns the exit code, -ENOENT if absent. */
static int spawn(char *const argv[], const char *out, const char *err)
{
    pid_t pid;
    int status;

    fflush(NULL);
    pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        /* In our own mkdtemp directory, reopened for each tool run (so no O_EXCL);
         * O_NOFOLLOW all the same, should a link ever be planted there. */
        int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0600);
        int fe = open(err, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0600);

        if (fo < 0 || fe < 0 || dup2(fo, 1) < 0 || dup2(fe, 2) < 0)
            _exit(126);
        execvp(argv[0], argv);
        _exit(127);
    }
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -errno;
    if (!WIFEXITED(status))
        return -EINTR;
    return WEXITSTATUS(status) == 127 ? -ENOENT : WEXITSTATUS(status);
}

static void first_line(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");

    if (!len)
        return;
    buf[0] = 0;
    if (!f)
        return;
    while (fgets(buf, (int)len, f)) {
        buf[strcspn(buf, "\n")] = 0;
        /* gas starts with "Assembler messages:"; the useful line follows */
        if (!strstr(buf, "Assembler messages") && buf[0])
            break;
    }
    fclose(f);
}

int ml_bb_assemble(const char *text, enum ml_bb_syntax syntax, int use_llvm_mc, uint8_t *buf,
                   size_t cap, size_t *len, char *err, size_t errlen)
{
    char o[128], bin[128];
    struct tmp t;
    FILE *f;
    int rc;
    long size;

    if (errlen)
        err[0] = 0;
    rc = tmp_open(&t, &f);
    if (rc < 0)
        return rc;
    char *s = t.in, *out = t.out, *errp = t.err;
    tmp_path(&t, "in.o", o, sizeof(o));
    tmp_path(&t, "in.bin", bin, sizeof(bin));
    fputs(syntax == ML_BB_INTEL ? ".intel_syntax noprefix\n" : ".att_syntax\n", f);
    fputs(".text\n", f);
    for (const char *p = text; *p; p++)
        fputc(*p == ';' ? '\n' : *p, f);
    fputc('\n', f);
    fclose(f);
    if (use_llvm_mc) {
        char *argv[] = {
            "llvm-mc-14", "-triple=x86_64-unknown-linux-gnu", "-filetype=obj", "-o", o, s, NULL};
        rc = spawn(argv, out, errp);
    } else {
        char *argv[] = {"as", "--64", "-o", o, s, NULL};
        rc = spawn(argv, out, errp);
    }
    if (rc != 0) {
        first_line(errp, err, errlen);
        rc = rc < 0 ? rc : -EINVAL;
        goto out;
    }
    {
        char *argv[] = {"objcopy", "-O", "binary", "--only-section=.text", o, bin, NULL};
        rc = spawn(argv, out, errp);
    }
    if (rc != 0) {
        first_line(errp, err, errlen);
        rc = rc < 0 ? rc : -EINVAL;
        goto out;
    }
    f = fopen(bin, "rb");
    if (!f) {
        rc = -errno;
        goto out;
    }
    fseek(f, 0, SEEK_END);
    size = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (size <= 0 || (size_t)size > cap) {
        fclose(f);
        snprintf(err, errlen, size <= 0 ? "no instructions" : "block too long");
        rc = -EINVAL;
        goto out;
    }
    *len = fread(buf, 1, (size_t)size, f);
    fclose(f);
    rc = *len == (size_t)size ? 0 : -EIO;
out:
    tmp_close(&t);
    return rc;
}

/* Disassembles with LLVM so that llvm-mca parses exactly what LLVM prints. */
static int write_llvm_asm(const uint8_t *code, size_t len, FILE *f)
{
    static int inited;
    LLVMDisasmContextRef dc;
    size_t off = 0;
    char line[256];

    if (!inited) {
        LLVMInitializeX86TargetInfo();
        LLVMInitializeX86TargetMC();
        LLVMInitializeX86Disassembler();
        inited = 1;
    }
    dc = LLVMCreateDisasm("x86_64-unknown-linux-gnu", NULL, 0, NULL, NULL);
    if (!dc)
        return -ENOSYS;
    while (off < len) {
        size_t n =
            LLVMDisasmInstruction(dc, (uint8_t *)code + off, len - off, off, line, sizeof(line));
        if (n == 0) {
            LLVMDisasmDispose(dc);
            return -EINVAL;
        }
        fprintf(f, "%s\n", line);
        off += n;
    }
    LLVMDisasmDispose(dc);
    return 0;
}

const char *ml_bb_mca_cpu(void)
{
    static char name[64];
    char *host;

    if (name[0])
        return name;
    /* LLVM 14 predates the newest cores and calls them generic: take the closest model */
    host = LLVMGetHostCPUName();
    if (host && host[0] && strcmp(host, "generic"))
        snprintf(name, sizeof(name), "%s", host);
    else {
        __builtin_cpu_init();
        snprintf(name, sizeof(name), "%s", __builtin_cpu_is("amd") ? "znver3" : "skylake");
    }
    LLVMDisposeMessage(host);
    return name;
}

static int parse_mca(const char *path, double *cycles)
{
    FILE *f = fopen(path, "r");
    char line[256];
    double iters = 0, total = 0;

    if (!f)
        return -errno;
    while (fgets(line, sizeof(line), f)) {
        sscanf(line, "Iterations: %lf", &iters);
        sscanf(line, "Total Cycles: %lf", &total);
    }
    fclose(f);
    if (iters <= 0 || total <= 0)
        return -EINVAL;
    *cycles = total / iters;
    return 0;
}

int ml_bb_mca(const uint8_t *code, size_t len, const char *mcpu, double *cycles)
{
    char cpu[80];
    struct tmp t;
    FILE *f;
    int rc;

    rc = tmp_open(&t, &f);
    if (rc < 0)
        return rc;
    char *s = t.in, *out = t.out, *errp = t.err;
    rc = write_llvm_asm(code, len, f);
    fclose(f);
    if (rc < 0)
        goto out;
    snprintf(cpu, sizeof(cpu), "-mcpu=%s", mcpu ? mcpu : ml_bb_mca_cpu());
    {
        char *argv[] = {
            "llvm-mca-14", "-mtriple=x86_64-unknown-linux-gnu", cpu, "-iterations=200", s, NULL};
        rc = spawn(argv, out, errp);
    }
    if (rc == 0)
        rc = parse_mca(out, cycles);
    else if (rc > 0)
        rc = -EINVAL;
out:
    tmp_close(&t);
    return rc;
}
