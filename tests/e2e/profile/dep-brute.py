#!/usr/bin/env python3
"""Brute-force dependences from a full memory trace, compared with 'memlens profile -m dep'.

dep-brute.py DUMP DEP_CSV DEP_JSON
DUMP: the output of 'memlens analyze <trace> dump' of a build with --trace-loops (accesses and
loop entries, iterations and exits, in program order per thread). The same rules as
docs/profile-modules.md, "dep", computed independently: a dict per byte holds the last store
and the last load since it; each thread's loop frames keep the start of every iteration (no
limit). Rows are compared keyed on source lines (the two runs are two builds of one source:
addresses, site ids and marker ids differ, lines do not): (src, dst, kind, loop line,
carried) -> count and minimum distance (at most 1024: the backend's bound, documented).
Traces carry no heap or stack object events, so objects that end are not forgotten here as the
module forgets them: the programs compared reuse no dead object's bytes (docs/profile-modules.md).
"""
import bisect
import csv
import json
import re
import sys


RING = 1024


def base(where):
    """'dir/file.c:12' -> 'file.c:12' (the trace names files as the debug info does); a site
    without a location ('?:0' in a trace, its function's name in a profile) -> '?'."""
    where = where.rsplit("/", 1)[-1]
    return where if re.search(r":[1-9][0-9]*$", where) else "?"


def main():
    dump, dep_csv, dep_json = sys.argv[1:4]
    W, R = {}, {}  # byte -> (site, line, thread, clock)
    frames = {}  # thread -> [[name, line, start, [iteration start clocks]]]
    clock = {}  # thread -> loop clock
    rows = {}  # (src, dst, kind, loop, carried) -> [count, mindist]
    cross = 0
    loopre = re.compile(r"^loop:.*@(\d+)$")

    def classify(t, c):
        loop, fr = "", frames.get(t, [])
        for f in fr:
            if c < f[2]:
                break
            loop = f[1]
            its = f[3]
            if c >= its[-1]:
                continue
            # the iteration that held clock c: the last that started at or before it
            k = bisect.bisect_right(its, c) - 1
            return loop, 1, len(its) - 1 - k
        return loop, 0, 0

    def depend(frm, me, kind):
        nonlocal cross
        if frm[2] != me[2]:
            cross += 1
            return
        loop, carried, dist = classify(me[2], frm[3])
        key = (frm[1], me[1], kind, loop, carried)
        r = rows.setdefault(key, [0, None])
        r[0] += 1
        # the backend keeps the last RING iterations of a loop: farther is reported as RING
        dist = min(dist, RING)
        if carried and (r[1] is None or dist < r[1]):
            r[1] = dist

    for ln in open(dump, errors="replace"):
        f = ln.split(None, 9)
        if len(f) < 9:
            continue
        kind, t = f[3], int(f[1])
        if kind in ("drop", "lost"):
            sys.exit("dep-brute: the trace lost records (%s)" % ln.strip())
        if kind.startswith("loop-"):
            what = f[9].strip() if len(f) > 9 else ""
            m = loopre.match(what)
            if not m:
                continue
            c = clock[t] = clock.get(t, 0) + 1
            fr = frames.setdefault(t, [])
            if kind == "loop-entry":
                fr.append([what, m.group(1), c, [c]])
                continue
            i = len(fr) - 1
            while i >= 0 and fr[i][0] != what:
                i -= 1
            if i < 0:
                continue  # unmatched: ignored, as the backend does
            if kind == "loop-exit":
                del fr[i:]
            else:
                del fr[i + 1:]
                fr[i][3].append(c)
            continue
        if kind not in ("load", "store", "rmw"):
            continue
        addr, size, site, where = int(f[4], 16), int(f[5]), f[7], base(f[8])
        me = (site, where, t, clock.get(t, 0))
        load, store = kind != "store", kind != "load"
        lw = ww = wr = None
        for b in range(addr, addr + size):
            w = W.get(b)
            if load and w and w != lw:
                lw = w
                depend(w, me, "RAW")
            if not store:
                R[b] = me
                continue
            if w and w != ww:
                ww = w
                depend(w, me, "WAW")
            r = R.pop(b, None)
            if r and r != wr:
                wr = r
                depend(r, me, "WAR")
            W[b] = me

    got = {}
    for r in csv.DictReader(open(dep_csv)):
        loop = r["loop"].rsplit(":", 1)[-1] if r["loop"] else ""
        key = (base(r["src"]), base(r["dst"]), r["kind"], loop, int(r["carried"]))
        g = got.setdefault(key, [0, None])
        g[0] += int(r["count"])
        if r["distance"] and (g[1] is None or int(r["distance"]) < g[1]):
            g[1] = int(r["distance"])
    data = json.load(open(dep_json))["data"]
    bad = []
    if data["cross_thread"] != cross:
        bad.append("cross-thread accesses: dep %d, brute force %d" % (data["cross_thread"], cross))
    for k in sorted(set(got) | set(rows), key=str):
        a, b = got.get(k), rows.get(k)
        if a != b:
            bad.append("%s: dep %s, brute force %s" % (k, a, b))
    total = sum(r[0] for r in rows.values())
    if bad:
        print("%d of %d rows differ:" % (len(bad), len(set(got) | set(rows))))
        print("\n".join(bad[:40]))
        sys.exit(1)
    print("%d rows, %d dependences: equal" % (len(rows), total))


main()
