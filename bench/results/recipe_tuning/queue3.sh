#!/usr/bin/env bash
cd /work/recipe
while pgrep -f 'recipe/q_ls02 ' >/dev/null; do sleep 10; done
run() { local name=$1; shift; mkdir -p /work/recipe/q_$name; echo "start $name $(date -u +%T)" >> /work/recipe/queue.log
  TFM=/work/recipe/tfm_ema bash /work/main/recipes/multi30k-de-en.sh /work/recipe/q_$name -- "$@" > /work/recipe/q_$name.log 2>&1
  echo "end $name $(date -u +%T) rc=$?" >> /work/recipe/queue.log; }
run ema_s1 --ema-decay 0.99
run ema_s2 --seed 2 --ema-decay 0.99 --save-every 34 --keep-last 14
run v6000 --vocab-size 6000
