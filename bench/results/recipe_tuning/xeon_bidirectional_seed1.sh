#!/usr/bin/env bash
# Bidirectional training (Ding et al. 2021, BiT): the recipe's model first trained on both directions
# (de->en pairs plus the swapped en->de pairs, no tags) for 3 epochs of the doubled data (1425 steps, 6 epochs
# worth), then fine-tuned on de->en for 10 epochs (2380 steps): 3805 steps, the recipe 3808 (16 x 238).
set -e
out=$1; shift; mkdir -p "$out"; T=${TFM:-build/tfm}; D=${TFM_DATA:-../shared/data}/multi30k
t0=$(date +%s); stamp() { echo "[$(( $(date +%s) - t0 )) s] $*" >&2; }
cat "$D/train.de" "$D/train.en" > "$out/bi.src"; cat "$D/train.en" "$D/train.de" > "$out/bi.tgt"
stamp "stage 1: both directions, 3 epochs"
"$T" train-mt --src "$out/bi.src" --tgt "$out/bi.tgt" --valid-src "$D/val.de" --valid-tgt "$D/val.en" --preset multi30k \
  --vocab-size 8000 --epochs 3 --keep-last 3 --threads 2 --seed 1 --log-every 50 --decode-beam 5 --decode-alpha 1 \
  --src-lang de --tgt-lang en --log-file "$out/train.jsonl" --out "$out/train.tfm" --overwrite "$@"
stamp "stage 2: de->en, 10 epochs"
"$T" train-mt --resume "$out/train.tfm" --allow-new-data --src "$D/train.de" --tgt "$D/train.en" --epochs 13 --keep-last 3
mapfile -t last < <(for f in "$out"/train.step*.tfm; do n=${f##*step}; echo "${n%.tfm} $f"; done | sort -n | tail -n 3 | cut -d' ' -f2-)
"$T" average -o "$out/model.tfm" "${last[@]}" >&2
"$T" translate "$out/model.tfm" --threads 2 <"$D/val.de" >"$out/val.hyp.en"
"$T" translate "$out/model.tfm" --threads 2 <"$D/test_2016_flickr.de" >"$out/test_2016_flickr.hyp.en"
{ echo "val:"; "$T" bleu "$out/val.hyp.en" "$D/val.en" | head -n 1
  echo "test_2016_flickr:"; "$T" bleu "$out/test_2016_flickr.hyp.en" "$D/test_2016_flickr.en"
  "$T" bleu --lowercase "$out/test_2016_flickr.hyp.en" "$D/test_2016_flickr.en"; echo "wall time: $(( $(date +%s) - t0 )) s"; } | tee "$out/results.txt"
