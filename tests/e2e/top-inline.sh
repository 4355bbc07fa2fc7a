#!/bin/bash
# --top places every location in the function's own source: with a kernel from a header and a
# static helper inlined (-O1..-O3), every function row and block row of caller and main names a
# line of inline.c inside that function, never kern.h or fill's lines; at -O0 (nothing inlined)
# kern and fill have rows of their own at their own lines. Table, CSV and JSON agree.
. "$(dirname "$0")/../lib/common.sh"
ml_require_cc
cp "$ML_ROOT/tests/e2e/top/inline.c" "$ML_ROOT/tests/e2e/top/kern.h" "$T/" && cd "$T" || fail "copy"
for O in 0 1 2 3; do
    $MLCC --ml-all -g -O$O -o "$T/inl$O" inline.c || fail "build -O$O"
    rm -rf "$T/out"
    MEMLENS_OUT=$T/out "$T/inl$O" 20000 >/dev/null || fail "run -O$O"
    "$MEMLENS" report --top 50 --csv "$T/out" >"$T/top.csv" || fail "csv -O$O"
    "$MEMLENS" report --top 50 --json "$T/out" >"$T/top.json" || fail "json -O$O"
    python3 - "$O" inline.c kern.h "$T/top.csv" "$T/top.json" <<'PY' || fail "-O$O locations"
import csv, json, re, sys
O, src, hdr, csvf, jsonf = sys.argv[1:]

def spans(path):
    """Line range of each function defined in path: from its name line to its closing brace."""
    out, cur = {}, None
    for no, text in enumerate(open(path), 1):
        m = re.match(r'^(?:static |__attribute__\(\(noinline\)\) )*(?:inline )?\w+ \*?(\w+)\(', text)
        if m:
            cur = m.group(1)
            out[cur] = [no, no]
        elif cur and text.startswith('}'):
            out[cur][1] = no
            cur = None
    return out

own = {f: (src, r) for f, r in spans(src).items()}
own.update({f: (hdr, r) for f, r in spans(hdr).items()})
rows = list(csv.DictReader(open(csvf)))
assert rows, "no rows"
seen = set()
for r in rows:
    f = r["function"]
    if f not in own or not r["file"]:
        continue  # a block without any located instruction has no line
    file, (lo, hi) = own[f]
    assert r["file"] == file or r["file"] == "./" + file, (O, r)
    assert lo <= int(r["line"]) <= hi, (O, f, r["line"], (lo, hi))
    seen.add(f)
want = {"caller", "main"} | ({"kern", "fill"} if O == "0" else set())
assert want <= seen, (O, seen)
if O != "0":
    assert not seen & {"kern", "fill"}, (O, seen)
p = json.load(open(jsonf))["profiles"][0]
for f in p["functions_by_bytes"]:
    if f["symbol"] in own and f["line"]:
        file, (lo, hi) = own[f["symbol"]]
        assert lo <= f["line"] <= hi, (O, f)
print("-O%s: %s" % (O, ", ".join("%s %s:%s" % (r["function"], r["file"], r["line"])
                                 for r in rows if r["kind"] == "function")))
PY
done
"$MEMLENS" report --top 5 "$T/out" >"$T/table" || fail "table"
grep -q 'kern\.h' "$T/table" && { cat "$T/table"; fail "-O3 table names kern.h"; }
echo ok
