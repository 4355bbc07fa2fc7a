#!/bin/bash
# The program's errno survives memlens' slow paths: three threads set errno, make many
# instrumented accesses (buffer hand-overs to the trace writer, waits for it, thread set-up,
# chunk hand-overs to the profiling backend) and check that errno still holds what they set
# (tests/e2e/kernels/errno-keep.c). Built as an IR trace, an ns machine-code trace with
# buffers self-encoded on every hand-over, and a dep profile.
. "$(dirname "$0")/../lib/common.sh"
ml_require_cc
SRC=$ML_ROOT/tests/e2e/kernels/errno-keep.c

kept() { # name command...
    local name=$1
    shift
    "$@" >"$T/$name.out" 2>"$T/$name.err" || fail "$name: exit $? ($(head -c 300 "$T/$name.err"))"
    grep -qx "errno kept" "$T/$name.out" || fail "$name: $(head -c 300 "$T/$name.err")"
}

for o in -O0 -O2; do
    $MLCC --ml-trace $o "$SRC" -o "$T/tr" -lpthread || fail "trace build $o"
    kept "trace$o" env MEMLENS_OUT="$T/o-tr$o" "$T/tr" 50000 60
    kept "trace-self$o" env MEMLENS_OUT="$T/o-self$o" MEMLENS_TRACE=self=always "$T/tr" 50000 60
    $MLCC --ml-events=dep $o "$SRC" -o "$T/dep" -lpthread || fail "dep build $o"
    kept "dep$o" "$MEMLENS" profile -q -m dep -o "$T/o-dep$o" -- "$T/dep" 20000 100
done
if command -v llvm-mc-14 >/dev/null; then
    $MLCC --ml-trace=asm,mode=ns -O2 "$SRC" -o "$T/asm" -lpthread || fail "asm build"
    kept asm env MEMLENS_OUT="$T/o-asm" "$T/asm" 50000 60
    kept asm-self env MEMLENS_OUT="$T/o-asm-self" MEMLENS_TRACE=self=always "$T/asm" 50000 60
else
    part_skipped "machine-code trace (llvm-mc-14 is not installed)"
fi
echo ok
