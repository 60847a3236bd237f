#!/usr/bin/env python3
"""Summarise a seed study written by bench/seed_study.sh (standard library only).

  scripts/seed_summary.py DIR      # prints the markdown tables, writes DIR/results.csv and DIR/results.json

Reads, per model and seed, what each side wrote:
  DIR/d2l/MODEL/{tfm,twin}_seedS.out   `eng => translation, bleu X` for the book's 4 sentences
  DIR/d2l/MODEL/{tfm,twin}_seedS.err   per-epoch `epoch e/E ... loss L` lines (the last one is used)
  DIR/multi30k/tfm_seedS.err           tfm train-mt's epoch lines (`loss L  valid loss V`)
  DIR/multi30k/tfm_seedS.valid         (runs stopped mid-epoch) the checkpoint's valid loss, by the twin
  DIR/multi30k/twin_seedS.json         mt_twin_train.py's train_loss / valid_loss
  DIR/multi30k/{tfm,twin}_seedS.bleu   `tfm bleu` on the greedy translations of val
and reports for each metric mean ± standard error over seeds per side, and tfm − twin with the standard
error of the difference, sqrt(se_tfm² + se_twin²), flagging |difference| > 2 standard errors.
"""
import csv
import glob
import json
import math
import os
import re
import sys

FRA = {"go .": "va !", "i lost .": "j'ai perdu .", "he's calm .": "il est calme .", "i'm home .": "je suis chez moi ."}
SIDES = ('tfm', 'twin')


# ---------------------------------------------------------------- parsing one run
def last_float(path, pattern):
    """the number captured by the last match of pattern in the file (None if the file or match is missing)"""
    if not os.path.exists(path):
        return None
    hits = re.findall(pattern, open(path, encoding='utf-8', errors='replace').read())
    return float(hits[-1]) if hits else None


def d2l_run(out_path, err_path):
    """exact sentences of 4, mean sentence BLEU, final training loss; None if the run did not finish"""
    if not os.path.exists(out_path):
        return None
    exact, bleus = 0, []
    for line in open(out_path, encoding='utf-8'):
        m = re.match(r'^(.*) => (.*), bleu ([0-9.na]+)$', line.rstrip('\n'))
        if m and m.group(1) in FRA:
            exact += m.group(2) == FRA[m.group(1)]
            bleus.append(float(m.group(3)))
    if len(bleus) != 4:
        return None
    return {'exact': exact, 'bleu': sum(bleus) / 4, 'train_loss': last_float(err_path, r'epoch \d+/\d+ .*?loss ([0-9.]+)')}


def multi30k_run(d, side, seed):
    """validation loss, greedy BLEU on val, final training loss; None if the run did not finish"""
    base = os.path.join(d, f'{side}_seed{seed}')
    bleu = last_float(base + '.bleu', r'BLEU = ([0-9.]+)')
    if bleu is None:
        return None
    if side == 'tfm':
        vl = last_float(base + '.err', r'valid loss ([0-9.]+)')
        if vl is None:   # stopped by --max-steps mid-epoch: tfm's checkpoint evaluated by the twin
            vl = last_float(base + '.valid', r'valid loss ([0-9.]+)')
        tl = last_float(base + '.err', r'step \d+/\d+  loss ([0-9.]+)')
    else:
        j = json.load(open(base + '.json'))
        vl, tl = j['valid_loss'], j['train_loss']
    return {'valid_loss': vl, 'bleu': bleu, 'train_loss': tl}


def seeds_in(d):
    return sorted({int(m.group(1)) for f in os.listdir(d) for m in [re.search(r'_seed(\d+)\.', f)] if m})


def collect(root):
    """rows: dicts of study, model, side, seed and the metrics"""
    rows = []
    for mdir in sorted(d for d in glob.glob(os.path.join(root, "d2l", "*")) if os.path.isdir(d)):
        for seed in seeds_in(mdir):
            for side in SIDES:
                r = d2l_run(os.path.join(mdir, f'{side}_seed{seed}.out'), os.path.join(mdir, f'{side}_seed{seed}.err'))
                if r:
                    rows.append(dict(study='d2l', model=os.path.basename(mdir), side=side, seed=seed, **r))
    mdir = os.path.join(root, 'multi30k')
    if os.path.isdir(mdir):
        for seed in seeds_in(mdir):
            for side in SIDES:
                r = multi30k_run(mdir, side, seed)
                if r:
                    rows.append(dict(study='multi30k', model='transformer', side=side, seed=seed, **r))
    return rows


# ---------------------------------------------------------------- statistics
def mean_se(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return None, None, 0
    m = sum(xs) / len(xs)
    if len(xs) < 2:
        return m, None, 1
    return m, math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1) / len(xs)), len(xs)


def fmt(m, se, digits):
    if m is None:
        return '—'
    return f'{m:.{digits}f}' + ('' if se is None else f' ± {se:.{digits}f}')


def compare(rows, metric):
    """per side mean/se/n, and the difference tfm − twin with its standard error"""
    s = {side: mean_se([r[metric] for r in rows if r['side'] == side]) for side in SIDES}
    (mt, st, nt), (mw, sw, nw) = s['tfm'], s['twin']
    diff = se = None
    if mt is not None and mw is not None:
        diff = mt - mw
        se = math.sqrt(st ** 2 + sw ** 2) if st is not None and sw is not None else None
    return s, diff, se


METRICS = {'d2l': [('exact', 'exact sentences of 4', 2), ('bleu', 'mean d2l sentence BLEU', 3),
                   ('train_loss', 'final training loss', 4)],
           'multi30k': [('valid_loss', 'validation loss', 4), ('bleu', 'greedy BLEU, val', 2),
                        ('train_loss', 'final training loss', 4)]}


def table(rows, study):
    out = ['| model | metric | tfm (mean ± SE) | twin (mean ± SE) | tfm − twin (± SE) | seeds tfm / twin | |',
           '| --- | --- | --- | --- | --- | --- | --- |']
    summary = []
    for model in sorted({r['model'] for r in rows if r['study'] == study}):
        mrows = [r for r in rows if r['study'] == study and r['model'] == model]
        for key, label, dg in METRICS[study]:
            s, diff, se = compare(mrows, key)
            flag = '' if diff is None or se is None else ('beyond 2 SE' if abs(diff) > 2 * se else 'within 2 SE')
            out.append(f"| {model} | {label} | {fmt(*s['tfm'][:2], dg)} | {fmt(*s['twin'][:2], dg)} | "
                       f"{fmt(diff, se, dg)} | {s['tfm'][2]} / {s['twin'][2]} | {flag} |")
            summary.append(dict(study=study, model=model, metric=key, tfm_mean=s['tfm'][0], tfm_se=s['tfm'][1],
                                twin_mean=s['twin'][0], twin_se=s['twin'][1], diff=diff, diff_se=se,
                                n_tfm=s['tfm'][2], n_twin=s['twin'][2]))
    return '\n'.join(out), summary


def main():
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        sys.exit('usage: seed_summary.py STUDY_DIR')
    root = sys.argv[1]
    rows = collect(root)
    if not rows:
        sys.exit(f'{root}: no finished runs')
    summary = []
    for study, title in (('d2l', 'd2l fra-eng recipes'), ('multi30k', 'Multi30k, short run')):
        if any(r['study'] == study for r in rows):
            text, s = table(rows, study)
            summary += s
            print(f'### {title}\n\n{text}\n')
    fields = ['study', 'model', 'side', 'seed', 'exact', 'bleu', 'valid_loss', 'train_loss']
    with open(os.path.join(root, 'results.csv'), 'w', newline='') as f:
        w = csv.DictWriter(f, fields, restval='', lineterminator='\n')
        w.writeheader()
        w.writerows(rows)
    with open(os.path.join(root, 'results.json'), 'w') as f:
        json.dump({'runs': rows, 'summary': summary}, f, indent=1)
    print(f'per-seed results: {root}/results.csv, {root}/results.json')


if __name__ == '__main__':
    main()
