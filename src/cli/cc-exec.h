/* Child processes and temporary files of memlens cc. */
#ifndef ML_CC_EXEC_H
#define ML_CC_EXEC_H

#include <stdbool.h>

/* Print every command before running it (--ml-verbose). */
extern bool ml_cc_verbose;
/* Keep the temporary directory instead of removing it at exit (--ml-keep-temps). */
extern bool ml_cc_keep_temps;

/*
 * Returns a fresh path "<tmpdir>/<n>-<name>" in a private directory made on
 * first use under $TMPDIR (default /tmp). The directory and all it holds are
 * removed at exit, also after die() and on SIGINT, SIGTERM and SIGHUP.
 */
const char *ml_cc_tmp_path(const char *name);

/* Prints argv to stderr as "memlens: <argv...>" if verbose, shell-quoted. */
void ml_cc_trace(char *const *argv);

/*
 * Runs argv (argv[0] looked up in PATH) with the same stdin, stdout and stderr,
 * and returns the status to exit with: the child's exit code, or 128+signal.
 * A program that cannot be started dies with a message naming it.
 */
int ml_cc_run(char *const *argv);

/* Replaces the process by argv (after the temporaries are removed); never returns. */
_Noreturn void ml_cc_exec(char *const *argv);

#endif
