#!/usr/bin/env python3
"""Checks a 'dep' CSV of dep-kernels.c against closed forms: dep-check.py CSV SRC N K OPT THREADS."""
import csv
import sys

path, src, n, k, opt, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], int(sys.argv[6])
# -O2 unrolls and vectorises: one instruction instance then covers several source iterations,
# so only the shape is checked there; O2f (-O2 without unrolling and vectorising) is exact
exact = opt != "O2"
line = {}
for no, text in enumerate(open(src), 1):
    if "/* " in text and text.rstrip().endswith("*/"):
        line[text.rsplit("/* ", 1)[1].split(" ")[0]] = "%s:%d" % (src.rsplit("/", 1)[-1], no)
rows = list(csv.DictReader(open(path)))
for r in rows:
    r["src"] = r["src"].rsplit("/", 1)[-1]
    r["dst"] = r["dst"].rsplit("/", 1)[-1]
    r["loop"] = r["loop"].rsplit("/", 1)[-1]
fails = []


def sel(s, d, kind="RAW"):
    return [r for r in rows if r["src"] == line[s] and r["dst"] == line[d] and r["kind"] == kind]


def expect(what, cond):
    if not cond:
        fails.append(what)


# a[i] = a[i-k] + 1: loads with a writer in the loop: n - 2k (a[0..k-1] are never written),
# plus 1000 - 2k per thread
rs = sel("CARRIED", "CARRIED")
total = n - 2 * k + threads * (1000 - 2 * k)
expect("CARRIED has no carried row %s" % rs, any(r["carried"] == "1" for r in rs))
if exact:
    expect("CARRIED count %s != %d" % ([r["count"] for r in rs], total), sum(int(r["count"]) for r in rs) == total)
    expect("CARRIED rows %s" % rs, all(r["carried"] == "1" and r["distance"] == str(k) for r in rs))
# loops are named by their header's first line: after loop rotation (-O2) that is a body line
named = opt == "O0"
if named:
    expect("CARRIED loop %s" % rs, all(r["loop"] == line["CARRIEDLOOP"] for r in rs))
# independent loop: nothing from its own stores to its own loads
expect("INDEPENDENT has a dependence", not sel("INDEPENDENT", "INDEPENDENT"))
rs = sel("INIT", "INDEPENDENT")
expect("INIT->INDEPENDENT %s" % rs, rs and all(r["carried"] == "0" for r in rs))
expect("INIT->INDEPENDENT count %s" % rs, not exact or sum(int(r["count"]) for r in rs) == n)
# memcpy: each element of src flows into the copy, the copy into each load
rs = sel("FILL", "COPY")
expect("FILL->COPY %s" % rs, rs and (not exact or sum(int(r["count"]) for r in rs) == n))
rs = sel("COPY", "READCOPY")
expect("COPY->READCOPY %s" % rs, rs and all(r["carried"] == "0" for r in rs))
expect("COPY->READCOPY count %s" % rs, not exact or sum(int(r["count"]) for r in rs) == n)
if exact:
    # nested: carried by the outer loop only, distance 1; loads of row 0 have no writer
    rs = sel("NESTED", "NESTED")
    expect("NESTED count %s" % rs, sum(int(r["count"]) for r in rs) == (64 - 2) * 16)
    expect("NESTED rows %s" % rs, len(rs) == 1 and rs[0]["carried"] == "1" and rs[0]["distance"] == "1"
           and (not named or rs[0]["loop"] == line["OUTER"]))
# through a callee: the store in put() flows to the caller's next iteration
rs = sel("CALLEE", "CALLER")
expect("CALLEE->CALLER %s" % rs, any(r["carried"] == "1" for r in rs))
if exact:
    expect("CALLEE->CALLER count %s" % rs, sum(int(r["count"]) for r in rs if r["carried"] == "1") == n - 2)
    expect("CALLEE rows %s" % rs, all(r["distance"] == "1" and (not named or r["loop"] == line["CALLERLOOP"])
           for r in rs if r["carried"] == "1"))
# reduction through memory (-O0 keeps acc in memory): carried, distance 1
if opt == "O0":
    rs = sel("REDUCTION", "REDUCTION")
    expect("REDUCTION %s" % rs, len(rs) == 1 and rs[0]["carried"] == "1" and rs[0]["distance"] == "1"
           and rs[0]["count"] == str(n - 1))
    rs = sel("REDUCTION", "REDUCTION", "WAW")
    expect("REDUCTION WAW %s" % rs, len(rs) == 1 and rs[0]["count"] == str(n - 1))
# anti dependences (WAR, from the last load since the store): u[i] = u[i+1] * 2 reads in
# iteration i what iteration i+1 overwrites (n - 2 stores); b[i] = b[i] + u[i] within one iteration
rs = sel("ANTI", "ANTI", "WAR")
expect("ANTI %s" % rs, rs)
if exact:
    expect("ANTI rows %s" % rs, len(rs) == 1 and rs[0]["distance"] == "1" and rs[0]["count"] == str(n - 2)
           and (not named or rs[0]["loop"] == line["ANTILOOP"]))
rs = sel("ANTIIN", "ANTIIN", "WAR")
expect("ANTIIN %s" % rs, rs and all(r["carried"] == "0" for r in rs))
if exact:
    expect("ANTIIN rows %s" % rs, len(rs) == 1 and rs[0]["count"] == str(n)
           and (not named or rs[0]["loop"] == line["ANTIINLOOP"]))
# a load is not anti-dependent on a store: no WAR where nothing read the bytes before the store
expect("INIT WAR %s" % sel("INIT", "INIT", "WAR"), not sel("INIT", "INIT", "WAR"))
expect("UFILL WAR %s" % sel("UFILL", "UFILL", "WAR"), not sel("UFILL", "UFILL", "WAR"))
if opt == "O0":
    # acc += c[i]: the load of acc, then the store, in each iteration
    rs = sel("REDUCTION", "REDUCTION", "WAR")
    expect("REDUCTION WAR %s" % rs, len(rs) == 1 and rs[0]["carried"] == "0" and rs[0]["count"] == str(n))
if fails:
    print("\n".join(fails))
    sys.exit(1)
