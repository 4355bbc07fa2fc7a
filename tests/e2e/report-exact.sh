#!/bin/bash
# memlens report shows exact mode's bytes by address class (table block, CSV columns, JSON keys)
# when the profile has EXACT records: a kernel whose heap, global and stack bytes are known
# (tests/e2e/exact/classes.c), per thread, at -O0..-O3, merged over two runs; nothing of it
# for a profile without EXACT records.
. "$(dirname "$0")/../lib/common.sh"
ml_require_cc
src=$ML_ROOT/tests/e2e/exact/classes.c
n=1000
for O in 0 1 2 3; do
    exe=$T/classes-O$O
    $MLCC --ml-exact -O$O -g -pthread -o "$exe" "$src" || fail "build at -O$O"
    for run in 1 2; do
        MEMLENS_OUT=$T/out-O$O "$exe" $n >/dev/null || fail "run at -O$O"
    done
    one=$(ls "$T/out-O$O"/*.mlp | head -1)
    "$MEMLENS" report --csv "$one" >"$T/csv" || fail "csv at -O$O"
    "$MEMLENS" report --json "$one" >"$T/json" || fail "json at -O$O"
    "$MEMLENS" report --csv --merge "$T/out-O$O" >"$T/merged" || fail "merged csv at -O$O"
    "$MEMLENS" report "$one" >"$T/table" || fail "table at -O$O"
    PYTHONPATH=$ML_ROOT/tests/lib python3 - "$T" $n $O "$one" <<'PY' || fail "exact figures at -O$O"
import csv, json, sys
tmp, n, O, path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
import mlp
cls = ['rd_heap', 'rd_global', 'rd_stack', 'wr_heap', 'wr_global', 'wr_stack']
# Closed forms per thread (thread 0 works on n doubles, thread 1 on n // 2): fill writes 8 bytes
# per element to each class, sum reads the heap once, the global twice, the stack three times.
def want(region, k):
    if region == 'fill':
        return dict(zip(cls, [0, 0, 0, 8 * k, 8 * k, 8 * k]))
    return dict(zip(cls, [8 * k, 16 * k, 24 * k, 0, 0, 0]))
per = {'0': n, '1': n // 2, 'total': n + n // 2}
def agree(got, exp, what):
    for c in cls:
        # At -O0 locals live on the stack: heap and global stay exact, the stack grows.
        if O == 0 and c.endswith('stack'):
            assert got[c] >= exp[c], (what, c, got[c], exp[c])
        else:
            assert got[c] == exp[c], (what, c, got[c], exp[c])
rows = list(csv.DictReader(open(tmp + '/csv')))
assert len(rows) == 6, rows
p = mlp.Profile(path)
for r in rows:
    got = {c: int(r['exact_' + c]) for c in cls}
    agree(got, want(r['region'], per[r['thread']]), (r['region'], r['thread']))
    # the independent reader sums the same EXACT records
    x = p.exact_totals(r['region'], None if r['thread'] == 'total' else int(r['thread']))
    assert all(x[c] == got[c] for c in cls), (r, x)
    assert r['note'] == '', r
d = json.load(open(tmp + '/json'))['profiles'][0]
for reg in d['regions']:
    for row, key in [(reg['total'], 'total')] + [(t, str(t['index'])) for t in reg['threads']]:
        ex = row['exact']
        got = {'rd_' + k: ex['bytes_read'][k] for k in ('heap', 'global', 'stack')}
        got.update({'wr_' + k: ex['bytes_written'][k] for k in ('heap', 'global', 'stack')})
        agree(got, want(reg['name'], per[key]), ('json', reg['name'], key))
        assert ex['bytes_read']['total'] == sum(got[c] for c in cls[:3])
        assert ex['bytes_written']['total'] == sum(got[c] for c in cls[3:])
# --merge of the two runs: every exact figure doubles.
m = {(r['region'], r['thread']): r for r in csv.DictReader(open(tmp + '/merged'))}
for r in rows:
    mr = m[(r['region'], r['thread'])]
    assert mr['profiles'] == '2', mr
    for c in cls:
        assert int(mr['exact_' + c]) == 2 * int(r['exact_' + c]), (r['region'], c)
# The table's block: its heap+global ratio is static over exact, as the CSV columns give it.
tab = open(tmp + '/table').read().splitlines()
i = [k for k, l in enumerate(tab) if 'bytes by address class (exact mode' in l]
assert i, 'no exact block in the table'
body = tab[i[0] + 2:i[0] + 8]
for r in rows:
    hs = sum(int(r[c]) for c in ('rd_heap', 'rd_global', 'wr_heap', 'wr_global'))
    hx = sum(int(r['exact_' + c]) for c in ('rd_heap', 'rd_global', 'wr_heap', 'wr_global'))
    line = [l for l in body if l.split()[:2] == [r['region'], r['thread']]]
    assert line and line[0].split()[-1] == '%.3f' % (hs / hx), (line, hs, hx)
print('-O%d: exact figures ok' % O)
PY
done

# A counting build: no block, empty CSV columns, null in JSON.
$MLCC -O2 -pthread -o "$T/plain" "$src" || fail "plain build"
MEMLENS_OUT=$T/plain-out "$T/plain" $n >/dev/null || fail "plain run"
"$MEMLENS" report "$T/plain-out" | grep -q "exact mode" && fail "exact block without EXACT records"
"$MEMLENS" report --csv "$T/plain-out" | python3 -c '
import csv, sys
rows = list(csv.DictReader(sys.stdin))
assert rows and all(r[k] == "" for r in rows for k in r if k.startswith("exact_")), rows' ||
    fail "exact CSV columns of a counting build"
"$MEMLENS" report --json "$T/plain-out" | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert all(r["total"]["exact"] is None for r in d["profiles"][0]["regions"])' ||
    fail "exact JSON of a counting build"
echo ok
