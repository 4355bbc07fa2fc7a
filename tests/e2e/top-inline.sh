#!/bin/bash
# --top names functions the compiler inlined: with -g, at -O2 and -O3, a C program whose region
# inlines static kernels from a header (axpy, a variable-size memcpy, and scale, which inlines axpy
# itself) and a C++ method whose region inlines a function template for double and float. Each
# kernel has a row "kernel (inlined into caller)" at a line of its own source (the header, not the
# caller's file) whose bytes are, in the table's CSV and JSON: the closed form from the arguments,
# and the bytes of the same kernel's row in a build where it is not inlined (-DML_NOINLINE:
# __attribute__((noinline))). The rows of functions that were not inlined add up to the
# region's bytes; an inlined row is part of its caller's. Without -g: no inlined rows, and the
# table says to build with -g. Also for a kernel inlined into a function that the region reaches
# only through a function pointer.
. "$(dirname "$0")/../lib/common.sh"
ml_require_cc
src=$ML_ROOT/tests/e2e/top
N=1000 M=100 REPS=10

# top_csv <profile dir> <out>: --top CSV, functions ranked by bytes.
top_csv() {
    "$MEMLENS" report --top 50 --csv "$1" >"$2" || fail "report --top --csv $1"
    "$MEMLENS" report --csv --totals "$1" >"$2.totals" || fail "report --csv $1"
}

for O in 2 3; do
    for v in inl noinl; do
        def=
        [ $v = noinl ] && def=-DML_NOINLINE
        $MLCC -O$O -g $def -I"$ML_ROOT/include" -o "$T/c-$v$O" "$src/inl.c" || fail "build C -O$O $v"
        $MLCXX -O$O -g $def -I"$ML_ROOT/include" -o "$T/x-$v$O" "$src/inl.cpp" ||
            fail "build C++ -O$O $v"
        rm -rf "$T/oc-$v$O" "$T/ox-$v$O"
        MEMLENS_OUT=$T/oc-$v$O "$T/c-$v$O" $N $M $REPS >/dev/null || fail "run C -O$O $v"
        MEMLENS_OUT=$T/ox-$v$O "$T/x-$v$O" $N $REPS >/dev/null || fail "run C++ -O$O $v"
        top_csv "$T/oc-$v$O" "$T/c-$v$O.csv"
        top_csv "$T/ox-$v$O" "$T/x-$v$O.csv"
    done
    "$MEMLENS" report --top 50 "$T/oc-inl$O" >"$T/table$O" || fail "report --top -O$O"
    grep -q "build with -g" "$T/table$O" && fail "-O$O: -g hint on a -g build"
    for k in axpy scale copy; do
        grep -q "^  $k (inlined into main) " "$T/table$O" ||
            { cat "$T/table$O"; fail "-O$O: no '$k (inlined into main)' row in the table"; }
    done
    "$MEMLENS" report --top 50 "$T/ox-inl$O" >"$T/xtable$O" || fail "report --top C++ -O$O"
    for k in "axpy<double>" "axpy<float>"; do
        grep -q "^  $k (inlined into " "$T/xtable$O" ||
            { cat "$T/xtable$O"; fail "-O$O: no '$k (inlined into ...)' row in the C++ table"; }
    done
    "$MEMLENS" report --top 50 --json "$T/oc-inl$O" | python3 -c '
import json, sys
fs = json.load(sys.stdin)["profiles"][0]["functions_by_bytes"]
a = [f for f in fs if f["symbol"] == "axpy"]
assert len(a) == 1 and a[0]["inlined_into"] == "main" and a[0]["name"] == "axpy (inlined into main)", a
assert [f["inlined_into"] for f in fs if f["symbol"] == "main"] == [None], fs
' || fail "-O$O: JSON inlined_into"
    python3 - "$O" "$src" $N $M $REPS "$T" <<'PY' || fail "-O$O: inlined rows disagree"
import csv, re, sys
O, src, N, M, REPS, T = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6]), sys.argv[6]
bad = []

def check(what, got, want):
    if got != want:
        bad.append("-O%s %s: got %r, want %r" % (O, what, got, want))

def rows(path):
    """Function rows ranked by bytes: {(function, inlined_into): row}."""
    out = {}
    for r in csv.DictReader(open(path)):
        if r["ranking"] == "bytes" and r["kind"] == "function":
            key = (r["function"], r["inlined_into"])
            assert key not in out, key
            out[key] = r
    return out

def total(path):
    """Bytes read and written of all regions (the CSV total rows)."""
    rd = wr = 0
    for r in csv.DictReader(open(path + ".totals")):
        rd += sum(int(r[k]) for k in ("rd_heap", "rd_global", "rd_stack"))
        wr += sum(int(r[k]) for k in ("wr_heap", "wr_global", "wr_stack"))
    return rd, wr

def span(header, start):
    """Lines of the definition that starts with `start` in header (to its closing brace)."""
    lines = open(header).read().split("\n")
    a = next(i for i, l in enumerate(lines) if l.startswith(start)) + 1
    b = next(i for i in range(a, len(lines) + 1) if lines[i - 1] == "}")
    return range(a, b + 1)

def bytes_of(r):
    return int(r["bytes_read"]), int(r["bytes_written"])

for lang, kernels, caller_own in (
        ("c", {"axpy": ((2 * 16 * N, 2 * 8 * N), "inl-kern.h", "KERNEL void axpy"),
               "copy": ((M, M), "inl-kern.h", "KERNEL void copy"),
               "scale": ((8 * N, 8 * N), "inl-kern.h", "KERNEL void scale")}, (8 * N, 0)),
        ("x", {"void axpy<double>(double*, double const*, long, double)":
                   ((16 * N, 8 * N), "inl-kern.hpp", "template <typename T> KERNEL void axpy"),
               "void axpy<float>(float*, float const*, long, float)":
                   ((8 * N, 4 * N), "inl-kern.hpp", "template <typename T> KERNEL void axpy")},
         (8 * N, 0))):
    inl, noinl = rows("%s/%s-inl%s.csv" % (T, lang, O)), rows("%s/%s-noinl%s.csv" % (T, lang, O))
    # the shares come after the counters: the region slots the inline markers use must not move
    for run in ("inl", "noinl"):
        ex = [int(r["executions"]) for r in
              csv.DictReader(open("%s/%s-%s%s.csv.totals" % (T, lang, run, O)))]
        check("%s %s: region executions" % (lang, run), ex, [REPS])
    # every byte once: the rows of functions that were not inlined add up to the regions' bytes
    for name, rs, run in (("inlined", inl, "inl"), ("noinline", noinl, "noinl")):
        own = [r for (f, into), r in rs.items() if not into]
        check("%s %s: functions not inlined add up to the total" % (lang, name),
              tuple(map(sum, zip(*[bytes_of(r) for r in own]))),
              total("%s/%s-%s%s.csv" % (T, lang, run, O)))
    hosts = {}
    for k, (want, header, start) in kernels.items():
        got = [(into, r) for (f, into), r in inl.items() if f == k and into]
        if len(got) != 1:
            bad.append("-O%s %s: %d rows for %r inlined, want 1 (%s)" % (O, lang, len(got), k,
                                                                         sorted(inl)))
            continue
        into, r = got[0]
        hosts.setdefault(into, []).append(r)
        check("%s %r inlined: name" % (lang, k), r["name"], "%s (inlined into %s)" % (k, into))
        want = (want[0] * REPS, want[1] * REPS)
        check("%s %r inlined: bytes (closed form)" % (lang, k), bytes_of(r), want)
        check("%s %r inlined: file" % (lang, k), r["file"].endswith("/" + header), True)
        if int(r["line"]) not in span("%s/%s" % (src, header), start):
            bad.append("-O%s %s %r inlined: line %s outside its definition" % (O, lang, k,
                                                                               r["line"]))
        plain = noinl.get((k, ""))
        if plain is None:
            bad.append("-O%s %s: no row for %r in the noinline build" % (O, lang, k))
        else:
            check("%s %r: bytes inlined vs noinline" % (lang, k), bytes_of(r), bytes_of(plain))
    # an inlined row is a part of its caller's row, which holds the caller's own bytes besides
    for into, rs in hosts.items():
        host = [r for (f, i), r in inl.items() if f == into and not i]
        if len(host) != 1:
            bad.append("-O%s %s: no row for the caller %r" % (O, lang, into))
            continue
        parts = tuple(map(sum, zip(*[bytes_of(r) for r in rs])))
        rest = (bytes_of(host[0])[0] - parts[0], bytes_of(host[0])[1] - parts[1])
        check("%s %s minus its inlined kernels" % (lang, into), rest,
              (caller_own[0] * REPS, caller_own[1] * REPS))
for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)
PY
    echo "-O$O: inlined kernels named, bytes as in the noinline build"
done
# Through a function pointer (dynamic attribution: the writer's per-set copies of the units).
for v in inl noinl; do
    def=
    [ $v = noinl ] && def=-DML_NOINLINE
    $MLCC -O2 -g $def -I"$ML_ROOT/include" -o "$T/d-$v" "$src/inl-dyn.c" || fail "build dyn $v"
    rm -rf "$T/od-$v"
    MEMLENS_OUT=$T/od-$v "$T/d-$v" $N $REPS >/dev/null || fail "run dyn $v"
    top_csv "$T/od-$v" "$T/d-$v.csv"
done
python3 - "$T" $N $REPS <<'PY' || fail "dyn: inlined row disagrees"
import csv, sys
T, N, REPS = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def fn(path, name, into):
    r = [r for r in csv.DictReader(open(path)) if r["ranking"] == "bytes" and
         r["kind"] == "function" and r["function"] == name and r["inlined_into"] == into]
    assert len(r) == 1, (path, name, into)
    return int(r[0]["bytes_read"]), int(r[0]["bytes_written"])
want = (16 * N * (REPS // 2), 8 * N * (REPS // 2))
got = fn(T + "/d-inl.csv", "axpy", "work")
assert got == want, ("inlined", got, want)
assert fn(T + "/d-noinl.csv", "axpy", "") == want
PY
echo "dyn: axpy (inlined into work) through a function pointer"
$MLCC -O2 -I"$ML_ROOT/include" -o "$T/nog" "$src/inl.c" || fail "build without -g"
rm -rf "$T/out"
MEMLENS_OUT=$T/out "$T/nog" $N $M $REPS >/dev/null || fail "run without -g"
"$MEMLENS" report --top 50 "$T/out" >"$T/table" || fail "table without -g"
grep -q "inlined into" "$T/table" && { cat "$T/table"; fail "no -g: an inlined row"; }
grep -q "where: ? = no line information; build with -g" "$T/table" || fail "no -g: no hint"
echo ok
