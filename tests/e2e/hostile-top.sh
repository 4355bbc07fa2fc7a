#!/bin/bash
# memlens top against a program whose region names hold terminal escape sequences, control bytes,
# C1 controls and bytes that are not UTF-8 (issue 10, item 18): the frames escape them (\xHH) and
# contain no control byte but newlines; --csv keeps them exact (RFC 4180). Hostile published
# layouts (item 3) are refused by the reader before any read: tests/unit/test-live.c
# (test_hostile_layouts) and tests/fuzz/fuzz-live.c, which need no running process.
. "$(dirname "$0")/region-lib.bash"
ml_setup

M=$MEMLENS_BUILD/bin/memlens
ml_build hn 2 -pthread "$ML_KERNELS/hostile-regions.c" || ml_finish
mkdir -p "$ML_TMP/out"
MEMLENS_OUT=$ML_TMP/out "$ML_TMP/hn.ml" 20000 "$ML_TMP/stop" >/dev/null &
prog=$!
trap 'touch "$ML_TMP/stop"; wait $prog; rm -rf "$ML_TMP"' EXIT

# Attached once the program has published its state (bounded: 10 s).
for _ in $(seq 200); do
    "$M" top --batch -n 1 -d 0.05 $prog >/dev/null 2>&1 && break
    sleep 0.05
done
"$M" top --batch -n 3 -d 0.2 $prog >"$ML_TMP/table.txt" 2>"$ML_TMP/err" || ml_error "top --batch failed: $(cat "$ML_TMP/err")"
"$M" top --csv -n 2 -d 0.2 $prog >"$ML_TMP/frames.csv" 2>"$ML_TMP/err" || ml_error "top --csv failed: $(cat "$ML_TMP/err")"
touch "$ML_TMP/stop"
wait $prog || ml_error "the program failed"
trap 'rm -rf "$ML_TMP"' EXIT

python3 - "$ML_TMP/table.txt" <<'EOF' || ml_error "top table escaping"
import sys
t = open(sys.argv[1], "rb").read()
bad = sorted({b for b in t if (b < 0x20 and b != 0x0a) or b == 0x7f})
assert not bad, "control bytes in the frames: %r" % bad
assert b"\xc2\x9b" not in t and b"\xff" not in t, "C1 control or bad UTF-8 in the frames"
frames = [f for f in t.split(b"\n\n") if f.strip()]
assert len(frames) == 3, len(frames)
for f in frames:
    assert b"\\x1b[2J\\x1b]0;pwned\\x07red" in f, f
    assert b"c1\\xc2\\x9b31m\\xff\\xfebad\\x0d\\x0a" in f, f
EOF
python3 - "$ML_TMP/frames.csv" <<'EOF' || ml_error "top CSV names"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="", encoding="utf-8", errors="surrogateescape")))
names = {r["region"] for r in rows}
assert "\x1b[2J\x1b]0;pwned\x07red" in names, names
assert "c1\u009b31m\udcff\udcfebad\r\n" in names, names
EOF
ml_finish
