#!/bin/bash
# Whole-program mode: -flto and --ml-whole-program builds merge the program's bitcode (objects,
# one-shot sources, and only the needed bitcode members of static archives), instrument it once
# and link; the programs print what clang-14's builds print.
. "$(dirname "$0")/cc-lib.bash"

MC=$BIN/memlens-cc
cd "$W" || exit 1
cat >main.c <<'E'
#include <stdio.h>
int helper(int);
int used(int);
int main(void) { int s = 0; for (int i = 0; i < 50; i++) s += helper(i) + used(i); printf("%d\n", s); return 0; }
E
echo 'int helper(int x) { return x * x % 17; }' >helper.c
echo 'int used(int x) { return x ^ 5; }' >used.c
# Never needed: pulling it in would leave 'nowhere' undefined and fail the link.
echo 'int nowhere(void); int unused(void) { return nowhere(); }' >unused.c
clang-14 -O2 main.c helper.c used.c -o ref && ./ref >want.txt || fail "reference"

check() { # <what> <program>
    "./$2" >got.txt || fail "$1: run"
    cmp want.txt got.txt || fail "$1: output differs"
    no_temps
    echo "$1: ok"
}

# -flto: objects are bitcode; the link merges, optimises, instruments once.
"$MC" -flto -O2 -c main.c helper.c used.c unused.c || fail "-flto -c"
od -An -c -N2 helper.o | grep -q 'B   C' || fail "-flto -c should emit bitcode"
ar rcs libu.a used.o unused.o
"$MC" --ml-verbose -flto -O2 main.o helper.o libu.a -o lto 2>log.txt || { cat log.txt; fail "-flto link"; }
grep -q "link 2 bitcode" log.txt || fail "-flto link did not merge the bitcode"
check "-flto objects + bitcode archive" lto

# --ml-whole-program without -flto: -c emits optimised bitcode, the link merges it.
rm -f ./*.o libu.a
for f in main helper used unused; do
    "$MC" --ml-whole-program -O2 -c $f.c || fail "whole-program -c $f.c"
done
ar rcs libu.a used.o unused.o
"$MC" --ml-verbose --ml-whole-program -O2 main.o helper.o -L. -lu libu.a -o wp 2>log.txt ||
    { cat log.txt; fail "whole-program link"; }
check "--ml-whole-program objects + archive" wp
# Bitcode objects alone are enough to select whole-program linking.
"$MC" -O2 main.o helper.o libu.a -o wp2 || fail "bitcode objects link without the option"
check "bitcode objects imply whole-program" wp2

# One-shot, and the option from MEMLENS_CCFLAGS.
MEMLENS_CCFLAGS="--ml-whole-program --verbose" "$MC" -O2 main.c helper.c used.c -o one 2>log.txt ||
    fail "one-shot whole-program"
grep -q "link 3 bitcode" log.txt || fail "MEMLENS_CCFLAGS ignored"
check "one-shot whole-program" one
"$BIN/memlens" cc --whole-program -- -O2 main.c helper.c used.c -o one2 || fail "memlens cc --whole-program"
check "memlens cc --whole-program" one2
MEMLENS_CCFLAGS=--bogus "$MC" -c main.c 2>err.txt && fail "unknown MEMLENS_CCFLAGS option accepted"
grep -q "unknown option '--bogus' in MEMLENS_CCFLAGS" err.txt || fail "bad-option message"
