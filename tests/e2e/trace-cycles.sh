#!/bin/bash
# The writer's cycle replay (docs/trace.md, "Cycle replay"; off with MEMLENS_TRACE=cycles=off)
# writes the records the encoder writes without it: ns machine-code traces (--trace=asm,
# mode=ns) of tests/e2e/kernels/trace-cycles.c at -O0 and -O2 (steady cycles of calls, a site
# whose addresses move by two deltas, cycles that break and change stride, a cycle longer
# than a replayed span) and of the bench kernel smallfn, encoded by the writer and by the
# threads themselves (self=always), hold the same access records in both runs. Address
# randomisation is off and both runs see environments of the same size, so that addresses
# agree.
. "$(dirname "$0")/../lib/common.sh"
ml_require_cc
command -v llvm-mc-14 >/dev/null || skip "llvm-mc-14 is not installed"
command -v setarch >/dev/null || skip "setarch is not installed"
setarch -R true 2>/dev/null || skip "setarch -R is not permitted here"

# records <self mode> <cycles=on,|cycles=off> <program and arguments...>: the access records
# of one run (time and pid left out), in the order the reader gives them.
records() {
    local self=$1 cy=$2
    shift 2
    rm -rf "$T/o"
    MEMLENS_TRACE=self=$self,$cy MEMLENS_OUT=$T/o setarch -R "$@" >"$T/out.$cy" ||
        fail "$*: run with $self,$cy failed"
    "$MEMLENS" analyze -j 1 "$T/o" dump >"$T/dump" || fail "$*: analyze dump failed"
    awk '$4 == "load" || $4 == "store" || $4 == "modify" { $1 = ""; $3 = ""; print }' "$T/dump" |
        sort >"$T/rec.$cy"
    [ -s "$T/rec.$cy" ] || fail "$*: no access records with $self,$cy"
}

# same <name> <program and arguments...>
same() {
    local name=$1 self
    shift
    for self in off always; do
        records $self cycles=on, "$@"
        records $self cycles=off "$@"
        cmp -s "$T/out.cycles=on," "$T/out.cycles=off" || fail "$name: output differs"
        if ! cmp -s "$T/rec.cycles=on," "$T/rec.cycles=off"; then
            diff "$T/rec.cycles=on," "$T/rec.cycles=off" | head -5 >&2
            fail "$name (self=$self): records differ with cycle replay ($(wc -l <"$T/rec.cycles=on,")" \
                "against $(wc -l <"$T/rec.cycles=off") without)"
        fi
        echo "$name self=$self: $(wc -l <"$T/rec.cycles=off") records, same with and without replay"
    done
}

for o in -O0 -O2; do
    $MLCC --ml-trace=asm,mode=ns $o "$ML_ROOT/tests/e2e/kernels/trace-cycles.c" -o "$T/c$o" ||
        fail "build trace-cycles.c $o"
    same "trace-cycles $o" "$T/c$o" 8000 997
    same "trace-cycles $o brk=3" "$T/c$o" 2000 3
done
$MLCC --ml-trace=asm,mode=ns -O2 "$ML_ROOT/bench/kernels/smallfn.c" -o "$T/sf" || fail "build smallfn"
same smallfn "$T/sf" 5000 5
echo ok
