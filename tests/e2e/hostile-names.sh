#!/bin/bash
# Names unique per process start and the live-view file (issue 10 items 4 and 5; docs/files.md):
# two processes with the same pid (pid namespaces, as in two containers, one after the other and
# at the same time) keep two profiles; a fork child gets its own token; a FIFO planted in
# /dev/shm never hangs memlens top; files another user planted at a victim's future pid neither
# stop it from publishing nor mislead top; a failed publication says so on stderr.
. "$(dirname "$0")/../lib/common.sh"
ml_require_cc
$MLCC -O2 -g -o "$T/files" "$ML_ROOT/tests/e2e/runtime/files.c" -pthread || fail "memlens-cc failed"
$MLCC -O2 -g -o "$T/life" "$ML_ROOT/tests/e2e/runtime/lifecycle.c" -pthread || fail "memlens-cc failed"
n=4000
heap=$((n * 8))
chmod 755 "$T"
planted=()
pids=()
cleanup() {
    local p
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${planted[@]}"; do rm -f "$p"; done
    rm -rf "$T"
}
trap cleanup EXIT
skipped=0
part_skipped() {
    echo "skipped: $*"
    skipped=$((skipped + 1))
}

# ---- item 5: a fork child is a new process start ----
MEMLENS_OUT=$T/fork "$T/life" fork 1000 >/dev/null || fail "fork run failed"
check_py "$T/fork" "len(P)==2 and len({p.token for p in P})==2 and len({p.pid for p in P})==2 and \
all(p.path.endswith('.%016x.mlp' % p.token) for p in P)"

# ---- item 5: the same pid twice, as in two containers ----
ns=0
if [ "$(id -u)" = 0 ] && unshare --pid --fork --mount-proc true 2>/dev/null; then
    ns=1
    for _ in 1 2; do
        MEMLENS_OUT=$T/same unshare --pid --fork --mount-proc "$T/files" plain $n >/dev/null ||
            fail "run in a pid namespace failed"
    done
    # and at the same time, racing for the same directory
    MEMLENS_OUT=$T/same unshare --pid --fork --mount-proc "$T/files" plain $n >/dev/null &
    MEMLENS_OUT=$T/same unshare --pid --fork --mount-proc "$T/files" plain $n >/dev/null ||
        fail "run in a pid namespace failed"
    wait $! || fail "run in a pid namespace failed"
    check_py "$T/same" "len(P)==4 and {p.pid for p in P}=={1} and len({p.token for p in P})==4 \
and all(p.totals('work')['rd_heap']==$heap for p in P)"
else
    part_skipped "pid namespaces (needs root and unshare)"
fi

# ---- item 4: a FIFO under a process's name does not hang memlens top ----
sleep 60 &
plain=$!
pids+=("$plain")
for f in /dev/shm/memlens.$plain /dev/shm/memlens.$plain.0123456789abcdef; do
    mkfifo "$f" || fail "cannot make a FIFO in /dev/shm"
    planted+=("$f")
done
rc=0
timeout 20 "$MEMLENS" top -n 1 $plain >/dev/null 2>"$T/top.err" || rc=$?
[ $rc != 124 ] || fail "memlens top hangs on a FIFO in /dev/shm"
[ $rc = 128 ] || fail "memlens top on a FIFO: exit $rc, want 128"
[ "$(cat "$T/top.err")" = "memlens: process $plain is not profiled by memlens \
('/dev/shm/memlens.$plain.0123456789abcdef' is not a regular file)" ] ||
    fail "memlens top on a FIFO: $(cat "$T/top.err")"
kill $plain

# ---- item 4: another user's files at the victim's future pid ----
# In a new pid namespace the pids are known in advance: plant files owned by uid 1 under the
# names of the next pids, then run the victim as nobody (sticky /dev/shm: it cannot remove them).
# The namespace gets its own sticky tmpfs on /dev/shm, so the planted names never reach
# processes outside it (another checkout's tests, a real profiled program).
if [ $ns = 1 ] && command -v setpriv >/dev/null; then
    mkdir -m 777 "$T/victim"
    cat >"$T/victim.sh" <<EOF
mount -t tmpfs -o mode=1777,size=1m tmpfs /dev/shm || exit 90
for p in \$(seq 2 40); do
    for f in /dev/shm/memlens.\$p /dev/shm/memlens.\$p.tmp; do
        echo junk >"\$f" && chown 1:1 "\$f" || exit 91
    done
done
MEMLENS_OUT=$T/victim setpriv --reuid=65534 --regid=65534 --clear-groups "$T/files" wait $n "$T/go" \
    >"$T/victim.out" 2>"$T/victim.err" &
v=\$!
for _ in \$(seq 200); do
    compgen -G "/dev/shm/memlens.\$v.*" | grep -qv '\.tmp\$' && break
    sleep 0.05
done
"$MEMLENS" top -b -n 1 -d 0.1 \$v >"$T/top.out" 2>"$T/top.err"
echo \$? >"$T/top.rc"
touch "$T/go"
wait \$v
EOF
    unshare --pid --fork --mount-proc bash "$T/victim.sh" || fail "victim: exit $?"
    [ "$(cat "$T/top.rc")" = 0 ] || fail "planted files: memlens top: $(cat "$T/top.err")"
    grep -q "^memlens top  pid [0-9]* (files)" "$T/top.out" ||
        fail "planted files: top printed $(cat "$T/top.out")"
    [ ! -s "$T/victim.err" ] || fail "planted files: the victim said $(cat "$T/victim.err")"
    check_py "$T/victim" "len(P)==1 and P[0].totals('work')['rd_heap']==$heap"
else
    part_skipped "planted files at a future pid (needs pid namespaces and setpriv)"
fi

# ---- item 4: a failed publication is not silent ----
if [ $ns = 1 ] && unshare --mount true 2>/dev/null; then
    mkdir "$T/ro"
    unshare --mount bash -c "mount -t tmpfs -o ro,size=64k tmpfs /dev/shm &&
        MEMLENS_OUT=$T/ro exec '$T/files' plain $n" >"$T/ro.out" 2>"$T/ro.err" ||
        fail "read-only /dev/shm: the program failed"
    grep -qxE "memlens: live view off: cannot publish '/dev/shm/memlens\.[0-9]+\.[0-9a-f]{16}': \
Read-only file system" "$T/ro.err" || fail "read-only /dev/shm: stderr '$(cat "$T/ro.err")'"
    [ "$(wc -l <"$T/ro.err")" = 1 ] || fail "read-only /dev/shm: more than one line"
    check_py "$T/ro" "len(P)==1 and P[0].totals('work')['rd_heap']==$heap"
else
    part_skipped "read-only /dev/shm (needs mount namespaces)"
fi
[ $skipped = 0 ] || echo "$skipped part(s) skipped"
echo ok
