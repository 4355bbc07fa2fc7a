#!/bin/bash
# The tools built with ASan+UBSan (build/asan) compile, instrument and report real programs
# cleanly: any sanitizer finding fails the test.
. "$(dirname "$0")/../lib/common.sh"
A=$ML_BUILD/asan/bin
[ -x "$A/memlens-cc" ] || fail "no sanitized build at $A (run make asan)"
command -v clang-14 >/dev/null || skip "clang-14 is not installed"
export ASAN_OPTIONS=halt_on_error=1:abort_on_error=0:exitcode=99
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:exitcode=99
"$A/memlens-cc" -O2 -g -o "$T/stream" "$ML_ROOT/examples/stream.c" || fail "memlens-cc (asan) on stream.c"
"$A/memlens-c++" -O1 -g -o "$T/solver" "$ML_ROOT/tests/e2e/exact/solver.cpp" ||
    fail "memlens-c++ (asan) on solver.cpp"
"$A/memlens-cc" --ml-exact -O0 -g -fopenmp -o "$T/threads" "$ML_ROOT/tests/e2e/exact/threads.c" ||
    fail "memlens-cc --ml-exact (asan) on threads.c"
MEMLENS_OUT=$T/out "$T/stream" 100000 2 >/dev/null || fail "stream run"
MEMLENS_OUT=$T/out "$T/solver" >/dev/null || fail "solver run"
OMP_NUM_THREADS=2 MEMLENS_OUT=$T/out "$T/threads" >/dev/null || fail "threads run"
for fmt in "" --csv --json --blocks --totals; do
    # shellcheck disable=SC2086
    "$A/memlens" report $fmt "$T/out" >"$T/report.txt" || fail "memlens report $fmt (asan)"
done
head -c 1000 /dev/urandom >"$T/out/junk.mlp"
"$A/memlens" report "$T/out" >/dev/null 2>"$T/err.txt"
[ $? -eq 128 ] || fail "a junk profile must give exit 128"
grep -q "cannot read profile" "$T/err.txt" || fail "no one-line error for the junk profile"
echo ok
