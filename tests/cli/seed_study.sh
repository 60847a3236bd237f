#!/usr/bin/env bash
# The seed-study harness (bench/seed_study.sh, issue 14), at a tiny scale: the summary's statistics on
# fabricated runs, the twins' Python preprocessing equal to tfm's --dump-data (and a changed dump
# caught), bad arguments, and one end-to-end run of 1 seed x 1 epoch. Uses $TFM; run from the repo root.
source "$(dirname "$0")/lib.bash"
PY=/usr/bin/python3
FRA=../shared/data/fra-eng/fra.txt
M30K=../shared/data/multi30k

# ---- scripts/seed_summary.py on fabricated outputs: mean ± SE per side, difference ± SE, the 2-SE flag
mkdir -p "$TMP/study/d2l/rnn"
write_run() { # side seed "exact flags" bleu loss
    local f=$TMP/study/d2l/rnn/$1_seed$2 flags=($3) eng=("go ." "i lost ." "he's calm ." "i'm home .")
    local fra=("va !" "j'ai perdu ." "il est calme ." "je suis chez moi .")
    : >"$f.out"
    for i in 0 1 2 3; do
        if [ "${flags[$i]}" = 1 ]; then echo "${eng[$i]} => ${fra[$i]}, bleu $4"; else echo "${eng[$i]} => je <unk> ., bleu $4"; fi
    done >"$f.out"
    printf 'epoch 1/2  loss 9.0\nepoch 2/2  loss %s\n' "$5" >"$f.err"
}
write_run tfm 1 "1 1 0 0" 0.5 2.0     # exact 2, bleu 0.5
write_run tfm 2 "1 1 1 1" 0.6 2.2     # exact 4, bleu 0.6
write_run twin 1 "1 0 0 0" 0.1 2.1    # exact 1
write_run twin 2 "0 1 0 0" 0.2 2.1    # exact 1
"$PY" scripts/seed_summary.py "$TMP/study" >"$TMP/sum" 2>"$TMP/err"
rowx=$(grep '| rnn | exact sentences of 4 |' "$TMP/sum")
rowb=$(grep '| rnn | mean d2l sentence BLEU |' "$TMP/sum")
rowl=$(grep '| rnn | final training loss |' "$TMP/sum")
if [ "$rowx" = "| rnn | exact sentences of 4 | 3.00 ± 1.00 | 1.00 ± 0.00 | 2.00 ± 1.00 | 2 / 2 | within 2 SE |" ] &&
   [ "$rowb" = "| rnn | mean d2l sentence BLEU | 0.550 ± 0.050 | 0.150 ± 0.050 | 0.400 ± 0.071 | 2 / 2 | beyond 2 SE |" ] &&
   [ "$rowl" = "| rnn | final training loss | 2.1000 ± 0.1000 | 2.1000 ± 0.0000 | 0.0000 ± 0.1000 | 2 / 2 | within 2 SE |" ]; then
    pass "seed_summary: mean ± SE per side, difference ± SE, 2-SE flag"
else
    fail "seed_summary statistics" "$(cat "$TMP/sum" "$TMP/err" | head -c 800)"
fi
if [ "$(wc -l <"$TMP/study/results.csv")" = 5 ] && grep -qx 'd2l,rnn,tfm,2,4,0.6,,2.2' "$TMP/study/results.csv" \
   && "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(not (len(d['runs']) == 4 and len(d['summary']) == 3))" \
        "$TMP/study/results.json"; then
    pass "seed_summary writes per-seed results.csv and results.json"
else
    fail "seed_summary results files" "$(head -c 400 "$TMP/study/results.csv")"
fi
expect_error "seed_summary: a directory without runs" "no finished runs" "$PY" scripts/seed_summary.py "$TMP/study/d2l/rnn"

# ---- bad arguments of the harness
expect_error "seed_study.sh: unknown model" "unknown argument 'gpt'" bench/seed_study.sh gpt --out "$TMP/x"
expect_error "seed_study.sh: --seeds not a number" "non-negative integers, got 'x'" bench/seed_study.sh rnn --seeds x
expect_error "seed_study.sh: --seeds 0" "must be >= 1" bench/seed_study.sh rnn --seeds 0

if ! "$PY" -c 'import torch' 2>/dev/null; then
    skip "seed study twins" "$PY has no torch"
    exit 0
fi
if [ ! -f "$FRA" ] || [ ! -d "$M30K" ]; then fail "seed study data" "../shared/data not found (run from the repo root)"; exit 0; fi

# ---- the twins' preprocessing equals tfm's (--dump-data), and a changed dump is caught
$TFM train-mt --tsv $FRA --num-examples 600 --max-len 10 --preprocess d2l --out "$TMP/u.tfm" \
    --dump-data "$TMP/fra" --dump-only 2>/dev/null
"$PY" scripts/d2l_twin.py --arch rnn --check-dump "$TMP/fra" --check-only 2>"$TMP/err" \
    && grep -q 'check-dump: 600 pairs and both vocabularies (188 / 201 tokens) equal' "$TMP/err" \
    && pass "d2l twin: the book's preprocessing and vocabulary equal tfm --preprocess d2l on 600 pairs" \
    || fail "d2l twin check-dump" "$(cat "$TMP/err")"
sed -i '5s/.*/run away !/' "$TMP/fra.train.tgt"
expect_error "d2l twin: a changed tfm dump is caught" "tgt sentences differ from tfm's \(first at pair 5" \
    "$PY" scripts/d2l_twin.py --arch rnn --check-dump "$TMP/fra" --check-only
for pre in moses moses-lower; do
    $TFM train-mt --src $M30K/train.de --tgt $M30K/train.en --preprocess $pre --num-examples 3000 --max-len 40 \
        --out "$TMP/u.tfm" --dump-data "$TMP/m30k" --dump-only 2>/dev/null
    "$PY" scripts/mt_twin_train.py --preprocess $pre --num-examples 3000 --out "$TMP" --check-dump "$TMP/m30k" \
        --check-only >"$TMP/out" 2>&1 && grep -q 'check-dump: 3000 pairs and both vocabularies' "$TMP/out" \
        && pass "Multi30k twin: Python port of tfm's $pre tokenizer and vocabulary equals --dump-data (3000 pairs)" \
        || fail "Multi30k twin check-dump ($pre)" "$(tail -n 2 "$TMP/out")"
done
sed -i '1s/^/x/' "$TMP/m30k.tgt.vocab"
expect_error "Multi30k twin: a changed tfm vocabulary is caught" "m30k.tgt.vocab differs .* at line 1" \
    "$PY" scripts/mt_twin_train.py --preprocess moses-lower --num-examples 3000 --out "$TMP" --check-dump "$TMP/m30k" --check-only

# ---- end to end, 1 seed x 1 epoch of the RNN recipe on both sides
bench/seed_study.sh rnn --seeds 1 --epochs 1 --out "$TMP/e2e" >"$TMP/out" 2>"$TMP/err"
rc=$?
if [ $rc -eq 0 ] && grep -q '^| rnn | final training loss | [0-9.]* | [0-9.]* | -\{0,1\}[0-9.]* | 1 / 1 |' "$TMP/out" \
   && [ "$(grep -c '^d2l,rnn,' "$TMP/e2e/results.csv")" = 2 ] && grep -q 'rnn seed 1/1 (1 epochs): tfm' "$TMP/err"; then
    pass "seed_study.sh rnn --seeds 1 --epochs 1: both sides train, table and results.csv written"
else
    fail "seed_study.sh end to end" "rc $rc: $(tail -n 3 "$TMP/err") $(head -c 300 "$TMP/out")"
fi

# ---- the Multi30k twin's greedy decoding + detokenization equal tfm translate's on the same weights
mflags="--preprocess moses --num-examples 2000 --max-len 40 --d-model 32 --n-head 4 --n-layer 1 --ffn 64 --dropout 0.1"
$TFM train-mt --src $M30K/train.de --tgt $M30K/train.en $mflags --max-steps 200 --seed 3 --threads 1 --log-every 0 \
    --out "$TMP/small.tfm" 2>"$TMP/err"
head -n 60 $M30K/val.de >"$TMP/val.de"; head -n 60 $M30K/val.en >"$TMP/val.en"
cp $M30K/train.de $M30K/train.en "$TMP/"
$TFM translate "$TMP/small.tfm" --beam 1 --max-output 60 --threads 1 <"$TMP/val.de" >"$TMP/tfm.hyp" 2>/dev/null
"$PY" scripts/mt_twin_train.py $mflags --data-dir "$TMP" --out "$TMP" --eval-tfm "$TMP/small.tfm" \
    --eval-hyp "$TMP/twin.hyp" >"$TMP/out" 2>&1
if [ -s "$TMP/tfm.hyp" ] && cmp -s "$TMP/tfm.hyp" "$TMP/twin.hyp" && grep -q '^valid loss [0-9.]* ' "$TMP/out"; then
    pass "Multi30k twin decodes tfm's weights exactly like tfm translate (60 val sentences, greedy, detokenized)"
else
    fail "Multi30k twin decoding equals tfm translate" "$(tail -n 2 "$TMP/out"; diff "$TMP/tfm.hyp" "$TMP/twin.hyp" | head -4)"
fi

# ---- the whole training loop on real data: the twin started from tfm's initial weights (a --lr 1e-30 step
# leaves them unchanged to the last bit that matters) and drawing tfm's batches with tfm's RNG (--tfm-order)
# gives tfm's per-step losses (dropout 0: nothing else is random). --lr 0.2: at 0.3 the last steps amplify
# rounding noise past the tolerance (tfm's own generic and avx2 paths then differ by 0.0014 at step 20)
tflags="--preprocess moses --num-examples 2000 --max-len 40 --d-model 32 --n-head 4 --n-layer 1 --ffn 64 --dropout 0
        --label-smoothing 0.1 --warmup 10 --batch-size 32 --bucket 4"
$TFM train-mt --src $M30K/train.de --tgt $M30K/train.en $tflags --lr 1e-30 --schedule noam --max-steps 1 --seed 3 \
    --threads 1 --out "$TMP/init.tfm" 2>/dev/null
$TFM train-mt --src $M30K/train.de --tgt $M30K/train.en $tflags --lr 0.2 --schedule noam --max-steps 20 --seed 3 \
    --threads 1 --log-every 1 --out "$TMP/t20.tfm" 2>"$TMP/t20.err"
"$PY" scripts/mt_twin_train.py $tflags --lr 0.2 --max-steps 20 --seed 3 --init-tfm "$TMP/init.tfm" --tfm-order \
    --print-steps 20 --data-dir "$TMP" --out "$TMP/w20" >"$TMP/w20.log" 2>&1
grep -o 'step [0-9]*/[0-9]*  loss [0-9.]*' "$TMP/t20.err" | awk '{print $4}' >"$TMP/t20.loss"
grep '^step ' "$TMP/w20.log" | awk '{print $4}' >"$TMP/w20.loss"
worst=$(paste "$TMP/t20.loss" "$TMP/w20.loss" | awk 'NF == 2 { d = $1 - $2; d = d < 0 ? -d : d; if (d > m) m = d; n++ }
        END { if (n == 20) printf "%.5f", m; else print "rows " n }')
if awk -v w="$worst" 'BEGIN { exit !(w ~ /^[0-9.]+$/ && w + 0 <= 0.001) }'; then
    pass "Multi30k twin from tfm's init on tfm's batches: tfm's loss at each of 20 steps (max |diff| $worst)"
else
    fail "Multi30k twin training loop equals tfm's" "max |diff| $worst: $(paste "$TMP/t20.loss" "$TMP/w20.loss" | head -n 3 | tr '\n' ' ')"
fi
