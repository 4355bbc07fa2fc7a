#!/bin/bash
# Peak memory (and wall time) of `memlens report` over many real profiles, as a test suite
# leaves them: a generated program with many counting units and four threads, built with
# `memlens cc --all`, run NPROF times with different arguments; then the table, --csv, --json
# and --merge of the whole directory, each ROUNDS times, interleaved with the same commands of
# another memlens (OLD=/path/to/memlens, e.g. a build of an earlier revision) when given.
# Figures are medians over rounds; the ratio is taken within each round.
#
#   bench/report-many.sh [NPROF [NFUNC]]     defaults: 473 profiles, 1500 functions
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
B=${MEMLENS_BUILD:-$root/build}
ML=$B/bin/memlens
OLD=${OLD:-}
NPROF=${1:-473}
NFUNC=${2:-1500}
ROUNDS=${ROUNDS:-3}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/memlens-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

python3 - "$NFUNC" >"$tmp/many.c" <<'EOF'
import sys
nf = int(sys.argv[1])
print('#include "memlens.h"\n#include <pthread.h>\n#include <stdio.h>\n#include <stdlib.h>')
print('static long n;\nlong *volatile data;')
for k in range(nf):
    print('__attribute__((noinline)) long f%d(const long *a) { long s = 0;' % k)
    print('  for (long i = 0; i < n; i++) { if (a[i] & %d) s += a[i] * %d; else s -= a[i] >> 1; }' % (k % 7 + 1, k + 3))
    print('  return s; }')
regions = 8
print('static void *run(void *arg) { long s = 0; const long *a = data; (void)arg;')
for r in range(regions):
    print('  MEMLENS_ROI_BEGIN("r%d");' % r)
    for k in range(r, nf, regions):
        print('  s += f%d(a);' % k)
    print('  MEMLENS_ROI_END("r%d");' % r)
print('  return (void *)s; }')
print('''int main(int argc, char **argv)
{
    pthread_t th[3];
    long s = 0;
    n = argc > 1 ? atol(argv[1]) : 100;
    data = calloc(n, sizeof(long));
    for (long i = 0; i < n; i++) data[i] = i * 7 + 1;
    for (int t = 0; t < 3; t++) pthread_create(&th[t], NULL, run, NULL);
    s += (long)run(NULL);
    for (int t = 0; t < 3; t++) { void *r; pthread_join(th[t], &r); s += (long)r; }
    printf("%ld\\n", s);
    return 0;
}''')
EOF
echo "building a program of $NFUNC functions with memlens cc --all ..."
"$B/bin/memlens-cc" --ml-all -O2 -I"$root/include" -pthread "$tmp/many.c" -o "$tmp/many"
mkdir "$tmp/p"
for i in $(seq "$NPROF"); do
    MEMLENS_OUT=$tmp/p "$tmp/many" $((50 + i)) >/dev/null
done
size=$(du -sk "$tmp/p" | cut -f1)
echo "$NPROF profiles, $((size / 1024)) MiB ($((size / NPROF)) KiB each)"

# measure <memlens> <args...>: prints "peak_kib seconds"
measure() {
    local bin=$1
    shift
    /usr/bin/time -f "%M %e" -o "$tmp/t" "$bin" report "$@" "$tmp/p" >/dev/null 2>"$tmp/err" ||
        { echo "failed: $bin report $*: $(head -c 200 "$tmp/err")" >&2; echo "0 0"; return; }
    cat "$tmp/t"
}

modes=("" "--csv" "--json" "--merge")
: >"$tmp/results"
for round in $(seq "$ROUNDS"); do
    for m in "${modes[@]}"; do
        # shellcheck disable=SC2086
        echo "new|$m|$(measure "$ML" $m)" >>"$tmp/results"
        if [ -n "$OLD" ] && [ "$m" != --merge ]; then
            # shellcheck disable=SC2086
            echo "old|$m|$(measure "$OLD" $m)" >>"$tmp/results"
        fi
    done
done
python3 - "$tmp/results" "$ROUNDS" <<'EOF'
import statistics, sys
rows = [l.rstrip("\n").split("|") for l in open(sys.argv[1])]
rounds = int(sys.argv[2])
res = {}
for who, mode, fig in rows:
    kib, sec = fig.split()
    res.setdefault((who, mode), []).append((int(kib), float(sec)))
print("%-10s %14s %10s %14s %10s %12s" % ("mode", "new peak MiB", "new s", "old peak MiB", "old s", "old/new RSS"))
for mode in ["", "--csv", "--json", "--merge"]:
    new = res.get(("new", mode), [])
    old = res.get(("old", mode), [])
    med = lambda xs, k: statistics.median(x[k] for x in xs) if xs else float("nan")
    ratio = statistics.median(o[0] / n[0] for o, n in zip(old, new) if n[0]) if old else float("nan")
    print("%-10s %14.1f %10.2f %14.1f %10.2f %12.1f" % (mode or "table", med(new, 0) / 1024, med(new, 1),
          med(old, 0) / 1024, med(old, 1), ratio))
EOF
