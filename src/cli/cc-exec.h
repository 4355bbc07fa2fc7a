/* Child processes, their outputs and temporary files of memlens cc. */
#ifndef ML_CC_EXEC_H
#define ML_CC_EXEC_H

#include <stdbool.h>
#include <stddef.h>

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
 *
 * While a child runs, SIGINT, SIGTERM, SIGHUP and SIGQUIT (unless ignored when
 * memlens started) are passed on to it and its children (its own process
 * group, unless memlens runs in the foreground of a terminal, where the
 * terminal signals them all), memlens waits for it to end, removes its
 * temporary files and then dies of the same signal.
 */
int ml_cc_run(char *const *argv);

/* Bytes a child wrote to its standard output (malloc'd, owned by the caller). */
struct ml_cc_buf {
    char *data;
    size_t len;
};

/*
 * ml_cc_run with the child's standard output read into *out; with side, what
 * it writes to /dev/fd/3 (a second pipe) goes to *side; quiet sends its
 * standard error to /dev/null.
 */
int ml_cc_run_capture(char *const *argv, struct ml_cc_buf *out, struct ml_cc_buf *side, bool quiet);

/*
 * Writes len bytes to path: "-" is standard output; a regular (or new) file is
 * replaced atomically through a temporary next to it, with mode 0666 less the
 * umask as compilers create outputs; anything else (/dev/null) is written in
 * place. Returns 0 or -errno; nothing is left behind on failure or signal.
 */
int ml_cc_write(const char *path, const void *data, size_t len);

/* Reads a whole file into *out. Returns 0 or -errno. */
int ml_cc_read(const char *path, struct ml_cc_buf *out);

/* Replaces the process by argv (after the temporaries are removed); never returns. */
_Noreturn void ml_cc_exec(char *const *argv);

#endif
