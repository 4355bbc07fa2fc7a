#!/bin/bash
# Where and how the runtime writes its profile (issue 10 items 1, 7, 17, 18; docs/files.md):
# links planted at the temporary and final names or as the output directory are never followed
# or replaced; files are 0600 in a 0700 directory; MEMLENS_OUT is resolved at start (chdir,
# closed descriptors, a deleted directory); the program name and cmdline survive pthread_exit
# from main and a chroot; an over-long MEMLENS_OUT and every failure give one line with the
# reason; memlens run says where the profile went.
. "$(dirname "$0")/../lib/common.sh"
ml_require_cc
$MLCC -O2 -g -o "$T/files" "$ML_ROOT/tests/e2e/runtime/files.c" -pthread || fail "memlens-cc failed"
n=4000
heap=$((n * 8))
chmod 755 "$T"

# run <dir> <mode> [arg]: runs the program in <dir>; stdout, stderr and status in $T/last.*
run() {
    local dir=$1
    shift
    (cd "$dir" && exec "$T/files" "$1" $n "${@:2}") >"$T/last.out" 2>"$T/last.err"
    echo $? >"$T/last.rc"
}
expect_ok() { # <what> <profiles wanted in dir> <dir> [executions]
    [ "$(cat "$T/last.rc")" = 0 ] || fail "$1: exit $(cat "$T/last.rc"): $(cat "$T/last.err")"
    [ ! -s "$T/last.err" ] || fail "$1: unexpected stderr: $(cat "$T/last.err")"
    check_py "$3" "len(P)==$2 and all(p.totals('work')['rd_heap']==${4:-1}*$heap for p in P)"
}
expect_err() { # <what> <exact stderr>
    [ "$(cat "$T/last.rc")" = 0 ] || fail "$1: the program's exit status changed to $(cat "$T/last.rc")"
    [ "$(cat "$T/last.err")" = "$2" ] || fail "$1: stderr '$(cat "$T/last.err")', want '$2'"
}
py() { PYTHONPATH=$ML_ROOT/tests/lib python3 -c "$@"; }

# ---- names, modes, identity ----
mkdir "$T/a"
MEMLENS_OUT= run "$T/a" plain
expect_ok "default directory" 1 "$T/a/memlens-out"
[ "$(stat -c %a "$T/a/memlens-out")" = 700 ] || fail "created output directory is not 0700"
f=$(ls "$T/a/memlens-out")
[[ $f =~ ^files\.([0-9]+)\.([0-9a-f]{16})\.mlp$ ]] || fail "profile name '$f' is not <prog>.<pid>.<token>.mlp"
[ "$(stat -c %a "$T/a/memlens-out/$f")" = 600 ] || fail "profile is not mode 0600"
py "
import mlp, sys
p = mlp.load_dir('$T/a/memlens-out')[0]
assert (p.pid, p.token) == (${BASH_REMATCH[1]}, 0x${BASH_REMATCH[2]}), (p.pid, hex(p.token))
assert p.meta['program'] == '$T/files', p.meta
assert p.meta['cmdline'] == '$T/files plain $n', p.meta
assert p.rank is None and p.version == 3" || fail "header, program or cmdline wrong"

# ---- item 1: links at the temporary and final names, old and new style, are not followed ----
mkdir "$T/b" "$T/b/out"
for v in v1 v2 v3 v4; do echo precious >"$T/b/$v"; done
touch "$T/b/unused"
(cd "$T/b" && MEMLENS_OUT=$T/b/out exec "$T/files" wait $n "$T/b/go") >"$T/b.out" 2>"$T/b.err" &
pid=$!
for _ in $(seq 200); do
    pub=$(compgen -G "/dev/shm/memlens.$pid.*" | grep -v '\.tmp$') && break # .tmp: renamed soon
    [ -e /dev/shm/memlens.$pid ] && break # a memlens from before tokens: plant the old names
    sleep 0.05
done
tok=${pub##*.}
ln -s "$T/b/v3" "$T/b/out/files.$pid.mlp.tmp"
ln -s "$T/b/v4" "$T/b/out/files.$pid.mlp"
if [ -n "$pub" ]; then
    ln -s "$T/b/v1" "$T/b/out/files.$pid.$tok.mlp.tmp"
    ln -s "$T/b/v2" "$T/b/out/files.$pid.$tok.mlp"
fi
touch "$T/b/go"
wait $pid || fail "planted links: the program failed"
for v in v1 v2 v3 v4; do
    [ "$(cat "$T/b/$v")" = precious ] || fail "planted link: $v was overwritten"
done
[ -n "$pub" ] || fail "the program did not publish /dev/shm/memlens.$pid.*"
[ ! -s "$T/b.err" ] || fail "planted links: stderr $(cat "$T/b.err")"
py "
import glob, mlp, os, re
fs = [f for f in glob.glob('$T/b/out/*') if not os.path.islink(f)]
assert len(fs) == 1 and re.fullmatch(r'files\.$pid\.[0-9a-f]{16}\.mlp', os.path.basename(fs[0])), fs
assert not fs[0].endswith('.$tok.mlp'), fs
p = mlp.Profile(fs[0])
assert p.totals('work')['rd_heap'] == $heap and p.token == 0x$tok" ||
    fail "planted links: no profile under a fresh name"

# ---- item 1: a symlinked output directory ----
mkdir -p "$T/c/cwd" "$T/c/victim"
ln -s ../victim "$T/c/cwd/memlens-out"
run "$T/c/cwd" plain
expect_ok "the user's own link" 1 "$T/c/victim"
rm -f "$T/c/victim"/*
if [ "$(id -u)" = 0 ]; then
    chown -h 65534:65534 "$T/c/cwd/memlens-out"
    run "$T/c/cwd" plain
    expect_err "another user's link" "memlens: cannot write profile to '$T/c/cwd/memlens-out': \
'$T/c/cwd/memlens-out' is a symbolic link owned by another user"
    MEMLENS_OUT=$T/c/cwd/memlens-out/sub run "$T/c/cwd" plain
    expect_err "another user's link on the way" "memlens: cannot write profile to \
'$T/c/cwd/memlens-out/sub': '$T/c/cwd/memlens-out' is a symbolic link owned by another user"
    [ -z "$(ls -A "$T/c/victim")" ] || fail "another user's link was followed"
else
    echo "skipped the other user's link: needs root"
fi

# ---- item 7: resolved at start ----
mkdir -p "$T/d/elsewhere"
run "$T/d" chdir "$T/d/elsewhere"
expect_ok "chdir, default directory" 1 "$T/d/memlens-out"
MEMLENS_OUT=rel run "$T/d" chdir "$T/d/elsewhere"
expect_ok "chdir, relative MEMLENS_OUT" 1 "$T/d/rel"
[ -z "$(ls -A "$T/d/elsewhere")" ] || fail "chdir: wrote into the new current directory"
MEMLENS_OUT=$T/d/closed run "$T/d" closeall
expect_ok "every descriptor closed" 1 "$T/d/closed"
MEMLENS_OUT=$T/d/dup run "$T/d" dup2
expect_ok "every descriptor replaced" 1 "$T/d/dup"
mkdir -p "$T/e"
MEMLENS_OUT=$T/e/out run "$T/e" rmdir "$T/e/out"
expect_err "deleted output directory" \
    "memlens: cannot write profile to '$T/e/out': the directory was deleted while the program ran"
# memlens run passes an absolute directory and lists what the program wrote, from anywhere.
(cd "$T/d/elsewhere" && "$MEMLENS" run -o ../viarun -- "$T/files" chdir $n /) >/dev/null 2>"$T/run.err" ||
    fail "memlens run failed"
grep -qE "^memlens: profile '$T/d/elsewhere/../viarun/files\.[0-9]+\.[0-9a-f]{16}\.mlp'$" "$T/run.err" ||
    fail "memlens run: $(cat "$T/run.err")"
(cd "$T/e" && "$MEMLENS" run -o "$T/e/out" -- "$T/files" rmdir $n "$T/e/out") >/dev/null 2>"$T/run.err"
[ "$(cat "$T/run.err")" = "memlens: cannot write profile to '$T/e/out': the directory was deleted \
while the program ran
memlens: no profile written to '$T/e/out' (was the program built with memlens-cc?)" ] ||
    fail "memlens run, no profile: $(cat "$T/run.err")"

# ---- item 17: program name and cmdline from the start ----
MEMLENS_OUT=$T/f run "$T" ptexit
expect_ok "pthread_exit from main" 1 "$T/f" 2
py "
import mlp
(p,) = mlp.load_dir('$T/f')
assert p.path.split('/')[-1].startswith('files.%d.' % p.pid), p.path
assert p.meta['cmdline'] == '$T/files ptexit $n', p.meta" || fail "pthread_exit: name or cmdline"
if [ "$(id -u)" = 0 ] && command -v chroot >/dev/null; then
    root=$T/root
    mkdir -p "$root/out"
    cp "$T/files" "$root/files"
    for lib in $(ldd "$T/files" | grep -o '/[^ ]*'); do
        mkdir -p "$root$(dirname "$lib")" && cp "$lib" "$root$lib"
    done
    MEMLENS_OUT=/out chroot "$root" /files plain $n "it's" >"$T/last.out" 2>"$T/last.err" ||
        fail "chroot run failed: $(cat "$T/last.err")"
    check_py "$root/out" "len(P)==1 and P[0].path.split('/')[-1].startswith('files.') and \
P[0].meta['program']=='/files' and P[0].meta['cmdline']==\"/files plain $n 'it'\\\\''s'\""
else
    echo "skipped the chroot: needs root"
fi
long=$T/$(printf 'x%.0s' $(seq 4100))
MEMLENS_OUT=$long run "$T" plain
expect_err "over-long MEMLENS_OUT" "memlens: cannot write profile: MEMLENS_OUT is longer than 4095 \
bytes (with the current directory in front when relative)"
deep=$T/deep
while [ ${#deep} -lt 3900 ]; do deep=$deep/$(printf 'd%.0s' $(seq 100)); done
MEMLENS_OUT=$deep run "$T" plain
expect_ok "a 3900-byte MEMLENS_OUT, not cut" 1 "$deep"
[ -z "$(find "$T" -name '*.mlp' -path '*xxxx*')" ] || fail "over-long MEMLENS_OUT wrote somewhere"

# ---- item 18: the reason, with its errno text ----
touch "$T/plainfile"
MEMLENS_OUT=$T/plainfile/sub run "$T" plain
expect_err "ENOTDIR" "memlens: cannot write profile to '$T/plainfile/sub': '$T/plainfile': Not a directory"
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
    mkdir -p "$T/rootonly"
    chmod 755 "$T/rootonly"
    (cd "$T" && MEMLENS_OUT=$T/rootonly/out setpriv --reuid=65534 --regid=65534 --clear-groups \
        "$T/files" plain $n) >"$T/last.out" 2>"$T/last.err"
    echo $? >"$T/last.rc"
    expect_err "EACCES" "memlens: cannot write profile to '$T/rootonly/out': Permission denied"
else
    echo "skipped EACCES: needs root and setpriv"
fi
[ -z "$(find "$T" -type f -name '*.tmp')" ] || fail "temporary files left behind"
echo ok
