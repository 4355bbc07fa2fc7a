#!/bin/bash
# memlens report end to end: profiles written by an independent Python encoder of the .mlp
# format, figures recomputed in Python and compared with --csv; JSON validity; bad inputs.
set -u
B=${MEMLENS_BUILD:-$(cd "$(dirname "$0")/../.." && pwd)/build}
ML=$B/bin/memlens
[ -x "$ML" ] || { echo "no memlens at $ML: run make first"; exit 1; }
command -v python3 >/dev/null || { echo "skipped: python3 is not installed"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

python3 - "$ML" "$tmp" <<'EOF' || exit 1
import csv, io, json, random, struct, subprocess, sys

ml, tmp = sys.argv[1], sys.argv[2]
NF = 17  # enum ml_fact
LOADS, STORES, RDH, RDG, RDS, WRH, WRG, WRS, INT, FP, VEC, MEM, BR, CALL, OTHER, INSTR, INCR = range(NF)

def profile(seed, pid, nthreads):
    rnd = random.Random(seed)
    strs = bytearray(b"\0")
    def s(x):
        off = len(strs); strs.extend(x.encode() + b"\0"); return off
    meta = [s("program"), s("/bin/app"), s("cmdline"), s("app, \"x\""), s("hostname"), s("h")]
    names = ["main-loop", "kernel", "omp,par", "never"]
    regions = [s(n) for n in names]
    sets = [[0], [0, 1], [2], [], [1]]
    words, setoff = [], []
    for st in sets:
        setoff.append(len(words)); words += [len(st)] + st
    units = []
    for i in range(12):
        kind = 2 if i % 5 == 4 else 1
        facts = [0] * NF
        if kind == 2:
            facts[rnd.choice([RDH, RDG, RDS])] = 1
            facts[rnd.choice([WRH, WRG, WRS])] = 1
        else:
            for f in range(NF):
                facts[f] = rnd.randrange(0, 9)
        units.append((kind, i % len(sets), facts))
    calls = [(u, s(rnd.choice(["memcpy", "sqrt", "exp"])), rnd.randrange(1, 4)) for u in range(0, 12, 3)]
    threads = []
    for t in range(nthreads):
        counts = [rnd.randrange(0, 10**9) if rnd.random() < 0.8 else 0 for _ in units]
        worker = t == nthreads - 1 and t > 0
        rst = []
        for r in range(len(names)):
            if worker or r == 3:
                rst.append((0, 0, 0))
            else:
                e = rnd.randrange(1, 100)
                rst.append((e, rnd.randrange(10**6, 10**10), rnd.randrange(1, e + 1)))
        if worker:  # runs only omp code, never enters
            counts = [c if sets[units[u][1]] == [2] else 0 for u, c in enumerate(counts)]
        threads.append((1000 + t, t, counts, rst))
    unames = [(s("f%d" % i), s("a.c")) for i in range(len(units))]
    hz = 2_500_000_000
    out = bytearray()
    out += b"MLPROF\0\n" + struct.pack("<IIQQQIIIIQ", 2, 64, hz, 0, 3 * 10**9, pid, 1, 1, 0, 7)
    def sec(t, payload):
        out.extend(struct.pack("<IIQ", t, 0, len(payload)) + payload)
    sec(1, bytes(strs))
    sec(2, struct.pack("<%dI" % len(meta), *meta))
    sec(3, struct.pack("<%dI" % len(regions), *regions))
    sec(4, struct.pack("<%dI" % len(words), *words))
    sec(5, b"".join(struct.pack("<6I%dQ" % NF, k, 0, *unames[i], i, setoff[st], *f)
                    for i, (k, st, f) in enumerate(units)))
    sec(6, b"".join(struct.pack("<IIQ", *c) for c in calls))
    for tid, idx, counts, rst in threads:
        sec(7, struct.pack("<IIQQ", tid, idx, len(units), len(names)) +
            struct.pack("<%dQ" % len(units), *counts) +
            b"".join(struct.pack("<QQQ", *r) for r in rst))
    calib = (rnd.randrange(100, 3000), rnd.randrange(5000, 50000))  # thousandths of a tick
    sec(12, struct.pack("<QQ", *calib))
    sec(0, b"")
    # Expected CSV figures, computed here from the definitions in docs/report.md.
    exp, more, extra = {}, {}, {}
    for r, name in enumerate(names):
        entered = [th for th in threads if th[3][r][0] > 0]
        maxt = max([th[3][r][1] for th in entered], default=None)
        tot = [0] * NF; tot_e = 0; tot_m = 0
        ncount = sum(1 for k, st, f in units if r in sets[st])
        for tid, idx, counts, rst in threads:
            v = [0] * NF
            for u, (k, st, f) in enumerate(units):
                if r in sets[st]:
                    for x in range(NF):
                        v[x] += counts[u] * f[x]
            active = rst[r][0] > 0 or any(counts[u] for u, (k, st, f) in enumerate(units) if r in sets[st])
            if not active:
                continue
            ticks = rst[r][1] if rst[r][0] else maxt
            exp[(name, str(idx))] = (rst[r][0], None if ticks is None else ticks / hz, v, 0 if rst[r][0] else 1, ncount)
            more[(name, str(idx))] = (rst[r][2], ticks, v, rst[r][0] > 0)
            tot = [a + b for a, b in zip(tot, v)]; tot_e += rst[r][0]; tot_m += rst[r][2]
        if any(k[0] == name for k in exp):
            exp[(name, "total")] = (tot_e, None if maxt is None else maxt / hz, tot, 0, ncount)
            more[(name, "total")] = (tot_m, maxt, tot, False)
            # Extra columns (docs/report.md): scale, estimates, CF, calibrated time.
            cal_own = {}
            for key, (m, ticks, v, own) in more.items():
                if key[0] == name and own:
                    t = ticks - v[INCR] * calib[0] / 1000 - m * calib[1] / 1000
                    cal_own[key] = t if t > 0 else None
            best = max([c for c in cal_own.values() if c is not None], default=None)
            for key, (m, ticks, v, own) in list(more.items()):
                if key[0] != name:
                    continue
                e = exp[key][0]
                scale = (e / m if m else None) if own else (tot_e / tot_m if tot_m else None)
                mem = v[LOADS] + v[STORES]
                cf = 1.0 if not v[INCR] else (1 + 2 * v[INCR] / mem if mem else None)
                cal = cal_own[key] if own else best
                extra[key] = (m, scale, None if ticks is None or scale is None else ticks * scale / hz,
                              v, cf, None if ticks is None or cf is None else ticks / cf / hz,
                              None if cal is None else cal / hz)
    return bytes(out), exp, extra

cols = [INT, FP, VEC, MEM, BR, CALL, OTHER, INSTR, LOADS, STORES, RDH, RDG, RDS, WRH, WRG, WRS]
def near(got, want, what):
    if want is None:
        assert got == "", (what, got)
    else:
        assert abs(float(got) - want) <= 1e-6 + 1e-6 * abs(want), (what, got, want)

def check(path, exp, extra, pid):
    out = subprocess.run([ml, "report", "--csv", path], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    rows = list(csv.reader(io.StringIO(out.stdout)))
    assert rows[0][:7] == ["profile", "pid", "region", "thread", "tid", "executions", "seconds"], rows[0]
    got = {(r[2], r[3]): r for r in rows[1:]}
    assert set(got) == set(exp), (sorted(got), sorted(exp))
    assert rows[0][25:29] == ["time_borrowed", "counters", "increments", "measured"], rows[0]
    for key, (e, sec, v, borrowed, ncount) in exp.items():
        r = got[key]
        assert r[0] == path and r[1] == str(pid), r
        assert int(r[5]) == e, (key, r[5], e)
        assert [int(x) for x in r[7:23]] == [v[c] for c in cols], (key, r)
        assert int(r[25]) == borrowed, (key, r)
        assert int(r[26]) == ncount and int(r[27]) == v[NF - 1], (key, r)
        if sec is None:
            assert r[6] == "" and r[23] == "", r
        else:
            assert abs(float(r[6]) - sec) <= 1e-9 * max(1, sec), (key, r[6], sec)
            rd = (v[RDH] + v[RDG] + v[RDS]) / sec / 1e9
            assert abs(float(r[23]) - rd) <= 1e-6 + 1e-6 * rd, (key, r[23], rd)
        m, scale, est_sec, v, cf, cf_sec, cal_sec = extra[key]
        assert int(r[28]) == m, (key, r[28], m)
        near(r[29], scale, key)
        near(r[30], est_sec, key)
        rd, wr = v[RDH] + v[RDG] + v[RDS], v[WRH] + v[WRG] + v[WRS]
        ests = [v[INSTR], v[LOADS], v[STORES], rd, wr]
        for col, x in zip(r[31:36], ests):
            if scale is None:
                assert col == "", (key, r)
            else:
                assert abs(int(col) - x * scale) <= 1 + 1e-12 * x * scale, (key, col, x * scale)
        near(r[36], cf, key)
        near(r[37], cf_sec, key)
        near(r[38], cal_sec, key)
        near(r[39], None if not cf_sec else rd / cf_sec / 1e9, key)
        near(r[42], None if not cal_sec else wr / cal_sec / 1e9, key)
        # no not-seen calls, allocations, frees or computed goto; no events
        lib = [r[rows[0].index(c)] for c in ("alloc_bytes", "frees", "computed_goto", "events")]
        assert lib == ["0", "0", "0", ""], (key, lib)
    return len(exp)

n = 0
for i, (pid, nth) in enumerate([(111, 1), (222, 3)]):
    data, exp, extra = profile(i, pid, nth)
    path = "%s/dir/p%d.mlp" % (tmp, i)
    import os; os.makedirs(tmp + "/dir", exist_ok=True)
    open(path, "wb").write(data)
    n += check(path, exp, extra, pid)
    if i == 1:
        open(tmp + "/good.mlp", "wb").write(data)
# JSON of the whole directory must parse and hold both processes.
out = subprocess.run([ml, "report", "--json", tmp + "/dir"], capture_output=True, text=True)
assert out.returncode == 0, out.stderr
d = json.loads(out.stdout)
assert [p["pid"] for p in d["profiles"]] == [111, 222]
assert d["profiles"][1]["meta"]["cmdline"] == "app, \"x\""
print("csv rows checked:", n)
EOF

# JSON passes an independent validator too.
"$ML" report --json "$tmp/dir" | python3 -m json.tool >/dev/null || fail "invalid JSON"

# The table names both processes, their regions and the worker's borrowed time.
out=$("$ML" report "$tmp/dir") || fail "table exit $?"
for s in "pid 111" "pid 222" "main-loop" "kernel" "omp,par" "not executed: never" "(...)" \
    "note: sampled, 1 in 7" "est. time" "time/CF"; do
    grep -qF -- "$s" <<<"$out" || fail "table lacks '$s'"
done

# --blocks: header plus one row per unit and profile.
n=$("$ML" report --blocks "$tmp/dir" | wc -l)
[ "$n" -eq 25 ] || fail "--blocks printed $n lines, expected 25"

# Bad profiles: one line each, good ones still reported, exit 128.
head -c 300 "$tmp/good.mlp" >"$tmp/dir/trunc.mlp"
printf 'not a profile at all, not even close to 64 bytes of header.......' >"$tmp/dir/junk.mlp"
"$ML" report --csv "$tmp/dir" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 128 ] || fail "exit $rc with bad profiles, expected 128"
grep -q "^memlens: cannot read profile '$tmp/dir/trunc.mlp': " "$tmp/err" || fail "no truncation message: $(cat "$tmp/err")"
grep -q "^memlens: cannot read profile '$tmp/dir/junk.mlp': not a memlens profile (bad magic)$" "$tmp/err" ||
    fail "no bad magic message: $(cat "$tmp/err")"
[ "$(wc -l <"$tmp/err")" -eq 3 ] || fail "expected 2 error lines and a summary: $(cat "$tmp/err")"
grep -q ",111," "$tmp/out" && grep -q ",222," "$tmp/out" || fail "good profiles not reported"

"$ML" report "$tmp/dir/trunc.mlp" >/dev/null 2>"$tmp/err"
[ $? -eq 128 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "single bad profile: $(cat "$tmp/err")"
"$ML" report "$tmp/missing.mlp" 2>&1 | grep -qx "memlens: cannot read profile '$tmp/missing.mlp': No such file or directory" ||
    fail "missing file message"
(cd "$tmp" && "$ML" report >/dev/null 2>"$tmp/err"; [ $? -eq 128 ]) || fail "no memlens-out: exit"
grep -q "^memlens: cannot open 'memlens-out'" "$tmp/err" || fail "no memlens-out: $(cat "$tmp/err")"
"$ML" report --region nosuch "$tmp/good.mlp" >/dev/null 2>&1
[ $? -eq 128 ] || fail "unknown region accepted"
"$ML" report --bogus "$tmp/good.mlp" >/dev/null 2>&1
[ $? -eq 129 ] || fail "unknown option accepted"
"$ML" report --csv --json "$tmp/good.mlp" >/dev/null 2>&1
[ $? -eq 129 ] || fail "--csv --json accepted"

# --region and --totals: exactly the total row of that region.
n=$("$ML" report --csv --totals --region kernel "$tmp/good.mlp" | tail -n +2 | cut -d, -f3,4 | sort -u)
[ "$n" = "kernel,total" ] || fail "--totals --region gave '$n'"
echo "report e2e: ok"
