#!/usr/bin/env bash
# Multi30k de->en from the raw files to a translator, on the CPU, in about an hour (issue 10).
#
#   recipes/multi30k-de-en.sh OUTDIR [--data DIR] [--threads N] [--epochs N] [--smoke]
#
# 1. learns a joint 8000-piece BPE model over train.de + train.en (stored in the checkpoint),
# 2. trains a post-LN Transformer (d_model 256, 3+3 layers, 4 heads, FFN 1024, tied embeddings, Xavier
#    init, dropout 0.1, label smoothing 0.1, Noam peak 1e-3 after 1000 steps, batches of 2048 tokens),
#    validating on val after every epoch (loss and greedy BLEU) and keeping the last 3 epoch checkpoints,
# 3. averages those 3 checkpoints into OUTDIR/model.tfm (3 rather than 5: +0.85 BLEU on val, docs/RECIPES.md),
# 4. translates test_2016_flickr.de with beam 5 and prints sacreBLEU (13a, cased) and the lowercased score.
#
# Data: DIR/multi30k, where DIR is --data, else $TFM_DATA, else data/ if scripts/get-data.sh filled it, else
# ../shared/data (or $MULTI30K: the multi30k folder itself). Everything written goes into OUTDIR; the log of the training
# run is OUTDIR/train.jsonl (tfm plot OUTDIR/train.jsonl --out curves.svg). A rerun into the same OUTDIR starts
# the training over (train-mt --overwrite: the old train.tfm and train.jsonl are replaced); to continue an
# interrupted run instead: tfm train-mt --resume OUTDIR/train.tfm. --smoke runs every step on 300 pairs for
# 2 epochs with a tiny model (the test tests/cli/recipe_multi30k.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: recipes/multi30k-de-en.sh OUTDIR [--data DIR] [--threads N] [--epochs N] [--smoke]}
shift
threads=0 epochs=14 smoke=0 data=${TFM_DATA:-}
while [ $# -gt 0 ]; do
    case $1 in
        --data) data=$2; shift 2;;
        --threads) threads=$2; shift 2;;
        --epochs) epochs=$2; shift 2;;
        --smoke) smoke=1; shift;;
        *) echo "recipes/multi30k-de-en.sh: unknown option '$1'" >&2; exit 2;;
    esac
done
if [ -z "$data" ]; then data=$here/data; [ -r "$data/multi30k/train.de" ] || data=$here/../shared/data; fi
D=${MULTI30K:-$data/multi30k}
for f in train.de train.en val.de val.en test_2016_flickr.de test_2016_flickr.en; do
    [ -r "$D/$f" ] || { echo "recipes/multi30k-de-en.sh: $D/$f: not readable (scripts/get-data.sh multi30k, or --data DIR)" >&2; exit 66; }
done
mkdir -p "$out"
TFM=${TFM:-$here/build/tfm}
if [ ! -x "$TFM" ]; then make -C "$here" --no-print-directory -j2 build/tfm >/dev/null; fi
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*" >&2; }
bash "$here/bench/sysinfo.sh" >&2 2>/dev/null || true

train=(--src "$D/train.de" --tgt "$D/train.en") valid=(--valid-src "$D/val.de" --valid-tgt "$D/val.en")
model=()   # the preset's
vocab=8000 test_de=$D/test_2016_flickr.de test_en=$D/test_2016_flickr.en val_de=$D/val.de val_en=$D/val.en keep=3
if [ "$smoke" = 1 ]; then   # every step of the recipe on a few hundred pairs, in seconds
    head -n 300 "$D/train.de" >"$out/s.de"; head -n 300 "$D/train.en" >"$out/s.en"
    head -n 40 "$D/val.de" >"$out/v.de"; head -n 40 "$D/val.en" >"$out/v.en"
    train=(--src "$out/s.de" --tgt "$out/s.en") valid=(--valid-src "$out/v.de" --valid-tgt "$out/v.en")
    model=(--d-model 32 --n-head 4 --n-layer 1 --ffn 64 --max-len 128) vocab=400 epochs=2 keep=2 test_de=$out/v.de test_en=$out/v.en val_de=$out/v.de val_en=$out/v.en
fi

stamp "training ($epochs epochs)"
rm -f "$out"/train.step*.tfm
# --preset multi30k is the model, schedule and batching of step 2 (tfm train-mt --help lists its values)
"$TFM" train-mt "${train[@]}" "${valid[@]}" --preset multi30k \
    --vocab-size "$vocab" "${model[@]}" --epochs "$epochs" \
    --keep-last "$keep" --keep-best --threads "$threads" --seed 1 --log-every 50 \
    --decode-beam 5 --decode-alpha 1 --src-lang de --tgt-lang en \
    --log-file "$out/train.jsonl" --out "$out/train.tfm" --overwrite   # a rerun into OUTDIR starts over

stamp "averaging the last $keep epoch checkpoints"
mapfile -t last < <(for f in "$out"/train.step*.tfm; do n=${f##*step}; echo "${n%.tfm} $f"; done | sort -n | tail -n "$keep" | cut -d' ' -f2-)
if [ "${#last[@]}" -ge 2 ]; then "$TFM" average -o "$out/model.tfm" "${last[@]}" >&2; else cp "$out/train.tfm" "$out/model.tfm"; fi

stamp "translating val and test_2016_flickr (the model's stored settings: beam 5, alpha 1)"
"$TFM" translate "$out/model.tfm" --threads "$threads" <"$val_de" >"$out/val.hyp.en"
"$TFM" translate "$out/model.tfm" --threads "$threads" <"$test_de" >"$out/test_2016_flickr.hyp.en"
stamp "done"
{
    echo "val (averaged model, beam 5):"
    "$TFM" bleu "$out/val.hyp.en" "$val_en" | head -n 1
    echo "test_2016_flickr (averaged model, beam 5):"
    "$TFM" bleu "$out/test_2016_flickr.hyp.en" "$test_en"
    "$TFM" bleu --lowercase "$out/test_2016_flickr.hyp.en" "$test_en"
    echo "wall time: $(( $(date +%s) - t0 )) s"
} | tee "$out/results.txt"
