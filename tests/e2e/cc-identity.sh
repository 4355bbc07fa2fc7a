#!/bin/bash
# Objects of translation units without regions are byte for byte clang's (issue 10, item 16:
# rewriting the bitcode lost its use-list order and changed the code of 11 of 44 of memlens' own
# files at -O2). Real multi-file code: every C file of memlens itself (the tool and the runtime,
# with the Makefile's flags) and the C++ sources of googletest/googlemock (templates, Debian's
# googletest package), each at -O2 and at one of -O0, -O1, -O3 and a few code generation variants
# in turn, compared with cmp against clang-14 / clang++-14 -c with the same flags. Two compiles
# run at a time.
. "$(dirname "$0")/cc-lib.bash"

cd "$W" || exit 1
GT=/usr/src/googletest
LLVM_INC=$(llvm-config-14 --includedir)
# build/gen: headers the Makefile generates (cc-link.c includes the runtime's export list)
CFLAGS_ML=(-std=c11 -D_GNU_SOURCE -I"$ROOT/include" -I"$ROOT/src" -I"$MEMLENS_BUILD/gen" -isystem "$LLVM_INC")
CXXFLAGS_GT=(-I"$GT/googletest/include" -I"$GT/googletest" -I"$GT/googlemock/include" -I"$GT/googlemock")

# Jobs: "<driver> <source> <flags...>" one per line, for xargs. Every file at -O2 (where the
# use-list order mattered most) and at one more level or variant, in turn, so that each level and
# variant meets many files while the test stays near a minute on two cores.
jobs=jobs.txt
: >$jobs
add() { # <driver> <source> <other levels and variants...>
    local lang=$1 src=$2
    shift 2
    local more=("$@")
    printf '%s %s -O2\n' "$lang" "$src" >>$jobs
    printf '%s %s %s\n' "$lang" "$src" "${more[$((k++ % ${#more[@]}))]}" >>$jobs
}
k=0
for f in "$ROOT"/src/*/*.c "$ROOT"/src/*/*/*.c; do
    add c "$f" -O0 -O1 -O3 "-O2 -g" "-O3 -fPIC -fvisibility=hidden" "-Os -ffunction-sections" \
        "-O2 -march=haswell"
done
if [ -d "$GT/googletest/src" ]; then
    k=0
    for f in "$GT"/googletest/src/gtest-{assertion-result,filepath,matchers,printers,test-part,typed-test}.cc \
        "$GT"/googlemock/src/gmock-{cardinalities,matchers}.cc; do
        [ -f "$f" ] && add c++ "$f" -O0 -O1 -O3 "-O2 -g"
    done
else
    echo "googletest sources not installed (Debian package googletest): C++ part skipped"
fi

one() { # <c|c++> <source> <flags...>: prints "same|DIFF|ERROR <n> <source> <flags>"
    local lang=$1 src=$2 id
    shift 2
    id=$(printf '%s %s' "$src" "$*" | md5sum | cut -c1-12)
    if [ "$lang" = c ]; then
        clang-14 "$@" "${CFLAGS_ML[@]}" -c "$src" -o "ref-$id.o" 2>/dev/null &&
            "$BIN/memlens-cc" "$@" "${CFLAGS_ML[@]}" -c "$src" -o "got-$id.o" 2>"err-$id.txt"
    else
        clang++-14 "$@" "${CXXFLAGS_GT[@]}" -c "$src" -o "ref-$id.o" 2>/dev/null &&
            "$BIN/memlens-c++" "$@" "${CXXFLAGS_GT[@]}" -c "$src" -o "got-$id.o" 2>"err-$id.txt"
    fi || { echo "ERROR $src $*: $(head -2 "err-$id.txt" 2>/dev/null)"; return; }
    if cmp -s "ref-$id.o" "got-$id.o"; then
        echo "same $src $*"
    else
        echo "DIFF $src $*"
    fi
    rm -f "ref-$id.o" "got-$id.o" "err-$id.txt"
}
export -f one
# Arrays do not cross xargs: strings (no spaces in these paths) split again in the child.
export BIN CFLAGS_ML_S="${CFLAGS_ML[*]}" CXXFLAGS_GT_S="${CXXFLAGS_GT[*]}"
xargs -P 2 -L 1 bash -c 'CFLAGS_ML=($CFLAGS_ML_S) CXXFLAGS_GT=($CXXFLAGS_GT_S); one "$@"' _ <$jobs >results.txt
n=$(wc -l <$jobs)
same=$(grep -c '^same' results.txt)
grep -v '^same' results.txt | head -20
[ "$same" = "$n" ] || fail "$same of $n objects identical to clang's"
no_temps
echo "$n objects ($(grep -c '^c ' $jobs) C, $(grep -c '^c++ ' $jobs) C++): all byte-identical to clang's"
