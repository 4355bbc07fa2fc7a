#!/bin/bash
# Annotated sources build without memlens (issue 10, item 15). The same program, with regions,
# is built with plain clang-14, clang++-14, gcc and g++ (warnings as errors, C89 to C++17) in two
# documented ways, with a copy of memlens.h found through 'memlens cc --print-include-dir' and
# with the '#ifdef __MEMLENS__' / '__has_include' idioms, and with memlens-cc / memlens-c++:
# every build prints the same; plain objects reference no memlens symbol; memlens builds profile
# the region.
. "$(dirname "$0")/cc-lib.bash"

command -v gcc >/dev/null && command -v g++ >/dev/null || { echo "gcc/g++ not installed"; exit 77; }
cd "$W" || exit 1
INC=$("$BIN/memlens" cc --print-include-dir) || fail "--print-include-dir"
[ -f "$INC/memlens.h" ] || fail "no memlens.h in '$INC'"
grep -q "SPDX-License-Identifier: MIT-0" "$INC/memlens.h" || fail "memlens.h has no license line"

# The header needs nothing else and is clean under strict flags, with and without __MEMLENS__.
printf '#include "memlens.h"\nint main(void) {\n    MEMLENS_ROI_BEGIN("x");\n    MEMLENS_ROI_END("x");\n    return 0;\n}\n' >alone.c
for cc in "gcc -std=c89 -pedantic-errors" "gcc -std=c11" "g++ -std=c++98 -pedantic-errors" \
    "clang-14 -std=c99 -Weverything" "clang++-14 -std=c++17 -Weverything -Wno-c++98-compat" \
    "clang-14 -D__MEMLENS__ -Weverything"; do
    # shellcheck disable=SC2086
    $cc -I"$INC" -Wall -Wextra -Werror -fsyntax-only -x "$([[ $cc == *++* ]] && echo c++ || echo c)" \
        alone.c || fail "memlens.h with $cc"
done

mkdir -p vendor && cp "$INC/memlens.h" vendor/
body='
#include <stdio.h>
#include <stdlib.h>
static double sum(const double *a, int n) {
    double s = 0;
    int i;
    MEMLENS_ROI_BEGIN("sum");
    for (i = 0; i < n; i++)
        s += a[i];
    MEMLENS_ROI_END("sum");
    return s;
}
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1000, i;
    double *a = (double *)malloc(n * sizeof(*a));
    for (i = 0; i < n; i++)
        a[i] = i % 7;
    printf("%.1f\n", sum(a, n));
    free(a);
    return 0;
}'
printf '#include "memlens.h"\n%s\n' "$body" >vendored.c
printf '%s\n%s\n' '#ifdef __MEMLENS__
#include <memlens.h>
#else
#define MEMLENS_ROI_BEGIN(name) ((void)0)
#define MEMLENS_ROI_END(name) ((void)0)
#endif' "$body" >ifdef.c
printf '%s\n%s\n' '#if defined(__has_include)
#if __has_include(<memlens.h>)
#include <memlens.h>
#endif
#endif
#ifndef MEMLENS_ROI_BEGIN
#define MEMLENS_ROI_BEGIN(name) ((void)0)
#define MEMLENS_ROI_END(name) ((void)0)
#endif' "$body" >has-include.c
want=$(printf '%.1f' "$(python3 -c 'print(sum(i % 7 for i in range(1000)))')")

plain() { # <source> <compiler and flags...>
    local src=$1
    shift
    rm -f prog prog.o
    "$@" -Wall -Wextra -Werror -c "$src" -o prog.o && "$@" -x none prog.o -o prog || fail "$* $src"
    [ "$(./prog)" = "$want" ] || fail "$* $src: wrong output"
    ! nm prog.o | grep -q memlens || fail "$* $src: references memlens"
}
for cc in "clang-14 -std=c99" "gcc -std=c89 -pedantic" "gcc -O2" "clang++-14 -x c++" "g++ -O2 -x c++ -std=c++17"; do
    # shellcheck disable=SC2086
    plain vendored.c $cc -Ivendor
    # shellcheck disable=SC2086
    plain ifdef.c $cc
    # shellcheck disable=SC2086
    plain has-include.c $cc
done
echo "plain clang, clang++, gcc, g++: vendored header, #ifdef __MEMLENS__ and __has_include all build"

with_memlens() { # <source> <memlens driver and flags...>
    local src=$1
    shift
    rm -rf prog out
    "$@" -Wall -Wextra -Werror "$src" -o prog || fail "$* $src"
    [ "$(MEMLENS_OUT=$PWD/out ./prog)" = "$want" ] || fail "$* $src: wrong output"
    "$BIN/memlens" report --csv out 2>/dev/null | grep -q '^sum,\|,sum,' || fail "$* $src: no region 'sum' in the profile"
}
for mc in "$BIN/memlens-cc -O2" "$BIN/memlens-c++ -O2 -x c++"; do
    # shellcheck disable=SC2086
    with_memlens vendored.c $mc -Ivendor
    # shellcheck disable=SC2086
    with_memlens ifdef.c $mc
    # shellcheck disable=SC2086
    with_memlens has-include.c $mc
done
no_temps
echo "memlens-cc, memlens-c++: all three profile the region"
