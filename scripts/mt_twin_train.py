#!/usr/bin/python3
"""PyTorch side of the short Multi30k seed study (bench/seed_study.sh multi30k): trains
transformer_twin.Transformer (tfm's structure, parameter names and initialisation) the way
`tfm train-mt` does, from the raw corpus through a Python port of tfm's tokenizer and vocabulary, then
reports the validation loss and writes the greedy translations of the validation set (detokenized like
tfm_detokenize) for scoring with `tfm bleu`.

  /usr/bin/python3 scripts/mt_twin_train.py --data-dir ../shared/data/multi30k --out DIR --seed S
      [--epochs 2] [--max-steps N] [--threads T] [--check-dump PREFIX]

Same as tfm: tokenizer (--preprocess moses | moses-lower, ports of src/text/tokenize.c and tfm_lower_cp),
empty pairs skipped, vocabularies (<pad> <bos> <eos> <unk>, then count >= min_freq by falling count,
ties in byte order), arrays (+<eos>, truncated to --max-len), batches cut to their longest row, length
bucketing (sort within chunks of --bucket batches, batches shuffled), init (xavier-uniform Linear
weights, PyTorch-default biases, N(0,1) embeddings), loss (token mean, label smoothing), Adam, Noam
schedule, clipping at 1, validation loss (token mean without smoothing, eval mode), greedy decoding with
cached keys/values (max 60 tokens, source kept to 200). The twin draws its own random numbers (init,
batch order, dropout), so a run equals tfm's in distribution, not bit for bit.
--check-dump PREFIX compares the tokenized training data and vocabularies with
`tfm train-mt ... --dump-data PREFIX --dump-only` and stops if they differ.
--init-tfm CKPT starts from tfm's weights instead of the twin's own draw (a `train-mt --lr 1e-30 --max-steps 1`
checkpoint holds tfm's initialisation), --tfm-order draws the batches with a port of tfm's RNG and batcher
(tfm_rng, tfm_batches_make: the same batches in the same order as `tfm train-mt --seed S`), --print-steps N
prints each of the first N step losses: with dropout 0 the twin then follows tfm's per-step losses
(tests/cli/seed_study.sh checks 20 steps). --float64 trains in double precision (a numerics experiment,
docs/RECIPES.md "What the search for the cause has shown").
--eval-tfm CKPT (no training): the validation loss of tfm's checkpoint computed by this script (for runs
stopped by --max-steps mid-epoch, where tfm prints no validation loss); needs the same vocabularies.
With --eval-hyp FILE it also decodes val with tfm's weights: on the 150-step smoke-test checkpoint this
gave exactly `tfm translate`'s output on the first 200 sentences, and tests/cli/seed_study.sh checks it.
"""
import argparse
import json
import math
import os
import random
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_mt_torch import detokenize  # noqa: E402
from transformer_twin import (EOS, PAD, UNK, Transformer, init_weights, lr_at, make_optimizer,  # noqa: E402
                              mt_loss, shift_right, translate_batch)

RESERVED = ['<pad>', '<bos>', '<eos>', '<unk>']


# ---------------------------------------------------------------- tokenizer (port of src/text/tokenize.c)
def unicode_space(c):
    """tfm_unicode_space"""
    if c == 32 or 0x09 <= c <= 0x0D or 0x1C <= c <= 0x1F:
        return True
    return c in (0x85, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000) or 0x2000 <= c <= 0x200A


def punct_nonascii(c):
    if c in (0xA1, 0xA7, 0xAB, 0xB0, 0xB4, 0xB6, 0xB7, 0xBB, 0xBF, 0xD7, 0xF7):
        return True
    if c < 0xA0:
        return c >= 0x80
    return (0x2010 <= c <= 0x2027 or 0x2030 <= c <= 0x205E or 0x20A0 <= c <= 0x20CF or 0x3001 <= c <= 0x3003
            or 0x3008 <= c <= 0x3011)


def is_digit(c):
    return 48 <= c <= 57


def is_alnum(c):
    if c < 0x80:
        return 97 <= c <= 122 or 65 <= c <= 90 or is_digit(c)
    return not punct_nonascii(c) and not unicode_space(c)


def is_letter(c):
    return is_alnum(c) and not is_digit(c)


def tokenize_moses(line):
    """tfm_tokenize_moses: words of letters/digits (with inner ' ’ - and digit . ,), every run of one
    punctuation character a token"""
    cps = [ord(ch) for ch in line]
    toks, word, i, n = [], None, 0, len(cps)
    while i < n:
        c, nx = cps[i], cps[i + 1] if i + 1 < n else 0
        if unicode_space(c):
            if word is not None:
                toks.append(line[word:i])
            word = None
            i += 1
            continue
        if is_alnum(c):
            word = i if word is None else word
            i += 1
            continue
        last = cps[i - 1] if word is not None else 0
        inside = word is not None and (
            (c in (0x27, 0x2019) and is_letter(last) and is_letter(nx))
            or (c == 0x2D and is_alnum(last) and is_alnum(nx))
            or (c in (0x2E, 0x2C) and is_digit(last) and is_digit(nx)))
        if inside:
            i += 1
            continue
        if word is not None:
            toks.append(line[word:i])
        word = None
        j = i + 1
        while j < n and cps[j] == c:
            j += 1
        toks.append(line[i:j])
        i = j
    if word is not None:
        toks.append(line[word:])
    return toks


def lower_cp(c):
    """tfm_lower_cp"""
    if c < 0x80:
        return c + 32 if 65 <= c <= 90 else c
    if c < 0x100:
        return c + 32 if 0xC0 <= c <= 0xDE and c != 0xD7 else c
    if c < 0x180:
        if c == 0x178:
            return 0xFF
        if c <= 0x12F or 0x132 <= c <= 0x137 or 0x14A <= c <= 0x177:
            return c + 1 if c % 2 == 0 else c
        if 0x139 <= c <= 0x148 or 0x179 <= c <= 0x17E:
            return c + 1 if c % 2 == 1 else c
        return c
    if 0x386 <= c <= 0x3AB:
        if c == 0x386:
            return 0x3AC
        if 0x388 <= c <= 0x38A:
            return c + 37
        if c == 0x38C:
            return 0x3CC
        if c in (0x38E, 0x38F):
            return c + 63
        return c + 32 if 0x391 <= c <= 0x3AB and c != 0x3A2 else c
    if 0x400 <= c <= 0x40F:
        return c + 80
    if 0x410 <= c <= 0x42F:
        return c + 32
    return 0xDF if c == 0x1E9E else c


def lower(s):
    """tfm_utf8_lower (U+0130 -> 'i' + U+0307 as in Python)"""
    return ''.join('i\u0307' if ord(ch) == 0x130 else chr(lower_cp(ord(ch))) for ch in s)


def tokenize(kind, line):
    return tokenize_moses(lower(line) if kind == 'moses-lower' else line)


# ---------------------------------------------------------------- corpus, vocabulary, arrays
def read_lines(path):
    """tfm_split_lines: split on '\\n', a trailing '\\r' dropped, no empty last line after a final newline"""
    with open(path, encoding='utf-8', newline='') as f:
        text = f.read()
    lines = text.split('\n')
    if lines and lines[-1] == '':
        lines.pop()
    return [ln[:-1] if ln.endswith('\r') else ln for ln in lines]


def load_pairs(src_path, tgt_path, kind, max_pairs=0):
    """tfm_parallel_load_files: tokenized pairs, pairs with an empty side skipped"""
    src, tgt = [], []
    for s, t in zip(read_lines(src_path), read_lines(tgt_path)):
        if max_pairs and len(src) >= max_pairs:
            break
        a, b = tokenize(kind, s), tokenize(kind, t)
        if a and b:
            src.append(a)
            tgt.append(b)
    return src, tgt


def build_vocab(sents, min_freq):
    """tfm_vocab_build: the 4 reserved tokens, then tokens with count >= min_freq by falling count, ties
    in byte order"""
    counts = {}
    for s in sents:
        for t in s:
            counts[t] = counts.get(t, 0) + 1
    order = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0].encode('utf-8')))
    toks = RESERVED + [t for t, c in order if c >= min_freq and t not in RESERVED]
    return toks, {t: i for i, t in enumerate(toks)}


def build_array(sents, vocab, num_steps):
    """ids + <eos>, truncated / padded to num_steps; (N, num_steps) ids and (N,) valid lengths"""
    rows, valid = [], []
    for s in sents:
        ids = ([vocab.get(t, UNK) for t in s] + [EOS])[:num_steps]
        valid.append(len(ids))
        rows.append(ids + [PAD] * (num_steps - len(ids)))
    return torch.tensor(rows, dtype=torch.long), torch.tensor(valid, dtype=torch.int32)


def check_dump(prefix, src, tgt, src_toks, tgt_toks):
    """stop unless the data equal `tfm train-mt --dump-data PREFIX` (sentences and vocabularies in order)"""
    for name, mine in (('train.src', [' '.join(s) for s in src]), ('train.tgt', [' '.join(t) for t in tgt]),
                       ('src.vocab', src_toks), ('tgt.vocab', tgt_toks)):
        theirs = read_lines(f'{prefix}.{name}')
        if theirs != mine:
            bad = next((i for i, (a, b) in enumerate(zip(mine, theirs)) if a != b), min(len(mine), len(theirs)))
            sys.exit(f'check-dump: {prefix}.{name} differs from the Python preprocessing at line {bad + 1} '
                     f'({len(theirs)} vs {len(mine)} lines)')
    print(f'check-dump: {len(src)} pairs and both vocabularies ({len(src_toks)} / {len(tgt_toks)}) equal tfm\'s',
          flush=True)


# ---------------------------------------------------------------- training
def make_batches(n, batch_size, lens, bucket, rng):
    """shuffle; with bucket > 0 sort by length within chunks of bucket batches; shuffle the batches"""
    order = list(range(n))
    rng.shuffle(order)
    chunk = bucket * batch_size if bucket else n
    batches = []
    for c0 in range(0, n, chunk):
        part = sorted(order[c0:c0 + chunk], key=lambda i: lens[i]) if bucket else order[c0:c0 + chunk]
        batches += [part[i:i + batch_size] for i in range(0, len(part), batch_size)]
    rng.shuffle(batches)
    return batches


class TfmRng:
    """tfm's RNG (src/core/util.c): splitmix64 seeding, xorshift64* stream"""
    M = (1 << 64) - 1

    def __init__(self, seed):
        z = (seed + 0x9E3779B97F4A7C15) & self.M
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & self.M
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & self.M
        self.s = (z ^ (z >> 31)) | 1

    def u32(self):
        s = self.s
        s ^= s >> 12
        s ^= (s << 25) & self.M
        s ^= s >> 27
        self.s = s
        return ((s * 0x2545F4914F6CDD1D) & self.M) >> 32

    def shuffle(self, v):
        """shuffle_ints of src/text/corpus.c: the same Fisher-Yates as random.shuffle, so make_batches with this
        RNG draws exactly tfm_batches_make's batches (chunks are whole batches, as in tfm)"""
        for i in range(len(v) - 1, 0, -1):
            j = self.u32() % (i + 1)
            v[i], v[j] = v[j], v[i]


def cut_batch(src, src_valid, tgt, tgt_valid, idx):
    """the rows idx, cut to their longest source / target"""
    idx = torch.tensor(idx)
    Ts, Tt = int(src_valid[idx].max()), int(tgt_valid[idx].max())
    return src[idx, :Ts], src_valid[idx], tgt[idx, :Tt], int(tgt_valid[idx].sum())


@torch.no_grad()
def valid_loss(model, arrays, batch_size):
    """token-mean cross-entropy without label smoothing, eval mode (tfm_mt_eval_loss)"""
    model.eval()
    src, src_valid, tgt, tgt_valid = arrays
    total, n_tok = 0.0, 0
    for i0 in range(0, src.shape[0], batch_size):
        s, v, t, nt = cut_batch(src, src_valid, tgt, tgt_valid, list(range(i0, min(i0 + batch_size, src.shape[0]))))
        total += float(mt_loss(model(s, v, shift_right(t)), t, 0.0)) * nt
        n_tok += nt
    model.train()
    return total / n_tok


def train(model, a, train_arrays, valid_arrays, d_model):
    """Adam + Noam + clipping 1; returns (last epoch's token-mean training loss, last validation loss, steps)"""
    src, src_valid, tgt, tgt_valid = train_arrays
    n = src.shape[0]
    lens = torch.maximum(src_valid, tgt_valid).tolist()
    opt, params = make_optimizer(model, 0.0), list(model.parameters())
    rng = TfmRng(a.seed) if a.tfm_order else random.Random(a.seed)
    total = a.epochs * ((n + a.batch_size - 1) // a.batch_size)
    step, train_loss, vloss, t0 = 0, float('nan'), float('nan'), time.time()
    model.train()
    for epoch in range(a.epochs):
        loss_sum, tok_sum = 0.0, 0
        for b in make_batches(n, a.batch_size, lens, a.bucket, rng):
            if a.max_steps and step >= a.max_steps:
                break
            s, v, t, ntok = cut_batch(src, src_valid, tgt, tgt_valid, b)
            lr = lr_at('noam', step, a.lr, a.warmup, d_model, total)
            for g in opt.param_groups:
                g['lr'] = lr
            loss = mt_loss(model(s, v, shift_right(t)), t, a.label_smoothing)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            step += 1
            if a.print_steps and step <= a.print_steps:
                print(f'step {step}  loss {float(loss):.6f}', flush=True)
            loss_sum += float(loss) * ntok
            tok_sum += ntok
        train_loss = loss_sum / max(tok_sum, 1)
        vloss = valid_loss(model, valid_arrays, a.batch_size)
        print(f'epoch {epoch + 1}/{a.epochs}  step {step}/{total}  loss {train_loss:.4f}  valid loss {vloss:.4f}  '
              f'{time.time() - t0:.0f} s', flush=True)
        if a.max_steps and step >= a.max_steps:
            break
    return train_loss, vloss, step


def translate_file(model, sents, src_vocab, tgt_toks, path):
    """greedy, batches of 32 sorted by length (like tfm translate), detokenized, one line a sentence"""
    tsrc, tvalid = build_array(sents, src_vocab, 200)
    order = sorted(range(len(sents)), key=lambda i: int(tvalid[i]))
    outs = [None] * len(sents)
    for i0 in range(0, len(order), 32):
        ids = order[i0:i0 + 32]
        Ts = int(tvalid[ids].max())
        for i, r in zip(ids, translate_batch(model, tsrc[ids, :Ts], tvalid[ids], beam=1, max_len=60)):
            outs[i] = r
    with open(path, 'w', encoding='utf-8') as f:
        for r in outs:
            f.write(detokenize([tgt_toks[t] for t in r]) + '\n')


def load_tfm_weights(model, path):
    """copy a tfm train-mt checkpoint's param.* entries (the twin's names and shapes) into model"""
    import tfmio
    entries = tfmio.load(path)
    with torch.no_grad():
        for name, p in model.named_parameters():
            w = entries.get('param.' + name)
            if w is None or tuple(w.shape) != tuple(p.shape):
                sys.exit(f'{path}: param.{name} missing or not of shape {tuple(p.shape)}')
            p.copy_(torch.from_numpy(w))


# ---------------------------------------------------------------- main
def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--data-dir', default='../shared/data/multi30k')
    ap.add_argument('--out', required=True, help='directory for twin_seedS.{json,hyp}')
    ap.add_argument('--preprocess', choices=['moses', 'moses-lower'], default='moses')
    ap.add_argument('--num-examples', type=int, default=0)
    ap.add_argument('--min-freq', type=int, default=2)
    ap.add_argument('--max-len', type=int, default=40)
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
    ap.add_argument('--epochs', type=int, default=2)
    ap.add_argument('--max-steps', type=int, default=0, help='stop after N optimizer steps (0 = all epochs)')
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--threads', type=int, default=1)
    ap.add_argument('--check-dump', metavar='PREFIX')
    ap.add_argument('--check-only', action='store_true', help='stop after --check-dump')
    ap.add_argument('--tfm-order', action='store_true', help="draw the batches with tfm's RNG and batcher (the same "
                    "batches in the same order as tfm train-mt --seed S), instead of Python's random")
    ap.add_argument('--float64', action='store_true', help='train in double precision (a numerics experiment)')
    ap.add_argument('--print-steps', type=int, default=0, metavar='N', help='print the loss of each of the first N steps')
    ap.add_argument('--init-tfm', metavar='CKPT', help="start training from the weights of tfm's checkpoint (e.g. one "
                    "written by train-mt --lr 0 --max-steps 1: tfm's initialisation) instead of the twin's own draw")
    ap.add_argument('--save-weights', action='store_true', help='also write the trained weights to OUT/twin_seedS.pt '
                    '(a torch state_dict; scripts/mt_eos_probe.py reads it)')
    ap.add_argument('--eval-tfm', metavar='CKPT', help="print the validation loss of tfm's checkpoint and stop")
    ap.add_argument('--eval-hyp', metavar='FILE', help="with --eval-tfm: also write the twin's greedy translation of "
                    "val with tfm's weights (equals tfm translate's when the two decoders agree)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    if a.float64:
        torch.set_default_dtype(torch.float64)
    torch.manual_seed(a.seed)   # dropout
    D = a.data_dir
    src, tgt = load_pairs(f'{D}/train.de', f'{D}/train.en', a.preprocess, a.num_examples)
    src_toks, src_vocab = build_vocab(src, a.min_freq)
    tgt_toks, tgt_vocab = build_vocab(tgt, a.min_freq)
    if a.check_dump:
        check_dump(a.check_dump, src, tgt, src_toks, tgt_toks)
    if a.check_only:
        return
    vsrc, vtgt = load_pairs(f'{D}/val.de', f'{D}/val.en', a.preprocess)
    train_arrays = build_array(src, src_vocab, a.max_len) + build_array(tgt, tgt_vocab, a.max_len)
    valid_arrays = build_array(vsrc, src_vocab, a.max_len) + build_array(vtgt, tgt_vocab, a.max_len)
    cfg = dict(src_vocab=len(src_toks), tgt_vocab=len(tgt_toks), d_model=a.d_model, n_head=a.n_head, ffn=a.ffn,
               n_layer=a.n_layer, dropout=a.dropout, pre_ln=0, max_len=1000)
    model = Transformer(cfg)
    init_weights(model, torch.Generator().manual_seed(a.seed))
    if a.eval_tfm:
        load_tfm_weights(model, a.eval_tfm)
        print(f'valid loss {valid_loss(model, valid_arrays, a.batch_size):.4f} ({a.eval_tfm}, evaluated by the twin)')
        if a.eval_hyp:
            translate_file(model, [tokenize(a.preprocess, s) for s in read_lines(f'{D}/val.de')], src_vocab, tgt_toks,
                           a.eval_hyp)
        return
    if a.init_tfm:
        load_tfm_weights(model, a.init_tfm)
    print(f'{len(src)} pairs, vocab {len(src_toks)} src / {len(tgt_toks)} tgt, '
          f'{sum(p.numel() for p in model.parameters())} parameters', flush=True)
    train_loss, vloss, steps = train(model, a, train_arrays, valid_arrays, a.d_model)
    os.makedirs(a.out, exist_ok=True)
    hyp = os.path.join(a.out, f'twin_seed{a.seed}.hyp')
    val_src = [tokenize(a.preprocess, s) for s in read_lines(f'{D}/val.de')]
    translate_file(model, val_src, src_vocab, tgt_toks, hyp)
    if a.save_weights:
        torch.save(model.state_dict(), os.path.join(a.out, f'twin_seed{a.seed}.pt'))
    with open(os.path.join(a.out, f'twin_seed{a.seed}.json'), 'w') as f:
        json.dump(dict(seed=a.seed, steps=steps, train_loss=train_loss, valid_loss=vloss, hyp=hyp), f)
    print(f'final: steps {steps}  train loss {train_loss:.4f}  valid loss {vloss:.4f}  wrote {hyp}', flush=True)


if __name__ == '__main__':
    main()
