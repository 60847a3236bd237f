#!/usr/bin/python3
"""Benchmark twins of tfm's Hugging Face imports (bench/interop.sh; not a test): the PyTorch GPT-2 and MarianMT
written from transformers' modeling code (hf_gpt2_twin.py, hf_marian_twin.py), decoding with KV caches as
transformers' generate does, on the folder the benchmark imported into tfm.

  bench_hf_torch.py gpt2 DIR --prompt-ids "464 2068 ..." --tokens N [--threads 2] [--out IDS]
        greedy continuation with past_key_values; prints tokens_per_s, gen_time_s and writes the ids to --out
  bench_hf_torch.py marian DIR --src-ids FILE --beam K --max-len N [--batch 32] [--threads 2] [--out IDS]
        tfm's greedy / beam search (hf_marian_twin.translate: cached encoder keys/values and self-attention,
        candidates of every sentence in one topk) over the sources (one line of model ids a line, without
        </s>), in batches of --batch sentences sorted by length like tfm; prints sentences_per_s
Both print the thread settings and peak RSS. The outputs are written so the benchmark can check both sides
decoded the same ids (then the comparison is of equal work)."""
import argparse
import json
import os
import resource
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import hf_io  # noqa: E402
import torch_setup  # noqa: E402


def load_gpt2(d):
    import hf_gpt2_twin as gpt2
    return gpt2, gpt2.load(d)


def load_marian(d):
    import hf_marian_twin as marian
    with open(os.path.join(d, 'config.json')) as f:
        cfg = json.load(f)
    m = marian.MarianMTModel(cfg)
    t, _ = hf_io.st_load(os.path.join(d, 'model.safetensors'))
    sd = {k: torch.from_numpy(v.copy()) for k, v in t.items()}
    for k in ('model.encoder.embed_tokens.weight', 'model.decoder.embed_tokens.weight', 'lm_head.weight'):
        sd.setdefault(k, sd['model.shared.weight'])
    for k in ('model.encoder.embed_positions.weight', 'model.decoder.embed_positions.weight'):
        sd.setdefault(k, m.state_dict()[k])
    m.load_state_dict(sd)
    m.eval()
    return marian, m


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('kind', choices=('gpt2', 'marian'))
    ap.add_argument('dir')
    ap.add_argument('--prompt-ids', default='')
    ap.add_argument('--tokens', type=int, default=200)
    ap.add_argument('--src-ids')
    ap.add_argument('--beam', type=int, default=1)
    ap.add_argument('--max-len', type=int, default=60)
    ap.add_argument('--batch', type=int, default=32)
    ap.add_argument('--threads', type=int, default=2)
    ap.add_argument('--out')
    torch_setup.add_args(ap)
    a = ap.parse_args()
    torch_setup.configure(a.threads, a.mkldnn)
    print(f'torch {torch.__version__}, {torch.get_num_threads()} intra-op threads, '
          f'OMP_NUM_THREADS={os.environ.get("OMP_NUM_THREADS")}, OPENBLAS_NUM_THREADS={os.environ.get("OPENBLAS_NUM_THREADS")}')
    if a.kind == 'gpt2':
        gpt2, model = load_gpt2(a.dir)
        ids = [int(x) for x in a.prompt_ids.split()]
        gpt2.greedy(model, ids, 2)   # warm-up
        t = time.time()
        out = gpt2.greedy(model, ids, a.tokens)
        dt = time.time() - t
        print(f'tokens_per_s {a.tokens / dt:.2f}')
        print(f'gen_time_s {dt:.3f}')
        lines = [' '.join(map(str, out))]
    else:
        marian, model = load_marian(a.dir)
        with open(a.src_ids) as f:
            src = [[int(x) for x in ln.split()] for ln in f.read().splitlines()]
        eos, pad = model.cfg['eos_token_id'], model.cfg['pad_token_id']
        order = sorted(range(len(src)), key=lambda i: (-len(src[i]), i))   # tfm's batching: longest first
        res = [None] * len(src)
        t = time.time()
        for b0 in range(0, len(order), a.batch):
            part = order[b0:b0 + a.batch]
            T = max(len(src[i]) for i in part) + 1
            x = torch.full((len(part), T), pad, dtype=torch.long)
            for r, i in enumerate(part):
                x[r, :len(src[i]) + 1] = torch.tensor(src[i] + [eos])
            valid = torch.tensor([len(src[i]) + 1 for i in part])
            for r, ids in zip(part, marian.translate(model, x, valid, a.beam, a.max_len)):
                res[r] = ids
        dt = time.time() - t
        print(f'sentences_per_s {len(src) / dt:.2f}')
        print(f'decode_time_s {dt:.3f}')
        lines = [' '.join(map(str, r)) for r in res]
    print(f'peak_rss_mb {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}')
    if a.out:
        with open(a.out, 'w') as f:
            f.write('\n'.join(lines) + '\n')


if __name__ == '__main__':
    main()
