#!/usr/bin/env python3
"""Extracts a corpus of real x86-64 basic blocks from binaries on this machine for 'memlens bb'.

Disassembles each binary with objdump, cuts the instruction stream at every control-flow
instruction (jumps, calls, returns, syscalls, traps) and at function symbols, and keeps the
straight-line runs in between (the control-flow instruction itself is left out: the harness
times straight-line code). Runs with undecodable bytes or with instructions that fault in
user mode (data decoded as code) are dropped. Blocks made only of padding (nop, int3)
are dropped. The corpus is deduplicated and sampled deterministically (ordered by a hash of
the bytes), so the same binaries give the same corpus.

Output: CSV 'hex,source' on stdout, source being file:address of the block's first byte.
"""
import argparse
import hashlib
import os
import re
import subprocess
import sys

DEFAULT_FILES = [
    "/usr/bin/bash", "/usr/bin/ls", "/usr/bin/cp", "/usr/bin/tar", "/usr/bin/gzip",
    "/usr/bin/grep", "/usr/bin/sed", "/usr/bin/find", "/usr/bin/sort", "/usr/bin/make",
    "/usr/bin/objdump", "/usr/bin/perl", "/usr/bin/python3",
    "/usr/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libm.so.6",
    "/usr/lib/x86_64-linux-gnu/libz.so.1", "/usr/lib/x86_64-linux-gnu/libzstd.so.1",
    "/usr/lib/x86_64-linux-gnu/libstdc++.so.6", "/usr/lib/x86_64-linux-gnu/libcapstone.so.4",
    "/usr/lib/x86_64-linux-gnu/libcrypto.so.3", "/usr/lib/x86_64-linux-gnu/libsqlite3.so.0",
]

CONTROL = re.compile(
    r"^(j[a-z]*|call[a-z]*|ret[a-z]*|lret[a-z]*|iret[a-z]*|loop[a-z]*|syscall|sysenter|"
    r"sysexit|sysret[a-z]*|int|int1|int3|into|icebp|hlt|ud0|ud1|ud2|xbegin|xabort|xend|"
    r"ljmp|lcall|enqcmd[a-z]*|vmcall|vmmcall)$")
PREFIXES = {"bnd", "notrack", "rep", "repz", "repnz", "repe", "repne", "lock", "data16",
            "addr32", "cs", "ds", "es", "ss", "fs", "gs", "rex", "rex.w", "xacquire",
            "xrelease"}
# Faults at CPL 3 (IOPL 0): a run containing one is data decoded as code, never a real block.
PRIVILEGED = re.compile(
    r"^(in|out|ins[bwld]?|outs[bwld]?|cli|sti|clts|lgdt|lidt|lldt|ltr|lmsw|invd|wbinvd|"
    r"invlpg|rdmsr|wrmsr|swapgs|mov[lq]?\s+%[cd]r\d.*)$")
PADDING = re.compile(r"^(nop[a-z]*|int3|xchg\s+%ax,%ax|data16.*nop.*|cs nop.*)")


def mnemonic(text):
    """The operation of an objdump instruction text, past its prefixes."""
    for word in text.split():
        if word in PREFIXES or word.startswith("rex"):
            continue
        return word
    return ""


def blocks_of(path, max_bytes):
    """Yields (hex, address) for the straight-line runs of path's executable sections."""
    try:
        out = subprocess.run(["objdump", "-d", "--insn-width=16", "-M", "att", path],
                             capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"bb-corpus: skipping '{path}': {e}", file=sys.stderr)
        return
    cur, start, texts = [], None, []

    def flush():
        nonlocal cur, start, texts
        if cur and not all(PADDING.match(t) for t in texts):
            code = "".join(cur)
            if len(code) // 2 <= max_bytes:
                yield code, start
        cur, start, texts = [], None, []

    for line in out.splitlines():
        parts = line.split("\t")
        if len(parts) < 3 or not parts[0].strip().endswith(":"):
            # a symbol ('<f>:'), a section header, '...' or a byte continuation line
            yield from flush()
            continue
        addr = parts[0].strip()[:-1]
        raw = parts[1].split()
        text = parts[2].strip()
        if "(bad)" in text or not raw or PRIVILEGED.match(mnemonic(text)):
            cur = []
            yield from flush()
            continue
        if CONTROL.match(mnemonic(text)):
            yield from flush()
            continue
        if start is None:
            start = addr
        cur.append("".join(raw))
        texts.append(text)
    yield from flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=300, help="blocks to keep (default 300)")
    ap.add_argument("--max-bytes", type=int, default=1024, help="longest block kept")
    ap.add_argument("--salt", default="memlens-bb", help="changes the deterministic sample")
    ap.add_argument("files", nargs="*", help="binaries (default: a fixed list of system ones)")
    args = ap.parse_args()
    files = args.files or [f for f in DEFAULT_FILES if os.path.exists(f)]
    seen = {}
    for f in files:
        for code, addr in blocks_of(f, args.max_bytes):
            if code not in seen:
                seen[code] = f"{os.path.basename(f)}:0x{addr}"
    order = sorted(seen, key=lambda c: hashlib.sha1((args.salt + c).encode()).hexdigest())
    print(f"bb-corpus: {len(seen)} distinct blocks in {len(files)} files, keeping "
          f"{min(args.n, len(order))}", file=sys.stderr)
    print("hex,source")
    for code in order[:args.n]:
        print(f"{code},{seen[code]}")


if __name__ == "__main__":
    main()
