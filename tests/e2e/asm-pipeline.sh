#!/bin/bash
# memlens cc --trace=asm compiles through parsed, encoded, decoded, analysed and rewritten
# assembly: every instruction clang emits is decoded (none left opaque outside inline assembly),
# the rewritten assembly is clang's plus record sequences and tables, programs print the same,
# --explain reports per function and block, -save-temps keeps the assembly, and bad options fail
# with one line.
. "$(dirname "$0")/cc-lib.bash"

P=$ROOT/tests/e2e/asm
MC=$BIN/memlens-cc
MCXX=$BIN/memlens-c++
cd "$W" || exit 1
command -v llvm-mc-14 >/dev/null || { echo "llvm-mc-14 is not installed"; exit 77; }

# The executable sections' disassembly, without addresses of other sections.
code() {
    objdump -d --no-show-raw-insn "$1" | sed -n '/^Disassembly/,$p'
}

# compile_same <driver> <memlens driver> <source> <flags...>: same code as clang's assembly
# assembled by clang (-mrelax-all at -O0, as clang does for its own output), every unit decoded.
# (clang's direct object path can differ from its own assembly: "shll %eax" for shl $1.)
compile_same() {
    local cc=$1 ml=$2 src=$3 relax=-mrelax-all
    shift 3
    for f in "$@"; do
        case $f in -O0) relax=-mrelax-all ;; -O*) relax= ;; esac
    done
    "$cc" "$@" -S -masm=att "$src" -o ref.s 2>referr.txt &&
        "$cc" "$@" $relax -Qunused-arguments -masm=att -c -x assembler ref.s -o ref.o 2>err.txt ||
        fail "clang: $src $*: $(cat referr.txt err.txt)"
    "$ml" --ml-trace=asm,mode=aia,omega=0.25 --ml-explain -save-temps "$@" -c "$src" -o got.o \
        >explain.txt 2>err.txt || fail "memlens: $src $*: $(cat err.txt)"
    cmp -s err.txt referr.txt || fail "memlens printed for $src $*: $(cat err.txt)"
    local stem
    stem=$(basename "${src%.*}")
    # clang's assembly is the input (comments aside: through bitcode blocks keep their names);
    # without the record sequences and tables, the output is it.
    sed -e 's/[[:space:]]*#.*$//' ref.s >ref.nc.s
    sed -e 's/[[:space:]]*#.*$//' "$stem.s" >gen.nc.s
    cmp -s ref.nc.s gen.nc.s || fail "$src $*: the generated assembly is not clang's"
    sed -e '/^# memlens record {$/,/^# memlens record }$/d' -e '/^# memlens tables:/,$d' \
        "$stem.memlens.s" >stripped.s
    cmp -s "$stem.s" stripped.s || fail "$src $*: the rewritten assembly changes clang's lines"
    # every instruction of clang's is in the object, with the records between them
    [ "$(code ref.o | grep -c '^ ')" -lt "$(code got.o | grep -c '^ ')" ] ||
        fail "$src $*: no record sequence in the object"
    local total
    total=$(grep '^total:' explain.txt) || fail "$src $*: no total in the explanation"
    echo "$total" | grep -q ', 0 not decoded' || fail "$src $*: $total"
    no_temps
}

avx512=0
grep -qw avx512f /proc/cpuinfo && avx512=1
n=0
for src in flags.c redzone.c jmp.c tls.c shlib.c omp.c inline.c simd.c; do # -O0 to -O3
    for lvl in -O0 -O1 -O2 -O3; do
        compile_same clang-14 "$MC" "$P/$src" $lvl -fopenmp
        n=$((n + 1))
    done
done
for lvl in -O0 -O2 -O3; do
    compile_same clang++-14 "$MCXX" "$P/exc.cpp" $lvl
    n=$((n + 1))
done
for flags in "-O2 -g" "-O2 -fPIC" "-O3 -march=haswell" "-Os -ffunction-sections" \
    "-O2 -masm=intel" "-O2 -fno-omit-frame-pointer -fPIE"; do
    for src in flags.c simd.c tls.c; do
        compile_same clang-14 "$MC" "$P/$src" $flags
        n=$((n + 1))
    done
done
if [ $avx512 = 1 ]; then
    compile_same clang-14 "$MC" "$P/simd.c" -O3 -march=native -mprefer-vector-width=512
    grep -q 'vpgatherdd.*{%k[1-7]}' explain.txt || fail "no AVX-512 gather in simd.c"
    grep -q '{%k[1-7]}' explain.txt || fail "no masked AVX-512 access in simd.c"
    grep -q 'vpgatherdd.*forced: count known at run time' explain.txt ||
        fail "a gather is not forced"
    n=$((n + 1))
fi
compile_same clang++-14 "$MCXX" "$P/exc.cpp" -O2 -g -fPIC
echo "$n compiles: clang's assembly plus records, every instruction decoded"

# Whole programs, several modes: same output as clang's build.
run_same() { # <name> <build command for ref> ... : builds with clang and memlens, compares
    local name=$1 args=$2
    shift 2
    "$@" || fail "build $name"
    ./ref $args >want.txt 2>&1 || fail "$name: reference run failed"
    ./got $args >have.txt 2>&1 || fail "$name: memlens build failed to run: $(cat have.txt)"
    cmp -s want.txt have.txt || fail "$name: output differs: $(cat have.txt) vs $(cat want.txt)"
}
for mode in "mode=ns" "omega=0.1,chunk=64" "omega=0.25" "omega=0.5,mode=ma,chunk=16" "omega=1"; do
    for src in flags.c redzone.c jmp.c inline.c chain.c fold.c callee.c; do
        run_same "$src/$mode" 200 sh -c "clang-14 -O2 $P/$src -o ref &&
            $MC --ml-trace=asm,$mode -O2 $P/$src -o got"
    done
    run_same "exc/$mode" 50 sh -c "clang++-14 -O1 $P/exc.cpp -o ref &&
        $MCXX --ml-trace=asm,$mode -O1 $P/exc.cpp -o got"
    run_same "omp/$mode" 5000 sh -c "clang-14 -O2 -fopenmp $P/omp.c -o ref &&
        OMP_NUM_THREADS=2 $MC --ml-trace=asm,$mode -O2 -fopenmp $P/omp.c -o got"
    run_same "tls+shlib/$mode" "" sh -c "clang-14 -O2 -fPIC -shared $P/shlib.c -o libref.so &&
        clang-14 -O2 $P/tls.c -L. -lref -Wl,-rpath,$W -pthread -o ref &&
        $MC --ml-trace=asm,$mode -O2 -fPIC -shared $P/shlib.c -o libgot.so &&
        $MC --ml-trace=asm,$mode -O2 $P/tls.c -L. -lgot -Wl,-rpath,$W -pthread -o got"
done
# Call chains (omega < 1): blocks cut only by a call are selected as one, and their accesses
# still count exactly (the sum of the records' weights is ns's count), also after setjmp's call,
# which returns twice and so ends a chain.
accesses() { # <binary>: the accesses its trace holds
    rm -rf tr
    MEMLENS_OUT=tr ./"$1" 1000 >/dev/null || fail "chain: $1 failed"
    "$BIN/memlens" analyze --json tr select | sed -n 's/.*"accesses": \([0-9]*\).*/\1/p'
}
$MC --ml-trace=asm,mode=ns -O2 "$P/chain.c" -o chain.ns || fail "build chain.c"
want=$(accesses chain.ns)
[ -n "$want" ] && [ "$want" -gt 0 ] || fail "chain: no accesses in the ns trace"
for mode in "omega=0.1" "omega=0.25,mode=ma" "omega=0.5,chunk=64"; do
    $MC --ml-trace=asm,$mode -O2 "$P/chain.c" -o chain.sel || fail "build chain.c/$mode"
    got=$(accesses chain.sel)
    [ "$got" = "$want" ] || fail "chain/$mode: $got accesses, ns counts $want"
done
echo "call chains: accesses counted exactly (setjmp included)"
# Control-equivalent blocks (loop header and latch around branches, code before and after a
# loop) share one budget: their accesses still count exactly, at every optimisation level.
for opt in -O0 -O1 -O2 -O3; do
    $MC --ml-trace=asm,mode=ns $opt "$P/fold.c" -o fold.ns || fail "build fold.c $opt"
    want=$(accesses fold.ns)
    [ -n "$want" ] && [ "$want" -gt 0 ] || fail "fold $opt: no accesses in the ns trace"
    for mode in "omega=0.1" "omega=0.25,mode=ma" "omega=0.5,chunk=64"; do
        "$BIN/memlens" cc --trace=asm,$mode --explain -- $opt "$P/fold.c" -o fold.sel >fold.ex ||
            fail "build fold.c $opt/$mode"
        grep -q 'control-equivalent block' fold.ex || fail "fold $opt/$mode: nothing folded"
        got=$(accesses fold.sel)
        [ "$got" = "$want" ] || fail "fold $opt/$mode: $got accesses, ns counts $want"
    done
done
echo "control-equivalent blocks: accesses counted exactly at -O0 to -O3"
# Functions called from one place join the caller's unit (callee.c: leaves, a tail call, three
# levels): their accesses still count exactly, at every optimisation level.
for opt in -O0 -O1 -O2 -O3; do
    $MC --ml-trace=asm,mode=ns $opt "$P/callee.c" -o callee.ns || fail "build callee.c $opt"
    want=$(accesses callee.ns)
    [ -n "$want" ] && [ "$want" -gt 0 ] || fail "callee $opt: no accesses in the ns trace"
    for mode in "omega=0.1" "omega=0.25,mode=ma" "omega=0.5,chunk=64"; do
        "$BIN/memlens" cc --trace=asm,$mode --explain -- $opt "$P/callee.c" -o callee.sel \
            >callee.ex || fail "build callee.c $opt/$mode"
        grep -q 'callee get_x .*called from line' callee.ex || fail "callee $opt/$mode: get_x not folded"
        grep -q 'callee \(twice\|taken\|global_get\) ' callee.ex &&
            fail "callee $opt/$mode: folded a function called twice, taken or global"
        got=$(accesses callee.sel)
        [ "$got" = "$want" ] || fail "callee $opt/$mode: $got accesses, ns counts $want"
    done
done
echo "callees folded into their caller: accesses counted exactly at -O0 to -O3"
# Leaf functions whose red-zone data is live across records that save nothing: only the slow
# path steps over the red zone, so the buffer must fill inside them (20000 calls, many flushes).
for mode in "mode=ns" "omega=1"; do
    run_same "redzone flushes/$mode" 20000 sh -c "clang-14 -O2 $P/redzone.c -o ref &&
        $MC --ml-trace=asm,$mode -O2 $P/redzone.c -o got"
done
# Vector code the CPU runs: AVX2, and AVX-512 (masked loads and stores, gathers) where it has it.
vec=""
grep -qw avx2 /proc/cpuinfo && vec="-mavx2 -mfma"
[ $avx512 = 1 ] && vec="-march=native -mprefer-vector-width=512"
if [ -n "$vec" ]; then
    for mode in "mode=ns" "omega=0.1" "omega=0.25" "omega=0.5" "omega=1"; do
        run_same "simd/$mode" 1003 sh -c "clang-14 -O3 $vec $P/simd.c -o ref &&
            $MC --ml-trace=asm,$mode -O3 $vec $P/simd.c -o got"
    done
    echo "vector code ($vec) prints the same"
else
    echo "vector code: skipped (no AVX2)"
fi
[ $avx512 = 1 ] || echo "AVX-512: skipped (the CPU lacks avx512f)"
# A multi-file build with -c then link, and MEMLENS_CCFLAGS.
MEMLENS_CCFLAGS="--ml-trace=asm,omega=0.5" "$MC" -O2 -fPIC -c "$P/shlib.c" -o s.o || fail "-c"
"$MC" -O2 -c "$P/tls.c" -o t.o --ml-trace=asm || fail "-c tls"
"$MC" t.o s.o -pthread -o two || fail "link"
clang-14 -O2 "$P/tls.c" "$P/shlib.c" -pthread -o tworef || fail "reference link"
[ "$(./two)" = "$(./tworef)" ] || fail "two-file build prints another result"
# Whole-program mode goes through the same pipeline.
"$MC" --ml-trace=asm --ml-whole-program -O2 "$P/tls.c" "$P/shlib.c" -pthread -o wp ||
    fail "whole program"
[ "$(./wp)" = "$(./tworef)" ] || fail "whole-program build prints another result"
no_temps
echo "programs print the same (ns, omega 0.1 to 1, C 16 to 4096, C++, OpenMP, TLS, shared library)"

# --explain: per function and block, classes, representatives, weights.
cat >loop.c <<'E'
struct s { long a, b, c; };
long f(struct s *v, int n) { long t = 0; for (int i = 0; i < n; i++) t += v[i].a * v[i].c - v[i].b; return t; }
E
"$BIN/memlens" cc --trace=asm,omega=0.5,chunk=64 --explain -- -O1 -c loop.c -o loop.o >ex.txt ||
    fail "explain"
grep -q "^memlens: 'loop.c': trace=asm mode=aia omega=0.5 chunk=64 scores=0:1:16$" ex.txt ||
    fail "explain header: $(head -1 ex.txt)"
grep -q '^function f$' ex.txt || fail "no function line"
# The loop body loads c, a and b of one element: one class, one cluster of span 16 < 64, its
# representative b in the middle (value 16 + 15 + 15), W = 2 refines c (the earlier); a, 8 B
# from b, is in b's chunk with probability 1 - 8/64: MA (2 + 56/64) / 3.
grep -q '3 accesses, W 2, 1 classes, 1 clusters, 2 instrumented, MA 0.958 AIA 1.000' ex.txt ||
    fail "loop block: $(grep accesses ex.txt)"
grep -q 'subq 8(%rdi,%rdx), %rax .*cluster representative, value 46, weight 2' ex.txt ||
    fail "representative: $(cat ex.txt)"
grep -q 'refined: exact address' ex.txt || fail "no refinement at omega 0.5"
"$BIN/memlens" cc --trace=asm,mode=ns --explain -- -O1 -c loop.c -o loop.o >ex.txt
grep -q '3 accesses, W 3, 3 classes, 3 clusters, 3 instrumented' ex.txt || fail "ns: $(cat ex.txt)"
echo "explain: classes, clusters, values, weights"

# -save-temps keeps the generated and the rewritten assembly; -S writes the rewritten one.
mkdir -p obj
"$MC" --ml-trace=asm -save-temps -O2 -c loop.c -o obj/loop.o || fail "-save-temps"
[ -s loop.s ] && [ -s loop.memlens.s ] || fail "-save-temps kept $(ls)"
rm -f loop.s loop.memlens.s
"$MC" --ml-trace=asm -save-temps=obj -O2 -c loop.c -o obj/loop.o || fail "-save-temps=obj"
[ -s obj/loop.s ] && [ -s obj/loop.memlens.s ] || fail "-save-temps=obj kept $(ls obj)"
"$MC" --ml-trace=asm -O2 -S loop.c -o loop.S.s || fail "-S"
grep -q 'imulq' loop.S.s || fail "-S wrote no assembly"
no_temps
echo "-save-temps, -S"

# Bad options: one line, exit 128, nothing written.
bad() { # <expected text> <args...>
    local want=$1
    shift
    "$MC" "$@" -c loop.c -o bad.o >out.txt 2>&1
    local rc=$?
    [ $rc = 128 ] || fail "'$*' exit $rc: $(cat out.txt)"
    [ "$(wc -l <out.txt)" = 1 ] || fail "'$*' printed: $(cat out.txt)"
    grep -qF -- "$want" out.txt || fail "'$*': $(cat out.txt)"
    [ ! -e bad.o ] || fail "'$*' wrote an object"
    no_temps
}
bad "omega '2' is not a number in (0, 1]" --ml-trace=asm,omega=2
bad "omega 'x' is not a number" --ml-trace=asm,omega=x
bad "chunk '48' is not a power of two" --ml-trace=asm,chunk=48
bad "mode 'fast' is not ns, ma or aia" --ml-trace=asm,mode=fast
bad "scores 1:2:3 break s1 + s2 < s3" --ml-trace=asm,scores=1:2:3
bad "scores 0:3:2 are not 0 <= s1 < s2 < s3" --ml-trace=asm,scores=0:3:2
bad "unknown trace option 'width'" --ml-trace=asm,width=3
bad "unknown trace kind 'asmx'" --ml-trace=asmx
bad "--explain needs --trace=asm" --ml-explain
bad "needs an x86-64 target, not 'aarch64-linux-gnu'" --ml-trace=asm --target=aarch64-linux-gnu
echo "bad options rejected"
