#!/bin/bash
# memlens bb takes hex, AT&T or Intel assembly (as or llvm-mc-14) and gives the same bytes
# as objdump's reading of the same instructions.
. "$(dirname "$0")/bb-lib.bash"
bb_require_ptrace

hex_of() { bb_field hex "$("$ML" bb --csv --reps 2 --min-agree 1 --no-trace "$@")"; }

att=$(hex_of 'add %rbx,%rax; imul $3,%rcx,%rdx')
intel=$(hex_of --intel 'add rax, rbx; imul rdx, rcx, 3')
mc=$(hex_of --llvm-mc 'add %rbx,%rax; imul $3,%rcx,%rdx')
[ "$att" = "$intel" ] || fail "AT&T '$att' and Intel '$intel' differ"
[ "$att" = "$mc" ] || fail "as '$att' and llvm-mc '$mc' differ"
# ground truth: objdump decodes the bytes back to the same instructions
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "$att" | xxd -r -p >"$tmp/b.bin"
objdump -D -b binary -m i386:x86-64 "$tmp/b.bin" | grep -q 'add *%rbx,%rax' || fail "objdump: no add"
objdump -D -b binary -m i386:x86-64 "$tmp/b.bin" | grep -q 'imul *$0x3,%rcx,%rdx' ||
    fail "objdump: no imul"
[ "$(hex_of "$att")" = "$att" ] || fail "hex input does not round-trip"
[ "$(hex_of '48 01 d8')" = "4801d8" ] || fail "spaced hex"
echo "hex $att from AT&T, Intel and llvm-mc alike"
