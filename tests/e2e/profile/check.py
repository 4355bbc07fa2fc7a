#!/usr/bin/env python3
"""Checks a 'memlens profile -m stats' output of tests/e2e/profile/queue-prog.c against its rule.

usage: check.py <json> <spec>
spec: JSON with 'streams' (list of [t, n] or [t, n, k]: program thread t sent n events, k
times over), optional 'lost' (threads that found no slot: their streams may be missing, but
received + lost_events must add up), 'complete', 'ended', 'forks', 'threads', 'workers',
'blob' ("tag len fnv").
"""
import csv
import json
import sys


def expect(t, n, times=1):
    """Per kind (events, sum) of program thread t sending n events (queue-prog.c's rule),
    times times over."""
    ev, sm = {}, {}
    for i in range(n):
        k = 4 if i % 5 == 0 else 1 + i % 3
        ev[k] = ev.get(k, 0) + times
        sm[k] = (sm.get(k, 0) + times * (t << 32 | i)) % (1 << 64)
    return {k: (ev[k], sm[k]) for k in ev}


def main():
    js = json.load(open(sys.argv[1]))
    spec = json.loads(sys.argv[2])
    rows = list(csv.DictReader(open(sys.argv[1][:-5] + '.csv')))
    got = {}
    for r in rows:
        got.setdefault(int(r['thread']), {})[int(r['kind'])] = (int(r['events']), int(r['sum']))
    want = [expect(*s) for s in spec['streams']]
    errs = []
    if spec.get('lost'):
        # threads that found no slot: received ones must each be someone's whole stream
        pool = list(want)
        for th, d in got.items():
            if d in pool:
                pool.remove(d)
            else:
                errs.append('thread %d: unexpected stream %s' % (th, d))
        lost = sum(v[0] for d in pool for v in d.values())
        if js['lost_threads'] != spec['lost'] or js['lost_events'] != lost:
            errs.append('lost_threads %d (want %d), lost_events %d (want %d)' % (
                js['lost_threads'], spec['lost'], js['lost_events'], lost))
    elif sorted(map(sorted, [d.items() for d in got.values()])) != \
            sorted(map(sorted, [d.items() for d in want])):
        errs.append('per-thread counts differ:\n got  %s\n want %s' % (
            sorted(got.values(), key=str), sorted(want, key=str)))
    total = sum(v[0] for d in got.values() for v in d.values())
    if js['events'] != total:
        errs.append('json events %d, csv total %d' % (js['events'], total))
    for key in ('complete', 'ended', 'forks', 'threads', 'workers'):
        if key in spec and js[key] != spec[key]:
            errs.append('%s: %r, want %r' % (key, js[key], spec[key]))
    if 'blob' in spec:
        tag, length, fnv = map(int, spec['blob'].split())
        b = js['data']['blobs']
        if len(b) != 1 or (b[0]['tag'], b[0]['bytes'], b[0]['fnv1a']) != (tag, length, fnv):
            errs.append('blobs %s, want %s' % (b, spec['blob']))
    if js['corrupt_chunks']:
        errs.append('corrupt chunks: %d' % js['corrupt_chunks'])
    if errs:
        print('%s:\n  %s' % (sys.argv[1], '\n  '.join(errs)), file=sys.stderr)
        sys.exit(1)


main()
