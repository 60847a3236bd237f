#!/usr/bin/python3
"""A PyTorch MarianMT written from Hugging Face's modeling_marian.py (MarianMTModel), the reference tfm's
`tfm import DIR` of an OPUS-MT folder is checked against (transformers is not in Debian).

What it reproduces of modeling_marian.py, by module:
  MarianSinusoidalPositionalEmbedding  position_enc[pos, j] = pos / 10000^(2 (j // 2) / d) in float64, sines
                    of the even columns in the first half, cosines of the odd ones in the second, cast to
                    float32; positions from the cache length (past_key_values_length) on
  MarianAttention   q_proj, k_proj, v_proj, out_proj with biases; softmax(q k^T * head_dim^-0.5 + mask) v
                    (eager_attention_forward); the mask adds finfo.min at padded keys (encoder mask) and above
                    the diagonal (decoder self-attention)
  MarianEncoderLayer / MarianDecoderLayer   post-LN: x = LN(x + attn(x)) [, LN(x + cross(x, enc))],
                    LN(x + fc2(act(fc1(x)))), act = ACT2FN[activation_function] (swish = SiLU, gelu = exact
                    erf GELU, gelu_new = tanh GELU, relu)
  MarianEncoder / MarianDecoder   embed_tokens(ids) * sqrt(d_model) (scale_embedding) + positions; no final
                    LayerNorm, no embedding LayerNorm
  MarianMTModel     lm_head = the shared embedding (tied), logits = lm_head(h) + final_logits_bias
Dropout is left out (inference). Parameter names are Hugging Face's, so model.state_dict() is its layout.

save(model, DIR) writes config.json and model.safetensors as save_pretrained does: model.shared.weight (the
tied copies model.encoder/decoder.embed_tokens.weight and lm_head.weight left out), final_logits_bias, the
layers; embed_positions not saved (_keys_to_ignore_on_save). legacy=True writes the layout of the converted
OPUS-MT files instead: every tied copy and both embed_positions tables.

Decoding (ids):
  greedy()     Hugging Face's greedy search: start with decoder_start_token_id, the logits processors of the
               config (bad_words_ids -> -inf; forced_eos_token_id at max_length - 1), argmax, stop at
               eos_token_id (finished rows padded), at most max_length tokens with the start token.
  translate()  tfm's search (src/decode/search.c; scripts/transformer_twin.py translate_batch): greedy, or beam
               search keeping the best 2K (row, token) candidates per sentence, log-softmax scores, the banned
               tokens set to -inf after the log-softmax (as the bad_words_ids processor), a hypothesis ending
               in </s> finished with score / lp(len) (alpha 0: lp = 1), at most max_len tokens without </s>.
"""
import math
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import hf_io

SHAPES = {
    # Helsinki-NLP/opus-mt-de-en
    'opus': dict(vocab_size=58101, d_model=512, layers=6, heads=8, ffn=2048, max_pos=512, max_length=512,
                 num_beams=4),
    # make test's fixture (its vocabulary comes from the tokenizer files: vocab_size is set from vocab.json)
    'tiny': dict(vocab_size=None, d_model=32, layers=2, heads=4, ffn=64, max_pos=64, max_length=40, num_beams=4),
}


def config_json(shape, vocab_size, act='swish'):
    """config.json of an OPUS-MT model (opus-mt-de-en's fields; pad = decoder start = the last id, eos = 0)."""
    s = SHAPES[shape]
    V = vocab_size
    return {
        'activation_dropout': 0.0, 'activation_function': act, 'add_bias_logits': False,
        'add_final_layer_norm': False, 'architectures': ['MarianMTModel'], 'attention_dropout': 0.0,
        'bad_words_ids': [[V - 1]], 'bos_token_id': 0, 'classif_dropout': 0.0, 'classifier_dropout': 0.0,
        'd_model': s['d_model'], 'decoder_attention_heads': s['heads'], 'decoder_ffn_dim': s['ffn'],
        'decoder_layerdrop': 0.0, 'decoder_layers': s['layers'], 'decoder_start_token_id': V - 1,
        'decoder_vocab_size': V, 'dropout': 0.1, 'encoder_attention_heads': s['heads'],
        'encoder_ffn_dim': s['ffn'], 'encoder_layerdrop': 0.0, 'encoder_layers': s['layers'], 'eos_token_id': 0,
        'forced_eos_token_id': 0, 'gradient_checkpointing': False,
        'id2label': {'0': 'LABEL_0', '1': 'LABEL_1', '2': 'LABEL_2'}, 'init_std': 0.02, 'is_encoder_decoder': True,
        'label2id': {'LABEL_0': 0, 'LABEL_1': 1, 'LABEL_2': 2}, 'max_length': s['max_length'],
        'max_position_embeddings': s['max_pos'], 'model_type': 'marian', 'normalize_before': False,
        'normalize_embedding': False, 'num_beams': s['num_beams'], 'num_hidden_layers': s['layers'],
        'pad_token_id': V - 1, 'scale_embedding': True, 'share_encoder_decoder_embeddings': True,
        'static_position_embeddings': True, 'torch_dtype': 'float32', 'transformers_version': '4.40.0',
        'use_cache': True, 'vocab_size': V,
    }


def sinusoidal(n_pos, dim):
    position_enc = np.array([[pos / np.power(10000, 2 * (j // 2) / dim) for j in range(dim)] for pos in range(n_pos)])
    out = torch.empty(n_pos, dim)
    sentinel = dim // 2 if dim % 2 == 0 else (dim // 2) + 1
    out[:, 0:sentinel] = torch.FloatTensor(np.sin(position_enc[:, 0::2]))
    out[:, sentinel:] = torch.FloatTensor(np.cos(position_enc[:, 1::2]))
    return out


ACT = {'swish': F.silu, 'silu': F.silu, 'relu': F.relu, 'gelu': F.gelu,
       'gelu_new': lambda x: F.gelu(x, approximate='tanh'), 'gelu_pytorch_tanh': lambda x: F.gelu(x, approximate='tanh')}


class MarianAttention(nn.Module):
    def __init__(self, d, H):
        super().__init__()
        self.H, self.hd = H, d // H
        self.scaling = self.hd ** -0.5
        self.k_proj, self.v_proj = nn.Linear(d, d), nn.Linear(d, d)
        self.q_proj, self.out_proj = nn.Linear(d, d), nn.Linear(d, d)

    def heads(self, x):
        B, T, _ = x.shape
        return x.view(B, T, self.H, self.hd).transpose(1, 2)

    def forward(self, x, kv=None, mask=None, cache=None, cross_kv=None):
        """kv: the encoder output (cross-attention) or None (self); cache: [K, V] of earlier positions (self)
        appended to in place; cross_kv: precomputed encoder keys/values."""
        q = self.heads(self.q_proj(x))
        if cross_kv is not None:
            k, v = cross_kv
        else:
            src = x if kv is None else kv
            k, v = self.heads(self.k_proj(src)), self.heads(self.v_proj(src))
            if cache is not None:
                if cache:
                    k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
                cache[:] = [k, v]
        w = torch.matmul(q, k.transpose(2, 3)) * self.scaling
        if mask is not None:
            w = w + mask
        w = F.softmax(w, dim=-1)
        a = torch.matmul(w, v).transpose(1, 2).contiguous()
        return self.out_proj(a.reshape(a.shape[0], a.shape[1], -1))


class MarianEncoderLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg['d_model']
        self.self_attn = MarianAttention(d, cfg['encoder_attention_heads'])
        self.self_attn_layer_norm = nn.LayerNorm(d)
        self.act = ACT[cfg['activation_function']]
        self.fc1, self.fc2 = nn.Linear(d, cfg['encoder_ffn_dim']), nn.Linear(cfg['encoder_ffn_dim'], d)
        self.final_layer_norm = nn.LayerNorm(d)

    def forward(self, x, mask):
        x = self.self_attn_layer_norm(x + self.self_attn(x, mask=mask))
        return self.final_layer_norm(x + self.fc2(self.act(self.fc1(x))))


class MarianDecoderLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg['d_model']
        self.self_attn = MarianAttention(d, cfg['decoder_attention_heads'])
        self.self_attn_layer_norm = nn.LayerNorm(d)
        self.encoder_attn = MarianAttention(d, cfg['decoder_attention_heads'])
        self.encoder_attn_layer_norm = nn.LayerNorm(d)
        self.act = ACT[cfg['activation_function']]
        self.fc1, self.fc2 = nn.Linear(d, cfg['decoder_ffn_dim']), nn.Linear(cfg['decoder_ffn_dim'], d)
        self.final_layer_norm = nn.LayerNorm(d)

    def forward(self, x, enc, self_mask, enc_mask, cache=None, cross_kv=None):
        x = self.self_attn_layer_norm(x + self.self_attn(x, mask=self_mask, cache=cache))
        x = self.encoder_attn_layer_norm(x + self.encoder_attn(x, kv=enc, mask=enc_mask, cross_kv=cross_kv))
        return self.final_layer_norm(x + self.fc2(self.act(self.fc1(x))))


class Stack(nn.Module):
    def __init__(self, cfg, layer, n):
        super().__init__()
        self.embed_scale = math.sqrt(cfg['d_model']) if cfg['scale_embedding'] else 1.0
        self.embed_positions = nn.Embedding(cfg['max_position_embeddings'], cfg['d_model'])
        with torch.no_grad():
            self.embed_positions.weight.copy_(sinusoidal(cfg['max_position_embeddings'], cfg['d_model']))
        self.embed_positions.weight.requires_grad_(False)   # a fixed table, as in _init_weight
        self.layers = nn.ModuleList([layer(cfg) for _ in range(n)])


class MarianModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.shared = nn.Embedding(cfg['vocab_size'], cfg['d_model'])
        self.encoder = Stack(cfg, MarianEncoderLayer, cfg['encoder_layers'])
        self.decoder = Stack(cfg, MarianDecoderLayer, cfg['decoder_layers'])
        self.encoder.embed_tokens = self.decoder.embed_tokens = self.shared


def key_mask(valid, T, dtype=torch.float32):
    """(B,1,1,T) additive mask: 0 at the first valid[b] keys, finfo.min after (_prepare_4d_attention_mask)."""
    keep = torch.arange(T)[None, :] < torch.as_tensor(valid)[:, None]
    return ((1.0 - keep.to(dtype)) * torch.finfo(dtype).min)[:, None, None, :]


class MarianMTModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.model = MarianModel(cfg)
        self.register_buffer('final_logits_bias', torch.zeros(1, cfg['vocab_size']))
        self.lm_head = nn.Linear(cfg['d_model'], cfg['vocab_size'], bias=False)
        self.lm_head.weight = self.model.shared.weight

    def encode(self, src, valid):
        e = self.model.encoder
        x = e.embed_tokens(src) * e.embed_scale + e.embed_positions(torch.arange(src.shape[1]))
        mask = key_mask(valid, src.shape[1])
        for layer in e.layers:
            x = layer(x, mask)
        return x

    def decode(self, tgt_in, enc, valid, caches=None, cross=None):
        """tgt_in (B,T) -> logits (B,T,V). caches: per layer a list [K, V] (incremental: T new positions after
        the cached ones); cross: per layer the encoder's (K, V)."""
        d = self.model.decoder
        past = caches[0][0].shape[2] if caches and caches[0] else 0
        T = tgt_in.shape[1]
        x = d.embed_tokens(tgt_in) * d.embed_scale + d.embed_positions(torch.arange(past, past + T))
        causal = torch.full((T, past + T), torch.finfo(torch.float32).min).triu(past + 1)
        enc_mask = key_mask(valid, enc.shape[1])
        for i, layer in enumerate(d.layers):
            x = layer(x, enc, causal, enc_mask, None if caches is None else caches[i],
                      None if cross is None else cross[i])
        return self.lm_head(x) + self.final_logits_bias

    def forward(self, src, valid, tgt_in):
        return self.decode(tgt_in, self.encode(src, valid), valid)

    def start(self, src, valid):
        """Incremental state: the encoder output, its keys/values per decoder layer, empty self-attention caches."""
        enc = self.encode(src, valid)
        cross = [(a.encoder_attn.heads(a.encoder_attn.k_proj(enc)), a.encoder_attn.heads(a.encoder_attn.v_proj(enc)))
                 for a in self.model.decoder.layers]
        return {'enc': enc, 'valid': torch.as_tensor(valid), 'cross': cross,
                'caches': [[] for _ in self.model.decoder.layers]}

    def step(self, st, prev):
        return self.decode(prev[:, None], st['enc'], st['valid'], st['caches'], st['cross'])[:, 0]

    @staticmethod
    def reorder(st, idx):
        idx = torch.as_tensor(idx)
        st['enc'] = st['enc'][idx]
        st['valid'] = st['valid'][idx]
        st['cross'] = [(k[idx], v[idx]) for k, v in st['cross']]
        st['caches'] = [[c[0][idx], c[1][idx]] if c else [] for c in st['caches']]


def random_init(model, seed):
    """Every parameter drawn (biases and LayerNorms too): matrices N(0, 0.02) (init_std), the shared embedding
    N(0, 0.1) (every row, <pad> included: it is the decoder's start token), biases N(0, 0.02), LayerNorm weight
    1 + N(0, 0.1), bias N(0, 0.1), final_logits_bias N(0, 0.1)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if 'embed_positions' in name:
                continue
            if name == 'model.shared.weight':
                p.copy_(torch.randn(p.shape, generator=g) * 0.1)
            elif 'layer_norm' in name and name.endswith('weight'):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif 'layer_norm' in name:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(torch.randn(p.shape, generator=g) * 0.02)
        model.final_logits_bias.copy_(torch.randn(model.final_logits_bias.shape, generator=g) * 0.1)


def make(cfg, seed=1):
    m = MarianMTModel(cfg)
    random_init(m, seed)
    m.eval()
    return m


def save(model, d, legacy=False, dtype='F32'):
    os.makedirs(d, exist_ok=True)
    hf_io.write_config(os.path.join(d, 'config.json'), model.cfg)
    sd = model.state_dict()
    drop = {'model.encoder.embed_tokens.weight', 'model.decoder.embed_tokens.weight', 'lm_head.weight',
            'model.encoder.embed_positions.weight', 'model.decoder.embed_positions.weight'}
    if not legacy:
        sd = {k: v for k, v in sd.items() if k not in drop}
    hf_io.st_save(os.path.join(d, 'model.safetensors'), sd, dtype=dtype)


# ---------------------------------------------------------------- decoding
@torch.no_grad()
def greedy(model, src, valid, max_length=None):
    """Hugging Face's greedy search (generate(num_beams=1)) with the config's processors; ids without the start
    token and without </s>, per sentence."""
    c = model.cfg
    max_length = max_length or c['max_length']
    eos, banned = c['eos_token_id'], [w[0] for w in c.get('bad_words_ids') or []]
    forced = c.get('forced_eos_token_id')
    B = src.shape[0]
    st = model.start(src, valid)
    prev = torch.full((B,), c['decoder_start_token_id'], dtype=torch.long)
    out, done = [[] for _ in range(B)], [False] * B
    for cur_len in range(1, max_length):
        scores = model.step(st, prev)
        scores[:, banned] = -math.inf
        if forced is not None and cur_len == max_length - 1:
            keep = scores[:, forced].clone()
            scores[:] = -math.inf
            scores[:, forced] = keep
        nxt = scores.argmax(-1)
        for b in range(B):
            if not done[b]:
                if int(nxt[b]) == eos:
                    done[b] = True
                else:
                    out[b].append(int(nxt[b]))
        if all(done):
            break
        prev = torch.where(torch.tensor(done), torch.full_like(nxt, c['pad_token_id']), nxt)
    return out


@torch.no_grad()
def translate(model, src, valid, beam, max_len):
    """tfm's greedy / beam search (src/decode/search.c), Marian's ids: see the module comment."""
    c = model.cfg
    BOS, EOS = c['decoder_start_token_id'], c['eos_token_id']
    banned = [w[0] for w in c.get('bad_words_ids') or []]
    B = src.shape[0]
    st = model.start(src, valid)
    if beam == 1:
        out, rows, hist = [None] * B, list(range(B)), [[] for _ in range(B)]
        prev = torch.full((B,), BOS, dtype=torch.long)
        for step in range(max_len + 1):
            logits = model.step(st, prev)
            logits[:, banned] = -math.inf
            best = logits.argmax(-1).tolist()
            keep = []
            for r, s in enumerate(rows):
                if best[r] == EOS or step == max_len:
                    out[s] = hist[s]
                else:
                    hist[s].append(best[r])
                    keep.append(r)
            if not keep:
                break
            if len(keep) < len(rows):
                model.reorder(st, keep)
            rows = [rows[r] for r in keep]
            prev = torch.tensor([hist[s][-1] for s in rows])
        return out
    K = beam
    model.reorder(st, torch.arange(B).repeat_interleave(K))
    score = torch.full((B * K,), -math.inf)
    score[::K] = 0.0
    hist, sents = [[] for _ in range(B * K)], list(range(B))
    best, n_fin = [(-math.inf, []) for _ in range(B)], [0] * B
    prev = torch.full((B * K,), BOS, dtype=torch.long)
    for step in range(max_len + 1):
        logp = F.log_softmax(model.step(st, prev).double(), -1).float()
        logp[:, banned] = -math.inf
        V = logp.shape[1]
        idx, new_score, new_hist, new_sents = [], [], [], []
        if step == max_len:   # the live beams end here, scored as if </s> came next
            for g, s in enumerate(sents):
                for r in range(g * K, (g + 1) * K):
                    sc = (score[r] + logp[r, EOS]).item()
                    if score[r] != -math.inf and sc > best[s][0]:
                        best[s] = (sc, hist[r])
            break
        cand = (score[:, None] + logp).reshape(len(sents), K * V)   # every group's K*V candidates at once
        tops, topi = cand.topk(2 * K, dim=1)
        tops, topi = tops.tolist(), topi.tolist()
        for g, s in enumerate(sents):
            live = []
            for j, (sc, ci) in enumerate(zip(tops[g], topi[g])):
                if len(live) == K or sc == -math.inf:
                    break
                r, tok = g * K + ci // V, ci % V
                if tok == EOS:
                    if j >= K:
                        continue
                    if sc > best[s][0]:
                        best[s] = (sc, hist[r])
                    n_fin[s] += 1
                    continue
                live.append((r, sc, hist[r] + [tok]))
            if n_fin[s] >= K or not live:
                continue
            while len(live) < K:
                live.append((live[0][0], -math.inf, live[0][2]))
            for r, sc, h in live:
                idx.append(r)
                new_score.append(sc)
                new_hist.append(h)
            new_sents.append(s)
        if not idx:
            break
        model.reorder(st, idx)
        score = torch.tensor(new_score)
        hist, sents = new_hist, new_sents
        prev = torch.tensor([h[-1] for h in hist])
    return [b[1] for b in best]
