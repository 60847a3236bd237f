#!/usr/bin/python3
"""Cross-check tfm's safetensors interchange against the PyTorch twins, for every model kind
(GPT causal, GPT synthesizer, Transformer, GRU seq2seq, Bahdanau, and Transformers on a joint BPE model,
untied (bpe) and with tied embeddings (bpe_tied, train-mt --share-embeddings)):

  (a) train a tiny tfm model for a few steps (build/tfm train-lm / train-mt), `tfm export` it, load the
      file into the twin (same parameter names; the file is parsed here with struct + json + numpy, the
      `safetensors` package is not needed), and compare the twin's logits with tfm's on one batch;
  (b) train the twin a few Adam steps further, write its weights as a safetensors file (same metadata),
      `tfm import` it, and compare tfm's logits with the twin's.
For bpe/bpe_tied it also reads the tokenizer from __metadata__: tfm.tokenizer.bpe (base64 of the
SentencePiece ModelProto, parsed here with a few lines of protobuf) must hold the pieces of the vocabularies,
and tfm.tied_weights must name exactly the parameters the twin ties to 'shared.embedding.weight'.
tfm's logits come from `build/tests/test_safetensors --logits MODEL.tfm IN.tfm OUT.tfm`.
Pass: max |logit difference| <= 1e-5 in both directions, for every kind.

  /usr/bin/python3 scripts/safetensors_check.py [--build build] [--write-fixtures]

--write-fixtures also stores the twin-written files of (b) as tests/fixtures/twin_<kind>.safetensors and
their inputs and twin logits in tests/fixtures/twin_logits.tfm (test_safetensors checks tfm reproduces them).
"""
import argparse
import base64
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import tfmio  # noqa: E402
from bahdanau_twin import make_bahdanau  # noqa: E402
from gpt_twin import GPT, GPTConfig  # noqa: E402
from gru_twin import make_rnn  # noqa: E402
from synth_twin import SynthGPT  # noqa: E402
from transformer_twin import Transformer  # noqa: E402

TOL = 1e-5
FRA = os.path.join(ROOT, '..', 'shared', 'data', 'fra-eng', 'fra.txt')


# ---------------------------------------------------------------- the format, by hand
def st_load(path):
    """-> (tensors {name: np.float32 array}, metadata {str: str}); checks what this script relies on."""
    with open(path, 'rb') as f:
        buf = f.read()
    (n,) = struct.unpack('<Q', buf[:8])
    assert 8 + n <= len(buf), 'header runs past the end'
    header = json.loads(buf[8:8 + n].decode('utf-8'))
    meta = header.pop('__metadata__', {})
    data = buf[8 + n:]
    tensors, spans = {}, []
    for name, d in header.items():
        assert d['dtype'] == 'F32', (name, d['dtype'])
        b, e = d['data_offsets']
        count = int(np.prod(d['shape'], dtype=np.int64))
        assert 0 <= b <= e <= len(data) and e - b == 4 * count, name
        spans.append((b, e))
        tensors[name] = np.frombuffer(data[b:e], dtype='<f4').reshape(d['shape']).astype(np.float32)
    spans.sort()
    assert all(spans[i][1] == spans[i + 1][0] for i in range(len(spans) - 1)), 'holes or overlaps'
    return tensors, meta


def st_save(path, tensors, meta):
    """Like safetensors' save_file: sorted by name (its layout), header padded with spaces to 8 bytes."""
    header, blobs, off = {'__metadata__': meta}, [], 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name], dtype='<f4')
        header[name] = {'dtype': 'F32', 'shape': list(a.shape), 'data_offsets': [off, off + a.nbytes]}
        blobs.append(a.tobytes())
        off += a.nbytes
    h = json.dumps(header, separators=(',', ':')).encode('utf-8')
    h += b' ' * (-(8 + len(h)) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h)) + h + b''.join(blobs))


# ---------------------------------------------------------------- the tokenizer metadata
def proto_fields(buf):
    """(field, wire, value) of one protobuf message; value is bytes (wire 2), int (0) or raw bytes (1, 5)."""
    i, out = 0, []

    def varint():
        nonlocal i
        v, sh = 0, 0
        while True:
            b = buf[i]
            i += 1
            v |= (b & 0x7f) << sh
            sh += 7
            if not b & 0x80:
                return v
    while i < len(buf):
        key = varint()
        f, w = key >> 3, key & 7
        if w == 0:
            out.append((f, w, varint()))
        elif w == 2:
            n = varint()
            out.append((f, w, buf[i:i + n]))
            i += n
        else:
            n = 8 if w == 1 else 4
            out.append((f, w, buf[i:i + n]))
            i += n
    return out


def check_tokenizer(meta, twin):
    """The BPE model's pieces are the vocabulary (ids 0..3 carry tfm's names); the tied layout is the twin's."""
    if meta.get('tfm.tokenizer.kind') == 'bpe':
        model = base64.b64decode(meta['tfm.tokenizer.bpe'], validate=True)
        pieces = [dict((f, v) for f, _, v in proto_fields(m))[1].decode('utf-8')
                  for f, w, m in proto_fields(model) if f == 1]
        vocab = meta['tfm.tokenizer.src_vocab'].split('\n')
        assert vocab == meta['tfm.tokenizer.tgt_vocab'].split('\n'), 'BPE translator: src and tgt vocabularies differ'
        assert pieces[4:] == vocab[4:] and len(pieces) == len(vocab), 'tfm.tokenizer.bpe pieces != vocabulary'
    tied = json.loads(meta.get('tfm.tied_weights', '{}'))
    params = {id(p): n for n, p in twin.named_parameters()}
    every = [(f'{mn}.{pn}' if mn else pn, p) for mn, m in twin.named_modules(remove_duplicate=False)
             for pn, p in m.named_parameters(recurse=False)]
    twin_tied = {n: params[id(p)] for n, p in every if params[id(p)] != n}
    assert tied == twin_tied, f'tfm.tied_weights {tied} != the twin\'s ties {twin_tied}'
    return len(pieces) if meta.get('tfm.tokenizer.kind') == 'bpe' else 0


# ---------------------------------------------------------------- twins
def make_twin(meta):
    c = json.loads(meta['tfm.config'])
    arch = meta['tfm.arch']
    if arch == 'gpt':
        cfg = GPTConfig(c['vocab_size'], c['block_size'], c['n_layer'], c['n_head'], c['n_embd'], c['dropout'])
        return SynthGPT(cfg) if c['attention'] == 'synthesizer' else GPT(cfg)
    if arch == 'transformer':
        return Transformer(c)   # c['share_embeddings'] ties the embeddings and the output layer
    fn = make_rnn if arch == 'rnn' else make_bahdanau
    return fn(c['src_vocab'], c['tgt_vocab'], c['embed_size'], c['hidden_size'], c['n_layer'], c['dropout'])


def load_into(model, tensors):
    names = dict(model.named_parameters())
    if set(names) != set(tensors):
        sys.exit(f'error: parameter names differ: twin only {sorted(set(names) - set(tensors))}, '
                 f'file only {sorted(set(tensors) - set(names))}')
    with torch.no_grad():
        for n, p in names.items():
            assert tuple(p.shape) == tensors[n].shape, (n, p.shape, tensors[n].shape)
            p.copy_(torch.from_numpy(tensors[n]))


def make_inputs(meta, gen):
    c = json.loads(meta['tfm.config'])
    if meta['tfm.kind'] == 'gpt':
        T = min(c['block_size'], 12)
        return {'x': torch.randint(0, c['vocab_size'], (3, T), generator=gen, dtype=torch.int32)}
    Ts, Tt, valid = 7, 6, [7, 4, 2]
    src = torch.zeros(3, Ts, dtype=torch.int32)
    for b, v in enumerate(valid):
        src[b, :v - 1] = torch.randint(4, c['src_vocab'], (v - 1,), generator=gen, dtype=torch.int32)
        src[b, v - 1] = 2
    tgt_in = torch.randint(4, c['tgt_vocab'], (3, Tt), generator=gen, dtype=torch.int32)
    tgt_in[:, 0] = 1
    return {'src': src, 'src_valid': torch.tensor(valid, dtype=torch.int32), 'tgt_in': tgt_in}


def twin_logits(model, meta, inp):
    model.eval()
    with torch.no_grad():
        if meta['tfm.kind'] == 'gpt':
            return model(inp['x'].long())[0].numpy()
        return model(inp['src'].long(), inp['src_valid'], inp['tgt_in'].long()).numpy()


def tfm_logits(args, model_tfm, inp, tmp):
    tfmio.save(os.path.join(tmp, 'in.tfm'), {k: v.numpy().astype(np.int32) for k, v in inp.items()})
    subprocess.run([os.path.join(ROOT, args.build, 'tests', 'test_safetensors'), '--logits', model_tfm,
                    os.path.join(tmp, 'in.tfm'), os.path.join(tmp, 'out.tfm')], check=True, cwd=ROOT)
    return tfmio.load(os.path.join(tmp, 'out.tfm'))['logits']


def train_twin(model, meta, gen, steps=5):
    """A few Adam steps on random batches (the weights move away from what tfm exported)."""
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(steps):
        inp = make_inputs(meta, gen)
        if meta['tfm.kind'] == 'gpt':
            x = inp['x'].long()
            _, loss = model(x, torch.roll(x, -1, 1))
        else:
            logits = model(inp['src'].long(), inp['src_valid'], inp['tgt_in'].long())
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                     torch.roll(inp['tgt_in'], -1, 1).reshape(-1).long())
        opt.zero_grad()
        loss.backward()
        opt.step()


# ---------------------------------------------------------------- tfm runs
def train_tfm(args, kind, tmp):
    tfm = os.path.join(ROOT, args.build, 'tfm')
    out = os.path.join(tmp, f'{kind}.tfm')
    if kind in ('gpt', 'synthesizer'):
        text = os.path.join(tmp, 'text.txt')
        with open(os.path.join(ROOT, 'data', 'demo.txt'), 'rb') as f, open(text, 'wb') as g:
            g.write(f.read(20000))
        cmd = [tfm, 'train-lm', '--data', text, '--out', out, '--n-layer', '2', '--n-head', '2', '--n-embd', '16',
               '--block-size', '16', '--batch-size', '4', '--iters', '20', '--eval-every', '20', '--eval-iters', '1',
               '--threads', '1', '--attention', 'causal' if kind == 'gpt' else 'synthesizer']
    else:
        cmd = [tfm, 'train-mt', '--tsv', FRA, '--num-examples', '60', '--min-freq', '1', '--out', out,
               '--arch', kind, '--d-model', '16', '--n-head', '2', '--n-layer', '2', '--ffn', '24',
               '--embed-size', '8', '--hidden-size', '12', '--epochs', '3', '--batch-size', '8', '--threads', '1',
               '--log-every', '0']
        if kind == 'transformer':
            cmd.append('--pre-ln')
        if kind.startswith('bpe'):   # joint BPE model (both vocabularies are its pieces), transformer
            cmd[cmd.index('--arch') + 1] = 'transformer'
            cmd += ['--tokenizer', 'bpe', '--vocab-size', '340'] + (['--share-embeddings'] if kind == 'bpe_tied' else ['--share-embeddings=0'])
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return out


def check_kind(args, kind, tmp, fixtures):
    tfm = os.path.join(ROOT, args.build, 'tfm')
    gen = torch.Generator().manual_seed(20261123 + len(kind))
    model_tfm = train_tfm(args, kind, tmp)
    exported = os.path.join(tmp, f'{kind}.safetensors')
    subprocess.run([tfm, 'export', model_tfm, '--out', exported], check=True)
    tensors, meta = st_load(exported)
    twin = make_twin(meta)
    n_pieces = check_tokenizer(meta, twin)
    load_into(twin, tensors)
    inp = make_inputs(meta, gen)
    d_a = float(np.abs(twin_logits(twin, meta, inp).ravel() - tfm_logits(args, model_tfm, inp, tmp)).max())

    train_twin(twin, meta, gen)
    written = os.path.join(tmp, f'twin_{kind}.safetensors')
    st_save(written, {n: p.detach().numpy() for n, p in twin.named_parameters()}, meta)
    imported = os.path.join(tmp, f'twin_{kind}.tfm')
    subprocess.run([tfm, 'import', written, '--out', imported], check=True)
    inp = make_inputs(meta, gen)
    want = twin_logits(twin, meta, inp)
    moved = float(np.abs(want.ravel() - tfm_logits(args, model_tfm, inp, tmp)).max())
    d_b = float(np.abs(want.ravel() - tfm_logits(args, imported, inp, tmp)).max())
    n_params = sum(t.size for t in tensors.values())
    print(f'{kind:12s} {len(tensors):3d} tensors {n_params:7d} params | tfm export -> twin: max |dlogit| {d_a:.2e} | '
          f'twin trained (logits moved by {moved:.2f}) -> tfm import: max |dlogit| {d_b:.2e}'
          + (f' | {n_pieces} BPE pieces' if n_pieces else '') + (' | tied' if 'tfm.tied_weights' in meta else ''))
    if fixtures is not None:
        with open(written, 'rb') as f:
            fixtures['files'][kind] = f.read()
        for k, v in inp.items():
            fixtures['entries'][f'{kind}.{k}'] = v.numpy().astype(np.int32)
        fixtures['entries'][f'{kind}.logits'] = want.astype(np.float32)
    return max(d_a, d_b) <= TOL and moved > 1e-3


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--build', default='build')
    ap.add_argument('--write-fixtures', action='store_true')
    args = ap.parse_args()
    torch.manual_seed(1)
    torch.set_num_threads(1)
    fixtures = {'files': {}, 'entries': {}} if args.write_fixtures else None
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for kind in ('gpt', 'synthesizer', 'transformer', 'rnn', 'bahdanau', 'bpe', 'bpe_tied'):
            ok &= check_kind(args, kind, tmp, fixtures)
    if fixtures is not None and ok:
        fx = os.path.join(ROOT, 'tests', 'fixtures')
        for kind, blob in fixtures['files'].items():
            with open(os.path.join(fx, f'twin_{kind}.safetensors'), 'wb') as f:
                f.write(blob)
        fixtures['entries']['note'] = ('inputs (KIND.x or KIND.src/src_valid/tgt_in) and the PyTorch twin logits for '
                                       'tests/fixtures/twin_KIND.safetensors; written by scripts/safetensors_check.py')
        tfmio.save(os.path.join(fx, 'twin_logits.tfm'), fixtures['entries'])
        print('wrote tests/fixtures/twin_*.safetensors and tests/fixtures/twin_logits.tfm')
    print('PASS' if ok else f'FAIL (tolerance {TOL})')
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
