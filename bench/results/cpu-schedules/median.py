#!/usr/bin/env python3
"""Median per combination over several 'brigade bench --json' runs.

usage: median.py [--sim SIM.json] RUN.json...   (prints a Markdown table, best first)

SIM.json is 'brigade bench ... --simulate --json' for the same matrix: its
makespan and bubble go next to the measured ones.
"""
import json
import statistics as st
import sys

args = sys.argv[1:]
sim = {}
if args[:1] == ['--sim']:
    for r in json.load(open(args[1]))['results']:
        sim[(r['schedule'], r['chunks'], r['microbatches'])] = r
    args = args[2:]
combos = {}
for path in args:
    for r in json.load(open(path))['results']:
        if r['fits'] and r.get('samples_per_s'):
            combos.setdefault((r['schedule'], r['chunks'], r['microbatches']), []).append(r)


def med(rows, key, scale=1.0):
    return st.median(r[key] for r in rows) * scale


print('| schedule | M | samples/s (median) | samples/s (runs) | makespan measured | replayed | '
      'simulated | bubble measured | bubble simulated | GFLOP/s per device |')
print('|---|---|---|---|---|---|---|---|---|---|')
for (kind, v, m), rows in sorted(combos.items(), key=lambda kv: -med(kv[1], 'samples_per_s')):
    name = f'{kind} (v={v})' if v > 1 else kind
    runs = ', '.join(f"{r['samples_per_s']:.0f}" for r in rows)
    s = sim.get((kind, v, m))
    sim_ms = f"{s['makespan'] * 1e3:.1f} ms" if s else '-'
    sim_bubble = f"{s['bubble_fraction'] * 100:.0f}%" if s else '-'
    print(f"| {name} | {m} | {med(rows, 'samples_per_s'):.0f} | {runs} | "
          f"{med(rows, 'measured_makespan', 1e3):.1f} ms | {med(rows, 'replayed_makespan', 1e3):.1f} ms | {sim_ms} | "
          f"{med(rows, 'bubble_fraction', 100):.0f}% | {sim_bubble} | {med(rows, 'effective_gflops'):.1f} |")
