#!/usr/bin/python3
"""Export tests/fixtures/transformer_small.tfm: reference numbers of the PyTorch twin
(transformer_twin.Transformer) for tests/unit/test_transformer.c.

Two tiny models (post-LN, the default, and pre-LN, prefixed 'pre.'), each with: weights, one padded
batch whose sources and targets have different lengths (so the source valid-length masks and the
ignored <pad> targets are exercised), logits, loss (label smoothing on), every gradient, and (post-LN
only) the weights after 10 Adam steps with the Noam schedule and global-norm clipping.
Computed in float32 and checked against a float64 run (the fixture must not be rounding noise).

  /usr/bin/python3 scripts/make_transformer_fixture.py [--out tests/fixtures/transformer_small.tfm]
"""
import argparse
import copy
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tfmio  # noqa: E402
from transformer_twin import Transformer, lr_at, make_optimizer, mt_loss, shift_right  # noqa: E402

SEED = 20240603
TOL = 2e-6
CFG = dict(src_vocab=11, tgt_vocab=13, d_model=16, n_head=4, ffn=24, n_layer=2, dropout=0.0, pre_ln=0, max_len=32)
OPT = dict(lr=0.1, warmup=4, beta1=0.9, beta2=0.98, eps=1e-9, weight_decay=0.0, grad_clip=None, steps=10,
           label_smoothing=0.1)
# batch: 3 sentences, source lengths 7 / 4 / 2 (padded to 7), target lengths 6 / 3 / 5 (padded to 6)
SRC_VALID = [7, 4, 2]
TGT_VALID = [6, 3, 5]


def fixture_weights(model, gen):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if '.ln' in name and name.endswith('weight'):
                p.copy_(1.0 + 0.3 * torch.randn(p.shape, generator=gen))
            elif '.ln' in name:
                p.copy_(0.2 * torch.randn(p.shape, generator=gen))
            elif name.endswith('embedding.weight'):
                p.copy_(0.5 * torch.randn(p.shape, generator=gen))
            elif p.dim() >= 2:
                p.copy_(0.3 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))


def make_batch(gen):
    Ts, Tt = max(SRC_VALID), max(TGT_VALID)
    src = torch.zeros(3, Ts, dtype=torch.long)
    tgt = torch.zeros(3, Tt, dtype=torch.long)
    for b in range(3):
        src[b, :SRC_VALID[b] - 1] = torch.randint(4, CFG['src_vocab'], (SRC_VALID[b] - 1,), generator=gen)
        src[b, SRC_VALID[b] - 1] = 2
        tgt[b, :TGT_VALID[b] - 1] = torch.randint(4, CFG['tgt_vocab'], (TGT_VALID[b] - 1,), generator=gen)
        tgt[b, TGT_VALID[b] - 1] = 2
    return src, torch.tensor(SRC_VALID, dtype=torch.int32), tgt


def run(model, src, valid, tgt, steps):
    model = copy.deepcopy(model)
    params = list(model.parameters())
    opt = make_optimizer(model, 0.0, OPT['weight_decay'], (OPT['beta1'], OPT['beta2']), OPT['eps'])
    tgt_in = shift_right(tgt)
    out = {'losses': [], 'norms': [], 'lrs': []}
    for it in range(max(steps, 1)):
        lr = lr_at('noam', it, OPT['lr'], OPT['warmup'], CFG['d_model'], steps)
        for g in opt.param_groups:
            g['lr'] = lr
        logits = model(src, valid, tgt_in)
        loss = mt_loss(logits, tgt, OPT['label_smoothing'])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if it == 0:
            out['logits'] = logits.detach().clone()
            out['loss'] = loss.detach().reshape(1).clone()
            out['grads'] = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
        if steps == 0:
            break
        norm = torch.nn.utils.clip_grad_norm_(params, OPT['grad_clip'])
        opt.step()
        out['losses'].append(loss.item())
        out['norms'].append(norm.item())
        out['lrs'].append(lr)
    out['after'] = {n: p.detach().clone() for n, p in model.named_parameters()}
    return out


def md(a, b):
    return float((a.double() - b.double()).abs().max())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--out', default='tests/fixtures/transformer_small.tfm')
    args = ap.parse_args()
    torch.manual_seed(SEED)
    gen = torch.Generator().manual_seed(SEED)
    src, valid, tgt = make_batch(gen)
    e = {}
    for prefix, pre_ln, steps in (('', 0, OPT['steps']), ('pre.', 1, 0)):
        cfg = dict(CFG, pre_ln=pre_ln)
        model = Transformer(cfg)
        fixture_weights(model, gen)
        if prefix == '':
            # choose the clip threshold so clipping is active on some but not all steps
            OPT['grad_clip'] = float('inf')
            probe = run(model, src, valid, tgt, steps)
            norms = sorted(probe['norms'])
            OPT['grad_clip'] = float(np.float32(0.5 * (norms[len(norms) // 2] + norms[len(norms) // 2 - 1])))
        r32 = run(model, src, valid, tgt, steps)
        r64 = run(copy.deepcopy(model).double(), src, valid, tgt, steps)
        d = {'logits': md(r32['logits'], r64['logits']), 'loss': md(r32['loss'], r64['loss']),
             'grads': max(md(r32['grads'][n], r64['grads'][n]) for n in r32['grads'])}
        if steps:
            d['after'] = max(md(r32['after'][n], r64['after'][n]) for n in r32['after'])
        print(f'{prefix or "post."}: max |f32 - f64|: ' + ', '.join(f'{k} {v:.2e}' for k, v in d.items()))
        if max(d.values()) > TOL:
            sys.exit('error: float32 and float64 disagree: fixture would be noise-dominated')
        print(f'{prefix or "post."}: loss {r32["loss"].item():.6f}')
        if steps:
            clipped = [n > OPT['grad_clip'] for n in r32['norms']]
            for it in range(steps):
                print(f'  step {it}: lr {r32["lrs"][it]:.5f} loss {r32["losses"][it]:.5f} '
                      f'norm {r32["norms"][it]:.4f}{" (clipped)" if clipped[it] else ""}')
            if not 0 < sum(clipped) < steps:
                sys.exit('error: clipping must be active on some but not all steps')
            margin = min(abs(n / OPT['grad_clip'] - 1) for n in r32['norms'])
            if margin < 1e-3:
                sys.exit('error: a grad norm is too close to the clip threshold')
        for k in ('src_vocab', 'tgt_vocab', 'd_model', 'n_head', 'ffn', 'n_layer', 'pre_ln', 'max_len'):
            e[f'{prefix}config.{k}'] = np.array([cfg[k]], np.int32)
        e[f'{prefix}config.dropout'] = np.array([cfg['dropout']], np.float32)
        for n, p in model.named_parameters():
            e[f'{prefix}param.{n}'] = p.detach().numpy().astype(np.float32)
        e[f'{prefix}logits'] = r32['logits'].numpy()
        e[f'{prefix}loss'] = r32['loss'].numpy()
        for n in r32['grads']:
            e[f'{prefix}grad.{n}'] = r32['grads'][n].numpy()
        if steps:
            for n in r32['after']:
                e[f'after.{n}'] = r32['after'][n].numpy()
            e['losses'] = np.array(r32['losses'], np.float32)
            e['lrs'] = np.array(r32['lrs'], np.float32)
    e['src'] = src.numpy().astype(np.int32)
    e['src_valid'] = valid.numpy().astype(np.int32)
    e['tgt'] = tgt.numpy().astype(np.int32)
    for k in ('lr', 'beta1', 'beta2', 'eps', 'weight_decay', 'grad_clip', 'label_smoothing'):
        e[f'opt.{k}'] = np.array([OPT[k]], np.float32)
    for k in ('warmup', 'steps'):
        e[f'opt.{k}'] = np.array([OPT[k]], np.int32)
    e['note'] = ('Noam schedule lr = opt.lr * d_model^-0.5 * min(t^-0.5, t * warmup^-1.5), t = step + 1; '
                 'Adam (weight_decay 0); clip global grad norm to opt.grad_clip; loss = CE over tgt != 0 '
                 'with label smoothing; tgt_in = <bos>(1) + tgt[:, :-1]. pre.* = the pre-LN variant (no steps).')
    tfmio.save(args.out, e)
    print(f'wrote {args.out} ({os.path.getsize(args.out)} bytes)')


if __name__ == '__main__':
    main()
