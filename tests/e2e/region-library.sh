#!/bin/bash
# Library work quantified (issue 11 item 5), -O0..-O3: the bytes of strlen, strnlen, memchr,
# stpcpy and strncpy calls count as the region's (closed forms from their arguments and
# results); allocations count their sizes (malloc, calloc, realloc) and deallocations their
# calls; a region that sleeps in nanosleep spends almost all its timed time in that not-seen
# call, by the CSV column and the independent reader.
. "$(dirname "$0")/region-lib.bash"
ml_setup

n=50
for O in $ML_LEVELS; do
    ml_build lib$O $O "$ML_KERNELS/library.c" || continue
    ml_run lib$O "$ML_TMP/p$O" $n || continue
    "$MEMLENS_BUILD/bin/memlens" report --csv "$ML_TMP/p$O" >"$ML_TMP/p$O.csv" ||
        { ml_error "-O$O: report failed"; continue; }
    ml_check "library -O$O" '
import csv
n, p = int(sys.argv[1]), profile(sys.argv[2])
rd = sum(1000 - i + 100 + i + 1000 + 100 for i in range(n))
t = p.totals("strings")
ok("strings reads %d >= %d (the string functions)" % (t["rd_heap"], rd), t["rd_heap"] >= rd)
ok("strings reads %d: the string functions and a few words" % t["rd_heap"], t["rd_heap"] <= rd + 64 * n)
eq("strings writes", t["wr_heap"], (100 + 64) * n)
lib = p.library("alloc")
eq("alloc bytes asked", lib["alloc"], {"malloc": sum(16 + i for i in range(n)),
                                       "calloc": sum(4 * (8 + i) for i in range(n)),
                                       "realloc": 200 * n})
eq("alloc frees", lib["free"], {"free": 2 * n})
s = p.library("sleep")
share = s["ticks"].get("nanosleep", 0) / s["timed_ticks"] if s["timed_ticks"] else 0
ok("sleep share %.4f >= 0.9" % share, share >= 0.9)
rows = {r["region"]: r for r in csv.DictReader(open(sys.argv[3])) if r["thread"] == "total"}
ok("csv sleep notseen_share %s" % rows["sleep"]["notseen_share"],
   float(rows["sleep"]["notseen_share"]) >= 0.9)
eq("csv alloc bytes", int(rows["alloc"]["alloc_bytes"]), sum(lib["alloc"].values()))
eq("csv frees", int(rows["alloc"]["frees"]), 2 * n)
' $n "$ML_TMP/p$O" "$ML_TMP/p$O.csv"
done

# report --merge keeps the library figures: allocation bytes and frees add up over the runs, and
# the not-seen share divides the summed time in not-seen calls by the summed timed time.
D=$ML_TMP/merge
mkdir -p "$D"
ml_build libm 2 "$ML_KERNELS/library.c" || ml_finish
for k in 10 20 30; do
    MEMLENS_OUT=$D "$ML_TMP/libm.ml" $k >/dev/null || ml_error "run of $k failed"
done
"$MEMLENS_BUILD/bin/memlens" report --merge --csv "$D" >"$ML_TMP/merge.csv" || ml_error "--merge failed"
ml_check "library --merge" '
import csv
lib = [p.library("alloc") for p in mlp.load_dir(sys.argv[1])]
eq("profiles", len(lib), 3)
rows = {r["region"]: r for r in csv.DictReader(open(sys.argv[2])) if r["thread"] == "total"}
eq("merged alloc bytes", int(rows["alloc"]["alloc_bytes"]), sum(sum(l["alloc"].values()) for l in lib))
eq("merged frees", int(rows["alloc"]["frees"]), 2 * (10 + 20 + 30))
ok("merged sleep notseen_share %s >= 0.9" % rows["sleep"]["notseen_share"],
   float(rows["sleep"]["notseen_share"] or 0) >= 0.9)
' "$D" "$ML_TMP/merge.csv"
ml_finish
