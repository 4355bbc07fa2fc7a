#!/bin/bash
# memlens bb on microbenchmarks whose throughput is fixed by the microarchitecture:
# latency chains (add 1 cycle, imul 3 cycles, L1 load-to-use 4 or 5 cycles) and port
# limits (4 integer ALUs; 1 or 2 stores per cycle, depending on the core generation).
# Allows 10% (the closing figures in bench/bb.sh are tighter); each block gets 5 tries of 6 rounds so
# that a burst of load on the shared machine does not fail the test.
. "$(dirname "$0")/bb-lib.bash"
bb_require_ptrace

check() { # name lo hi asm
    local name=$1 lo=$2 hi=$3 asm=$4 out st tp
    for try in 1 2 3 4 5; do
        out=$("$ML" bb --csv --no-trace --attempts 6 "$asm") || true
        st=$(bb_field status "$out")
        tp=$(bb_field throughput "$out")
        if [ "$st" = ok ] && python3 -c "import sys; sys.exit(not ($lo <= $tp <= $hi))"; then
            echo "ok: $name: $tp cycles (expected $lo..$hi)"
            return
        fi
        echo "try $try: $name: status $st, $tp cycles (expected $lo..$hi)"
    done
    fail "$name"
}

check "4 independent adds (4 ALUs)" 0.9 1.1 'add $1,%rax; add $1,%rbx; add $1,%rcx; add $1,%rdx'
check "dependent add chain of 4" 3.6 4.4 'add %rax,%rbx; add %rbx,%rcx; add %rcx,%rdx; add %rdx,%rax'
check "dependent imul chain of 2" 5.4 6.6 'imul %rax,%rax; imul %rax,%rax'
check "pointer chase (L1 latency)" 3.6 5.5 'mov (%rax),%rax'
check "load through a loaded pointer" 0.4 1.1 'mov (%rbx),%rcx; mov 8(%rcx),%rdx'
check "4 stores (1 or 2 per cycle)" 1.8 4.4 'mov %rax,(%rbx); mov %rax,8(%rbx); mov %rax,16(%rbx); mov %rax,24(%rbx)'
