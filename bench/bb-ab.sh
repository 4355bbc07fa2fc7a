#!/bin/bash
# Compares two builds of 'memlens bb' (before/after a change to the harness), paired and
# interleaved: every block is measured by A and by B back to back, the order alternating, so
# that the shared host's slow phases hit both alike. Measures and prints; asserts nothing.
#   bench/bb-ab.sh <memlens A> <memlens B> [corpus blocks, default 200] [micro rounds, default 7]
set -e
root=$(cd "$(dirname "$0")/.." && pwd)
A=$1 B=$2 N=${3:-200} R=${4:-7}
[ -x "$A" ] && [ -x "$B" ] || { echo "usage: bench/bb-ab.sh <memlens A> <memlens B> [N] [rounds]"; exit 129; }
out=${BB_BENCH_DIR:-$root/build/bench-bb-ab}
mkdir -p "$out"
echo "== host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 "$root/scripts/bb-corpus.py" -n "$N" >"$out/corpus.csv"
python3 - "$A" "$B" "$out/corpus.csv" "$R" <<'PY'
import collections, csv, statistics, subprocess, sys, time
A, B, corpus, R = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])

def bb(ml, block, extra=()):
    t = time.monotonic()
    p = subprocess.run([ml, "bb", "--csv", *extra, block], capture_output=True, text=True)
    row = next(csv.DictReader(p.stdout.splitlines()))
    return row, time.monotonic() - t

micro = [("2 independent add chains", 1, "add $1,%rax; add $1,%rbx"),
         ("dependent add chain of 4", 4, "add %rax,%rbx; add %rbx,%rcx; add %rcx,%rdx; add %rdx,%rax"),
         ("dependent imul chain of 2", 6, "imul %rax,%rax; imul %rax,%rax"),
         ("pointer chase", 4, "mov (%rax),%rax"),
         ("chained load through a loaded pointer", 8, "mov (%rax),%rbx; mov (%rbx),%rax"),
         ("4 stores", 2, "mov %rax,(%rbx); mov %rax,8(%rbx); mov %rax,16(%rbx); mov %rax,24(%rbx)")]
print(f"== microbenchmarks, {R} interleaved rounds: median cycles (error vs known), A then B")
for name, known, block in micro:
    v = {A: [], B: []}
    for r in range(R):
        for ml in ((A, B) if r % 2 == 0 else (B, A)):
            row, _ = bb(ml, block, ["--no-trace"])
            if row["status"] == "ok":
                v[ml].append(float(row["throughput"]))
    ma = statistics.median(v[A]) if v[A] else float("nan")
    mb = statistics.median(v[B]) if v[B] else float("nan")
    print(f"   {name}: known {known}: A {ma:.3f} ({100 * abs(ma - known) / known:.1f}%, "
          f"{len(v[A])}/{R} ok), B {mb:.3f} ({100 * abs(mb - known) / known:.1f}%, {len(v[B])}/{R} ok)")

blocks = [r["hex"] for r in csv.DictReader(open(corpus))]
st = {A: collections.Counter(), B: collections.Counter()}
secs = {A: [], B: []}
ratios = []
for i, h in enumerate(blocks):
    got = {}
    for ml in ((A, B) if i % 2 == 0 else (B, A)):
        got[ml], t = bb(ml, h)
        st[ml][got[ml]["status"]] += 1
        secs[ml].append(t)
    if got[A]["status"] == got[B]["status"] == "ok" and float(got[A]["throughput"]) > 0:
        ratios.append(float(got[B]["throughput"]) / float(got[A]["throughput"]))
print(f"== corpus of {len(blocks)} real blocks, each measured by A and B back to back")
for ml, name in ((A, "A"), (B, "B")):
    print(f"   {name}: " + ", ".join(f"{k} {100 * v / len(blocks):.1f}%" for k, v in st[ml].most_common())
          + f"; median {1000 * statistics.median(secs[ml]):.1f} ms per block")
if ratios:
    dev = sorted(abs(x - 1) for x in ratios)
    print(f"   ok in both ({len(ratios)}): median B/A {statistics.median(ratios):.4f}, "
          f"median |B/A - 1| {100 * statistics.median(dev):.2f}%, 90th percentile "
          f"{100 * dev[int(0.9 * len(dev))]:.1f}%")
PY
