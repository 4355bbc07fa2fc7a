# Helpers shared by the cc-*.sh tests (sourced, not a test itself): tool paths, a scratch directory, assertions.
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
MEMLENS_BUILD=${MEMLENS_BUILD:-$ROOT/build}
BIN=$MEMLENS_BUILD/bin
if ! command -v clang-14 >/dev/null || ! command -v clang++-14 >/dev/null; then
    echo "clang-14 is not installed"
    exit 77
fi
[ -x "$BIN/memlens-cc" ] || { echo "no memlens-cc in $BIN (run make)"; exit 1; }
W=$(mktemp -d "${TMPDIR:-/tmp}/memlens-cc-test.XXXXXX")
trap '[ -n "$KEEP" ] || rm -rf "$W"' EXIT
export TMPDIR=$W/tmp
mkdir -p "$TMPDIR"

fail() {
    echo "FAIL: $*"
    exit 1
}

# No temporary file of memlens cc may survive a command.
no_temps() {
    [ -z "$(ls -A "$TMPDIR")" ] || fail "temporary files left: $(ls "$TMPDIR")"
}
