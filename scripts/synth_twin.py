#!/usr/bin/python3
"""PyTorch twin of tfm's GPT with dense synthesizer attention (src/models/synthesizer.c,
tfm_gpt_config.attention = TFM_ATTN_SYNTHESIZER): gpt_twin.GPT with the attention swapped.

Synthesizer attention (CS224N minGPT assignment variant), per head h with d = n_embd / n_head:
  A = relu(X W1 + b1) split into heads (B,H,T,d);  A = A @ w2 + b2  -> (B,H,T,block_size);  A[..., :T]
  causal mask (-1e6), softmax, dropout;  y = A @ split_heads(X W_v);  merge heads;  W_o
Parameters (per block, under blocks.N.attn): w1.weight/bias, w2 (d, block_size), b2 (block_size),
W_v.weight/bias, W_o.weight/bias. Init as tfm_gpt_init_weights: w2 ~ U(-0.001, 0.001), b2 = 0.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

import gpt_twin
from gpt_twin import MASK_VALUE, GPTConfig


class SynthesizerAttention(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        assert cfg.n_embd % cfg.n_head == 0
        self.n_head = cfg.n_head
        d = cfg.n_embd // cfg.n_head
        self.w1 = nn.Linear(cfg.n_embd, cfg.n_embd)
        self.w2 = nn.Parameter(torch.zeros(d, cfg.block_size))
        self.b2 = nn.Parameter(torch.zeros(cfg.block_size))
        self.W_v = nn.Linear(cfg.n_embd, cfg.n_embd)
        self.W_o = nn.Linear(cfg.n_embd, cfg.n_embd)
        self.attn_drop = nn.Dropout(cfg.dropout)

    def forward(self, x):
        B, T, C = x.shape
        H = self.n_head
        h = F.relu(self.w1(x)).view(B, T, H, C // H).transpose(1, 2)      # (B,H,T,d)
        att = (h @ self.w2 + self.b2)[..., :T]                            # (B,H,T,T)
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        att = self.attn_drop(F.softmax(att.masked_fill(~causal, MASK_VALUE), dim=-1))
        v = self.W_v(x).view(B, T, H, C // H).transpose(1, 2)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        return self.W_o(y)


class SynthGPT(gpt_twin.GPT):
    def __init__(self, cfg: GPTConfig):
        super().__init__(cfg)
        for blk in self.blocks:
            blk.attn = SynthesizerAttention(cfg)
        self.init_weights()

    def init_weights(self):
        super().init_weights()
        for name, p in self.named_parameters():
            if name.endswith('attn.w2'):
                nn.init.uniform_(p, -0.001, 0.001)
            elif name.endswith('attn.b2'):
                nn.init.zeros_(p)


def make_gpt(cfg: GPTConfig, attention='causal'):
    return SynthGPT(cfg) if attention == 'synthesizer' else gpt_twin.GPT(cfg)


if __name__ == '__main__':
    m = SynthGPT(GPTConfig(vocab_size=13, block_size=8, n_layer=1, n_head=2, n_embd=16))
    print('\n'.join(f'{n} {tuple(p.shape)}' for n, p in m.named_parameters()))
    print(math.fsum(p.numel() for p in m.parameters()))
