"""Session 19 run 1's tables: torch_bench and dfuse bench of the tree beside the variants built in the same call."""
import json
import os

T = '/tmp/r1'


def load(path):
    return json.load(open(path)) if os.path.exists(path) else None


def tb(name):
    d = load(f'{T}/{name}.json')
    return {(r['op'], r['shape'], r['impl']): r for r in d['results']} if d else {}


tree, variants = tb('torch_bench'), {v: tb(f'tb_{v}') for v in ('HEAD', 'NP', 'EF')}
print('torch_bench us (% of copy): tree | HEAD | NP (no packed pairs) | EF (evict-first) ; compile')
fmt = lambda x: f"{x['median_us']:7.1f} ({x['pct_copy_bw']:5.1f})" if x else '        -      '
for k, r in tree.items():
    if r['impl'] != 'dfuse':
        continue
    c = tree[(k[0], k[1], 'compile')]
    cols = ' | '.join(fmt(variants[v].get(k)) for v in variants)
    print(f"{k[0][:30]:30s} {k[1]:10s} {fmt(r)} | {cols} ; {c['median_us']:7.1f}")
print('\ndfuse bench fused us: tree (% of copy) | HEAD | NP | EF')
for op in ('rope_rotate_half', 'rmsnorm_tanh_residual', 'rmsnorm_scale'):
    a = load(f'{T}/dfuse_bench_{op}.json')
    if not a:
        continue
    others = {v: load(f'{T}/db_{v}_{op}.json') for v in ('HEAD', 'NP', 'EF')}
    for i, x in enumerate(a['results']):
        cols = ' | '.join(f"{o['results'][i]['fused_us']:7.1f}" if o else '    -  ' for o in others.values())
        print(f"{op[:22]:22s} {x['case'][:40]:40s} {x['fused_us']:7.1f} ({x['fused_percent_of_copy']:4.1f}%) | {cols}")
