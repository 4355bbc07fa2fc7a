#!/bin/bash
# Event-profiling benchmark (issue 14): slowdown of 'memlens profile' per module and for all
# modules together, with 1 and 2 workers, per bench/ kernel and
# geomean; peak memory of memlens (backend) beside the program's. Every variant of a kernel runs
# once per round, in an order rotated each round; a slowdown is the ratio to the plain run of the
# same round; figures are medians over RUNS rounds. Beside the elapsed-time slowdown, the same
# for CPU time (user + system of memlens, its workers and the program, from the kernel's
# accounting of children), which waiting for a busy machine's cores does not inflate. Prints
# 'uptime' before and after: timings on a shared machine are only as good as its load.
# Usage: bench/profile.sh [kernel...]   (env: RUNS, default 5; SMALL=1 for the small inputs;
#        MODULES, default 'dep sharing value lifetime pointsto dep,sharing,value,lifetime,pointsto':
#        the variants, each module alone or several together; FORCE_WORKERS=1: 2 workers even
#        where memlens would cut them to the CPUs beside the program's, docs/profile.md)
set -o pipefail
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
MEMLENS_BUILD=${MEMLENS_BUILD:-$ROOT/build}
RUNS=${RUNS:-5}
MODULES=${MODULES:-dep sharing value lifetime pointsto dep,sharing,value,lifetime,pointsto}

die() {
    echo "profile.sh: $*" >&2
    exit 1
}
[ -x "$MEMLENS_BUILD/bin/memlens" ] || die "no '$MEMLENS_BUILD/bin/memlens': run make"
[ -x /usr/bin/time ] || die "'/usr/bin/time' not found (Debian package 'time')"
W=$(mktemp -d "${TMPDIR:-/tmp}/memlens-bench.XXXXXX") || exit 1
trap 'rm -rf "$W"' EXIT

# name | arguments | small arguments
KERNELS='stream|2000000 10|200000 3
strided|2000000 16 20|200000 16 3
chase|500000 1000000|20000 30000
spmv|50000 16 10|3000 8 3
pagerank|50000 16 5|3000 8 3
smallfn|200000 10|2000 5'

want=" $* "
rows=()
while IFS='|' read -r name args small; do
    [ $# -gt 0 ] && [[ $want != *" $name "* ]] && continue
    [ -n "${SMALL:-}" ] && args=$small
    src=bench/kernels/$name.c
    clang-14 -O2 -I"$ROOT/include" "$src" -o "$W/$name.plain" || die "clang-14 failed on '$src'"
    for m in $MODULES; do
        "$MEMLENS_BUILD/bin/memlens" cc --events=$m -O2 -g "$src" -o "$W/$name.$m" ||
            die "memlens cc --events=$m failed on '$src'"
    done
    rows+=("$name|$args")
done <<<"$KERNELS"
[ ${#rows[@]} -gt 0 ] || die "no kernel matches '$*'"

echo "load before: $(uptime)"
MEMLENS_BUILD=$MEMLENS_BUILD MODULES=$MODULES python3 - "$W" "$RUNS" "${rows[@]}" <<'PY'
import math, os, resource, statistics, subprocess, sys, time

W, runs, rows = sys.argv[1], int(sys.argv[2]), [r.split('|') for r in sys.argv[3:]]
M = os.environ['MEMLENS_BUILD'] + '/bin/memlens'
variants = ['plain'] + ['%s/w%d' % (m, w) for m in os.environ['MODULES'].split() for w in (1, 2)]

def cpu_now():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime

def run(name, args, v):
    """Seconds, CPU seconds and peak RSS (KiB) of one run."""
    if v == 'plain':
        cmd = ['/usr/bin/time', '-f', '%M', '%s/%s.plain' % (W, name)] + args.split()
    else:
        m, w = v.split('/')
        force = ['--force-workers'] if os.environ.get('FORCE_WORKERS') else []
        cmd = ['/usr/bin/time', '-f', '%M', M, 'profile', '-q', '-m', m, '-w', w[1:]] + force + [
            '-o', W + '/out', '--', '%s/%s.%s' % (W, name, m)] + args.split()
    c0, t0 = cpu_now(), time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    t, c = time.monotonic() - t0, cpu_now() - c0
    if p.returncode:
        sys.exit('profile.sh: %s failed: %s' % (' '.join(cmd), p.stderr[-500:]))
    subprocess.run(['rm', '-rf', W + '/out'])
    return t, c, int(p.stderr.strip().splitlines()[-1])

res = {}
for name, args in rows:
    ratios = {v: [] for v in variants[1:]}
    cratios = {v: [] for v in variants[1:]}
    mem = {v: [] for v in variants}
    for r in range(runs):
        order = variants[r % len(variants):] + variants[:r % len(variants)]
        t, c = {}, {}
        for v in order:
            t[v], c[v], kb = run(name, args, v)
            mem[v].append(kb)
        for v in variants[1:]:
            ratios[v].append(t[v] / t['plain'])
            cratios[v].append(c[v] / max(c['plain'], 1e-4))
    res[name] = ({v: statistics.median(x) for v, x in ratios.items()},
                 {v: statistics.median(x) for v, x in mem.items()},
                 {v: statistics.median(x) for v, x in cratios.items()})

wid = max(15, max(len(v) + 2 for v in variants))
for title, i in (('slowdown (median of per-round ratios to the plain -O2 run, %d rounds)', 0),
                 ('\nCPU time, same ratios (user + system of everything the run started)', 2)):
    print(title % runs if '%d' in title else title)
    print('%-10s' % 'kernel' + ''.join('%*s' % (wid, v) for v in variants[1:]))
    for name, _ in rows:
        print('%-10s' % name + ''.join('%*.1fx' % (wid - 1, res[name][i][v]) for v in variants[1:]))
    print('%-10s' % 'geomean' + ''.join('%*.1fx' % (wid - 1, math.exp(statistics.mean(
        math.log(res[n][i][v]) for n, _ in rows))) for v in variants[1:]))
print('\npeak memory, MiB (plain: the program; others: the larger of memlens (backend) and the program)')
print('%-10s' % 'kernel' + ''.join('%*s' % (wid, v) for v in variants))
for name, _ in rows:
    print('%-10s' % name + ''.join('%*.0f' % (wid, res[name][1][v] / 1024) for v in variants))
PY
rc=$?
echo "load after: $(uptime)"
exit $rc
