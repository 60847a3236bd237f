#!/usr/bin/env bash
# decode tuning, second part: how many of the last epoch checkpoints to average (2, 3, 4), alpha with 3; val only
set -u
T=/work/main/build/tfm D=/work/shared/data/multi30k B=/work/runs/B
$T average -o avg2.tfm $B/train.step3094.tfm $B/train.step3332.tfm >/dev/null 2>&1
$T average -o avg4.tfm $B/train.step2618.tfm $B/train.step2856.tfm $B/train.step3094.tfm $B/train.step3332.tfm >/dev/null 2>&1
one() { # name model beam alpha
  $T translate "$2" --beam "$3" --alpha "$4" --threads 2 < $D/val.de > "$1.hyp" 2>/dev/null
  printf '%s\tbeam %s\talpha %s\t%s\n' "$1" "$3" "$4" "$($T bleu "$1.hyp" $D/val.en | head -n1)"
}
one avg2.b5.a1.0 avg2.tfm 5 1.0
one avg4.b5.a1.0 avg4.tfm 5 1.0
one avg3.b5.a1.2 avg3.tfm 5 1.2
one avg3.b4.a1.0 avg3.tfm 4 1.0
one avg3.b5.a0.8 avg3.tfm 5 0.8
