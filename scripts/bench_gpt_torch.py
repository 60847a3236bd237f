#!/usr/bin/python3
"""Benchmark twin: train the PyTorch GPT twin with --attention causal (gpt_twin.GPT) or synthesizer
(synth_twin.SynthGPT) on tinyshakespeare (char level) with the same recipe as
`tfm train-lm --attention ...`, and print loss, speed and memory.

  scripts/bench_gpt_torch.py [--attention causal|synthesizer] [--iters 2000] [--threads 2] [--data input.txt] [--eval-iters 20]
                             [--seed 1337] [--sample N]
"""
import argparse
import os
import resource
import sys
import time

import torch

import torch_setup  # scripts/torch_setup.py: threads, oneDNN, BLAS description

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt_twin import GPTConfig, get_lr, make_optimizer, set_lr  # noqa: E402
from synth_twin import make_gpt  # noqa: E402

DEFAULT_DATA = '/work/shared/data/tinyshakespeare/input.txt'


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--attention', choices=('causal', 'synthesizer'), default='causal')
    ap.add_argument('--iters', type=int, default=2000)
    ap.add_argument('--threads', type=int, default=2)
    ap.add_argument('--data', default=DEFAULT_DATA)
    ap.add_argument('--eval-iters', type=int, default=20)
    ap.add_argument('--seed', type=int, default=1337)
    ap.add_argument('--sample', type=int, default=0, help='generate N chars from "\\n" at the end')
    ap.add_argument('--n-layer', type=int, default=4)
    ap.add_argument('--n-head', type=int, default=4)
    ap.add_argument('--n-embd', type=int, default=128)
    ap.add_argument('--block-size', type=int, default=64)
    ap.add_argument('--batch-size', type=int, default=12)
    ap.add_argument('--dropout', type=float, default=0.0)
    ap.add_argument('--lr', type=float, default=1e-3)
    ap.add_argument('--min-lr', type=float, default=1e-4)
    ap.add_argument('--warmup', type=int, default=100)
    ap.add_argument('--weight-decay', type=float, default=0.1)
    ap.add_argument('--grad-clip', type=float, default=1.0)
    ap.add_argument('--log-every', type=int, default=100)
    torch_setup.add_args(ap)
    args = ap.parse_args()

    torch_setup.configure(args.threads, args.mkldnn)
    torch.manual_seed(args.seed)

    with open(args.data, 'r', encoding='utf-8') as f:
        text = f.read()
    chars = sorted(set(text))
    stoi = {ch: i for i, ch in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
    n_train = int(0.9 * len(data))
    train_data, val_data = data[:n_train], data[n_train:]

    cfg = GPTConfig(vocab_size=len(chars), block_size=args.block_size, n_layer=args.n_layer,
                    n_head=args.n_head, n_embd=args.n_embd, dropout=args.dropout)
    model = make_gpt(cfg, args.attention)
    print(f'attention {args.attention}')
    n_params = sum(p.numel() for p in model.parameters())
    opt = make_optimizer(model, args.lr, args.weight_decay, betas=(0.9, 0.99), eps=1e-8)
    gen = torch.Generator().manual_seed(args.seed)
    B, T = args.batch_size, args.block_size

    def get_batch(split):
        d = train_data if split == 'train' else val_data
        ix = torch.randint(len(d) - T, (B,), generator=gen)
        x = torch.stack([d[i:i + T] for i in ix])
        y = torch.stack([d[i + 1:i + 1 + T] for i in ix])
        return x, y

    print(f'vocab {cfg.vocab_size}, params {n_params}, train tokens {len(train_data)}, '
          f'val tokens {len(val_data)}, threads {args.threads}, torch {torch.__version__}', flush=True)

    model.train()
    t_train = 0.0
    for it in range(args.iters):
        t0 = time.perf_counter()
        set_lr(opt, get_lr(it, args.lr, args.min_lr, args.warmup, args.iters))
        x, y = get_batch('train')
        _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if args.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        opt.step()
        t_train += time.perf_counter() - t0
        if it % args.log_every == 0 or it == args.iters - 1:
            print(f'iter {it:5d}  loss {loss.item():.4f}  lr {opt.param_groups[0]["lr"]:.2e}  '
                  f'{t_train:.1f}s', flush=True)

    model.eval()
    with torch.no_grad():
        losses = {}
        for split in ('val', 'train'):
            tot = 0.0
            for _ in range(args.eval_iters):
                x, y = get_batch(split)
                tot += model(x, y)[1].item()
            losses[split] = tot / max(args.eval_iters, 1)

    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB
    print(f'val_loss {losses["val"]:.4f}')
    print(f'train_loss {losses["train"]:.4f}')
    print(f'train_time_s {t_train:.2f}')
    print(f'iters_per_s {args.iters / t_train:.2f}')
    print(f'tokens_per_s {args.iters * B * T / t_train:.0f}')
    print(f'peak_rss_mb {rss_mb:.1f}')
    if args.sample > 0:
        start = torch.tensor([[stoi['\n']]], dtype=torch.long)
        out = model.generate(start, args.sample, temperature=1.0, top_k=None, generator=gen)
        print('sample:')
        print(''.join(chars[i] for i in out[0].tolist()))


if __name__ == '__main__':
    main()
