#!/bin/bash
# memlens top on a live two-thread program: both threads and the region appear with non-zero
# bandwidth in every frame; each frame's bytes agree with its executions (8n + 24 bytes read and
# 8n written per execution, give or take the executions open at each end); the bytes of all
# frames add up to no more than the final profile's; and the refusals (a process memlens does not
# profile, a pid that does not exist, a stale publication file, a process it may not read) each
# give their one-line message and exit 128.
. "$(dirname "$0")/region-lib.bash"
ml_setup

TOP=$MEMLENS_BUILD/bin/memlens
n=20000
ml_build topthr 2 -pthread "$ML_KERNELS/top-threads.c" || ml_finish
pids=()
stale=()
cleanup() {
    local p
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${stale[@]}"; do rm -f "$p"; done
    rm -rf "$ML_TMP"
}
trap cleanup EXIT

# start_prog <dir> [wrapper...]: starts the program writing its profile into <dir>; sets $prog
# to its pid and $pub to its file once it has published /dev/shm/memlens.<pid>.<token>.
start_prog() {
    local dir=$1 _
    shift
    mkdir -p "$dir" && chmod 777 "$dir"
    MEMLENS_OUT=$dir "$@" "$ML_TMP/topthr.ml" $n "$dir/stop" >"$dir/stdout" 2>"$dir/stderr" &
    prog=$!
    pids+=("$prog")
    for _ in $(seq 100); do
        # the runtime writes memlens.<pid>.<token>.tmp first, then renames it
        pub=$(compgen -G "/dev/shm/memlens.$prog.*" | grep -v '\.tmp$') && return 0
        sleep 0.05
    done
    ml_error "the program did not publish /dev/shm/memlens.$prog.*"
    return 1
}

# stop_prog <dir>: lets the program finish and waits for it.
stop_prog() {
    touch "$1/stop"
    wait "$prog" || ml_error "the program failed (exit $?)"
}

# expect_refusal <what> <expected message> <command...>: exit 128 and exactly that message.
expect_refusal() {
    local what=$1 want=$2 rc=0
    shift 2
    "$@" >"$ML_TMP/ref.out" 2>"$ML_TMP/ref.err" || rc=$?
    [ $rc = 128 ] || ml_error "$what: exit $rc, want 128"
    [ "$(cat "$ML_TMP/ref.err")" = "$want" ] ||
        ml_error "$what: message '$(cat "$ML_TMP/ref.err")', want '$want'"
    [ ! -s "$ML_TMP/ref.out" ] || ml_error "$what: printed on stdout"
}

# ---- live view of a running program ----
if start_prog "$ML_TMP/run"; then
    "$TOP" top --batch -d 0.2 -n 5 $prog >"$ML_TMP/table.txt" || ml_error "top --batch failed"
    "$TOP" top --csv -d 0.2 -n 5 $prog >"$ML_TMP/frames.csv" || ml_error "top --csv failed"
    stop_prog "$ML_TMP/run"
    [ ! -e "$pub" ] || ml_error "$pub left after exit"
    ml_check "top" '
import csv
n, table, frames = int(sys.argv[1]), open(sys.argv[2]).read(), sys.argv[3]
p = profile(sys.argv[4])
# Per execution: the copy (8n read, 8n written), plus the loads of n (global) and of j->src and
# j->dst (heap, through the argument), which the markers make the loop reload every execution.
per_rd, per_wr = 8 * n + 24, 8 * n
tids = {t["index"]: t["tid"] for t in p.threads}

# Table: five frames, each listing the region on threads 1 and 2 with non-zero bandwidth.
blocks = [b for b in table.split("\n\n") if b.strip()]
eq("table frames", len(blocks), 5)
for k, b in enumerate(blocks):
    lines = b.splitlines()
    ok("frame %d heading: %r" % (k + 1, lines[0]), lines[0].startswith("memlens top  pid ") and
       ("frame %d " % (k + 1)) in lines[0])
    rows = [l.split() for l in lines[2:]]
    seen = sorted(int(r[1]) for r in rows if r[0] == "top_copy")
    eq("frame %d threads of top_copy" % (k + 1), seen, [1, 2])
    for r in rows:
        ok("frame %d row %r: tid" % (k + 1, r), int(r[2]) == tids.get(int(r[1])))
        ok("frame %d row %r: non-zero bandwidth" % (k + 1, r), float(r[-2]) > 0 and float(r[-1]) > 0)

# CSV: exact bytes. Per frame and thread, bytes are per-execution bytes x executions within two
# executions: an execution open at a frame boundary is counted as it starts, its bytes as they
# happen, and the counters and region statistics of a thread are copied microseconds apart (one
# process_vm_readv) while it keeps running.
rows = list(csv.DictReader(open(frames)))
eq("csv frames", sorted({int(r["frame"]) for r in rows}), [1, 2, 3, 4, 5])
sums = {}
for r in rows:
    eq("csv region", r["region"], "top_copy")
    th, ex = int(r["thread"]), int(r["executions"])
    rd, wr, sec = int(r["bytes_read"]), int(r["bytes_written"]), float(r["region_seconds"])
    ok("csv thread %d tid" % th, int(r["tid"]) == tids.get(th))
    ok("frame %s thread %d: read %d vs %d executions" % (r["frame"], th, rd, ex),
       abs(rd - per_rd * ex) <= 2 * per_rd)
    ok("frame %s thread %d: written %d vs %d executions" % (r["frame"], th, wr, ex),
       abs(wr - per_wr * ex) <= 2 * per_wr)
    ok("frame %s thread %d: bytes and time" % (r["frame"], th), rd > 0 and wr > 0 and sec > 0)
    ok("frame %s thread %d: read GB/s = bytes / time" % (r["frame"], th),
       abs(float(r["read_gbs"]) - rd / sec / 1e9) <= 1e-6 + 1e-4 * rd / sec / 1e9)
    eq("frame %s thread %d borrowed" % (r["frame"], th), r["time_borrowed"], "0")
    s = sums.setdefault(th, [0, 0, 0])
    s[0] += rd; s[1] += wr; s[2] += ex
eq("csv threads", sorted(sums), [1, 2])
for th, (rd, wr, ex) in sums.items():
    t = p.totals("top_copy", th)
    ok("thread %d: top read %d <= final %d" % (th, rd, t["bytes_read"]), 0 < rd <= t["bytes_read"])
    ok("thread %d: top written %d <= final %d" % (th, wr, t["bytes_written"]),
       0 < wr <= t["bytes_written"])
    ok("thread %d: top executions %d <= final %d" % (th, ex, t["entries"]), ex <= t["entries"] + 1)
    eq("thread %d final bytes" % th, (t["bytes_read"], t["bytes_written"]),
       (per_rd * t["entries"], per_wr * t["entries"]))
' $n "$ML_TMP/table.txt" "$ML_TMP/frames.csv" "$ML_TMP/run"
    gone=$prog
    expect_refusal "exited process" "memlens: no process $gone" "$TOP" top -n 1 $gone
fi

# ---- refusals ----
sleep 30 &
plain=$!
pids+=("$plain")
expect_refusal "plain process" \
    "memlens: process $plain is not profiled by memlens (no /dev/shm/memlens.$plain.*)" \
    "$TOP" top -n 1 $plain
nopid=$(($(cat /proc/sys/kernel/pid_max) + 1))
expect_refusal "no such process" "memlens: no process $nopid" "$TOP" top -n 1 $nopid
expect_refusal "bad pid" "memlens: invalid process id 'x1'" "$TOP" top x1
expect_refusal "bad interval" \
    "memlens: invalid interval '0': expected seconds between 0.01 and 86400" "$TOP" top -d 0 1

# A publication file left by another process (a killed one whose pid was reused).
if start_prog "$ML_TMP/stale"; then
    planted=/dev/shm/memlens.$plain.${pub##*.}
    cp "$pub" "$planted"
    stale+=("$planted")
    expect_refusal "stale file" "memlens: process $plain is not profiled by memlens \
('$planted' is stale: left by an earlier process with that pid)" "$TOP" top -n 1 $plain
    rm -f "$planted"
    stop_prog "$ML_TMP/stale"
fi
kill $plain 2>/dev/null

# A process of another user: as root, run the program as nobody and memlens top without
# capabilities (it cannot open the 0600 file), then with only CAP_DAC_READ_SEARCH (it opens the
# file, and process_vm_readv refuses).
perm="memlens: cannot read process %s: permission denied (run as the same user, or check \
/proc/sys/kernel/yama/ptrace_scope)"
if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null; then
    echo "skipped the other-user part: needs root and setpriv"
elif chmod 755 "$ML_TMP" && start_prog "$ML_TMP/other" setpriv --reuid=65534 --regid=65534 --clear-groups --; then
    # shellcheck disable=SC2059
    want=$(printf "$perm" $prog)
    expect_refusal "no capabilities" "$want" \
        setpriv --bounding-set=-all --inh-caps=-all -- "$TOP" top -n 1 $prog
    expect_refusal "file readable, memory not" "$want" \
        setpriv --bounding-set=-all,+dac_read_search --inh-caps=-all -- "$TOP" top -n 1 $prog
    stop_prog "$ML_TMP/other"
fi
ml_finish
