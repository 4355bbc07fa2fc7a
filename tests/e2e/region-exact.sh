#!/bin/bash
# Second method: exact mode classifies every access by address at run time; its heap+global and
# total bytes must agree with the static facts times counts (within 1%, in practice exactly).
. "$(dirname "$0")/../lib/common.sh"
ml_require_cc
dir=$ML_ROOT/tests/e2e/exact
progs=("$ML_ROOT/examples/stream.c:20000 2" "$dir/threads.c:" "$dir/solver.cpp:" "$dir/atomics.c:3000")
for O in 0 2 3; do
    for entry in "${progs[@]}"; do
        src=${entry%%:*}
        args=${entry#*:}
        cc=$MLCC
        extra=-fopenmp
        case $src in *.cpp) cc=$MLCXX extra= ;; esac
        exe=$T/$(basename "${src%.*}")-O$O
        $cc --ml-exact -O$O -g $extra -pthread -o "$exe" "$src" || fail "build of $src at -O$O"
        out=$T/out-$(basename "$exe")
        # shellcheck disable=SC2086
        OMP_NUM_THREADS=3 MEMLENS_OUT=$out "$exe" $args >/dev/null || fail "run of $exe"
        PYTHONPATH=$ML_ROOT/tests/lib python3 - "$out" "$exe" <<'PY' || fail "exact mode disagrees for $exe"
import sys, mlp
(p,) = mlp.load_dir(sys.argv[1])
bad = 0
for r in p.regions:
    s, x = p.totals(r), p.exact_totals(r)
    for what in ('read', 'written'):
        key = 'rd' if what == 'read' else 'wr'
        hs = s[key + '_heap'] + s[key + '_global']
        hx = x[key + '_heap'] + x[key + '_global']
        tot_s, tot_x = s['bytes_' + what], x['bytes_' + what]
        # A pointer argument into a caller's stack counts as heap statically and as stack by
        # address (OpenMP's thread-id argument): allow a few such words.
        ok = abs(tot_s - tot_x) <= 0.01 * max(tot_x, 1) and abs(hs - hx) <= 0.01 * max(hx, 1) + 64
        print('%s %-6s %-7s static %10d exact %10d  heap+global static %10d exact %10d  %s'
              % (sys.argv[2].rsplit('/', 1)[1], r, what, tot_s, tot_x, hs, hx, 'ok' if ok else 'BAD'))
        bad += not ok
sys.exit(1 if bad else 0)
PY
    done
    # closed form for the atomics: 3000 fetch-adds and 3000 compare-exchanges of 8 bytes
    check_py "$T/out-atomics-O$O" "P[0].totals('at')['rd_heap'] == 16*3000 == P[0].totals('at')['wr_heap']"
done
echo ok
