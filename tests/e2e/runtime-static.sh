#!/bin/bash
# Static links (issue 10, item 13): memlens-cc -static and -static-pie executables create their
# threads (the runtime's pthread_create reaches glibc's own, which dlsym cannot find in a static
# program), print what the plain static build prints and profile every thread exactly.
. "$(dirname "$0")/../lib/common.sh"
ml_require_cc
echo 'int main(void) { return 0; }' >"$T/probe.c"
clang-14 -static -o "$T/probe" "$T/probe.c" 2>/dev/null || skip "no static C library (libc6-dev)"
src=$ML_ROOT/tests/e2e/runtime/threads.c
total=300 batch=4 n=100
for mode in -static -static-pie; do
    $MLCC -O2 $mode -o "$T/thr$mode" "$src" -pthread || fail "memlens-cc $mode failed"
    clang-14 -O2 $mode -I"$ML_ROOT/include" -o "$T/plain$mode" "$src" -pthread ||
        fail "clang-14 $mode failed"
    file "$T/thr$mode" | grep -q 'static' || fail "$mode: not a static executable"
    MEMLENS_OUT=$T/out$mode "$T/thr$mode" $total $batch $n >"$T/ml.stdout" 2>"$T/ml.stderr" ||
        fail "$mode: the program failed: $(cat "$T/ml.stderr")"
    "$T/plain$mode" $total $batch $n >"$T/plain.stdout" || fail "$mode: the plain program failed"
    cmp -s "$T/ml.stdout" "$T/plain.stdout" || fail "$mode: output differs"
    check_py "$T/out$mode" "(len(P) == 1 and P[0].totals('t')['entries'] == $total and
        P[0].totals('t')['rd_heap'] == $total * $n * 8 and
        P[0].totals('main')['rd_heap'] == $n * 8 and
        len({t['tid'] for t in P[0].threads}) == len(P[0].threads))"
done
# exit() from a thread of a static program: status 3 and both executions in the profile
$MLCC -O2 -static -o "$T/life" "$ML_ROOT/tests/e2e/runtime/lifecycle.c" -pthread ||
    fail "memlens-cc -static failed on lifecycle.c"
rc=0
MEMLENS_OUT=$T/life-out "$T/life" thread-exit 1000 >/dev/null || rc=$?
[ $rc = 3 ] || fail "thread-exit: exit status $rc, want 3"
check_py "$T/life-out" "P[0].totals('work')['rd_heap'] == 2 * 1000 * 8"
echo ok
