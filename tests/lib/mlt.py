"""Reads memory traces for tests through 'memlens analyze <trace> dump' (one record per line)."""
import collections
import os
import subprocess

Rec = collections.namedtuple('Rec', 'pid thread ns kind addr size weight site where what')

MEMLENS = os.path.join(os.environ.get('MEMLENS_BUILD', 'build'), 'bin', 'memlens')


def records(paths):
    """Every record of the traces, in the driver's order (threads merged by time)."""
    if isinstance(paths, str):
        paths = [paths]
    out = subprocess.run([MEMLENS, 'analyze', '-q'] + list(paths) + ['dump'], check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    recs = []
    for line in out.splitlines():
        f = line.split(' ', 9)
        recs.append(Rec(int(f[0]), int(f[1]), float(f[2]), f[3], int(f[4], 16), int(f[5]),
                        int(f[6]), None if f[7] == '-' else int(f[7]), f[8], f[9]))
    return recs


def summary_csv(paths):
    """The summary's CSV rows as dicts."""
    if isinstance(paths, str):
        paths = [paths]
    out = subprocess.run([MEMLENS, 'analyze', '-q', '--csv'] + list(paths) + ['summary'],
                         check=True, stdout=subprocess.PIPE, text=True).stdout
    lines = out.splitlines()
    head = lines[0].split(',')
    return [dict(zip(head, l.split(','))) for l in lines[1:]]


def ranges(text):
    """'range <name> <lo> <hi>' lines a test program printed: name -> (lo, hi)."""
    r = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) == 4 and f[0] == 'range':
            r[f[1]] = (int(f[2], 16), int(f[3], 16))
    return r


def phases(recs):
    """Splits each thread's records at its marks: list of (thread, mark name, records)."""
    cur, out = {}, []
    for r in recs:
        if r.kind == 'mark':
            cur[r.thread] = (r.what.split(':', 1)[1], [])
            out.append((r.thread,) + cur[r.thread])
        elif r.thread in cur:
            cur[r.thread][1].append(r)
    return out


def inside(r, lo, hi):
    return lo <= r.addr and r.addr + r.size <= hi


def count(recs, lo, hi):
    """Loads, stores, bytes read, bytes written and accesses per 4 KiB page within [lo, hi)."""
    loads = stores = rd = wr = 0
    pages = collections.Counter()
    for r in recs:
        if r.kind not in ('load', 'store', 'rmw') or not inside(r, lo, hi):
            continue
        if r.kind != 'store':
            loads += r.weight
            rd += r.size * r.weight
        if r.kind != 'load':
            stores += r.weight
            wr += r.size * r.weight
        pages[r.addr >> 12] += r.weight
    return loads, stores, rd, wr, pages
