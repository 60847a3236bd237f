#!/usr/bin/python3
"""A PyTorch GPT-2 written from Hugging Face's modeling_gpt2.py (GPT2LMHeadModel), the reference tfm's
`tfm import DIR` of a Hugging Face GPT-2 folder is checked against (transformers is not in Debian).

What it reproduces of modeling_gpt2.py, by module:
  Conv1D            weight (in, out), y = x @ weight + bias (the transposed layout of nn.Linear)
  GPT2Attention     c_attn Conv1D(3C <- C), split into q | k | v along the output, heads of C/H,
                    scores / sqrt(head_dim) (scale_attn_weights), causal mask filled with finfo.min,
                    softmax, c_proj; layer_past (keys, values) concatenated on the time axis (the KV cache)
  GPT2MLP           c_fc Conv1D(4C <- C), gelu_new (the tanh approximation), c_proj Conv1D(C <- 4C)
  GPT2Block         pre-LN: x + attn(ln_1(x)), then + mlp(ln_2(x)); LayerNorm eps = layer_norm_epsilon
  GPT2Model         wte + wpe (learned positions from past length), h.*, ln_f
  GPT2LMHeadModel   lm_head = Linear(C, V, bias=False) tied to wte
Dropout is left out (inference). The parameter names are HF's, so model.state_dict() is HF's layout.

save(model, DIR) writes DIR/config.json and DIR/model.safetensors as save_pretrained does: names
"transformer.*", lm_head.weight left out (tied to transformer.wte.weight), F32, {"format": "pt"}.
legacy=True writes the layout of the original gpt2 checkpoint instead (names without "transformer.", plus
the attention buffers h.N.attn.bias (1,1,P,P) and h.N.attn.masked_bias ()), which tfm must accept too.
"""
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

import hf_io

SHAPES = {
    # GPT-2 small (124M): the shapes of Hugging Face's "gpt2"
    'small': dict(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12),
    # make test's fixture: a vocabulary of 512 (the 256 byte tokens, GPT-2's first 255 merges, <|endoftext|>)
    'tiny': dict(vocab_size=512, n_positions=64, n_embd=32, n_layer=2, n_head=4),
}


def config_json(shape, eos=None, layer_norm_epsilon=1e-5):
    """config.json as transformers' GPT2Config.save_pretrained writes it for these sizes."""
    s = SHAPES[shape] if isinstance(shape, str) else shape
    eos = s['vocab_size'] - 1 if eos is None else eos
    return {
        'activation_function': 'gelu_new', 'architectures': ['GPT2LMHeadModel'], 'attn_pdrop': 0.1,
        'bos_token_id': eos, 'embd_pdrop': 0.1, 'eos_token_id': eos, 'initializer_range': 0.02,
        'layer_norm_epsilon': layer_norm_epsilon, 'model_type': 'gpt2', 'n_ctx': s['n_positions'],
        'n_embd': s['n_embd'], 'n_head': s['n_head'], 'n_inner': None, 'n_layer': s['n_layer'],
        'n_positions': s['n_positions'], 'reorder_and_upcast_attn': False, 'resid_pdrop': 0.1,
        'scale_attn_by_inverse_layer_idx': False, 'scale_attn_weights': True, 'summary_activation': None,
        'summary_first_dropout': 0.1, 'summary_proj_to_labels': True, 'summary_type': 'cls_index',
        'summary_use_proj': True, 'task_specific_params': {'text-generation': {'do_sample': True, 'max_length': 50}},
        'torch_dtype': 'float32', 'transformers_version': '4.40.0', 'use_cache': True,
        'vocab_size': s['vocab_size'],
    }


class Conv1D(nn.Module):
    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.empty(nx, nf))
        self.bias = nn.Parameter(torch.zeros(nf))

    def forward(self, x):
        out = torch.addmm(self.bias, x.reshape(-1, x.size(-1)), self.weight)
        return out.view(*x.shape[:-1], self.nf)


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class GPT2Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.C, self.H = cfg['n_embd'], cfg['n_head']
        self.hd = self.C // self.H
        self.c_attn = Conv1D(3 * self.C, self.C)
        self.c_proj = Conv1D(self.C, self.C)

    def split(self, t):
        B, T, _ = t.shape
        return t.view(B, T, self.H, self.hd).permute(0, 2, 1, 3)

    def forward(self, x, layer_past=None):
        q, k, v = self.c_attn(x).split(self.C, dim=2)
        q, k, v = self.split(q), self.split(k), self.split(v)
        if layer_past is not None:
            k = torch.cat((layer_past[0], k), dim=-2)
            v = torch.cat((layer_past[1], v), dim=-2)
        present = (k, v)
        w = torch.matmul(q, k.transpose(-1, -2)) / torch.full([], v.size(-1) ** 0.5, dtype=q.dtype)
        Tq, Tk = q.size(-2), k.size(-2)
        causal = torch.ones(Tk, Tk, dtype=torch.bool).tril()[Tk - Tq:Tk, :Tk]
        w = torch.where(causal, w, torch.full([], torch.finfo(w.dtype).min, dtype=w.dtype))
        w = F.softmax(w, dim=-1)
        a = torch.matmul(w, v).permute(0, 2, 1, 3).contiguous()
        a = a.view(*a.shape[:-2], self.C)
        return self.c_proj(a), present


class GPT2MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C = cfg['n_embd']
        inner = cfg.get('n_inner') or 4 * C
        self.c_fc = Conv1D(inner, C)
        self.c_proj = Conv1D(C, inner)

    def forward(self, x):
        return self.c_proj(gelu_new(self.c_fc(x)))


class GPT2Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C, eps = cfg['n_embd'], cfg['layer_norm_epsilon']
        self.ln_1 = nn.LayerNorm(C, eps=eps)
        self.attn = GPT2Attention(cfg)
        self.ln_2 = nn.LayerNorm(C, eps=eps)
        self.mlp = GPT2MLP(cfg)

    def forward(self, x, layer_past=None):
        a, present = self.attn(self.ln_1(x), layer_past)
        x = a + x
        return x + self.mlp(self.ln_2(x)), present


class GPT2Model(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.wte = nn.Embedding(cfg['vocab_size'], cfg['n_embd'])
        self.wpe = nn.Embedding(cfg['n_positions'], cfg['n_embd'])
        self.h = nn.ModuleList([GPT2Block(cfg) for _ in range(cfg['n_layer'])])
        self.ln_f = nn.LayerNorm(cfg['n_embd'], eps=cfg['layer_norm_epsilon'])

    def forward(self, ids, past=None):
        p0 = 0 if past is None else past[0][0].size(-2)
        pos = torch.arange(p0, p0 + ids.size(-1), dtype=torch.long).unsqueeze(0)
        x = self.wte(ids) + self.wpe(pos)
        presents = []
        for i, block in enumerate(self.h):
            x, pr = block(x, None if past is None else past[i])
            presents.append(pr)
        return self.ln_f(x), presents


class GPT2LMHeadModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.transformer = GPT2Model(cfg)
        self.lm_head = nn.Linear(cfg['n_embd'], cfg['vocab_size'], bias=False)
        self.lm_head.weight = self.transformer.wte.weight   # tied

    def forward(self, ids, past=None):
        h, presents = self.transformer(ids, past)
        return self.lm_head(h), presents


def random_init(model, seed, emb_std=0.1):
    """HF's _init_weights with every parameter drawn (biases and LayerNorms too, so that each is tested):
    N(0, 0.02) matrices, c_proj N(0, 0.02/sqrt(2 n_layer)), embeddings N(0, emb_std) (wider than HF's 0.02 so
    greedy decoding has clear winners), biases N(0, 0.02), LayerNorm weight 1 + N(0, 0.1), bias N(0, 0.1)."""
    g = torch.Generator().manual_seed(seed)
    L = model.cfg['n_layer']
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith('wte.weight') or name.endswith('wpe.weight'):
                p.copy_(torch.randn(p.shape, generator=g) * emb_std)
            elif 'ln_' in name and name.endswith('weight'):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif 'ln_' in name:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            elif name.endswith('c_proj.weight'):
                p.copy_(torch.randn(p.shape, generator=g) * (0.02 / math.sqrt(2 * L)))
            else:
                p.copy_(torch.randn(p.shape, generator=g) * 0.02)


def make(shape, seed=1, emb_std=0.1):
    cfg = config_json(shape)
    m = GPT2LMHeadModel(cfg)
    random_init(m, seed, emb_std)
    m.eval()
    return m


def save(model, d, legacy=False, dtype='F32'):
    os.makedirs(d, exist_ok=True)
    hf_io.write_config(os.path.join(d, 'config.json'), model.cfg)
    sd = {k: v for k, v in model.state_dict().items() if k != 'lm_head.weight'}
    if legacy:
        P = model.cfg['n_positions']
        sd = {k[len('transformer.'):]: v for k, v in sd.items()}
        for i in range(model.cfg['n_layer']):
            sd[f'h.{i}.attn.bias'] = torch.tril(torch.ones(P, P)).view(1, 1, P, P)
            sd[f'h.{i}.attn.masked_bias'] = torch.tensor(-1e4)
    hf_io.st_save(os.path.join(d, 'model.safetensors'), sd, dtype=dtype)


def load(d):
    """The model of a folder written by save() (either layout, any dtype), for a check run in a new process."""
    import json
    with open(os.path.join(d, 'config.json')) as f:
        cfg = json.load(f)
    m = GPT2LMHeadModel(cfg)
    t, _ = hf_io.st_load(os.path.join(d, 'model.safetensors'))
    sd = {}
    for k, v in t.items():
        if '.attn.bias' in k or '.attn.masked_bias' in k:
            continue
        sd[k if k.startswith('transformer.') else 'transformer.' + k] = torch.from_numpy(v.copy())
    sd['lm_head.weight'] = sd['transformer.wte.weight']
    m.load_state_dict(sd)
    m.eval()
    return m


@torch.no_grad()
def logits(model, ids):
    return model(torch.tensor([ids]))[0][0]


@torch.no_grad()
def greedy(model, ids, n):
    """n tokens of greedy decoding with the KV cache (past_key_values), as GPT2LMHeadModel.generate with
    do_sample=False and no stopping token; the window never slides (len(ids) + n <= n_positions)."""
    assert len(ids) + n <= model.cfg['n_positions']
    out, past, x = [], None, torch.tensor([ids])
    for _ in range(n):
        lg, past = model(x, past)
        nxt = int(lg[0, -1].argmax())
        out.append(nxt)
        x = torch.tensor([[nxt]])
    return out
