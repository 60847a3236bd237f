"""MBR experiment: pick from an n-best list the candidate with the highest expected sentence-BLEU against the
others. usage: mbr.py NBEST [--temp T] [--k K] > hyp"""
import math, re, sys
from collections import Counter, defaultdict

def tok13a(s):
    s = s.replace('&quot;', '"').replace('&amp;', '&').replace('&lt;', '<').replace('&gt;', '>')
    s = " %s " % s
    s = re.sub(r'([\{-\~\[-\` -\&\(-\+\:-\@\/])', r' \1 ', s)
    s = re.sub(r'([^0-9])([\.,])', r'\1 \2 ', s)
    s = re.sub(r'([\.,])([^0-9])', r' \1 \2', s)
    s = re.sub(r'([0-9])(-)', r'\1 \2 ', s)
    return s.split()

def ngrams(t):
    return [Counter(tuple(t[i:i + n]) for i in range(len(t) - n + 1)) for n in range(1, 5)]

def sbleu(h, hn, r, rn):
    if not h: return 0.0
    logp, k = 0.0, 1
    for n in range(4):
        tot = max(len(h) - n, 0)
        if tot == 0:
            return 0.0 if n == 0 else math.exp(logp / n) * min(1, math.exp(1 - len(r) / len(h)))  # unreachable-ish
        m = sum(min(c, rn[n][g]) for g, c in hn[n].items())
        if m == 0:
            k *= 2; p = 1.0 / (k * tot)
        else:
            p = m / tot
        logp += math.log(p)
    bp = 1.0 if len(h) >= len(r) else math.exp(1 - len(r) / len(h))
    return bp * math.exp(logp / 4)

def main():
    path = sys.argv[1]; temp = 1.0; K = 100; lenpen = 0
    a = sys.argv[2:]
    for i in range(0, len(a), 2):
        if a[i] == '--temp': temp = float(a[i + 1])
        if a[i] == '--k': K = int(a[i + 1])
    groups = defaultdict(list)
    for line in open(path, encoding='utf-8'):
        i, text, score = line.rstrip('\n').split(' ||| ')
        if len(groups[int(i)]) < K: groups[int(i)].append((text, float(score)))
    for i in range(len(groups)):
        cands = groups[i]
        # merge duplicates: weights summed
        w = defaultdict(float)
        mx = max(s for _, s in cands)
        for t, s in cands:
            w[t] += math.exp((s - mx) * temp) if temp > 0 else 1.0
        texts = list(w)
        z = sum(w.values())
        toks = [tok13a(t) for t in texts]
        ngs = [ngrams(t) for t in toks]
        best, bu = texts[0], -1
        for a_ in range(len(texts)):
            u = sum(w[texts[b]] / z * sbleu(toks[a_], ngs[a_], toks[b], ngs[b]) for b in range(len(texts)))
            if u > bu: bu, best = u, texts[a_]
        print(best)

main()
