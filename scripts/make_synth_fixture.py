#!/usr/bin/python3
"""Export tests/fixtures/synth_small.tfm for tests/unit/test_synth_parity.c: the synthesizer GPT
(synth_twin.SynthGPT) with the same config, batch, fixture weights and 10-step AdamW run as
make_gpt_fixture.py's gpt_small.tfm: weights, x, y, logits, loss, grad.<name>, after.<name>,
losses, grad_norms, lrs. float32, checked against float64.

  scripts/make_synth_fixture.py [--outdir tests/fixtures] [--check]
"""
import argparse
import copy
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tfmio  # noqa: E402
from make_gpt_fixture import BATCH, CFG, OPT, SEED, TOL, T, init_fixture_weights, maxdiff, run_gpt  # noqa: E402
from synth_twin import SynthGPT  # noqa: E402


def make():
    torch.manual_seed(SEED + 7)
    gen = torch.Generator().manual_seed(SEED + 7)
    model = SynthGPT(CFG)
    init_fixture_weights(model, gen)
    x = torch.randint(0, CFG.vocab_size, (BATCH, T), generator=gen)
    y = torch.randint(0, CFG.vocab_size, (BATCH, T), generator=gen)
    r32 = run_gpt(model, x, y)
    r64 = run_gpt(copy.deepcopy(model).double(), x, y)
    diffs = {'logits': maxdiff(r32['logits'], r64['logits']), 'loss': maxdiff(r32['loss'], r64['loss']),
             'grads': max(maxdiff(r32['grads'][n], r64['grads'][n]) for n in r32['grads']),
             'after': max(maxdiff(r32['after'][n], r64['after'][n]) for n in r32['after'])}
    print('synth_small: max |f32 - f64|: ' + ', '.join(f'{k} {v:.2e}' for k, v in diffs.items()))
    if max(diffs.values()) > TOL:
        sys.exit(f'error: float32 and float64 disagree by more than {TOL}')
    print(f"synth_small: loss {r32['loss'].item():.6f}, clipped on "
          f"{sum(n > OPT['grad_clip'] for n in r32['grad_norms'])} of {OPT['steps']} steps")
    e = {'meta.attention': 'synthesizer'}
    for k in ('vocab_size', 'block_size', 'n_layer', 'n_head', 'n_embd'):
        e[f'config.{k}'] = np.array([getattr(CFG, k)], np.int32)
    e['config.dropout'] = np.array([CFG.dropout], np.float32)
    for k in ('lr', 'min_lr', 'weight_decay', 'beta1', 'beta2', 'eps', 'grad_clip'):
        e[f'opt.{k}'] = np.array([OPT[k]], np.float32)
    for k in ('warmup', 'max_iters', 'steps'):
        e[f'opt.{k}'] = np.array([OPT[k]], np.int32)
    names = [n for n, _ in model.named_parameters()]
    for n, p in model.named_parameters():
        e[n] = p.detach().numpy().astype(np.float32)
    e['x'] = x.numpy().astype(np.int32)
    e['y'] = y.numpy().astype(np.int32)
    e['logits'] = r32['logits'].numpy()
    e['loss'] = r32['loss'].numpy()
    for n in names:
        e[f'grad.{n}'] = r32['grads'][n].numpy()
    for n in names:
        e[f'after.{n}'] = r32['after'][n].numpy()
    e['losses'] = np.array(r32['losses'], np.float32)
    e['grad_norms'] = np.array(r32['grad_norms'], np.float32)
    e['lrs'] = np.array(r32['lrs'], np.float32)
    return e


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument('--outdir', default=os.path.join(here, '..', 'tests', 'fixtures'))
    ap.add_argument('--check', action='store_true')
    args = ap.parse_args()
    torch.set_num_threads(1)
    entries = make()
    path = os.path.join(args.outdir, 'synth_small.tfm')
    if args.check:
        same = os.path.exists(path) and open(path, 'rb').read() == tfmio.dumps(entries)
        print(f'{path}: {"identical" if same else "DIFFERS"}')
        return 0 if same else 1
    n = tfmio.save(path, entries)
    print(f'wrote {path}: {len(entries)} entries, {n} bytes')
    return 0


if __name__ == '__main__':
    sys.exit(main())
