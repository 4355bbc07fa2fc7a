# Shared helpers for end-to-end tests: paths, a scratch directory, failure and profile checks.
ML_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
ML_BUILD=${MEMLENS_BUILD:-$ML_ROOT/build}
MEMLENS=$ML_BUILD/bin/memlens
MLCC=$ML_BUILD/bin/memlens-cc
MLCXX=$ML_BUILD/bin/memlens-c++
T=$(mktemp -d "${TMPDIR:-/tmp}/memlens-test.XXXXXX")
trap 'rm -rf "$T"' EXIT

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

skip() {
    echo "skipped: $*"
    exit 77
}

ml_require_cc() {
    [ -x "$MLCC" ] || fail "no memlens-cc at $MLCC (run make)"
    command -v clang-14 >/dev/null || skip "clang-14 is not installed"
}

# check_py DIR EXPR: EXPR is a python expression over P, the profiles in DIR (tests/lib/mlp.py).
check_py() {
    PYTHONPATH=$ML_ROOT/tests/lib python3 -c '
import sys, mlp
P = mlp.load_dir(sys.argv[1])
ok = eval(sys.argv[2])
if not ok:
    for p in P:
        print(p.path, {r: p.totals(r) for r in p.regions}, file=sys.stderr)
sys.exit(0 if ok else 1)' "$1" "$2" || fail "check failed on $1: $2"
}
