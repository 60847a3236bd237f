#!/usr/bin/python3
"""A tfm Transformer translator (fp32 checkpoint) -> two ONNX graphs for ONNX Runtime, through the PyTorch twin
(scripts/transformer_twin.py, which equals tfm's forward), the way Optimum exports seq2seq models: an encoder
graph that also computes every layer's cross-attention keys/values once, and a decoder-step graph that takes
one token per row with the past self-attention keys/values as inputs and returns the next ones as outputs.

    onnx_export.py MODEL.tfm OUTDIR [--opset N]

encoder.onnx   src (B,Ts) int64, valid (B) int64
               -> cross_k.{l}, cross_v.{l} (B,H,Ts,dk) for each layer l
decoder.onnx   tok (B,1) int64, pos (1) int64 (the position of tok), valid (B) int64,
               cross_k.{l}, cross_v.{l} (B,H,Ts,dk), past_k.{l}, past_v.{l} (B,H,t,dk) (t = pos; 0 at the first
               step: empty tensors) -> logits (B,V), present_k.{l}, present_v.{l} (B,H,t+1,dk)
Also writes OUTDIR/model.json (config, vocabulary size, layers, heads, banned tokens, the stored decoding
settings decode_beam / decode_alpha, null if none) for ort_decode.mjs, and checks the
graphs' reference outputs (the twin's own incremental decoding) against the twin's teacher-forced forward.
Needs Debian's python3-torch (torch.onnx ships with it)."""
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, '..', '..', 'scripts'))
import tfmio  # noqa: E402
import transformer_twin as tt  # noqa: E402

CONFIG_INTS = ['src_vocab', 'tgt_vocab', 'd_model', 'n_head', 'ffn', 'pre_ln', 'max_len', 'n_layer']


def load_twin(path):
    d = tfmio.load(path)
    kind = d.get('meta.kind', b'').decode()
    arch = d.get('meta.arch', b'').decode()
    if kind != 'seq2seq' or arch != 'transformer':
        sys.exit(f'onnx_export: {path}: a {kind or "?"} / {arch or "?"} checkpoint; only Transformer translators are exported')
    if any(isinstance(v, np.ndarray) and v.dtype == np.int8 for k, v in d.items() if k.startswith('param.')):
        sys.exit(f'onnx_export: {path}: an int8 model (tfm quantize): export the fp32 checkpoint')
    cfg = {k: int(d['config.' + k][0]) for k in CONFIG_INTS}
    cfg['dropout'] = 0.0
    cfg['share_embeddings'] = int(d['config.share_embeddings'][0]) if 'config.share_embeddings' in d else 0
    model = tt.Transformer(cfg)
    state = {k[len('param.'):]: torch.from_numpy(np.array(v)) for k, v in d.items() if k.startswith('param.')}
    names = dict(model.named_parameters())
    missing = set(names) - set(state)
    extra = set(state) - set(names)
    if missing or extra:
        sys.exit(f'onnx_export: {path}: parameters differ from the twin (missing {sorted(missing)[:3]}, extra {sorted(extra)[:3]})')
    with torch.no_grad():
        for k, p in names.items():
            p.copy_(state[k])
    model.eval()
    cfg['banned'] = [int(t) for t in d['config.banned']] if 'config.banned' in d else []
    cfg['decode_beam'] = int(d['decode.beam'][0]) if 'decode.beam' in d else None
    cfg['decode_alpha'] = float(d['decode.alpha'][0]) if 'decode.alpha' in d else None
    return model, cfg


class EncoderGraph(nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, src, valid):
        enc = self.m.encoder(src, valid)
        out = []
        for b in self.m.decoder.blocks:
            K, V = b.attention2.project_kv(enc, enc)
            out += [K, V]
        return tuple(out)


class DecoderStep(nn.Module):
    """One position for every row: the twin's DecoderBlock with the caches as explicit tensors."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, tok, pos, valid, *kv):
        dec = self.m.decoder
        L = len(dec.blocks)
        cross, past = kv[:2 * L], kv[2 * L:]
        X = dec.embedding(tok) * math.sqrt(dec.d) + dec.P.index_select(0, pos)[None]
        present = []
        for i, b in enumerate(dec.blocks):
            h = b.addnorm1.ln(X) if b.pre_ln else X
            K, V = b.attention1.project_kv(h, h)
            K = torch.cat([past[2 * i], K], dim=2)
            V = torch.cat([past[2 * i + 1], V], dim=2)
            present += [K, V]
            sa = b.attention1.attend(h, K, V)
            EK, EV = cross[2 * i], cross[2 * i + 1]
            if b.pre_ln:
                X = b.addnorm1.pre(X, sa)
                X = b.addnorm2.pre(X, b.attention2.attend(b.addnorm2.ln(X), EK, EV, valid))
                X = b.addnorm3.pre(X, b.ffn(b.addnorm3.ln(X)))
            else:
                Y = b.addnorm1(X, sa)
                Z = b.addnorm2(Y, b.attention2.attend(Y, EK, EV, valid))
                X = b.addnorm3(Z, b.ffn(Z))
        if dec.pre_ln:
            X = dec.ln_f(X)
        return (dec.dense(X)[:, 0],) + tuple(present)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    path, out = sys.argv[1], sys.argv[2]
    opset = int(sys.argv[4]) if len(sys.argv) > 4 and sys.argv[3] == '--opset' else 14
    os.makedirs(out, exist_ok=True)
    model, cfg = load_twin(path)
    L, H, d = cfg['n_layer'], cfg['n_head'], cfg['d_model']
    dk = d // H
    B, Ts = 2, 5
    src = torch.tensor([[5, 6, 7, 8, tt.EOS], [9, 10, tt.EOS, tt.PAD, tt.PAD]], dtype=torch.long) % cfg['src_vocab']
    src[:, :] = torch.where(src < 4, src + 4, src)
    src[0, 4], src[1, 2], src[1, 3], src[1, 4] = tt.EOS, tt.EOS, tt.PAD, tt.PAD
    valid = torch.tensor([5, 3], dtype=torch.long)
    enc_g, dec_g = EncoderGraph(model), DecoderStep(model)
    kv_names = [f'cross_{c}.{i}' for i in range(L) for c in 'kv']
    past_names = [f'past_{c}.{i}' for i in range(L) for c in 'kv']
    present_names = [f'present_{c}.{i}' for i in range(L) for c in 'kv']
    with torch.no_grad():
        cross = enc_g(src, valid)
        torch.onnx.export(enc_g, (src, valid), os.path.join(out, 'encoder.onnx'), input_names=['src', 'valid'],
                          output_names=kv_names, opset_version=opset,
                          dynamic_axes={'src': {0: 'B', 1: 'Ts'}, 'valid': {0: 'B'},
                                        **{n: {0: 'B', 2: 'Ts'} for n in kv_names}})
        past = tuple(torch.zeros(B, H, 1, dk) for _ in range(2 * L))
        tok = torch.tensor([[tt.BOS], [tt.BOS]], dtype=torch.long)
        pos = torch.tensor([1], dtype=torch.long)
        torch.onnx.export(dec_g, (tok, pos, valid) + tuple(cross) + past, os.path.join(out, 'decoder.onnx'),
                          input_names=['tok', 'pos', 'valid'] + kv_names + past_names,
                          output_names=['logits'] + present_names, opset_version=opset,
                          dynamic_axes={'tok': {0: 'B'}, 'valid': {0: 'B'}, 'logits': {0: 'B'},
                                        **{n: {0: 'B', 2: 'Ts'} for n in kv_names},
                                        **{n: {0: 'B', 2: 't'} for n in past_names},
                                        **{n: {0: 'B', 2: 't1'} for n in present_names}})
        # the step graph's computation, run in PyTorch from an empty cache, equals the teacher-forced forward
        tgt_in = torch.tensor([[tt.BOS, 5, 6], [tt.BOS, 7, 8]], dtype=torch.long) % cfg['tgt_vocab']
        full = model(src, valid, tgt_in)
        past = tuple(torch.zeros(B, H, 0, dk) for _ in range(2 * L))
        worst = 0.0
        for t in range(3):
            r = dec_g(tgt_in[:, t:t + 1], torch.tensor([t]), valid, *cross, *past)
            past = r[1:]
            worst = max(worst, (r[0] - full[:, t]).abs().max().item())
    if worst > 1e-4:
        sys.exit(f'onnx_export: the step graph differs from the forward by {worst:g}')
    with open(os.path.join(out, 'model.json'), 'w') as f:
        json.dump({'n_layer': L, 'n_head': H, 'd_k': dk, 'src_vocab': cfg['src_vocab'], 'tgt_vocab': cfg['tgt_vocab'],
                   'max_len': cfg['max_len'], 'pad': tt.PAD, 'bos': tt.BOS, 'eos': tt.EOS, 'banned': cfg['banned'],
                   'decode_beam': cfg['decode_beam'], 'decode_alpha': cfg['decode_alpha'], 'source': path}, f)
    print(f'onnx_export: {path} -> {out}/encoder.onnx, decoder.onnx ({L} layers, {H} heads, d_model {d}, '
          f'vocab {cfg["tgt_vocab"]}; step graph = forward to {worst:.2g})')


if __name__ == '__main__':
    main()
