# recipes/multi30k-de-en.sh (issue 10) and multi30k-en-de.sh (issue 35; both recipes/multi30k.sh): every step of the recipe (BPE learned from the raw files, training with
# per-epoch validation and the last epoch checkpoints kept, stored as an ensemble and averaged, beam search on val
# and the test file with both,
# both BLEU flavours) on 300 pairs with a tiny model (--smoke); its bad inputs; and the step-size check
# accepting the recipe's real batches (--max-tokens 2048, d_model 256, --max-len 64).
source "$(dirname "$0")/lib.bash"
cd "$(dirname "$0")/../.."
M=../shared/data/multi30k
if ! TFM="$TFM" bash recipes/multi30k-de-en.sh "$TMP/r" --smoke --threads 2 >"$TMP/out" 2>"$TMP/err"; then
    fail "recipe --smoke" "exit $?: $(tail -n 3 "$TMP/err")"
else
    pass "recipe --smoke runs to the end"
    [ -s "$TMP/r/model.avg.tfm" ] && grep -q 'mean of 2 checkpoints' "$TMP/err" \
        && pass "recipe: the last 2 epoch checkpoints averaged into model.avg.tfm" || fail "recipe averaging" "$(grep -i average "$TMP/err")"
    $TFM info "$TMP/r/model.tfm" 2>&1 | grep -Eq '^  ensemble +train\.step[0-9]+\.tfm$' \
        && head -n 5 "$TMP/r/v.de" | $TFM translate "$TMP/r/model.tfm" 2>/dev/null | cmp -s - <(head -n 5 "$TMP/r/v.de" | \
            $TFM translate $(for f in "$TMP"/r/train.step*.tfm; do n=${f##*step}; echo "${n%.tfm} $f"; done | sort -n | cut -d' ' -f2-) 2>/dev/null) \
        && pass "recipe: model.tfm stores the last 2 epoch checkpoints as an ensemble, translating as they do" \
        || fail "recipe ensemble" "$($TFM info "$TMP/r/model.tfm" 2>&1 | grep -i ensemble)"
    [ "$(grep -c '"event": "valid"' "$TMP/r/train.jsonl")" -eq 2 ] && pass "recipe: validation after each epoch in train.jsonl" \
        || fail "recipe log" "$(grep -c valid "$TMP/r/train.jsonl") valid events"
    [ "$(wc -l <"$TMP/r/test_2016_flickr.hyp.en")" -eq 40 ] && ! grep -q '<unk>' "$TMP/r/test_2016_flickr.hyp.en" \
        && pass "recipe: one translation a line, no <unk>" || fail "recipe translations" "$(wc -l <"$TMP/r/test_2016_flickr.hyp.en") lines"
    grep -q '^nrefs:1|case:mixed|eff:no|tok:13a' "$TMP/r/results.txt" && grep -q '^nrefs:1|case:lc|eff:no|tok:13a' "$TMP/r/results.txt" \
        && grep -q '^wall time: [0-9]* s$' "$TMP/r/results.txt" && [ "$(grep -c '^test_2016_flickr (' "$TMP/r/results.txt")" -eq 2 ] \
        && pass "recipe: results.txt has cased and lowercased BLEU with signatures, and the wall time" \
        || fail "recipe results" "$(cat "$TMP/r/results.txt")"
    [ "$(cat "$TMP/out")" = "$(cat "$TMP/r/results.txt")" ] && pass "recipe: stdout is results.txt" || fail "recipe stdout" "differs"
    # a rerun into the same OUTDIR starts the training over (train-mt --overwrite): a new log, not appended to
    if TFM="$TFM" bash recipes/multi30k-de-en.sh "$TMP/r" --smoke --threads 2 >"$TMP/out" 2>"$TMP/err" \
        && [ "$(grep -c '"event": "valid"' "$TMP/r/train.jsonl")" -eq 2 ]; then pass "recipe: a rerun into the same OUTDIR"
    else fail "recipe: a rerun into the same OUTDIR" "$(tail -n 2 "$TMP/err")"; fi
fi
# flags after -- reach train-mt and win over the recipe's
if TFM="$TFM" bash recipes/multi30k-de-en.sh "$TMP/x2" --smoke --threads 2 -- --label-smoothing 0.2 --epochs 1 >"$TMP/out" 2>"$TMP/err" \
    && grep -q 'train-mt config: .*--label-smoothing 0.2 ' "$TMP/err" && [ "$(grep -c '"event": "valid"' "$TMP/x2/train.jsonl")" -eq 1 ]; then
    pass "recipe: flags after -- go to train-mt and win (label smoothing 0.2, 1 epoch)"
else fail "recipe -- flags" "$(grep 'train-mt config' "$TMP/err" | cut -c1-200; tail -n 2 "$TMP/err")"; fi
# the other direction: the same steps from English to German
if TFM="$TFM" bash recipes/multi30k-en-de.sh "$TMP/e" --smoke --threads 2 >"$TMP/out" 2>"$TMP/err" \
    && [ "$(wc -l <"$TMP/e/test_2016_flickr.hyp.de")" -eq 40 ] && [ ! -e "$TMP/e/test_2016_flickr.hyp.en" ] \
    && head -n 40 $M/val.en | cmp -s - "$TMP/e/v.en" && grep -q '^nrefs:1|case:mixed' "$TMP/e/results.txt" \
    && $TFM info "$TMP/e/model.tfm" 2>&1 | grep -q '^ *src_lang *en$' && $TFM info "$TMP/e/model.tfm" 2>&1 | grep -q '^ *tgt_lang *de$' \
    && grep -q 'train-mt config: .*--max-tokens 1024 ' "$TMP/err"; then pass "recipe en-de --smoke: English in, German out, scored, batches of 1024 tokens"
else fail "recipe en-de --smoke" "$(tail -n 3 "$TMP/err"; $TFM info "$TMP/e/model.tfm" 2>&1 | grep -i lang; grep -o -- '--max-tokens [0-9]*' "$TMP/err")"; fi
bash recipes/multi30k.sh "$TMP/x" --from fr --to en >"$TMP/out" 2>"$TMP/err"; rc=$?
[ $rc -eq 2 ] && grep -q 'the directions are' "$TMP/err" && pass "recipe: an unknown direction is exit 2" \
    || fail "recipe bad direction" "exit $rc: $(cat "$TMP/err")"
bash recipes/multi30k-de-en.sh "$TMP/x" --frobnicate >"$TMP/out" 2>"$TMP/err"; rc=$?
[ $rc -eq 2 ] && grep -q "unknown option '--frobnicate'" "$TMP/err" && pass "recipe: an unknown option is exit 2 with its name" \
    || fail "recipe bad option" "exit $rc: $(cat "$TMP/err")"
MULTI30K=$TMP/nowhere bash recipes/multi30k-de-en.sh "$TMP/x" >"$TMP/out" 2>"$TMP/err"; rc=$?
[ $rc -eq 66 ] && grep -q "$TMP/nowhere/train.de: not readable" "$TMP/err" && pass "recipe: missing data named, exit 66" \
    || fail "recipe missing data" "exit $rc: $(cat "$TMP/err")"

# the recipe's real shapes pass the step-size check (it once took --max-tokens 2048 as 2048 rows of the
# longest pair, ~29 GiB, and refused): one step of the recipe's model on 2100 pairs (2048 rows of 61 tokens would be refused)
head -n 2100 $M/train.de >"$TMP/t.de"; head -n 2100 $M/train.en >"$TMP/t.en"
printf '%s\n' "$(printf 'Wort %.0s' $(seq 60))" >>"$TMP/t.de"; printf '%s\n' "$(printf 'word %.0s' $(seq 60))" >>"$TMP/t.en"
expect_ok "train-mt --max-tokens 2048 --d-model 256 --max-len 64: the step-size check accepts the recipe's batches" \
    $TFM train-mt --src "$TMP/t.de" --tgt "$TMP/t.en" --tokenizer bpe --vocab-size 500 --share-embeddings \
    --d-model 256 --n-head 4 --n-layer 3 --ffn 1024 --max-len 64 --max-tokens 2048 --max-steps 1 --threads 2 \
    --out "$TMP/one.tfm"
