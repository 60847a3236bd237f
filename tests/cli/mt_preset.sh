# train-mt --preset (issue 32, item 3): --help lists the presets; --tokenizer bpe without --preset takes the
# multi30k preset (the recipe's model, schedule, batching and --max-len 64), stored with the run and kept by a
# resume; flags given beat the preset (--share-embeddings=0 too); a run whose --max-len would cut more than 5%
# of its pairs stops naming --max-len (with the length that keeps 99%) and --allow-truncation, which trains
# with a WARNING; bad presets; the Multi30k recipe trains with --preset multi30k and takes --data DIR.
source "$(dirname "$0")/lib.bash"
cd "$(dirname "$0")/../.."
M=../shared/data/multi30k
head -n 60 $M/train.de >"$TMP/s.de"; head -n 60 $M/train.en >"$TMP/s.en"
RAW=(--src "$TMP/s.de" --tgt "$TMP/s.en" --threads 1 --log-every 0)

"$TFM" train-mt --help >"$TMP/help"
grep -q '^  d2l  ' "$TMP/help" && grep -q '^  multi30k  .*joint BPE 8000' "$TMP/help" && grep -q -- '--preset S' "$TMP/help" \
    && pass "train-mt --help lists the presets d2l and multi30k" || fail "train-mt --help lists the presets" "$(head -n 12 "$TMP/help")"

# --tokenizer bpe alone: the multi30k preset (vocab given: 60 pairs cannot yield 8000 pieces)
expect_ok "train-mt --tokenizer bpe (no --preset) trains" "$TFM" train-mt "${RAW[@]}" --tokenizer bpe --vocab-size 400 \
    --max-steps 1 --out "$TMP/b.tfm"
cfg=$(grep '^train-mt config:' "$TMP/err")
for want in "--preset multi30k" "--max-len 64" "--d-model 256" "--n-layer 3" "--ffn 1024" "--share-embeddings 1" \
            "--init xavier" "--schedule noam" "--lr 0.5" "--warmup 1000" "--max-tokens 2048" "--label-smoothing 0.1" \
            "--beta2 0.98" "--epochs 16" "--vocab-size 400"; do
    grep -q -- " $want\( \|$\)" <<<"$cfg" || { fail "--tokenizer bpe: the multi30k preset's $want" "$cfg"; continue; }
    pass "--tokenizer bpe: the multi30k preset's $want"
done
expect_ok "resume of a multi30k-preset run" "$TFM" train-mt --resume "$TMP/b.tfm" --max-steps 2 --threads 1 --log-every 0
cfg=$(grep '^train-mt config:' "$TMP/err")
grep -q -- " --preset multi30k\( \|$\)" <<<"$cfg" && grep -q -- " --d-model 256 " <<<"$cfg" \
    && pass "resume keeps the preset and its values" || fail "resume keeps the preset and its values" "$cfg"
expect_exit "resume with another --preset" 2 "--preset d2l differs from the checkpoint's --preset multi30k" \
    "$TFM" train-mt --resume "$TMP/b.tfm" --max-steps 3 --threads 1 --preset d2l

# flags given beat the preset, a boolean one too
expect_ok "preset multi30k with --share-embeddings=0 --d-model 32" "$TFM" train-mt "${RAW[@]}" --preset multi30k \
    --vocab-size 400 --share-embeddings=0 --d-model 32 --n-head 2 --ffn 64 --max-steps 1 --out "$TMP/c.tfm"
cfg=$(grep '^train-mt config:' "$TMP/err")
grep -q -- " --share-embeddings 0 " <<<"$cfg" && grep -q -- " --d-model 32 " <<<"$cfg" && grep -q -- " --n-layer 3 " <<<"$cfg" \
    && pass "given flags beat the preset (the rest is the preset's)" || fail "given flags beat the preset" "$cfg"
expect_exit "bool flag with a bad value" 2 "share-embeddings takes no value \(or =0 / =1\)" \
    "$TFM" train-mt "${RAW[@]}" --share-embeddings=yes --out "$TMP/x.tfm"

# the d2l preset on raw sentences: --max-len 10 would cut nearly every pair
"$TFM" train-mt "${RAW[@]}" --tokenizer bpe --vocab-size 400 --preset d2l --epochs 1 --out "$TMP/d.tfm" >"$TMP/out" 2>"$TMP/err"
rc=$?
msg=$(grep 'would cut' "$TMP/err")
[ $rc -eq 2 ] && grep -Eq -- "train: --max-len 10 would cut [0-9]+ of 60 (source|target) sentences .*raise --max-len \(--max-len [0-9]+ keeps 99% whole\), or give --allow-truncation" <<<"$msg" \
    && pass "truncating more than 5% stops (exit 2) naming --max-len, the length that keeps 99%, --allow-truncation" \
    || fail "truncation guard" "exit $rc: $(cat "$TMP/err")"
[ ! -e "$TMP/d.tfm" ] && pass "truncation guard: nothing written" || fail "truncation guard: nothing written" "d.tfm exists"
p99=$(sed -n 's/.*(--max-len \([0-9]*\) keeps 99% whole).*/\1/p' <<<"$msg")
expect_ok "--allow-truncation trains" "$TFM" train-mt "${RAW[@]}" --tokenizer bpe --vocab-size 400 --preset d2l --epochs 1 \
    --allow-truncation --out "$TMP/d.tfm"
grep -q 'WARNING: train: --max-len 10 cuts' "$TMP/err" && pass "--allow-truncation: a WARNING line" \
    || fail "--allow-truncation: a WARNING line" "$(cat "$TMP/err")"
expect_ok "--max-len at the suggested length trains" "$TFM" train-mt "${RAW[@]}" --tokenizer bpe --vocab-size 400 \
    --preset d2l --epochs 1 --max-len "${p99:-0}" --out "$TMP/e.tfm"
cut=$(sed -n 's/^train: truncated to --max-len [0-9]*: \([0-9]*\) source and \([0-9]*\) target.*/\1 \2/p' "$TMP/err")
read -r cs ct <<<"${cut:-0 0}"
[ "$cs" -le 0 ] && [ "$ct" -le 0 ] && pass "the suggested --max-len ($p99) keeps at least 99% of 60 pairs whole" \
    || fail "the suggested --max-len keeps 99%" "cut $cut"
# the d2l toy itself is untouched: short Tatoeba pairs, word tokens, --max-len 10
head -n 600 ../shared/data/fra-eng/fra.txt >"$TMP/fra.tsv"
expect_ok "--preset d2l on d2l's 600 pairs: no truncation stop" "$TFM" train-mt --tsv "$TMP/fra.tsv" --preset d2l \
    --max-steps 1 --threads 1 --out "$TMP/f.tfm"

expect_exit "unknown --preset" 2 "--preset: unknown 'nope' \(d2l, multi30k" "$TFM" train-mt "${RAW[@]}" --preset nope --out "$TMP/x.tfm"
expect_exit "--preset multi30k --arch rnn" 2 "--preset multi30k is a Transformer recipe" \
    "$TFM" train-mt "${RAW[@]}" --preset multi30k --arch rnn --out "$TMP/x.tfm"

# the recipe: --preset multi30k for its model, and its data folder
grep -q -- '--preset multi30k' recipes/multi30k.sh && ! grep -q -- '--d-model 256' recipes/multi30k.sh \
    && pass "recipes/multi30k.sh trains with --preset multi30k (no copy of its flags)" \
    || fail "recipe uses the preset" "$(grep -n 'train-mt\|preset\|d-model' recipes/multi30k.sh)"
bash recipes/multi30k-de-en.sh "$TMP/r" --data "$TMP/nowhere" >"$TMP/out" 2>"$TMP/err"; rc=$?
[ $rc -eq 66 ] && grep -q "$TMP/nowhere/multi30k/train.de: not readable (scripts/get-data.sh multi30k, or --data DIR)" "$TMP/err" \
    && pass "recipe --data DIR reads DIR/multi30k (missing: named, exit 66)" || fail "recipe --data" "exit $rc: $(cat "$TMP/err")"
