/* A heap buffer reached through a pointer held in a static global, read in a region inside a
 * signal handler and in a loop-body region outside it (issue 11's classification question).
 *   sigheap prof|alrm var|const N: SIGPROF (profiling timer) or SIGALRM (real-time timer)
 *   every 2 ms; the buffer is malloc(max(N, 64) ints) (var) or malloc(64 ints) (const, which
 *   the optimiser may turn into a global: LLVM's globalopt does at -O1 and above). Runs N
 *   executions of region "body" at a time until the handler's region "sig" has run 20 times.
 *   Per execution: "sig" reads p (8 global bytes) and two ints of the buffer, writes one;
 *   "body" reads one int of the buffer.
 */
#include "memlens.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

static int *p;
static volatile sig_atomic_t hits;

static void on_timer(int sig)
{
    int k = hits;
    (void)sig;
    MEMLENS_ROI_BEGIN("sig");
    p[k & 63] += p[(k + 1) & 63];
    MEMLENS_ROI_END("sig");
    hits = k + 1;
}

int main(int argc, char **argv)
{
    struct sigaction sa;
    struct itimerval it = {{0, 2000}, {0, 2000}};
    int prof, sig;
    long n, s = 0;

    if (argc != 4)
        return 2;
    prof = !strcmp(argv[1], "prof");
    sig = prof ? SIGPROF : SIGALRM;
    n = atol(argv[3]);
    if (n < 1)
        return 2;
    p = !strcmp(argv[2], "const") ? malloc(64 * sizeof(*p))
                                  : malloc((n > 64 ? n : 64) * sizeof(*p));
    if (!p)
        return 1;
    for (int i = 0; i < 64; i++)
        p[i] = i;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_timer;
    sigemptyset(&sa.sa_mask);
    if (sigaction(sig, &sa, NULL) || setitimer(prof ? ITIMER_PROF : ITIMER_REAL, &it, NULL))
        return 1;
    while (hits < 20)
        for (long i = 0; i < n; i++) {
            MEMLENS_ROI_BEGIN("body");
            s += p[i & 63];
            MEMLENS_ROI_END("body");
        }
    memset(&it, 0, sizeof(it));
    setitimer(prof ? ITIMER_PROF : ITIMER_REAL, &it, NULL);
    printf("done %d\n", s > 0);
    return 0;
}
