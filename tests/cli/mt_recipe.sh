#!/usr/bin/env bash
# The d2l Transformer recipe, short version (fra-eng, first 600 pairs, num_steps 10, d_model 32,
# 2 blocks, 4 heads, FFN 64, dropout 0.2, lr 0.005, batch 64, d2l preprocessing, d2l loss
# normalisation, 200 epochs):
# the loss falls and, pooled over seeds 1-3, d2l's 4 sentences come out well (>= 3 of 12 exact, mean
# sentence BLEU >= 0.45). Then translate / beam / attention
# on the trained model, and --resume continuing exactly. Uses $TFM; run from the repo root.
set -u
TFM=${TFM:-build/tfm}
DATA=../shared/data/fra-eng/fra.txt
source "$(dirname "$0")/lib.bash"   # $TMP (removed at exit), pass, fail, skip
d=$TMP
if [ ! -f "$DATA" ]; then fail "mt recipe" "$DATA not found (run from the repo root)"; exit 1; fi

recipe() { # seed out_model out_text err
    $TFM train-mt --tsv $DATA --num-examples 600 --max-len 10 --pad-to-max-len --d-model 32 --n-layer 2 --n-head 4 --ffn 64 \
        --dropout 0.2 --lr 0.005 --batch-size 64 --epochs 200 --preprocess d2l --loss-norm d2l --seed "$1" --threads 1 \
        --log-every 0 --out "$2" --d2l-examples >"$3" 2>"$4"
}
# seeds 2 and 3 run alongside seed 1 (one thread each); seed 1's model is used for the rest of the script
recipe 2 "$d/fra2.tfm" "$d/out2" "$d/err2" & p2=$!
recipe 3 "$d/fra3.tfm" "$d/out3" "$d/err3" & p3=$!
recipe 1 "$d/fra.tfm" "$d/out" "$d/err"
rc=$?
wait $p2 $p3
[ $rc -eq 0 ] && pass "mt recipe trains" || fail "mt recipe trains" "rc $rc: $(tail -n 2 "$d/err")"
first=$(grep -m1 '^epoch 1/' "$d/err" | sed 's/.*loss \([0-9.]*\).*/\1/')
last=$(grep '^epoch 200/' "$d/err" | sed 's/.*loss \([0-9.]*\).*/\1/')
if [ -n "$first" ] && [ -n "$last" ] && awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a / 3) }'; then
    pass "mt recipe loss falls ($first -> $last)"
else
    fail "mt recipe loss falls" "first '$first' last '$last'"
fi
cat "$d/out"
# How many of d2l's 4 sentences one run gets exactly is a lottery over seeds for a tiny model trained on
# 600 pairs, and any change of float rounding or dropout bits re-draws it (measured for seeds 1-3 on three
# builds of this code: 2/3/1, 1/2/2, and 4/1/2 before; docs/RECIPES.md). So the check pools seeds 1-3:
# >= 3 of the 12 sentences exact and a mean sentence BLEU >= 0.45 (an untrained model scores ~0).
n=0
for f in "$d/out" "$d/out2" "$d/out3"; do
    for want in "go \. => va !, bleu 1.000" "i lost \. => j'ai perdu \., bleu 1.000" \
                "he's calm \. => il est calme \., bleu 1.000" "i'm home \. => je suis chez moi \., bleu 1.000"; do
        grep -qx "$want" "$f" && n=$((n + 1))
    done
done
mean=$(cat "$d/out" "$d/out2" "$d/out3" | sed -n 's/.*, bleu \([0-9.]*\)$/\1/p' \
    | awk '{s += $1; k++} END {if (k == 12) printf "%.3f", s / 12; else print "nan"}')
if [ $n -ge 3 ] && awk -v m="$mean" 'BEGIN { exit !(m >= 0.45) }'; then
    pass "mt recipe, seeds 1-3: $n of 12 d2l sentences exact, mean sentence BLEU $mean (>= 3, >= 0.45)"
else
    fail "mt recipe, seeds 1-3: >= 3 of 12 exact and mean sentence BLEU >= 0.45" "$n exact, mean $mean"
fi

# translate gives the same greedy output as the training command, in order, one line each
printf "go .\ni lost .\nhe's calm .\ni'm home .\n" > "$d/src.txt"
$TFM translate "$d/fra.tfm" --threads 1 < "$d/src.txt" > "$d/greedy.txt" 2>"$d/err"
sed 's/ => /\t/; s/, bleu .*//' "$d/out" | cut -f2 > "$d/expect.txt"
cmp -s "$d/greedy.txt" "$d/expect.txt" && pass "mt translate equals the recipe's greedy output" \
    || fail "mt translate equals the recipe's greedy output" "$(paste "$d/greedy.txt" "$d/expect.txt" | head -4)"
$TFM translate "$d/fra.tfm" --beam 4 --alpha 0.6 --threads 1 < "$d/src.txt" > "$d/beam.txt" 2>"$d/err"
[ $? -eq 0 ] && [ "$(wc -l < "$d/beam.txt")" = 4 ] && pass "mt translate beam 4 (4 lines)" \
    || fail "mt translate beam 4" "$(cat "$d/err")"
# one line at a time gives the same output as a batch (batching does not change results)
for i in 1 2 3 4; do sed -n "${i}p" "$d/src.txt" | $TFM translate "$d/fra.tfm" --beam 4 --alpha 0.6 --threads 1; done > "$d/beam1.txt"
cmp -s "$d/beam.txt" "$d/beam1.txt" && pass "mt translate batched equals line by line" \
    || fail "mt translate batched equals line by line" "$(paste "$d/beam.txt" "$d/beam1.txt")"

# attention pictures
$TFM attention "$d/fra.tfm" --text "he's calm ." --out "$d/att.svg" --threads 1 >"$d/aout" 2>"$d/err"
if [ $? -eq 0 ] && grep -q "enc-dec attention, layer 2, head 4" "$d/att.svg" && grep -q "encoder self-attention, layer 1, head 1" "$d/att.svg" \
    && grep -q "decoder self-attention" "$d/att.svg" && grep -q "calme\|&lt;bos&gt;" "$d/att.svg"; then
    pass "mt attention writes encoder, decoder and enc-dec heatmaps with tokens"
else
    fail "mt attention heatmaps" "$(cat "$d/err")"
fi

# --resume continues exactly: 4 epochs straight == 2 epochs + resume to 4 (dropout on)
args="--tsv $DATA --num-examples 200 --max-len 10 --d-model 16 --n-layer 1 --n-head 2 --ffn 32 --dropout 0.2
      --batch-size 32 --epochs 4 --seed 7 --threads 1 --log-every 0 --label-smoothing 0.1 --schedule noam --lr 1 --warmup 5"
$TFM train-mt $args --out "$d/a.tfm" 2>/dev/null
$TFM train-mt $args --out "$d/b.tfm" --epochs 2 2>/dev/null
$TFM train-mt $args --resume "$d/b.tfm" 2>"$d/err"
grep -q "resuming" "$d/err" && cmp -s "$d/a.tfm" "$d/b.tfm" && pass "mt --resume continues exactly (identical checkpoint)" \
    || fail "mt --resume continues exactly" "checkpoints differ: $(head -c 300 "$d/err")"
