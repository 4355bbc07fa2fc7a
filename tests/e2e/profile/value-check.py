#!/usr/bin/env python3
"""Checks memlens profile -m value's CSV for profile/value-kernels.c against closed forms.

usage: value-check.py out.csv value-kernels.c N THREADS LEVEL K
(THREADS: program threads that ran the kernels, main included; LEVEL O0, O2f (no unrolling or
vectorising: exact, one load row per kernel line) or O2 (shape only: vector loads carry no value);
K: the constant the program was given)."""
import csv
import sys

path, src, n, threads, level, k = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:5]), *sys.argv[5:7]
rows = list(csv.DictReader(open(path)))
assert rows and list(rows[0])[:5] == ["load", "kind", "value", "stride", "count"], list(rows[0])
file = src.rsplit("/", 1)[-1]
tags = {}
for i, line in enumerate(open(src), 1):
    if "/* " in line and line.rstrip().endswith("*/"):
        tags[line.rsplit("/* ", 1)[1].split(" ")[0]] = "%s:%d" % (file, i)


def setcol(pairs):
    """The values column: value:count, most frequent first, ties by the value's bits."""
    return ";".join("%s:%d" % (v, c * threads) for v, c, _ in sorted(pairs, key=lambda p: (-p[1], p[2])))


c = n * threads
want = {  # tag: [(kind, value, stride, count, type, size, distinct, values), ...]
    "CONST": [("constant", k, "", c, "int", "4", "1", "%s:%d" % (k, c))],
    "STRIDE": [("strided", "5", "3", c, "int", "4", ">8", "")],
    "SET": [("set", "10", "", c, "int", "4", "3",
             setcol([(10, (n + 2) // 3, 10), (20, (n + 1) // 3, 20), (40, n // 3, 40)]))],
    "VARIED": [("varied", "", "", c, "int", "4", ">8", "")],
    "U8": [("strided", "0", "1", c, "int", "1", ">8", "")],  # wraps at 256: still +1 mod 2^8
    "I16": [("constant", "-2", "", c, "int", "2", "1", "-2:%d" % c)],
    "I64": [("strided", "1000000000000", "-7", c, "int", "8", ">8", "")],
    "DOUBLE": [("strided", "0", "0.5", c, "double", "8", ">8", "")],
    "FLOAT": [("set", "1.5", "", c, "float", "4", "2",
               setcol([(1.5, (n + 1) // 2, 0x3FC00000), (-2.25, n // 2, 0xC0100000)]))],
    "PTR": [("strided", "0x", "4", c, "pointer", "8", ">8", ""),
            ("set", "0", "", c, "int", "4", "2", setcol([(0, (n + 1) // 2, 0), (1, n // 2, 1)]))],
}
assert set(want) <= set(tags), "tags missing in the source: %s" % (set(want) - set(tags))
for tag, expect in want.items():
    got = [r for r in rows if r["load"] == tags[tag]]
    assert got, "%s (%s): no row" % (tag, tags[tag])
    for r in got:
        assert r["kind"] in ("constant", "set", "strided", "varied", "none"), r
        assert r["threads"] == str(threads) or r["kind"] == "none", r
    if level == "O2":
        # unrolled copies each see their share of the values, vector loads carry none: a constant
        # stays constant in every copy, and the copies' loads add up to at most the scalar count
        scalar = [r for r in got if r["kind"] != "none" and r["size"] == expect[0][5] and
                  r["type"] == expect[0][4]]
        assert sum(int(r["count"]) for r in scalar) <= c * (2 if tag == "PTR" else 1), (tag, got)
        if expect[0][0] == "constant":
            assert all(r["kind"] == "constant" and r["value"] == expect[0][1] for r in scalar), got
        continue
    for e in expect:
        kind, value, stride, count, typ, size, distinct, values = e
        match = [r for r in got if r["type"] == typ and r["size"] == size and r["kind"] == kind
                 and (r["value"].startswith(value) if value == "0x" else r["value"] == str(value))]
        assert len(match) == 1, "%s: want one %s row, got %s" % (tag, e, got)
        r = match[0]
        ok = r["stride"] == stride and r["count"] == str(count)
        ok = ok and r["distinct"] == distinct and r["values"] == values
        assert ok, "%s: want %s, got %s" % (tag, e, r)
    if level == "O2f":  # the kernel's own loads only (induction variables live in registers)
        assert len(got) == len(expect), "%s: extra rows %s" % (tag, got)
print("value %s: %d rows, %d kernels exact" % (level, len(rows), len(want)))
