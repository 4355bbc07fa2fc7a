#!/bin/bash
# AArch64 portability: the region test kernels (tests/e2e/kernels) and the bench kernels
# (bench/kernels), built with memlens-cc for x86-64 and with memlens-cc --target=aarch64-linux-gnu
# at -O0, -O2 and -O3, run natively and under qemu-aarch64 with small sizes. Both must print the
# same thing and their profiles must agree, per region (and per thread), on heap and global bytes
# read and written, entries and calls not seen; where a closed form is known it is checked on
# both, and AArch64 exact mode (addresses classified at run time) must give the counted bytes.
. "$(dirname "$0")/region-lib.bash"

QEMU=$(command -v qemu-aarch64 || command -v qemu-aarch64-static) ||
    { echo "qemu-aarch64 not installed (Debian qemu-user): skipped"; exit 77; }
[ -r "$MEMLENS_BUILD/lib/aarch64-linux-gnu/libmemlens-rt.a" ] ||
    { echo "no AArch64 runtime: install libc6-dev-arm64-cross, binutils-aarch64-linux-gnu" \
        "and libgcc-12-dev-arm64-cross, then run make"; exit 77; }
ml_setup
# Dynamic AArch64 programs find their loader and libraries here.
export QEMU_LD_PREFIX=/usr/aarch64-linux-gnu
ARM_LEVELS=${ARM_LEVELS:-"0 2 3"}
BENCH=$ML_ROOT/bench/kernels

# arm_build <name> <level> [--c++] <sources and flags>...: $ML_TMP/<name>.x86 and <name>.arm.
# No FMA contraction, so that floating-point output is the same on both.
arm_build() {
    local name=$1 level=$2 cc=memlens-cc t
    shift 2
    if [ "$1" = --c++ ]; then
        cc=memlens-c++
        shift
    fi
    for t in x86 arm; do
        local target=()
        [ $t = arm ] && target=(--target=aarch64-linux-gnu)
        "$MEMLENS_BUILD/bin/$cc" "${target[@]}" -O"$level" -ffp-contract=off \
            -I"$ML_ROOT/include" "$@" -o "$ML_TMP/$name.$t" ||
            { ml_error "$name: $cc ${target[*]} -O$level failed"; return 1; }
    done
}

# arm_run <name> <arguments>...: profiles in $ML_TMP/<name>.{x86,arm}.d; same output required.
arm_run() {
    local name=$1 t
    shift
    for t in x86 arm; do
        local run=()
        [ $t = arm ] && run=("$QEMU")
        rm -rf "$ML_TMP/$name.$t.d"
        MEMLENS_OUT=$ML_TMP/$name.$t.d "${run[@]}" "$ML_TMP/$name.$t" "$@" \
            >"$ML_TMP/$name.$t.out" ||
            { ml_error "$name $*: $t run failed (exit $?)"; return 1; }
    done
    if ! cmp -s "$ML_TMP/$name.x86.out" "$ML_TMP/$name.arm.out"; then
        ml_error "$name $*: AArch64 output differs from x86-64"
        diff "$ML_TMP/$name.x86.out" "$ML_TMP/$name.arm.out" | head -n 10
        return 1
    fi
}

# arm_check <name> <level> [<python closed form, run for each profile p>] [arguments]...
# Compares the two profiles region by region; the closed form sees sys.argv[3:] as args.
arm_check() {
    local name=$1 level=$2 code=${3:-}
    shift 3
    ml_check "$name -O$level" '
x86, arm = profile(sys.argv[1]), profile(sys.argv[2])
args = [int(a) if a.isdigit() else a for a in sys.argv[3:]]
eq("regions", sorted(arm.regions), sorted(x86.regions))
KEYS = ("rd_heap", "wr_heap", "rd_global", "wr_global", "entries")
def view(p, r):
    tot = p.totals(r)
    per = sorted(tuple(t[k] for k in KEYS) for t in p.per_thread(r) if t["entries"])
    return {k: tot[k] for k in KEYS}, per, p.not_seen(r)
for r in x86.regions:
    if r in arm.regions:
        eq(r + " (totals, per thread, not seen) AArch64 vs x86-64", view(arm, r), view(x86, r))
def funcs(p):
    return {k[1]: tuple(f[k2] for k2 in ("rd_heap", "wr_heap", "rd_global", "wr_global", "calls"))
            for k, f in p.functions().items()}
eq("per function (heap and global bytes, calls) AArch64 vs x86-64", funcs(arm), funcs(x86))
for p in (x86, arm):
    TAG = "'"$name -O$level"' " + ("x86-64" if p is x86 else "AArch64")
'"$(sed 's/^/    /' <<<"$code")"'
    pass
' "$ML_TMP/$name.x86.d" "$ML_TMP/$name.arm.d" "$@"
}

# The AArch64 runtime, like the host's, exports only its entry points.
extra=$(aarch64-linux-gnu-nm -g --defined-only "$MEMLENS_BUILD/lib/aarch64-linux-gnu/libmemlens-rt.a" |
    awk 'NF == 3 { print $3 }' | grep -vE '^(__memlens_[A-Za-z0-9_]+|pthread_create)$')
[ -z "$extra" ] || ml_error "the AArch64 runtime exports internal symbols: $extra"
# The separate spelling -target selects the target as well; ELF e_machine 0xb7 is AArch64.
"$MEMLENS_BUILD/bin/memlens-cc" -target aarch64-linux-gnu -I"$ML_ROOT/include" \
    "$ML_KERNELS/break-forever.c" -o "$ML_TMP/spelling" ||
    ml_error "memlens-cc -target aarch64-linux-gnu failed"
[ "$(od -An -tx2 -j18 -N2 "$ML_TMP/spelling" 2>/dev/null | tr -d ' ')" = 00b7 ] ||
    ml_error "memlens-cc -target aarch64-linux-gnu did not make an AArch64 executable"
# A prefix without the AArch64 runtime refuses the link and says what to install.
mkdir -p "$ML_TMP/pfx/bin" "$ML_TMP/pfx/lib" "$ML_TMP/pfx/libexec/memlens" &&
    cp "$MEMLENS_BUILD/bin/memlens" "$ML_TMP/pfx/bin/" && ln -s memlens "$ML_TMP/pfx/bin/memlens-cc" &&
    cp "$MEMLENS_BUILD/libexec/memlens/memlens-llvm" "$ML_TMP/pfx/libexec/memlens/" &&
    cp -r "$MEMLENS_BUILD/include" "$ML_TMP/pfx/" &&
    cp "$MEMLENS_BUILD/lib/libmemlens-rt.a" "$ML_TMP/pfx/lib/" || exit 1
"$ML_TMP/pfx/bin/memlens-cc" --target=aarch64-linux-gnu "$ML_KERNELS/break-forever.c" \
    -o "$ML_TMP/none" 2>"$ML_TMP/none.err"
st=$?
want="memlens: no runtime for target 'aarch64-linux-gnu': install libc6-dev-arm64-cross and\
 binutils-aarch64-linux-gnu, then run make"
[ $st = 128 ] && [ "$(cat "$ML_TMP/none.err")" = "$want" ] ||
    ml_error "missing AArch64 runtime: exit $st, '$(cat "$ML_TMP/none.err")'"

for O in $ARM_LEVELS; do
    # Region test kernels: closed forms as in region-stream.sh and region-pthreads.sh; the others
    # are proven against closed forms on x86-64 by their region-*.sh and compared here.
    n=$((4001 + O))
    arm_build stream$O $O "$ML_KERNELS/stream.c" && arm_run stream$O $n 3 &&
        arm_check stream$O $O '
n = args[0]
for s, size in (("i8", 1), ("i32", 4), ("f64", 8), ("v4d", 32)):
    for loc in ("heap", "global"):
        b = n * size
        region(p, "sum_%s_%s" % (s, loc), entries=1, **{"rd_" + loc: b})
        region(p, "copy_%s_%s" % (s, loc), entries=1, **{"rd_" + loc: b, "wr_" + loc: b})
        region(p, "triad_%s_%s" % (s, loc), entries=1, **{"rd_" + loc: 2 * b, "wr_" + loc: b})
# The region clock (cntvct_el0 on AArch64) runs, and sequential regions fit in the run.
secs = sum(sum(t["ticks"]) for t in p.threads) / p.tsc_hz
ok("region time %.6f s within the run (%.6f s)" % (secs, p.wall_ns / 1e9),
   0 < secs <= p.wall_ns / 1e9)
' $n
    # Second method on AArch64: exact mode classifies every access by address at run time.
    if "$MEMLENS_BUILD/bin/memlens-cc" --ml-exact --target=aarch64-linux-gnu -O$O \
        -I"$ML_ROOT/include" "$ML_KERNELS/stream.c" -o "$ML_TMP/exact$O" &&
        MEMLENS_OUT=$ML_TMP/exact$O.d "$QEMU" "$ML_TMP/exact$O" $n 3 >/dev/null; then
        ml_check "stream --exact -O$O AArch64" '
p = profile(sys.argv[1])
for r in p.regions:
    t, e = p.totals(r), p.exact_totals(r)
    for k in ("rd_heap", "wr_heap", "rd_global", "wr_global"):
        eq("%s %s counted vs exact" % (r, k), t[k], e[k])
' "$ML_TMP/exact$O.d"
    else
        ml_error "stream --exact -O$O: AArch64 build or run failed"
    fi
    arm_build pth$O $O -pthread "$ML_KERNELS/pthreads.c" && arm_run pth$O 1000 &&
        arm_check pth$O $O '
chunks = [(k + 1) * args[0] for k in range(5)]
region(p, "pt_body", rd_heap=16 * sum(chunks), wr_heap=8 * sum(chunks), entries=5)
got = sorted((t["rd_heap"], t["wr_heap"], t["entries"]) for t in p.per_thread("pt_body"))
eq("pt_body per thread", got, sorted((16 * c, 8 * c, 1) for c in chunks))
# work(&c[0]) reads the fields of a chunk on the stack of main and writes its sum there
t = region(p, "pt_spawn", rd_heap=16 * chunks[0], wr_heap=8 * chunks[0], entries=1)
ok(TAG + " pt_spawn stack bytes (%d, %d) hold the chunk fields" % (t["rd_stack"], t["wr_stack"]),
   t["rd_stack"] >= 32 and t["wr_stack"] >= 8)
' 1000
    arm_build access$O $O "$ML_KERNELS/access.c" && arm_run access$O 20000 5 8000 3 &&
        arm_check access$O $O ''
    arm_build control$O $O "$ML_KERNELS/control.c" && arm_run control$O 200 5000 1234 3 100 7 &&
        arm_check control$O $O ''
    arm_build memops$O $O "$ML_KERNELS/memops.c" && arm_run memops$O 30001 1000 5 &&
        arm_check memops$O $O ''
    arm_build bf$O $O "$ML_KERNELS/break-forever.c" && arm_run bf$O 5000 1234 &&
        arm_check bf$O $O ''
    arm_build cxx$O $O --c++ "$ML_KERNELS/cxx.cpp" && arm_run cxx$O 20000 3141 &&
        arm_check cxx$O $O ''
    arm_build mf$O $O --ml-whole-program "$ML_KERNELS/multifile-main.c" \
        "$ML_KERNELS/multifile-lib.c" && arm_run mf$O 5000 3 &&
        arm_check mf$O $O '
n, reps = args
region(p, "calls", rd_heap=reps * (16 * n + 8 * n), wr_heap=reps * 8 * n, entries=1)
' 5000 3

    # --all: every function is a region, compared function by function.
    arm_build allp$O $O --ml-all -pthread "$ML_KERNELS/pthreads.c" && arm_run allp$O 1000 &&
        arm_check allp$O $O ''
    arm_build allc$O $O --ml-all "$ML_KERNELS/control.c" && arm_run allc$O 200 5000 1234 3 100 7 &&
        arm_check allc$O $O ''

    # Bench kernels (closed forms as in bench/regions.sh). omp.c needs libomp, which Debian
    # ships for the host only.
    for k in "stream|20000 3" "strided|40000 16 3" "chase|20000 30000" "spmv|2000 16 3" \
        "pagerank|2000 16 3" "parser|50000 2" "smallfn|10000 3"; do
        b=${k%%|*} args=${k#*|}
        arm_build b$b$O $O "$BENCH/$b.c" && arm_run b$b$O $args &&
            arm_check b$b$O $O '
def strided(n, s, reps):
    return sum((n - r % s + s - 1) // s for r in range(reps)) * 8
# rowptr[0] does not change: optimised, it is loaded once, before the loop and the region
o0 = int("'"$O"'") == 0
want = {
    "stream": lambda n, reps: 24 * n * reps,
    "strided": strided,
    "chase": lambda n, steps: 8 * steps,
    "spmv": lambda rows, k, reps: reps * ((rows + o0) * 8 + rows * k * 20 + rows * 8),
    "pagerank": lambda v, k, it: it * ((v + o0) * 8 + v * k * 12 + v * 28),
    "parser": lambda length, reps: 2 * length * reps,
    "smallfn": lambda n, reps: 32 * n * reps,
}[sys.argv[3]](*args[1:])
t = p.totals(sys.argv[3])
eq(sys.argv[3] + " heap+global bytes", t["rd_heap"] + t["rd_global"] + t["wr_heap"] + t["wr_global"],
   want)
' $b $args
    done
done
ml_finish
