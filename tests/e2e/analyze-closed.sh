#!/bin/bash
# streams, hotpages, bandwidth and io against closed forms, on kernels built for them
# (tests/e2e/kernels/analyze-kernels.c, -O2, scalar code): R sequential passes over N doubles, two
# interleaved sequential readers, a random walk, a file copy with read and write, and nested and
# overlapping regions (breakdowns by region and by mark add up, with each record in its innermost
# interval). Addresses come from the "range" lines the kernel prints.
. "$(dirname "$0")/../lib/common.sh"
ml_require_cc
command -v python3 >/dev/null || skip "python3 is not installed"
SRC=$ML_ROOT/tests/e2e/kernels/analyze-kernels.c
$MLCC --ml-trace -O2 -fno-vectorize -fno-slp-vectorize -I"$ML_ROOT/include" "$SRC" -o "$T/k" ||
    fail "memlens-cc failed"
N=200000 R=3 M=100000

run() { # dir, args...
    local d=$1
    shift
    MEMLENS_OUT=$T/$d "$MEMLENS" trace -q -- "$T/k" "$@" >/dev/null 2>"$T/$d.err" ||
        fail "$d: traced run failed: $(cat "$T/$d.err")"
}
an() { # dir, out, args...
    local d=$1 o=$2
    shift 2
    "$MEMLENS" analyze -q "$T"/$d/*.mlt "$@" >"$T/$o" || fail "analyze $* on $d failed"
}

run seq seq $N $R
run two two $N
run walk walk 1000000 $M
head -c 1000003 /dev/urandom >"$T/in"
run copy copy "$T/in" "$T/out" 65536
cmp -s "$T/in" "$T/out" || fail "the copy differs"
run nest nest

an seq seq-streams.csv --csv --by region streams
an seq seq-streams.json --json streams
an two two-streams.csv --csv --by region streams
an walk walk-streams.csv --csv --by region streams
an seq seq-hot.json --json --by region hotpages
an seq seq-bw.json --json --by region --memory --l2 none --llc 1m:16 bandwidth
an copy copy-io.json --json --by region io
an nest nest-region.json --json --by region bandwidth
an nest nest-mark.json --json --by mark bandwidth

python3 - "$T" $N $R $M <<'PY' || fail "closed forms do not hold"
import csv, json, sys
T, N, R, M = sys.argv[1], *map(int, sys.argv[2:5])

def ranges(d):
    r = {}
    for line in open(f'{T}/{d}.err'):
        f = line.split()
        if len(f) == 4 and f[0] == 'range':
            r[f[1]] = int(f[2], 16)
    return r

def rows(name):
    return list(csv.DictReader(open(f'{T}/{name}')))

def near(a, b, tol):
    assert abs(a - b) <= tol, (a, b, tol)

def e0(addr):
    return (64 - addr % 64) // 8  # elements of a's first line

# streams: sequential passes; every pass restarts at a's first line (not sequential)
a = ranges('seq')['a']
for r in rows('seq-streams.csv'):
    if r['marker'] == 'region:seq' and r['space'] == 'virtual':
        assert int(r['accesses']) == N * R, r
        for w in (8, 16, 32, 64):
            near(float(r[f'coverage_w{w}']), 1 - e0(a) / N, 1e-4)
    if r['marker'] == 'region:seq' and r['space'] == 'physical' and r['stream'] == 'thread':
        # a page boundary breaks a stream unless the frames are adjacent
        assert 1 - 8 / 512 - 2 * e0(a) / N - 1e-3 <= float(r['coverage_w8']) <= 1, r
# strides of one instruction: 8 bytes, or 8 x the unrolling factor
st = json.load(open(f'{T}/seq-streams.json'))['strides']
assert sum(s['share'] for s in st if s['stride'] in (8, 16, 32, 64)) > 0.99, st
# two interleaved readers: each stream's first line only
r2 = ranges('two')
for r in rows('two-streams.csv'):
    if r['marker'] == 'region:two' and r['space'] == 'virtual':
        assert int(r['accesses']) == 2 * N, r
        for w in (8, 16, 32, 64):
            near(float(r[f'coverage_w{w}']), 1 - (e0(r2['a']) + e0(r2['b'])) / (2 * N), 1e-4)
# random walk over 125000 lines: a neighbour within 64 elements is rare
for r in rows('walk-streams.csv'):
    if r['marker'] == 'region:walk' and r['space'] == 'virtual':
        assert int(r['accesses']) == M and float(r['coverage_w64']) < 0.01, r

# hotpages: a full page is read 512 x R times in the region, a line 8 x R times
hot = json.load(open(f'{T}/seq-hot.json'))
top = [h for h in hot['top'] if h['marker'] == 'region:seq' and h['thread'] == '0']
pages = [h for h in top if h['granularity'] == 'page']
lines = [h for h in top if h['granularity'] == 'line']
assert pages[0]['accesses'] == 512 * R and lines[0]['accesses'] == 8 * R, (pages[0], lines[0])
# the 128-page LRU misses once per page visit: the init pass and R passes over P pages
P = (a + 8 * N - 1) // 4096 - a // 4096 + 1
acc = sum(b['accesses'] for b in hot['lru'])
miss = acc - sum(b['hits'] for b in hot['lru'])
near(miss, (R + 1) * P, 8)

# bandwidth: the region reads 8 N R bytes; behind a 1 MiB llc, memory reads as much
bw = json.load(open(f'{T}/seq-bw.json'))
s = [r for r in bw['summary'] if r['marker'] == 'region:seq' and r['thread'] == '0'][0]
assert s['bytes_read'] == 8 * N * R and s['bytes_written'] == 0, s
near(s['memory_bytes_read'], 8 * N * R, 0.02 * 8 * N * R)
iv = sum(r['bytes_read'] for r in bw['intervals'] if r['marker'] == 'region:seq' and r['thread'] == '0')
assert iv == 8 * N * R, iv

# io: 1000003 bytes copied in 65536-byte requests
io = json.load(open(f'{T}/copy-io.json'))
S, B = 1000003, 65536
k = {(r['fd_kind'], r['direction']): r for r in io['kinds']}
fin, fout = k[('file', 'in')], k[('file', 'out')]
assert fin['calls'] == S // B + 2 and fin['bytes_transferred'] == S and fin['bytes_requested'] == B * (S // B + 2), fin
assert fout['calls'] == S // B + 1 and fout['bytes_transferred'] == S, fout
near(fout['avg_request'], S / (S // B + 1), 0.1)
sz = [(r['size_lo'], r['count'], r['cdf']) for r in io['sizes'] if r['fd_kind'] == 'file' and r['direction'] == 'out']
assert sz == [(16384, 1, 1 / 16), (65536, 15, 1.0)], sz
t = [r for r in io['traffic'] if r['marker'] == 'region:copy' and r['thread'] == '0'][0]
assert t['io_bytes_in'] == S and t['io_bytes_out'] == S and t['io_calls'] == 2 * (S // B) + 3, t

# breakdowns: innermost interval; the rows of a thread add up to its total
def by(name, marker):
    return [r for r in json.load(open(f'{T}/{name}'))['summary'] if r['thread'] == '0' and r['marker'] == marker][0]
assert by('nest-region.json', 'region:outer')['bytes_read'] == 8 * 1000
assert by('nest-region.json', 'region:inner')['bytes_read'] == 8 * 2500
assert by('nest-mark.json', 'mark:tail')['bytes_read'] == 8 * 596
for name in ('nest-region.json', 'nest-mark.json'):
    rows_ = [r for r in json.load(open(f'{T}/{name}'))['summary'] if r['thread'] == '0']
    tot = [r for r in rows_ if r['marker'] == 'all'][0]
    for col in ('bytes_read', 'bytes_written'):
        assert sum(r[col] for r in rows_ if r['marker'] != 'all') == tot[col], (name, col)
PY
exit 0
