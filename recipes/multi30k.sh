#!/usr/bin/env bash
# Multi30k from the raw files to a translator, on the CPU, in about an hour (issues 10 and 35); the two
# directions are recipes/multi30k-de-en.sh and recipes/multi30k-en-de.sh (this script with --from/--to).
#
#   recipes/multi30k.sh OUTDIR [--from de|en] [--to en|de] [--data DIR] [--threads N] [--epochs N] [--smoke]
#                       [-- TRAIN-MT FLAGS...]
#
# Flags after -- go to tfm train-mt after the recipe's own and win over them (a tuning run: -- --schedule cosine).
# With SRC = --from (default de) and TGT = --to (default en):
# 1. learns a joint 8000-piece BPE model over train.SRC + train.TGT (stored in the checkpoint),
# 2. trains a post-LN Transformer (d_model 256, 3+3 layers, 4 heads, FFN 1024, tied embeddings, Xavier
#    init, dropout 0.1, label smoothing 0.1, Noam peak 1e-3 after 1000 steps, batches of 2048 tokens (en->de:
#    1024, twice the steps: val +0.50 over 2 seeds there, -0.22 de->en; docs/RECIPES.md), AdamW
#    weight decay 0.1 (higher val BLEU and lower validation loss over 2 seeds in each direction, docs/RECIPES.md),
#    validating on val after every epoch (loss and greedy BLEU) and keeping the last 3 epoch checkpoints,
# 3. stores those 3 checkpoints as an ensemble, OUTDIR/model.tfm (tfm average --ensemble: the members stay beside
#    it; +0.39 BLEU on val over the average, docs/RECIPES.md), and averages them into OUTDIR/model.avg.tfm (one
#    model, 3x faster to decode; what quantize and export take),
# 4. translates val.SRC and test_2016_flickr.SRC with both, beam 5 and length penalty alpha 1.6 (tuned on val for
#    the ensemble, docs/RECIPES.md; both stored in the model, so a plain `tfm translate OUTDIR/model.tfm` decodes the
#    same way) and prints sacreBLEU (13a, cased) and the lowercased score.
#
# Data: DIR/multi30k, where DIR is --data, else $TFM_DATA, else data/ if scripts/get-data.sh filled it, else
# ../shared/data (or $MULTI30K: the multi30k folder itself). Everything written goes into OUTDIR; the log of the training
# run is OUTDIR/train.jsonl (tfm plot OUTDIR/train.jsonl --out curves.svg). A rerun into the same OUTDIR starts
# the training over (train-mt --overwrite: the old train.tfm and train.jsonl are replaced); to continue an
# interrupted run instead: tfm train-mt --resume OUTDIR/train.tfm. --smoke runs every step on 300 pairs for
# 2 epochs with a tiny model (the test tests/cli/recipe_multi30k.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
me=recipes/multi30k.sh
out=${1:?usage: recipes/multi30k.sh OUTDIR [--from de|en] [--to en|de] [--data DIR] [--threads N] [--epochs N] [--smoke] [-- TRAIN-MT FLAGS]}
shift
threads=0 epochs=16 smoke=0 data=${TFM_DATA:-} S=de T=en extra=()
while [ $# -gt 0 ]; do
    case $1 in
        --) shift; extra=("$@"); break;;
        --from) S=$2; shift 2;;
        --to) T=$2; shift 2;;
        --data) data=$2; shift 2;;
        --threads) threads=$2; shift 2;;
        --epochs) epochs=$2; shift 2;;
        --smoke) smoke=1; shift;;
        *) echo "$me: unknown option '$1'" >&2; exit 2;;
    esac
done
case "$S-$T" in de-en|en-de) ;; *) echo "$me: --from $S --to $T: the directions are de -> en and en -> de" >&2; exit 2;; esac
if [ -z "$data" ]; then data=$here/data; [ -r "$data/multi30k/train.de" ] || data=$here/../shared/data; fi
D=${MULTI30K:-$data/multi30k}
for f in train.de train.en val.de val.en test_2016_flickr.de test_2016_flickr.en; do
    [ -r "$D/$f" ] || { echo "$me: $D/$f: not readable (scripts/get-data.sh multi30k, or --data DIR)" >&2; exit 66; }
done
mkdir -p "$out"
TFM=${TFM:-$here/build/tfm}
if [ ! -x "$TFM" ]; then make -C "$here" --no-print-directory -j2 build/tfm >/dev/null; fi
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*" >&2; }
bash "$here/bench/sysinfo.sh" >&2 2>/dev/null || true

train=(--src "$D/train.$S" --tgt "$D/train.$T") valid=(--valid-src "$D/val.$S" --valid-tgt "$D/val.$T")
model=()   # the preset's
vocab=8000 test_src=$D/test_2016_flickr.$S test_ref=$D/test_2016_flickr.$T val_src=$D/val.$S val_ref=$D/val.$T keep=3
batch=()   # the preset's 2048 tokens; en->de: 1024 (val +0.50 over 2 seeds, de->en -0.22: docs/RECIPES.md)
[ "$S" = en ] && batch=(--max-tokens 1024)
if [ "$smoke" = 1 ]; then   # every step of the recipe on a few hundred pairs, in seconds
    head -n 300 "$D/train.$S" >"$out/s.$S"; head -n 300 "$D/train.$T" >"$out/s.$T"
    head -n 40 "$D/val.$S" >"$out/v.$S"; head -n 40 "$D/val.$T" >"$out/v.$T"
    train=(--src "$out/s.$S" --tgt "$out/s.$T") valid=(--valid-src "$out/v.$S" --valid-tgt "$out/v.$T")
    model=(--d-model 32 --n-head 4 --n-layer 1 --ffn 64 --max-len 128) vocab=400 epochs=2 keep=2
    test_src=$out/v.$S test_ref=$out/v.$T val_src=$out/v.$S val_ref=$out/v.$T
fi

stamp "training ($epochs epochs)"
rm -f "$out"/train.step*.tfm
# --preset multi30k is the model, schedule and batching of step 2 (tfm train-mt --help lists its values)
"$TFM" train-mt "${train[@]}" "${valid[@]}" --preset multi30k \
    --vocab-size "$vocab" ${model[@]+"${model[@]}"} ${batch[@]+"${batch[@]}"} --epochs "$epochs" \
    --keep-last "$keep" --keep-best --threads "$threads" --seed 1 --log-every 50 --weight-decay 0.1 \
    --decode-beam 5 --decode-alpha 1.6 --src-lang "$S" --tgt-lang "$T" \
    --log-file "$out/train.jsonl" --out "$out/train.tfm" --overwrite \
    ${extra[@]+"${extra[@]}"}   # a rerun into OUTDIR starts over; flags after -- win

stamp "storing the last $keep epoch checkpoints as an ensemble (model.tfm) and averaging them (model.avg.tfm)"
mapfile -t last < <(for f in "$out"/train.step*.tfm; do n=${f##*step}; echo "${n%.tfm} $f"; done | sort -n | tail -n "$keep" | cut -d' ' -f2-)
if [ "${#last[@]}" -ge 2 ]; then
    "$TFM" average --ensemble -o "$out/model.tfm" "${last[@]}" >&2   # members: the checkpoints beside it
    "$TFM" average -o "$out/model.avg.tfm" "${last[@]}" >&2
else
    cp "$out/train.tfm" "$out/model.tfm"; cp "$out/train.tfm" "$out/model.avg.tfm"
fi

stamp "translating val and test_2016_flickr with both (the stored settings: beam 5, alpha 1.6)"
for m in model model.avg; do
    "$TFM" translate "$out/$m.tfm" --threads "$threads" <"$val_src" >"$out/val.hyp${m#model}.$T"
    "$TFM" translate "$out/$m.tfm" --threads "$threads" <"$test_src" >"$out/test_2016_flickr.hyp${m#model}.$T"
done
stamp "done"
{
    for m in "" .avg; do
        what="the ensemble of the last $keep epoch checkpoints, model.tfm"
        [ -n "$m" ] && what="their average, model.avg.tfm"
        echo "val ($what, beam 5, alpha 1.6):"
        "$TFM" bleu "$out/val.hyp$m.$T" "$val_ref" | head -n 1
        echo "test_2016_flickr ($what, beam 5, alpha 1.6):"
        "$TFM" bleu "$out/test_2016_flickr.hyp$m.$T" "$test_ref"
        "$TFM" bleu --lowercase "$out/test_2016_flickr.hyp$m.$T" "$test_ref"
    done
    echo "wall time: $(( $(date +%s) - t0 )) s"
} | tee "$out/results.txt"
