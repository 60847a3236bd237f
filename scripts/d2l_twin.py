#!/usr/bin/python3
"""The d2l book's fra-eng translators in PyTorch, trained the book's way: the other side of
bench/seed_study.sh (tfm train-mt --loss-norm d2l --d2l-examples is the tfm side).

  /usr/bin/python3 scripts/d2l_twin.py --arch transformer|rnn|bahdanau --seed S [--epochs E] [--threads T]
      [--check-dump PREFIX]

Built to the book's code (d2l.ai, "Machine Translation and the Dataset", "Encoder-Decoder Seq2Seq",
"Bahdanau Attention", "The Transformer Architecture"), not to tfm's:
  data    preprocess_nmt (non-breaking spaces -> ' ', lowercase, a space before , . ! ? after a non-space),
          tokenize_nmt (split on ' ', empty tokens skipped as in the second edition), the first
          --num-examples pairs (the book's loop `if i > num_examples: break` reads one more pair; tfm and
          this twin both take exactly 600), Vocab(min_freq=2, reserved ['<pad>', '<bos>', '<eos>'],
          '<unk>' first, tokens by falling frequency), build_array_nmt (+<eos>, truncate/pad to
          num_steps, valid_len = non-pad count), a DataLoader with shuffle=True (torch's RNG).
  models  the book's TransformerEncoder/Decoder (transformer_twin.Transformer is that structure under
          tfm's parameter names), Seq2SeqEncoder/Seq2SeqDecoder (gru_twin; the second edition's decoder,
          whose context is the encoder's last output also when predicting, like tfm's) and
          Seq2SeqAttentionDecoder with AdditiveAttention (bahdanau_twin); every batch padded to
          num_steps, so the GRU encoder runs over the padding as in the book.
  init    the book's xavier_init_weights: xavier_uniform_ on every nn.Linear weight and GRU weight;
          biases, embeddings N(0, 1) and LayerNorm stay at PyTorch's defaults.
  loss    MaskedSoftmaxCELoss (per sentence: the sum of its valid-token losses / num_steps),
          l.sum().backward(), grad_clipping(net, 1), Adam(lr).
  output  what tfm's --d2l-examples prints: `eng => translation, bleu X` for the book's 4 sentences
          (the book's predict_seq2seq: one sentence, padded to num_steps, greedy, at most num_steps
          tokens; the book's bleu with k=2), and per epoch `epoch e/E  loss L` on stderr with L the
          token-mean cross-entropy of the epoch (what tfm prints; the book's own printed loss is L /
          num_steps and is shown as `d2l loss`).
One deliberate difference from the book's predict_seq2seq: the Transformer decoder adds the positional
encoding of each step's position (the book's code adds position 0's at every step of prediction, a
known bug); tfm decodes with the correct positions too.
"""
import argparse
import collections
import math
import os
import sys

import torch
import torch.nn as nn
import torch.utils.data as tud

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bahdanau_twin import make_bahdanau  # noqa: E402
from gru_twin import make_rnn  # noqa: E402
from transformer_twin import Transformer  # noqa: E402

ENG = ["go .", "i lost .", "he's calm .", "i'm home ."]
FRA = ["va !", "j'ai perdu .", "il est calme .", "je suis chez moi ."]

# The recipes of docs/RECIPES.md (the same flags tfm gets in bench/seed_study.sh).
RECIPES = {
    'transformer': dict(d_model=32, n_layer=2, n_head=4, ffn=64, dropout=0.2, epochs=200),
    'rnn': dict(embed_size=32, hidden_size=32, n_layer=2, dropout=0.1, epochs=300),
    'bahdanau': dict(embed_size=32, hidden_size=32, n_layer=2, dropout=0.1, epochs=300),
}


# ---------------------------------------------------------------- data (the book's pipeline)
def preprocess_nmt(text):
    """d2l preprocess_nmt: non-breaking spaces -> ' ', lowercase, a space before , . ! ? after a non-space."""
    text = text.replace('\u202f', ' ').replace('\xa0', ' ').lower()
    out = [' ' + c if i > 0 and c in ',.!?' and text[i - 1] != ' ' else c for i, c in enumerate(text)]
    return ''.join(out)


def tokenize_nmt(text, num_examples):
    """d2l tokenize_nmt on the first num_examples two-column lines (empty tokens skipped)."""
    source, target = [], []
    for line in text.split('\n'):
        if num_examples and len(source) >= num_examples:
            break
        parts = line.split('\t')
        if len(parts) == 2:
            source.append([t for t in parts[0].split(' ') if t])
            target.append([t for t in parts[1].split(' ') if t])
    return source, target


class Vocab:
    """d2l Vocab: '<unk>' = 0, then the reserved tokens, then tokens with count >= min_freq by falling
    count (ties in first-seen order: Python's stable sort of the Counter)."""

    def __init__(self, tokens, min_freq, reserved_tokens):
        counter = collections.Counter(t for line in tokens for t in line)
        self.token_freqs = sorted(counter.items(), key=lambda x: x[1], reverse=True)
        self.idx_to_token = ['<unk>'] + reserved_tokens
        self.token_to_idx = {t: i for i, t in enumerate(self.idx_to_token)}
        for token, freq in self.token_freqs:
            if freq < min_freq:
                break
            if token not in self.token_to_idx:
                self.idx_to_token.append(token)
                self.token_to_idx[token] = len(self.idx_to_token) - 1

    def __len__(self):
        return len(self.idx_to_token)

    def __getitem__(self, tokens):
        if isinstance(tokens, str):
            return self.token_to_idx.get(tokens, 0)
        return [self[t] for t in tokens]

    def to_tokens(self, ids):
        return [self.idx_to_token[i] for i in ids]


def truncate_pad(line, num_steps, padding_token):
    return line[:num_steps] if len(line) > num_steps else line + [padding_token] * (num_steps - len(line))


def build_array_nmt(lines, vocab, num_steps):
    """ids + <eos>, truncated / padded to num_steps; valid_len = number of non-<pad> ids."""
    rows = [truncate_pad(vocab[line] + [vocab['<eos>']], num_steps, vocab['<pad>']) for line in lines]
    array = torch.tensor(rows, dtype=torch.long)
    return array, (array != vocab['<pad>']).type(torch.int32).sum(1)


def load_data_nmt(path, num_examples, num_steps, min_freq):
    with open(path, encoding='utf-8') as f:
        source, target = tokenize_nmt(preprocess_nmt(f.read()), num_examples)
    reserved = ['<pad>', '<bos>', '<eos>']
    src_vocab, tgt_vocab = Vocab(source, min_freq, reserved), Vocab(target, min_freq, reserved)
    src, src_valid = build_array_nmt(source, src_vocab, num_steps)
    tgt, tgt_valid = build_array_nmt(target, tgt_vocab, num_steps)
    return (src, src_valid, tgt, tgt_valid), src_vocab, tgt_vocab, (source, target)


def check_dump(prefix, tokens, src_vocab, tgt_vocab):
    """Compare this pipeline with `tfm train-mt --preprocess d2l --dump-data PREFIX`: the same tokenized
    sentences and the same vocabulary (as sets: the two number their tokens differently)."""
    def read_lines(p):
        with open(p, encoding='utf-8') as f:
            return [[t for t in line.split(' ') if t] for line in f.read().split('\n')[:-1]]

    def vocab_set(p):
        with open(p, encoding='utf-8') as f:
            return set(f.read().split('\n')[:-1]) - {'<pad>', '<bos>', '<eos>', '<unk>'}
    for side, mine, v in (('src', tokens[0], src_vocab), ('tgt', tokens[1], tgt_vocab)):
        theirs = read_lines(f'{prefix}.train.{side}')
        if theirs != mine:
            bad = next((i for i, (a, b) in enumerate(zip(mine, theirs)) if a != b), min(len(mine), len(theirs)))
            sys.exit(f'check-dump: {side} sentences differ from tfm\'s (first at pair {bad + 1}; '
                     f'{len(mine)} vs {len(theirs)} pairs)')
        if vocab_set(f'{prefix}.{side}.vocab') != set(v.idx_to_token[4:]):
            sys.exit(f'check-dump: {side} vocabulary differs from tfm\'s')
    print(f'check-dump: {len(tokens[0])} pairs and both vocabularies ({len(src_vocab)} / {len(tgt_vocab)} '
          'tokens) equal tfm\'s', file=sys.stderr)


# ---------------------------------------------------------------- models
def xavier_init_weights(m):
    """d2l train_seq2seq's init."""
    if type(m) == nn.Linear:
        nn.init.xavier_uniform_(m.weight)
    if type(m) == nn.GRU:
        for name in m._flat_weights_names:
            if 'weight' in name:
                nn.init.xavier_uniform_(m._parameters[name])


def make_model(arch, r, src_vocab, tgt_vocab, num_steps):
    if arch == 'transformer':
        cfg = dict(src_vocab=src_vocab, tgt_vocab=tgt_vocab, d_model=r['d_model'], n_head=r['n_head'],
                   ffn=r['ffn'], n_layer=r['n_layer'], dropout=r['dropout'], pre_ln=0, max_len=1000)
        net = Transformer(cfg)
    elif arch == 'rnn':
        net = make_rnn(src_vocab, tgt_vocab, r['embed_size'], r['hidden_size'], r['n_layer'], r['dropout'])
    else:
        net = make_bahdanau(src_vocab, tgt_vocab, r['embed_size'], r['hidden_size'], r['n_layer'], r['dropout'])
    net.apply(xavier_init_weights)
    return net


# ---------------------------------------------------------------- training (the book's train_seq2seq)
def sequence_mask(X, valid_len, value=0):
    keep = torch.arange(X.size(1), dtype=torch.float32)[None, :] < valid_len[:, None]
    X[~keep] = value
    return X


class MaskedSoftmaxCELoss(nn.CrossEntropyLoss):
    """per sentence: the mean over num_steps of the masked token losses"""

    def forward(self, pred, label, valid_len):
        weights = sequence_mask(torch.ones_like(label), valid_len)
        self.reduction = 'none'
        unweighted = super().forward(pred.permute(0, 2, 1), label)
        return (unweighted * weights).mean(dim=1)


def grad_clipping(net, theta):
    params = [p for p in net.parameters() if p.requires_grad]
    norm = torch.sqrt(sum(torch.sum(p.grad ** 2) for p in params))
    if norm > theta:
        for p in params:
            p.grad[:] *= theta / norm


def train_seq2seq(net, data_iter, lr, num_epochs, tgt_vocab, num_steps):
    """Returns the token-mean cross-entropy of the last epoch (prints every epoch's on stderr)."""
    optimizer = torch.optim.Adam(net.parameters(), lr=lr)
    loss = MaskedSoftmaxCELoss()
    net.train()
    last = float('nan')
    for epoch in range(num_epochs):
        loss_sum, n_tokens = 0.0, 0
        for X, X_valid_len, Y, Y_valid_len in data_iter:
            optimizer.zero_grad()
            bos = torch.tensor([tgt_vocab['<bos>']] * Y.shape[0]).reshape(-1, 1)
            dec_input = torch.cat([bos, Y[:, :-1]], 1)   # teacher forcing
            Y_hat = net(X, X_valid_len, dec_input)   # (B, num_steps, V)
            l = loss(Y_hat, Y, Y_valid_len)
            l.sum().backward()
            grad_clipping(net, 1)
            optimizer.step()
            loss_sum += float(l.sum()) * num_steps   # the valid-token losses of the batch, summed
            n_tokens += int(Y_valid_len.sum())
        last = loss_sum / n_tokens
        print(f'epoch {epoch + 1}/{num_epochs}  loss {last:.4f}  d2l loss {last / num_steps:.4f}', file=sys.stderr,
              flush=True)
    return last


# ---------------------------------------------------------------- prediction and the book's bleu
def decoder_step(net, arch, dec_X, state):
    """one greedy step: logits (1, 1, V) and the new state"""
    if arch == 'transformer':
        return net.decoder(dec_X, state, incremental=True), state
    return net.decoder(dec_X, state)


@torch.no_grad()
def predict_seq2seq(net, arch, src_sentence, src_vocab, tgt_vocab, num_steps):
    """the book's predict_seq2seq: padded source, greedy, at most num_steps tokens"""
    net.eval()
    src_tokens = src_vocab[src_sentence.lower().split(' ')] + [src_vocab['<eos>']]
    enc_valid_len = torch.tensor([len(src_tokens)])
    enc_X = torch.tensor([truncate_pad(src_tokens, num_steps, src_vocab['<pad>'])], dtype=torch.long)
    state = net.decoder.init_state(net.encoder(enc_X, enc_valid_len), enc_valid_len)
    dec_X = torch.tensor([[tgt_vocab['<bos>']]], dtype=torch.long)
    output_seq = []
    for _ in range(num_steps):
        Y, state = decoder_step(net, arch, dec_X, state)
        dec_X = Y.argmax(dim=2)
        pred = int(dec_X.squeeze(dim=0).item())
        if pred == tgt_vocab['<eos>']:
            break
        output_seq.append(pred)
    return ' '.join(tgt_vocab.to_tokens(output_seq))


def bleu(pred_seq, label_seq, k):
    """the book's bleu; n-gram orders longer than the prediction are skipped (the book's code divides by
    zero there; tfm_bleu_d2l skips them the same way)"""
    pred_tokens, label_tokens = pred_seq.split(' '), label_seq.split(' ')
    len_pred, len_label = len(pred_tokens), len(label_tokens)
    score = math.exp(min(0, 1 - len_label / len_pred))
    for n in range(1, min(k, len_pred) + 1):
        num_matches, label_subs = 0, collections.defaultdict(int)
        for i in range(len_label - n + 1):
            label_subs[' '.join(label_tokens[i: i + n])] += 1
        for i in range(len_pred - n + 1):
            if label_subs[' '.join(pred_tokens[i: i + n])] > 0:
                num_matches += 1
                label_subs[' '.join(pred_tokens[i: i + n])] -= 1
        score *= math.pow(num_matches / (len_pred - n + 1), math.pow(0.5, n))
    return score


def print_examples(net, arch, src_vocab, tgt_vocab, num_steps):
    for eng, fra in zip(ENG, FRA):
        translation = predict_seq2seq(net, arch, eng, src_vocab, tgt_vocab, num_steps)
        print(f'{eng} => {translation}, bleu {bleu(translation, fra, k=2):.3f}', flush=True)


# ---------------------------------------------------------------- main
def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--arch', choices=sorted(RECIPES), required=True)
    ap.add_argument('--data', default='../shared/data/fra-eng/fra.txt')
    ap.add_argument('--num-examples', type=int, default=600)
    ap.add_argument('--num-steps', type=int, default=10)
    ap.add_argument('--min-freq', type=int, default=2)
    ap.add_argument('--batch-size', type=int, default=64)
    ap.add_argument('--lr', type=float, default=0.005)
    ap.add_argument('--epochs', type=int, default=0, help="0 = the recipe's (200 transformer, 300 rnn/bahdanau)")
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--threads', type=int, default=1)
    ap.add_argument('--check-dump', metavar='PREFIX', help='compare the data with tfm train-mt --dump-data PREFIX')
    ap.add_argument('--check-only', action='store_true', help='stop after --check-dump')
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)   # the twin's own random numbers: init, shuffling, dropout
    arrays, src_vocab, tgt_vocab, tokens = load_data_nmt(a.data, a.num_examples, a.num_steps, a.min_freq)
    if a.check_dump:
        check_dump(a.check_dump, tokens, src_vocab, tgt_vocab)
    if a.check_only:
        return
    data_iter = tud.DataLoader(tud.TensorDataset(*arrays), a.batch_size, shuffle=True)
    r = RECIPES[a.arch]
    net = make_model(a.arch, r, len(src_vocab), len(tgt_vocab), a.num_steps)
    train_seq2seq(net, data_iter, a.lr, a.epochs or r['epochs'], tgt_vocab, a.num_steps)
    print_examples(net, a.arch, src_vocab, tgt_vocab, a.num_steps)


if __name__ == '__main__':
    main()
