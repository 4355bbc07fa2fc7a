#!/bin/bash
# memlens report --merge: 55 runs of the pthreads kernel with 55 different sizes, 3 runs of a
# rebuild of it (other tables, same path) and 3 runs of another program, in one directory. The
# merged report has exactly one group per (program, tables), says how many profiles each sums,
# and its figures equal the sum of the closed forms: per region in total, for thread index 0
# (main, in every run) and for each created thread index (one execution per run); not-seen calls
# add up; the total time is the sum of the runs' total times; CSV, JSON, the table and --blocks
# agree. Unit counts of --blocks equal the sum over the profiles read independently (mlp.py).
. "$(dirname "$0")/region-lib.bash"
ml_setup
M=$MEMLENS_BUILD/bin/memlens
D=$ML_TMP/runs
mkdir -p "$D"

ml_build pth 2 -pthread "$ML_KERNELS/pthreads.c" || ml_finish
ml_build stream 2 "$ML_KERNELS/stream.c" || ml_finish
bases=()
for i in $(seq 0 54); do bases+=($((1000 + 37 * i))); done
for b in "${bases[@]}"; do
    MEMLENS_OUT=$D "$ML_TMP/pth.ml" "$b" >/dev/null || ml_error "pthreads run $b failed"
done
cp "$ML_TMP/pth.ml" "$ML_TMP/pth-o2.ml"
for _ in 1 2 3; do
    MEMLENS_OUT=$D "$ML_TMP/stream.ml" 1000 2 >/dev/null || ml_error "stream run failed"
done
# Another build of the same program path: -O0 has other units, so other tables.
"$MEMLENS_BUILD/bin/memlens-cc" -O0 -g -I"$ML_ROOT/include" -pthread "$ML_KERNELS/pthreads.c" \
    -o "$ML_TMP/pth.ml" || ml_error "-O0 build failed"
for b in 500 700 900; do
    MEMLENS_OUT=$D "$ML_TMP/pth.ml" "$b" >/dev/null || ml_error "-O0 run $b failed"
done
[ "$(ls "$D"/*.mlp | wc -l)" = 61 ] || ml_error "expected 61 profiles, got $(ls "$D" | wc -l)"

"$M" report --merge --csv "$D" >"$ML_TMP/m.csv" || ml_error "--merge --csv failed"
"$M" report --merge --json "$D" >"$ML_TMP/m.json" || ml_error "--merge --json failed"
"$M" report --merge --blocks "$D" >"$ML_TMP/m.blocks" || ml_error "--merge --blocks failed"
"$M" report --merge "$D" >"$ML_TMP/m.txt" || ml_error "--merge table failed"
"$M" report --merge --totals --region pt_body "$D" >/dev/null || ml_error "--merge --region failed"
"$M" report --merge --timeline "$D" >/dev/null 2>&1
[ $? = 129 ] || ml_error "--merge --timeline accepted"

ml_check "merge" '
import csv, json
D, csvf, jsonf, blocksf, txt = sys.argv[1:6]
bases = [int(b) for b in sys.argv[6:]]
nt = 4
ps = mlp.load_dir(D)
prog = [p for p in ps if "pt_body" in p.regions]
o2 = [p for p in prog if p.totals("pt_body")["rd_heap"] // 16 in {15 * b for b in bases}]
eq("pthreads -O2 profiles", len(o2), 55)
rows = list(csv.DictReader(open(csvf)))
groups = {}
for r in rows:
    groups.setdefault(r["profile"], set()).add(int(r["profiles"]))
eq("groups and their profile counts", sorted(tuple(sorted(v)) for v in groups.values()), [(3,), (3,), (55,)])
name = [g for g, v in groups.items() if v == {55}][0]
ok("group name %r carries the tables (two builds of one path)" % name, "[tables " in name)
ok("pid and tid are empty", all(r["pid"] == "" and r["tid"] == "" for r in rows))
g = {(r["region"], r["thread"]): r for r in rows if r["profile"] == name}
chunks = lambda b: [(k + 1) * b for k in range(nt + 1)]
n = sum(sum(chunks(b)) for b in bases)
c0 = sum(chunks(b)[0] for b in bases)
def row(reg, th, rd, wr, ex):
    r = g.get((reg, th))
    if r is None:
        FAILS.append("no row %s/%s" % (reg, th))
        return
    eq("%s/%s (rd_heap, wr_heap, executions)" % (reg, th),
       (int(r["rd_heap"]), int(r["wr_heap"]), int(r["executions"])), (rd, wr, ex))
row("pt_body", "total", 16 * n, 8 * n, 5 * 55)
row("pt_body", "0", 16 * c0, 8 * c0, 55)
for k in range(1, nt + 1):
    r = g.get(("pt_body", str(k)))
    eq("pt_body thread %d executions" % k, r and int(r["executions"]), 55)
eq("pt_body created threads bytes", sum(int(g[("pt_body", str(k))]["rd_heap"]) for k in range(1, nt + 1)),
   16 * (n - c0))
# work(&c[0]) reads and writes its chunk on the stack of main: stack bytes, not heap
row("pt_spawn", "total", sum(16 * chunks(b)[0] for b in bases), sum(8 * chunks(b)[0] for b in bases), 55)
# Time: each run took its longest thread; the runs add up.
want = sum(max(t["ticks"][p.region_id("pt_body")] for t in p.threads) / p.tsc_hz for p in o2)
got = float(g[("pt_body", "total")]["seconds"])
ok("pt_body total seconds %.9f = sum of the runs %.9f" % (got, want), abs(got - want) <= 1e-6 + 1e-6 * want)
want0 = sum(p.ticks("pt_spawn", 0) / p.tsc_hz for p in o2)
ok("pt_spawn thread 0 seconds", abs(float(g[("pt_spawn", "0")]["seconds"]) - want0) <= 1e-6 + 1e-6 * want0)
# JSON: the same group, not-seen calls summed, threads by index without tids.
d = json.load(open(jsonf))
js = [x for x in d["profiles"] if x["profile"] == name]
eq("json groups", sorted(x["profiles"] for x in d["profiles"]), [3, 3, 55])
j = js[0]
eq("json pid", j["pid"], None)
eq("json threads", j["threads"], [{"index": k, "tid": None} for k in range(nt + 1)])
spawn = [r for r in j["regions"] if r["name"] == "pt_spawn"][0]
ns = {c["callee"]: c["calls"] for c in spawn["not_seen"]}
eq("json not seen", (ns.get("pthread_create"), ns.get("pthread_join")), (nt * 55, nt * 55))
eq("json pt_body total bytes read", [r for r in j["regions"] if r["name"] == "pt_body"][0]["total"]["bytes_read"]["heap"], 16 * n)
# --blocks: unit counts are the sums over the 55 profiles.
blk = [r for r in csv.DictReader(open(blocksf)) if r["profile"] == name]
eq("blocks rows", len(blk), len(o2[0].units))
for r in blk:
    u = int(r["unit"])
    want = sum(sum(t["counts"][u] for t in p.threads) for p in o2)
    if r["executions"]:
        eq("unit %d executions" % u, int(r["executions"]), want)
eq("blocks profiles column", {r["profiles"] for r in blk}, {"55"})
t = open(txt).read()
ok("table heading", ("merged 55 profiles of " + name) in t)
ok("table: tids shown as -", "  -  " in t)
' "$D" "$ML_TMP/m.csv" "$ML_TMP/m.json" "$ML_TMP/m.blocks" "$ML_TMP/m.txt" "${bases[@]}"

# Records that sum exited threads (a program of 500 short threads keeps 32 apart) are summed
# apart from the thread indices: one exited row whose count is the sum of the runs'.
"$MEMLENS_BUILD/bin/memlens-cc" -O2 -pthread "$ML_ROOT/tests/e2e/runtime/threads.c" -o "$ML_TMP/thr" ||
    ml_error "threads build failed"
for _ in 1 2 3; do
    MEMLENS_OUT=$ML_TMP/thr-out "$ML_TMP/thr" 500 4 100 >/dev/null || ml_error "threads run failed"
done
"$M" report --merge --json "$ML_TMP/thr-out" >"$ML_TMP/thr.json" || ml_error "--merge of exited threads failed"
"$M" report --merge "$ML_TMP/thr-out" >"$ML_TMP/thr.txt" || ml_error "--merge table of exited threads failed"
ml_check "merge exited" '
import json
ps = mlp.load_dir(sys.argv[1])
j = json.load(open(sys.argv[2]))["profiles"]
eq("groups", len(j), 1)
th = j[0]["threads"]
ex = [t for t in th if t.get("exited")]
eq("exited rows", len(ex), 1)
eq("exited threads summed", ex[0]["exited"], sum(p.exited[1] for p in ps))
ok("exited row after the thread indices", ex[0]["index"] > max(t["index"] for t in th if not t.get("exited")))
t = [r for r in j[0]["regions"] if r["name"] == "t"][0]["total"]
eq("t executions", t["executions"], 3 * 500)
eq("t heap bytes", t["bytes_read"]["heap"], 3 * 500 * 100 * 8)
ok("table shows exited:N", ("exited:%d" % ex[0]["exited"]) in open(sys.argv[3]).read())
' "$ML_TMP/thr-out" "$ML_TMP/thr.json" "$ML_TMP/thr.txt"
ml_finish
