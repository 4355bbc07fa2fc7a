#!/bin/bash
# Processes of an MPI job (Debian's OpenMPI, mpicc with OMPI_CC=memlens-cc) are told apart by
# rank: <prog>.<pid>.r<rank>.<token>.mlp, the rank and job size in the profile, and in memlens
# report's table heading, CSV column 'rank' and JSON. Rank r reads 8 (r + 1) n heap bytes.
. "$(dirname "$0")/../lib/common.sh"
ml_require_cc
command -v mpicc >/dev/null && command -v mpirun >/dev/null ||
    skip "OpenMPI is not installed (Debian openmpi-bin libopenmpi-dev)"
MPIRUN=(mpirun --allow-run-as-root --oversubscribe -np 2)
"${MPIRUN[@]}" true >/dev/null 2>&1 || skip "mpirun cannot start 2 processes here"
cat >"$T/ranks.c" <<'C'
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include "memlens.h"
int main(int argc, char **argv)
{
    int rank, size;
    long n, s = 0, total = 0, *a;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    n = (rank + 1) * atol(argv[1]);
    a = malloc(n * sizeof(*a));
    for (long i = 0; i < n; i++)
        a[i] = i;
    MEMLENS_ROI_BEGIN("work");
    for (long i = 0; i < n; i++)
        s += a[i];
    MEMLENS_ROI_END("work");
    MPI_Reduce(&s, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (!rank)
        printf("%d %ld\n", size, total);
    MPI_Finalize();
    return 0;
}
C
n=5000
OMPI_CC=$MLCC mpicc -O2 -I"$ML_ROOT/include" -o "$T/ranks" "$T/ranks.c" ||
    fail "mpicc with OMPI_CC=memlens-cc failed"
"${MPIRUN[@]}" -x MEMLENS_OUT="$T/out" "$T/ranks" $n >"$T/stdout" 2>"$T/stderr" ||
    fail "mpirun failed: $(cat "$T/stderr")"
# rank 0 prints the sum of 0..n-1 and of 0..2n-1
[ "$(cat "$T/stdout")" = "2 $((n * (n - 1) / 2 + 2 * n * (2 * n - 1) / 2))" ] ||
    fail "wrong output: $(cat "$T/stdout")"
check_py "$T/out" "
len(P) == 2 and sorted(p.rank for p in P) == [0, 1] and all(p.nranks == 2 for p in P) and all(
    p.path.split('/')[-1] == 'ranks.%d.r%d.%016x.mlp' % (p.pid, p.rank, p.token) and
    p.totals('work')['rd_heap'] == 8 * (p.rank + 1) * $n for p in P)"

"$MEMLENS" report "$T/out" >"$T/table" || fail "report failed"
for r in 0 1; do
    grep -qE "^  pid [0-9]+, ppid [0-9]+, rank $r of 2, host " "$T/table" ||
        fail "table: no rank $r heading"
done
"$MEMLENS" report --csv --totals "$T/out" >"$T/csv" || fail "report --csv failed"
python3 - "$T/csv" $n <<'PY' || fail "csv: rank column wrong"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
n = int(sys.argv[2])
assert sorted(int(r['rank']) for r in rows) == [0, 1], rows
for r in rows:
    assert int(r['rd_heap']) == 8 * (int(r['rank']) + 1) * n, r
    assert '.r%s.' % r['rank'] in r['profile'], r
PY
"$MEMLENS" report --json "$T/out" >"$T/json" || fail "report --json failed"
python3 - "$T/json" <<'PY' || fail "json: rank wrong"
import json, sys
ps = json.load(open(sys.argv[1]))['profiles']
assert sorted((p['rank'], p['nranks']) for p in ps) == [(0, 2), (1, 2)], ps
PY

# Outside a job the name has no rank, and the report none either.
if MEMLENS_OUT=$T/single "$T/ranks" 10 >/dev/null 2>&1; then
    check_py "$T/single" "len(P) == 1 and P[0].rank is None and '.r' not in P[0].path.split('/')[-1]"
else
    echo "skipped the singleton run: an MPI program cannot start without mpirun here"
fi
echo ok
