#!/bin/bash
# memlens cc --events=pointsto + memlens profile -m pointsto: two arrays from two allocation sites
# reached through a function-pointer argument (profile/pointsto-prog.c), a global array and a
# local array (named by their declarations and variables), null, and a
# list whose nodes come from one site; rows checked exactly at -O0 and -O2, 1 and 2 workers alike,
# program output unchanged.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
M=$root/build/bin/memlens
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
fail() { echo "FAIL: $*"; exit 1; }

cp "$here/profile/pointsto-prog.c" .
for o in O0 O2; do
    "$M" cc --events=pointsto -$o -g pointsto-prog.c -o pp || fail "cc $o"
    clang-14 -$o pointsto-prog.c -o plain || fail "plain cc $o"
    want=$(./plain 100)
    for w in 1 2; do
        rm -rf out
        got=$("$M" profile -m pointsto -w $w --force-workers -o out -q -- ./pp 100 2>/dev/null) ||
            fail "profile $o -w $w"
        [ "$got" = "$want" ] || fail "output changed ($o): '$got' vs '$want'"
        cp out/pp.*.pointsto.csv "rows.$w"
        python3 - "rows.$w" pointsto-prog.c $o <<'PY' || fail "pointsto $o -w $w"
import csv, sys
path, src, opt = sys.argv[1:]
line = {}
for no, text in enumerate(open(src), 1):
    if "/* " in text:
        word = text.rsplit("/* ", 1)[1].split(" ")[0]
        if word.isupper():
            line[word] = "%s:%d" % (src, no)
rows = list(csv.DictReader(open(path)))
for r in rows:
    r["pointer"] = r["pointer"].rsplit("/", 1)[-1]
    r["site"] = r["site"].rsplit("/", 1)[-1]
def targets(mark, kind):
    return {r["site"]: int(r["count"]) for r in rows if r["pointer"] == line[mark] and r["kind"] == kind}
a, b, g, loc = line["ARRAY_A"], line["ARRAY_B"], line["GLOBAL"], line["LOCAL"]
want = {b: 2, a: 1, "null": 1, g: 1, loc: 1}
assert targets("SUM", "arg0") == want, ("sum's parameter", targets("SUM", "arg0"))
assert targets("APPLY", "arg1") == want, ("apply's parameter", targets("APPLY", "arg1"))
objects = {(r["site"], r["object"], r["name"]) for r in rows if r["pointer"] == line["SUM"]}
assert objects == {(b, "heap", ""), (a, "heap", ""), ("null", "null", ""),
                   (g, "global", "global_arr"), (loc, "stack", "local")}, objects
assert targets("NODE", "call") == {line["NODE"]: 10}, targets("NODE", "call")
assert targets("ARRAY_A", "call") == {a: 1} and targets("ARRAY_B", "call") == {b: 1}
nxt = targets("NEXT", "load")
assert nxt == ({line["NODE"]: 9, "null": 1} if opt == "O2" else {line["NODE"]: 19, "null": 1}), nxt
PY
    done
    cmp -s rows.1 rows.2 || fail "1 and 2 workers differ ($o): $(diff rows.1 rows.2)"
done
# A global of a shared library built with --events and loaded by dlopen: announced when it is
# loaded, so pointers into it name it.
cat >lib.c <<'C'
long lib_table[10] = {1, 2, 3};
long *lib_get(void) { return lib_table; }
C
cat >dl.c <<'C'
#include <dlfcn.h>
#include <stdio.h>
__attribute__((noinline)) static long first(const long *p) /* FIRST */
{
    return p[0];
}
int main(int argc, char **argv)
{
    void *h = dlopen(argv[1], RTLD_NOW);
    long *(*get)(void) = h ? (long *(*)(void))dlsym(h, "lib_get") : NULL;
    long s = 0;
    for (int i = 0; get && i < 3; i++)
        s += first(get());
    printf("%ld\n", s);
    return 0;
}
C
for o in O0 O2; do
    "$M" cc --events=pointsto -$o -g -fPIC -shared lib.c -o libt.so || fail "cc -shared $o"
    "$M" cc --events=pointsto -$o -g dl.c -ldl -o dl || fail "cc dl $o"
    rm -rf out
    [ "$("$M" profile -m pointsto -o out -q -- ./dl "$PWD/libt.so" 2>/dev/null)" = 3 ] ||
        fail "dlopen program ($o)"
    grep -q "^dl.c:3,lib.c:1,3,arg0,first,global,lib_table$" out/dl.*.pointsto.csv ||
        fail "dlopen'ed global ($o): $(cat out/dl.*.pointsto.csv)"
done

"$M" profile --list-modules | grep -q '^ *pointsto' || fail "pointsto not listed"
exit 0
