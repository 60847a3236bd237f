#!/usr/bin/python3
"""PyTorch twin of tfm's encoder-decoder Transformer (src/models/transformer.c): same parameter names,
same layout, same forward, loss, optimizer and schedules. Used by make_transformer_fixture.py (reference
numbers for tests/unit/test_transformer.c) and bench_mt_torch.py (the PyTorch benchmark).

Structure (d2l's TransformerEncoder / TransformerDecoder, post-LN by default):
  encoder: X = drop(PE(embedding(src) * sqrt(d)))
           per block: Y = addnorm1(X, attention(X, X, X, src_valid)); X = addnorm2(Y, ffn(Y))
  decoder: X = drop(PE(embedding(tgt_in) * sqrt(d), from position `offset`))
           per block: Y = addnorm1(X, attention1(X, X, X, causal))
                      Z = addnorm2(Y, attention2(Y, enc, enc, src_valid)); X = addnorm3(Z, ffn(Z))
           logits = dense(X)
  AddNorm(X, Y) = ln(drop(Y) + X); pre_ln: X = X + drop(sublayer(addnorm.ln(X))) and a final ln_f per stack.
  Attention: bias-free W_q W_k W_v W_o, scores / sqrt(d_k), hidden keys set to -1e6 (d2l's masked_softmax),
  dropout on the weights (cfg attention_dropout, or dropout when it is -1 or absent). FFN:
  dense2(drop_act(relu(dense1(x)))) (cfg activation_dropout, 0 when absent).
  share_embeddings (train-mt --share-embeddings): one nn.Embedding `shared.embedding` is the encoder's and the
  decoder's embedding and the weight of decoder.dense (which keeps its own bias); named_parameters() lists it
  once, as 'shared.embedding.weight', like tfm.
  Loss: cross-entropy over target positions != <pad> (id 0), PyTorch label smoothing.
"""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

PAD, BOS, EOS, UNK = 0, 1, 2, 3
MASK_VALUE = -1e6


def positional_table(max_len, d):
    """P[pos, 2i] = sin(pos / 10000^(2i/d)), P[pos, 2i+1] = cos(...), computed in float64 like the C side."""
    P = np.zeros((max_len, d), np.float64)
    pos = np.arange(max_len, dtype=np.float64)[:, None]
    i = np.arange(0, d, 2, dtype=np.float64)[None, :]
    ang = pos / np.power(10000.0, i / d)
    P[:, 0::2] = np.sin(ang)
    P[:, 1::2] = np.cos(ang[:, : d // 2])
    return torch.from_numpy(P.astype(np.float32))


class MultiHeadAttention(nn.Module):
    def __init__(self, d, n_head, dropout):
        super().__init__()
        self.n_head, self.d_k = n_head, d // n_head
        self.W_q = nn.Linear(d, d, bias=False)
        self.W_k = nn.Linear(d, d, bias=False)
        self.W_v = nn.Linear(d, d, bias=False)
        self.W_o = nn.Linear(d, d, bias=False)
        self.dropout = nn.Dropout(dropout)
        self.weights = None

    def split(self, x):
        B, T, _ = x.shape
        return x.view(B, T, self.n_head, self.d_k).transpose(1, 2)   # (B,H,T,d_k)

    def project_kv(self, keys, values):
        return self.split(self.W_k(keys)), self.split(self.W_v(values))

    def attend(self, queries, K, V, valid_lens=None, causal=False):
        B, Tq, _ = queries.shape
        Tk = K.shape[2]
        q = self.split(self.W_q(queries))
        scores = q @ K.transpose(-2, -1) / math.sqrt(self.d_k)        # (B,H,Tq,Tk)
        if causal:
            keep = torch.ones(Tq, Tk, dtype=torch.bool, device=q.device).tril(Tk - Tq)
            scores = scores.masked_fill(~keep, MASK_VALUE)
        if valid_lens is not None:
            keep = torch.arange(Tk, device=q.device)[None, :] < valid_lens.long()[:, None]
            scores = scores.masked_fill(~keep[:, None, None, :], MASK_VALUE)
        w = F.softmax(scores, dim=-1)
        self.weights = w.detach()
        y = (self.dropout(w) @ V).transpose(1, 2).reshape(B, Tq, -1)
        return self.W_o(y)

    def forward(self, queries, keys, values, valid_lens=None, causal=False):
        K, V = self.project_kv(keys, values)
        return self.attend(queries, K, V, valid_lens, causal)


class AddNorm(nn.Module):
    def __init__(self, d, dropout):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.ln = nn.LayerNorm(d)

    def forward(self, X, Y):
        return self.ln(self.dropout(Y) + X)

    def pre(self, X, Y):   # pre-LN residual (Y was computed from self.ln(X))
        return X + self.dropout(Y)


class PositionWiseFFN(nn.Module):
    def __init__(self, d, ffn, dropout=0.0):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.dense1 = nn.Linear(d, ffn)
        self.dense2 = nn.Linear(ffn, d)

    def forward(self, x):
        return self.dense2(self.dropout(F.relu(self.dense1(x))))


class EncoderBlock(nn.Module):
    def __init__(self, d, n_head, ffn, dropout, pre_ln, attention_dropout=None, activation_dropout=0.0):
        super().__init__()
        attn = dropout if attention_dropout is None or attention_dropout < 0 else attention_dropout
        self.pre_ln = pre_ln
        self.attention = MultiHeadAttention(d, n_head, attn)
        self.addnorm1 = AddNorm(d, dropout)
        self.ffn = PositionWiseFFN(d, ffn, activation_dropout)
        self.addnorm2 = AddNorm(d, dropout)

    def forward(self, X, valid_lens):
        if self.pre_ln:
            h = self.addnorm1.ln(X)
            X = self.addnorm1.pre(X, self.attention(h, h, h, valid_lens))
            return self.addnorm2.pre(X, self.ffn(self.addnorm2.ln(X)))
        Y = self.addnorm1(X, self.attention(X, X, X, valid_lens))
        return self.addnorm2(Y, self.ffn(Y))


class DecoderBlock(nn.Module):
    def __init__(self, d, n_head, ffn, dropout, pre_ln, attention_dropout=None, activation_dropout=0.0):
        super().__init__()
        attn = dropout if attention_dropout is None or attention_dropout < 0 else attention_dropout
        self.pre_ln = pre_ln
        self.attention1 = MultiHeadAttention(d, n_head, attn)
        self.addnorm1 = AddNorm(d, dropout)
        self.attention2 = MultiHeadAttention(d, n_head, attn)
        self.addnorm2 = AddNorm(d, dropout)
        self.ffn = PositionWiseFFN(d, ffn, activation_dropout)
        self.addnorm3 = AddNorm(d, dropout)

    def forward(self, X, EK, EV, enc_valid, cache=None):
        """cache: None (teacher forcing, causal mask) or a dict holding this layer's K/V of earlier
        positions (incremental decoding, X is the next position)."""
        h = self.addnorm1.ln(X) if self.pre_ln else X
        K, V = self.attention1.project_kv(h, h)
        if cache is not None:
            if 'K' in cache:
                K = torch.cat([cache['K'], K], dim=2)
                V = torch.cat([cache['V'], V], dim=2)
            cache['K'], cache['V'] = K, V
            sa = self.attention1.attend(h, K, V)
        else:
            sa = self.attention1.attend(h, K, V, causal=True)
        if self.pre_ln:
            X = self.addnorm1.pre(X, sa)
            X = self.addnorm2.pre(X, self.attention2.attend(self.addnorm2.ln(X), EK, EV, enc_valid))
            return self.addnorm3.pre(X, self.ffn(self.addnorm3.ln(X)))
        Y = self.addnorm1(X, sa)
        Z = self.addnorm2(Y, self.attention2.attend(Y, EK, EV, enc_valid))
        return self.addnorm3(Z, self.ffn(Z))


class Encoder(nn.Module):
    def __init__(self, cfg, shared=None):
        super().__init__()
        self.d = cfg['d_model']
        self.embedding = shared if shared is not None else nn.Embedding(cfg['src_vocab'], self.d)
        self.blocks = nn.ModuleList([EncoderBlock(self.d, cfg['n_head'], cfg['ffn'], cfg['dropout'], cfg['pre_ln'],
                                                  cfg.get('attention_dropout'), cfg.get('activation_dropout', 0.0))
                                     for _ in range(cfg['n_layer'])])
        if cfg['pre_ln']:
            self.ln_f = nn.LayerNorm(self.d)
        self.pre_ln = cfg['pre_ln']
        self.dropout = nn.Dropout(cfg['dropout'])
        self.register_buffer('P', positional_table(cfg['max_len'], self.d), persistent=False)

    def forward(self, src, valid):
        T = src.shape[1]
        X = self.dropout(self.embedding(src) * math.sqrt(self.d) + self.P[:T])
        for b in self.blocks:
            X = b(X, valid)
        return self.ln_f(X) if self.pre_ln else X


class Decoder(nn.Module):
    def __init__(self, cfg, shared=None):
        super().__init__()
        self.d = cfg['d_model']
        self.embedding = shared if shared is not None else nn.Embedding(cfg['tgt_vocab'], self.d)
        self.blocks = nn.ModuleList([DecoderBlock(self.d, cfg['n_head'], cfg['ffn'], cfg['dropout'], cfg['pre_ln'],
                                                  cfg.get('attention_dropout'), cfg.get('activation_dropout', 0.0))
                                     for _ in range(cfg['n_layer'])])
        if cfg['pre_ln']:
            self.ln_f = nn.LayerNorm(self.d)
        self.pre_ln = cfg['pre_ln']
        self.dense = nn.Linear(self.d, cfg['tgt_vocab'])
        if shared is not None:
            self.dense.weight = shared.weight   # logits = X E^T + b
        self.dropout = nn.Dropout(cfg['dropout'])
        self.register_buffer('P', positional_table(cfg['max_len'], self.d), persistent=False)

    def init_state(self, enc, valid):
        """Encoder keys/values of every layer, computed once."""
        kv = [b.attention2.project_kv(enc, enc) for b in self.blocks]
        return {'kv': kv, 'valid': valid, 'caches': [dict() for _ in self.blocks], 't': 0}

    def forward(self, tgt_in, state, incremental=False):
        T = tgt_in.shape[1]
        off = state['t'] if incremental else 0
        X = self.dropout(self.embedding(tgt_in) * math.sqrt(self.d) + self.P[off:off + T])
        for i, b in enumerate(self.blocks):
            EK, EV = state['kv'][i]
            X = b(X, EK, EV, state['valid'], state['caches'][i] if incremental else None)
        if incremental:
            state['t'] += T
        if self.pre_ln:
            X = self.ln_f(X)
        return self.dense(X)


class Transformer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = dict(cfg)
        shared = None
        if cfg.get('share_embeddings'):   # one (V,d) matrix, registered first: named 'shared.embedding.weight'
            self.shared = nn.Module()
            self.shared.embedding = nn.Embedding(cfg['src_vocab'], cfg['d_model'])
            shared = self.shared.embedding
        self.encoder = Encoder(cfg, shared)
        self.decoder = Decoder(cfg, shared)

    def forward(self, src, src_valid, tgt_in):
        enc = self.encoder(src, src_valid)
        return self.decoder(tgt_in, self.decoder.init_state(enc, src_valid))

    def reorder(self, state, idx):
        state['kv'] = [(K[idx], V[idx]) for K, V in state['kv']]
        state['valid'] = state['valid'][idx]
        for c in state['caches']:
            if 'K' in c:
                c['K'], c['V'] = c['K'][idx], c['V'][idx]


def shift_right(tgt):
    """<bos> + target[:, :-1]"""
    bos = torch.full((tgt.shape[0], 1), BOS, dtype=tgt.dtype)
    return torch.cat([bos, tgt[:, :-1]], dim=1)


def mt_loss(logits, tgt, label_smoothing):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1), ignore_index=PAD,
                           label_smoothing=label_smoothing)


def init_weights(model, gen):
    """tfm's init: xavier-uniform Linear weights, PyTorch-default biases, N(0,1) embeddings, LN 1/0."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith('embedding.weight'):
                p.normal_(0.0, 1.0, generator=gen)
            elif '.ln' in name or 'ln_f' in name:
                p.fill_(1.0 if name.endswith('weight') else 0.0)
            elif p.dim() == 2:
                bound = math.sqrt(6.0 / sum(p.shape))
                p.uniform_(-bound, bound, generator=gen)


def lr_at(sched, it, lr, warmup, d_model, total, min_lr=0.0):
    """The schedules of src/train/train_mt.c (tfm_mt_lr)."""
    if sched == 'noam':
        step = it + 1
        w = max(warmup, 1)
        return lr / math.sqrt(d_model) * min(step ** -0.5, step * w ** -1.5)
    if sched == 'cosine':
        if it < warmup:
            return lr * (it + 1) / (warmup + 1)
        if it > total:
            return min_lr
        if total <= warmup:
            return lr
        r = (it - warmup) / (total - warmup)
        return min_lr + 0.5 * (1.0 + math.cos(math.pi * r)) * (lr - min_lr)
    return lr * (it + 1) / (warmup + 1) if it < warmup else lr


def make_optimizer(model, lr, weight_decay=0.0, betas=(0.9, 0.999), eps=1e-8):
    """AdamW with decay only on params with dim >= 2 (like tfm_adamw); weight_decay 0 is Adam."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{'params': decay, 'weight_decay': weight_decay},
                              {'params': no_decay, 'weight_decay': 0.0}], lr=lr, betas=betas, eps=eps)


def insert(fin, ns, toks, n):
    """Offer a finished hypothesis to a list of at most n (score, toks), best first (ties: earlier first)."""
    if len(fin) < n or ns > fin[-1][0]:
        pos = len(fin)
        while pos > 0 and fin[pos - 1][0] < ns:
            pos -= 1
        fin.insert(pos, (ns, list(toks)))
        del fin[n:]


@torch.no_grad()
def translate_batch(model, src, src_valid, beam=1, alpha=0.0, max_len=50, n_best=0, prefix=None):
    """Greedy or beam search with cached keys/values, the algorithm of src/decode/search.c.
    Returns a list of id lists (without <bos>/<eos>); with n_best > 0, per sentence a list of up to n_best
    (score, ids) pairs, best first, score = sum of the tokens' log-probabilities and of <eos> after them (a
    hypothesis cut at max_len tokens is scored as if it ended there) / ((5 + len + 1) / 6) ** alpha. prefix: per sentence a list of ids the output
    is forced to start with (at most max_len of them)."""
    model.eval()
    B = src.shape[0]
    enc = model.encoder(src, src_valid)
    st = model.decoder.init_state(enc, src_valid)
    lp = lambda n: ((5.0 + n) / 6.0) ** alpha
    pre = [list(prefix[b])[:max_len] if prefix else [] for b in range(B)]
    if beam == 1:
        out = [None] * B
        rows = list(range(B))
        prev = torch.full((B, 1), BOS, dtype=torch.long)
        hist = [[] for _ in range(B)]
        logp = [0.0] * B
        for step in range(max_len + 1):
            logits = model.decoder(prev, st, incremental=True)[:, 0]
            ls = F.log_softmax(logits.double(), -1)
            best = logits.argmax(-1).tolist()
            keep = []
            for r, s in enumerate(rows):
                tok = pre[s][step] if step < len(pre[s]) else best[r]
                if step == max_len:   # cut here: scored as if it ended
                    tok = EOS
                logp[s] += ls[r, tok].item()
                if tok == EOS:
                    out[s] = [(logp[s] / lp(len(hist[s]) + 1), hist[s])] if n_best else hist[s]
                else:
                    hist[s].append(tok)
                    keep.append(r)
            if not keep:
                break
            if len(keep) < len(rows):
                model.reorder(st, torch.tensor(keep))
            rows = [rows[r] for r in keep]
            prev = torch.tensor([[hist[s][-1]] for s in rows])
        return out
    K = beam
    N = max(1, min(n_best, K))
    model.reorder(st, torch.arange(B).repeat_interleave(K))
    score = torch.full((B * K,), -math.inf)
    score[::K] = 0.0
    hist = [[] for _ in range(B * K)]
    sents = list(range(B))
    fin = [[] for _ in range(B)]   # up to N (score, toks), best first, ties: earlier first
    n_fin = [0] * B
    prev = torch.full((B * K, 1), BOS, dtype=torch.long)
    for step in range(max_len + 1):
        logp = F.log_softmax(model.decoder(prev, st, incremental=True)[:, 0].double(), -1).float()
        V = logp.shape[1]
        idx, new_score, new_hist, new_sents = [], [], [], []
        if step == max_len:   # the live beams end here, scored as if <eos> came next
            for g, s in enumerate(sents):
                for r in range(g * K, (g + 1) * K):
                    if score[r] == -math.inf:
                        continue
                    sc = (score[r] + logp[r, EOS]).item()
                    insert(fin[s], sc / lp(len(hist[r]) + 1), hist[r], N)
            break
        for g, s in enumerate(sents):
            if step < len(pre[s]):   # forced prefix token: one candidate per live row
                tok = pre[s][step]
                cands = sorted(((score[g * K + r].item() + logp[g * K + r, tok].item(), r * V + tok)
                                for r in range(K) if score[g * K + r] != -math.inf), key=lambda c: -c[0])
                top = cands
            else:
                cand = (score[g * K:(g + 1) * K, None] + logp[g * K:(g + 1) * K]).reshape(-1)
                top_s, top_i = cand.topk(2 * K)
                top = list(zip(top_s.tolist(), top_i.tolist()))
            live = []
            for j, (sc, ci) in enumerate(top):
                if len(live) == K or sc == -math.inf:
                    break
                r, tok = g * K + ci // V, ci % V
                if tok == EOS:
                    if j >= K:
                        continue
                    insert(fin[s], sc / lp(len(hist[r]) + 1), hist[r], N)
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
        model.reorder(st, torch.tensor(idx))
        score = torch.tensor(new_score)
        hist, sents = new_hist, new_sents
        prev = torch.tensor([[h[-1]] for h in hist])
    return fin if n_best else [f[0][1] if f else [] for f in fin]
