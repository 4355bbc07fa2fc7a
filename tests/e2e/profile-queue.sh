#!/bin/bash
# memlens profile end to end with the stats module: a producer program appends known events
# through the queue's producer ABI; every event must arrive once, unchanged, whatever the
# number of workers, threads and slots, and however the program ends (exit, exit from a
# thread, SIGSEGV, abort, SIGKILL, fork); a dead backend must not hang the program.
. "$(dirname "$0")/../lib/common.sh"
ml_require_cc
src=$ML_ROOT/tests/e2e/profile/queue-prog.c
check=$ML_ROOT/tests/e2e/profile/check.py
rt=$ML_BUILD/lib/libmemlens-rt.a
for o in 0 2; do
    clang-14 -O$o -g -I"$ML_ROOT/src" -o "$T/q$o" "$src" -Wl,--whole-archive "$rt" \
        -Wl,--no-whole-archive -lpthread -ldl || fail "cannot build queue-prog at -O$o"
done

# prof NAME ARGS... : memlens profile into $T/NAME, status in $rc, stdout in $T/NAME.out
prof() {
    local name=$1
    shift
    rm -rf "$T/$name"
    "$MEMLENS" profile -q -m stats -o "$T/$name" "$@" >"$T/$name.out" 2>"$T/$name.err"
    rc=$?
}

# verify NAME SPEC : exactly one profile in $T/NAME, checked by check.py
verify() {
    local js
    js=$(ls "$T/$1"/*.stats.json 2>/dev/null)
    [ "$(echo "$js" | wc -w)" = 1 ] || fail "$1: expected one profile, got '$js' ($(cat "$T/$1.err"))"
    python3 "$check" "$js" "$2" || fail "$1: check failed ($(cat "$T/$1.err"))"
}

n=200000
for o in 0 2; do
    for w in 1 2 3; do
        prof thr$o$w -w $w -- "$T/q$o" threads $n 3
        [ $rc = 0 ] || fail "threads -O$o -w $w: status $rc: $(cat "$T/thr$o$w.err")"
        verify thr$o$w "{\"streams\": [[0,$n],[1,$n],[2,$((n+1))],[3,$((n+2))]], \"complete\": true,
            \"ended\": \"exit 0\", \"workers\": $w, \"threads\": 4, \"blob\": \"$(cut -d' ' -f2- "$T/thr$o$w.out")\"}"
    done
done
# the program's output is the same as without memlens
"$T/q2" threads $n 3 >"$T/plain.out" || fail "plain run failed"
cmp -s "$T/plain.out" "$T/thr22.out" || fail "program output differs under memlens profile"

# the sanitized memlens: no finding with 3 workers, nor with a crashing program
A=$ML_BUILD/asan/bin/memlens
if [ -x "$A" ]; then
    export ASAN_OPTIONS=halt_on_error=1:exitcode=99 UBSAN_OPTIONS=halt_on_error=1:exitcode=99
    rm -rf "$T/asan"
    "$A" profile -q -m stats -w 3 -o "$T/asan" -- "$T/q2" threads 50000 3 >/dev/null 2>"$T/asan.err"
    [ $? = 0 ] || fail "memlens (asan) profile: $(cat "$T/asan.err")"
    "$A" profile -q -m stats -w 2 -o "$T/asan" -- "$T/q2" segv 50000 2 >/dev/null 2>"$T/asan.err"
    [ $? = 139 ] || fail "memlens (asan) profile of a crash: $(cat "$T/asan.err")"
    unset ASAN_OPTIONS UBSAN_OPTIONS
fi

# threads one after another with two slots: slots of ended threads are reused, nothing lost
prof seq --max-threads 2 -- "$T/q2" sequential 50000 20
spec=$(python3 -c "print([[0,50000]] + [[t+1, 50000+t] for t in range(20)])")
[ $rc = 0 ] && verify seq "{\"streams\": $spec, \"complete\": true, \"threads\": 21}" ||
    fail "sequential: status $rc"

# five threads alive at once, two slots: three threads are counted lost, with their events
prof lost --max-threads 2 -- "$T/q2" threads 20000 4
verify lost '{"streams": [[0,20000],[1,20000],[2,20001],[3,20002],[4,20003]], "lost": 3,
    "complete": false}'

# every way to end: all events up to the end arrive, including partly filled chunks
prof segv -- "$T/q2" segv 100003 2
[ $rc = 139 ] || fail "segv: status $rc"
verify segv '{"streams": [[0,100003],[1,100003],[2,100004]], "complete": false,
    "ended": "signal 11 (SIGSEGV)"}'
# two workers dealt the chunks: worker 0 reads the partly filled ones, once
prof segv2 -w 2 -- "$T/q2" segv 100003 2
[ $rc = 139 ] || fail "segv -w 2: status $rc"
verify segv2 '{"streams": [[0,100003],[1,100003],[2,100004]], "complete": false,
    "ended": "signal 11 (SIGSEGV)"}'
prof abort -- "$T/q0" abort 100003 2
[ $rc = 134 ] || fail "abort: status $rc"
verify abort '{"streams": [[0,100003],[1,100003],[2,100004]], "complete": false,
    "ended": "signal 6 (SIGABRT)"}'
prof texit -- "$T/q2" thread-exit 100003 2
[ $rc = 3 ] || fail "thread-exit: status $rc"
verify texit '{"streams": [[0,100003],[1,100003],[2,100004]], "complete": true, "ended": "exit 3"}'
prof fork -- "$T/q2" fork 70001
[ $rc = 0 ] || fail "fork: status $rc"
verify fork '{"streams": [[0,70001,2]], "complete": true, "forks": 1}'

# SIGKILL: nothing runs in the program, yet every event it appended arrives
rm -rf "$T/kill"
"$MEMLENS" profile -q -m stats -o "$T/kill" -- "$T/q2" kill 100003 2 >"$T/kill.out" 2>"$T/kill.err" &
mp=$!
for i in $(seq 2400); do grep -qs ready "$T/kill.out" && break; sleep 0.05; done
pid=$(awk '/^ready/ {print $2}' "$T/kill.out")
[ -n "$pid" ] || fail "kill: the program never said it was ready"
kill -KILL "$pid"
wait $mp
rc=$?
[ $rc = 137 ] || fail "kill: status $rc"
verify kill '{"streams": [[0,100003],[1,100003],[2,100004]], "complete": false,
    "ended": "signal 9 (SIGKILL)"}'

# the backend dies: the program detaches and runs to its end (16M more events: many chunks)
rm -rf "$T/bk"
"$MEMLENS" profile -q -m stats -o "$T/bk" -- "$T/q2" forever 16000000 >"$T/bk.out" 2>"$T/bk.err" &
mp=$!
for i in $(seq 2400); do [ -s "$T/bk.out" ] && break; sleep 0.05; done
pid=$(head -1 "$T/bk.out")
[ -n "$pid" ] || fail "forever: no pid"
kill -KILL $mp
wait $mp 2>/dev/null
kill -USR1 "$pid"
# (its end is seen in its output: as an orphan it is reaped by whoever adopts it)
for i in $(seq 1200); do grep -q done "$T/bk.out" && break; sleep 0.1; done
grep -q done "$T/bk.out" || { kill -KILL "$pid"; fail "the program hung after the backend died"; }

# a shell in between: the program it starts attaches; the shell's status is passed through
prof sh -- sh -c "'$T/q2' threads 1000 1; exit 5"
[ $rc = 5 ] || fail "sh: status $rc"
verify sh '{"streams": [[0,1000],[1,1000]], "complete": true}'

# a program that cannot run: one line, 127, no warning about events
"$MEMLENS" profile -q -m stats -o "$T/none" -- "$T/does-not-exist" >/dev/null 2>"$T/nx.err"
[ $? = 127 ] && [ "$(wc -l <"$T/nx.err")" = 1 ] && grep -q "cannot run" "$T/nx.err" ||
    fail "missing program: $(cat "$T/nx.err")"

# a program without events: a warning, its status passed through, no files
prof none -- sh -c 'exit 7'
[ $rc = 7 ] || fail "none: status $rc"
grep -q "sent no events" "$T/none.err" || fail "none: no warning"
[ -z "$(ls "$T/none" 2>/dev/null)" ] || fail "none: files written"

# files: 0600, another run's files never replaced, no link followed
prof thr22b -w 2 -- "$T/q2" threads 1000 1
f=$(ls "$T/thr22b"/*.stats.csv)
[ "$(stat -c %a "$f")" = 600 ] || fail "profile mode $(stat -c %a "$f")"
if [ "$(id -u)" = 0 ]; then # another user's link as the output directory is not followed
    ln -s "$T/thr22b" "$T/link"
    chown -h nobody "$T/link"
    "$MEMLENS" profile -q -m stats -o "$T/link" -- "$T/q2" threads 10 1 >/dev/null 2>"$T/link.err"
    [ $? = 128 ] && grep -q "symbolic link owned by another user" "$T/link.err" ||
        fail "another user's link as output directory was followed: $(cat "$T/link.err")"
fi

# bad usage: one line, status 128 or 129
for args in "-m nope -- $T/q2" "-- $T/q2" "-m stats -w 0 -- $T/q2" "-m stats --chunk-size 4k -- $T/q2" \
    "-m stats,stats -- $T/q2"; do
    "$MEMLENS" profile -q -o "$T/bad" $args >/dev/null 2>"$T/bad.err"
    r=$?
    { [ $r = 128 ] || [ $r = 129 ] || [ $r = 127 ]; } && [ -s "$T/bad.err" ] ||
        fail "'memlens profile $args': status $r, message '$(cat "$T/bad.err")'"
done
echo ok
