#!/usr/bin/python3
"""PyTorch twin of the C GPT in tfm: same parameter names, same layout, same forward,
same optimizer and learning-rate schedule.  Used by make_gpt_fixture.py (to export
reference numbers for the C tests) and bench_gpt_torch.py (the PyTorch benchmark).

Structure (pre-LN GPT, nanoGPT-style dropout placement):
  x = drop(wte[idx] + wpe[arange(T)])
  per block:  x = x + drop(W_o(attn(ln1(x))));  x = x + drop(dense2(gelu_tanh(dense1(ln2(x)))))
  logits = ln_f(x) @ wte.weight^T          (LM head tied to wte, no bias)
  loss = mean cross-entropy over all B*T positions
"""
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

MASK_VALUE = -1e6  # d2l's masked_softmax value; identical to -inf after softmax in float32


@dataclass
class GPTConfig:
    vocab_size: int = 65
    block_size: int = 64
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    dropout: float = 0.0


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        assert cfg.n_embd % cfg.n_head == 0
        self.n_head = cfg.n_head
        self.d_k = self.d_v = cfg.n_embd // cfg.n_head
        self.W_q = nn.Linear(cfg.n_embd, cfg.n_head * self.d_k)
        self.W_k = nn.Linear(cfg.n_embd, cfg.n_head * self.d_k)
        self.W_v = nn.Linear(cfg.n_embd, cfg.n_head * self.d_v)
        self.W_o = nn.Linear(cfg.n_head * self.d_v, cfg.n_embd)
        self.attn_drop = nn.Dropout(cfg.dropout)

    def forward(self, x):
        B, T, _ = x.shape
        H = self.n_head
        q = self.W_q(x).view(B, T, H, self.d_k).transpose(1, 2)   # (B,H,T,d_k)
        k = self.W_k(x).view(B, T, H, self.d_k).transpose(1, 2)
        v = self.W_v(x).view(B, T, H, self.d_v).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)     # (B,H,T,T)
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        scores = scores.masked_fill(~causal, MASK_VALUE)
        att = self.attn_drop(F.softmax(scores, dim=-1))
        y = (att @ v).transpose(1, 2).reshape(B, T, H * self.d_v)
        return self.W_o(y)


class FFN(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.dense1 = nn.Linear(cfg.n_embd, 4 * cfg.n_embd)
        self.dense2 = nn.Linear(4 * cfg.n_embd, cfg.n_embd)

    def forward(self, x):
        return self.dense2(F.gelu(self.dense1(x), approximate='tanh'))


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.n_embd, eps=1e-5)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.n_embd, eps=1e-5)
        self.ffn = FFN(cfg)
        self.drop1 = nn.Dropout(cfg.dropout)
        self.drop2 = nn.Dropout(cfg.dropout)

    def forward(self, x):
        x = x + self.drop1(self.attn(self.ln1(x)))
        x = x + self.drop2(self.ffn(self.ln2(x)))
        return x


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)])
        self.ln_f = nn.LayerNorm(cfg.n_embd, eps=1e-5)
        self.init_weights()

    def init_weights(self):
        """The benchmark init: N(0,0.02) for Linear weights and embeddings, zero biases,
        LN ones/zeros, W_o and dense2 weights N(0, 0.02/sqrt(2*n_layer))."""
        for name, p in self.named_parameters():
            if name.endswith('attn.W_o.weight') or name.endswith('ffn.dense2.weight'):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * self.cfg.n_layer))
            elif '.ln' in name or name.startswith('ln_f'):
                nn.init.ones_(p) if name.endswith('weight') else nn.init.zeros_(p)
            elif name.endswith('.weight'):
                nn.init.normal_(p, 0.0, 0.02)
            else:
                nn.init.zeros_(p)

    def forward(self, idx, targets=None):
        B, T = idx.shape
        assert T <= self.cfg.block_size
        pos = torch.arange(T, device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for blk in self.blocks:
            x = blk(x)
        x = self.ln_f(x)
        logits = x @ self.wte.weight.t()
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T).long())
        return logits, loss

    @torch.no_grad()
    def generate(self, idx, n, temperature=1.0, top_k=None, generator=None):
        for _ in range(n):
            ctx = idx[:, -self.cfg.block_size:]
            logits, _ = self(ctx)
            logits = logits[:, -1, :] / temperature
            if top_k is not None:
                v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                logits[logits < v[:, [-1]]] = -float('inf')
            probs = F.softmax(logits, dim=-1)
            nxt = torch.multinomial(probs, 1, generator=generator)
            idx = torch.cat([idx, nxt], dim=1)
        return idx


def make_optimizer(model, lr, weight_decay, betas=(0.9, 0.99), eps=1e-8):
    """AdamW; weight decay only on params with dim >= 2 (embeddings and Linear weights)."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{'params': decay, 'weight_decay': weight_decay},
              {'params': no_decay, 'weight_decay': 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps)


def get_lr(it, lr_max, min_lr, warmup, max_iters):
    """Linear warmup over `warmup` iterations, then cosine decay to min_lr at max_iters."""
    if it < warmup:
        return lr_max * (it + 1) / (warmup + 1)
    if it > max_iters:
        return min_lr
    ratio = (it - warmup) / (max_iters - warmup)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr_max - min_lr)


def set_lr(opt, lr):
    for g in opt.param_groups:
        g['lr'] = lr


class MultiHeadAttention(nn.Module):
    """d2l-style multi-head attention with bias-free projections and d_k != d_v allowed.
    queries (B,Tq,q_in), keys (B,Tk,k_in), values (B,Tk,v_in); valid_lens (B,) masks key
    positions >= valid_len (scores set to -1e6 before softmax)."""

    def __init__(self, q_in, k_in, v_in, n_out, n_head, d_k, d_v):
        super().__init__()
        self.n_head, self.d_k, self.d_v = n_head, d_k, d_v
        self.W_q = nn.Linear(q_in, n_head * d_k, bias=False)
        self.W_k = nn.Linear(k_in, n_head * d_k, bias=False)
        self.W_v = nn.Linear(v_in, n_head * d_v, bias=False)
        self.W_o = nn.Linear(n_head * d_v, n_out, bias=False)

    def forward(self, queries, keys, values, valid_lens=None):
        B, Tq, _ = queries.shape
        Tk = keys.shape[1]
        H = self.n_head
        q = self.W_q(queries).view(B, Tq, H, self.d_k).transpose(1, 2)
        k = self.W_k(keys).view(B, Tk, H, self.d_k).transpose(1, 2)
        v = self.W_v(values).view(B, Tk, H, self.d_v).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)       # (B,H,Tq,Tk)
        if valid_lens is not None:
            keep = torch.arange(Tk)[None, :] < valid_lens.long()[:, None]   # (B,Tk)
            scores = scores.masked_fill(~keep[:, None, None, :], MASK_VALUE)
        weights = F.softmax(scores, dim=-1)
        y = (weights @ v).transpose(1, 2).reshape(B, Tq, H * self.d_v)
        return self.W_o(y), weights
