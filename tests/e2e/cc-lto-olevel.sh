#!/bin/bash
# Whole-program code generation at a link without -O (as many Makefiles link) uses -O2, the
# level of the link's optimisation pipeline, not -O0: the program built by `memlens-cc -flto
# k.o` has the same machine code as the one built by `memlens-cc -flto -O2 k.o`, for -flto and
# --ml-whole-program objects. (At -O0, code generation spills every value: 2x slower.)
. "$(dirname "$0")/cc-lib.bash"

MC=$BIN/memlens-cc
cd "$W" || exit 1
cat >k.c <<'C'
#include <memlens.h>
#include <stdio.h>
#include <stdlib.h>
static double a[4096], b[4096];
int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 100;
    double s = 0;
    for (int i = 0; i < 4096; i++)
        a[i] = i, b[i] = 4096 - i;
    for (int r = 0; r < n; r++) {
        MEMLENS_ROI_BEGIN("dot");
        for (int i = 0; i < 4096; i++)
            s += a[i] * b[i];
        MEMLENS_ROI_END("dot");
    }
    printf("%.0f\n", s);
    return 0;
}
C
text() { size -A "$1" | awk '$1 == ".text" { print $2 }'; }
for mode in -flto --ml-whole-program; do
    "$MC" $mode -O2 -c k.c -o k.o || fail "$mode -O2 -c"
    "$MC" $mode k.o -o none || fail "$mode link without -O"
    "$MC" $mode -O2 k.o -o o2 || fail "$mode link with -O2"
    "$MC" $mode -O0 k.o -o o0 || fail "$mode link with -O0"
    no_temps
    [ "$(./none 3)" = "$(./o2 3)" ] || fail "$mode: outputs differ"
    t=$(text none) t2=$(text o2) t0=$(text o0)
    echo "$mode: .text without -O $t, -O2 $t2, -O0 $t0 bytes"
    [ -n "$t" ] && [ "$t" = "$t2" ] || fail "$mode: a link without -O generates other code than -O2"
    # An explicit -O0 on the link line is obeyed (and really differs, or the test proves nothing).
    [ "$t0" != "$t2" ] || fail "$mode: -O0 and -O2 code generation give the same .text"
done
echo ok
