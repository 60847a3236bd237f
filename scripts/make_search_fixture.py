#!/usr/bin/python3
"""Export tests/fixtures/search_small.tfm: greedy and beam search of the PyTorch twin
(transformer_twin.translate_batch, the algorithm of src/decode/search.c) for tests/unit/test_search.c.

A tiny random Transformer (weights large enough that the next-token distributions are uneven, so beams
differ; <pad> and <bos> made unlikely by the output bias), 6 source sentences of 1 to 7 tokens, and five settings: greedy; beam 4 (alpha 0.6) with 4
hypotheses; beam 3 (alpha 0) with 2; greedy with forced target prefixes; beam 4 (alpha 1) with 3 hypotheses
and prefixes. For each: every hypothesis' ids and its score (sum of token log-probabilities, <eos>
included, over the GNMT length penalty).

  /usr/bin/python3 scripts/make_search_fixture.py [--out tests/fixtures/search_small.tfm]
"""
import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tfmio  # noqa: E402
from transformer_twin import Transformer, translate_batch  # noqa: E402

SEED = 20261127
CFG = dict(src_vocab=11, tgt_vocab=13, d_model=16, n_head=4, ffn=24, n_layer=2, dropout=0.0, pre_ln=0, max_len=32)
MAX_LEN = 9
SRC_LENS = [7, 3, 1, 5, 2, 6]
# (beam, alpha, n_best, prefixed)
SETTINGS = [(1, 0.0, 1, False), (4, 0.6, 4, False), (3, 0.0, 2, False), (1, 0.0, 1, True), (4, 1.0, 3, True)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--out', default='tests/fixtures/search_small.tfm')
    args = ap.parse_args()
    torch.manual_seed(SEED)
    gen = torch.Generator().manual_seed(SEED)
    model = Transformer(CFG)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if '.ln' in name:
                p.copy_((1.0 if name.endswith('weight') else 0.0) + 0.1 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(0.5 * torch.randn(p.shape, generator=gen))
        model.decoder.dense.bias[:2] = -8.0   # <pad> and <bos> unlikely: outputs read as text (test_translator.c)
    Ts = max(SRC_LENS) + 1
    src = torch.zeros(len(SRC_LENS), Ts, dtype=torch.long)
    for b, n in enumerate(SRC_LENS):
        src[b, :n] = torch.randint(4, CFG['src_vocab'], (n,), generator=gen)
        src[b, n] = 2   # <eos>
    valid = torch.tensor([n + 1 for n in SRC_LENS], dtype=torch.int32)
    prefix = [torch.randint(4, CFG['tgt_vocab'], (k,), generator=gen).tolist() for k in [2, 0, 1, 3, 1, 2]]
    e = {}
    for k in ('src_vocab', 'tgt_vocab', 'd_model', 'n_head', 'ffn', 'n_layer', 'pre_ln', 'max_len'):
        e[f'config.{k}'] = np.array([CFG[k]], np.int32)
    e['config.dropout'] = np.array([0.0], np.float32)
    for n, p in model.named_parameters():
        e[f'param.{n}'] = p.detach().numpy().astype(np.float32)
    e['src_ids'] = np.array([t for b, n in enumerate(SRC_LENS) for t in src[b, :n].tolist()], np.int32)
    e['src_off'] = np.cumsum([0] + SRC_LENS).astype(np.int32)
    e['prefix_ids'] = np.array([t for p in prefix for t in p] or [0], np.int32)
    e['prefix_off'] = np.cumsum([0] + [len(p) for p in prefix]).astype(np.int32)
    e['max_len'] = MAX_LEN
    e['n_settings'] = len(SETTINGS)
    distinct = 0
    for i, (beam, alpha, n_best, prefixed) in enumerate(SETTINGS):
        res = translate_batch(model, src, valid, beam=beam, alpha=alpha, max_len=MAX_LEN, n_best=n_best,
                              prefix=prefix if prefixed else None)
        ids, off, count, score = [], [0], [], []
        for b, hyps in enumerate(res):
            count.append(len(hyps))
            for sc, toks in hyps:
                ids += toks
                off.append(len(ids))
                score.append(sc)
            distinct += len({tuple(t) for _, t in hyps}) > 1
            print(f'setting {i} (beam {beam}, alpha {alpha}, n-best {n_best}{", prefixed" if prefixed else ""}) '
                  f'sentence {b}: ' + ' | '.join(f'{" ".join(map(str, t))} ({sc:.4f})' for sc, t in hyps))
        e[f's{i}.beam'] = beam
        e[f's{i}.alpha'] = float(alpha)
        e[f's{i}.n_best'] = n_best
        e[f's{i}.prefixed'] = int(prefixed)
        e[f's{i}.ids'] = np.array(ids or [0], np.int32)
        e[f's{i}.off'] = np.array(off, np.int32)
        e[f's{i}.count'] = np.array(count, np.int32)
        e[f's{i}.score'] = np.array(score, np.float32)
    if distinct < 6:
        sys.exit('error: too few sentences with distinct n-best hypotheses: the fixture would not test n-best')
    tfmio.save(args.out, e)
    print(f'wrote {args.out}')


if __name__ == '__main__':
    main()
