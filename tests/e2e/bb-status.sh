#!/bin/bash
# memlens bb gives every block a status: syscalls and privileged instructions are refused
# (by the decoder, and by seccomp / the trap when the decoder is bypassed), branches are not
# basic blocks, a never-ending block times out, faults and traps are crashes with the signal.
. "$(dirname "$0")/bb-lib.bash"
bb_require_ptrace

expect() { # expected-status expected-detail-substring args...
    local want=$1 sub=$2 out st det
    shift 2
    out=$("$ML" bb --csv --reps 4 --min-agree 2 "$@") || true
    st=$(bb_field status "$out")
    det=$(bb_field detail "$out")
    [ "$st" = "$want" ] || fail "'$*': status '$st', expected '$want' ($det)"
    case $det in *"$sub"*) ;; *) fail "'$*': detail '$det' lacks '$sub'" ;; esac
    echo "ok: $* -> $st: $det"
}

expect unsupported "syscall (decoder)" 'mov $39,%eax; syscall'
expect unsupported "syscall (seccomp)" --no-static-check 'mov $39,%eax; syscall'
expect unsupported "syscall (seccomp)" --no-static-check 'int $0x80'
expect unsupported "branch 'jne'" 'add $1,%rax; jne .'
expect unsupported "branch 'call'" 'call *%rax'
expect unsupported "privileged instruction 'hlt'" hlt
expect unsupported "privileged instruction (trapped)" --no-static-check hlt
expect unsupported "privileged instruction (trapped)" --no-static-check 'mov %cr0,%rax'
expect unsupported "undecodable" 06
expect crashed SIGILL ud2
expect crashed SIGFPE 'xor %ecx,%ecx; div %rcx'
# a rep lodsb over 2^64 bytes never ends: with no fault limit the CPU-time limit stops it
expect timeout "cpu time" --max-faults 0 --timeout 300 'mov $-1,%rcx; rep lodsb'
expect crashed "fault limit (32 pages)" --max-faults 32 'mov $-1,%rcx; rep lodsb'

# the exit status follows the block's status
# (an ok block needs a quiet moment on a shared machine: a few tries)
for try in 1 2 3 4; do
    "$ML" bb --attempts 6 4801d8 >/dev/null && break
    [ "$try" = 4 ] && fail "exit status of an ok block"
done
"$ML" bb ud2 >/dev/null && fail "exit status of a crashed block"
# bad input is a one-line error with exit 128 or usage with 129
"$ML" bb 'not an instruction' 2>/dev/null
[ $? -eq 128 ] || fail "bad assembly should exit 128"
"$ML" bb --reps 0 90 2>/dev/null
[ $? -eq 128 ] || fail "--reps 0 should exit 128"
"$ML" bb 2>/dev/null
[ $? -eq 129 ] || fail "missing argument should exit 129"
"$ML" bb --help | grep -q 'usage: memlens bb' || fail "--help"
echo "all statuses as expected"
