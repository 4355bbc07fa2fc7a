#!/bin/bash
# The trace writer's fast paths (docs/trace.md, "Fast paths": checked segments, runs of one
# segment, partly predicted runs, cycle replay) write the records the general encoder writes
# (MEMLENS_TRACE=fast=off): ns machine-code traces (--trace=asm,mode=ns) of
# tests/e2e/kernels/trace-fast.c at -O0 and -O2 (steady cycles of calls, a site whose
# addresses move by two deltas, cycles that break and change stride, a cycle longer than a
# replayed span, cycles with holes: random accesses first, last and in between, a hole site
# reached twice, holes that turn regular and back, sparse rows; an indirect load predicted
# only sometimes; runs of one segment whose stride changes halfway at one site) and of the
# bench kernels stream and strided (runs of one segment), smallfn, spmv and pagerank (rows
# replayed with their gathers as holes), encoded by the writer and by the threads themselves (self=always),
# hold the same access records either way. Address randomisation is off, both runs see
# environments of the same size, and every array stays below malloc's mmap threshold (mappings
# the writer thread makes could come first and move the program's), so that addresses agree.
. "$(dirname "$0")/../lib/common.sh"
ml_require_cc
command -v llvm-mc-14 >/dev/null || skip "llvm-mc-14 is not installed"
command -v setarch >/dev/null || skip "setarch is not installed"
setarch -R true 2>/dev/null || skip "setarch -R is not permitted here"

# records <self mode> <fast=on,|fast=off> <program and arguments...>: the access records
# of one run (time and pid left out), in the order the reader gives them.
records() {
    local self=$1 fo=$2
    shift 2
    rm -rf "$T/o"
    MEMLENS_TRACE=self=$self,$fo MEMLENS_OUT=$T/o setarch -R "$@" >"$T/out.$fo" ||
        fail "$*: run with $self,$fo failed"
    "$MEMLENS" analyze -j 1 "$T/o" dump >"$T/dump" || fail "$*: analyze dump failed"
    awk '$4 == "load" || $4 == "store" || $4 == "modify" { $1 = ""; $3 = ""; print }' "$T/dump" |
        sort >"$T/rec.$fo"
    [ -s "$T/rec.$fo" ] || fail "$*: no access records with $self,$fo"
}

# same <name> <program and arguments...>
same() {
    local name=$1 self
    shift
    for self in off always; do
        records $self fast=on, "$@"
        records $self fast=off "$@"
        cmp -s "$T/out.fast=on," "$T/out.fast=off" || fail "$name: output differs"
        if ! cmp -s "$T/rec.fast=on," "$T/rec.fast=off"; then
            diff "$T/rec.fast=on," "$T/rec.fast=off" | head -5 >&2
            fail "$name (self=$self): records differ with the fast paths ($(wc -l <"$T/rec.fast=on,")" \
                "against $(wc -l <"$T/rec.fast=off") without)"
        fi
        echo "$name self=$self: $(wc -l <"$T/rec.fast=off") records, same with fast=off"
    done
}

for o in -O0 -O2; do
    $MLCC --ml-trace=asm,mode=ns $o "$ML_ROOT/tests/e2e/kernels/trace-fast.c" -o "$T/c$o" ||
        fail "build trace-fast.c $o"
    same "trace-fast $o" "$T/c$o" 8000 997
    same "trace-fast $o brk=3" "$T/c$o" 2000 3
done
# Array loops: runs of one segment (fast_run), segments of even and odd word counts.
for o in -O0 -O2; do
    $MLCC --ml-trace=asm,mode=ns $o "$ML_ROOT/bench/kernels/stream.c" -o "$T/st$o" ||
        fail "build stream $o"
    same "stream $o" "$T/st$o" 12000 20
    $MLCC --ml-trace=asm,mode=ns $o "$ML_ROOT/bench/kernels/strided.c" -o "$T/sd$o" ||
        fail "build strided $o"
    same "strided $o" "$T/sd$o" 15000 3 20
done
$MLCC --ml-trace=asm,mode=ns -O2 "$ML_ROOT/bench/kernels/smallfn.c" -o "$T/sf" || fail "build smallfn"
same smallfn "$T/sf" 5000 5
$MLCC --ml-trace=asm,mode=ns -O2 "$ML_ROOT/bench/kernels/spmv.c" -o "$T/sp" || fail "build spmv"
same spmv "$T/sp" 1000 12 5
$MLCC --ml-trace=asm,mode=ns -O2 "$ML_ROOT/bench/kernels/pagerank.c" -o "$T/pr" || fail "build pagerank"
same pagerank "$T/pr" 1500 16 3
echo ok
