# Shared helpers of the bb end-to-end tests (sourced, not run: no exit status of its own).
ML=${MEMLENS_BUILD:-$(dirname "$0")/../../build}/bin/memlens
[ -x "$ML" ] || { echo "memlens not built at $ML"; exit 1; }

# Skips (exit 77) when the sandbox cannot be traced on this host.
bb_require_ptrace() {
    local err
    err=$("$ML" bb 90 2>&1 >/dev/null)
    case $err in
    *"ptrace not permitted"*) echo "ptrace not permitted here: $err"; exit 77 ;;
    esac
}

fail() { echo "FAIL: $*"; exit 1; }

# Field of the one CSV row that 'memlens bb --csv' prints: bb_field <name> <csv text>
bb_field() {
    python3 -c '
import csv, io, sys
rows = list(csv.DictReader(io.StringIO(sys.argv[2])))
print(rows[0][sys.argv[1]])' "$1" "$2"
}
