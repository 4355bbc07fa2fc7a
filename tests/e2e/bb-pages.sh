#!/bin/bash
# memlens bb maps every page a block touches (several distinct pages, and pages reached
# through a pointer loaded from memory) and records the addresses: both are compared with
# the addresses computed here from the documented initial value 0x12345600 of registers
# and memory words.
. "$(dirname "$0")/bb-lib.bash"
bb_require_ptrace
INIT=$((0x12345600))
page() { printf '0x%x' $((($1) & ~0xfff)); }
addr() { printf '0x%x' $(($1)); }

run() { "$ML" bb -v --reps 4 --min-agree 2 "$@"; }

# four distinct pages: three loads at +64K, +128K, -192K and a store at +28K+0x40
out=$(run 'mov 0x10000(%rax),%rbx; mov 0x20000(%rax),%rcx; mov -0x30000(%rax),%rdx; mov %rdx,0x7040(%rsi)')
want=$(printf '%s\n' "$(page INIT+0x10000)" "$(page INIT+0x20000)" "$(page INIT-0x30000)" \
    "$(page INIT+0x7040)" | sort)
got=$(echo "$out" | sed -n 's/^pages *[0-9]* mapped //p' | tr ' ' '\n' | sort)
[ "$got" = "$want" ] || fail "pages: got '$got', want '$want'"
echo "$out" | grep -q "access    insn 3 write 8 bytes at $(addr INIT+0x7040)" || fail "store address"
echo "$out" | grep -q "access    insn 2 read 8 bytes at $(addr INIT-0x30000)" || fail "load address"
echo "$out" | grep -q '^status    ok' || echo "note: timing not clean here ($(echo "$out" | sed -n 2p))"

# a pointer loaded from memory (its value is the fill word 0x12345600) is dereferenced
out=$(run 'mov 0x8000(%rax),%rbx; mov 0x100(%rbx),%rcx')
want=$(printf '%s\n' "$(page INIT+0x8000)" "$(page INIT+0x100)" | sort)
got=$(echo "$out" | sed -n 's/^pages *[0-9]* mapped //p' | tr ' ' '\n' | sort)
[ "$got" = "$want" ] || fail "loaded pointer pages: got '$got', want '$want'"
echo "$out" | grep -q "access    insn 1 read 8 bytes at $(addr INIT+0x100)" ||
    fail "dereference of the loaded pointer"

# filters: a load across a cache line, and a store that aliases a load of another page
run 'mov 0x3c(%rax),%rbx' | grep -q '^flags     cross-line' || fail "cross-line flag"
run 'mov %rbx,0x1000(%rax); mov (%rax),%rcx' | grep -q '^flags     alias' || fail "alias flag"
run 'mov %rbx,0x1008(%rax); mov (%rax),%rcx' | grep -q '^flags     none' || fail "no alias"
# rip-relative data: every unrolled copy reaches the same address (one page per factor)
out=$(run 'mov 0x100000(%rip),%rax')
n=$(echo "$out" | sed -n 's/^pages *\([0-9]*\) mapped.*/\1/p')
[ "$n" -le 2 ] || fail "rip-relative load mapped $n pages, expected one per unroll factor"
echo "pages and addresses as computed"
