#!/usr/bin/python3
"""PyTorch twin of tfm's Bahdanau translator (src/models/bahdanau.c): d2l's Seq2SeqAttentionDecoder
with AdditiveAttention, on gru_twin's encoder. Parameter names match the C model
(decoder.attention.W_q.weight, decoder.attention.W_k.weight, decoder.attention.w_v.weight, ...).

  per target step t:  query = hidden[-1] (B,1,H); context = AdditiveAttention(query, enc_outputs,
                      enc_outputs, src_valid_lens); x = [context ; embedding(y_t)]; GRU step
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from gru_twin import EncoderDecoder, Seq2SeqEncoder, init_seq2seq

MASK_VALUE = -1e6


def masked_softmax(X, valid_lens):
    """d2l: scores at key positions >= valid_len set to -1e6 before the softmax over the last axis."""
    if valid_lens is None:
        return F.softmax(X, dim=-1)
    shape = X.shape
    vl = torch.repeat_interleave(valid_lens, shape[1]) if valid_lens.dim() == 1 else valid_lens.reshape(-1)
    X = X.reshape(-1, shape[-1])
    keep = torch.arange(shape[-1])[None, :] < vl[:, None]
    X = X.masked_fill(~keep, MASK_VALUE)
    return F.softmax(X.reshape(shape), dim=-1)


class AdditiveAttention(nn.Module):
    def __init__(self, query_size, key_size, num_hiddens, dropout=0.0):
        super().__init__()
        self.W_k = nn.Linear(key_size, num_hiddens, bias=False)
        self.W_q = nn.Linear(query_size, num_hiddens, bias=False)
        self.w_v = nn.Linear(num_hiddens, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens):
        queries, keys = self.W_q(queries), self.W_k(keys)
        features = torch.tanh(queries.unsqueeze(2) + keys.unsqueeze(1))
        scores = self.w_v(features).squeeze(-1)
        self.attention_weights = masked_softmax(scores, valid_lens)
        return torch.bmm(self.dropout(self.attention_weights), values)


class Seq2SeqAttentionDecoder(nn.Module):
    def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0.0):
        super().__init__()
        self.attention = AdditiveAttention(num_hiddens, num_hiddens, num_hiddens, dropout)
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(embed_size + num_hiddens, num_hiddens, num_layers, dropout=dropout)
        self.dense = nn.Linear(num_hiddens, vocab_size)
        self.apply(init_seq2seq)

    def init_state(self, enc_outputs, enc_valid_lens):
        outputs, hidden_state = enc_outputs
        return outputs.permute(1, 0, 2), hidden_state, enc_valid_lens

    def forward(self, X, state):
        enc_outputs, hidden_state, enc_valid_lens = state
        X = self.embedding(X.t().long())
        outputs, self.attention_weights = [], []
        for x in X:
            query = hidden_state[-1].unsqueeze(1)
            context = self.attention(query, enc_outputs, enc_outputs, enc_valid_lens)
            x = torch.cat((context, x.unsqueeze(1)), dim=-1)
            out, hidden_state = self.rnn(x.permute(1, 0, 2), hidden_state)
            outputs.append(out)
            self.attention_weights.append(self.attention.attention_weights)
        outputs = self.dense(torch.cat(outputs, dim=0))
        return outputs.permute(1, 0, 2), [enc_outputs, hidden_state, enc_valid_lens]


def make_bahdanau(src_vocab, tgt_vocab, embed_size, hidden_size, n_layer, dropout=0.0):
    return EncoderDecoder(Seq2SeqEncoder(src_vocab, embed_size, hidden_size, n_layer, dropout),
                          Seq2SeqAttentionDecoder(tgt_vocab, embed_size, hidden_size, n_layer, dropout))
