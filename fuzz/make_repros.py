#!/usr/bin/python3
"""Regression inputs for the loader findings of issue 11, written to tests/fixtures/fuzz/ as
TARGET-refused-issue11-WHAT: the generated seed checkpoints (fuzz/make_seeds.c, built by
`make fuzz-bin` and written by `make fuzz` into build-fuzz/fuzz/seeds/) with one field edited through
tfmio (valid CRCs: a deliberate edit, not corruption). tests/unit/test_fuzz_repro.c replays each
through its fuzz target and expects a clean one-line refusal.
    /usr/bin/python3 fuzz/make_repros.py [SEEDS_DIR]     (needs numpy)"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'scripts'))
import tfmio  # noqa: E402

seeds = sys.argv[1] if len(sys.argv) > 1 else 'build-fuzz/fuzz/seeds'
out = os.path.join(os.path.dirname(__file__), '..', 'tests', 'fixtures', 'fuzz')


def i32(v):
    return np.array([v], np.int32)


def f32(v):
    return np.array([v], np.float32)


def nan_at(name, idx):
    def f(d):
        a = d[name].copy()
        a.flat[idx] = np.nan
        d[name] = a
    return f


CASES = [  # target, seed, what, edit
    ('gpt', 'gpt-causal-opt', 'n_embd-65536', {'config.n_embd': i32(65536)}),
    ('gpt', 'gpt-causal-opt', 'eval_every-0', {'train.eval_every': i32(0)}),
    ('gpt', 'gpt-causal-opt', 'grad_accum-intmax', {'train.grad_accum': i32(2**31 - 1)}),
    ('gpt', 'gpt-causal-opt', 'eval_iters-intmax', {'train.eval_iters': i32(2**31 - 1)}),
    ('gpt', 'gpt-causal-opt', 'lr-negative', {'train.lr': f32(-1e-3)}),
    ('gpt', 'gpt-causal-opt', 'rng-zero', {'train.rng': np.zeros(4, np.int32)}),
    ('gpt', 'gpt-synth', 'n_head-3', {'config.n_head': i32(3)}),
    ('gpt', 'gpt-causal', 'nan-weight', nan_at('param.wte.weight', 2)),
    ('transformer', 'transformer', 'd_model-65536', {'config.d_model': i32(65536)}),
    ('transformer', 'transformer', 'max_len-2e6', {'config.max_len': i32(2_000_000)}),
    ('transformer', 'transformer', 'tokenizer-kind-capital-vocab',
     {'tokenizer.src_vocab': '<pad>\n<bos>\n<eos>\n<unk>\nGo\n.\nhi'}),
    ('rnn', 'rnn', 'hidden_size-65536', {'config.hidden_size': i32(65536)}),
    ('bahdanau', 'bahdanau', 'arch-edited-to-rnn', {'meta.arch': 'rnn'}),
    ('bahdanau', 'bahdanau', 'nan-weight', nan_at('param.decoder.dense.weight', 0)),
]

os.makedirs(out, exist_ok=True)
for target, seed, what, edit in CASES:
    d = tfmio.load(os.path.join(seeds, target, 'seed-' + seed))
    if callable(edit):
        edit(d)
    else:
        d.update(edit)
    p = os.path.join(out, f'{target}-refused-issue11-{what}')
    tfmio.save(p, d)
    print('wrote', os.path.normpath(p))
