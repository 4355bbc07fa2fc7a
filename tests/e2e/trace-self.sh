#!/bin/bash
# Threads that encode their own full buffers (docs/trace.md, "self-encoding"; forced on every
# hand-over by MEMLENS_TRACE=self=always) write the same records as the writer alone
# (self=off): an ns machine-code trace of a bench kernel (--trace=asm,mode=ns) and an IR trace
# with the same loads and stores; the END chunk counts the self-encoded buffers. A program
# that crashes (SIGSEGV) while its threads encode themselves leaves a readable trace holding
# its whole first pass. Each run is repeated (at most 10 times) until a buffer was encoded by
# its thread: the first buffers of a run go to the writer until it has read the tables.
. "$(dirname "$0")/../lib/common.sh"
ml_require_cc
command -v python3 >/dev/null || skip "python3 is not installed"
command -v llvm-mc-14 >/dev/null || skip "llvm-mc-14 is not installed"

# summary <dir>: "loads stores self_encoded end"
summary() {
    "$MEMLENS" analyze --json "$1" summary | python3 -c '
import json, sys
t = json.load(sys.stdin)["traces"][0]
r = t["rows"][-1]
print(r["loads"], r["stores"], t["self_encoded"], t["end"].replace(" ", "-"))'
}

# traced <name> <expected status> <program and arguments...>: runs under self=always until
# a buffer was self-encoded; leaves the trace in $T/o and "loads stores self end" in $T/s.
traced() {
    local name=$1 want=$2 st i
    shift 2
    for i in $(seq 10); do
        rm -rf "$T/o"
        MEMLENS_TRACE=self=always MEMLENS_OUT=$T/o "$@" >"$T/out" 2>"$T/err"
        st=$?
        [ "$st" = "$want" ] || fail "$name: exit status $st, expected $want: $(cat "$T/err")"
        summary "$T/o" >"$T/s" || fail "$name: analyze failed"
        [ "$(cut -d' ' -f3 "$T/s")" -gt 0 ] && return 0
    done
    fail "$name: no buffer was self-encoded in 10 runs"
}

# An ns trace (every machine-level access) of a bench kernel: exact counts either way.
$MLCC --ml-trace=asm,mode=ns -O2 "$ML_ROOT/bench/kernels/smallfn.c" -o "$T/sf" ||
    fail "build smallfn"
rm -rf "$T/o"
MEMLENS_TRACE=self=off MEMLENS_OUT=$T/o "$T/sf" 20000 5 >"$T/want.out" || fail "smallfn self=off"
off=$(summary "$T/o") || fail "smallfn: analyze failed"
[ "$(echo "$off" | cut -d' ' -f3)" = 0 ] || fail "self=off encoded buffers in the thread: $off"
traced smallfn 0 "$T/sf" 20000 5
cmp -s "$T/want.out" "$T/out" || fail "smallfn prints another result under self=always"
[ "$(cut -d' ' -f1,2 "$T/s")" = "$(echo "$off" | cut -d' ' -f1,2)" ] ||
    fail "smallfn: loads/stores $(cat "$T/s") under self=always, $off under self=off"
echo "ns smallfn: loads stores self-encoded end: off $off, always $(cat "$T/s")"

# An IR trace of a program that dies of SIGSEGV after a pass over n doubles.
N=400000
$MLCC --ml-trace -O1 -g -I"$ML_ROOT/include" "$ML_ROOT/tests/e2e/kernels/trace-faults.c" \
    -o "$T/k" -lpthread || fail "build trace-faults"
traced segv 139 "$T/k" segv $N
"$MEMLENS" analyze "$T/o" >/dev/null 2>"$T/an" || fail "segv: analyze failed: $(cat "$T/an")"
[ "$(cut -d' ' -f4 "$T/s")" = signal-11 ] || fail "segv: trace ends '$(cat "$T/s")'"
MEMLENS_BUILD=$ML_BUILD PYTHONPATH=$ML_ROOT/tests/lib python3 - "$T/o" "$T/err" $N <<'PY' ||
import glob, sys
import mlt
d, err, N = sys.argv[1], sys.argv[2], int(sys.argv[3])
paths = sorted(glob.glob(d + '/*.mlt'))
A = mlt.ranges(open(err).read())['a']
n = sum(mlt.count(rs, *A)[0] for th, name, rs in mlt.phases(mlt.records(paths)) if name == 'work')
if n != N:
    print('segv under self=always: %d loads of the array in the first pass, expected %d' % (n, N))
    sys.exit(1)
PY
    fail "segv: records missing"
echo "segv: loads stores self-encoded end: $(cat "$T/s")"
echo ok
