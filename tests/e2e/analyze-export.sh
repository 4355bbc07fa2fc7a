#!/bin/bash
# Exports and inputs: the Perfetto JSON parses and its slices nest per thread (B/E pairs match,
# timestamps never go back), with counter tracks; the Dinero IV file replays in a reference reader
# written here (loads and stores equal the summary's; an LRU l1 fed with it misses as membus's l1);
# the --html page renders in headless Chromium with its charts. Several traces at once (a program
# that forks: a row per process in every analysis) and a truncated trace (said so, still read).
. "$(dirname "$0")/../lib/common.sh"
ml_require_cc
command -v python3 >/dev/null || skip "python3 is not installed"
SRC=$ML_ROOT/tests/e2e/kernels/analyze-kernels.c
$MLCC --ml-trace -O2 -fno-vectorize -fno-slp-vectorize -I"$ML_ROOT/include" "$SRC" -o "$T/k" ||
    fail "memlens-cc failed"
MEMLENS_OUT=$T/nest "$MEMLENS" trace -q -- "$T/k" nest >/dev/null 2>&1 || fail "nest failed"
MEMLENS_OUT=$T/two "$MEMLENS" trace -q -- "$T/k" two 30000 >/dev/null 2>&1 || fail "two failed"

"$MEMLENS" analyze -q "$T"/nest/*.mlt "$T"/two/*.mlt export --perfetto "$T/p.json" \
    --din "$T/d.din" >/dev/null || fail "export failed"
"$MEMLENS" analyze -q "$T"/nest/*.mlt export --din "$T/d.din" 2>"$T/exists.err" &&
    fail "export replaced an existing file"
grep -q "exists" "$T/exists.err" || fail "no clear message for an existing file: $(cat "$T/exists.err")"
"$MEMLENS" analyze -q --force "$T"/nest/*.mlt export --din "$T/d.din" >/dev/null ||
    fail "export --force failed"
"$MEMLENS" analyze -q "$T"/nest/*.mlt dump >"$T/dump.txt" || fail "dump failed"
"$MEMLENS" analyze -q --csv --l1 4k:4 --l2 none --llc none "$T"/nest/*.mlt membus >"$T/mb.csv" ||
    fail "membus failed"
python3 - "$T" <<'PY' || fail "exports do not check"
import csv, json, sys
T = sys.argv[1]
ev = json.load(open(f'{T}/p.json'))['traceEvents']
stacks, last, counters, slices = {}, {}, set(), 0
for e in ev:
    if e['ph'] in ('B', 'E'):
        k = (e['pid'], e['tid'])
        assert e['ts'] >= last.get(k, 0), e
        last[k] = e['ts']
        st = stacks.setdefault(k, [])
        if e['ph'] == 'B':
            st.append(e['name'])
            slices += 1
        else:
            assert st and st[-1] == e['name'], (e, st)
            st.pop()
    elif e['ph'] == 'C':
        counters.add(e['name'])
assert all(not s for s in stacks.values()), stacks
assert slices >= 3 and {'bandwidth (GB/s)', 'miss ratio'} <= counters, (slices, counters)
assert len({e['pid'] for e in ev if e['ph'] == 'M'}) == 2

# din: "label hex-address"; 0 read, 1 write
loads = stores = 0
sets, ways, miss = 16, 4, 0
cache = [[] for _ in range(sets)]
for line in open(f'{T}/d.din'):
    label, addr = line.split()
    label, addr = int(label), int(addr, 16)
    assert label in (0, 1)
    loads += label == 0
    stores += label == 1
    l = addr // 64
    s = cache[l % sets]
    if l in s:
        s.remove(l)
    else:
        miss += 1
        if len(s) == ways:
            s.pop(0)
    s.append(l)
# a record is weight references per line it touches, an RMW a read and a write
want_l = want_s = 0
for line in open(f'{T}/dump.txt'):
    f = line.split()
    if f[3] not in ('load', 'store', 'rmw'):
        continue
    addr, size, w = int(f[4], 16), max(int(f[5]), 1), int(f[6])
    n = (addr + size - 1) // 64 - addr // 64 + 1
    want_l += n * w * (f[3] != 'store')
    want_s += n * w * (f[3] != 'load')
assert (loads, stores) == (want_l, want_s), (loads, stores, want_l, want_s)
mb = [r for r in csv.DictReader(open(f'{T}/mb.csv')) if r['level'] == 'l1' and r['thread'] == 'all'][0]
assert miss == int(mb['misses']), (miss, mb)
PY

# Several traces: a row per process; a truncated trace is said so and still read.
cp "$T"/two/*.mlt "$T/cut.mlt"
truncate -s $(($(stat -c %s "$T/cut.mlt") * 2 / 3)) "$T/cut.mlt"
for a in summary membus reuse streams hotpages bandwidth io; do
    "$MEMLENS" analyze --csv "$T"/nest/*.mlt "$T/cut.mlt" $a >"$T/$a.csv" 2>"$T/$a.err" ||
        fail "$a on two traces failed: $(cat "$T/$a.err")"
    grep -q "cut short" "$T/$a.err" || fail "$a: the truncated trace is not reported"
    for f in "$T"/nest/*.mlt "$T/cut.mlt"; do
        pid=$("$MEMLENS" analyze -q "$f" dump | head -1 | cut -d' ' -f1)
        grep -qE "(^|,)$pid(,|$)" "$T/$a.csv" || fail "$a: no row of process $pid"
    done
done

# The page renders, with its charts.
"$MEMLENS" analyze -q --html "$T/r.html" "$T"/two/*.mlt >/dev/null || fail "--html failed"
[ "$(grep -c '<svg' "$T/r.html")" -ge 6 ] || fail "the page has fewer than 6 charts"
CHROME=$(command -v chromium || command -v chromium-browser || true)
[ -n "$CHROME" ] || skip "chromium is not installed (the page was written but not rendered)"
timeout 120 "$CHROME" --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --window-size=1100,3000 --screenshot="$T/r.png" "file://$T/r.html" >/dev/null 2>&1 ||
    fail "chromium could not render the page"
python3 - "$T/r.png" <<'PY' || fail "the screenshot is blank"
import struct, sys, zlib
d = open(sys.argv[1], 'rb').read()
assert d[:8] == b'\x89PNG\r\n\x1a\n'
w, h = struct.unpack('>II', d[16:24])
assert w >= 1000 and h >= 2000, (w, h)
# Enough distinct bytes in the image data: charts, not a blank page.
idat = b''.join(d[i + 8:i + 8 + struct.unpack('>I', d[i:i + 4])[0]] for i in range(8, len(d) - 12) if d[i + 4:i + 8] == b'IDAT')
raw = zlib.decompress(idat)
assert len(set(raw[::97])) > 20, len(set(raw[::97]))
PY
exit 0
