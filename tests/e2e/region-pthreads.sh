#!/bin/bash
# pthreads at -O0..-O3: a region inside the thread function counts each thread's own chunk (the
# per-thread bytes are exactly the chunk sizes, which all differ, and add up to the total); a
# region around pthread_create/join in main counts main's own chunk only (threads do not inherit
# regions) and lists pthread_create and pthread_join as not seen with their call counts.
. "$(dirname "$0")/region-lib.bash"
ml_setup

base=10000
for O in $ML_LEVELS; do
    ml_build pth$O $O -pthread "$ML_KERNELS/pthreads.c" || continue
    ml_run pth$O "$ML_TMP/p$O" $base || continue
    ml_check "pthreads -O$O" '
base, p = int(sys.argv[1]), profile(sys.argv[2])
nt = 4
chunks = [(k + 1) * base for k in range(nt + 1)]
n = sum(chunks)
region(p, "pt_body", rd_heap=16 * n, wr_heap=8 * n, entries=nt + 1)
got = sorted((t["rd_heap"], t["wr_heap"], t["entries"]) for t in p.per_thread("pt_body"))
eq("pt_body per thread (rd_heap, wr_heap, entries)", got, sorted((16 * c, 8 * c, 1) for c in chunks))
# main (thread index 0) runs chunk 0 itself, inside pt_spawn.
region(p, "pt_body", rd_heap=16 * chunks[0], wr_heap=8 * chunks[0], entries=1, thread=0)
# ... plus the reads by work() of the chunk fields (4 x 8 bytes) and its write of the sum (8 bytes),
# through its pointer argument: main passes &c[0], on its own stack, so they are stack bytes.
t = region(p, "pt_spawn", rd_heap=16 * chunks[0], wr_heap=8 * chunks[0], entries=1)
ok("pt_spawn stack bytes (%d, %d) hold the chunk fields" % (t["rd_stack"], t["wr_stack"]),
   t["rd_stack"] >= 32 and t["wr_stack"] >= 8)
ns = p.not_seen("pt_spawn")
eq("pt_spawn not seen", (ns.get("pthread_create"), ns.get("pthread_join")), (nt, nt))
' $base "$ML_TMP/p$O"
done
ml_finish
