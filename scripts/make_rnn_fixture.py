#!/usr/bin/python3
"""Export reference numbers for tests/unit/test_parity_rnn.c:

  tests/fixtures/rnn_small.tfm       GRU seq2seq (gru_twin.make_rnn)
  tests/fixtures/bahdanau_small.tfm  Bahdanau decoder (bahdanau_twin.make_bahdanau)

Each: config.*, every parameter under its dotted name, a padded batch with different source and target
valid lengths (src, src_valid, tgt, dec_in), logits, the masked cross-entropy loss and grad.<name> of
every parameter. float32, checked against a float64 run (refuses to write if they disagree > TOL).

  scripts/make_rnn_fixture.py [--outdir tests/fixtures] [--check]
"""
import argparse
import copy
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tfmio  # noqa: E402
from bahdanau_twin import make_bahdanau  # noqa: E402
from gru_twin import EOS, PAD, make_rnn, masked_ce, shift_right  # noqa: E402

SEED = 20240604
TOL = 2e-6
CFG = dict(src_vocab=11, tgt_vocab=13, embed_size=6, hidden_size=8, n_layer=2)
B, TS, TT = 3, 5, 6
SRC_VALID = [5, 3, 2]
TGT_VALID = [6, 4, 2]


def batch(gen):
    src = torch.full((B, TS), PAD, dtype=torch.int32)
    tgt = torch.full((B, TT), PAD, dtype=torch.int32)
    for b in range(B):
        n = SRC_VALID[b]
        src[b, :n - 1] = torch.randint(4, CFG['src_vocab'], (n - 1,), generator=gen)
        src[b, n - 1] = EOS
        n = TGT_VALID[b]
        tgt[b, :n - 1] = torch.randint(4, CFG['tgt_vocab'], (n - 1,), generator=gen)
        tgt[b, n - 1] = EOS
    return src, torch.tensor(SRC_VALID, dtype=torch.int32), tgt


def run(model, src, src_valid, tgt):
    model = copy.deepcopy(model)
    logits = model(src, src_valid, shift_right(tgt))
    loss = masked_ce(logits, tgt)
    loss.backward()
    return {'logits': logits.detach(), 'loss': loss.detach().reshape(1),
            'grads': {n: p.grad.detach().clone() for n, p in model.named_parameters()}}


def make(fn, arch, seed):
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model = fn(**CFG)
    with torch.no_grad():   # larger-than-default weights so every parameter matters
        for n, p in model.named_parameters():
            p.copy_((0.5 if p.dim() >= 2 else 0.2) * torch.randn(p.shape, generator=gen))
    src, src_valid, tgt = batch(gen)
    r32 = run(model, src, src_valid, tgt)
    r64 = run(copy.deepcopy(model).double(), src, src_valid, tgt)
    d = max([float((r32['logits'].double() - r64['logits']).abs().max()),
             float((r32['loss'].double() - r64['loss']).abs().max())] +
            [float((r32['grads'][n].double() - r64['grads'][n]).abs().max()) for n in r32['grads']])
    print(f'{arch}: loss {r32["loss"].item():.6f}, max |f32 - f64| {d:.2e}')
    if d > TOL:
        sys.exit(f'error: float32 and float64 disagree by {d}')
    e = {'meta.arch': arch}
    for k, v in CFG.items():
        e[f'config.{k}'] = np.array([v], np.int32)
    for n, p in model.named_parameters():
        e[n] = p.detach().numpy().astype(np.float32)
    e['src'] = src.numpy()
    e['src_valid'] = src_valid.numpy()
    e['tgt'] = tgt.numpy()
    e['dec_in'] = shift_right(tgt).numpy().astype(np.int32)
    e['logits'] = r32['logits'].numpy()
    e['loss'] = r32['loss'].numpy()
    for n in r32['grads']:
        e[f'grad.{n}'] = r32['grads'][n].numpy()
    return e


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument('--outdir', default=os.path.join(here, '..', 'tests', 'fixtures'))
    ap.add_argument('--check', action='store_true')
    args = ap.parse_args()
    torch.set_num_threads(1)
    rc = 0
    for fname, fn, arch, seed in (('rnn_small.tfm', make_rnn, 'rnn', SEED),
                                  ('bahdanau_small.tfm', make_bahdanau, 'bahdanau', SEED + 1)):
        rc |= tfmio.write_or_check(os.path.join(args.outdir, fname), make(fn, arch, seed), args.check)
    return rc


if __name__ == '__main__':
    sys.exit(main())
