#!/usr/bin/env bash
# Issue 10's recipe steps on a few hundred Multi30k pairs (raw text in and out): train-mt with a joint BPE
# model, tied embeddings, token batches, validation BLEU, --keep-best and a JSON-lines log; translate raw
# test lines (no <unk>, detokenized); tfm bleu; tfm plot of the log; the new flags' errors.
TFM=${TFM:-build/tfm}
source "$(dirname "$0")/lib.bash"
D=${DATA:-../shared/data}/multi30k
if [ ! -f "$D/train.de" ]; then skip "mt_bpe" "no Multi30k in $D"; exit 0; fi
head -400 "$D/train.de" > "$TMP/tr.de"; head -400 "$D/train.en" > "$TMP/tr.en"
head -40 "$D/val.de" > "$TMP/va.de"; head -40 "$D/val.en" > "$TMP/va.en"
head -20 "$D/test_2016_flickr.de" > "$TMP/te.de"; head -20 "$D/test_2016_flickr.en" > "$TMP/te.en"
SMALL="--allow-truncation --d-model 32 --n-head 4 --n-layer 1 --ffn 64 --max-len 40 --threads 1 --log-every 0 --schedule noam --lr 1 --warmup 20"
M="$TMP/m.tfm"
expect_ok "mt_bpe: train-mt --tokenizer bpe --share-embeddings --max-tokens --keep-best --log-file" \
    $TFM train-mt --src "$TMP/tr.de" --tgt "$TMP/tr.en" --out "$M" --tokenizer bpe --vocab-size 1000 \
    --share-embeddings --init xavier --max-tokens 600 --valid-src "$TMP/va.de" --valid-tgt "$TMP/va.en" \
    --keep-best --patience 5 --log-file "$TMP/log.jsonl" --epochs 2 $SMALL
cp "$TMP/err" "$TMP/train.err"
grep -q "learned a joint BPE model of 1000 pieces" "$TMP/train.err" && grep -q "vocab 1000 src / 1000 tgt" "$TMP/train.err" \
    && pass "mt_bpe: joint vocabulary of --vocab-size pieces" || fail "mt_bpe: joint vocabulary" "$(head -3 "$TMP/train.err")"
[ -s "$TMP/m.best.tfm" ] && grep -q "wrote $TMP/m.best.tfm" "$TMP/train.err" \
    && pass "mt_bpe: --keep-best wrote MODEL.best.tfm" || fail "mt_bpe: --keep-best" "$(grep valid "$TMP/train.err")"
n_valid=$(grep -c '"event": "valid"' "$TMP/log.jsonl"); n_train=$(grep -c '"event": "train"' "$TMP/log.jsonl")
[ "$n_valid" -eq 2 ] && [ "$n_train" -eq 2 ] && grep -q '"valid_bleu": ' "$TMP/log.jsonl" && grep -q '"valid_chrf": [0-9]' "$TMP/log.jsonl" \
    && pass "mt_bpe: log has a train and a valid line per epoch" || fail "mt_bpe: log lines" "$(cat "$TMP/log.jsonl")"
$TFM info "$M" > "$TMP/info" 2>&1
grep -q "^tokenizer: BPE (tfm bpe, SentencePiece model), 1000 pieces" "$TMP/info" && grep -q "share_embeddings *1" "$TMP/info" \
    && pass "mt_bpe: checkpoint holds tokenizer.bpe and config.share_embeddings" || fail "mt_bpe: info" "$(head -30 "$TMP/info")"
# translate raw lines: detokenized (no piece marker, no spaces before the final period), no <unk>
if $TFM translate "$TMP/m.best.tfm" < "$TMP/te.de" > "$TMP/hyp.en" 2>"$TMP/err"; then
    n=$(wc -l < "$TMP/hyp.en")
    if [ "$n" -eq 20 ] && ! grep -q $'\u2581' "$TMP/hyp.en" && ! grep -q "<unk>\|<0x" "$TMP/hyp.en"; then
        pass "mt_bpe: translate raw lines -> detokenized lines, no <unk>"
    else fail "mt_bpe: translate output" "$n lines: $(head -3 "$TMP/hyp.en")"; fi
else fail "mt_bpe: translate" "$(cat "$TMP/err")"; fi
expect_ok "mt_bpe: tfm bleu on the detokenized output" $TFM bleu "$TMP/hyp.en" "$TMP/te.en"
grep -q "BLEU" "$TMP/out" && pass "mt_bpe: bleu prints a score" || fail "mt_bpe: bleu prints a score" "$(cat "$TMP/out")"
expect_ok "mt_bpe: tfm plot of the log" $TFM plot "$TMP/log.jsonl" --out "$TMP/curves.svg"
grep -q "<svg" "$TMP/curves.svg" 2>/dev/null && pass "mt_bpe: plot wrote an SVG" || fail "mt_bpe: plot SVG" "missing"
expect_ok "mt_bpe: attention shows subword pieces" $TFM attention "$M" --text "Ein Mann fährt Fahrrad." --out "$TMP/a.svg"
grep -q $'\u2581' "$TMP/a.svg" && pass "mt_bpe: attention labels are pieces" || fail "mt_bpe: attention labels" "no piece marker"
# --bpe-model: a tfm model works; a SentencePiece model without tfm's special ids is refused
$TFM bpe learn --vocab-size 600 -o "$TMP/b.model" "$TMP/tr.de" "$TMP/tr.en" 2>/dev/null
expect_ok "mt_bpe: --bpe-model FILE" $TFM train-mt --src "$TMP/tr.de" --tgt "$TMP/tr.en" --out "$TMP/b.tfm" \
    --tokenizer bpe --bpe-model "$TMP/b.model" --epochs 1 --batch-size 64 $SMALL
grep -q "vocab 600 src / 600 tgt" "$TMP/err" && pass "mt_bpe: --bpe-model sets the vocabulary" || fail "mt_bpe: --bpe-model vocab" "$(head -2 "$TMP/err")"
if command -v spm_train >/dev/null; then
    cat "$TMP/tr.de" "$TMP/tr.en" > "$TMP/both.txt"
    spm_train --input="$TMP/both.txt" --model_prefix="$TMP/spm" --vocab_size=500 --model_type=bpe \
        --normalization_rule_name=identity --minloglevel=2 >/dev/null 2>&1
    expect_error "mt_bpe: spm model without tfm special ids refused" "spm_train --pad_id=0 --bos_id=1 --eos_id=2 --unk_id=3" \
        $TFM train-mt --src "$TMP/tr.de" --tgt "$TMP/tr.en" --out "$TMP/s.tfm" --tokenizer bpe --bpe-model "$TMP/spm.model" $SMALL
    [ ! -e "$TMP/s.tfm" ] && pass "mt_bpe: nothing written for a refused model" || fail "mt_bpe: refused model" "s.tfm written"
else skip "mt_bpe: spm model without tfm special ids refused" "spm_train not installed"; fi
# bad flags: one line naming the flag
A=(--src "$TMP/tr.de" --tgt "$TMP/tr.en" --out "$TMP/x.tfm" --threads 1)
expect_error "mt_bpe: --share-embeddings without a joint vocabulary" "--share-embeddings needs one joint vocabulary" \
    $TFM train-mt "${A[@]}" --share-embeddings
expect_error "mt_bpe: --vocab-size without --tokenizer bpe" "--vocab-size needs --tokenizer bpe" $TFM train-mt "${A[@]}" --vocab-size 100
expect_error "mt_bpe: --vocab-size below the alphabet" "--vocab-size 100: .*" $TFM train-mt "${A[@]}" --tokenizer bpe --vocab-size 100
expect_error "mt_bpe: unknown --tokenizer" "--tokenizer: unknown 'sp'" $TFM train-mt "${A[@]}" --tokenizer sp
expect_error "mt_bpe: unknown --init" "--init: unknown 'he'" $TFM train-mt "${A[@]}" --init he
expect_error "mt_bpe: --max-tokens below --max-len" "--max-tokens must be at least --max-len" $TFM train-mt "${A[@]}" --max-tokens 5
expect_error "mt_bpe: --keep-best without validation" "--keep-best needs --valid-src" $TFM train-mt "${A[@]}" --keep-best
expect_error "mt_bpe: --patience < 0" "--patience must be >= 0" $TFM train-mt "${A[@]}" --valid-src "$TMP/va.de" --valid-tgt "$TMP/va.en" --patience -1
head -c 100 "$TMP/b.model" > "$TMP/trunc.model"
expect_error "mt_bpe: --bpe-model truncated file" "--bpe-model: .*trunc.model: .*trunc" \
    $TFM train-mt "${A[@]}" --tokenizer bpe --bpe-model "$TMP/trunc.model"
[ ! -e "$TMP/x.tfm" ] && pass "mt_bpe: no checkpoint written on bad flags" || fail "mt_bpe: bad flags" "x.tfm written"
# the tied BPE translator through safetensors: the imported model translates the test lines the same
expect_ok "mt_bpe: export of the tied BPE translator" $TFM export "$M" --out "$TMP/m.safetensors"
expect_ok "mt_bpe: import it" $TFM import "$TMP/m.safetensors" --out "$TMP/m2.tfm"
$TFM translate "$M" < "$TMP/te.de" > "$TMP/h1" 2>/dev/null; $TFM translate "$TMP/m2.tfm" < "$TMP/te.de" > "$TMP/h2" 2>/dev/null
[ -s "$TMP/h1" ] && cmp -s "$TMP/h1" "$TMP/h2" && pass "mt_bpe: the imported translator translates the test lines the same" \
    || fail "mt_bpe: imported translator" "outputs differ"
expect_error "mt_bpe: --init xavier with an RNN refused" "--init xavier: only for --arch transformer" \
    $TFM train-mt "${A[@]}" --arch rnn --init xavier
# determinism: the same seed and threads give the same checkpoint bytes (token batches, tied embeddings)
for k in 1 2; do
    $TFM train-mt --src "$TMP/tr.de" --tgt "$TMP/tr.en" --out "$TMP/d$k.tfm" --tokenizer bpe --bpe-model "$TMP/b.model" \
        --share-embeddings --max-tokens 500 --epochs 1 --seed 3 $SMALL 2>/dev/null
done
[ -s "$TMP/d1.tfm" ] && cmp -s "$TMP/d1.tfm" "$TMP/d2.tfm" && pass "mt_bpe: same seed, same checkpoint bytes" \
    || fail "mt_bpe: determinism" "checkpoints differ or missing"
# validation decodes its batches in parallel (2 threads, 5 batches of 8): the last validation BLEU in the log is
# tfm bleu of a 1-thread greedy translation of the validation sources with the final weights
M2="$TMP/mv.tfm"   # a new name: m2.tfm is the import above
expect_ok "mt_bpe: train-mt with 2 threads and validation batches of 8" \
    $TFM train-mt --src "$TMP/tr.de" --tgt "$TMP/tr.en" --out "$M2" --tokenizer bpe --vocab-size 1000 \
    --share-embeddings --init xavier --max-tokens 600 --batch-size 8 --valid-src "$TMP/va.de" --valid-tgt "$TMP/va.en" \
    --log-file "$TMP/log2.jsonl" --epochs 8 $SMALL --threads 2
$TFM translate "$M2" --max-src 40 --max-output 80 --threads 1 < "$TMP/va.de" > "$TMP/va2.hyp" 2>/dev/null
want=$($TFM bleu "$TMP/va2.hyp" "$TMP/va.en" | sed -n '1s/^BLEU = \([0-9.]*\).*/\1/p')
got=$(grep '"event": "valid"' "$TMP/log2.jsonl" | tail -n 1 | sed 's/.*"valid_bleu": \([0-9.e+-]*\).*/\1/')
want_c=$($TFM bleu --metric chrf "$TMP/va2.hyp" "$TMP/va.en" | sed -n '1s/^chrF2 = \([0-9.]*\).*/\1/p')
got_c=$(grep '"event": "valid"' "$TMP/log2.jsonl" | tail -n 1 | sed 's/.*"valid_chrf": \([0-9.e+-]*\).*/\1/')
close() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a - b < 0.006 && b - a < 0.006) }'; }
if [ -n "$want" ] && [ -n "$want_c" ] && close "$got" "$want" && close "$got_c" "$want_c"; then
    pass "mt_bpe: validation BLEU and chrF (batches decoded in parallel) = tfm bleu of a 1-thread translation ($want, $want_c)"
else fail "mt_bpe: validation BLEU/chrF in parallel" "log $got / $got_c, translate + bleu $want / $want_c"; fi
