#!/usr/bin/env python3
"""Independent pure-Python re-implementation of sacreBLEU's default corpus BLEU, used to generate the
expected values in tests/fixtures/bleu/ (sacreBLEU itself is not packaged for Debian).

Written from sacreBLEU's documented algorithm (BLEU+case.mixed+eff.no+tok.13a+smooth.exp, v2.x):
  * segment preprocessing: optional str.lower(), then str.rstrip();
  * 13a tokenizer: remove "<skipped>", join "-\\n", "\\n" -> " ", unescape &quot; &amp; &lt; &gt;
    (in that order), pad with one space on each side, then four regex substitutions
      1. every ASCII punctuation char except ' , - .  gets a space on both sides
      2. '.' or ',' preceded by a non-digit is split off
      3. '.' or ',' followed by a non-digit is split off
      4. '-' preceded by a digit is split off
    and finally ' '.join(line.split());
  * per segment: clipped n-gram matches for n = 1..4 and the closest reference length;
  * corpus: precisions with 'exp' smoothing, brevity penalty, geometric mean; 0 if nothing matched.
This file uses Python's `re` (the C port in src/eval/bleu.c scans bytes), so agreeing with it checks
the port, not just the arithmetic.

Usage:
  scripts/sacrebleu_ref.py score HYP REF [--lowercase]    print the sacreBLEU-style line
  scripts/sacrebleu_ref.py fixtures OUT_DIR                 regenerate tests/fixtures/bleu/
"""
import math
import random
import re
import sys
from collections import Counter

# ---------------------------------------------------------------- 13a
_PUNCT = re.compile(r'([\{-\~\[-\` -\&\(-\+\:-\@\/])')
_PERIOD_COMMA_AFTER_NONDIGIT = re.compile(r'([^0-9])([\.,])')
_PERIOD_COMMA_BEFORE_NONDIGIT = re.compile(r'([\.,])([^0-9])')
_DASH_AFTER_DIGIT = re.compile(r'([0-9])(-)')


def tok13a(line):
    for a, b in (('<skipped>', ''), ('-\n', ''), ('\n', ' '), ('&quot;', '"'),
                 ('&amp;', '&'), ('&lt;', '<'), ('&gt;', '>')):
        line = line.replace(a, b)
    line = ' ' + line + ' '
    line = _PUNCT.sub(r' \1 ', line)
    line = _PERIOD_COMMA_AFTER_NONDIGIT.sub(r'\1 \2 ', line)
    line = _PERIOD_COMMA_BEFORE_NONDIGIT.sub(r' \1 \2', line)
    line = _DASH_AFTER_DIGIT.sub(r'\1 \2 ', line)
    return ' '.join(line.split())


# ---------------------------------------------------------------- statistics
def ngrams(tokens, max_n=4):
    c = Counter()
    for n in range(1, max_n + 1):
        for i in range(len(tokens) - n + 1):
            c[tuple(tokens[i:i + n])] += 1
    return c


def segment_stats(hyp, refs, lowercase=False, max_n=4):
    def prep(s):
        if lowercase:
            s = s.lower()
        return tok13a(s.rstrip()).split()
    h = prep(hyp)
    ref_toks = [prep(r) for r in refs]
    ref_counts = Counter()
    for rt in ref_toks:
        for g, k in ngrams(rt, max_n).items():
            ref_counts[g] = max(ref_counts[g], k)
    best = None
    for rt in ref_toks:  # closest length, ties -> shorter
        d = abs(len(h) - len(rt))
        if best is None or d < best[0] or (d == best[0] and len(rt) < best[1]):
            best = (d, len(rt))
    correct = [0] * max_n
    total = [0] * max_n
    for g, k in ngrams(h, max_n).items():
        total[len(g) - 1] += k
        correct[len(g) - 1] += min(k, ref_counts.get(g, 0))
    return [len(h), best[1]] + correct + total


def score_from_stats(st, max_n=4):
    hyp_len, ref_len = st[0], st[1]
    correct, total = st[2:2 + max_n], st[2 + max_n:]
    if hyp_len < ref_len:
        bp = math.exp(1 - ref_len / hyp_len) if hyp_len > 0 else 0.0
    else:
        bp = 1.0
    prec = [0.0] * max_n
    if not any(correct):
        return 0.0, prec, bp, hyp_len, ref_len
    smooth = 1.0
    for n in range(1, max_n + 1):
        if total[n - 1] == 0:
            break
        if correct[n - 1] == 0:
            smooth *= 2
            prec[n - 1] = 100.0 / (smooth * total[n - 1])
        else:
            prec[n - 1] = 100.0 * correct[n - 1] / total[n - 1]
    logs = [math.log(p) if p > 0 else -9999999999 for p in prec]
    return bp * math.exp(sum(logs) / max_n), prec, bp, hyp_len, ref_len


def corpus_bleu(hyps, refs, lowercase=False):
    acc = [0] * 10
    for h, r in zip(hyps, refs):
        acc = [a + b for a, b in zip(acc, segment_stats(h, [r], lowercase))]
    return score_from_stats(acc)


def fmt(res):
    s, p, bp, hl, rl = res
    ratio = hl / rl if rl else 0
    return (f"BLEU = {s:.2f} {'/'.join(f'{x:.1f}' for x in p)} (BP = {bp:.3f} ratio = {ratio:.3f} "
            f"hyp_len = {hl:d} ref_len = {rl:d})")


# ---------------------------------------------------------------- fixtures
TRICKY = [
    'Hello, world!',
    'It costs $3.50, or 3,50 EUR.',
    'The 1990-2000 era; pages 10-20 and well-known.',
    'A&B &amp; C &quot;quoted&quot; &lt;tag&gt; &amp;quot;',
    'no-\nbreak <skipped> here',
    'e.g. U.S.A., etc...',
    'x.y,z 1.2.3 a.1 1.a ,start .start end. end,',
    "Don't stop: (really) [sure] {ok} @home #tag 50% a+b=c ~tilde ^caret |pipe \\back `tick_",
    'Zürich, Straße: „Anführungszeichen“ und «guillemets» — ok…',
    'tab\there  and\u00a0nbsp\u202fnarrow\u2009thin\u3000ideo',
    '   leading and trailing   \t ',
    '3-4 -5 a-b 7--8 9-',
    '',
    'C\'est l\'été, n\'est-ce pas ?',
    '1,000,000.00 2.5. 3,',
]


def perturb(rng, words, vocab):
    w = list(words)
    for _ in range(rng.randint(0, 4)):
        op = rng.random()
        if not w:
            break
        i = rng.randrange(len(w))
        if op < 0.25:
            del w[i]
        elif op < 0.45:
            w[i] = rng.choice(vocab)
        elif op < 0.6 and i + 1 < len(w):
            w[i], w[i + 1] = w[i + 1], w[i]
        elif op < 0.7:
            w[i] = w[i].upper() if rng.random() < 0.5 else w[i].lower()
        elif op < 0.8:
            w.insert(i, rng.choice(['&quot;', '&amp;', '3-4', '1,5', '(', ')', '-', '...', 'U.S.', '"', ',']))
        else:
            w = w[:max(1, len(w) - rng.randint(1, 3))]
    return ' '.join(w)


def make_fixtures(out_dir, data_dir='../shared/data/multi30k'):
    rng = random.Random(1234)
    refs_en = open(f'{data_dir}/test_2016_flickr.en', encoding='utf-8').read().split('\n')[:1000]
    refs_de = open(f'{data_dir}/test_2016_flickr.de', encoding='utf-8').read().split('\n')[:1000]
    pool = [(r, 'en') for r in refs_en[:200]] + [(r, 'de') for r in refs_de[:100]]
    vocab = sorted({w for r, _ in pool for w in r.split()})
    hyps, refs = [], []
    for r, _ in pool:
        refs.append(r)
        hyps.append(perturb(rng, r.split(), vocab))
    # a few hand-made extremes: empty hypothesis, identical, tricky text on both sides
    hyps[5] = ''
    hyps[6] = refs[6]
    for k, t in enumerate(TRICKY):
        if '\n' in t:
            continue
        refs.append(t)
        hyps.append(perturb(rng, t.split(' '), vocab) if k % 2 else t)
    with open(f'{out_dir}/hyp.txt', 'w', encoding='utf-8', newline='\n') as f:
        f.write('\n'.join(hyps) + '\n')
    with open(f'{out_dir}/ref.txt', 'w', encoding='utf-8', newline='\n') as f:
        f.write('\n'.join(refs) + '\n')
    # expected scores: "start end lowercase score p1 p2 p3 p4 bp hyp_len ref_len"
    rows = []
    n = len(hyps)
    spans = [(0, n)] + [(i, min(n, i + 10)) for i in range(0, n, 10)] + [(i, i + 1) for i in range(60)]
    spans += [(i, i + 1) for i in range(n - len(TRICKY) + 1, n)]
    for lc in (0, 1):
        for a, b in spans:
            s, p, bp, hl, rl = corpus_bleu(hyps[a:b], refs[a:b], bool(lc))
            rows.append(f'{a} {b} {lc} {s:.6f} ' + ' '.join(f'{x:.6f}' for x in p) + f' {bp:.6f} {hl} {rl}')
    with open(f'{out_dir}/expected.txt', 'w', encoding='utf-8', newline='\n') as f:
        f.write('# start end lowercase score p1 p2 p3 p4 bp hyp_len ref_len  (lines [start,end) of hyp.txt/ref.txt)\n')
        f.write('\n'.join(rows) + '\n')
    # expected 13a tokenization of every line of both files and the tricky strings (line i -> line i)
    inputs = hyps + refs + [t.replace('\n', ' ') for t in TRICKY]
    with open(f'{out_dir}/tok_in.txt', 'w', encoding='utf-8', newline='\n') as f:
        f.write('\n'.join(inputs) + '\n')
    with open(f'{out_dir}/tok_out.txt', 'w', encoding='utf-8', newline='\n') as f:
        f.write('\n'.join(tok13a(x) for x in inputs) + '\n')
    print(f'wrote {n} pairs, {len(rows)} expected scores, {len(inputs)} tokenizations; corpus: '
          + fmt(corpus_bleu(hyps, refs)))


def read_lines(path):
    text = open(path, encoding='utf-8', newline='').read()
    lines = text.split('\n')
    if lines and lines[-1] == '':
        lines.pop()
    return [l[:-1] if l.endswith('\r') else l for l in lines]


if __name__ == '__main__':
    if len(sys.argv) >= 4 and sys.argv[1] == 'score':
        h, r = read_lines(sys.argv[2]), read_lines(sys.argv[3])
        if len(h) != len(r):
            sys.exit(f'line counts differ: {len(h)} vs {len(r)}')
        print(fmt(corpus_bleu(h, r, '--lowercase' in sys.argv[4:])))
    elif len(sys.argv) == 3 and sys.argv[1] == 'fixtures':
        make_fixtures(sys.argv[2])
    else:
        sys.exit(__doc__)
