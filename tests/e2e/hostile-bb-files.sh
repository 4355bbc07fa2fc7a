#!/bin/bash
# memlens bb and the files it is pointed at: every write error is reported with its errno text
# and a non-zero exit (stdout on /dev/full, one block and a batch; an output file over
# RLIMIT_FSIZE); an endless or non-regular output or input (/dev/full, /dev/zero, a FIFO, a
# pipe) is refused with one line, fast and in bounded memory; a line without end costs bounded
# memory and becomes a row; a symlinked output is refused and its target untouched; the
# temporary file of the end-of-batch pass never follows a planted link; outputs are 0600.
. "$(dirname "$0")/bb-lib.bash"
bb_require_ptrace
ML=$(cd "$(dirname "$ML")" && pwd)/$(basename "$ML")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
fast="--reps 2 --min-agree 1 --attempts 1 --no-trace"
printf 'hex\n4801d8\n90\nzz\n' >in.csv

# expect_refusal <what> <stderr substring> command...: exit 128 within 30 s, one line
expect_refusal() {
    local what=$1 sub=$2 rc
    shift 2
    (ulimit -v 1000000; timeout 30 "$@") >out.txt 2>err.txt </dev/null
    rc=$?
    [ "$rc" = 128 ] || fail "$what: exit $rc, expected 128 ($(head -c 300 err.txt))"
    grep -q -- "$sub" err.txt || fail "$what: stderr lacks '$sub': $(head -c 300 err.txt)"
    [ "$(wc -l <err.txt)" = 1 ] || fail "$what: more than one line: $(head -c 300 err.txt)"
    echo "ok: $what: $(cat err.txt)"
}

expect_refusal "one block to a full stdout" "No space left on device" \
    sh -c "exec '$ML' bb $fast 90 >/dev/full"
expect_refusal "one CSV row to a full stdout" "No space left on device" \
    sh -c "exec '$ML' bb $fast --csv 90 >/dev/full"
expect_refusal "a batch to a full stdout" "No space left on device" \
    sh -c "exec '$ML' bb $fast in.csv >/dev/full"
# a regular output that cannot grow past 48 KiB (SIGXFSZ ignored: writes fail with EFBIG);
# 150 rows of 200-byte blocks need 60 KiB
python3 -c 'print("hex"); [print("90" * 199 + "%02x" % (0x50 + i % 8)) for i in range(150)]' >many.csv
expect_refusal "an output over RLIMIT_FSIZE" "cannot write 'limited.csv': File too large" \
    sh -c "trap '' XFSZ; exec prlimit --fsize=49152 '$ML' bb $fast -o limited.csv many.csv"

expect_refusal "-o /dev/full" "is not a regular file" "$ML" bb $fast -o /dev/full in.csv
expect_refusal "-o /dev/zero" "is not a regular file" "$ML" bb $fast -o /dev/zero in.csv
mkfifo fifo
expect_refusal "-o a FIFO" "is not a regular file" "$ML" bb $fast -o fifo in.csv
expect_refusal "a FIFO as input" "is not a regular file" "$ML" bb $fast fifo
expect_refusal "/dev/zero as input" "is not a regular file" "$ML" bb $fast /dev/zero
expect_refusal "a pipe as input" "is not a regular file" sh -c "echo 90 | exec '$ML' bb $fast /dev/stdin"

# a line without end (512 MiB of NUL bytes, no newline) in 400 MB of address space: one row
truncate -s 512M endless.csv
(ulimit -v 400000; timeout 120 "$ML" bb $fast endless.csv) >rows.csv 2>err.txt ||
    fail "endless line: exit $?: $(head -c 300 err.txt)"
grep -q ',unsupported,line 1 longer than 16383 bytes,' rows.csv || fail "endless line: $(cat rows.csv)"
rm -f endless.csv

# outputs: mode 0600, no symlink followed, no temporary file left
"$ML" bb $fast -o out.csv in.csv 2>err.txt || fail "batch: $(cat err.txt)"
[ "$(stat -c %a out.csv)" = 600 ] || fail "output mode $(stat -c %a out.csv)"
echo secret >victim
ln -s victim link.csv
expect_refusal "a symlinked output" "is a symbolic link" "$ML" bb $fast -o link.csv in.csv
[ "$(cat victim)" = secret ] || fail "the symlink's target was written"
# the end-of-batch pass writes a temporary file next to the output: planted links at the
# names it might use (the old fixed name included) are never followed
ln -s victim new.csv.tmp
"$ML" bb $fast -o new.csv in.csv 2>err.txt || fail "batch with a planted link: $(cat err.txt)"
[ "$(cat victim)" = secret ] || fail "the planted link's target was written"
[ -L new.csv.tmp ] || fail "the planted link was replaced"
left=$(ls | grep -v -x -e in.csv -e many.csv -e fifo -e victim -e link.csv -e new.csv.tmp \
    -e out.csv -e new.csv -e out.txt -e err.txt -e rows.csv -e limited.csv)
[ -z "$left" ] || fail "files left behind: $left"
echo "write errors reported, endless and special files refused, links not followed"
