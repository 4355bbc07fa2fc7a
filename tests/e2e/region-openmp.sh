#!/bin/bash
# OpenMP parallel loops inside regions, at -O0..-O3 with OMP_NUM_THREADS=2 and 3: every worker
# counts its own share (n / threads iterations of the triad), the shares add up to the closed
# form, and the region is entered once (by the thread that began it).
. "$(dirname "$0")/region-lib.bash"
ml_setup

n=120000 # divisible by 2 and 3: static scheduling gives every thread n / T iterations
for O in $ML_LEVELS; do
    ml_build omp$O $O -fopenmp "$ML_KERNELS/omp.c" || continue
    for T in 2 3; do
        OMP_NUM_THREADS=$T ml_run omp$O "$ML_TMP/p$O.$T" $n 2.5 || continue
        ml_check "openmp -O$O T=$T" '
n, T, p = int(sys.argv[1]), int(sys.argv[2]), profile(sys.argv[3])
share = n // T
region(p, "omp_global", rd_global=16 * n, wr_global=8 * n, rd_heap=p.totals("omp_global")["rd_heap"],
       entries=1)
workers = 0
for t in p.threads:
    i = t["index"]
    g, h = p.totals("omp_global", thread=i), p.totals("omp_heap", thread=i)
    if g["instr"] == 0 and h["instr"] == 0:
        continue
    workers += 1
    eq("omp_global[thread %d] global bytes" % i, (g["rd_global"], g["wr_global"]), (16 * share, 8 * share))
    eq("omp_global[thread %d] wr_heap" % i, g["wr_heap"], 0)
    # With all data global, nothing is read from the heap: the OpenMP thread id, read through
    # the pointer the runtime passes (one or two 4-byte reads), is on the stack of the thread and
    # counts as stack by its address; omp_heap has the same scaffolding.
    eq("omp_global[thread %d] rd_heap" % i, g["rd_heap"], 0)
    ok("omp_global[thread %d] rd_stack %d holds the thread-id reads" % (i, g["rd_stack"]),
       g["rd_stack"] >= 4)
    eq("omp_heap[thread %d] data heap bytes" % i, (h["rd_heap"], h["wr_heap"]),
       (16 * share, 8 * share))
    eq("omp_heap[thread %d] global bytes" % i, (h["rd_global"], h["wr_global"]), (0, 0))
eq("threads with counts", workers, T)
h = p.totals("omp_heap")
eq("omp_heap data bytes", (h["rd_heap"], h["wr_heap"]), (16 * n, 8 * n))
eq("omp_heap entries", h["entries"], 1)
eq("omp_heap static_init calls", p.not_seen("omp_heap").get("__kmpc_for_static_init_8"), T)
' $n $T "$ML_TMP/p$O.$T"
    done
done
ml_finish
