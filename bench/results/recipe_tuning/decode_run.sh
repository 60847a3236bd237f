#!/usr/bin/env bash
# decode tuning on val for the recipe run B (issue 10); val only, never the test set
set -u
T=/work/main/build/tfm D=/work/shared/data/multi30k B=/work/runs/B
$T average -o avg3.tfm $B/train.step2856.tfm $B/train.step3094.tfm $B/train.step3332.tfm >/dev/null 2>&1
bleu() { $T bleu "$1" $D/val.en | head -n1; }
one() { # name model beam alpha
  local s=$(date +%s.%N)
  $T translate "$2" --beam "$3" --alpha "$4" --threads 2 < $D/val.de > "$1.hyp" 2>/dev/null
  local e=$(date +%s.%N)
  printf '%s\tbeam %s\talpha %s\t%s\t%.1fs\n' "$1" "$3" "$4" "$(bleu $1.hyp)" "$(echo "$e - $s" | bc)"
}
for b in 4 5 6 8; do for a in 0.6 0.8 1.0 1.2; do one avg5.b$b.a$a $B/model.tfm $b $a; done; done
one avg5.greedy $B/model.tfm 1 0
one avg3.b5.a1.0 avg3.tfm 5 1.0
one last.b5.a1.0 $B/train.tfm 5 1.0
one best.b5.a1.0 $B/train.best.tfm 5 1.0
