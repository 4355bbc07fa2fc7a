#!/bin/bash
# The profile writer on a full and on a read-only file system (issue 10 item 18): one line with
# the errno text ("No space left on device", "Read-only file system"), no temporary file left,
# the program's output and exit status unchanged. Needs to mount a small tmpfs (root): else
# skipped.
. "$(dirname "$0")/../lib/common.sh"
ml_require_cc
mnt=$T/mnt
mkdir "$mnt"
mount -t tmpfs -o size=256k,mode=755 tmpfs "$mnt" 2>/dev/null || skip "cannot mount a tmpfs here"
trap 'umount "$mnt" 2>/dev/null; rm -rf "$T"' EXIT
$MLCC -O2 -g -o "$T/files" "$ML_ROOT/tests/e2e/runtime/files.c" -pthread || fail "memlens-cc failed"
clang-14 -O2 -I"$ML_ROOT/include" -o "$T/plain" "$ML_ROOT/tests/e2e/runtime/files.c" -pthread ||
    fail "clang-14 failed"
"$T/plain" plain 1000 >"$T/want.out"

# run <MEMLENS_OUT>: stdout, stderr and status of the instrumented program in $T/last.*
run() {
    MEMLENS_OUT=$1 "$T/files" plain 1000 >"$T/last.out" 2>"$T/last.err"
    echo $? >"$T/last.rc"
    [ "$(cat "$T/last.rc")" = 0 ] || fail "$1: the program's exit status changed to $(cat "$T/last.rc")"
    cmp -s "$T/want.out" "$T/last.out" || fail "$1: the program's output changed"
}

mkdir "$mnt/out"
run "$mnt/out"
check_py "$mnt/out" "len(P)==1"
rm -f "$mnt/out"/*
# Fill it: the empty temporary file can be created, its data cannot be written.
dd if=/dev/zero of="$mnt/fill" bs=4k 2>/dev/null
run "$mnt/out"
grep -qxE "memlens: cannot write profile '$mnt/out/files\.[0-9]+\.[0-9a-f]{16}\.mlp\.tmp': \
No space left on device" "$T/last.err" || fail "full: stderr '$(cat "$T/last.err")'"
[ "$(wc -l <"$T/last.err")" = 1 ] || fail "full: more than one line"
[ -z "$(ls -A "$mnt/out")" ] || fail "full: left $(ls -A "$mnt/out")"

rm -f "$mnt/fill"
mount -o remount,ro "$mnt" || fail "cannot remount read-only"
run "$mnt/out"
grep -qxE "memlens: cannot write profile '$mnt/out/files\.[0-9]+\.[0-9a-f]{16}\.mlp\.tmp': \
Read-only file system" "$T/last.err" || fail "read-only: stderr '$(cat "$T/last.err")'"
run "$mnt/new"
[ "$(cat "$T/last.err")" = "memlens: cannot write profile to '$mnt/new': Read-only file system" ] ||
    fail "read-only, new directory: stderr '$(cat "$T/last.err")'"
echo ok
