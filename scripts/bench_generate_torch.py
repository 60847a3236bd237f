#!/usr/bin/python3
"""Benchmark twin for `tfm generate`: tokens/s of GPT generation in PyTorch written the usual way
(the full forward over the last block_size tokens for every new token, as gpt_twin.GPT.generate and
nanoGPT do; no KV cache). Weights are random (N(0, 0.02), speed does not depend on them).

  scripts/bench_generate_torch.py [--tokens 256] [--block-size 256] [--n-layer 4] [--n-head 4]
                                  [--n-embd 128] [--vocab 65] [--threads 2] [--seed 1]
Prints: tokens_per_s, gen_time_s, peak_rss_mb.
"""
import argparse
import os
import resource
import sys
import time

import torch

import torch_setup  # scripts/torch_setup.py: threads, oneDNN, BLAS description

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt_twin import GPT, GPTConfig  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--tokens', type=int, default=256)
    ap.add_argument('--block-size', type=int, default=256)
    ap.add_argument('--n-layer', type=int, default=4)
    ap.add_argument('--n-head', type=int, default=4)
    ap.add_argument('--n-embd', type=int, default=128)
    ap.add_argument('--vocab', type=int, default=65)
    ap.add_argument('--threads', type=int, default=2)
    ap.add_argument('--seed', type=int, default=1)
    torch_setup.add_args(ap)
    a = ap.parse_args()
    torch_setup.configure(a.threads, a.mkldnn)
    torch.manual_seed(a.seed)
    cfg = GPTConfig(vocab_size=a.vocab, block_size=a.block_size, n_layer=a.n_layer, n_head=a.n_head,
                    n_embd=a.n_embd, dropout=0.0)
    model = GPT(cfg)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.02) if p.dim() >= 2 else p.zero_()
    model.eval()
    gen = torch.Generator().manual_seed(a.seed)
    start = torch.zeros((1, 1), dtype=torch.long)
    with torch.no_grad():
        model.generate(start, 8, generator=gen)  # warm-up
        t0 = time.perf_counter()
        out = model.generate(start, a.tokens, generator=gen)
        el = time.perf_counter() - t0
    assert out.shape[1] == a.tokens + 1
    print(f'torch generate: {a.tokens} tokens in {el:.3f} s, {torch.get_num_threads()} threads')
    print(f'tokens_per_s {a.tokens / el:.1f}')
    print(f'gen_time_s {el:.3f}')
    print(f'peak_rss_mb {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0:.1f}')


if __name__ == '__main__':
    main()
