#!/bin/bash
# memlens cc --events=sharing + memlens profile -m sharing: two threads writing adjacent fields of
# one struct (false sharing, one line, never true) and a producer handing a buffer to a consumer
# (true sharing; at -O0 every one of the 256 loads), C at -O0 and -O2, 1 and 2 workers.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
M=$root/build/bin/memlens
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
fail() { echo "FAIL: $*"; exit 1; }

cp "$here/profile/sharing-prog.c" .
for o in O0 O2; do
    "$M" cc --events=sharing -$o -g -pthread sharing-prog.c -o sp || fail "cc $o"
    clang-14 -$o -pthread sharing-prog.c -o plain || fail "plain cc $o"
    want=$(./plain 20000)
    for w in 1 2; do
        rm -rf out
        got=$("$M" profile -m sharing -w $w --force-workers -o out -q -- ./sp 20000 2>/dev/null) ||
            fail "profile $o -w $w"
        [ "$got" = "$want" ] || fail "output changed ($o): '$got' vs '$want'"
        python3 - out/sp.*.sharing.csv sharing-prog.c $o <<'PY' || fail "sharing $o -w $w"
import csv, sys
rows, src, opt = list(csv.DictReader(open(sys.argv[1]))), sys.argv[2], sys.argv[3]
line = {}
for no, text in enumerate(open(src), 1):
    if "/* " in text and text.rstrip().endswith("*/"):
        line[text.rsplit("/* ", 1)[1].split(" ")[0]] = "sharing-prog.c:%d" % no
for r in rows:
    r["src"], r["dst"] = r["src"].rsplit("/", 1)[-1], r["dst"].rsplit("/", 1)[-1]
fields = {line["FIELD_A"], line["FIELD_B"]}
fs = [r for r in rows if r["src"] in fields and r["dst"] in fields and r["src"] != r["dst"]]
assert fs, ("no false sharing between the fields", rows)
assert all(r["kind"] == "false" for r in fs), fs
assert len({r["line_addr"] for r in fs}) == 1, fs
assert all(r["threads"].split("-")[0] != r["threads"].split("-")[1] for r in fs), fs
ts = [r for r in rows if r["src"] == line["PRODUCE"] and r["dst"] == line["CONSUME"]]
assert ts and all(r["kind"] == "true" for r in ts), ("hand-over", rows)
if opt == "O0":
    assert sum(int(r["count"]) for r in ts) == 256, ts
# the two halves of the program share nothing
halves = [fields, {line["PRODUCE"], line["CONSUME"]}]
assert not [r for r in rows if (r["src"] in halves[0] and r["dst"] in halves[1])
            or (r["src"] in halves[1] and r["dst"] in halves[0])], rows
PY
    done
done

# -O0: loads of variables no pointer names are left out of sharing builds (no other thread can
# store in them), not of a build with another module. Counted with the stats module, the loads
# that stay: the 10000 of g[i], add()'s *to and main's t (address taken); not those of s, i, r
# and of add()'s parameter slots.
cp "$here/profile/sharing-locals.c" .
"$M" cc --events=sharing -O0 -g sharing-locals.c -o sl || fail "cc sharing-locals"
"$M" cc --events=sharing,dep -O0 -g sharing-locals.c -o sld || fail "cc sharing-locals dep"
loads() { # build -> load events (kind 1) seen by the stats module
    rm -rf out
    [ "$("$M" profile -m stats -o out -q -- "./$1" 2>/dev/null)" = "4995000 4995000" ] ||
        fail "output of $1"
    python3 -c 'import csv, sys
print(sum(int(r["events"]) for r in csv.DictReader(open(sys.argv[1])) if r["kind"] == "1"))' \
        out/"$1".*.stats.csv
}
n=$(loads sl) || exit 1
[ "$n" = 10002 ] || fail "sharing build: $n load events, want 10002"
n=$(loads sld) || exit 1
[ "$n" -gt 30000 ] || fail "sharing,dep build: $n load events, want the locals' too"
exit 0
