#!/bin/bash
# memlens trace options, each against what the program provably did (tests/e2e/kernels/
# trace-options.c reads an int8 array of n bytes five times: before a region, inside it, between
# MEMLENS_TRACE_OFF and ON, after ON, and after the region):
#   default        every pass recorded except the one between OFF and ON;
#   --start off    nothing before MEMLENS_TRACE_ON, then the same as by default;
#   --regions-only only the passes inside the region;
#   --markers-only no access records, every marker;
#   --collapse     weights adding up to the accesses; at -O2 one record per 64-byte line per pass
#                  (at -O0 the loop's stack accesses come between two of the array's);
#   --no-faults    no page-fault records (by default: one per first touch of each page wholly
#                  inside the array, with frames when /proc/self/pagemap shows them, else the reason in the trace);
#   --drop         the run ends without waiting (bounded by timeout; it once waited 30 s at exit)
#                  and the output is the plain build's; when the writer fell behind, whole
#                  buffers are gone: each pass keeps at most its accesses.
# At -O0 and -O2; the output is the plain build's.
. "$(dirname "$0")/../lib/common.sh"
ml_require_cc
command -v python3 >/dev/null || skip "python3 is not installed"
SRC=$ML_ROOT/tests/e2e/kernels/trace-options.c
N=65536
for O in 0 2; do
    $MLCC --ml-trace -O$O -g -I"$ML_ROOT/include" "$SRC" -o "$T/k$O" || fail "build -O$O failed"
    clang-14 -O$O -g -I"$ML_ROOT/include" "$SRC" -o "$T/p$O" || fail "clang-14 -O$O failed"
    "$T/p$O" $N >"$T/p.out" 2>/dev/null || fail "plain -O$O failed"
    for opt in default --start=off --regions-only --markers-only --collapse --no-faults --drop; do
        rm -rf "$T/o"
        args=()
        [ $opt = default ] || args=($opt)
        # Bounded: finishing the trace must not wait for anything (--drop once waited 30 s).
        MEMLENS_OUT=$T/o timeout 120 "$MEMLENS" trace -q "${args[@]}" -- "$T/k$O" $N >"$T/k.out" \
            2>"$T/err" || fail "-O$O $opt: run failed or hung: $(cat "$T/err")"
        cmp -s "$T/p.out" "$T/k.out" || fail "-O$O $opt: output differs"
        MEMLENS_BUILD=$ML_BUILD PYTHONPATH=$ML_ROOT/tests/lib python3 - "$T/o" "$T/err" $N $opt $O \
            <<'PY' || fail "-O$O $opt: wrong records"
import collections, glob, json, subprocess, sys
import mlt
d, err, n, opt, olevel = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
paths = glob.glob(d + '/*.mlt')
lo, hi = mlt.ranges(open(err).read())['a']
R = mlt.records(paths)
S = json.loads(subprocess.run([mlt.MEMLENS, 'analyze', '--json'] + paths, check=True,
                              stdout=subprocess.PIPE, text=True).stdout)['traces'][0]
phase = {name: rs for th, name, rs in mlt.phases(R)}
def loads(name):
    return mlt.count(phase.get(name, []), lo, hi)[0]
def records(name):
    return sum(1 for r in phase.get(name, []) if r.kind == 'load' and mlt.inside(r, lo, hi))
marks = [r.what for r in R if r.kind in ('mark', 'region-begin', 'region-end', 'trace-on',
                                         'trace-off')]
want_marks = ['mark:before', 'region:r', 'mark:inside', 'trace:trace', 'mark:off',
              'trace:trace', 'mark:on', 'region:r', 'mark:after']
expect = {'default': (n, n, 0, n, n, n), '--start=off': (0, 0, 0, n, n, n),
          '--regions-only': (0, n, 0, n, 0, n), '--markers-only': (0, 0, 0, 0, 0, n),
          '--collapse': (n, n, 0, n, n, n), '--no-faults': (n, n, 0, n, n, n),
          '--drop': (n, n, 0, n, n, n)}[opt]
got = (loads('before'), loads('inside'), loads('off'), loads('on'), loads('after'))
bad = []
dropped = S['dropped']
if opt == '--drop' and dropped:
    if any(g > e for g, e in zip(got, expect)):
        bad.append(f'loads per phase {got} with {dropped} words dropped, want at most {expect[:5]}')
elif got != expect[:5]:
    bad.append(f'loads per phase {got}, want {expect[:5]}')
if marks != want_marks and not (opt == '--drop' and dropped):
    bad.append(f'markers {marks}')
lines = (hi - 1) // 64 - lo // 64 + 1
if opt == '--collapse' and olevel != '0' and records('before') != lines:
    bad.append(f'collapse: {records("before")} records for {lines} lines')
if opt not in ('--collapse', '--drop') and records('before') not in (0, n):
    bad.append(f'{records("before")} records before')
faults = [r for r in R if r.kind == 'page-fault' and lo >> 12 <= r.addr >> 12 <= (hi - 1) >> 12]
pfns = [r for r in R if r.kind == 'pfn']
meta = subprocess.run([mlt.MEMLENS, 'analyze', paths[0], 'summary'], check=True,
                      stdout=subprocess.PIPE, text=True).stdout
pages = ((hi - 1) >> 12) - (lo >> 12) + 1
if opt == '--no-faults' and faults:
    bad.append('page faults recorded with --no-faults')
if opt == 'default':
    # Every page wholly inside the array is touched first by the initialising loop, once (the
    # pages at its ends may hold malloc's own data, faulted before).
    whole = set(range((lo + 4095) >> 12, hi >> 12))
    got_pages = [r.addr >> 12 for r in faults]
    if not whole <= set(got_pages) or len(got_pages) != len(set(got_pages)):
        bad.append(f'{len(faults)} faults on {pages} pages, {len(whole)} wholly inside')
    if 'with frames' in meta and not all(p.size == 4096 and int(p.what.split()[0][4:]) > 0
                                          for p in pfns if p.addr >> 12 in {f.addr >> 12 for f in faults}):
        bad.append('frames missing')
if bad:
    print('; '.join(bad))
    sys.exit(1)
PY
    done
done
echo ok
