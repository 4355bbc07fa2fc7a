#!/bin/bash
# memlens-cc on hostile sources and under signals (issue 10, item 10). Bad region names (empty,
# not a literal, an END without its BEGIN) give clang-style "file:line:col: error:" lines and
# exit 1, with and without -g, in C and C++, for -c, -S and one-shot links; the instrumenter
# itself (markers declared without memlens.h) never crashes on them. SIGTERM, SIGINT and SIGHUP
# while clang or ld runs end the whole process group, remove the temporary directory and kill
# memlens-cc with the same signal (the status make expects).
. "$(dirname "$0")/cc-lib.bash"

MC=$BIN/memlens-cc
cd "$W" || exit 1

# --- bad region names ----------------------------------------------------------------------
cat >empty.c <<'E'
#include "memlens.h"
int f(int n) {
    int s = 0;
    MEMLENS_ROI_BEGIN("");
    for (int i = 0; i < n; i++) s += i;
    MEMLENS_ROI_END("");
    return s;
}
int main(void) { return f(3) != 3; }
E
cat >call.c <<'E'
#include "memlens.h"
const char *name(void);
void g(void) {
    MEMLENS_ROI_BEGIN(name());
}
int main(void) { g(); return 0; }
E
cat >mismatch.c <<'E'
#include "memlens.h"
int f(int n) {
    int s = 0;
    MEMLENS_ROI_BEGIN("solve");
    for (int i = 0; i < n; i++) s += i;
    MEMLENS_ROI_END("slove");
    return s;
}
int main(void) { return f(3) != 3; }
E
# Markers declared by hand: nothing stops the name before the instrumenter sees it.
cat >raw.c <<'E'
void __memlens_roi_begin(const char *name);
void __memlens_roi_end(const char *name);
int f(int n) {
    int s = 0;
    __memlens_roi_begin("");
    for (int i = 0; i < n; i++) s += i;
    __memlens_roi_end("");
    return s;
}
int main(void) { return f(3) != 3; }
E

bad_name() { # <file> <line:col> <message> <driver> <flags...>
    local src=$1 where=$2 msg=$3 drv=$4
    shift 4
    rm -f out.o out.s out
    "$drv" "$@" "$src" >stdout.txt 2>err.txt
    local rc=$?
    [ $rc = 1 ] || fail "$src $*: exit status $rc, want 1 ($(head -3 err.txt))"
    grep -q "^${src}:${where}: error: ${msg}" err.txt ||
        fail "$src $*: no '${src}:${where}: error: ${msg}' in: $(cat err.txt)"
    ! grep -q "Stack dump\|PLEASE submit\|LLVM ERROR" err.txt || fail "$src $*: crash report"
    [ ! -e out.o ] && [ ! -e out.s ] && [ ! -e out ] || fail "$src $*: output written"
    no_temps
}
for drv in "$MC" "$BIN/memlens-c++"; do
    x=()
    [ "$drv" = "$MC" ] || x=(-x c++)
    for g in "" -g; do
        for mode in "-c -o out.o" "-S -o out.s" "-o out"; do
            # shellcheck disable=SC2086
            bad_name empty.c 4:5 "region name is empty" "$drv" -O2 $g $mode "${x[@]}"
            # shellcheck disable=SC2086
            bad_name call.c 4:5 "region name is not a string literal" "$drv" -O1 $g $mode "${x[@]}"
            # shellcheck disable=SC2086
            bad_name mismatch.c 6:5 'MEMLENS_ROI_END("slove") without a MEMLENS_ROI_BEGIN("slove")' \
                "$drv" -O2 $g $mode "${x[@]}"
        done
    done
done
# The instrumenter's own check, located through a second front-end run with line tables.
for g in "" -g; do
    bad_name raw.c 5:5 "region name is empty" "$MC" -O2 $g -c -o out.o
done
clang-14 -O2 -c -emit-llvm raw.c -o raw.bc || fail "raw.bc"
"$BIN/memlens" instrument raw.bc -o raw.ml.bc 2>err.txt
[ $? = 128 ] && grep -q "function 'f': region name is empty" err.txt ||
    fail "memlens instrument on an empty name: $(cat err.txt)"
[ ! -e raw.ml.bc ] || fail "memlens instrument wrote an output after an error"
# Good names around the bad checks still build and run.
sed 's/""/"sum"/' empty.c >good.c
"$MC" -O2 good.c -o good && MEMLENS_OUT=$PWD/prof ./good || fail "good names"
ls prof/good.*.mlp >/dev/null 2>&1 || fail "no profile from good names"
no_temps
echo "bad region names: clang-style errors, exit 1, nothing left behind"

# --- signals -----------------------------------------------------------------------------------
# A FIFO nobody writes keeps clang (or ld, for a linker script) waiting as long as the test needs.
mkfifo stuck.h stuck.ld
printf '#include "stuck.h"\nint main(void) { return 0; }\n' >wait-cc.c
printf 'int main(void) { return 0; }\n' >wait-ld.c
set -m # background jobs get default SIGINT (not ignored) and their own process group

# Waits (up to 60 s) for a process named $2 below pid $1; prints its pid.
find_below() {
    local i p kids
    for ((i = 0; i < 600; i++)); do
        kids=$(pgrep -P "$1")
        for p in $kids $(for k in $kids; do pgrep -P "$k"; done); do
            [[ "$(ps -o comm= -p "$p" 2>/dev/null)" == $2* ]] && { echo "$p"; return 0; }
        done
        sleep 0.1
    done
    return 1
}

# A failed case must not leave its processes waiting on the FIFOs.
cleanup_jobs() {
    [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null
    [ -n "$pg" ] && kill -KILL -- "-$pg" 2>/dev/null
    rm -rf "$W"
}
trap cleanup_jobs EXIT

signal_case() { # <signal> <process to wait for: clang|ld> <memlens-cc args...>
    local sig=$1 who=$2 kid rc i
    shift 2
    pid= pg=
    "$MC" "$@" </dev/null >/dev/null 2>sig-err.txt &
    pid=$!
    kid=$(find_below "$pid" "$who") || fail "SIG$sig: no $who below memlens-cc"
    pg=$(ps -o pgid= -p "$kid" | tr -d ' ')
    kill -s "$sig" "$pid"
    # memlens-cc gives clang 5 s before SIGKILL: 30 s without an exit is a hang, not slowness.
    for ((i = 0; i < 300; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -0 "$pid" 2>/dev/null && fail "SIG$sig during $who: memlens-cc still running 30 s after the signal"
    wait "$pid"
    rc=$?
    [ $rc = $((128 + $(kill -l "$sig"))) ] || fail "SIG$sig during $who: exit status $rc"
    for ((i = 0; i < 100; i++)); do
        pgrep -g "$pg" >/dev/null || break
        sleep 0.1
    done
    ! pgrep -g "$pg" >/dev/null || fail "SIG$sig during $who: $(pgrep -g "$pg" -l | tr '\n' ' ')still running"
    no_temps
    [ -z "$(ls | grep '\.memlens-.*\.tmp$')" ] || fail "SIG$sig: partial output left"
}
for sig in TERM INT HUP; do
    signal_case $sig clang -O2 -c wait-cc.c -o wait.o
    signal_case $sig clang -O2 wait-cc.c -o wait
    signal_case $sig ld -O2 wait-ld.c -Wl,-T,stuck.ld -o wait
done
set +m
echo "signals: clang and ld ended, temporaries removed, memlens-cc died of the signal"
