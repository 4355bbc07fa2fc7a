#!/usr/bin/env python3
"""Reads the queue records an instrumented module appends (llvm-dis text of `memlens instrument
--events=MODS`) and checks which kinds and fields they carry.

usage: value-ir.py value|dep|value+objects|dep+objects file.ll

value: load-value records (kind 4: the value in word 1, no address) and loads without a value
(vectors) only; dep: no value unit anywhere. The +objects modes are
for builds that add lifetime and pointsto: the value build then appends no store, and both must
carry stack and global object records (kinds 59, 60, 63) whose extra unit is a size, not a value.

Each record's word 0 is stored as `add i64 C, %site_base_shifted` at word index K of an append
(C = kind | extra units << 8 | aux << 10 | local site << 16, format/queue.h); a value unit is
words K+2 (the value) and K+3 (its type, 1..4); a length unit has 0 at K+3."""
import re
import sys

mode, path = sys.argv[1], sys.argv[2]
records, fn, defs, slots = [], 0, {}, {}
for line in open(path):
    if line.startswith("define "):  # value names are per function
        defs, slots, fn = {}, {}, fn + 1
    m = re.match(r"\s*(%[\w.]+) = (.*)", line)
    if m:
        defs[m.group(1)] = m.group(2)
    m = re.match(r"\s*store i64 (\S+), i64\* (%[\w.]+),.*!nontemporal", line)
    if not m:
        continue
    g = re.match(r"getelementptr i64, i64\* (%[\w.]+), i64 (\d+)", defs.get(m.group(2), ""))
    assert g, "queue store without a word index: " + line
    slot = (g.group(1), int(g.group(2)))
    slots[slot] = m.group(1)
    d = re.match(r"add i64 (\d+), %", defs.get(m.group(1), ""))
    if d:  # word 0; the unit after it is stored later in the same block
        c = int(d.group(1))
        records.append([c & 0xFF, (c >> 8) & 3, (c >> 10) & 63, slots, slot])

# the word after the extra unit's first (K+3): a value's type, 0 for a length
records = [(k, e, a, slots.get((s[0], s[1] + 3))) for k, e, a, slots, s in records]
kinds = {r[0] for r in records}
valued = [r for r in records if r[1] and r[2]]
assert records, "no queue records found"
objects = mode.endswith("+objects")
mode = mode.split("+")[0]
if objects:
    assert {59, 60, 63} <= kinds, "no stack or global object records: %s" % sorted(kinds)
    sized = [r for r in records if r[0] in (59, 63)]
    assert all(r[1] == 1 and r[3] == "0" for r in sized), "object records without a size unit"
    assert not [r for r in records if r[0] not in (1, 2, 3) and r[1] and r[3] != "0"], \
        "a value unit on a record that is not an access"
if mode == "value" and objects:
    assert not kinds & {2, 3}, "a value build appends stores: %s" % sorted(kinds)
    loads = [r for r in valued if r[0] == 1]
    assert loads and all(r[3] in ("1", "2", "3", "4") for r in loads), loads[:3]
    print("value+objects: %d records, no stores, %d object records" % (len(records), len(sized)))
elif mode == "value":
    assert 4 in kinds and kinds <= {1, 4}, "a value build appends kinds %s (want loads only)" % sorted(kinds)
    assert all(not r[1] for r in records), "a value build sends extra units"
    print("value: %d load records, %d with their value, no stores" %
          (len(records), sum(r[0] == 4 for r in records)))
else:
    assert 1 in kinds and 2 in kinds, "dep build without loads and stores: %s" % sorted(kinds)
    assert not valued, "a dep build sends values: %s" % valued[:3]
    assert all(r[3] in (None, "0") for r in records if r[1]), "extra units other than lengths"
    print("dep: %d records (kinds %s), none with a value" % (len(records), sorted(kinds)))
