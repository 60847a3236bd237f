#!/usr/bin/env python3
"""Independent pure-Python implementation of sacreBLEU 2.x's default chrF (chrF2), used to generate
tests/fixtures/bleu/chrf_expected.txt (sacreBLEU itself is not packaged for Debian). Plain python3,
no packages.

The metric, as sacreBLEU defines it (CHRF() / `sacrebleu -m chrf`; signature
nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no):
  * segment: optional str.lower(), then all whitespace removed (''.join(s.split()));
  * character n-grams (of code points) for n = 1..6, counted with a Counter;
  * per segment and order: [hyp n-grams, ref n-grams, clipped matches]; the hypothesis count is 0
    for an order in which the reference has no n-gram at all;
  * the statistics are summed over the corpus; precision and recall of every order with both counts
    non-zero are averaged (the "effective order"), and chrF = 100 (1+b^2) P R / (b^2 P + R), b = 2.

Usage:
  scripts/chrf_ref.py score HYP REF [--lowercase]   print "chrF2 = xx.xx"
  scripts/chrf_ref.py fixtures OUT_DIR                write OUT_DIR/chrf_expected.txt for the
                                                      hyp.txt/ref.txt pair already in OUT_DIR
  scripts/chrf_ref.py both HYP REF                    "metric lowercase score" rows (6 decimals) for
                                                      BLEU (scripts/sacrebleu_ref.py) and chrF2, cased
                                                      and lowercased: tests/fixtures/bleu/real_expected.txt
"""
import sys
from collections import Counter

ORDER = 6
BETA = 2


def char_ngrams(text, n):
    return Counter(text[i:i + n] for i in range(len(text) - n + 1))


def segment_stats(hyp, ref, lowercase=False):
    if lowercase:
        hyp, ref = hyp.lower(), ref.lower()
    hyp, ref = ''.join(hyp.split()), ''.join(ref.split())
    stats = []
    for n in range(1, ORDER + 1):
        h, r = char_ngrams(hyp, n), char_ngrams(ref, n)
        matches = sum(min(c, r[g]) for g, c in h.items() if g in r)
        n_ref = sum(r.values())
        stats.append((sum(h.values()) if n_ref else 0, n_ref, matches))
    return stats


def chrf_from_stats(stats):
    """stats: list of ORDER (hyp, ref, match). Returns (score, P%, R%)."""
    precs = [m / h for h, r, m in stats if h > 0 and r > 0]
    recs = [m / r for h, r, m in stats if h > 0 and r > 0]
    if not precs:
        return 0.0, 0.0, 0.0
    p, r = sum(precs) / len(precs), sum(recs) / len(recs)
    b2 = BETA * BETA
    score = 100 * (1 + b2) * p * r / (b2 * p + r) if p + r > 0 else 0.0
    return score, 100 * p, 100 * r


def corpus_chrf(hyps, refs, lowercase=False):
    total = [[0, 0, 0] for _ in range(ORDER)]
    for h, r in zip(hyps, refs):
        for k, st in enumerate(segment_stats(h, r, lowercase)):
            for j in range(3):
                total[k][j] += st[j]
    return chrf_from_stats(total)


def read_lines(path):
    with open(path, encoding='utf-8', newline='\n') as f:
        text = f.read()
    lines = text.split('\n')
    if lines and lines[-1] == '':
        lines.pop()
    return [x[:-1] if x.endswith('\r') else x for x in lines]


def make_fixture(out_dir):
    hyps, refs = read_lines(f'{out_dir}/hyp.txt'), read_lines(f'{out_dir}/ref.txt')
    assert len(hyps) == len(refs), 'hyp.txt and ref.txt differ in length'
    n = len(hyps)
    spans = [(0, n)] + [(i, min(n, i + 10)) for i in range(0, n, 10)] + [(i, i + 1) for i in range(60)]
    spans += [(i, i + 1) for i in range(n - 14, n)]
    rows = []
    for lc in (0, 1):
        for a, b in spans:
            s, p, r = corpus_chrf(hyps[a:b], refs[a:b], bool(lc))
            rows.append(f'{a} {b} {lc} {s:.6f} {p:.6f} {r:.6f}')
    with open(f'{out_dir}/chrf_expected.txt', 'w', encoding='utf-8', newline='\n') as f:
        f.write('# start end lowercase chrF2 P R  (lines [start,end) of hyp.txt/ref.txt; scripts/chrf_ref.py)\n')
        f.write('\n'.join(rows) + '\n')
    print(f'wrote {len(rows)} expected chrF2 scores; corpus chrF2 = {corpus_chrf(hyps, refs)[0]:.2f}')


def main(argv):
    if len(argv) >= 3 and argv[0] == 'score':
        s, _, _ = corpus_chrf(read_lines(argv[1]), read_lines(argv[2]), '--lowercase' in argv[3:])
        print(f'chrF2 = {s:.2f}')
    elif len(argv) == 2 and argv[0] == 'fixtures':
        make_fixture(argv[1])
    elif len(argv) == 3 and argv[0] == 'both':
        sys.path.insert(0, __import__('os').path.dirname(__import__('os').path.abspath(__file__)))
        import sacrebleu_ref
        hyps, refs = read_lines(argv[1]), read_lines(argv[2])
        assert len(hyps) == len(refs), 'line counts differ'
        print(f'# metric lowercase score  ({argv[1]} vs {argv[2]}; scripts/chrf_ref.py both)')
        for lc in (0, 1):
            print(f'bleu {lc} {sacrebleu_ref.corpus_bleu(hyps, refs, bool(lc))[0]:.6f}')
        for lc in (0, 1):
            print(f'chrf {lc} {corpus_chrf(hyps, refs, bool(lc))[0]:.6f}')
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
