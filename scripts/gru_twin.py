#!/usr/bin/python3
"""PyTorch twin of tfm's RNN translators (src/models/rnn_seq2seq.c, src/models/bahdanau.c):
d2l's Seq2SeqEncoder / Seq2SeqDecoder (this file) with nn.GRU, same parameter names as the C model
(encoder.embedding.weight, encoder.rnn.weight_ih_l0, ..., decoder.dense.weight), same forward.
The Bahdanau decoder is in bahdanau_twin.py.

  encoder:  embs = embedding(src^T) (Ts,B,E);  outputs, state = GRU(embs)
  decoder:  context = outputs[-1] (the top layer at the last source step, padding included, as in d2l)
            x_t = [embedding(y_t) ; context];  GRU from the encoder's final state;  dense to vocab
  loss:     cross-entropy over non-<pad> target positions (mean), <pad> = 0
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

PAD, BOS, EOS, UNK = 0, 1, 2, 3


def init_seq2seq(module):
    """d2l's init: Xavier-uniform Linear and GRU weights."""
    if type(module) == nn.Linear:
        nn.init.xavier_uniform_(module.weight)
    if type(module) == nn.GRU:
        for name in module._flat_weights_names:
            if 'weight' in name:
                nn.init.xavier_uniform_(module._parameters[name])


class Seq2SeqEncoder(nn.Module):
    def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0.0):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(embed_size, num_hiddens, num_layers, dropout=dropout)
        self.apply(init_seq2seq)

    def forward(self, X, valid_lens=None):
        embs = self.embedding(X.t().long())            # (Ts,B,E)
        outputs, state = self.rnn(embs)                 # (Ts,B,H), (L,B,H)
        return outputs, state


class Seq2SeqDecoder(nn.Module):
    def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0.0):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(embed_size + num_hiddens, num_hiddens, num_layers, dropout=dropout)
        self.dense = nn.Linear(num_hiddens, vocab_size)
        self.apply(init_seq2seq)

    def init_state(self, enc_all_outputs, enc_valid_lens=None):
        return enc_all_outputs

    def forward(self, X, state):
        embs = self.embedding(X.t().long())            # (T,B,E)
        enc_output, hidden_state = state
        context = enc_output[-1].repeat(embs.shape[0], 1, 1)
        outputs, hidden_state = self.rnn(torch.cat((embs, context), -1), hidden_state)
        return self.dense(outputs).swapaxes(0, 1), [enc_output, hidden_state]


class EncoderDecoder(nn.Module):
    def __init__(self, encoder, decoder):
        super().__init__()
        self.encoder, self.decoder = encoder, decoder

    def forward(self, src, src_valid, dec_in):
        enc = self.encoder(src, src_valid)
        state = self.decoder.init_state(enc, src_valid)
        return self.decoder(dec_in, state)[0]


def shift_right(tgt):
    """decoder input: <bos> + target shifted right"""
    return torch.cat([torch.full((tgt.shape[0], 1), BOS, dtype=tgt.dtype), tgt[:, :-1]], 1)


def masked_ce(logits, tgt):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1).long(), ignore_index=PAD)


def make_rnn(src_vocab, tgt_vocab, embed_size, hidden_size, n_layer, dropout=0.0):
    return EncoderDecoder(Seq2SeqEncoder(src_vocab, embed_size, hidden_size, n_layer, dropout),
                          Seq2SeqDecoder(tgt_vocab, embed_size, hidden_size, n_layer, dropout))
