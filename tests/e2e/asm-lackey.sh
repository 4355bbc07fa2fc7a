#!/bin/bash
# --trace=asm,mode=ns counts every machine-level memory access of the program's own code: its
# loads, stores and read-modify-writes equal Valgrind lackey's (--trace-mem=yes: L, S, M) on the
# uninstrumented build of the same assembly, restricted to the functions the program defines;
# per 4 KiB page too, for the page-aligned data of the closed-form kernels (the stack's pages
# depend on where each run puts it: its total is compared; in the other programs heap placement
# differs between glibc and valgrind, and only the totals are). Closed-form kernels (tests/e2e/asm/kern.c) at -O0 to -O3, the
# flags, red-zone, setjmp and C++ test programs, and the bench/ kernels.
. "$(dirname "$0")/cc-lib.bash"

command -v valgrind >/dev/null || { echo "valgrind is not installed"; exit 77; }
command -v llvm-mc-14 >/dev/null || { echo "llvm-mc-14 is not installed"; exit 77; }
P=$ROOT/tests/e2e/asm
K=$ROOT/bench/kernels
LK=$ROOT/tests/lib/lackey.py
cd "$W" || exit 1
export MEMLENS_OUT=$W/out
printf 'void __memlens_roi_begin(const char *n) { (void)n; }\nvoid __memlens_roi_end(const char *n) { (void)n; }\n' >stub.c
clang-14 -O2 -c stub.c -o stub.o || fail "stub"

# check <name> <driver> <memlens driver> <source> <flags> <args> <pages: 1 to compare pages>
check() {
    local name=$1 cc=$2 ml=$3 src=$4 flags=$5 args=$6 pages=$7
    local stem
    stem=$(basename "${src%.*}")
    rm -rf out ref.* got "$stem.s" "$stem.memlens.s"
    $ml --ml-trace=asm,mode=ns -save-temps $flags "$src" -o got -lm || fail "$name: build"
    # The reference: the same assembly (kept by -save-temps) without the records, linked at
    # fixed addresses for nm; region markers (memlens.h) become empty functions.
    mv "$stem.s" ref.s
    $cc $flags -c -x assembler ref.s -o ref.o && $cc ref.o stub.o -no-pie -o ref.bin -lm ||
        fail "$name: reference build"
    valgrind --tool=lackey --trace-mem=yes --log-file=lackey.txt ./ref.bin $args >want.txt ||
        fail "$name: lackey run"
    ./got $args >have.txt || fail "$name: traced run"
    cmp -s want.txt have.txt || fail "$name: output differs"
    "$BIN/memlens" analyze out dump >dump.txt || fail "$name: dump"
    python3 "$LK" lackey lackey.txt ref.bin ref.s >want.json || fail "$name: lackey counts"
    python3 "$LK" dump dump.txt >have.json || fail "$name: trace counts"
    python3 - "$name" "$pages" want.json have.json <<'E' || exit 1
import json, sys
name, pages = sys.argv[1], sys.argv[2] == '1'
w, h = json.load(open(sys.argv[3])), json.load(open(sys.argv[4]))
bad = [k for k in ('loads', 'stores', 'modifies') if w[k] != h[k]]
if pages and sum(w['stack_pages']) != sum(h['stack_pages']):
    bad.append('stack accesses %d vs %d' % (sum(h['stack_pages']), sum(w['stack_pages'])))
if pages and w['pages'] != h['pages']:
    bad.append('pages')
if bad:
    print('FAIL: %s: %s: memlens %s, lackey %s' % (name, ', '.join(bad),
          {k: h[k] for k in ('loads', 'stores', 'modifies')},
          {k: w[k] for k in ('loads', 'stores', 'modifies')}))
    if 'pages' in bad:
        print('  pages memlens %s\n  pages lackey  %s' % (h['pages'][-12:], w['pages'][-12:]))
    sys.exit(1)
print('%-28s loads %8d  stores %8d  modifies %6d  stack %7d  pages %s' % (
    name, h['loads'], h['stores'], h['modifies'], sum(h['stack_pages']),
    'equal (%d)' % len(h['pages']) if pages else '-'))
E
}

for lvl in -O0 -O1 -O2 -O3; do
    check "kern $lvl" clang-14 "$BIN/memlens-cc" "$P/kern.c" "$lvl" 3000 1
done
check "flags -O2" clang-14 "$BIN/memlens-cc" "$P/flags.c" -O2 50 0
check "redzone -O2" clang-14 "$BIN/memlens-cc" "$P/redzone.c" -O2 200 0
check "jmp -O1" clang-14 "$BIN/memlens-cc" "$P/jmp.c" -O1 50 0
check "exc -O2" clang++-14 "$BIN/memlens-c++" "$P/exc.cpp" -O2 20 0
# Real programs: the bench kernels (graph, sparse, parsing, pointer chasing, ...), small inputs.
check "pagerank -O2" clang-14 "$BIN/memlens-cc" "$K/pagerank.c" -O2 "2000 8 3" 0
check "spmv -O2" clang-14 "$BIN/memlens-cc" "$K/spmv.c" -O2 "2000 8 3" 0
check "parser -O2" clang-14 "$BIN/memlens-cc" "$K/parser.c" -O2 "20000 2" 0
check "chase -O3" clang-14 "$BIN/memlens-cc" "$K/chase.c" -O3 "5000 20000" 0
check "smallfn -O0" clang-14 "$BIN/memlens-cc" "$K/smallfn.c" -O0 "2000 3" 0
check "stream -O3" clang-14 "$BIN/memlens-cc" "$K/stream.c" -O3 "5000 3" 0
echo "ns counts equal lackey's"
