#!/bin/bash
# Instrumented shared libraries and plugins (issue 10, item 6): a host (built by memlens-cc, and
# by plain clang) loads an instrumented plugin, runs its region on the main thread, on the
# plugin's own threads and on a host thread older than the load, unloads it and loads it again.
# Output and exit status are those of the program built without memlens; one profile holds
# every load's counts (closed forms), also when the program dies of a signal after an unload.
. "$(dirname "$0")/../lib/common.sh"
ml_require_cc
dir=$ML_ROOT/tests/e2e/runtime
n=1000 nt=3
$MLCC -O2 -fPIC -shared -o "$T/plugin.so" "$dir/plugin.c" -pthread || fail "memlens-cc -shared failed"
$MLCC -O2 -fPIC -shared --ml-exact -o "$T/plugin-exact.so" "$dir/plugin.c" -pthread ||
    fail "memlens-cc -shared --ml-exact failed"
$MLCC -O2 -fPIC -shared --ml-all -o "$T/plugin-all.so" "$dir/plugin.c" -pthread ||
    fail "memlens-cc -shared --ml-all failed"
# as libtool links C++ libraries: -nostdlib, every library named, and no undefined symbols
$MLCC -O2 -fPIC -shared -nostdlib -Wl,-z,defs -o "$T/plugin-nostdlib.so" "$dir/plugin.c" -lc ||
    fail "memlens-cc -shared -nostdlib -Wl,-z,defs failed"
clang-14 -O2 -fPIC -shared -I"$ML_ROOT/include" -o "$T/plugin-plain.so" "$dir/plugin.c" -pthread ||
    fail "clang-14 -shared failed"
$MLCC -O2 -o "$T/host" "$dir/plugin-host.c" -pthread -ldl || fail "memlens-cc host failed"
clang-14 -O2 -I"$ML_ROOT/include" -o "$T/host-plain" "$dir/plugin-host.c" -pthread -ldl ||
    fail "clang-14 host failed"

# The executable exports the runtime's entry points; the library needs the shared runtime.
for s in __memlens_enter __memlens_exit __memlens_register __memlens_unregister pthread_create; do
    nm -D --defined-only "$T/host" | grep -qw "$s" || fail "the executable does not export $s"
done
readelf -d "$T/plugin.so" | grep -q 'NEEDED.*libmemlens-rt.so' ||
    fail "the instrumented library does not need libmemlens-rt.so"

# case <name> <host> <plugin> <rounds> <keep> [term]: runs it (60 s at most: a module list
# that loops hangs), compares stdout and status with the plain build's; profiles in $T/<name>
case_run() {
    local name=$1 host=$2 so=$3 rounds=$4 keep=$5 end=${6:-exit} want=7 rc=0 prc=0
    [ "$end" = term ] && want=$((128 + 15))
    # (waited for as background jobs: bash reports a foreground death by SIGTERM)
    MEMLENS_OUT=$T/$name timeout 60 "$T/$host" "$T/$so" $n $rounds $nt $keep $end \
        >"$T/$name.stdout" 2>"$T/$name.stderr" &
    wait $! || rc=$?
    "$T/host-plain" "$T/plugin-plain.so" $n $rounds $nt $keep $end >"$T/$name.want" &
    wait $! || prc=$?
    [ $rc = 124 ] && fail "$name: hangs"
    [ $rc = $want ] && [ $prc = $want ] || fail "$name: exit status $rc (plain $prc), want $want"
    cmp -s "$T/$name.stdout" "$T/$name.want" ||
        fail "$name: output differs: $(cat "$T/$name.stdout" "$T/$name.stderr")"
    [ ! -s "$T/$name.stderr" ] || fail "$name: stderr: $(cat "$T/$name.stderr")"
    "$MEMLENS" report "$T/$name" >/dev/null || fail "$name: memlens report rejects the profile"
}

# per load: plugin_sum on main, on nt plugin threads and on the host's helper thread
per=$((2 + nt))
for host in host host-plain; do
    case_run $host-2 $host plugin.so 2 0
    case_run $host-keep $host plugin.so 3 1
    case_run $host-20 $host plugin.so 20 0
    for r in 2 3 20; do
        k=$([ $r = 3 ] && echo keep || echo $r)
        check_py "$T/$host-$k" "(len(P) == 1 and P[0].totals('plug')['entries'] == $r * $per and
            P[0].totals('plug')['rd_heap'] == $r * $per * $n * 8 and
            ('host' not in P[0].regions or P[0].totals('host')['rd_heap'] == $n * 8) and
            ('host' in P[0].regions) == ('$host' == 'host'))"
    done
    # each load's counts on the helper thread, created before any load: one call per load
    check_py "$T/$host-2" "sorted(P[0].totals('plug', t['index'])['entries'] for t in P[0].threads
        if P[0].totals('plug', t['index'])['entries'])[-2:] == [2, 2]"
    case_run $host-term $host plugin.so 2 0 term
    check_py "$T/$host-term" "(len(P) == 1 and P[0].flags & 1 and
        P[0].totals('plug')['rd_heap'] == 2 * $per * $n * 8)"
    case_run $host-exact $host plugin-exact.so 2 0
    check_py "$T/$host-exact" "(P[0].exact_totals('plug')['rd_heap'] == 2 * $per * $n * 8 ==
        P[0].totals('plug')['rd_heap'])"
    case_run $host-nostdlib $host plugin-nostdlib.so 2 0
    check_py "$T/$host-nostdlib" "P[0].totals('plug')['rd_heap'] == 2 * $per * $n * 8"
    case_run $host-all $host plugin-all.so 2 0
    check_py "$T/$host-all" "(P[0].totals('plug')['rd_heap'] == 2 * $per * $n * 8 and
        P[0].function('plugin_sum')['calls'] + P[0].function('worker')['calls'] == 2 * $per)"
done
echo ok
