# Shared helpers for the region e2e tests: build a kernel with memlens-cc and with plain clang-14,
# run both, require the same stdout, and check the profile against ground truth in python.
# Source it from tests/e2e/region-*.sh; then call ml_setup, ml_build, ml_run, ml_check, ml_finish.

ML_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
MEMLENS_BUILD=${MEMLENS_BUILD:-$ML_ROOT/build}
ML_KERNELS=$ML_ROOT/tests/e2e/kernels
# Optimisation levels every program is built at (override to debug one level).
ML_LEVELS=${ML_LEVELS:-"0 1 2 3"}
ml_failed=0

ml_error() {
    echo "FAIL: $*"
    ml_failed=1
}

# Checks the tools exist and makes the scratch directory $ML_TMP (removed at exit).
ml_setup() {
    local t
    for t in memlens-cc memlens-c++; do
        [ -x "$MEMLENS_BUILD/bin/$t" ] || { echo "no $MEMLENS_BUILD/bin/$t: run make"; exit 1; }
    done
    for t in clang-14 clang++-14 python3; do
        command -v $t >/dev/null || { echo "$t not installed: run scripts/deps.sh"; exit 77; }
    done
    ML_TMP=$(mktemp -d "${TMPDIR:-/tmp}/memlens-e2e.XXXXXX") || exit 1
    trap 'rm -rf "$ML_TMP"' EXIT
}

# ml_build <name> <level> [--c++] [--ml-<memlens option>...] <sources and compiler flags>...
# Builds $ML_TMP/<name>.ml with memlens-cc (or memlens-c++) and $ML_TMP/<name>.plain with
# clang-14 (or clang++-14) from the same sources and flags at -O<level>.
ml_build() {
    local name=$1 level=$2 cc=memlens-cc plain=clang-14 a
    local ml=() args=()
    shift 2
    if [ "${1:-}" = --c++ ]; then
        cc=memlens-c++ plain=clang++-14
        shift
    fi
    for a; do
        case $a in
        --ml-*) ml+=("$a") ;;
        *) args+=("$a") ;;
        esac
    done
    "$MEMLENS_BUILD/bin/$cc" "${ml[@]}" -O"$level" -g -I"$ML_ROOT/include" "${args[@]}" \
        -o "$ML_TMP/$name.ml" ||
        { ml_error "$name: $cc -O$level failed"; return 1; }
    $plain -O"$level" -g -I"$ML_ROOT/include" "${args[@]}" -o "$ML_TMP/$name.plain" ||
        { ml_error "$name: $plain -O$level failed"; return 1; }
}

# ml_run <name> <profile dir> <program arguments>...
# Runs the instrumented program with MEMLENS_OUT=<profile dir> (emptied first) and the plain one;
# both must succeed and print the same thing. Environment set by the caller passes through.
ml_run() {
    local name=$1 out=$2
    shift 2
    rm -rf "$out" && mkdir -p "$out" || return 1
    MEMLENS_OUT=$out "$ML_TMP/$name.ml" "$@" >"$ML_TMP/$name.ml.out" ||
        { ml_error "$name $*: instrumented run failed (exit $?)"; return 1; }
    "$ML_TMP/$name.plain" "$@" >"$ML_TMP/$name.plain.out" ||
        { ml_error "$name $*: plain run failed (exit $?)"; return 1; }
    if ! cmp -s "$ML_TMP/$name.ml.out" "$ML_TMP/$name.plain.out"; then
        ml_error "$name $*: output differs with memlens"
        diff "$ML_TMP/$name.plain.out" "$ML_TMP/$name.ml.out" | head -n 10
        return 1
    fi
}

# Python prelude for ml_check: the profile reader and helpers that record mismatches.
ML_PY_PRELUDE='
import sys
sys.path.insert(0, sys.argv.pop(1))
import mlp
FAILS = []
TAG = ""

def eq(what, got, want):
    if got != want:
        FAILS.append("%s %s: got %r, want %r" % (TAG, what, got, want))

def ok(what, cond):
    if not cond:
        FAILS.append("%s %s" % (TAG, what))

def profile(d):
    """The one profile in d (a single-process program writes exactly one)."""
    ps = mlp.load_dir(d)
    if len(ps) != 1:
        FAILS.append("%s: %d profiles in %s, want 1" % (TAG, len(ps), d))
        finish()
    return ps[0]

def region(p, name, rd_heap=0, wr_heap=0, rd_global=0, wr_global=0, thread=None, **more):
    """Heap and global bytes of a region (all four, unnamed ones must be 0) and any other
    totals given (entries, ...)."""
    if name not in p.regions:
        FAILS.append("%s: region %r not in profile (has %s)" % (TAG, name, p.regions))
        return None
    t = p.totals(name, thread)
    want = dict(rd_heap=rd_heap, wr_heap=wr_heap, rd_global=rd_global, wr_global=wr_global)
    want.update(more)
    who = name if thread is None else "%s[thread %d]" % (name, thread)
    for k, v in want.items():
        eq("%s %s" % (who, k), t[k], v)
    return t

def finish():
    for f in FAILS:
        print("FAIL:", f)
    sys.exit(1 if FAILS else 0)
'

# ml_check <tag> <python code> [arguments for sys.argv[1:]]...
# Runs the code after ML_PY_PRELUDE (TAG = <tag> prefixes messages), then finish().
ml_check() {
    local tag=$1 code=$2
    shift 2
    python3 -c "$ML_PY_PRELUDE
TAG = '$tag'
$code
finish()" "$ML_ROOT/tests/lib" "$@" || ml_error "$tag: profile check failed"
}

# Exit status of the test: 0 if every step passed.
ml_finish() {
    if [ $ml_failed = 0 ]; then
        echo "all checks passed"
        exit 0
    fi
    exit 1
}
