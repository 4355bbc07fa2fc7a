/* Shared declarations of the memlens command-line program: subcommands and error helpers. */
#ifndef ML_CLI_H
#define ML_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdnoreturn.h>

/* Each subcommand lives in cmd-<name>.c; argv[0] is the subcommand name. */
int cmd_cc(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_bb(int argc, char **argv);
int cmd_top(int argc, char **argv);
int cmd_instrument(int argc, char **argv);
int cmd_trace(int argc, char **argv);
int cmd_analyze(int argc, char **argv);
int cmd_profile(int argc, char **argv);

/* Prints "memlens: <msg>" and exits 128. Only cli/ may exit. */
noreturn void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints "memlens: <msg>" and returns -1. */
int error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void warning(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints the usage text to stderr and exits 129. */
noreturn void usage(const char *text);

/* child.c: dir made absolute (dies when it cannot be). */
char *ml_cli_absolute(const char *dir);
/* Names of the files in dir ending in suffix, sorted; NULL with *n = 0 when dir is missing. */
char **ml_cli_files_in(const char *dir, const char *suffix, size_t *n);
/* Whether name is not among before (sorted), i.e. was written since. */
int ml_cli_is_new(char *const *before, size_t nbefore, const char *name);
void ml_cli_free_files(char **v, size_t n);
/* Runs argv[0] with argv and waits; its exit status, 128 + signal when killed. */
int ml_cli_run_child(char **argv);

/*
 * --events=<module>[,<module>...] (cmd-cc.c): ORs the event kinds and fields
 * those profiling modules declare into *kinds and *fields; dies on an unknown
 * module or an empty list.
 */
void ml_cli_events(const char *list, uint64_t *kinds, unsigned *fields);

/* Directory holding the running memlens executable (for finding the runtime). */
const char *ml_self_dir(void);

#endif
