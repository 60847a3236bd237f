#!/usr/bin/python3
"""PyTorch side of the translation benchmark (bench/mt_bench.sh): trains transformer_twin.Transformer on
exactly the tokenized data and vocabularies tfm used (written by `tfm train-mt --dump-data PREFIX`),
with the same model, loss, optimizer, schedule, batch size, bucketing and number of steps, then
translates the test set greedily and with beam 4 (cached keys/values, like tfm) and writes the
detokenized outputs (tfm_detokenize's rules) for scoring with `tfm bleu`.

  /usr/bin/python3 scripts/bench_mt_torch.py --data PREFIX --test TOKENIZED_SRC --out DIR [--threads 2]
"""
import argparse
import math
import os
import resource
import random
import sys
import time

import torch

import torch_setup  # scripts/torch_setup.py: threads, oneDNN, BLAS description

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from transformer_twin import (BOS, EOS, PAD, UNK, Transformer, init_weights, lr_at, make_optimizer,  # noqa: E402
                              mt_loss, shift_right, translate_batch)


def read_vocab(path):
    toks = open(path, encoding='utf-8').read().rstrip('\n').split('\n')
    return toks, {t: i for i, t in enumerate(toks)}


def read_tokens(path):
    return [line.rstrip('\n').split(' ') if line.strip() else [] for line in open(path, encoding='utf-8')]


def build_array(sents, vocab, num_steps):
    """d2l build_array_nmt: ids + <eos>, truncated / padded to num_steps"""
    rows, valid = [], []
    for s in sents:
        ids = [vocab.get(t, UNK) for t in s] + [EOS]
        ids = ids[:num_steps]
        valid.append(len(ids))
        rows.append(ids + [PAD] * (num_steps - len(ids)))
    return torch.tensor(rows, dtype=torch.long), torch.tensor(valid, dtype=torch.int32)


CLOSING = set('.,!?;:)]}%\u2026\u201d')
OPENING = set('([{\u00bf\u00a1\u201c\u201e')


def detokenize(tokens):
    """Python port of tfm_detokenize (src/text/tokenize.c)."""
    out, prev_opens, quotes = [], True, 0
    for t in tokens:
        if t == '"':
            opening = quotes % 2 == 0
            quotes += 1
            space = (not prev_opens) if opening else False
            opens = opening
        else:
            closing = (t and all(c in CLOSING for c in t)) or (len(t) > 1 and t[0] == "'" and t[1].isalpha()) \
                or t == "n't"
            space = not prev_opens and not closing
            opens = bool(t) and all(c in OPENING for c in t)
        if space:
            out.append(' ')
        out.append(t)
        prev_opens = opens
    return ''.join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--data', required=True)
    ap.add_argument('--test', required=True)
    ap.add_argument('--out', required=True)
    ap.add_argument('--threads', type=int, default=2)
    ap.add_argument('--d-model', type=int, default=256)
    ap.add_argument('--n-head', type=int, default=8)
    ap.add_argument('--n-layer', type=int, default=3)
    ap.add_argument('--ffn', type=int, default=512)
    ap.add_argument('--dropout', type=float, default=0.1)
    ap.add_argument('--label-smoothing', type=float, default=0.1)
    ap.add_argument('--lr', type=float, default=0.3)
    ap.add_argument('--warmup', type=int, default=100)
    ap.add_argument('--batch-size', type=int, default=64)
    ap.add_argument('--bucket', type=int, default=8)
    ap.add_argument('--epochs', type=int, default=1)
    ap.add_argument('--max-len', type=int, default=40)
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--no-decode', action='store_true', help='train only (no test-set decoding)')
    ap.add_argument('--max-steps', type=int, default=0, help='stop after N optimizer steps (0 = all epochs)')
    ap.add_argument('--decode-only', action='store_true', help='with --decode-weights: no training, beam 4 only '
                    '(the translation benchmark)')
    ap.add_argument('--decode-weights', help="a tfm checkpoint of the same config and vocabularies: decode with its "
                    "weights (the model tfm translate uses) instead of the twin's own, so both sides decode the same")
    torch_setup.add_args(ap)
    a = ap.parse_args()
    torch_setup.configure(a.threads, a.mkldnn)
    torch.manual_seed(a.seed)
    random.seed(a.seed)
    src_toks, src_v = read_vocab(a.data + '.src.vocab')
    tgt_toks, tgt_v = read_vocab(a.data + '.tgt.vocab')
    src, src_valid = build_array(read_tokens(a.data + '.train.src'), src_v, a.max_len)
    tgt, tgt_valid = build_array(read_tokens(a.data + '.train.tgt'), tgt_v, a.max_len)
    n = src.shape[0]
    cfg = dict(src_vocab=len(src_toks), tgt_vocab=len(tgt_toks), d_model=a.d_model, n_head=a.n_head, ffn=a.ffn,
               n_layer=a.n_layer, dropout=a.dropout, pre_ln=0, max_len=1000)
    model = Transformer(cfg)
    init_weights(model, torch.Generator().manual_seed(a.seed))
    n_params = sum(p.numel() for p in model.parameters())
    opt = make_optimizer(model, 0.0)
    params = list(model.parameters())
    steps_per_epoch = (n + a.batch_size - 1) // a.batch_size
    total = a.epochs * steps_per_epoch
    print(f'{n} pairs, vocab {len(src_toks)} src / {len(tgt_toks)} tgt, {n_params} parameters, {total} steps, '
          f'{torch.get_num_threads()} threads', flush=True)
    lens = torch.maximum(src_valid, tgt_valid).tolist()
    if a.decode_only and not a.decode_weights:
        sys.exit('--decode-only needs --decode-weights')
    step, tok_total, t0 = 0, 0, time.time()
    model.train()
    for epoch in range(0 if a.decode_only else a.epochs):
        order = list(range(n))
        random.shuffle(order)
        chunk = a.bucket * a.batch_size if a.bucket else n
        batches = []
        for c0 in range(0, n, chunk):
            part = sorted(order[c0:c0 + chunk], key=lambda i: lens[i]) if a.bucket else order[c0:c0 + chunk]
            batches += [part[i:i + a.batch_size] for i in range(0, len(part), a.batch_size)]
        random.shuffle(batches)
        loss_sum, tok_since = 0.0, 0
        for b in batches:
            if a.max_steps and step >= a.max_steps:
                break
            idx = torch.tensor(b)
            Ts, Tt = int(src_valid[idx].max()), int(tgt_valid[idx].max())
            s, v, t = src[idx, :Ts], src_valid[idx], tgt[idx, :Tt]
            lr = lr_at('noam', step, a.lr, a.warmup, a.d_model, total)
            for g in opt.param_groups:
                g['lr'] = lr
            logits = model(s, v, shift_right(t))
            loss = mt_loss(logits, t, a.label_smoothing)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            step += 1
            ntok = int(tgt_valid[idx].sum())
            tok_total += ntok
            loss_sum += loss.item() * ntok
            tok_since += ntok
            if step % 50 == 0 or step == total or step == a.max_steps:
                el = time.time() - t0
                print(f'step {step}/{total}  loss {loss_sum / tok_since:.4f}  lr {lr:.2e}  '
                      f'{tok_total / el:.0f} tok/s', flush=True)
                loss_sum, tok_since = 0.0, 0
        if a.max_steps and step >= a.max_steps:
            break
    train_time = time.time() - t0
    if not a.decode_only:
        print(f'torch train: {step} steps, {tok_total} target tokens in {train_time:.1f} s = '
          f'{tok_total / train_time:.0f} tok/s', flush=True)
    if not a.decode_only:
        print(f'peak_rss_mb {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0:.1f}', flush=True)
    if a.no_decode:
        return
    if a.decode_weights:
        import tfmio
        entries = tfmio.load(a.decode_weights)
        with torch.no_grad():
            for name, p in model.named_parameters():
                w = entries.get('param.' + name)
                if w is None or tuple(w.shape) != tuple(p.shape):
                    sys.exit(f'{a.decode_weights}: param.{name} missing or not of shape {tuple(p.shape)}')
                p.copy_(torch.from_numpy(w))
        print(f'decoding with the weights of {a.decode_weights}', flush=True)
    test = read_tokens(a.test)
    tsrc, tvalid = build_array(test, src_v, 200)
    order = sorted(range(len(test)), key=lambda i: -int(tvalid[i]))
    for beam in (4,) if a.decode_only else (1, 4):
        outs = [None] * len(test)
        t1 = time.time()
        for i0 in range(0, len(order), 32):
            ids = order[i0:i0 + 32]
            Ts = int(tvalid[ids].max())
            res = translate_batch(model, tsrc[ids, :Ts], tvalid[ids], beam=beam, alpha=0.6, max_len=60)
            for i, r in zip(ids, res):
                outs[i] = r
        el = time.time() - t1
        path = os.path.join(a.out, f'torch_beam{beam}.en')
        with open(path, 'w', encoding='utf-8') as f:
            for r in outs:
                f.write(detokenize([tgt_toks[t] for t in r]) + '\n')
        print(f'torch beam {beam}: {len(test)} sentences in {el:.2f} s = {len(test) / el:.1f} sentences/s', flush=True)


if __name__ == '__main__':
    main()
