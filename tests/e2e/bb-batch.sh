#!/bin/bash
# memlens bb on a corpus of real basic blocks extracted from binaries on this machine by
# scripts/bb-corpus.py: every block gets exactly one row with a known status (never silent),
# an interrupted run resumes where it stopped (also after a torn last row) and ends with the
# same rows as an uninterrupted one, and no progress bar is written when stderr is no tty.
. "$(dirname "$0")/bb-lib.bash"
bb_require_ptrace
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
libc=$(ls /usr/lib/x86_64-linux-gnu/libc.so.6 2>/dev/null)
[ -n "$libc" ] || { echo "no libc.so.6 to extract blocks from"; exit 77; }

python3 "$root/scripts/bb-corpus.py" -n 200 "$libc" /usr/bin/ls >"$tmp/corpus.csv" ||
    fail "corpus script"
n=$(($(wc -l <"$tmp/corpus.csv") - 1))
[ "$n" -ge 150 ] || fail "corpus has only $n blocks"
# none of the blocks contains a control-flow instruction (objdump, independently)
python3 - "$tmp/corpus.csv" <<'PY' || fail "corpus block with control flow"
import csv, subprocess, sys, tempfile
bad = 0
with tempfile.NamedTemporaryFile(suffix=".bin") as f:
    for row in csv.DictReader(open(sys.argv[1])):
        f.seek(0); f.truncate(); f.write(bytes.fromhex(row["hex"])); f.flush()
        out = subprocess.run(["objdump", "-D", "-b", "binary", "-m", "i386:x86-64", f.name],
                             capture_output=True, text=True).stdout
        for line in out.splitlines():
            parts = line.split("\t")
            if len(parts) >= 3:
                op = parts[2].split()[0] if parts[2].split() else ""
                if op.startswith(("j", "call", "ret", "loop", "syscall")):
                    bad += 1
sys.exit(bad > 0)
PY

fast="--reps 8 --min-agree 4 --attempts 1"
# interrupted after 60 blocks, then a torn row, then resumed
"$ML" bb $fast --limit 60 -o "$tmp/out.csv" "$tmp/corpus.csv" 2>"$tmp/err1" || fail "batch run"
[ "$(($(wc -l <"$tmp/out.csv") - 1))" -eq 60 ] || fail "--limit 60 wrote $(wc -l <"$tmp/out.csv") lines"
head -61 "$tmp/out.csv" >"$tmp/first60.csv"
printf '4801d8,1.00' >>"$tmp/out.csv" # torn row, as after a kill mid-write
"$ML" bb $fast -o "$tmp/out.csv" "$tmp/corpus.csv" 2>"$tmp/err2" || fail "resumed run"
grep -q "resuming .* after 60 blocks" "$tmp/err2" || fail "no resume message: $(cat "$tmp/err2")"
[ -n "$(grep -v "unclean blocks\? again" "$tmp/err1")" ] && fail "progress output on a non-tty stderr: $(head -c 200 "$tmp/err1")"
# rows resumed over stay as they were, except unclean ones, which the end-of-batch pass
# measures once more by design
python3 - "$tmp/first60.csv" "$tmp/out.csv" <<'PY' || fail "resume rewrote earlier rows"
import sys
old = open(sys.argv[1]).read().splitlines()
new = open(sys.argv[2]).read().splitlines()[:len(old)]
for a, b in zip(old, new):
    assert a.split(",")[0] == b.split(",")[0], (a, b)
    assert a == b or ",unclean," in a, (a, b)
PY
if grep -q ",unclean," "$tmp/first60.csv"; then
    grep -q "unclean blocks\? again" "$tmp/err1" "$tmp/err2" || fail "no second pass over unclean rows"
fi

python3 - "$tmp/corpus.csv" "$tmp/out.csv" <<'PY' || fail "rows do not match the corpus"
import collections, csv, sys
corpus = [r["hex"] for r in csv.DictReader(open(sys.argv[1]))]
rows = list(csv.DictReader(open(sys.argv[2])))
assert [r["hex"] for r in rows] == corpus, "one row per block, in order"
known = {"ok", "unclean", "crashed", "unsupported", "timeout"}
for r in rows:
    assert r["status"] in known, r
    if r["status"] == "crashed":
        assert r["signal"] != "0" and r["detail"], r
    if r["status"] in ("unsupported", "timeout"):
        assert r["detail"], r
    if r["status"] == "ok":
        assert r["throughput"] and r["method"] in ("tsc", "pmu"), r
c = collections.Counter(r["status"] for r in rows)
print("statuses:", ", ".join(f"{k} {v} ({100 * v / len(rows):.1f}%)" for k, v in c.most_common()))
# crashes do not depend on timing noise: most real blocks must run to completion
assert c["crashed"] + c["timeout"] <= 0.1 * len(rows), c
PY
echo "batch of $n real blocks complete and resumable"
