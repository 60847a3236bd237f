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
from make_gpt_fixture import (BATCH, CFG, OPT, SEED, TOL, T, gpt_entries, init_fixture_weights, maxdiff,  # noqa: E402
                              run_gpt)
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
    e.update(gpt_entries(model, x, y, r32))
    return e


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument('--outdir', default=os.path.join(here, '..', 'tests', 'fixtures'))
    ap.add_argument('--check', action='store_true')
    args = ap.parse_args()
    torch.set_num_threads(1)
    return tfmio.write_or_check(os.path.join(args.outdir, 'synth_small.tfm'), make(), args.check)

if __name__ == '__main__':
    sys.exit(main())
