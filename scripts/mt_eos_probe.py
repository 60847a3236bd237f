#!/usr/bin/env python3
"""Teacher-forced end-of-sentence statistics of Multi30k seed-study checkpoints (tfm's and the twin's).

For each checkpoint (a tfm train-mt .tfm, or a twin .pt written by mt_twin_train.py --save-weights), with the
reference target fed to the decoder on val, in eval mode:
  loss        token-mean cross-entropy (no smoothing): the seed study's validation loss
  eos_end     mean -log P(<eos>) where the reference ends
  end_top     share of reference ends where <eos> is the most likely token
  eos_mid     mean P(<eos>) at every other target position
  mid_top     share of the other positions where <eos> is the most likely token (a premature stop)
  repeat      mean P(y[t-1]) at position t: the probability of repeating the previous token
With --hyp FILE per checkpoint (its greedy translation of val), also the greedy output's mean length in words
and the number of outputs of 50 words or more (runaway repetition up to the 60-token limit).

  /usr/bin/python3 scripts/mt_eos_probe.py [--data-dir D] CKPT[=HYP] ...
The model flags are the seed study's (d_model 256, 3+3 layers, 8 heads, FFN 512, Moses, min-freq 2).
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mt_twin_train as mt  # noqa: E402
from transformer_twin import Transformer, shift_right  # noqa: E402


@torch.no_grad()
def probe(model, arrays, batch_size=64):
    model.eval()
    src, src_valid, tgt, tgt_valid = arrays
    acc = dict(loss=0.0, eos_end=0.0, end_top=0.0, eos_mid=0.0, mid_top=0.0, repeat=0.0)
    n_tok = n_end = n_mid = n_rep = 0
    for i0 in range(0, src.shape[0], batch_size):
        idx = list(range(i0, min(i0 + batch_size, src.shape[0])))
        s, v, t, _ = mt.cut_batch(src, src_valid, tgt, tgt_valid, idx)
        logp = torch.log_softmax(model(s, v, shift_right(t)), dim=-1)       # (B,T,V)
        lens = tgt_valid[idx].long()
        T = t.shape[1]
        pos = torch.arange(T).unsqueeze(0)
        valid = pos < lens.unsqueeze(1)                                     # (B,T)
        end = pos == (lens - 1).unsqueeze(1)                                # the reference's <eos>
        mid = valid & ~end
        gold = logp.gather(2, t.unsqueeze(2)).squeeze(2)
        lp_eos = logp[:, :, mt.EOS]
        top_eos = logp.argmax(dim=-1) == mt.EOS
        acc['loss'] -= float(gold[valid].sum())
        acc['eos_end'] -= float(lp_eos[end].sum())
        acc['end_top'] += float(top_eos[end].sum())
        acc['eos_mid'] += float(lp_eos[mid].exp().sum())
        acc['mid_top'] += float(top_eos[mid].sum())
        prev = t[:, :-1]                                                    # y[t-1] at positions 1..T-1
        rep = logp[:, 1:].gather(2, prev.unsqueeze(2)).squeeze(2).exp()
        acc['repeat'] += float(rep[mid[:, 1:]].sum())
        n_tok += int(valid.sum())
        n_end += int(end.sum())
        n_mid += int(mid.sum())
        n_rep += int(mid[:, 1:].sum())
    return dict(loss=acc['loss'] / n_tok, eos_end=acc['eos_end'] / n_end, end_top=acc['end_top'] / n_end,
                eos_mid=acc['eos_mid'] / n_mid, mid_top=acc['mid_top'] / n_mid, repeat=acc['repeat'] / n_rep)


def hyp_stats(path):
    lens = [len(line.split()) for line in mt.read_lines(path)]
    return sum(lens) / len(lens), sum(n >= 50 for n in lens)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--data-dir', default='../shared/data/multi30k')
    ap.add_argument('ckpts', nargs='+', metavar='CKPT[=HYP]')
    a = ap.parse_args()
    torch.set_num_threads(int(os.environ.get('OMP_NUM_THREADS', '1')))
    D = a.data_dir
    src, tgt = mt.load_pairs(f'{D}/train.de', f'{D}/train.en', 'moses')
    src_toks, src_vocab = mt.build_vocab(src, 2)
    tgt_toks, tgt_vocab = mt.build_vocab(tgt, 2)
    vsrc, vtgt = mt.load_pairs(f'{D}/val.de', f'{D}/val.en', 'moses')
    arrays = mt.build_array(vsrc, src_vocab, 40) + mt.build_array(vtgt, tgt_vocab, 40)
    cfg = dict(src_vocab=len(src_toks), tgt_vocab=len(tgt_toks), d_model=256, n_head=8, ffn=512, n_layer=3,
               dropout=0.1, pre_ln=0, max_len=1000)
    print(f'{"checkpoint":44s} {"loss":>6s} {"eos_end":>7s} {"end_top":>7s} {"eos_mid":>7s} {"mid_top":>7s} '
          f'{"repeat":>6s} {"hyp_len":>7s} {"runaway":>7s}')
    for spec in a.ckpts:
        path, _, hyp = spec.partition('=')
        model = Transformer(cfg)
        if path.endswith('.pt'):
            model.load_state_dict(torch.load(path))
        else:
            mt.load_tfm_weights(model, path)
        r = probe(model, arrays)
        hl, run = hyp_stats(hyp) if hyp else (float('nan'), -1)
        print(f'{os.path.basename(path):44s} {r["loss"]:6.4f} {r["eos_end"]:7.4f} {r["end_top"]:7.4f} '
              f'{r["eos_mid"]:7.5f} {r["mid_top"]:7.5f} {r["repeat"]:6.4f} {hl:7.2f} {run:7d}', flush=True)


if __name__ == '__main__':
    main()
