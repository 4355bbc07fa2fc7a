#!/bin/bash
# memlens cc --events=dep + memlens profile -m dep on kernels with known dependences (closed forms
# in profile/dep-check.py): C at -O0, -O2 without unrolling/vectorising (exact) and -O2 (shape),
# with 2 extra threads, 1 and 2 workers; C++ std::vector; program output unchanged; objects that
# end are forgotten (profile/dep-reuse.c); workers cut to the CPUs beside the program unless
# forced; bad usage.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
M=$root/build/bin/memlens
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
fail() { echo "FAIL: $*"; exit 1; }

for o in O0 O2f O2; do
    flags=-$o
    [ $o = O2f ] && flags="-O2 -fno-unroll-loops -fno-vectorize -fno-slp-vectorize"
    cp "$here/profile/dep-kernels.c" .
    # shellcheck disable=SC2086
    "$M" cc --events=dep $flags -g -pthread dep-kernels.c -o dk || fail "cc $o"
    # shellcheck disable=SC2086
    clang-14 $flags -pthread dep-kernels.c -o plain || fail "plain cc $o"
    want=$(./plain 1000 3 t)
    for w in 1 2; do
        rm -rf out
        got=$("$M" profile -m dep -w $w --force-workers -o out -q -- ./dk 1000 3 t) || fail "profile $o -w $w"
        [ "$got" = "$want" ] || fail "output changed under profiling ($o): '$got' vs '$want'"
        python3 "$here/profile/dep-check.py" out/dk.*.dep.csv dep-kernels.c 1000 3 $o 2 ||
            fail "dep $o -w $w"
        grep -q '"complete": true' out/dk.*.dep.json || fail "not complete ($o)"
    done
done

cp "$here/profile/dep-cxx.cc" .
"$M" cc --c++ --events=dep -O0 -g dep-cxx.cc -o dx || fail "c++ cc"
rm -rf out
"$M" profile -m dep -o out -q -- ./dx 500 4 >/dev/null || fail "c++ profile"
line=$(grep -n '// CARRIED$' dep-cxx.cc | cut -d: -f1)
python3 - out/dx.*.dep.csv "$line" <<'PY' || fail "c++ dep"
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1]))
        if r["src"].endswith("dep-cxx.cc:" + sys.argv[2]) and r["dst"] == r["src"] and r["kind"] == "RAW"
        and r["carried"] == "1"]
assert len(rows) == 1 and rows[0]["distance"] == "4" and rows[0]["count"] == str(500 - 8), rows
PY

# a heap block freed and another at its address, a stack object of a function called twice:
# the new object shows no dependence on the old one's accesses (cells cleared when it ended)
cp "$here/profile/dep-reuse.c" .
for o in O0 O2f; do
    flags=-$o
    [ $o = O2f ] && flags="-O2 -fno-unroll-loops -fno-vectorize -fno-slp-vectorize"
    # shellcheck disable=SC2086
    "$M" cc --events=dep $flags -g dep-reuse.c -o dr || fail "cc reuse $o"
    for w in 1 2; do
        rm -rf out
        got=$("$M" profile -m dep -w $w --force-workers -o out -q -- ./dr 100) || fail "reuse $o -w $w"
        [ "${got#* }" = "heap same stack same" ] || { echo "skipped reuse: objects moved ($got)"; break; }
        python3 - out/dr.*.dep.csv dep-reuse.c $o <<'PY' || fail "reuse $o -w $w"
import csv, sys
line = {}
for i, l in enumerate(open(sys.argv[2]), 1):
    if "// " in l and l.split("// ")[-1].strip().isupper():
        line[l.split("// ")[-1].strip()] = "dep-reuse.c:%d" % i
rows = {}
for r in csv.DictReader(open(sys.argv[1])):
    k = (r["src"].rsplit("/", 1)[-1], r["dst"].rsplit("/", 1)[-1], r["kind"])
    rows[k] = rows.get(k, 0) + int(r["count"])
def n(src, dst, kind):
    return rows.get((line[src], line[dst], kind), 0)
# the old objects' accesses reach nothing of the new ones (LOAD_A and LOAD_B lines also load
# and store the variable s, which lives on)
for src, dst, kind in (("STORE_A", "STORE_B", "WAW"), ("LOAD_A", "STORE_B", "WAR"),
                       ("STORE_A", "LOAD_B", "RAW")):
    assert not n(src, dst, kind), (src, dst, kind, rows)
assert not n("STORE_F", "STORE_F", "WAW") and not n("LOAD_F", "STORE_F", "WAR"), rows
# what each object really has
assert n("STORE_B", "LOAD_B", "RAW") == 100 and n("STORE_A", "LOAD_A", "RAW") == 100, rows
assert n("STORE_F", "LOAD_F", "RAW") == 128, rows
PY
    done
done

# workers beyond the CPUs beside the program's are cut (one CPU here: one worker), and say so
if command -v taskset >/dev/null; then
    rm -rf out
    taskset -c 0 "$M" profile -m dep -w 3 -o out -q -- ./dk 100 3 >/dev/null 2>err || fail "cut workers"
    grep -q "running 1 worker, not 3: .*(--force-workers runs 3)" err || fail "cut message: $(cat err)"
    grep -q '"workers": 1,' out/dk.*.dep.json || fail "workers not cut"
    rm -rf out
    taskset -c 0 "$M" profile -m dep -w 3 --force-workers -o out -q -- ./dk 100 3 >/dev/null 2>err ||
        fail "forced workers"
    grep -q "running" err && fail "forced workers cut: $(cat err)"
    grep -q '"workers": 3,' out/dk.*.dep.json || fail "workers not forced"
fi

"$M" cc --events=nosuch -c dep-kernels.c -o x.o 2>err && fail "unknown module accepted"
grep -q "unknown profiling module 'nosuch'" err || fail "unknown module message: $(cat err)"
"$M" cc --events=dep --trace -c dep-kernels.c -o x.o 2>err && fail "--events with --trace accepted"
grep -q "choose one" err || fail "events+trace message: $(cat err)"
exit 0
