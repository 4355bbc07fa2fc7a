#!/bin/bash
# Traces of programs that end badly (tests/e2e/kernels/trace-faults.c) read back with what they
# did: a NULL dereference (SIGSEGV: a signal record with the fault address, END "signal 11"),
# abort (signal 6), exit from a thread (that thread's records too), fork (one trace per process,
# the child's named as forked and holding only what it did after the fork, ending in _exit),
# exec (END "exec"), SIGTERM while running (END "signal 15"), and SIGKILL while running (no END,
# every complete chunk readable, nothing reported damaged except a cut last chunk). Every trace
# is readable by 'memlens analyze' (exit 0) and the first pass over the array is complete.
. "$(dirname "$0")/../lib/common.sh"
ml_require_cc
command -v python3 >/dev/null || skip "python3 is not installed"
SRC=$ML_ROOT/tests/e2e/kernels/trace-faults.c
$MLCC --ml-trace -O1 -g -I"$ML_ROOT/include" "$SRC" -o "$T/k" -lpthread || fail "build failed"
N=20000

# check <dir> <python expression over R (records), S (summary JSON), N, A (the array range)>
check() {
    MEMLENS_BUILD=$ML_BUILD PYTHONPATH=$ML_ROOT/tests/lib python3 - "$@" $N <<'PY'
import glob, json, subprocess, sys
import mlt
d, err, expr, N = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
paths = sorted(glob.glob(d + '/*.mlt'))
A = mlt.ranges(open(err).read())['a']
S = json.loads(subprocess.run([mlt.MEMLENS, 'analyze', '--json'] + paths, check=True,
                              stdout=subprocess.PIPE, text=True).stdout)['traces']
R = mlt.records(paths) if 'R' in expr or 'loads(' in expr else []
def row(marker):
    return sum(r['loads'] for t in S for r in t['rows'] if r['marker'] == marker and r['thread'] != 'all')
def loads(phase, pid=None):
    return sum(mlt.count(rs, *A)[0] for th, name, rs in mlt.phases(
        [r for r in R if pid is None or r.pid == pid]) if name == phase)
ok = eval(expr)
if not ok:
    print('failed:', expr, [(t['pid'], t['ppid'], t['end'], t['records']) for t in S])
sys.exit(0 if ok else 1)
PY
}

run() { # mode expected-status
    rm -rf "$T/o"
    MEMLENS_OUT=$T/o "$MEMLENS" trace -q -- "$T/k" "$1" $N >"$T/out" 2>"$T/err"
    local st=$?
    [ "$st" = "$2" ] || fail "$1: exit status $st, expected $2: $(cat "$T/err")"
    "$MEMLENS" analyze "$T/o" >/dev/null 2>"$T/an" || fail "$1: analyze failed: $(cat "$T/an")"
}

run exit 0
check "$T/o" "$T/err" "S[0]['end'] == 'exit' and loads('work') == N" || fail "exit"
run segv 139
check "$T/o" "$T/err" "S[0]['end'] == 'signal 11' and loads('work') == N and \
any(r.kind == 'signal' and r.what == 'aux=0 aux2=11' and r.addr == 16 for r in R)" || fail "segv"
run abort 134
check "$T/o" "$T/err" "S[0]['end'] == 'signal 6' and loads('work') == N" || fail "abort"
run thread-exit 3
check "$T/o" "$T/err" "S[0]['end'] == 'exit' and loads('work') == N and loads('thread') == N and \
{r.thread for r in R if r.kind == 'mark' and r.what == 'mark:thread'} == {1}" || fail "thread-exit"
run fork 0
child=$(awk '/^child/ {print $2}' "$T/out")
check "$T/o" "$T/err" "len(S) == 2 and \
[t for t in S if t['pid'] == $child][0]['ppid'] == [t for t in S if t['pid'] != $child][0]['pid'] \
and loads('child', $child) == N and loads('work', $child) == 0 and \
any(r.kind == 'fork' and r.what == 'aux=$child aux2=0' for r in R) and \
all(t['end'] == 'exit' for t in S)" || fail "fork"
run exec 0
check "$T/o" "$T/err" "S[0]['end'] == 'exec' and loads('work') == N" || fail "exec"

# Signals while running: wait until the first pass is done, then signal.
for sig in TERM KILL; do
    rm -rf "$T/o" "$T/ready"
    MEMLENS_OUT=$T/o "$T/k" "$( [ $sig = TERM ] && echo term-wait || echo kill-wait)" $N \
        "$T/ready" 2>"$T/err" &
    pid=$!
    for i in $(seq 600); do [ -e "$T/ready" ] && break; sleep 0.1; done
    [ -e "$T/ready" ] || { kill -9 $pid; fail "$sig: the program never got ready"; }
    if [ $sig = KILL ]; then
        # Complete chunks only: wait until one holds the first pass (chunks close within 1 s).
        for i in $(seq 300); do
            n=$("$MEMLENS" analyze -q "$T/o" --csv 2>/dev/null | awk -F, '$2 == "all" {print $6}')
            [ "${n:-0}" -ge $N ] && break
            sleep 0.1
        done
    fi
    kill -$sig $pid
    wait $pid 2>/dev/null
    st=$?
    [ $sig = TERM ] && [ $st != 143 ] && fail "TERM: exit status $st"
    [ $sig = KILL ] && [ $st != 137 ] && fail "KILL: exit status $st"
    "$MEMLENS" analyze "$T/o" >"$T/sum" 2>"$T/an" || fail "$sig: analyze failed: $(cat "$T/an")"
    grep -v "cut short" "$T/an" | grep -q . && fail "$sig: damage reported: $(cat "$T/an")"
    if [ $sig = TERM ]; then
        check "$T/o" "$T/err" "S[0]['end'] == 'signal 15' and row('mark:loop') >= N" || fail "TERM"
    else
        check "$T/o" "$T/err" "S[0]['end'].startswith('incomplete') and row('mark:loop') >= N" ||
            fail "KILL"
    fi
done
echo ok
