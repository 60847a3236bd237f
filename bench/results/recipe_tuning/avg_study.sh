#!/usr/bin/env bash
# averaging schemes over dense checkpoints (every 34 steps) of one run, scored on val (beam 5, alpha 1)
set -u
T=${T:-/work/recipe/tfm_4e020a8} dir=$1 D=/work/main/../shared/data/multi30k thr=${THR:-2}
last=3808
score() {  # name, steps...
    local name=$1; shift; local files=()
    for s in "$@"; do files+=("$dir/train.step$s.tfm"); done
    if [ ${#files[@]} -gt 1 ]; then $T average -o /tmp/avg_$$.tfm "${files[@]}" >/dev/null 2>&1 || { echo "$name: average failed"; return; }; m=/tmp/avg_$$.tfm; else m=${files[0]}; fi
    $T translate $m --beam 5 --alpha 1 --threads $thr < $D/val.de > /tmp/hyp_$$.en 2>/dev/null
    echo "$name ($# ckpts): $($T bleu /tmp/hyp_$$.en $D/val.en | head -1)"
}
seqsteps() { local n=$1 every=$2; for ((i=n-1;i>=0;i--)); do echo $((last - i*every)); done; }
score "epochs 14-16 (recipe)" $(seqsteps 3 238)
score "epochs 15-16" $(seqsteps 2 238)
score "epochs 13-16" $(seqsteps 4 238)
for n in 7 14 21 28 35 42; do score "dense last $n x34 steps" $(seqsteps $n 34); done
score "dense last 11 x68 (same span as 21)" $(seqsteps 11 68)
