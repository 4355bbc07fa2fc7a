/* memlens entry point: dispatches to subcommands, perf/git style. */
#include "cli/cli.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifndef ML_VERSION
#define ML_VERSION "0.1.0"
#endif

#ifdef ML_LIGHT
/*
 * This build (bin/memlens) leaves out the commands that need LLVM: loading
 * libLLVM and running its static constructors cost every command ~20 ms of
 * CPU and 50 MiB, which a 30 ms profiled run or a report feels. They run in
 * the full build, <prefix>/libexec/memlens/memlens-llvm, with the same argv
 * (so memlens-cc stays memlens-cc).
 */
#define LLVM_CMD(fn) NULL

static int run_full(char **argv)
{
    char path[PATH_MAX];

    snprintf(path, sizeof(path), "%s/../libexec/memlens/memlens-llvm", ml_self_dir());
    execv(path, argv);
    fprintf(stderr, "memlens: cannot run '%s': %s; reinstall memlens\n", path, strerror(errno));
    return 127;
}
#else
#define LLVM_CMD(fn) fn
#endif

struct cmd {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary; /* NULL: internal, not listed */
};

static const struct cmd commands[] = {
    {"cc", LLVM_CMD(cmd_cc),
     "compile and instrument C/C++ (drop-in for clang-14; also memlens-cc, memlens-c++)"},
    {"run", cmd_run, "run a program with the runtime configured (output dir, sampling)"},
    {"report", cmd_report, "per-region, per-thread instruction mix, bytes and bandwidth"},
    {"top", cmd_top, "live per-region, per-thread bandwidth of a running profiled program"},
    {"trace", cmd_trace, "run a program built with --trace and list its memory traces"},
    {"analyze", cmd_analyze, "analyses of memory traces: summary per thread and marker, dump"},
    {"profile", cmd_profile, "run a program built for events, feeding profiling modules"},
    {"bb", LLVM_CMD(cmd_bb), "steady-state throughput of an x86-64 basic block"},
    {"instrument", LLVM_CMD(cmd_instrument), NULL},
};

static const char main_usage[] = "usage: memlens [--version] [--help] <command> [<args>]\n"
                                 "\n"
                                 "Shows how programs use memory.\n"
                                 "\n"
                                 "Commands:\n";

/* Runs fn, or, for a command this build leaves out, the full build with the whole argv. */
static int dispatch(int (*fn)(int, char **), int argc, char **argv, char **all)
{
#ifdef ML_LIGHT
    if (!fn)
        return run_full(all);
#else
    (void)all;
#endif
    return fn(argc, argv);
}

static void print_help(FILE *f)
{
    fputs(main_usage, f);
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (commands[i].summary)
            fprintf(f, "   %-10s %s\n", commands[i].name, commands[i].summary);
    fputs("\nSee 'memlens <command> --help' for the options of a command.\n"
          "Drop-in compilers: CC=memlens-cc CXX=memlens-c++ make\n",
          f);
}

int main(int argc, char **argv)
{
    const char *base = strrchr(argv[0], '/');

    base = base ? base + 1 : argv[0];
    /* Invoked as memlens-cc / memlens-c++: behave as 'memlens cc'. */
    if (strncmp(base, "memlens-c", 9) == 0)
        return dispatch(LLVM_CMD(cmd_cc), argc, argv, argv);
    if (argc < 2) {
        print_help(stderr);
        return 129;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        if (argc > 2 && strcmp(argv[1], "help") == 0) {
            char *args[] = {argv[2], "--help", NULL};
            for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
                if (!strcmp(commands[i].name, argv[2]))
                    return dispatch(commands[i].fn, 2, args, argv);
        }
        print_help(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
        printf("memlens %s\n", ML_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (!strcmp(commands[i].name, argv[1]))
            return dispatch(commands[i].fn, argc - 1, argv + 1, argv);
    fprintf(stderr, "memlens: '%s' is not a memlens command. See 'memlens --help'.\n", argv[1]);
    return 129;
}
