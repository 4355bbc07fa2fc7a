#!/bin/bash
# Region runtime life cycle: profiles after fork, exit() from a thread, SIGTERM and a crash,
# each with the exact byte counts of what the process did.
. "$(dirname "$0")/../lib/common.sh"
ml_require_cc
src=$ML_ROOT/tests/e2e/runtime/lifecycle.c
$MLCC -O2 -g -o "$T/life" "$src" -pthread || fail "memlens-cc failed"
n=5000
heap=$((n * 8))

run_mode() { # mode -> profiles in $T/out-mode
    rm -rf "$T/out-$1"
    MEMLENS_OUT=$T/out-$1 "$T/life" "$1" $n >"$T/$1.stdout" 2>"$T/$1.stderr"
}

run_mode plain || fail "plain run failed"
check_py "$T/out-plain" "len(P)==1 and P[0].totals('work')['rd_heap']==$heap and P[0].totals('work')['entries']==1"

run_mode fork || fail "fork run failed"
# parent: one execution; child: two executions after the fork, none inherited
check_py "$T/out-fork" "len(P)==2 and sorted(p.totals('work')['rd_heap'] for p in P)==[$heap, 2*$heap] and sorted(p.totals('work')['entries'] for p in P)==[1,2]"

run_mode thread-exit
[ $? -eq 3 ] || fail "thread-exit: expected exit status 3"
check_py "$T/out-thread-exit" "len(P)==1 and P[0].totals('work')['rd_heap']==2*$heap and len([t for t in P[0].threads if t['entries'][0]])==2"

run_mode sigterm
[ $? -eq $((128 + 15)) ] || fail "sigterm: expected death by SIGTERM"
check_py "$T/out-sigterm" "len(P)==1 and P[0].flags & 1 and P[0].totals('work')['rd_heap']==$heap"

run_mode segv
[ $? -eq $((128 + 11)) ] || fail "segv: expected death by SIGSEGV"
check_py "$T/out-segv" "len(P)==1 and P[0].flags & 1 and P[0].totals('work')['rd_heap']==$heap"

# no temporary files are left behind
[ -z "$(find "$T"/out-* -name '*.tmp')" ] || fail "temporary profile files left behind"
echo "ok"
