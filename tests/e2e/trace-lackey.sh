#!/bin/bash
# A second method for traces: Valgrind's lackey (--trace-mem=yes) on the plain clang build of
# the same source and flags (memlens compiles the same optimised IR, so the machine code is
# the plain copy's), restricted to the instructions of the program's own functions. Loads
# (lackey L + M) and stores (S + M) outside the stack and the constant pool agree with the
# memlens trace of the same input within 1% on five programs (bench kernels stream, spmv,
# chase, pagerank, smallfn) at -O2; the traffic lackey sees that IR does not have (spills,
# pushes, calls and returns on the stack; floating-point constants loaded from .rodata) is
# printed beside the trace's stack records. Skipped without valgrind.
. "$(dirname "$0")/../lib/common.sh"
ml_require_cc
command -v valgrind >/dev/null || skip "valgrind is not installed"
command -v python3 >/dev/null || skip "python3 is not installed"
FLAGS="-O2 -g -fno-builtin"
PROGRAMS='stream|20000 4
spmv|3000 8 3
chase|20000 30000
pagerank|3000 8 3
smallfn|2000 5'

while IFS='|' read -r name args; do
    src=$ML_ROOT/bench/kernels/$name.c
    clang-14 $FLAGS -no-pie -I"$ML_ROOT/include" "$src" -o "$T/$name.plain" -lm ||
        fail "$name: clang-14 failed"
    clang-14 $FLAGS -c -I"$ML_ROOT/include" "$src" -o "$T/$name.o" || fail "$name: -c failed"
    $MLCC --ml-trace $FLAGS -I"$ML_ROOT/include" "$src" -o "$T/$name.ml" -lm ||
        fail "$name: memlens-cc --ml-trace failed"
    valgrind --tool=lackey --trace-mem=yes --log-file="$T/$name.lk" "$T/$name.plain" $args \
        >"$T/$name.p.out" || fail "$name: valgrind failed"
    rm -rf "$T/o"
    MEMLENS_OUT=$T/o "$MEMLENS" trace -q --no-faults -- "$T/$name.ml" $args >"$T/$name.m.out" ||
        fail "$name: traced run failed"
    cmp -s "$T/$name.p.out" "$T/$name.m.out" || fail "$name: outputs differ"
    nm --defined-only "$T/$name.o" | awk '$2 ~ /^[tT]$/ {print $3}' >"$T/$name.fns"
    nm -S --defined-only "$T/$name.plain" >"$T/$name.syms"
    objdump -h "$T/$name.plain" | awk '$2 == ".rodata" {print $4, $3}' >"$T/$name.rodata"
    MEMLENS_BUILD=$ML_BUILD PYTHONPATH=$ML_ROOT/tests/lib python3 - "$T" "$name" <<'PY' ||
import glob, sys
import mlt
d, name = sys.argv[1], sys.argv[2]
fns = set(open(f'{d}/{name}.fns').read().split())
spans = []
for line in open(f'{d}/{name}.syms'):
    f = line.split()
    if len(f) == 4 and f[3] in fns:
        spans.append((int(f[0], 16), int(f[0], 16) + int(f[1], 16)))
# lackey: data accesses follow their instruction line; keep those of the program's functions.
STACK = 0x1000000000  # valgrind puts the client's stack near 0x1ffefff000
ro = open(f'{d}/{name}.rodata').read().split()
ro_lo = int(ro[0], 16) if ro else 0
ro_hi = ro_lo + (int(ro[1], 16) if ro else 0)
lk = {'load': 0, 'store': 0, 'stack_load': 0, 'stack_store': 0, 'const_load': 0}
mine = False
for line in open(f'{d}/{name}.lk'):
    if line.startswith('I'):
        a = int(line[3:line.index(',')], 16)
        mine = any(lo <= a < hi for lo, hi in spans)
        continue
    if not mine or len(line) < 3 or line[1] not in 'LSM' or line[0] != ' ':
        continue
    a = int(line[3:line.index(',')], 16)
    if ro_lo <= a < ro_hi and line[1] == 'L':
        lk['const_load'] += 1
        continue
    pre = 'stack_' if a >= STACK else ''
    if line[1] in 'LM':
        lk[pre + 'load'] += 1
    if line[1] in 'SM':
        lk[pre + 'store'] += 1
R = mlt.records(glob.glob(d + '/o/*.mlt'))
stacks = [(r.addr, r.addr + r.size * 1024) for r in R if r.kind == 'thread-start']
ml = {'load': 0, 'store': 0, 'stack_load': 0, 'stack_store': 0}
for r in R:
    if r.kind not in ('load', 'store', 'rmw'):
        continue
    pre = 'stack_' if any(lo <= r.addr < hi for lo, hi in stacks) else ''
    if r.kind != 'store':
        ml[pre + 'load'] += r.weight
    if r.kind != 'load':
        ml[pre + 'store'] += r.weight
bad = 0
for k in ('load', 'store'):
    if abs(ml[k] - lk[k]) > 0.01 * max(lk[k], 1):
        bad = 1
print(f'{name}: loads lackey {lk["load"]} memlens {ml["load"]}, stores lackey {lk["store"]} '
      f'memlens {ml["store"]}; not compared: lackey {lk["const_load"]} constant-pool loads, '
      f'stack {lk["stack_load"]} loads {lk["stack_store"]} stores; memlens stack '
      f'{ml["stack_load"]} loads {ml["stack_store"]} stores')
sys.exit(bad)
PY
        fail "$name: loads or stores differ from lackey by more than 1%"
done <<<"$PROGRAMS"
echo ok
