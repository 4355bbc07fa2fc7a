#!/bin/bash
# Runs every memlens test: unit programs, end-to-end scripts and fuzz smoke runs.
# Each test exits 0 (pass), 77 (skipped: the host lacks what it needs) or else (fail).
# Ends with the line "N passed, N failed, N skipped".
cd "$(dirname "$0")/.." || exit 1
B=${B:-build}
export MEMLENS_BUILD=$PWD/$B
pass=0 fail=0 skip=0 failed=()
logdir=$B/test-logs
mkdir -p "$logdir"

run() { # name, command...
    local name=$1 rc
    shift
    local t0=$SECONDS
    mkdir -p "$(dirname "$logdir/$name.log")"
    # Signals ignored by whoever started the suite (nohup, a CI runner, a background job)
    # would be inherited by every program the tests signal: start each test with defaults.
    env --default-signal=HUP,INT,QUIT,TERM,PIPE "$@" >"$logdir/$name.log" 2>&1
    rc=$?
    case $rc in
    0) pass=$((pass + 1)); echo "PASS $name ($((SECONDS - t0))s)" ;;
    77) skip=$((skip + 1)); echo "SKIP $name: $(tail -n 1 "$logdir/$name.log")" ;;
    *) fail=$((fail + 1)); failed+=("$name"); echo "FAIL $name (exit $rc), log:"
       tail -n 30 "$logdir/$name.log" | sed 's/^/    /' ;;
    esac
}

for t in "$B"/tests/test-*; do
    [ -x "$t" ] && run "unit/$(basename "$t")" "$t"
done
for t in tests/e2e/*.sh; do
    [ -f "$t" ] && run "e2e/$(basename "$t" .sh)" bash "$t"
done
for t in "$B"/fuzz/fuzz-*; do
    [ -x "$t" ] || continue
    corpus=tests/fuzz/corpus/$(basename "$t")
    mkdir -p "$logdir/fuzz-work/$(basename "$t")"
    run "fuzz/$(basename "$t")" "$t" -max_total_time=${FUZZ_SECONDS:-20} \
        -artifact_prefix="$logdir/" "$logdir/fuzz-work/$(basename "$t")" $( [ -d "$corpus" ] && echo "$corpus")
done

[ ${#failed[@]} -gt 0 ] && echo "failed: ${failed[*]}"
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
