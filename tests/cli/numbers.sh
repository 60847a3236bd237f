# Numbers that agree (issue 32, item 6): train-lm's console line and its --log-file print the same loss (the mean
# since the previous line, labelled); train-lm's evaluations log eval_train_loss, so the plot's train line has
# the training steps only; plot legends sit below the axes (never over a line); train-mt counts epochs one way
# (progress lines, the resume line); tfm info shows the model's --max-len (not the position table), no fields
# of another architecture, stored texts as text, and the tokenizer by kind.
source "$(dirname "$0")/lib.bash"
cd "$(dirname "$0")/../.."
LM=(--data data/demo.txt --n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4 --eval-iters 2 --threads 1)
"$TFM" train-lm "${LM[@]}" --iters 10 --eval-every 5 --log-every 5 --log-file "$TMP/lm.jsonl" --out "$TMP/lm.tfm" 2>"$TMP/lm.err"
con=$(sed -n 's/^step 10\/10 | loss \([0-9.]*\) (mean of 5) .*/\1/p' "$TMP/lm.err")
log=$(grep '"event": "train", "step": 10,' "$TMP/lm.jsonl" | sed 's/.*"loss": \([0-9.e+-]*\).*/\1/')
[ -n "$con" ] && awk -v a="$con" -v b="$log" 'BEGIN { exit !(a - b < 0.00006 && b - a < 0.00006) }' \
    && pass "train-lm: console 'loss X (mean of 5)' = the log's loss at step 10 ($con)" \
    || fail "train-lm console vs log" "console '$con', log '$log': $(grep '^step 10' "$TMP/lm.err")"
grep '"event": "valid"' "$TMP/lm.jsonl" | grep -q '"eval_train_loss": ' && ! grep '"event": "valid"' "$TMP/lm.jsonl" | grep -q '"loss"' \
    && pass "train-lm evaluations log eval_train_loss, not loss" || fail "train-lm eval log keys" "$(grep valid "$TMP/lm.jsonl")"
"$TFM" plot "$TMP/lm.jsonl" --out "$TMP/lm.svg" >/dev/null 2>&1
n_train=$(grep -c '"event": "train"' "$TMP/lm.jsonl")
pts=$(awk '/<g class="series">/ { s++ } s == 1 && /<polyline/ { n += gsub(/[0-9.]+,[0-9.]+/, "") } END { print n + 0 }' "$TMP/lm.svg")
[ "$pts" -eq "$n_train" ] && pass "LM plot: the train-loss line has the $n_train training-step points only" \
    || fail "LM plot train line" "$pts points, $n_train train lines"
# legends: every legend element below the bottom of its panel's axes
awk '/<rect x="[0-9.]+" y="[0-9.]+" width="[0-9.]+" height="[0-9.]+" fill="none"/ {
         match($0, /y="[0-9.]+"/); y = substr($0, RSTART + 3, RLENGTH - 4) + 0
         match($0, /height="[0-9.]+"/); bottom = y + substr($0, RSTART + 8, RLENGTH - 9) }
     /class="legend"/ { leg = 1; n++; next } leg && /<\/g>/ { leg = 0 }
     leg && /<text/ { match($0, /y="[0-9.]+"/); if (substr($0, RSTART + 3, RLENGTH - 4) + 0 <= bottom) bad++ }
     END { exit !(n > 0 && !bad) }' "$TMP/lm.svg" && pass "plot legends lie below the axes (they cover no line)" \
    || fail "plot legends" "a legend inside the axes"

# train-mt: one epoch numbering (the progress line's, the resume line's)
head -n 100 ../shared/data/fra-eng/fra.txt >"$TMP/p.tsv"
MT=(--tsv "$TMP/p.tsv" --d-model 16 --n-head 2 --n-layer 1 --ffn 32 --batch-size 10 --epochs 3 --threads 1 --log-every 5)
"$TFM" train-mt "${MT[@]}" --max-steps 15 --out "$TMP/mt.tfm" 2>"$TMP/mt.err"
grep -q '^epoch 2/3  step 15/30 ' "$TMP/mt.err" && pass "train-mt: step 15 of 10-step epochs is 'epoch 2/3'" \
    || fail "train-mt progress epoch" "$(grep '^epoch' "$TMP/mt.err")"
"$TFM" train-mt --resume "$TMP/mt.tfm" --max-steps 20 --threads 1 2>"$TMP/r.err"
grep -q "^resuming .*mt.tfm at step 15 (epoch 2, inside it)$" "$TMP/r.err" && pass "train-mt: the resume line says epoch 2 too" \
    || fail "train-mt resume epoch" "$(grep resuming "$TMP/r.err")"

# tfm info
"$TFM" info "$TMP/mt.tfm" | sed -n '/^config:/,/^parameters/p' >"$TMP/info"
grep -Eq '^  max_len +10 \(trained sentences, --max-len; position table 1000\)$' "$TMP/info" \
    && pass "info: a Transformer's max_len is its --max-len (10), the position table named as such" \
    || fail "info max_len" "$(grep -i max_len "$TMP/info")"
! grep -Eq '^  (embed_size|hidden_size) ' "$TMP/info" && pass "info: no RNN fields on a Transformer" \
    || fail "info: RNN fields on a Transformer" "$(grep -E 'embed_size|hidden_size' "$TMP/info")"
"$TFM" info "$TMP/mt.tfm" | grep -q '^tokenizer: words (--preprocess d2l), vocabularies of [0-9]* source / [0-9]* target entries$' \
    && pass "info: the tokenizer by kind (words, its preprocessing, sizes)" || fail "info tokenizer" "$(grep tokenizer "$TMP/info")"
"$TFM" train-mt --tsv "$TMP/p.tsv" --arch rnn --embed-size 8 --hidden-size 8 --n-layer 1 --epochs 1 --threads 1 \
    --out "$TMP/rnn.tfm" >/dev/null 2>&1
"$TFM" info "$TMP/rnn.tfm" | sed -n '/^config:/,/^parameters/p' >"$TMP/info"
! grep -Eq '^  (d_model|n_head|ffn|pre_ln|max_len) ' "$TMP/info" && grep -Eq '^  hidden_size +8$' "$TMP/info" \
    && pass "info: no Transformer fields on an RNN" || fail "info: Transformer fields on an RNN" "$(sed -n '/^config/,/^param/p' "$TMP/info")"
"$TFM" average -o "$TMP/avg.tfm" "$TMP/mt.tfm" "$TMP/mt.tfm" >/dev/null 2>&1
"$TFM" info "$TMP/avg.tfm" >"$TMP/info"
grep -q '^  averaged  *mean of 2 checkpoints' "$TMP/info" && ! grep -q 'bytes of text' "$TMP/info" \
    && pass "info: a stored text shown as text (meta.averaged)" || fail "info stored text" "$(grep -i averaged "$TMP/info")"
"$TFM" info "$TMP/lm.tfm" | grep -q '^tokenizer: characters, [0-9]* of them$' && pass "info: a character LM's tokenizer by kind" \
    || fail "info char tokenizer" "$("$TFM" info "$TMP/lm.tfm" | grep tokenizer)"
