#!/usr/bin/env python3
"""Ground truth for --trace=asm: counts from Valgrind lackey and from memlens trace dumps.

lackey.py lackey <log> <binary> <file.s>...   accesses of the program's own functions (those the
                                               assembly files define) in a lackey --trace-mem=yes log
lackey.py dump <dump.txt>                     accesses in 'memlens analyze <trace> dump' output
Both print JSON: loads, stores, modifies (read-modify-write), and per-page counts in each area
(stack, or everything else) as a sorted list of counts, since the two runs place memory apart.
"""
import json
import re
import subprocess
import sys

PAGE = 4096


def functions(sfiles):
    names = set()
    for s in sfiles:
        for line in open(s):
            m = re.match(r'\s*\.type\s+([^,\s]+)\s*,\s*[@%]function', line)
            if m:
                names.add(m.group(1).strip('"'))
    return names


def ranges(binary, names):
    out = subprocess.run(['nm', '-S', '--defined-only', binary], capture_output=True, text=True,
                         check=True).stdout
    r = []
    for line in out.splitlines():
        f = line.split()
        if len(f) == 4 and f[3] in names and f[2] in 'tTwW':
            start = int(f[0], 16)
            r.append((start, start + int(f[1], 16)))
    return sorted(r)


def result(loads, stores, modifies, pages, stack):
    return {'loads': loads, 'stores': stores, 'modifies': modifies,
            'pages': sorted(pages.values()), 'stack_pages': sorted(stack.values())}


def is_stack(addr):
    # the main stack: near the top of the address space natively, below 0x2000000000 in valgrind
    return addr >= 0x7ff000000000 or 0x1ff0000000 <= addr < 0x2000000000


def lackey(log, binary, sfiles):
    r = ranges(binary, functions(sfiles))
    own = False
    n = {'L': 0, 'S': 0, 'M': 0}
    pages, stack = {}, {}
    for line in open(log):
        if line.startswith('I '):
            a = int(line[3:].split(',')[0], 16)
            own = any(lo <= a < hi for lo, hi in r)
        elif own and len(line) > 3 and line[0] == ' ' and line[1] in 'LSM':
            a = int(line[3:].split(',')[0], 16)
            n[line[1]] += 1
            d = stack if is_stack(a) else pages
            d[a // PAGE] = d.get(a // PAGE, 0) + 1
    return result(n['L'], n['S'], n['M'], pages, stack)


def dump(path):
    n = {'load': 0, 'store': 0, 'rmw': 0}
    pages, stack = {}, {}
    for line in open(path):
        f = line.split()
        if len(f) < 7 or f[3] not in n:
            continue
        a, w = int(f[4], 16), int(f[6])
        n[f[3]] += w
        d = stack if is_stack(a) else pages
        d[a // PAGE] = d.get(a // PAGE, 0) + w
    return result(n['load'], n['store'], n['rmw'], pages, stack)


if __name__ == '__main__':
    if sys.argv[1] == 'lackey':
        print(json.dumps(lackey(sys.argv[2], sys.argv[3], sys.argv[4:])))
    else:
        print(json.dumps(dump(sys.argv[2])))
