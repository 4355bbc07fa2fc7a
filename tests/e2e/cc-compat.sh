#!/bin/bash
# memlens-cc behaves like clang-14 where users and build systems look: -E, -M, -MD/-MF/-MT/-MQ
# outputs, error text and exit status, configure-style probes, response files, -S, version and
# help queries; and an instrumented object without regions has the same code as clang's.
. "$(dirname "$0")/cc-lib.bash"

MC=$BIN/memlens-cc
cd "$W" || exit 1
mkdir -p inc sub
cat >inc/defs.h <<'E'
#define SCALE 3
E
cat >sub/x.c <<'E'
#include <stdio.h>
#include "defs.h"
static int tri(int n) { return n * (n + 1) / 2; }
int compute(int n) { int s = 0; for (int i = 0; i < n; i++) s += tri(i) * SCALE; return s; }
int main(void) { printf("%d\n", compute(100)); return 0; }
E

# Preprocessing and dependency-only runs are clang's, and see what a compile sees: __MEMLENS__
# and memlens.h (issue 10, item 14: they failed with "'memlens.h' file not found").
ML_INC=$("$BIN/memlens" cc --print-include-dir)
[ "$ML_INC" = "$MEMLENS_BUILD/include" ] && [ -f "$ML_INC/memlens.h" ] || fail "--print-include-dir: '$ML_INC'"
[ "$("$MC" --ml-print-include-dir)" = "$ML_INC" ] || fail "--ml-print-include-dir"
cat >sub/roi.c <<'E'
#include <stdio.h>
#include "memlens.h"
#include "defs.h"
int main(void) {
    int s = 0;
    MEMLENS_ROI_BEGIN("r");
    for (int i = 0; i < 100; i++) s += i * SCALE;
    MEMLENS_ROI_END("r");
#ifdef __MEMLENS__
    printf("memlens %d\n", s);
#endif
    return 0;
}
E
for src in sub/x.c sub/roi.c; do
    for flags in "-E" "-E -P -DX=1" "-M" "-MM" "-MM -MT foo -MP" "-E -dM" "-M -MG"; do
        clang-14 $flags -Iinc $src -D__MEMLENS__ -D__MEMLENS_CC__ -I "$ML_INC" >want.txt 2>&1 || fail "clang '$flags' $src"
        "$MC" $flags -Iinc $src >got.txt 2>&1
        cmp want.txt got.txt || fail "'$flags' $src: output differs"
    done
done
grep -q "memlens.h" <("$MC" -MM -Iinc sub/roi.c) || fail "-MM does not list memlens.h"
grep -q "^#define __MEMLENS__ 1" <("$MC" -E -dM -Iinc sub/x.c) || fail "-E -dM: no __MEMLENS__"
"$MC" -fsyntax-only -Wall -Werror -Iinc sub/roi.c || fail "-fsyntax-only"
printf '#include "memlens.h"\nint x = __MEMLENS__;\n' | "$MC" -E -x c - | grep -q "int x = 1" || fail "-E -x c -"
printf '#include "memlens.h"\nint x = __MEMLENS__;\n' | "$MC" -E - | grep -q "int x = 1" || fail "-E -"
# Bitcode keeps the markers as annotations (tag 0x4d4c5242 is BEGIN), which memlens instrument reads.
"$MC" -c -emit-llvm -Iinc sub/roi.c -o roi.bc &&
    llvm-dis-14 roi.bc -o - | grep -q "@llvm.annotation.i32(i32 1296847426" || fail "-emit-llvm"
# A precompiled header is made with the macros of the compiles that use it.
printf '#pragma once\n#include <stdio.h>\n#include "memlens.h"\n' >pre.h
printf '#include "pre.h"\nint main(void) { MEMLENS_ROI_BEGIN("p"); puts("pch"); MEMLENS_ROI_END("p"); return 0; }\n' >pch.c
"$MC" -x c-header pre.h -o pre.h.pch && "$MC" -include-pch pre.h.pch pch.c -o pch || fail "precompiled header"
[ "$(MEMLENS_OUT=$PWD/pch-out ./pch)" = pch ] && ls pch-out/pch.*.mlp >/dev/null || fail "pch program"
no_temps
echo "-E/-M/-MM/-fsyntax-only/-emit-llvm/PCH: identical to clang with memlens.h and __MEMLENS__"

# -save-temps compiles (instrumented) and keeps clang's files and memlens' bitcode.
mkdir -p st st/obj && (cd st && "$MC" -save-temps -O2 -I../inc -c ../sub/roi.c -o roi.o) || fail "-save-temps"
for f in roi.i roi.tmp.bc roi.opt.bc roi.ml.bc roi.ml.s roi.o; do
    [ -s "st/$f" ] || fail "-save-temps: no $f"
done
llvm-dis-14 st/roi.ml.bc -o - | grep -q __memlens_enter || fail "-save-temps: roi.ml.bc is not instrumented"
! llvm-dis-14 st/roi.opt.bc -o - | grep -q __memlens_enter || fail "-save-temps: roi.opt.bc is instrumented"
grep -q __memlens_enter st/roi.ml.s && nm st/roi.o | grep -q __memlens_enter || fail "-save-temps: code not instrumented"
(cd st && "$MC" -save-temps=obj -O2 -I../inc ../sub/roi.c -o obj/roi && ./obj/roi) | grep -q "^memlens 14850$" ||
    fail "-save-temps=obj one-shot build"
for f in roi.i roi.ml.bc roi.ml.s roi.o; do
    [ -s "st/obj/$f" ] || fail "-save-temps=obj: no obj/$f"
done
no_temps
echo "-save-temps: roi.i roi.tmp.bc roi.opt.bc roi.ml.bc roi.ml.s roi.o"

# Dependency files written while compiling name the real object, as clang's do.
dep_case() { # <compile args...>: compares every .d written in ./d
    rm -rf d && mkdir d && (cd d && clang-14 "$@" -D__MEMLENS__ -I "$ML_INC" >/dev/null 2>&1) && mkdir -p ref &&
        rm -rf ref && cp -r d ref && rm -rf d && mkdir d &&
        (cd d && "$MC" "$@" >/dev/null 2>&1) || fail "compile '$*'"
    for f in ref/*.d; do
        [ -e "$f" ] || fail "clang wrote no .d for '$*'"
        cmp "$f" "d/$(basename "$f")" || fail "'$*': $(basename "$f") differs"
    done
    [ "$(ls ref | grep -c '\.d$')" = "$(ls d | grep -c '\.d$')" ] || fail "'$*': .d files differ"
}
dep_case -MD -I../inc -c ../sub/x.c
dep_case -MMD -I../inc -c ../sub/x.c -o out.o
dep_case -MMD -MP -I../inc -c ../sub/x.c -o 'we ird$.o'
dep_case -MD -MF custom.d -I../inc -c ../sub/x.c
dep_case -MD -MT tgt -MQ 'q$t' -I../inc -c ../sub/x.c
dep_case -Wp,-MMD,wp.d -I../inc -c ../sub/x.c
dep_case -MMD -I../inc ../sub/x.c -o prog
dep_case -MD -I../inc -c ../sub/roi.c
dep_case -MMD -MP -I../inc -c ../sub/roi.c -o roi.o
dep_case -Wp,-MD,wp.d -I../inc -c ../sub/roi.c
dep_case -MMD -MF roi-custom.d -MT tgt -I../inc -c ../sub/roi.c -o r.o
printf '#include "defs.h"\n\t.globl nine\nnine:\n\tret\n' >sub/nine.S
dep_case -MD -I../inc -c ../sub/nine.S
# Options that name side files after -o: clang writes the object itself, so the names are right.
(cd d && "$MC" -gsplit-dwarf -g -O2 -I../inc -c ../sub/roi.c -o split.o) && [ -s d/split.dwo ] &&
    readelf -S d/split.o | grep -q '\.debug_addr' || fail "-gsplit-dwarf"
(cd d && "$MC" -O2 -ftime-trace -I../inc -c ../sub/roi.c -o traced.o) && [ -s d/traced.json ] ||
    fail "-ftime-trace"
# Assembly without the preprocessor writes no .d (clang warns that -MD is unused).
printf '\t.globl ten\nten:\n\tret\n' >sub/ten.s
(cd d && "$MC" -MD -c ../sub/ten.s -o ten.o 2>/dev/null) && [ ! -e d/ten.d ] || fail "-MD on a .s file"
echo "-MD/-MMD/-MF/-MT/-MQ: identical"

# Errors: clang's text and exit status come through unchanged; nothing is left behind.
printf 'int f(void) { return undeclared_thing; }\n' >bad.c
for mode in "-c" "" "-S"; do
    clang-14 $mode bad.c -o bad.out 2>want.txt
    want=$?
    "$MC" $mode bad.c -o bad.out 2>got.txt
    got=$?
    [ "$want" = "$got" ] || fail "exit status $got, clang's is $want"
    cmp want.txt got.txt || fail "error text differs for '$mode'"
done
"$MC" -c missing-file.c 2>got.txt
[ $? = 1 ] && grep -q "no such file" got.txt || fail "missing file"
no_temps
echo "errors: identical ($(head -1 want.txt))"

# A configure-style probe sequence.
[ "$("$MC" -dumpversion)" = "$(clang-14 -dumpversion)" ] || fail "-dumpversion"
[ "$("$MC" --version)" = "$(clang-14 --version)" ] || fail "--version"
[ "$("$MC" -print-prog-name=ld)" = "$(clang-14 -print-prog-name=ld)" ] || fail "-print-prog-name"
[ "$("$MC" -print-search-dirs)" = "$(clang-14 -print-search-dirs)" ] || fail "-print-search-dirs"
"$MC" -v 2>&1 | grep -q "clang version 14" || fail "-v"
"$MC" --help | grep -q "OVERVIEW: clang LLVM compiler" || fail "memlens-cc --help is not clang's"
"$MC" --ml-help | grep -q "memlens cc" || fail "--ml-help"
"$BIN/memlens" cc --help | grep -q "MEMLENS_CCFLAGS" || fail "memlens cc --help"
echo 'int main(void) { return 0; }' >conftest.c
"$MC" -c conftest.c -o conftest.o && "$MC" conftest.o -o conftest && ./conftest || fail "probe"
"$MC" -O2 conftest.c -o conftest && ./conftest || fail "probe link"
echo 'int main(void) { return 42; }' | "$MC" -x c - -o conftest2 || fail "stdin"
./conftest2
[ $? = 42 ] || fail "stdin program"
echo '#include <stdio.h>' | "$MC" -E -x c - >/dev/null || fail "-E -x c -"
echo 'int x = ;' | "$MC" -x c -c - -o c.o 2>got.txt && fail "stdin error not reported"
echo 'int x = ;' | clang-14 -x c -c - -o c.o 2>want.txt
cmp want.txt got.txt || fail "stdin error text"
echo 'int main(void) { return 0; }' | "$MC" -x c -c - || fail "stdin -c"
[ -f ./-.o ] || fail "stdin -c names its object '-.o' as clang does"
"$MC" -fsyntax-only sub/x.c -Iinc || fail "-fsyntax-only"
"$MC" -### -c sub/x.c 2>&1 | grep -q '"-cc1"' || fail "-###"
"$MC" -Werror -Wl,--no-undefined -lm -O2 -Iinc sub/x.c -o x || fail "-Werror one-shot link"
no_temps
echo "probes: ok"

# Response files, with quoting.
printf -- "-Iinc '-DGREETING=\"hi there\"'\n-O2 -c\n" >args.rsp
printf '#include "defs.h"\nconst char *g = GREETING; int s = SCALE;\n' >rsp.c
"$MC" @args.rsp rsp.c -o rsp.o || fail "@file"
clang-14 @args.rsp rsp.c -o rsp-ref.o
cmp <(objdump -s -j .rodata.str1.1 rsp.o | tail -n +3) <(objdump -s -j .rodata.str1.1 rsp-ref.o | tail -n +3) || fail "@file flags"
echo "response files: ok"

# Code generation keeps the user's flags and does not optimise twice: without regions the
# object is clang's, byte for byte (the front end's bitcode is compiled as it is; more in
# cc-identity.sh).
for flags in "-O0" "-O2 -g" "-O3 -march=haswell -fPIC" "-Os -ffunction-sections" "-Oz -fno-omit-frame-pointer"; do
    clang-14 $flags -Iinc -c sub/x.c -o ref.o
    "$MC" $flags -Iinc -c sub/x.c -o got.o || fail "compile '$flags'"
    cmp ref.o got.o || fail "object differs from clang's with '$flags'"
done
"$MC" -O2 -S -Iinc sub/x.c -o got.s && clang-14 -O2 -S -Iinc sub/x.c -o ref.s || fail "-S"
cmp <(grep -v '^\s*\.file\|ident' ref.s) <(grep -v '^\s*\.file\|ident' got.s) || fail "-S output differs"
"$MC" -O2 -Iinc -c sub/x.c && [ -f x.o ] || fail "default object name"
"$MC" -c sub/x.c -Iinc bad.c 2>/dev/null && fail "one failing input fails -c"
[ -f x.o ] || fail "-c still compiles the other inputs"
echo "code generation: objects byte-identical to clang's"

# Assembly inputs and objects, archives and shared libraries on the link line.
printf '\t.globl seven\nseven:\n\tmovl $7, %%eax\n\tret\n\t.section .note.GNU-stack,"",@progbits\n' >seven.s
printf 'int seven(void);\nint lib(void);\nint main(void) { return seven() + lib(); }\n' >m.c
printf 'int lib(void) { return 30; }\n' >lib.c
"$MC" -fPIC -shared lib.c -o libl.so || fail "-shared"
nm -D libl.so | grep -q memlens && fail "runtime linked into a shared library"
"$MC" m.c seven.s -L. -ll -Wl,-rpath,"$PWD" -o m || fail "asm + .so link"
./m
[ $? = 37 ] || fail "asm + .so program"
"$MC" -c seven.s -o seven.o && ar rcs libs.a seven.o && "$MC" m.c libs.a libl.so -Wl,-rpath,"$PWD" -o m2 || fail ".a link"
./m2
[ $? = 37 ] || fail ".a program"
no_temps
echo "link inputs: ok"
