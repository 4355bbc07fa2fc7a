#!/bin/bash
# Hostile blocks for the bb sandbox (docs/bb.md, "Sandbox"): every block of hostile-bb/*.s
# (the gadget attacks of issue 10 through the control and state pages, jumps to every syscall
# instruction of the stub with --no-static-check, the block's own syscall/int $0x80/sysenter,
# mmap/mprotect/munmap/fork/clone at the gadget, stack pivots, writes over the stub and over
# its own code, endless loops) must end as a status, create nothing (its mkdir target stays
# absent) and start no process (hostile-bb.py is a child subreaper). Run as the invoking
# user, as nobody when run as root, and with the ASan build when it exists.
. "$(dirname "$0")/bb-lib.bash"
bb_require_ptrace
here=$(cd "$(dirname "$0")" && pwd)
command -v objdump >/dev/null || { echo "objdump (binutils) missing"; exit 77; }

python3 "$here/hostile-bb.py" blocks "$ML" || fail "hostile blocks as $(id -un)"
if [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1; then
    if setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups "$ML" --version >/dev/null 2>&1; then
        python3 "$here/hostile-bb.py" blocks "$ML" --user nobody || fail "hostile blocks as nobody"
    else
        echo "note: nobody cannot run $ML here; unprivileged run skipped"
    fi
fi
asan=$(dirname "$ML")/../asan/bin/memlens
if [ -x "$asan" ]; then
    python3 "$here/hostile-bb.py" blocks "$asan" || fail "hostile blocks with the ASan build"
fi
echo "every hostile block ended as a status, with no effect outside the sandbox"
