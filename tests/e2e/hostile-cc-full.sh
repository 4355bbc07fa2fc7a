#!/bin/bash
# memlens-cc with a full TMPDIR or a full output directory (issue 10, item 10): at every amount
# of free space, from none up to enough, the compile either succeeds with the same object as with
# room to spare, or fails with one line "memlens: cannot write '<file>': No space left on device"
# (or LLVM's reason, for a whole-program merge) and exit 1: no crash report, nothing left in
# TMPDIR, no partial file in the output directory. Needs a small tmpfs: mounted directly as root,
# else in a user namespace (unshare -rm); skipped when neither is allowed.
if [ "$(id -u)" != 0 ]; then
    # Not root: again as root of a private user and mount namespace, where tmpfs mounts work.
    if unshare -rm true 2>/dev/null; then
        exec unshare -rm bash "$0" "$@"
    fi
    echo "cannot mount a small tmpfs (not root, no user namespaces; a loop device needs the same): skipped"
    exit 77
fi
. "$(dirname "$0")/cc-lib.bash"

MNT=$W/mnt
mkdir -p "$MNT"
mount -t tmpfs -o size=512k,mode=0777 tmpfs "$MNT" 2>/dev/null || {
    echo "cannot mount a small tmpfs here: full-disk cases skipped"
    exit 77
}
trap 'umount "$MNT" 2>/dev/null; [ -n "$KEEP" ] || rm -rf "$W"' EXIT

MC=$BIN/memlens-cc
cd "$W" || exit 1
mkdir -p room
cat >k.c <<'E'
#include <stdio.h>
#include "memlens.h"
double a[4096], b[4096];
int main(void) {
    double s = 0;
    MEMLENS_ROI_BEGIN("dot");
    for (int i = 0; i < 4096; i++) s += a[i] * b[i];
    MEMLENS_ROI_END("dot");
    MEMLENS_ROI_BEGIN("scale");
    for (int i = 0; i < 4096; i++) a[i] = 2 * b[i];
    MEMLENS_ROI_END("scale");
    printf("%g\n", s);
    return 0;
}
E

# Leaves $1 KiB free on the tmpfs (rounded to pages by tmpfs itself).
leave_free() {
    rm -rf "${MNT:?}"/*
    local total avail
    total=$(df -k --output=size "$MNT" | tail -1)
    dd if=/dev/zero of="$MNT/fill" bs=1k count=$((total - $1)) 2>/dev/null
    sync
}

# <name> <where: tmp|out> <output file under the tmpfs or ""> <memlens-cc args...>
# The args may name $MNT; the reference build runs the same command with TMPDIR and $MNT in room/.
sweep() {
    local name=$1 where=$2 out=$3 kib rc ok=0 failed=0
    shift 3
    local ref_args=("${@//$MNT/$W/room}")
    rm -rf room/* && TMPDIR=$W/room "$MC" "${ref_args[@]}" >/dev/null 2>ref-err.txt ||
        fail "$name: reference build: $(cat ref-err.txt)"
    for ((kib = 0; kib <= 480; kib += 4)); do
        leave_free $kib
        if [ "$where" = tmp ]; then
            TMPDIR=$MNT "$MC" "$@" >/dev/null 2>err.txt
        else
            TMPDIR=$W/tmp "$MC" "$@" >/dev/null 2>err.txt
        fi
        rc=$?
        if [ $rc = 0 ]; then
            # (a .d names its target, which lies in another directory)
            [ -z "$out" ] || cmp -s <(sed "s|$MNT|DIR|g" "$out") <(sed "s|$W/room|DIR|g" "${out//$MNT/$W/room}") ||
                fail "$name: with ${kib} KiB free the output differs from the one built with room"
            ok=1
        else
            [ $rc = 1 ] || fail "$name: ${kib} KiB free: exit status $rc: $(head -3 err.txt)"
            [ "$(wc -l <err.txt)" = 1 ] || fail "$name: ${kib} KiB free: not one line: $(cat err.txt)"
            grep -q "^memlens: .*No space left on device$" err.txt ||
                fail "$name: ${kib} KiB free: $(cat err.txt)"
            failed=$((failed + 1))
        fi
        [ -z "$(ls -A "$TMPDIR")" ] || fail "$name: ${kib} KiB free: left in TMPDIR: $(ls "$TMPDIR")"
        [ -z "$(find "$MNT" -name '*memlens*')" ] || fail "$name: ${kib} KiB free: left: $(find "$MNT" -name '*memlens*')"
        [ $ok = 1 ] && break
    done
    [ $ok = 1 ] || fail "$name: never succeeded with up to 480 KiB free"
    [ $failed -gt 0 ] || fail "$name: never ran out of space"
    echo "$name: failed cleanly with less than ${kib} KiB free ($failed amounts), then built the same output"
}
sweep "-c, full TMPDIR" tmp "" -O2 -c k.c -o k.o
sweep "-c, full output directory" out "$MNT/k.o" -O2 -c k.c -o "$MNT/k.o"
sweep "-c -MD, full output directory" out "$MNT/k.d" -O2 -MD -c k.c -o "$MNT/k.o"
sweep "-S, full output directory" out "$MNT/k.s" -O2 -S k.c -o "$MNT/k.s"
sweep "link, full TMPDIR" tmp "" -O2 k.c -o k
sweep "whole-program -c, full output directory" out "$MNT/k.o" --ml-whole-program -O2 -c k.c -o "$MNT/k.o"
sweep "whole-program link, full TMPDIR" tmp "" --ml-whole-program -O2 k.c -o k
# memlens instrument writes its output the same way.
clang-14 -O2 -I"$ROOT/include" -D__MEMLENS__ -c -emit-llvm k.c -o k.bc || fail "k.bc"
leave_free 0
"$BIN/memlens" instrument k.bc -o "$MNT/k.ml.bc" 2>err.txt
[ $? = 1 ] && [ "$(wc -l <err.txt)" = 1 ] && grep -q "No space left on device" err.txt ||
    fail "memlens instrument to a full disk: $(cat err.txt)"
[ -z "$(find "$MNT" -name '*memlens*' -o -name 'k.ml.bc')" ] || fail "memlens instrument left a file"
echo "memlens instrument: one line, exit 1"
