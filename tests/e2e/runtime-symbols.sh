#!/bin/bash
# The runtime (archive and shared object) exports only its entry points: a program may define symbols with the names of
# the runtime's internals (ml_profile_parse, ml_rt_self, ...) and still link and profile.
. "$(dirname "$0")/../lib/common.sh"
ml_require_cc
rt=$ML_BUILD/lib/libmemlens-rt.a
extra=$(nm -g --defined-only "$rt" | awk 'NF == 3 { print $3 }' |
    grep -vE '^(__memlens_[A-Za-z0-9_]+|pthread_create)$')
[ -z "$extra" ] || fail "the runtime exports internal symbols: $extra"
# the malloc family (runtime/heap.c) is an archive of its own, linked only for heap events
heap_api='malloc|calloc|realloc|reallocarray|free|memalign|aligned_alloc|posix_memalign|valloc|pvalloc'
extra=$(nm -g --defined-only "$ML_BUILD/lib/libmemlens-heap.a" | awk 'NF == 3 { print $3 }' |
    grep -vE "^(__memlens_[A-Za-z0-9_]+|$heap_api)\$")
[ -z "$extra" ] || fail "the heap archive exports internal symbols: $extra"
so=$ML_BUILD/lib/libmemlens-rt.so
extra=$(nm -D --defined-only "$so" | awk 'NF == 3 { print $3 }' |
    grep -vE "^(__memlens_[A-Za-z0-9_]+|pthread_create|$heap_api)\$")
[ -z "$extra" ] || fail "the shared runtime exports internal symbols: $extra"
cat >"$T/clash.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include "memlens.h"
int ml_profile_parse(void) { return 1; }
int ml_pw_init(void) { return 2; }
int ml_rt_self(void) { return 3; }
int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 100, s = 0, *a = malloc(n * sizeof(*a));
    for (long i = 0; i < n; i++)
        a[i] = i * argc;
    printf("%p\n", (void *)a); /* a escapes, so no load moves across the markers */
    MEMLENS_ROI_BEGIN("r");
    for (long i = 0; i < n; i++)
        s += a[i];
    MEMLENS_ROI_END("r");
    printf("%ld %d\n", s, ml_profile_parse() + ml_pw_init() + ml_rt_self());
    return 0;
}
C
$MLCC -O2 -o "$T/clash" "$T/clash.c" || fail "a program defining runtime-internal names does not link"
# ... and an executable exports all of them, so that instrumented libraries bind to its runtime
for ld in bfd gold lld; do
    command -v ld.$ld >/dev/null || continue
    $MLCC -O2 -fuse-ld=$ld -o "$T/clash-$ld" "$T/clash.c" || fail "link with ld.$ld failed"
    for s in $(nm -g --defined-only "$rt" | awk 'NF == 3 { print $3 }'); do
        nm -D --defined-only "$T/clash-$ld" | grep -qw "$s" ||
            fail "an executable linked by ld.$ld does not export the runtime's $s"
    done
done
! nm "$T/clash" | grep -qE ' [TW] malloc$' || fail "a region build defines malloc"
MEMLENS_OUT=$T/out "$T/clash" 1000 >"$T/stdout" || fail "run failed"
[ "$(tail -n 1 "$T/stdout")" = "999000 6" ] || fail "wrong output: $(cat "$T/stdout")"
check_py "$T/out" "P[0].totals('r')['rd_heap'] == 8000"
echo ok
