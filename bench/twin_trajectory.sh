#!/usr/bin/env bash
# tfm and its PyTorch twin on the same trajectory (issue 14's open Multi30k row): both start from tfm's
# initial weights and see tfm's batches in tfm's order (the twin's --init-tfm / --tfm-order), so with
# dropout 0 the only differences left are floating-point ones. Prints the per-step training losses side by
# side (every 25th step), their mean difference per 50 steps, and the validation loss of both after STEPS
# steps (computed by the same Python code for both). A float-level control: tfm again with TFM_ISA=generic.
#
#   bench/twin_trajectory.sh [--steps 300] [--seed 1] [--dropout 0] [--out DIR] [--no-control]
#
# Configuration: the seed study's Multi30k Transformer (bench/seed_study.sh multi30k). Takes about 3 min
# (tfm), 3 min (twin) and 6 min (the generic-kernel control) on a 2-core Zen 3 for 300 steps.
set -euo pipefail
cd "$(dirname "$0")/.."
steps=300 seed=1 drop=0 out=bench/results/twin_trajectory control=1
while [ $# -gt 0 ]; do
    case $1 in
        --steps) steps=$2; shift 2;;
        --seed) seed=$2; shift 2;;
        --dropout) drop=$2; shift 2;;
        --out) out=$2; shift 2;;
        --no-control) control=0; shift;;
        *) echo "bench/twin_trajectory.sh: unknown argument '$1'" >&2; exit 2;;
    esac
done
TFM=${TFM:-build/tfm} PY=/usr/bin/python3 M30K=../shared/data/multi30k
mkdir -p "$out"
F="--preprocess moses --min-freq 2 --max-len 40 --d-model 256 --n-head 8 --n-layer 3 --ffn 512 --dropout $drop
   --label-smoothing 0.1 --warmup 100 --batch-size 64 --bucket 8 --num-examples 0"
tfm_run() { # name, env...: STEPS steps of tfm with a per-step log, then its validation loss by the twin's code
    local name=$1; shift
    env "$@" "$TFM" train-mt --src $M30K/train.de --tgt $M30K/train.en $F --lr 0.3 --schedule noam --epochs 2 \
        --max-steps "$steps" --seed "$seed" --threads 2 --log-every 1 --out "$out/$name.tfm" --overwrite 2>"$out/$name.err"
    grep -o 'step [0-9]*/[0-9]*  loss [0-9.]*' "$out/$name.err" | awk '{print $4}' >"$out/$name.loss"
    $PY scripts/mt_twin_train.py $F --lr 0.3 --out "$out" --eval-tfm "$out/$name.tfm" | grep -o 'valid loss [0-9.]*' \
        >"$out/$name.valid"
}
# tfm's initial weights: one step at a learning rate too small to change a float
"$TFM" train-mt --src $M30K/train.de --tgt $M30K/train.en $F --lr 1e-30 --schedule noam --epochs 2 --max-steps 1 \
    --seed "$seed" --threads 2 --out "$out/init.tfm" --overwrite 2>/dev/null
tfm_run tfm
$PY scripts/mt_twin_train.py $F --lr 0.3 --epochs 2 --max-steps "$steps" --seed "$seed" --threads 2 \
    --init-tfm "$out/init.tfm" --tfm-order --print-steps "$steps" --out "$out/twin" >"$out/twin.log" 2>&1
grep '^step ' "$out/twin.log" | awk '{print $4}' >"$out/twin.loss"
grep -o 'valid loss [0-9.]*' "$out/twin.log" | tail -n 1 >"$out/twin.valid"
[ "$control" = 1 ] && tfm_run generic TFM_ISA=generic
echo "# per-step training loss (tfm, twin$([ "$control" = 1 ] && echo ', tfm with generic kernels')), every 25th step"
paste "$out/tfm.loss" "$out/twin.loss" $([ "$control" = 1 ] && echo "$out/generic.loss") | awk 'NR % 25 == 0 || NR <= 3 {print NR, $0}'
echo "# mean of (tfm - twin) per 50 steps"
paste "$out/tfm.loss" "$out/twin.loss" | awk '{w = int((NR - 1) / 50); s[w] += $1 - $2; n[w]++}
    END {for (i = 0; i in n; i++) printf "steps %d-%d: %+.4f\n", i * 50 + 1, i * 50 + n[i], s[i] / n[i]}'
echo "# validation loss after $steps steps (the twin's code for every side)"
echo "tfm: $(cat "$out/tfm.valid")   twin: $(cat "$out/twin.valid")$([ "$control" = 1 ] && echo "   tfm generic kernels: $(cat "$out/generic.valid")")"
