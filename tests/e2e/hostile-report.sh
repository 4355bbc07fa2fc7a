#!/bin/bash
# memlens report against what another user, a full disk or a closed pipe can do to it (issue 10,
# items 11 and 18): FIFOs named directly or lying in a profile directory are refused at once, not
# waited on; an empty directory named x.mlp, a directory it may not read and links in a profile
# directory each get one line with the reason; a huge file is judged by its header (peak memory
# far below its size); every write error (stdout, --csv, --json, --blocks, --top, --html, a
# closed pipe, a closed stdout) is reported with its errno text and exit 128; region names and
# file names holding escape sequences and control bytes are escaped in the table (\xHH) and
# kept exact in CSV and JSON. Runs the ASan build of the tool too.
. "$(dirname "$0")/region-lib.bash"
ml_setup

M=$MEMLENS_BUILD/bin/memlens
A=$MEMLENS_BUILD/asan/bin/memlens
[ -x "$A" ] || { echo "no $A: run make asan"; exit 1; }
ml_build hn 2 -pthread "$ML_KERNELS/hostile-regions.c" || ml_finish
D=$ML_TMP/d
mkdir -p "$D" && touch "$ML_TMP/stop"
for n in 1000 2000; do
    MEMLENS_OUT=$D "$ML_TMP/hn.ml" $n "$ML_TMP/stop" >/dev/null || ml_error "program run failed"
done
[ "$(ls "$D"/*.mlp | wc -l)" = 2 ] || ml_error "expected 2 profiles: $(ls "$D")"

# expect <what> <exit status> <stderr regex, one line per pattern...> -- <command...>
# Runs the command with a 20 s bound (a hang fails); stdout goes to $ML_TMP/out.
expect() {
    local what=$1 want=$2 rc=0 pats=() p n
    shift 2
    while [ "$1" != -- ]; do pats+=("$1"); shift; done
    shift
    timeout 20 "$@" >"$ML_TMP/out" 2>"$ML_TMP/err" || rc=$?
    [ $rc = 124 ] && { ml_error "$what: still running after 20 s"; return; }
    [ $rc = "$want" ] || ml_error "$what: exit $rc, want $want ($(head -c 300 "$ML_TMP/err"))"
    n=$(wc -l <"$ML_TMP/err")
    [ "$n" = ${#pats[@]} ] || ml_error "$what: $n lines on stderr, want ${#pats[@]}: $(cat "$ML_TMP/err")"
    for p in "${pats[@]}"; do
        grep -qE -- "$p" "$ML_TMP/err" || ml_error "$what: no line matching '$p' in: $(cat "$ML_TMP/err")"
    done
    grep -q "runtime error\|AddressSanitizer" "$ML_TMP/err" && ml_error "$what: sanitizer report"
}

# ---- item 11: FIFOs, directories, links, huge files ----
mkfifo "$ML_TMP/fifo.mlp"
for tool in "$M" "$A"; do
    expect "FIFO named" 128 "^memlens: cannot read profile '.*/fifo.mlp': not a regular file$" -- \
        "$tool" report "$ML_TMP/fifo.mlp"
done
mkfifo "$D/planted.mlp"
mkdir "$D/sub.mlp"
ln -s "$(ls "$D"/hn.*.mlp | head -n 1)" "$D/link.mlp"
expect "FIFO, directory and link in a profile directory" 128 \
    "^memlens: cannot read profile '.*/link.mlp': a symbolic link \(links inside a directory are not followed\)$" \
    "^memlens: cannot read profile '.*/planted.mlp': not a regular file$" \
    "^memlens: cannot read profile '.*/sub.mlp': not a regular file$" \
    "^memlens: 3 of 5 inputs could not be read; the report shows the others$" -- "$A" report --csv "$D"
[ "$(grep -c ",total," "$ML_TMP/out")" = 4 ] || ml_error "good profiles not reported: $(cat "$ML_TMP/out")"
rm -f "$D/planted.mlp" "$D/link.mlp" && rmdir "$D/sub.mlp"
expect "link named on the command line is followed" 0 -- "$M" report --csv "$(ls "$D"/hn.*.mlp | head -n 1)"
mkdir "$ML_TMP/empty.mlp"
expect "empty directory named x.mlp" 128 "^memlens: no profiles \(\*\.mlp\) in '.*/empty.mlp'$" -- \
    "$A" report "$ML_TMP/empty.mlp"

# 2 GiB (sparse): a bad header is refused after 64 bytes, a section longer than the file before
# its payload; peak memory stays within 32 MiB of reading a 4-byte file (the tool maps LLVM).
printf 'JUNK' >"$ML_TMP/small.mlp"
/usr/bin/time -f "%M" -o "$ML_TMP/rss" "$M" report "$ML_TMP/small.mlp" 2>/dev/null
base=$(tail -n 1 "$ML_TMP/rss")
big=$ML_TMP/big.mlp
truncate -s 2G "$big"
printf 'JUNK' | dd of="$big" conv=notrunc status=none
expect "2 GiB of junk" 128 "^memlens: cannot read profile '.*/big.mlp': not a memlens profile \(bad magic\)$" -- \
    /usr/bin/time -f "%M" -o "$ML_TMP/rss" "$M" report "$big"
[ "$(tail -n 1 "$ML_TMP/rss")" -lt $((base + 32768)) ] ||
    ml_error "2 GiB of junk: peak RSS $(tail -n 1 "$ML_TMP/rss") KiB (4 bytes: $base KiB)"
good=$(ls "$D"/hn.*.mlp | head -n 1)
hs=$(python3 -c 'import struct, sys; print(struct.unpack_from("<I", open(sys.argv[1], "rb").read(16), 12)[0])' "$good")
head -c "$hs" "$good" | dd of="$big" conv=notrunc status=none
python3 -c 'import struct, sys; sys.stdout.buffer.write(struct.pack("<IIQ", 1, 0, 1 << 40))' |
    dd of="$big" bs=1 seek="$hs" conv=notrunc status=none
expect "section longer than the file" 128 \
    "^memlens: cannot read profile '.*/big.mlp': section 'strtab' at offset $hs claims 1099511627776 bytes, only $((2147483648 - hs - 16)) remain$" -- \
    /usr/bin/time -f "%M" -o "$ML_TMP/rss" "$M" report "$big"
[ "$(tail -n 1 "$ML_TMP/rss")" -lt $((base + 32768)) ] ||
    ml_error "huge section: peak RSS $(tail -n 1 "$ML_TMP/rss") KiB (4 bytes: $base KiB)"
rm -f "$big"

# ---- item 18: reasons ----
# A directory the user may not read: as root, check it as nobody (root reads everything).
mkdir -m 700 "$ML_TMP/private"
cp "$good" "$ML_TMP/private/"
chmod 755 "$ML_TMP"
if [ "$(id -u)" = 0 ]; then
    if command -v setpriv >/dev/null && id nobody >/dev/null 2>&1; then
        expect "unreadable directory" 128 "^memlens: cannot read directory '.*/private': Permission denied$" -- \
            setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups "$M" report "$ML_TMP/private"
    else
        echo "unreadable directory: skipped (root without setpriv or user nobody)"
    fi
else
    chmod 000 "$ML_TMP/private"
    expect "unreadable directory" 128 "^memlens: cannot read directory '.*/private': Permission denied$" -- \
        "$M" report "$ML_TMP/private"
    chmod 700 "$ML_TMP/private"
fi

# Write errors: a full disk behind stdout and --html, a closed pipe, a closed stdout.
for fmt in "" --csv --json --blocks "--top 3" "--merge --json"; do
    # shellcheck disable=SC2086
    expect "report $fmt to a full disk" 128 "^memlens: cannot write the report: No space left on device$" -- \
        sh -c "exec \"\$@\" >/dev/full" sh "$A" report $fmt "$D"
done
expect "--html to a full disk" 128 "^memlens: cannot write '/dev/full': No space left on device$" -- \
    "$A" report --html /dev/full "$D"
expect "--html into a missing directory" 128 "^memlens: cannot write '.*/nodir/r.html': No such file or directory$" -- \
    "$M" report --html "$ML_TMP/nodir/r.html" "$D"
# SIGPIPE ignored (as under many job runners): EPIPE is an error with its reason. With SIGPIPE
# at its default the tool dies of it, silently, like cat or grep. The reader reads nothing and
# the report outgrows the pipe's buffer (64 KiB), so some write comes after the reader is gone.
many=()
for _ in $(seq 64); do many+=("$D"); done
expect "closed pipe, SIGPIPE ignored" 128 "^memlens: cannot write the report: Broken pipe$" -- \
    bash -c 'trap "" PIPE; "$@" | true; exit ${PIPESTATUS[0]}' sh "$M" report --json "${many[@]}"
expect "closed pipe, SIGPIPE default" 141 -- \
    bash -c '"$@" | true; exit ${PIPESTATUS[0]}' sh "$M" report --json "${many[@]}"
expect "closed stdout" 128 "^memlens: cannot write the report: Bad file descriptor$" -- \
    sh -c 'exec "$@" >&-' sh "$M" report "$D"
# A good --html is complete and replaces the file (never writes through a link planted there).
ln -s "$ML_TMP/target" "$ML_TMP/r.html"
expect "--html over a link" 0 -- "$M" report --html "$ML_TMP/r.html" "$D"
[ -L "$ML_TMP/r.html" ] && ml_error "--html wrote through a symbolic link"
[ -e "$ML_TMP/target" ] && ml_error "--html created the link's target"
tail -n 1 "$ML_TMP/r.html" | grep -q "</html>" || ml_error "--html page incomplete"
[ -z "$(ls "$ML_TMP"/r.html.* 2>/dev/null)" ] || ml_error "temporary file left: $(ls "$ML_TMP"/r.html.*)"

# Names: escaped for the terminal in the table, exact in CSV and JSON.
evil=$'\e[2J\e]0;pwned\ared'
c1=$'c1\xc2\x9b31m\xff\xfebad\r\n'
cp "$good" "$D/"$'\e[31mfile\a.mlp'
expect "table" 0 -- "$A" report "$D"
python3 - "$ML_TMP/out" <<'EOF' || ml_error "table escaping"
import sys
t = open(sys.argv[1], "rb").read()
bad = [b for b in t if b < 0x20 and b not in (0x0a,) or b == 0x7f]
assert not bad, "control bytes in the table: %r" % sorted(set(bad))
assert b"\xc2\x9b" not in t and b"\xff" not in t, "C1 control or bad UTF-8 in the table"
assert b"\\x1b[2J\\x1b]0;pwned\\x07red" in t, "escaped OSC name missing"
assert b"c1\\xc2\\x9b31m\\xff\\xfebad\\x0d\\x0a" in t, "escaped C1 name missing"
assert b"\\x1b[31mfile\\x07.mlp" in t, "escaped file name missing"
EOF
expect "csv" 0 -- "$M" report --csv "$D"
python3 - "$ML_TMP/out" "$evil" "$c1" <<'EOF' || ml_error "CSV names"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="", encoding="utf-8", errors="surrogateescape")))
names = {r["region"] for r in rows}
want = {sys.argv[2], sys.argv[3].encode("utf-8", "surrogateescape").decode("utf-8", "surrogateescape")}
assert want <= names, (names, want)
EOF
expect "json" 0 -- "$M" report --json "$D"
python3 - "$ML_TMP/out" "$evil" <<'EOF' || ml_error "JSON names"
import json, sys
d = json.load(open(sys.argv[1]))
names = {r["name"] for p in d["profiles"] for r in p["regions"]}
assert sys.argv[2] in names, names
assert "c1\u009b31m\ufffd\ufffdbad\r\n" in names, names
EOF
ml_finish
