#!/bin/bash
# memlens cc --events=lifetime + memlens profile -m lifetime: heap objects per allocation site,
# checked exactly against what the kernels do (profile/lifetime-kernels.c, lifetime-cxx.cc):
# freed in the same iteration or kept, freed in the same call or returned, never freed, realloc,
# calloc, strdup and fopen (blocks made inside the C library), a local array released each
# iteration by its lifetime markers (-O2) or at return (-O0), a global never freed, C++ new/delete, new[]/delete[],
# aligned new and new as an invoke; -O0 and -O2, 1 and 2 workers alike, 2 extra threads, output unchanged.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
M=$root/build/bin/memlens
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
fail() { echo "FAIL: $*"; exit 1; }

cp "$here/profile/lifetime-kernels.c" "$here/profile/lifetime-cxx.cc" .
check() { # csv source expectations(python dict: marker -> {column: value})
    python3 - "$@" <<'PY'
import csv, sys
path, src, want = sys.argv[1], sys.argv[2], eval(sys.argv[3])
rows = {r["site"].rsplit("/", 1)[-1]: r for r in csv.DictReader(open(path))}
line = {}
for no, text in enumerate(open(src), 1):
    for tag in ("/* ", "// "):
        if tag in text:
            word = text.rsplit(tag, 1)[1].split(" ")[0].strip()
            if word.isupper():
                line[word] = "%s:%d" % (src, no)
for mark, cols in want.items():
    r = rows.get(line[mark])
    assert r, ("no row for", mark, line[mark], sorted(rows))
    for c, v in cols.items():
        assert (r[c] if isinstance(v, str) else int(r[c])) == v, (mark, c, "got", r[c], "want", v, r)
PY
}
C_WANT='{
 "ITER": dict(objects=300, bytes=12000, freed_in_iteration=300, freed_in_call=300, never_freed=0,
              freed_by_other_thread=0),
 "KEPT": dict(objects=100, bytes=2400, freed_in_iteration=0, freed_in_call=100, never_freed=0),
 "KEPT_ARRAY": dict(objects=1, bytes=800, freed_in_iteration=0, freed_in_call=1, never_freed=0),
 "RETURNED": dict(objects=100, bytes=4000, freed_in_iteration=100, freed_in_call=0, never_freed=0),
 "LEAK": dict(objects=5, bytes=500, never_freed=5, freed=0, freed_in_call=0),
 "REALLOC_FIRST": dict(objects=1, bytes=8, realloced=1, freed=0, never_freed=0),
 "REALLOC": dict(objects=10, bytes=880, realloced=9, freed=1, freed_in_call=1,
                 freed_in_iteration=0, never_freed=0),
 "CALLOC": dict(objects=1, bytes=800, freed_in_call=1, never_freed=0),
 "STRDUP": dict(objects=100, bytes=800, freed_in_iteration=100, freed_in_call=100, never_freed=0),
 "FOPEN": dict(objects=1, freed=1, freed_in_call=1, never_freed=0),
 "GLOBAL_TAB": dict(objects=1, bytes=256, never_freed=1, freed=0, kind="global", name="table"),
}'
# The local array: one object per iteration with lifetime markers (-O2), one per call without (-O0).
STACK_WANT_O2='{"STACK_ITER": dict(objects=100, bytes=6400, freed_in_iteration=100, freed_in_call=100,
                               never_freed=0, kind="stack", name="buf")}'
STACK_WANT_O0='{"STACK_ITER": dict(objects=1, bytes=64, freed_in_iteration=0, freed_in_call=1,
                               never_freed=0, kind="stack", name="buf")}'
CXX_WANT='{
 "NEW": dict(objects=100, bytes=1600, freed_in_iteration=100, freed_in_call=100, never_freed=0),
 "NEW_ARRAY": dict(objects=1, bytes=400, freed=1, freed_in_call=0, never_freed=0),
 "WIDE": dict(objects=25, bytes=1600, freed_in_iteration=0, freed_in_call=25, never_freed=0),
 "WIDE_ARRAY": dict(objects=1, bytes=200, freed_in_call=1, never_freed=0),
 "INVOKE": dict(objects=100, bytes=3200, freed_in_iteration=100, freed_in_call=100),
}'
for o in O0 O2; do
    "$M" cc --events=lifetime -$o -g -pthread lifetime-kernels.c -o lk || fail "cc $o"
    clang-14 -$o -pthread lifetime-kernels.c -o plain || fail "plain cc $o"
    want=$(./plain 100 2)
    [ "$(./lk 100 2)" = "$want" ] || fail "output changed without a backend ($o)"
    for w in 1 2; do
        rm -rf out
        got=$("$M" profile -m lifetime -w $w --force-workers -o out -q -- ./lk 100 2 2>/dev/null) ||
            fail "profile $o -w $w"
        [ "$got" = "$want" ] || fail "output changed ($o): '$got' vs '$want'"
        check out/lk.*.lifetime.csv lifetime-kernels.c "$C_WANT" || fail "C kernels $o -w $w"
        stack_want=STACK_WANT_$o
        check out/lk.*.lifetime.csv lifetime-kernels.c "${!stack_want}" || fail "stack $o -w $w"
        grep -v '^library' out/lk.*.lifetime.csv | cut -d, -f1-11,13 >"rows.$w"
    done
    cmp -s rows.1 rows.2 || fail "1 and 2 workers differ ($o): $(diff rows.1 rows.2)"
    python3 -c 'import json,sys; json.load(open(sys.argv[1]))' out/lk.*.lifetime.json ||
        fail "json ($o)"
    grep -q '"complete": true' out/lk.*.lifetime.json || fail "incomplete ($o)"

    "$M-c++" --ml-events=lifetime -$o -g lifetime-cxx.cc -o lx || fail "c++ $o"
    clang++-14 -$o lifetime-cxx.cc -o plainx || fail "plain c++ $o"
    rm -rf out
    got=$("$M" profile -m lifetime -w 2 --force-workers -o out -q -- ./lx 100 2>/dev/null) || fail "profile c++ $o"
    [ "$got" = "$(./plainx 100)" ] || fail "c++ output changed ($o)"
    check out/lx.*.lifetime.csv lifetime-cxx.cc "$CXX_WANT" || fail "C++ kernels $o"
done

# compiled for lifetime, linked without --events: no interposers, and the table says so
"$M" cc --events=lifetime -O1 -g -c lifetime-kernels.c -o lk.o || fail "cc -c"
"$M" cc -O1 lk.o -pthread -o lsep || fail "link without --events"
! nm lsep | grep -qE ' [TW] malloc$' || fail "linked the interposers without --events"
"$M" profile -m lifetime -o out2 -- ./lsep 10 1 2>/dev/null | grep -q '^no heap events' ||
    fail "no note for a program linked without the interposers"
grep -q '"heap_events": false' out2/lsep.*.lifetime.json || fail "json: heap_events"
"$M" cc --events=lifetime -O1 lk.o -pthread -o lsep2 || fail "link with --events"
"$M" profile -m lifetime -o out3 -q -- ./lsep2 10 1 >/dev/null 2>&1 || fail "profile lsep2"
check out3/lsep2.*.lifetime.csv lifetime-kernels.c '{"ITER": dict(objects=20, freed_in_iteration=20)}' ||
    fail "separate compile and link"
# -static keeps the C library's malloc: no heap events, said so
echo 'int main(void) { return 0; }' >probe.c
if clang-14 -static -o probe probe.c 2>/dev/null; then
    "$M" cc --events=lifetime -O1 -static -pthread lifetime-kernels.c -o lstatic || fail "cc -static"
    [ "$(./lstatic 10 1)" = "$(./plain 10 1)" ] || fail "-static output changed"
    "$M" profile -m lifetime -o out4 -- ./lstatic 10 1 2>/dev/null | grep -q '^no heap events' ||
        fail "no note for -static"
fi

# region markers in an --events build (their names used to stay in llvm.metadata: no link)
cat >roi.c <<'C'
#include <stdio.h>
#include <stdlib.h>
#include "memlens.h"
char *volatile sink;
int main(void)
{
    MEMLENS_ROI_BEGIN("work");
    char *p = malloc(10); /* ROI_ALLOC */
    sink = p;
    p[0] = 'a';
    printf("%c\n", p[0]);
    free(p);
    MEMLENS_ROI_END("work");
    return 0;
}
C
"$M" cc --events=lifetime -O2 -g -I"$root/include" roi.c -o roi || fail "--events with region markers"
"$M" profile -m lifetime -o out5 -q -- ./roi >/dev/null 2>&1 || fail "profile roi"
check out5/roi.*.lifetime.csv roi.c '{"ROI_ALLOC": dict(objects=1, freed_in_call=1)}' ||
    fail "roi: lifetime rows"

# a build for a module that wants no heap events (sharing; dep wants them, to forget freed
# blocks) sends none
"$M" cc --events=sharing -O1 -g lifetime-kernels.c -pthread -o lsh || fail "cc sharing"
rm -rf out
"$M" profile -m stats -o out -q -- ./lsh 10 >/dev/null 2>&1 || fail "profile stats"
grep -q '^0,[12],' out/lsh.*.stats.csv || fail "sharing build: no accesses in the stats"
! grep -Eq '^[0-9]+,(56|57|58|62),' out/lsh.*.stats.csv || fail "sharing build sent heap events"

# Function and loop events only where an object can be made (docs/profile-modules.md, "Function
# events"): in bench/kernels/smallfn.c the leaf accessors and update() (which calls only them) get
# none, main (malloc, printf) keeps its entry and exit but none of its loops can make an object
# (they call update() at most): no loop events; with dep in the same build every loop keeps its
# events. The closed forms above show the reports unchanged.
events_of() { # bitcode module-list -> "function kind count" lines
    "$M" instrument --events=$2 -o ev.bc "$1" >/dev/null || fail "instrument $2"
    llvm-dis-14 ev.bc -o ev.ll || fail "llvm-dis $2"
    python3 - ev.ll <<'PY'
import re, sys, collections
c, fn = collections.Counter(), None
for line in open(sys.argv[1]):
    m = re.match(r"define .*@([\w.]+)\(", line)
    if m:
        fn = m.group(1)
    m = re.search(r"= add i64 (\d+), %", line)
    if m and fn:
        c[(fn, int(m.group(1)) & 0xff)] += 1
for (f, k), n in sorted(c.items()):
    print(f, k, n)
PY
}
for o in O0 O2; do
    clang-14 -$o -g -I"$root/include" -c -emit-llvm "$root/bench/kernels/smallfn.c" -o sf.bc ||
        fail "smallfn bitcode $o"
    ev=$(events_of sf.bc lifetime)
    for f in get_x get_v set_x set_v force step update; do
        ! grep -Eq "^$f (11|12|13|14|15) " <<<"$ev" || fail "$o: function events in leaf $f: $ev"
    done
    grep -q "^main 11 1$" <<<"$ev" || fail "$o: main lost its entry event: $ev"
    ! grep -Eq "^main (13|14|15) " <<<"$ev" || fail "$o: loop events in main: $ev"
    ev=$(events_of sf.bc pointsto)
    ! grep -Eq "^(get_x|update) (11|12) " <<<"$ev" || fail "$o: pointsto function events: $ev"
    grep -Eq "^get_x 61 [0-9]+$" <<<"$ev" || fail "$o: pointsto lost get_x's parameter: $ev"
    ev=$(events_of sf.bc dep,lifetime)
    ! grep -Eq "^get_x (11|12) " <<<"$ev" || fail "$o: dep,lifetime function events in get_x: $ev"
    [ "$(grep -c '^main 14 ' <<<"$ev")" = 1 ] && [ "$(grep '^main 14 ' <<<"$ev" | cut -d' ' -f3)" -ge 3 ] ||
        fail "$o: dep,lifetime: every loop of main iterates: $ev"
done
exit 0
