#!/bin/bash
# memlens analyze throughput: records per second of every analysis on traces of >= 10^8 records,
# on one core (-j1: CPU seconds) and with chunks decoded on both cores (-j2: wall seconds), peak
# memory; the sampled reuse mode's miss-ratio error against the exact one; and, for the membus
# question, cachegrind's time on the same program and input beside memlens' (trace + membus).
# Runs are interleaved round-robin for RUNS rounds (default 3); figures are medians.
# OLD=/path/to/memlens also runs another build (an earlier revision) on the same traces, each
# analysis paired with this build's in every round (the order alternating), and prints its
# records per CPU second and the median over rounds of the ratio old CPU s / new CPU s.
# J="1 2" (default) are the -j values run. AN="hotpages membus" runs only those analyses (each
# entry one analysis and its arguments, separated by commas: AN="reuse --sample 0.01,hotpages";
# one analysis with arguments ends with a comma: AN="reuse --sample 0.01,").
#   bench/analyze.sh            both traces (stream: regular, pagerank: irregular)
#   RUNS=1 bench/analyze.sh stream
#   OLD=/tmp/old/bin/memlens J=1 bench/analyze.sh
set -e
cd "$(dirname "$0")/.."
ROOT=$PWD
B=${B:-build}
ML=$ROOT/$B/bin/memlens
MLCC=$ROOT/$B/bin/memlens-cc
RUNS=${RUNS:-3}
J=${J:-1 2}
OLD=${OLD:-}
W=$(mktemp -d "${TMPDIR:-/tmp}/memlens-bench-analyze.XXXXXX")
trap 'rm -rf "$W"' EXIT
[ -x "$ML" ] || { echo "bench/analyze.sh: build memlens first (make)" >&2; exit 1; }
[ -z "$OLD" ] || [ -x "$OLD" ] || { echo "bench/analyze.sh: OLD='$OLD' is not executable" >&2; exit 1; }

# kernel | arguments (each trace has at least 10^8 records)
KERNELS="stream|1000000 66
pagerank|400000 16 8"
SEL=${*:-stream pagerank}
ANALYSES=(summary membus "reuse" "reuse --sample 0.01" streams hotpages bandwidth io)
if [ -n "${AN:-}" ]; then
    case $AN in
    *,*) IFS=, read -r -a ANALYSES <<<"$AN" ;;
    *) read -r -a ANALYSES <<<"$AN" ;;
    esac
fi

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min), $(nproc) CPUs"
declare -A TRACE RECORDS ARGS
while IFS='|' read -r k args; do
    case " $SEL " in *" $k "*) ;; *) continue ;; esac
    "$MLCC" --ml-trace -O2 -I"$ROOT/include" "bench/kernels/$k.c" -o "$W/$k" -lm
    clang-14 -O2 -I"$ROOT/include" "bench/kernels/$k.c" -o "$W/$k.plain" -lm
    MEMLENS_OUT=$W/t-$k "$ML" trace -q -- "$W/$k" $args >/dev/null
    TRACE[$k]=$(ls "$W"/t-$k/*.mlt)
    RECORDS[$k]=$("$ML" analyze -q --csv "${TRACE[$k]}" summary | awk -F, 'NR > 1 && $2 == "all" { print $5 }')
    ARGS[$k]=$args
    printf '%s: %s records in %s bytes\n' "$k" "${RECORDS[$k]}" "$(stat -c %s "${TRACE[$k]}")"
done <<<"$KERNELS"

# One timed run: prints "cpu_seconds wall_seconds peak_kib".
timed() {
    /usr/bin/time -f '%U %S %e %M' -o "$W/time" "$@" >/dev/null 2>"$W/err" ||
        { cat "$W/err" >&2; return 1; }
    awk '{ printf "%.3f %.3f %d\n", $1 + $2, $3, $4 }' "$W/time"
}

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

: >"$W/results"
for r in $(seq "$RUNS"); do
    for k in $SEL; do
        for a in "${ANALYSES[@]}"; do
            for j in $J; do
                # This build and OLD back to back, the order alternating by round.
                order="new old"
                [ $((r % 2)) = 0 ] && order="old new"
                for who in $order; do
                    m=$ML
                    if [ "$who" = old ]; then
                        [ -n "$OLD" ] || continue
                        m=$OLD
                    fi
                    # shellcheck disable=SC2086
                    set -- $(timed "$m" analyze -q --no-progress -j$j "${TRACE[$k]}" $a)
                    echo "$k|$a|$j|$1|$2|$3|$who|$r" >>"$W/results"
                done
            done
        done
        # membus question: memlens (trace + membus) against cachegrind, same program and input
        if [ "$k" = stream ] && [[ " ${ANALYSES[*]} " == *" membus "* ]] &&
            command -v valgrind >/dev/null; then
            set -- $(timed env MEMLENS_OUT="$W/m" "$ML" trace -q -- "$W/$k" ${ARGS[$k]})
            tr=$2
            set -- $(timed "$ML" analyze -q --no-progress -j2 "$W"/m/*.mlt membus --l1 32k:8 \
                --l2 none --llc 32m:16)
            rm -rf "$W/m"
            echo "$k|memlens trace + membus|2|0|$(echo "$tr + $2" | bc)|$3" >>"$W/results"
            set -- $(timed valgrind --tool=cachegrind --cache-sim=yes --D1=32768,8,64 \
                --LL=33554432,16,64 --cachegrind-out-file=/dev/null "$W/$k.plain" ${ARGS[$k]})
            echo "$k|cachegrind --cache-sim=yes|1|0|$2|$3" >>"$W/results"
        fi
    done
done

# M records per second from a median of seconds ("-" when not run).
rate() { [ -n "$2" ] && [ "$2" != 0 ] && echo "$1 / $2 / 1000000" | bc -l || echo nan; }

echo
printf '%-9s %-22s %14s %14s %14s %10s' trace analysis "1 core (M/s)" "2 cores (M/s)" \
    "wall -j2 (s)" "peak MiB"
[ -n "$OLD" ] && printf ' %14s %11s' "OLD 1 core" "OLD/new CPU"
echo
for k in $SEL; do
    for a in "${ANALYSES[@]}"; do
        sel() { awk -F'|' -v k="$k" -v a="$a" -v j="$1" -v w="$2" -v f="$3" \
            '$1 == k && $2 == a && $3 == j && $7 == w { print $f }' "$W/results"; }
        c1=$(sel 1 new 4 | median)
        w2=$(sel 2 new 5 | median)
        m2=$(awk -F'|' -v k="$k" -v a="$a" '$1 == k && $2 == a && $7 == "new" { print $6 }' \
            "$W/results" | sort -n | tail -1)
        printf '%-9s %-22s %14.1f %14.1f %14.2f %10.0f' "$k" "$a" "$(rate "${RECORDS[$k]}" "$c1")" \
            "$(rate "${RECORDS[$k]}" "$w2")" "${w2:-nan}" "$(echo "${m2:-0} / 1024" | bc -l)"
        if [ -n "$OLD" ]; then
            # The ratio within each round (old and new back to back), then its median.
            ratio=$(awk -F'|' -v k="$k" -v a="$a" '$1 == k && $2 == a && $3 == 1 {
                        t[$8, $7] = $4 } END { for (key in t) { split(key, p, SUBSEP)
                        if (p[2] == "new" && t[p[1], "old"] > 0 && t[key] > 0)
                            print t[p[1], "old"] / t[key] } }' "$W/results" | median)
            printf ' %14.1f %10.2fx' "$(rate "${RECORDS[$k]}" "$(sel 1 old 4 | median)")" "${ratio:-0}"
        fi
        echo
    done
done
if grep -q cachegrind "$W/results"; then
    echo
    echo "membus question on stream ${ARGS[stream]} (l1 32 KiB 8-way, llc 32 MiB 16-way):"
    for a in "memlens trace + membus" "cachegrind --cache-sim=yes"; do
        printf '  %-28s %8.2f s wall (median)\n' "$a" \
            "$(awk -F'|' -v a="$a" '$2 == a { print $5 }' "$W/results" | median)"
    done
fi

# Sampled reuse: the largest miss-ratio error against the exact curve, lines and pages.
echo
for k in $SEL; do
    [[ " ${ANALYSES[*]} " == *" reuse --sample 0.01 "* ]] || break
    "$ML" analyze -q --json "${TRACE[$k]}" reuse >"$W/exact.json"
    "$ML" analyze -q --json --sample 0.01 "${TRACE[$k]}" reuse >"$W/sampled.json"
    python3 - "$k" "$W/exact.json" "$W/sampled.json" <<'PY'
import json, sys
k, e, sj = sys.argv[1], json.load(open(sys.argv[2]))['mrc'], json.load(open(sys.argv[3]))
s, rates = sj['mrc'], {'line': sj['rate'], 'page': sj['page_rate']}
for g in ('line', 'page'):
    ex = {r['cache_entries']: r['miss_ratio'] for r in e if r['granularity'] == g}
    sa = {r['cache_entries']: (r['miss_ratio'], r['error_bound']) for r in s if r['granularity'] == g}
    err = max((abs(ex[c] - sa[c][0]) for c in ex if c in sa), default=0)
    worst = max((c for c in ex if c in sa), key=lambda c: abs(ex[c] - sa[c][0]), default=0)
    bound = max((sa[c][1] for c in sa if c >= 10000), default=0)
    print(f'{k}: sampled reuse (--sample 0.01, final rate {rates[g]:g}), {g}s: max miss-ratio '
          f'error {err:.4f} over all cache sizes (at {worst} entries); stated bound at >= '
          f'10000 entries {bound:.4f}')
PY
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
