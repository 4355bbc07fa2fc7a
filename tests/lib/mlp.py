"""Independent reader of memlens region profiles (.mlp) for tests: a second implementation of
src/format/profile.c's layout, used to check figures without going through memlens report."""
import glob
import os
import struct

FACTS = ['loads', 'stores', 'rd_heap', 'rd_global', 'rd_stack', 'wr_heap', 'wr_global', 'wr_stack',
         'i_int', 'i_fp', 'i_vec', 'i_mem', 'i_branch', 'i_call', 'i_other', 'instr', 'incr']
NF = len(FACTS)
UNIT = struct.Struct('<6I%dQ' % NF)


class Profile:
    def __init__(self, path):
        d = open(path, 'rb').read()
        magic, ver, hsize, self.tsc_hz, self.start_ns, self.wall_ns, self.pid, self.ppid, \
            self.clock, self.flags, self.sample = struct.unpack_from('<8sIIQQQIIIIQ', d, 0)
        assert magic == b'MLPROF\0\n' and (ver, hsize) in ((2, 64), (3, 80)), path
        self.version = ver
        # version 3: start token (as in the file name) and MPI rank (flags bit 1: rank known)
        self.token, rank, self.nranks = struct.unpack_from('<QII', d, 64) if ver >= 3 else (0, 0, 0)
        self.rank = rank if self.flags & 2 else None
        self.path = path
        strtab, regions, regsets, self.units, self.calls, self.threads = b'', (), (), [], [], []
        meta = ()
        off, end = hsize, False
        self.exact = {}
        self.events = []   # event names (MEMLENS_EVENTS)
        self.ev = {}       # thread index -> [region][event] sums over measured executions
        self.calib = None  # (increment, timer pair) cost in thousandths of a tick
        self.entries = ()
        self.timeline = None
        self.exited = None  # (thread index, threads it sums): exited threads folded together
        self.uinfo = []     # (unit, kind, name offset): 1 not-seen ticks, 2 alloc bytes, 3 frees
        self.timed = {}     # thread index -> (timed executions[region], raw ticks[region])
        self.rflags = None  # per region: bit 0 computed goto (no plain copy)
        self.inlined = []   # (share unit, host unit): inlined code's share of the host's facts
        while off < len(d):
            t, _, ln = struct.unpack_from('<IIQ', d, off)
            p = off + 16
            if t == 0:
                end = True
                break
            if t == 1:
                strtab = d[p:p + ln]
            elif t == 2:
                meta = struct.unpack_from('<%dI' % (ln // 4), d, p)
            elif t == 3:
                regions = struct.unpack_from('<%dI' % (ln // 4), d, p)
            elif t == 4:
                regsets = struct.unpack_from('<%dI' % (ln // 4), d, p)
            elif t == 5:
                self.units = [UNIT.unpack_from(d, p + i * UNIT.size) for i in range(ln // UNIT.size)]
            elif t == 6:
                self.calls = [struct.unpack_from('<IIQ', d, p + i * 16) for i in range(ln // 16)]
            elif t == 7:
                tid, idx, nu, nr = struct.unpack_from('<IIQQ', d, p)
                counts = struct.unpack_from('<%dQ' % nu, d, p + 24)
                rs = struct.unpack_from('<%dQ' % (3 * nr), d, p + 24 + 8 * nu)
                self.threads.append({'tid': tid, 'index': idx, 'counts': counts,
                                     'entries': rs[0::3], 'ticks': rs[1::3],
                                     'measured': rs[2::3]})
            elif t == 13:
                self.entries = struct.unpack_from('<%dI' % (ln // 4), d, p)
            elif t == 9:
                tid, idx, nu, _ = struct.unpack_from('<IIQQ', d, p)
                ex = struct.unpack_from('<%dQ' % (nu * 6), d, p + 24)
                self.exact[idx] = [ex[i * 6:i * 6 + 6] for i in range(nu)]
            elif t == 11:
                ne, nt, nr = struct.unpack_from('<IIQ', d, p)
                q = p + 16
                self.events = [d[q + 32 * i:q + 32 * i + 32].split(b'\0')[0].decode()
                               for i in range(ne)]
                q += 32 * ne
                for _ in range(nt):
                    idx, _tid = struct.unpack_from('<II', d, q)
                    v = struct.unpack_from('<%dQ' % (nr * ne), d, q + 8)
                    self.ev[idx] = [v[r * ne:(r + 1) * ne] for r in range(nr)]
                    q += 8 + 8 * nr * ne
            elif t == 12:
                self.calib = struct.unpack_from('<QQ', d, p)
            elif t == 14:
                idx, _, nthr = struct.unpack_from('<IIQ', d, p)
                self.exited = (idx, nthr)
            elif t == 10:
                self.timeline = self._timeline(d, p, ln)
            elif t == 15:
                self.uinfo = [struct.unpack_from('<III', d, p + 16 * i) for i in range(ln // 16)]
            elif t == 16:
                idx, nr = struct.unpack_from('<II', d, p)
                v = struct.unpack_from('<%dQ' % (2 * nr), d, p + 8)
                self.timed[idx] = (v[:nr], v[nr:])
            elif t == 17:
                self.rflags = struct.unpack_from('<%dI' % (ln // 4), d, p)
            elif t == 18:
                self.inlined = [struct.unpack_from('<II', d, p + 8 * i) for i in range(ln // 8)]
            off = p + ln
        assert end, '%s: no end record' % path
        for th in self.threads:
            th['exited'] = self.exited[1] if self.exited and th['index'] == self.exited[0] else 0
        assert not self.exited or any(th['exited'] for th in self.threads), path
        self.s = lambda o: strtab[o:strtab.index(b'\0', o)].decode(errors='surrogateescape')
        self.regions = [self.s(o) for o in regions]
        self.meta = {self.s(meta[i]): self.s(meta[i + 1]) for i in range(0, len(meta) - 1, 2)}
        self.unit_regions = []
        for u in self.units:
            n = regsets[u[5]]
            self.unit_regions.append(set(regsets[u[5] + 1:u[5] + 1 + n]))

    @staticmethod
    def _timeline(d, p, ln):
        """TIMELINE: header, then per snapshot (tick, npoints) and npoints points."""
        interval, requested, nsnaps, flags, _ = struct.unpack_from('<QQQII', d, p)
        q, snaps = p + 32, []
        for _ in range(nsnaps):
            tick, npts = struct.unpack_from('<QQ', d, q)
            q += 16
            pts = {}
            for _ in range(npts):
                th, rg, e, tk, rd, wr, ins = struct.unpack_from('<II5Q', d, q)
                q += 48
                pts[(th, rg)] = {'entries': e, 'ticks': tk, 'bytes_read': rd,
                                 'bytes_written': wr, 'instructions': ins}
            snaps.append((tick, pts))
        assert q == p + ln, 'timeline length'
        return {'interval_ns': interval, 'requested_ns': requested, 'flags': flags,
                'snaps': snaps}

    def series(self, region, thread):
        """Timeline of one region on one thread index: [(tick, point or None)] per snapshot."""
        r = self.region_id(region)
        return [(tick, pts.get((thread, r))) for tick, pts in self.timeline['snaps']]

    def region_id(self, name):
        return self.regions.index(name)

    def totals(self, region, thread=None):
        """Sum of counts x facts over the units of a region, for one thread index or all."""
        r = self.region_id(region)
        tot = dict.fromkeys(FACTS, 0)
        for t in self.threads:
            if thread is not None and t['index'] != thread:
                continue
            for u, regs, c in zip(self.units, self.unit_regions, t['counts']):
                if c and r in regs:
                    for k, f in enumerate(FACTS):
                        tot[f] += c * u[6 + k]
        tot['bytes_read'] = tot['rd_heap'] + tot['rd_global'] + tot['rd_stack']
        tot['bytes_written'] = tot['wr_heap'] + tot['wr_global'] + tot['wr_stack']
        tot['entries'] = sum(t['entries'][r] for t in self.threads
                             if thread is None or t['index'] == thread)
        tot['measured'] = sum(t['measured'][r] for t in self.threads
                              if thread is None or t['index'] == thread)
        return tot

    def exact_totals(self, region, thread=None):
        """Exact-mode bytes of a region, classified by address at run time."""
        r = self.region_id(region)
        tot = dict.fromkeys(['rd_heap', 'rd_global', 'rd_stack', 'wr_heap', 'wr_global',
                             'wr_stack'], 0)
        for idx, units in self.exact.items():
            if thread is not None and idx != thread:
                continue
            for regs, ex in zip(self.unit_regions, units):
                if r in regs:
                    for k, key in enumerate(tot):
                        tot[key] += ex[k]
        tot['bytes_read'] = tot['rd_heap'] + tot['rd_global'] + tot['rd_stack']
        tot['bytes_written'] = tot['wr_heap'] + tot['wr_global'] + tot['wr_stack']
        return tot

    def ticks(self, region, thread=None):
        """Clock ticks of the measured executions of a region, one thread index or summed."""
        r = self.region_id(region)
        return sum(t['ticks'][r] for t in self.threads if thread is None or t['index'] == thread)

    def event_sums(self, region, thread=None):
        """Event name -> sum over the measured executions of a region, one thread index or all."""
        r = self.region_id(region)
        out = dict.fromkeys(self.events, 0)
        for idx, sums in self.ev.items():
            if thread is None or idx == thread:
                for name, v in zip(self.events, sums[r]):
                    out[name] += v
        return out

    def functions(self, thread=None):
        """Per (module, mangled function name): calls (sum of its entry units' counts, None when
        it has none), instructions, and bytes per class (rd_heap, ...), from all its units."""
        out = {}
        shares = {unit for unit, _ in self.inlined}
        for i, u in enumerate(self.units):
            if i in shares:
                continue
            c = sum(t['counts'][i] for t in self.threads if thread is None or t['index'] == thread)
            f = out.setdefault((u[1], self.s(u[2])), dict(dict.fromkeys(FACTS, 0), calls=None))
            if i in self.entries:
                f['calls'] = (f['calls'] or 0) + c
            for k, name in enumerate(FACTS):
                f[name] += c * u[6 + k]
        for f in out.values():
            f['bytes_read'] = f['rd_heap'] + f['rd_global'] + f['rd_stack']
            f['bytes_written'] = f['wr_heap'] + f['wr_global'] + f['wr_stack']
        return out

    def inlined_function(self, name, into, thread=None):
        """Figures of function name (mangled) where it was inlined into function into (mangled):
        each INLINED share's facts times its host unit's count, summed over modules."""
        tot = dict.fromkeys(FACTS, 0)
        hit = False
        for unit, host in self.inlined:
            if self.s(self.units[unit][2]) != name or self.s(self.units[host][2]) != into:
                continue
            hit = True
            c = sum(t['counts'][host] for t in self.threads
                    if thread is None or t['index'] == thread)
            for k, f in enumerate(FACTS):
                tot[f] += c * self.units[unit][6 + k]
        assert hit, 'no %r inlined into %r in %s' % (name, into, self.path)
        tot['bytes_read'] = tot['rd_heap'] + tot['rd_global'] + tot['rd_stack']
        tot['bytes_written'] = tot['wr_heap'] + tot['wr_global'] + tot['wr_stack']
        tot['calls'] = None
        return tot

    def function(self, name, thread=None):
        """Figures of the function whose mangled name is name or contains it, summed over modules."""
        hits = [f for (m, fn), f in self.functions(thread).items() if fn == name] or \
            [f for (m, fn), f in self.functions(thread).items() if name in fn]
        assert hits, 'no function %r in %s' % (name, self.path)
        tot = dict(hits[0])
        for f in hits[1:]:
            for k, v in f.items():
                if k == 'calls':
                    tot[k] = None if v is None and tot[k] is None else (tot[k] or 0) + (v or 0)
                else:
                    tot[k] += v
        return tot

    def per_thread(self, region):
        return [self.totals(region, t['index']) for t in self.threads]

    def library(self, region, thread=None):
        """Library work of a region: not-seen ticks per callee, bytes asked per allocator, calls
        per deallocator, and the raw ticks of the timed executions (the share's denominator)."""
        r = self.region_id(region)
        out = {'ticks': {}, 'alloc': {}, 'free': {}, 'timed_ticks': 0}
        for unit, kind, name in self.uinfo:
            if r not in self.unit_regions[unit]:
                continue
            c = sum(t['counts'][unit] for t in self.threads
                    if thread is None or t['index'] == thread)
            key = {1: 'ticks', 2: 'alloc', 3: 'free'}.get(kind)
            if key:
                out[key][self.s(name)] = out[key].get(self.s(name), 0) + c
        for idx, (_, ticks) in self.timed.items():
            if thread is None or idx == thread:
                out['timed_ticks'] += ticks[r]
        return out

    def not_seen(self, region):
        """Calls per callee from the region's code to code memlens did not count: callees whose
        entry units counted in the region (instrumented, reached dynamically) are left out."""
        r = self.region_id(region)
        entered = {self.s(self.units[u][2]) for u in self.entries
                   if r in self.unit_regions[u] and any(t['counts'][u] for t in self.threads)}
        out = {}
        for unit, callee, per in self.calls:
            if r in self.unit_regions[unit] and self.s(callee) not in entered:
                n = sum(t['counts'][unit] for t in self.threads) * per
                out[self.s(callee)] = out.get(self.s(callee), 0) + n
        return out


def load_dir(d):
    return [Profile(p) for p in sorted(glob.glob(os.path.join(d, '*.mlp')))]
