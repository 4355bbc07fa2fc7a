#!/usr/bin/env python3
"""Hostile blocks and hostile moments for 'memlens bb' (driven by hostile-bb*.sh).

  hostile-bb.py blocks <memlens> [--user nobody]   every block of tests/e2e/hostile-bb/
  hostile-bb.py signals <memlens> <rounds>          interrupts a batch at random moments

This process is a child subreaper (PR_SET_CHILD_SUBREAPER): every process memlens or its
sandbox leaves behind (a forked escapee, a sandbox that outlived memlens) is reparented here,
so 'no process was forked' and 'no child is left' are exact checks, whatever else the machine
runs. Each block writes its attack's target path into a fresh world-writable directory: the
path must still not exist afterwards (mkdir would have succeeded for any user).
"""
import csv
import ctypes
import io
import os
import pwd
import random
import re
import select
import signal
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
STATUSES = {"ok", "unclean", "crashed", "unsupported", "timeout"}

libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
    sys.exit("cannot become a child subreaper")


def children():
    """Pids whose parent is this process (any thread of it)."""
    pids = []
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/children") as f:
                pids += [int(p) for p in f.read().split()]
        except OSError:
            pass
    return pids


def reap_strays(bound=3.0):
    """Waits up to bound seconds for reparented processes to end; returns (ended, alive)."""
    ended, end = [], time.monotonic() + bound
    while True:
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG | 0x40000000)  # __WALL
            except ChildProcessError:
                pid = 0
            if not pid:
                break
            ended.append(pid)
        alive = children()
        if not alive or time.monotonic() > end:
            return ended, alive
        time.sleep(0.02)


def run(argv, user=None, signal_after=None, sig=None, bound=120.0):
    """Runs argv with pipes; returns rc, stdout, stderr, eof (pipes closed within the bound)."""
    pre = None
    if user:
        pw = pwd.getpwnam(user)

        def pre():
            os.setgroups([])
            os.setresgid(pw.pw_gid, pw.pw_gid, pw.pw_gid)
            os.setresuid(pw.pw_uid, pw.pw_uid, pw.pw_uid)
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, preexec_fn=pre)
    start = time.monotonic()
    out, err = b"", b""
    open_fds = {p.stdout.fileno(): "out", p.stderr.fileno(): "err"}
    sent = signal_after is None
    while open_fds:
        now = time.monotonic()
        if not sent and now - start >= signal_after:
            p.send_signal(sig)
            sent, start = True, now  # the bound now runs from the signal
        wait = (start + signal_after - now) if not sent else (start + bound - now)
        if sent and wait <= 0:
            break
        ready, _, _ = select.select(list(open_fds), [], [], max(0.0, min(wait, 0.5)))
        for fd in ready:
            data = os.read(fd, 65536)
            if not data:
                del open_fds[fd]
            elif open_fds[fd] == "out":
                out += data
            else:
                err += data
    eof = not open_fds
    if not eof:
        p.kill()
    rc = p.wait()
    return rc, out.decode(errors="replace"), err.decode(errors="replace"), eof


def bb_binary(ml):
    """The executable holding the bb harness: bin/memlens runs libexec/memlens/memlens-llvm for
    bb (docs/architecture.md); an ASan build is one binary with every command."""
    full = os.path.join(os.path.dirname(ml), "..", "libexec", "memlens", "memlens-llvm")
    return full if os.path.exists(full) else ml


def symbols(ml):
    nm = subprocess.run(["nm", ml], capture_output=True, text=True, check=True).stdout
    syms = {}
    for line in nm.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2].startswith("ml_bb_stub_"):
            syms[parts[2][len("ml_bb_stub_"):]] = int(parts[0], 16)
    return syms


def layout(ml):
    """Addresses of the harness in the sandbox, from sandbox.h and the binary's symbols."""
    src = open(os.path.join(ROOT, "src/bb/sandbox.h")).read()
    stub = int(re.search(r"#define ML_BB_STUB_ADDR\s+(0x[0-9a-f]+)", src).group(1), 16)

    def rel(name, default):
        m = re.search(r"#define %s\s+\(ML_BB_STUB_ADDR \+ (0x[0-9a-f]+)ull\)" % name, src)
        return stub + (int(m.group(1), 16) if m else default)
    ml = bb_binary(ml)
    syms = symbols(ml)
    start, end = syms["start"], syms["end"]
    dis = subprocess.run(["objdump", "-d", f"--start-address={start:#x}",
                          f"--stop-address={end:#x}", ml],
                         capture_output=True, text=True, check=True).stdout
    sys_at = [stub + int(m.group(1), 16) - start
              for m in re.finditer(r"^\s*([0-9a-f]+):\s.*\bsyscall\b", dis, re.M)]
    ctl, state = rel("ML_BB_CTL_ADDR", 0x10000), rel("ML_BB_STATE_ADDR", 0x40000)
    return {"STUB": stub, "CTL": ctl, "CTL8": ctl + 8, "STATE": state,
            "RES": state + 0x400,  # offsetof(struct ml_bb_state, res)
            "GADGET": stub + syms["gadget"] - start, "RUN": stub + syms["run"] - start,
            "syscalls": sys_at}


def path_stores(path, base):
    """Instructions that store path (NUL-terminated) at base, a register or an address."""
    data = path.encode() + b"\0"
    data += b"\0" * (-len(data) % 8)
    lines = []
    for i in range(0, len(data), 8):
        lines.append(f"movabs ${struct.unpack('<Q', data[i:i + 8])[0]:#x}, %rax")
        if base == "%rsi":
            lines.append(f"mov %rax, {i}(%rsi)")
        else:
            lines.append(f"mov ${base + i}, %edi")
            lines.append("mov %rax, (%rdi)")
    return lines


def blocks(lay, target_dir):
    """(name, options, expected statuses, detail, assembly text, target path) per block."""
    n = 0
    for fn in sorted(os.listdir(os.path.join(HERE, "hostile-bb"))):
        if not fn.endswith(".s"):
            continue
        text = open(os.path.join(HERE, "hostile-bb", fn)).read()
        meta = dict(re.findall(r"^# (expect|detail|options): (.*)$", text, re.M))
        body = [l.strip() for l in text.splitlines() if l.strip() and not l.startswith("#")]
        for at in (lay["syscalls"] if any("@SYSCALL@" in l for l in body) else [None]):
            n += 1
            target = os.path.join(target_dir, f"b{n}")
            asm = []
            for l in body:
                if l == "@PATH83@":
                    asm += path_stores(target, 83)
                elif l == "@MKDIRARGS@":
                    asm += path_stores(target, "%rsi")
                    asm += ["mov %rsi, %rdi", "mov $0777, %esi", "mov $83, %eax"]
                else:
                    for k, v in lay.items():
                        if k != "syscalls":
                            l = l.replace(f"@{k}@", f"{v:#x}")
                    if at is not None:
                        l = l.replace("@SYSCALL@", f"{at:#x}")
                    asm.append(l)
            name = fn[:-2] + (f"@{at:#x}" if at is not None else "")
            yield (name, meta.get("options", "").split(), meta["expect"].split(),
                   meta.get("detail"), "; ".join(asm), target)


def cmd_blocks(ml, user):
    lay = layout(ml)
    if not lay["syscalls"]:
        sys.exit("no syscall instruction found in the stub: objdump output changed?")
    target_dir = tempfile.mkdtemp(prefix="mlbb")
    os.chmod(target_dir, 0o1777)  # any uid the sandbox runs as could create the target
    failures = 0
    for name, opts, expect, detail, asm, target in blocks(lay, target_dir):
        argv = [ml, "bb", "--csv", "--reps", "4", "--min-agree", "2", "--attempts", "1"] + opts
        rc, out, err, eof = run(argv + [asm], user=user)
        ended, alive = reap_strays(1.0)
        problems = []
        row = {}
        try:
            row = next(csv.DictReader(io.StringIO(out)))
        except StopIteration:
            problems.append(f"no CSV row (exit {rc}): {err.strip()[-300:]}")
        if rc not in (0, 1):
            problems.append(f"exit status {rc}: {err.strip()[-300:]}")
        if row and row.get("status") not in expect:
            problems.append(f"status {row.get('status')!r} ({row.get('detail')}), "
                            f"expected {'/'.join(expect)}")
        if row and detail and detail not in row.get("detail", ""):
            problems.append(f"detail {row.get('detail')!r} lacks {detail!r}")
        if os.path.lexists(target):
            problems.append(f"ESCAPE: the block created {target}")
        if ended or alive:
            problems.append(f"ESCAPE: processes outside the sandbox: ended {ended}, alive {alive}")
        if not eof:
            problems.append("output pipes not closed")
        who = user or pwd.getpwuid(os.getuid()).pw_name
        if problems:
            failures += 1
            print(f"FAIL {name} ({who}): " + "; ".join(problems))
        else:
            print(f"ok   {name} ({who}): {row['status']}: {row['detail']}")
    os.system(f"rm -rf '{target_dir}'")
    return 1 if failures else 0


def cmd_signals(ml, rounds):
    """Interrupts batches at random moments: no child may outlive memlens, pipes must close."""
    work = tempfile.mkdtemp(prefix="mlbbsig")
    corpus = os.path.join(work, "corpus.csv")
    with open(corpus, "w") as f:
        f.write("hex\n")
        for i in range(4000):  # short blocks: a fork every few milliseconds
            f.write(["4801d8", "90", "0f0b", "488b00", "4883c001"][i % 5] + "\n")
    fast = ["--reps", "2", "--min-agree", "1", "--attempts", "1", "--no-trace", "--work", "2000"]
    sigs = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL]
    failures = 0
    seed = int(os.environ.get("ML_SEED", time.time()))
    rng = random.Random(seed)
    print(f"seed {seed} (ML_SEED)")
    for i in range(rounds):
        sig = rng.choice(sigs)
        after = rng.uniform(0.0, 0.5)
        out = os.path.join(work, f"out{i}.csv")
        rc, _, err, eof = run([ml, "bb"] + fast + ["-o", out, corpus], signal_after=after,
                              sig=sig, bound=10.0)
        ended, alive = reap_strays(3.0)
        problems = []
        if not eof:
            problems.append("stdout/stderr not closed 10 s after the signal")
        if alive:
            states = []
            for pid in alive:
                try:
                    states.append(open(f"/proc/{pid}/stat").read().split(")")[1].split()[0])
                except OSError:
                    states.append("?")
            problems.append(f"children left alive: {alive} (states {states})")
        if rc >= 0 and "memlens:" in err:
            problems.append(f"exit {rc}: {err.strip()[-200:]}")
        if problems:
            failures += 1
            print(f"FAIL round {i}: {signal.Signals(sig).name} after {after:.3f}s: "
                  + "; ".join(problems))
            for pid in alive:
                os.kill(pid, signal.SIGKILL)
            reap_strays(3.0)
    # an interrupted run leaves a resumable output: finish the last one, compare with the corpus
    out = os.path.join(work, f"out{rounds - 1}.csv")
    rc, _, err, eof = run([ml, "bb"] + fast + ["-o", out, corpus])
    if rc != 0:
        failures += 1
        print(f"FAIL: resuming after the interruption: exit {rc}: {err.strip()[-300:]}")
    else:
        rows = list(csv.DictReader(open(out)))
        want = [l.strip() for l in open(corpus)][1:]
        if [r["hex"] for r in rows] != want or any(r["status"] not in STATUSES for r in rows):
            failures += 1
            print(f"FAIL: {len(rows)} rows after resuming, expected {len(want)} in order")
    left = [f for f in os.listdir(work) if not re.fullmatch(r"corpus\.csv|out\d+\.csv", f)]
    if left:
        failures += 1
        print(f"FAIL: files left next to the outputs: {left}")
    print(f"{rounds} interruptions, {failures} failures")
    os.system(f"rm -rf '{work}'")
    return 1 if failures else 0


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    if sys.argv[1] == "blocks":
        user = sys.argv[4] if len(sys.argv) > 4 and sys.argv[3] == "--user" else None
        return cmd_blocks(sys.argv[2], user)
    if sys.argv[1] == "signals":
        return cmd_signals(sys.argv[2], int(sys.argv[3]))
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main())
